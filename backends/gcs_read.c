/*
 * gcs_read: ranged reads of the GCS backend (see gcs.c for the design),
 * pinned to the manifest's generation and checked before any byte is
 * used: x-goog-generation, status, Content-Range and length exactly as
 * for S3, and a reply holding the whole object against its x-goog-hash
 * crc32c. The emulator answers a range it does not serve with 200 and
 * the whole object; that is accepted when it holds the range. A ranged
 * reply's x-goog-hash is the whole object's too (real GCS and the
 * emulator): read_claim() hands it to the cache, which checks the object
 * once it holds all of it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/gcs.h"
#include "backends/gcs_impl.h"
#include "backends/objstore.h"
#include "util/crc32c.h"
#include "util/log.h"

struct gcs_read_ctx {
	struct objstore_range range;
	const char *gen; /* pinned generation, or NULL */
	size_t gen_len;
	/* From this attempt's headers: */
	char got_gen[GCS_GENERATION_MAX + 8];
	uint32_t hash_crc;
	bool has_hash;
	/* While the reply is the whole object and has a crc32c: */
	bool crc_on;
	uint32_t crc;
	bool whole_checked; /* this attempt's body matched the crc32c */
};

static void gcs_read_header(void *arg, const char *name, size_t name_len,
			    const char *value, size_t value_len)
{
	struct gcs_read_ctx *rc = arg;
	char v[256];

	if (name == NULL) { /* a new reply: forget the last one */
		rc->got_gen[0] = '\0';
		rc->has_hash = false;
		return;
	}
	if (value_len >= sizeof(v))
		value_len = sizeof(v) - 1;
	memcpy(v, value, value_len);
	v[value_len] = '\0';
	if (name_len == 17 && strncasecmp(name, "x-goog-generation", 17) == 0) {
		/* One too long to be a generation is kept as "?"; so are
		 * two that disagree (neither can be trusted to name the
		 * bytes). gcs_reply_check() rejects "?" as a bad reply. */
		if (value_len >= GCS_GENERATION_MAX ||
		    (rc->got_gen[0] != '\0' && strcmp(rc->got_gen, v) != 0))
			strcpy(rc->got_gen, "?");
		else
			memcpy(rc->got_gen, v, value_len + 1);
	} else if (name_len == 11 &&
		   strncasecmp(name, "x-goog-hash", 11) == 0) {
		uint32_t c;

		/* The header may come once per hash (crc32c, md5). One we
		 * cannot read gives no verdict, as no header would: the
		 * length and range checks still hold. */
		if (gcs_hash_crc32c(v, &c) == 0) {
			rc->hash_crc = c;
			rc->has_hash = true;
		}
	}
}

/* The checks on a reply's status line and headers, before any byte of it
 * is used: the pinned generation, then the range (objstore_range_reply).
 * Returns 0, -ESTALE (another generation: final) or -EAGAIN (a wrong
 * reply: retried). */
static int gcs_reply_check(struct gcs_read_ctx *rc, struct http_response *resp)
{
	if (rc->gen != NULL) {
		if (rc->got_gen[0] == '\0') {
			http_response_why(resp,
					  "no x-goog-generation in the reply");
			return -EAGAIN;
		}
		if (strcmp(rc->got_gen, "?") == 0) {
			http_response_why(resp,
					  "x-goog-generation too long or "
					  "given twice with different values");
			return -EAGAIN;
		}
		if (strlen(rc->got_gen) != rc->gen_len ||
		    memcmp(rc->got_gen, rc->gen, rc->gen_len) != 0)
			return -ESTALE;
	}
	return objstore_range_reply(&rc->range, resp);
}

static int gcs_read_body(void *arg, struct http_response *resp,
			 const char *data, size_t len)
{
	struct gcs_read_ctx *rc = arg;
	const struct objstore_range *r = &rc->range;
	int ret;

	/* A retry delivers the body again from its start. */
	if (resp->body_seen == 0) {
		ret = gcs_reply_check(rc, resp);
		if (ret < 0)
			return ret;
		/* The hash is the whole object's: it checks a reply that
		 * carries the whole object (a 200 not cut short, or a 206
		 * of all of it: one that starts at 0). */
		rc->crc_on = rc->has_hash && r->pos == 0 &&
			     r->total == r->offset + r->len;
		rc->crc = 0;
		rc->whole_checked = false;
	}
	if (rc->crc_on)
		rc->crc = crc32c_update(rc->crc, data, len);
	return objstore_range_body(&rc->range, resp, data, len);
}

/* The checks once a reply is complete (objstore_range_complete), and a
 * whole object against its crc32c. */
static int gcs_read_check(void *arg, struct http_response *resp)
{
	struct gcs_read_ctx *rc = arg;
	int r;

	if (resp->body_seen == 0) { /* no body: only the headers to check */
		r = gcs_reply_check(rc, resp);
		if (r < 0)
			return r;
		rc->crc_on = false;
		rc->whole_checked = false;
	}
	r = objstore_range_complete(&rc->range, resp);
	if (r < 0)
		return r;
	if (rc->crc_on && rc->range.pos == rc->range.total) {
		if (rc->crc != rc->hash_crc) {
			http_response_why(resp,
					  "the body's crc32c %08x is not "
					  "x-goog-hash's %08x",
					  rc->crc, rc->hash_crc);
			return -EAGAIN;
		}
		rc->whole_checked = true;
	}
	return 0;
}

/* After a 404 for a pinned generation: was the object replaced? One
 * metadata request tells: -ESTALE (now holds its generation) if it was, 0
 * if the 404 stands (no object, or the same generation), or the
 * metadata request's own failure. */
static int gcs_read_gone(struct gcs_backend *gb, const char *key,
			 size_t key_len, const char *what, const char *gen,
			 size_t gen_len, char *now, size_t now_cap)
{
	struct gcs_object o = { 0 };
	int rc = gcs_metadata(gb, key, key_len, what, 1, &o);

	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	snprintf(now, now_cap, "%s", o.generation);
	free(o.name);
	if (strlen(o.generation) == gen_len &&
	    memcmp(o.generation, gen, gen_len) == 0)
		return 0;
	return -ESTALE;
}

int gcs_read_claim(struct backend *be, const struct backend_read *r,
		   size_t *nread, struct backend_claim *claim)
{
	struct gcs_backend *gb = (struct gcs_backend *)be;
	struct http_response resp = { 0 };
	struct gcs_read_ctx ctx = { .gen = r->etag, .gen_len = r->etag_len };
	char now[GCS_GENERATION_MAX + 8] = "";
	char *path, *query = NULL, *url = NULL, *what = NULL, *gen = NULL;
	struct gcs_req_ctx rq = { .gb = gb };
	struct http_request req = { .method = "GET",
				    .prepare = gcs_prepare,
				    .prepare_arg = &rq,
				    .on_header = gcs_read_header,
				    .header_arg = &ctx,
				    .no_proxy = gb->no_proxy };
	int rc = -ENOMEM;

	if (objstore_range_start(&ctx.range, r, nread, claim, &req,
				 gcs_read_body, gcs_read_check, &ctx))
		return 0;
	rq.range = ctx.range.header;
	path = gcs_object_path(gb->bucket, gb->prefix, r->key, r->key_len);
	if (path == NULL)
		return -ENOMEM;
	if (r->etag != NULL) {
		gen = gcs_encode(r->etag, r->etag_len);
		if (gen == NULL ||
		    asprintf(&query, "alt=media&generation=%s", gen) < 0) {
			query = NULL;
			goto out;
		}
	} else if ((query = strdup("alt=media")) == NULL) {
		goto out;
	}
	url = objstore_url(gb->ep.base, path, query);
	what = gcs_what(gb, r->key);
	if (url == NULL || what == NULL)
		goto out;
	req.url = url;
	req.what = what;
	rc = http_perform(gb->http, &req, &resp);
	if (rc == 0 && resp.status == 404 && r->etag != NULL) {
		rc = gcs_read_gone(gb, r->key, r->key_len, what, r->etag,
				   r->etag_len, now, sizeof(now));
		if (rc == 0) /* the read's own 404 says why */
			rc = gcs_fail(what, "read", &resp, 0);
	}
	if (rc == -ESTALE)
		objstore_log_stale(what, "generation", r->etag, r->etag_len,
				   now[0]	    ? now
				   : ctx.got_gen[0] ? ctx.got_gen
						    : "unknown");
	if (rc == 0)
		rc = objstore_range_result(&ctx.range, what, &resp, gcs_fail,
					   nread);
	if (rc == 0 && claim != NULL && ctx.has_hash) {
		claim->kind = BACKEND_CLAIM_CRC32C;
		claim->crc32c = ctx.hash_crc;
		claim->source = "x-goog-hash";
		claim->checked = ctx.whole_checked;
	}
out:
	http_response_fini(&resp);
	free(what);
	free(url);
	free(query);
	free(gen);
	free(path);
	return rc;
}
