/*
 * s3_impl: what s3.c (open, list, stat, signing each request) shares with
 * s3_read.c (ranged reads); private to the S3 backend (everyone else uses
 * backend.h and s3.h).
 */
#ifndef SHARDFS_S3_IMPL_H
#define SHARDFS_S3_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "backends/http.h"
#include "backends/s3.h"

struct s3_backend {
	struct backend base;
	char *bucket;
	char *prefix; /* "" or ends in '/'; read-only after open */
	char *region;
	struct s3_endpoint ep;
	struct http_pool *http;
	struct s3_creds_provider *creds; /* NULL when anonymous */
	unsigned list_timeout_ms;	 /* backend_options' */
	uint64_t list_memory;
};

/* What s3_prepare() adds to, and signs for, one request. */
struct s3_req_ctx {
	struct s3_backend *sb;
	const char *method;
	const char *path;  /* canonical URI, as sent */
	const char *query; /* canonical query, "" if none */
	const char *range; /* "bytes=a-b" or NULL */
	const char *if_match;
};

/* What s3_obj_req() allocates for a request on one object. */
struct s3_obj_req {
	char *path, *url, *what;
};

/* The http_prepare_cb of every S3 request (arg: struct s3_req_ctx): Host,
 * If-Match and Range if set, and with credentials the x-amz-* headers and
 * the SigV4 Authorization for this attempt (fresh date, current
 * credentials). Returns 0 or a negative errno. */
int s3_prepare(void *arg, struct curl_slist **headers);

/* Logs a final non-2xx answer once, with S3's error code, and returns its
 * errno (an objstore_fail_cb). -ENOENT is not logged if quiet_enoent. */
int s3_fail(const char *what, const char *op, const struct http_response *resp,
	    int quiet_enoent);

/* Points sc and req at prefix + key (path, URL, and what: the
 * "s3://BUCKET/PREFIXKEY" of logs, the key escaped as the manifest
 * escapes it). Returns 0 or -ENOMEM; o is to be freed with
 * s3_obj_req_fini() either way. */
int s3_obj_req(struct s3_backend *sb, const char *key, size_t key_len,
	       struct s3_req_ctx *sc, struct http_request *req,
	       struct s3_obj_req *o);
void s3_obj_req_fini(struct s3_obj_req *o);

/* backend_ops.read_claim (s3_read.c); claim may be NULL, and
 * backend_read_unclaimed() (backend.h) is read(). The claim is a
 * single-part ETag's MD5 (s3_etag_claim()), checked on a reply that held
 * the whole object. */
int s3_read_claim(struct backend *be, const struct backend_read *r,
		  size_t *nread, struct backend_claim *claim);

#endif
