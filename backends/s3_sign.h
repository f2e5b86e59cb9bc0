/*
 * s3_sign: AWS Signature Version 4 and the URI encoding it depends on.
 *
 * Why not libcurl's CURLOPT_AWS_SIGV4: libcurl 7.88 signs the query string
 * exactly as given and leaves x-amz-content-sha256 and the session token
 * to the caller, so the parts a real S3 checks were ours to get right
 * anyway; and it reads the clock itself, so its signature cannot be
 * compared with an independent signer for a fixed date. Signing here (HMAC
 * from OpenSSL's libcrypto, already a dependency) makes the production
 * code path the tested one: check_s3 compares it with AWS's published
 * examples and with botocore for the same fixed date, and its behaviour no
 * longer changes with the libcurl version (8.x changed its canonical
 * query handling).
 *
 * Pure functions, no globals; safe from any thread.
 */
#ifndef SHARDFS_S3_SIGN_H
#define SHARDFS_S3_SIGN_H

#include <stddef.h>
#include <time.h>

/* Percent-encodes s[0..len) as SigV4 wants: every byte but A-Z a-z 0-9
 * - . _ ~ becomes %XX (uppercase hex); with keep_slash, '/' is kept (object
 * keys in paths). Returns a malloc'd NUL-terminated string (caller frees)
 * or NULL when out of memory. */
char *s3_uri_encode(const char *s, size_t len, int keep_slash);

/* One header to sign: name in lowercase, value trimmed. Borrowed. */
struct s3_sign_header {
	const char *name;
	const char *value;
};

struct s3_sign_request {
	const char *method; /* "GET", "HEAD", "POST" */
	const char *path;   /* canonical URI: encoded, as sent */
	const char *query;  /* canonical query string, "" if none:
				     sorted by name, fully encoded */
	const struct s3_sign_header *headers; /* every signed header, any
						 order; must hold host and
						 x-amz-date */
	size_t n_headers;
	const char *payload_hash; /* as sent in x-amz-content-sha256 */
	const char *region;
	const char *service;  /* "s3" */
	const char *amz_date; /* YYYYMMDDTHHMMSSZ, as in x-amz-date */
	const char *access_key;
	const char *secret_key;
};

/* Writes the Authorization header value ("AWS4-HMAC-SHA256
 * Credential=..., SignedHeaders=..., Signature=...") into out. Returns 0,
 * -ENAMETOOLONG if out_cap is too small, -EINVAL for a bad amz_date or
 * more than 16 headers, -ENOMEM. */
int s3_sign_v4(const struct s3_sign_request *req, char *out, size_t out_cap);

/* Formats t as an x-amz-date (YYYYMMDDTHHMMSSZ, UTC) into out[17]. */
void s3_amz_date(time_t t, char out[17]);

/* Lowercase hex SHA-256 of the empty string, the payload hash of a request
 * without a body. */
#define S3_EMPTY_SHA256                                                        \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

#endif
