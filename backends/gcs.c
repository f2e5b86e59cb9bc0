/*
 * gcs: Google Cloud Storage through its JSON API (DESIGN §9).
 *
 * Listing is objects.list, 1,000 objects a page, following nextPageToken,
 * asking only for the fields a manifest needs; a manifest's etag for GCS
 * is the object's generation. Reads are objects.get with alt=media, the
 * manifest's generation in the query and a Range header. A server that
 * serves the pinned generation serves the manifest's bytes; one that has
 * no such generation any more answers 404, and then one metadata request
 * tells a replaced object (-ESTALE) from a deleted one (-ENOENT). Because
 * an emulator or a proxy may ignore the pin, the reply's own
 * x-goog-generation is checked too (a reply without it is retried), and
 * no byte of another generation reaches the caller's buffer. Status,
 * Content-Range and length are checked exactly as for S3; a reply that is
 * the whole object is checked against its x-goog-hash crc32c. Media GETs
 * send "Accept-Encoding: gzip" so that an object stored gzip-encoded is
 * served as stored rather than transcoded (see gcs_prepare).
 *
 * A changed object is -ESTALE, as the backend contract says and as S3
 * does: the cache passes it on and the FUSE layer answers EIO, so readers
 * see EIO, never new bytes; it is logged once per key.
 *
 * Credentials: none with anonymous = true or STORAGE_EMULATOR_HOST set;
 * otherwise every attempt carries "Authorization: Bearer" with the current
 * token of gcs_creds (refreshed in the background), and the endpoint must
 * be https or a literal loopback address (gcs_endpoint_token_ok). Neither the header nor
 * URLs are logged. Failures are logged once, in gcs_fail(), with the key,
 * the HTTP status and the JSON error's reason.
 *
 * The ranged reads are in gcs_read.c; the pure parts in gcs_url.c and
 * gcs_json.c.
 */
#include "backends/gcs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/gcs_creds.h"
#include "backends/gcs_impl.h"
#include "backends/http.h"
#include "backends/objstore.h"
#include "util/log.h"
#include "util/str.h"

/* Requests */

char *gcs_what(const struct gcs_backend *gb, const char *key)
{
	/* The key as the manifest escapes it: the name goes into logs. */
	char *what, *esc = str_escape_key_dup(key, strlen(key));
	int n = esc ? asprintf(&what, "gs://%s/%s%s", gb->bucket, gb->prefix,
			       esc)
		    : -1;

	free(esc);
	return n < 0 ? NULL : what;
}

/* Logs a final non-2xx answer once, with the JSON error's reason, and
 * returns its errno. */
int gcs_fail(const char *what, const char *op, const struct http_response *resp,
	     int quiet_enoent)
{
	char reason[128], msg[256];

	gcs_error_parse(resp->body, resp->body_len, reason, sizeof(reason), msg,
			sizeof(msg));
	return objstore_fail_log(what, op, resp, quiet_enoent, gcs_error_errno,
				 reason, msg);
}

/* Adds Range and, with credentials, the current token; run before every
 * attempt, so a retry after a refresh carries the new token. */
int gcs_prepare(void *arg, struct curl_slist **headers)
{
	struct gcs_req_ctx *c = arg;
	struct gcs_token *t;
	int rc;

	/* Media GETs ask for gzip: an object stored with Content-Encoding:
	 * gzip is then served as stored (its listed size, Range honoured,
	 * x-goog-hash matching) instead of decompressed whole without a
	 * length. The raw header, not CURLOPT_ACCEPT_ENCODING: curl must
	 * hand over the stored bytes, not decode them. */
	rc = objstore_headers_common(headers, c->range);
	if (rc == 0 && c->range != NULL)
		rc = objstore_header(headers, "Accept-Encoding: gzip");
	if (rc < 0 || c->gb->creds == NULL)
		return rc;
	t = gcs_creds_get(c->gb->creds);
	if (t->access_token == NULL || t->access_token[0] == '\0')
		rc = -EACCES;
	else
		rc = objstore_header(headers, "Authorization: Bearer %s",
				     t->access_token);
	gcs_token_put(t);
	return rc;
}

/* list */

/* A listing must end and list each object once (objstore_list_page).
 * Names are not required to come in order: GCS lists them sorted, but
 * the emulator sorts by UTF-16 code units, not bytes, and order does not
 * matter to the manifest, which sorts them and rejects a name listed
 * twice (manifest_finish). */

/* A listing of gs://BUCKET/full. */
struct gcs_list_ctx {
	struct gcs_backend *gb;
	const char *what, *full;
	backend_list_cb cb;
	void *arg;
};

static char *gcs_list_url(void *arg, const char *token)
{
	struct gcs_list_ctx *lc = arg;
	char *query = gcs_list_query(lc->full, token, GCS_LIST_PAGE), *url;

	if (query == NULL)
		return NULL;
	url = objstore_url(lc->gb->ep.base, lc->gb->bucket_path, query);
	free(query);
	return url;
}

static int gcs_list_page(void *arg, const struct http_response *resp,
			 struct objstore_list_guard *guard, char **next)
{
	struct gcs_list_ctx *lc = arg;
	struct gcs_list_page page = { 0 };
	struct objstore_list_scope sc;
	char why[160];
	size_t i;
	int rc;

	rc = gcs_list_parse(resp->body, resp->body_len, &page, why,
			    sizeof(why));
	if (rc < 0) {
		if (rc == -EBADMSG)
			log_msg(LOG_ERR,
				"%s: list: malformed objects.list answer "
				"(page %u): %s",
				lc->what, guard->pages + 1, why);
		return rc == -ENOMEM ? rc : -EIO;
	}
	objstore_list_scope_init(&sc, guard, lc->what, lc->full,
				 strlen(lc->gb->prefix), lc->cb, lc->arg);
	rc = objstore_list_page(guard, lc->what, page.next_token, page.count,
				page.count ? page.objects[0].name : NULL,
				page.count ? page.objects[0].name_len : 0);
	/* The prefix's own folder placeholder is skipped; other names
	 * ending in '/' (placeholders the console makes) go on: the
	 * manifest counts them as skipped, as for S3. */
	for (i = 0; i < page.count && rc == 0; i++) {
		const struct gcs_object *o = &page.objects[i];

		rc = objstore_list_object(&sc, o->name, o->name_len, o->size,
					  o->generation, o->mtime_ns);
	}
	if (rc == 0) {
		*next = page.next_token;
		page.next_token = NULL;
	}
	gcs_list_page_fini(&page);
	return rc;
}

static int gcs_list(struct backend *be, const char *prefix, backend_list_cb cb,
		    void *arg)
{
	struct gcs_backend *gb = (struct gcs_backend *)be;
	struct gcs_req_ctx ctx = { .gb = gb };
	struct gcs_list_ctx lc = { .gb = gb, .cb = cb, .arg = arg };
	struct objstore_lister l = {
		.http = gb->http,
		.req = { .method = "GET",
			 .prepare = gcs_prepare,
			 .prepare_arg = &ctx,
			 .max_body = 64 * 1024 * 1024,
			 .retries = -1,
			 .no_proxy = gb->no_proxy },
		.fail = gcs_fail,
		.guard = { .token_name = "page token",
			   .item_name = "name",
			   .restart = "the server restarted or repeated the "
				      "listing" },
		.page_url = gcs_list_url,
		.page = gcs_list_page,
		.arg = &lc,
	};
	char *full = NULL, *what = NULL;
	int rc;

	if (asprintf(&full, "%s%s", gb->prefix, prefix) < 0)
		return -ENOMEM;
	if (asprintf(&what, "gs://%s/%s", gb->bucket, full) < 0) {
		free(full);
		return -ENOMEM;
	}
	lc.what = l.what = what;
	lc.full = full;
	backend_list_bound_start(&l.guard.bound, gb->list_timeout_ms,
				 gb->list_memory, what);
	rc = objstore_list_run(&l);
	free(full);
	free(what);
	return rc;
}

/* stat */

/* Gets an object's metadata into *o (free o->name). Returns 0, or the
 * mapped error, logged unless it is -ENOENT and quiet_enoent. */
int gcs_metadata(struct gcs_backend *gb, const char *key, size_t key_len,
		 const char *what, int quiet_enoent, struct gcs_object *o)
{
	struct gcs_req_ctx ctx = { .gb = gb };
	struct http_response resp = { 0 };
	struct http_request req = { .method = "GET",
				    .what = what,
				    .prepare = gcs_prepare,
				    .prepare_arg = &ctx,
				    .retries = -1,
				    .no_proxy = gb->no_proxy };
	char *path, *url = NULL, why[160];
	size_t plen = strlen(gb->prefix);
	int rc = -ENOMEM;

	path = gcs_object_path(gb->bucket, gb->prefix, key, key_len);
	if (path == NULL)
		return -ENOMEM;
	/* Only what stat needs: fields=name,size,generation,updated,crc32c */
	url = objstore_url(
		gb->ep.base, path,
		"fields=name%2Csize%2Cgeneration%2Cupdated%2Ccrc32c");
	if (url == NULL)
		goto out;
	req.url = url;
	rc = http_perform(gb->http, &req, &resp);
	if (rc < 0)
		goto out;
	if (resp.status != 200) {
		rc = gcs_fail(what, "stat", &resp, quiet_enoent);
		goto out;
	}
	rc = gcs_object_parse(resp.body, resp.body_len, o, why, sizeof(why));
	if (rc == -EBADMSG) {
		log_msg(LOG_ERR, "%s: stat: malformed object metadata: %s",
			what, why);
		rc = -EIO;
	} else if (rc == 0 && (o->name_len != plen + key_len ||
			       memcmp(o->name, gb->prefix, plen) != 0 ||
			       memcmp(o->name + plen, key, key_len) != 0)) {
		log_msg(LOG_ERR, "%s: stat: the answer names another object",
			what);
		free(o->name);
		o->name = NULL;
		rc = -EIO;
	}
out:
	http_response_fini(&resp);
	free(url);
	free(path);
	return rc;
}

static int gcs_stat(struct backend *be, const char *key, size_t key_len,
		    struct backend_stat *st)
{
	struct gcs_backend *gb = (struct gcs_backend *)be;
	struct gcs_object o = { 0 };
	char *what = gcs_what(gb, key);
	int rc;

	if (what == NULL)
		return -ENOMEM;
	rc = gcs_metadata(gb, key, key_len, what, 1, &o);
	free(what);
	if (rc < 0)
		return rc;
	free(o.name);
	st->size = o.size;
	st->mtime_ns = o.mtime_ns;
	st->etag_len = strlen(o.generation);
	memcpy(st->etag, o.generation, st->etag_len + 1);
	return 0;
}

/* open / close */

static int gcs_handles(const char *url)
{
	return strncmp(url, "gs://", 5) == 0;
}

static void gcs_close(struct backend *be)
{
	struct gcs_backend *gb = (struct gcs_backend *)be;

	if (gb == NULL)
		return;
	gcs_creds_provider_free(gb->creds);
	http_pool_free(gb->http);
	gcs_endpoint_fini(&gb->ep);
	free(gb->bucket_path);
	free(gb->bucket);
	free(gb->prefix);
	free(gb);
}

static int gcs_open(const char *url, const struct backend_options *opts,
		    struct backend **out)
{
	struct http_pool_options ho = { 0 };
	struct gcs_backend *gb;
	char *enc;
	int rc;

	gb = calloc(1, sizeof(*gb));
	if (gb == NULL)
		return -ENOMEM;
	gb->base.ops = &backend_gcs_ops;
	if (opts != NULL) {
		gb->list_timeout_ms = opts->list_timeout_ms;
		gb->list_memory = opts->list_memory;
	}
	rc = gcs_url_parse(url, &gb->bucket, &gb->prefix);
	if (rc < 0) {
		if (rc == -EINVAL)
			log_msg(LOG_ERR,
				"source url '%s': expected gs://bucket/prefix/ "
				"(bucket: 3-222 of a-z 0-9 - _ .)",
				url);
		goto err;
	}
	rc = gcs_endpoint_resolve(opts ? opts->endpoint : NULL,
				  getenv("STORAGE_EMULATOR_HOST"), &gb->ep);
	if (rc < 0) {
		if (rc == -EINVAL)
			log_msg(LOG_ERR,
				"gs://%s: bad endpoint or "
				"STORAGE_EMULATOR_HOST "
				"(want http(s)://host[:port] or host:port)",
				gb->bucket);
		goto err;
	}
	enc = gcs_encode(gb->bucket, strlen(gb->bucket));
	if (enc == NULL ||
	    asprintf(&gb->bucket_path, "/storage/v1/b/%s/o", enc) < 0) {
		gb->bucket_path = NULL;
		free(enc);
		rc = -ENOMEM;
		goto err;
	}
	free(enc);
	/* gcs_endpoint_token_ok() passes plain http only to loopback. */
	gb->no_proxy = strncasecmp(gb->ep.base, "http://", 7) == 0 &&
		       gcs_endpoint_token_ok(gb->ep.base);
	rc = http_global_init();
	if (rc < 0)
		goto err;
	objstore_pool_options(opts, &ho);
	rc = http_pool_new(&ho, &gb->http);
	if (rc < 0)
		goto err;
	if ((opts == NULL || !opts->anonymous) && !gb->ep.emulator) {
		/* Checked before any request, the credential chain's
		 * included: a bearer token over plain http is readable by
		 * anyone on the way. */
		if (!gcs_endpoint_token_ok(gb->ep.base)) {
			log_msg(LOG_ERR,
				"gs://%s: [source] endpoint %s is plain http "
				"to a host that is not loopback: credentials "
				"would travel in clear text; use https:// or "
				"anonymous = true",
				gb->bucket, gb->ep.base);
			rc = -EINVAL;
			goto err;
		}
		rc = gcs_creds_provider_new(gb->http, &gb->creds);
		if (rc < 0)
			goto err;
	}
	/* Said at info level: a variable left over from testing would
	 * otherwise silently strip the credentials from real requests. */
	if (gb->ep.emulator)
		log_msg(LOG_INFO,
			"gs://%s/%s: STORAGE_EMULATOR_HOST is set: requests to "
			"%s carry no credentials",
			gb->bucket, gb->prefix, gb->ep.base);
	else
		log_msg(LOG_DEBUG, "gs://%s/%s: %s%s", gb->bucket, gb->prefix,
			gb->ep.base, gb->creds ? "" : ", anonymous");
	*out = &gb->base;
	return 0;
err:
	gcs_close(&gb->base);
	return rc;
}

const struct backend_ops backend_gcs_ops = {
	.name = "gcs",
	.handles = gcs_handles,
	.open = gcs_open,
	.list = gcs_list,
	.stat = gcs_stat,
	.read = backend_read_unclaimed,
	.read_claim = gcs_read_claim,
	.close = gcs_close,
};
