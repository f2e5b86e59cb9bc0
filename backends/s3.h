/*
 * s3: the pure parts of the S3 backend (backend_s3_ops, declared in
 * backend.h), exposed so check_s3 can test them without a server: source
 * URLs, endpoint and addressing, the ListObjectsV2 query, object paths,
 * the error map (all in s3_url.c), the Authorization of one request
 * (s3.c) and the claim a single-part ETag makes (s3_read.c).
 */
#ifndef SHARDFS_S3_H
#define SHARDFS_S3_H

#include <stdbool.h>
#include <stddef.h>

#include "backends/backend.h"
#include "backends/s3_creds.h"

/* Splits "s3://bucket[/prefix]" into malloc'd bucket and prefix (caller
 * frees both). A non-empty prefix always ends in '/', so "s3://bkt/data"
 * and "s3://bkt/data/" name the same directory. Returns 0, -EINVAL (not
 * s3://, or a bucket name s3_bucket_rule() refuses) or -ENOMEM; nothing
 * is set on failure. */
int s3_url_parse(const char *url, char **bucket, char **prefix);

/* NULL if b[0..len) is a valid bucket name by AWS's rules (3 to 63 of
 * a-z 0-9 . -, starting and ending with a letter or digit, no "..", not
 * an IPv4 address; S3-compatible stores such as MinIO and s3rver take
 * the same), else the rule it breaks, as a static phrase that completes
 * "bucket 'NAME' ...". Names from before 2018 that us-east-1 allowed
 * (capitals, '_', up to 255) are refused. */
const char *s3_bucket_rule(const char *b, size_t len);

/* Where requests go, after endpoint and addressing are resolved. */
struct s3_endpoint {
	char *base;	   /* scheme://authority, no trailing slash */
	char *host;	   /* the Host header (authority) */
	char *path_prefix; /* "" (virtual-hosted) or "/bucket" (path) */
	int virtual_hosted;
};

/* Resolves where bucket's requests go. endpoint is the configured one,
 * or NULL: then $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, and finally
 * https://s3.REGION.amazonaws.com are used. Addressing auto means
 * virtual-hosted for AWS endpoints (host under amazonaws.com) when the
 * bucket name is a valid DNS label without dots, else path style.
 * Returns 0 and fills *out (free with s3_endpoint_fini), -EINVAL for an
 * endpoint that is not http(s)://host[:port] or a bucket that cannot be
 * virtual-hosted when that is forced, -ENOMEM. */
int s3_endpoint_resolve(const char *endpoint, const char *bucket,
			const char *region, enum backend_addressing addressing,
			struct s3_endpoint *out);

/* Frees what ep owns; safe to call twice. */
void s3_endpoint_fini(struct s3_endpoint *ep);

/* The canonical ListObjectsV2 query: parameters sorted by name, values
 * fully encoded (SigV4 signs the query exactly as sent). token may be
 * NULL. Returns a malloc'd string or NULL when out of memory. */
char *s3_list_query(const char *prefix, const char *token);

/* The canonical (and sent) path of an object: ep's path prefix, "/", then
 * prefix + key with every byte but A-Za-z0-9-._~ and '/' as %XX. Returns a
 * malloc'd string or NULL when out of memory. */
char *s3_object_path(const struct s3_endpoint *ep, const char *prefix,
		     const char *key, size_t key_len);

/* The Authorization header value for one request of ours: signed headers
 * host (ep->host), x-amz-content-sha256 (S3_EMPTY_SHA256), x-amz-date
 * (amz_date) and, with a session token, x-amz-security-token. The S3
 * backend signs every request through here with the current time; tests
 * pass a fixed date. Returns 0 or s3_sign_v4()'s errors. */
int s3_authorization(const struct s3_endpoint *ep, const char *region,
		     const struct s3_creds *creds, const char *method,
		     const char *path, const char *query, const char *amz_date,
		     char *out, size_t out_cap);

/* The one S3 error map: service error code first (NoSuchKey,
 * NoSuchBucket -> -ENOENT; AccessDenied, InvalidAccessKeyId,
 * SignatureDoesNotMatch, ExpiredToken... -> -EACCES; PreconditionFailed ->
 * -ESTALE; InvalidRange -> -ERANGE), then the HTTP status
 * (http_status_errno); everything else, including 5xx, 429 and SlowDown
 * once retries are spent, is -EIO. code may be NULL or "". */
int s3_error_errno(long status, const char *code);

/* What a reply's ETag vouches for about the whole object (backend.h,
 * struct backend_claim): the object's MD5 when the ETag is "<32 hex
 * digits>" (a multipart upload's is "<32 hex>-N", an MD5 of the parts'
 * MD5s), unless the object is encrypted so that its ETag is not an MD5
 * of its bytes. sse is the reply's x-amz-server-side-encryption (NULL if
 * none): only "AES256" (SSE-S3) keeps the MD5; "aws:kms",
 * "aws:kms:dsse" and anything else do not. sse_customer: the reply had
 * x-amz-server-side-encryption-customer-algorithm (SSE-C), which never
 * does. Fills *out (kind BACKEND_CLAIM_NONE for no claim; checked
 * false). */
void s3_etag_claim(const char *etag, size_t etag_len, const char *sse,
		   bool sse_customer, struct backend_claim *out);

#endif
