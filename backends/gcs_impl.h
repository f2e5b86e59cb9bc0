/*
 * gcs_impl: what gcs.c shares with gcs_read.c; private to the GCS backend
 * (everyone else uses backend.h and gcs.h).
 */
#ifndef SHARDFS_GCS_IMPL_H
#define SHARDFS_GCS_IMPL_H

#include <stddef.h>

#include <stdbool.h>

#include "backends/gcs.h"
#include "backends/http.h"

struct gcs_backend {
	struct backend base;
	char *bucket;
	char *prefix;	   /* "" or ends in '/'; read-only after open */
	char *bucket_path; /* "/storage/v1/b/BUCKET/o" */
	struct gcs_endpoint ep;
	struct http_pool *http;
	struct gcs_creds_provider *creds; /* NULL: no Authorization */
	/* The endpoint is plain http to a loopback address: requests go
	 * straight there, never through an environment proxy (which would
	 * see a bearer token in clear, and cannot reach our loopback). */
	bool no_proxy;
	unsigned list_timeout_ms; /* backend_options' */
	uint64_t list_memory;
};

/* What gcs_prepare() adds to a request. */
struct gcs_req_ctx {
	struct gcs_backend *gb;
	const char *range; /* "bytes=a-b" for a media GET, or NULL */
};

/* "gs://BUCKET/PREFIXKEY" for logs, the key escaped as the manifest
 * escapes it (util/str.h); malloc'd or NULL. */
char *gcs_what(const struct gcs_backend *gb, const char *key);

/* The http_prepare_cb of every GCS request (arg: struct gcs_req_ctx):
 * Range and "Accept-Encoding: gzip" if range is set, and with
 * credentials "Authorization: Bearer" with the current token. */
int gcs_prepare(void *arg, struct curl_slist **headers);

/* Logs a final non-2xx answer once (per status and object) with what,
 * op, the status and the JSON error's reason and message; returns its
 * errno (gcs_error_errno). -ENOENT is not logged if quiet_enoent. */
int gcs_fail(const char *what, const char *op, const struct http_response *resp,
	     int quiet_enoent);

/* Gets the metadata of prefix + key into *o (free o->name). Returns 0 or
 * the mapped error, logged unless it is -ENOENT and quiet_enoent. */
int gcs_metadata(struct gcs_backend *gb, const char *key, size_t key_len,
		 const char *what, int quiet_enoent, struct gcs_object *o);

/* backend_ops.read_claim (gcs_read.c); claim may be NULL, and
 * backend_read_unclaimed() (backend.h) is read(). The claim is
 * x-goog-hash's crc32c, the whole object's on a ranged reply too. */
int gcs_read_claim(struct backend *be, const struct backend_read *r,
		   size_t *nread, struct backend_claim *claim);

#endif
