/*
 * gcs: the pure parts of the GCS backend (backend_gcs_ops, declared in
 * backend.h), exposed so check_gcs can test them without a server: source
 * URLs, the endpoint, object paths and the listing query, the JSON API's
 * list pages, object metadata and errors, the error map.
 *
 * The JSON parts live in gcs_json.c; URLs, the endpoint, paths, the query
 * and the error map in gcs_url.c; the requests in gcs.c and gcs_read.c.
 */
#ifndef SHARDFS_GCS_H
#define SHARDFS_GCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

/* Where the JSON API is when nothing else is configured. */
#define GCS_DEFAULT_ENDPOINT "https://storage.googleapis.com"

/* Objects a listing page asks for (the JSON API's maximum). */
#define GCS_LIST_PAGE 1000u

/* A generation is a decimal int64; this holds one and its NUL. */
#define GCS_GENERATION_MAX 24

/* Splits "gs://bucket[/prefix]" into malloc'd bucket and prefix (caller
 * frees both). A non-empty prefix always ends in '/', so "gs://b/data" and
 * "gs://b/data/" name the same directory. Bucket names are GCS's: 3 to 222
 * of a-z 0-9 - _ . starting and ending with a letter or digit. Returns 0,
 * -EINVAL (not gs://, bad bucket name) or -ENOMEM; nothing is set on
 * failure. */
int gcs_url_parse(const char *url, char **bucket, char **prefix);

/* Where requests go. */
struct gcs_endpoint {
	char *base;    /* scheme://authority, no trailing slash */
	bool emulator; /* STORAGE_EMULATOR_HOST is set: no credentials */
};

/* Resolves the endpoint: endpoint (from [source]) if set, else
 * emulator_host (the value of STORAGE_EMULATOR_HOST: "host:port" or an
 * http(s) URL), else GCS_DEFAULT_ENDPOINT. out->emulator is set whenever
 * emulator_host is non-empty, even when endpoint wins the URL: Google's
 * own clients send no credentials then either. Both must be
 * http(s)://host[:port] with at most a trailing '/' (no user info, path
 * or query). Returns 0 and fills *out (free with gcs_endpoint_fini),
 * -EINVAL, -ENOMEM. */
int gcs_endpoint_resolve(const char *endpoint, const char *emulator_host,
			 struct gcs_endpoint *out);

/* Frees what ep owns; safe to call twice. */
void gcs_endpoint_fini(struct gcs_endpoint *ep);

/* Whether a bearer token may be sent to url ("scheme://authority[/]"):
 * https, or http to a literal loopback host (127.0.0.0/8, ::1) or
 * "localhost", where nothing crosses a network. Anything else, user info
 * included, is false: a token over plain http is readable on the way. */
bool gcs_endpoint_token_ok(const char *url);

/* s[0..len) with every byte but A-Za-z0-9-._~ as %XX ('/' too, as the
 * JSON API wants object names in a path). Returns a malloc'd string or
 * NULL when out of memory. */
char *gcs_encode(const char *s, size_t len);

/* "/storage/v1/b/BUCKET/o/NAME" for the object prefix + key, both
 * encoded with gcs_encode(). Returns a malloc'd string or NULL. */
char *gcs_object_path(const char *bucket, const char *prefix, const char *key,
		      size_t key_len);

/* The listing query: fields (only what a manifest needs), maxResults,
 * pageToken if token is not NULL, prefix; values encoded. Returns a
 * malloc'd string or NULL when out of memory. */
char *gcs_list_query(const char *prefix, const char *token,
		     unsigned max_results);

/* One object from a list page or a metadata reply. */
struct gcs_object {
	char *name; /* malloc'd, NUL-terminated (may hold a NUL) */
	size_t name_len;
	uint64_t size;
	char generation[GCS_GENERATION_MAX]; /* decimal, as sent */
	int64_t mtime_ns;		     /* "updated"; 0 if absent */
	uint32_t crc32c;
	bool has_crc32c;
};

struct gcs_list_page {
	struct gcs_object *objects;
	size_t count;
	char *next_token; /* malloc'd, or NULL on the last page */
};

/* Parses one page of objects.list (JSON). Every item must have a name, a
 * size and a generation, both JSON strings of decimal digits that fit an
 * int64; "updated" (RFC 3339) and "crc32c" (base64 of 4 bytes) are
 * checked when present. Returns 0 and fills *page (free with
 * gcs_list_page_fini), -EBADMSG with why[] saying what was wrong, or
 * -ENOMEM. */
int gcs_list_parse(const char *body, size_t len, struct gcs_list_page *page,
		   char *why, size_t why_cap);

/* Frees what page owns; safe to call twice. */
void gcs_list_page_fini(struct gcs_list_page *page);

/* Parses an object's metadata (objects.get without alt=media) as one list
 * item. Returns 0, -EBADMSG (why[] says what), -ENOMEM. Free obj->name. */
int gcs_object_parse(const char *body, size_t len, struct gcs_object *obj,
		     char *why, size_t why_cap);

/* Pulls the reason (error.errors[0].reason, else error.status) and the
 * message (error.message) out of a JSON API error body into reason and
 * msg, truncated to fit, non-ASCII as '?'; a body that is plain text (not
 * JSON, not HTML) gives its first line as msg. Both "" when the body says
 * nothing usable. */
void gcs_error_parse(const char *body, size_t len, char *reason,
		     size_t reason_cap, char *msg, size_t msg_cap);

/* The one GCS error map: the reason first (notFound -> -ENOENT; forbidden,
 * authError, required, accessDenied, unauthorized... -> -EACCES;
 * conditionNotMet -> -ESTALE; requestedRangeNotSatisfiable -> -ERANGE),
 * then the status: 404 -ENOENT, 401/403 -EACCES, 412 -ESTALE (a pinned
 * generation that is no longer current: the backend contract's "changed
 * object"), 416 -ERANGE; everything else, 429 and 5xx once retries are
 * spent included, -EIO. reason may be NULL or "". */
int gcs_error_errno(long status, const char *reason);

/* A CRC-32C as GCS sends it: base64 of its 4 bytes, big-endian. Returns 0
 * or -EINVAL. */
int gcs_crc32c_decode(const char *b64, size_t len, uint32_t *out);

/* Finds crc32c=<base64> in an x-goog-hash header value ("crc32c=...,
 * md5=..."; the header may also come once per hash). Returns 0 and sets
 * *out, -ENOENT when there is none, -EINVAL when it is malformed. */
int gcs_hash_crc32c(const char *value, uint32_t *out);

#endif
