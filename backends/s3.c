/*
 * s3: Amazon S3 and S3-compatible stores (DESIGN §9).
 *
 * Requests are built here and signed with SigV4 (s3_sign.c) before every
 * attempt, so a retry carries a fresh date and the current credentials;
 * http.c runs them over a pool of reused connections with retries. Every
 * request carries x-amz-content-sha256 (the hash of the empty body: no
 * request of ours has one) and, for temporary credentials,
 * x-amz-security-token. Range and If-Match travel unsigned, as S3 allows.
 *
 * Listing is ListObjectsV2, 1,000 keys a page, following continuation
 * tokens, with encoding-type=url so keys that XML cannot carry survive;
 * keys are decoded only if the answer says it encoded them (not every
 * emulator does). Reads are ranged GETs with If-Match on the manifest's
 * ETag; because some servers ignore If-Match and some mishandle ranges, the
 * answer's own ETag and Content-Range are checked too, and no byte of a
 * different object version ever reaches the caller's buffer. An ETag
 * that is the object's MD5 (single-part, not SSE-KMS or SSE-C:
 * s3_etag_claim()) checks a reply holding the whole object, and is the
 * claim read_claim() hands to the cache for larger objects. S3's
 * x-amz-checksum-* headers are not asked for: S3 sends the object's
 * only for a GET without a Range (every read here has one); a ranged GET
 * gets none, or, for a range that is exactly one part of a multipart
 * upload, that part's, which would look like the object's.
 *
 * The reads are in s3_read.c, which shares s3_impl.h with this file.
 *
 * Failures are mapped to errno in s3_error_errno() and logged once, in
 * s3_fail(), with the key, the HTTP status and S3's error code; URLs are
 * never logged (they hold nothing secret today, but a presigned one would).
 */
#include "backends/s3.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backends/http.h"
#include "backends/objstore.h"
#include "backends/s3_creds.h"
#include "backends/s3_impl.h"
#include "backends/s3_sign.h"
#include "backends/s3_xml.h"
#include "util/log.h"
#include "util/str.h"

#define S3_AUTH_MAX 1024

/* Requests */

int s3_fail(const char *what, const char *op, const struct http_response *resp,
	    int quiet_enoent)
{
	char code[128], msg[256];

	s3_xml_error_parse(resp->body, resp->body_len, code, sizeof(code), msg,
			   sizeof(msg));
	return objstore_fail_log(what, op, resp, quiet_enoent, s3_error_errno,
				 code, msg);
}

int s3_authorization(const struct s3_endpoint *ep, const char *region,
		     const struct s3_creds *creds, const char *method,
		     const char *path, const char *query, const char *amz_date,
		     char *out, size_t out_cap)
{
	struct s3_sign_header h[4];
	size_t n = 0;

	h[n++] = (struct s3_sign_header){ "host", ep->host };
	h[n++] = (struct s3_sign_header){ "x-amz-content-sha256",
					  S3_EMPTY_SHA256 };
	h[n++] = (struct s3_sign_header){ "x-amz-date", amz_date };
	if (creds->session_token != NULL)
		h[n++] = (struct s3_sign_header){ "x-amz-security-token",
						  creds->session_token };
	{
		struct s3_sign_request r = {
			.method = method,
			.path = path,
			.query = query,
			.headers = h,
			.n_headers = n,
			.payload_hash = S3_EMPTY_SHA256,
			.region = region,
			.service = "s3",
			.amz_date = amz_date,
			.access_key = creds->access_key,
			.secret_key = creds->secret_key,
		};

		return s3_sign_v4(&r, out, out_cap);
	}
}

int s3_prepare(void *arg, struct curl_slist **headers)
{
	struct s3_req_ctx *sc = arg;
	struct s3_backend *sb = sc->sb;
	struct s3_creds *c;
	char date[17], auth[S3_AUTH_MAX];
	int rc;

	rc = objstore_header(headers, "Host: %s", sb->ep.host);
	if (rc == 0 && sc->if_match != NULL)
		rc = objstore_header(headers, "If-Match: %s", sc->if_match);
	if (rc == 0)
		rc = objstore_headers_common(headers, sc->range);
	if (rc < 0 || sb->creds == NULL)
		return rc;
	c = s3_creds_get(sb->creds);
	s3_amz_date(time(NULL), date);
	rc = s3_authorization(&sb->ep, sb->region, c, sc->method, sc->path,
			      sc->query, date, auth, sizeof(auth));
	if (rc == 0)
		rc = objstore_header(headers, "x-amz-content-sha256: %s",
				     S3_EMPTY_SHA256);
	if (rc == 0)
		rc = objstore_header(headers, "x-amz-date: %s", date);
	if (rc == 0 && c->session_token != NULL)
		rc = objstore_header(headers, "x-amz-security-token: %s",
				     c->session_token);
	if (rc == 0)
		rc = objstore_header(headers, "Authorization: %s", auth);
	explicit_bzero(auth, sizeof(auth));
	s3_creds_put(c);
	return rc;
}

/* list */

/* A listing of s3://BUCKET/full. */
struct s3_list_ctx {
	struct s3_backend *sb;
	struct s3_req_ctx sc;
	char *query; /* the current page's, signed as sc.query */
	const char *what, *full;
	backend_list_cb cb;
	void *arg;
};

static char *s3_list_url(void *arg, const char *token)
{
	struct s3_list_ctx *lc = arg;

	free(lc->query);
	lc->query = s3_list_query(lc->full, token);
	lc->sc.query = lc->query;
	if (lc->query == NULL)
		return NULL;
	return objstore_url(lc->sb->ep.base, lc->sc.path, lc->query);
}

static int s3_list_page(void *arg, const struct http_response *resp,
			struct objstore_list_guard *guard, char **next)
{
	struct s3_list_ctx *lc = arg;
	struct s3_xml_list_page page = { 0 };
	struct objstore_list_scope sc;
	size_t i;
	int rc;

	rc = s3_xml_list_parse(resp->body, resp->body_len, &page);
	if (rc < 0) {
		if (rc == -EBADMSG)
			log_msg(LOG_ERR,
				"%s: list: malformed ListObjectsV2 answer "
				"(page %u)",
				lc->what, guard->pages + 1);
		return rc == -ENOMEM ? rc : -EIO;
	}
	objstore_list_scope_init(&sc, guard, lc->what, lc->sb->prefix,
				 strlen(lc->sb->prefix), lc->cb, lc->arg);
	rc = objstore_list_page(
		guard, lc->what, page.truncated ? page.next_token : NULL,
		page.count, page.count ? page.objects[0].key : NULL,
		page.count ? page.objects[0].key_len : 0);
	for (i = 0; i < page.count && rc == 0; i++) {
		const struct s3_xml_object *o = &page.objects[i];

		rc = objstore_list_object(&sc, o->key, o->key_len, o->size,
					  o->etag, o->mtime_ns);
	}
	if (rc == 0 && page.truncated) {
		if (page.next_token == NULL || page.count == 0) {
			log_msg(LOG_ERR,
				"%s: list: truncated page %u without a "
				"continuation token",
				lc->what, guard->pages);
			rc = -EIO;
		} else {
			*next = page.next_token;
			page.next_token = NULL;
		}
	}
	s3_xml_list_page_fini(&page);
	return rc;
}

static int s3_list(struct backend *be, const char *prefix, backend_list_cb cb,
		   void *arg)
{
	struct s3_backend *sb = (struct s3_backend *)be;
	struct s3_list_ctx lc = { .sb = sb, .cb = cb, .arg = arg };
	struct objstore_lister l = {
		.http = sb->http,
		.req = { .method = "GET",
			 .prepare = s3_prepare,
			 .prepare_arg = &lc.sc,
			 .max_body = 64 * 1024 * 1024,
			 .retries = -1 },
		.fail = s3_fail,
		.guard = { .token_name = "continuation token",
			   .item_name = "key",
			   .restart = "the server repeats itself" },
		.page_url = s3_list_url,
		.page = s3_list_page,
		.arg = &lc,
	};
	char *full = NULL, *what = NULL;
	int rc;

	if (asprintf(&full, "%s%s", sb->prefix, prefix) < 0)
		return -ENOMEM;
	if (asprintf(&what, "s3://%s/%s", sb->bucket, full) < 0) {
		free(full);
		return -ENOMEM;
	}
	lc.sc = (struct s3_req_ctx){
		.sb = sb,
		.method = "GET",
		.path = sb->ep.path_prefix[0] ? sb->ep.path_prefix : "/",
	};
	lc.what = l.what = what;
	lc.full = full;
	backend_list_bound_start(&l.guard.bound, sb->list_timeout_ms,
				 sb->list_memory, what);
	rc = objstore_list_run(&l);
	free(lc.query);
	free(full);
	free(what);
	return rc;
}

/* stat */

/* What a request for one object owns: its path (signed as sent), URL and
 * name for logs. */
void s3_obj_req_fini(struct s3_obj_req *o)
{
	free(o->what);
	free(o->url);
	free(o->path);
}

int s3_obj_req(struct s3_backend *sb, const char *key, size_t key_len,
	       struct s3_req_ctx *sc, struct http_request *req,
	       struct s3_obj_req *o)
{
	char *esc;
	int n;

	o->path = s3_object_path(&sb->ep, sb->prefix, key, key_len);
	o->url = o->path ? objstore_url(sb->ep.base, o->path, "") : NULL;
	/* The key as the manifest escapes it: the name goes into logs. */
	esc = str_escape_key_dup(key, key_len);
	n = o->url && esc ? asprintf(&o->what, "s3://%s/%s%s", sb->bucket,
				     sb->prefix, esc)
			  : -1;
	free(esc);
	if (n < 0) {
		o->what = NULL;
		return -ENOMEM;
	}
	sc->path = o->path;
	req->url = o->url;
	req->what = o->what;
	return 0;
}

static int s3_stat(struct backend *be, const char *key, size_t key_len,
		   struct backend_stat *st)
{
	struct s3_backend *sb = (struct s3_backend *)be;
	struct http_response resp = { 0 };
	struct s3_req_ctx sc = { .sb = sb, .method = "HEAD", .query = "" };
	struct http_request req = { .method = "HEAD",
				    .prepare = s3_prepare,
				    .prepare_arg = &sc,
				    .retries = -1 };
	struct s3_obj_req o = { 0 };
	size_t elen;
	int rc;

	rc = s3_obj_req(sb, key, key_len, &sc, &req, &o);
	if (rc == 0)
		rc = http_perform(sb->http, &req, &resp);
	if (rc < 0)
		goto out;
	if (resp.status != 200) {
		rc = s3_fail(o.what, "stat", &resp, 1);
		goto out;
	}
	elen = strlen(resp.etag);
	if (elen >= sizeof(st->etag)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	st->size = resp.content_length >= 0 ? (uint64_t)resp.content_length : 0;
	st->mtime_ns = resp.mtime >= 0 ? resp.mtime * 1000000000 : 0;
	memcpy(st->etag, resp.etag, elen + 1);
	st->etag_len = elen;
	rc = 0;
out:
	http_response_fini(&resp);
	s3_obj_req_fini(&o);
	return rc;
}

/* open / close */

static int s3_handles(const char *url)
{
	return strncmp(url, "s3://", 5) == 0;
}

static void s3_close(struct backend *be)
{
	struct s3_backend *sb = (struct s3_backend *)be;

	if (sb == NULL)
		return;
	s3_creds_provider_free(sb->creds);
	http_pool_free(sb->http);
	s3_endpoint_fini(&sb->ep);
	free(sb->bucket);
	free(sb->prefix);
	free(sb->region);
	free(sb);
}

/* Says what is wrong with a source URL s3_url_parse() refused: the
 * bucket name and the rule it breaks, or the URL's form. */
static void s3_url_log_bad(const char *url)
{
	size_t blen = strncmp(url, "s3://", 5) == 0 ? strcspn(url + 5, "/") : 0;
	const char *rule = blen > 0 ? s3_bucket_rule(url + 5, blen) : NULL;

	if (rule == NULL)
		log_msg(LOG_ERR,
			"source url '%s': expected s3://bucket/prefix/", url);
	else
		log_msg(LOG_ERR,
			"source url '%s': bucket '%.*s' %s (S3 bucket names: "
			"3-63 of a-z 0-9 . -, starting and ending with a "
			"letter or digit, no '..', not an IP address)",
			url, (int)blen, url + 5, rule);
}

static int s3_open(const char *url, const struct backend_options *opts,
		   struct backend **out)
{
	struct http_pool_options ho = { 0 };
	struct s3_backend *sb;
	const char *region = opts ? opts->region : NULL;
	int rc;

	sb = calloc(1, sizeof(*sb));
	if (sb == NULL)
		return -ENOMEM;
	sb->base.ops = &backend_s3_ops;
	if (opts != NULL) {
		sb->list_timeout_ms = opts->list_timeout_ms;
		sb->list_memory = opts->list_memory;
	}
	rc = s3_url_parse(url, &sb->bucket, &sb->prefix);
	if (rc < 0) {
		if (rc == -EINVAL)
			s3_url_log_bad(url);
		goto err;
	}
	if (region == NULL || region[0] == '\0')
		region = getenv("AWS_REGION");
	if (region == NULL || region[0] == '\0')
		region = getenv("AWS_DEFAULT_REGION");
	if (region == NULL || region[0] == '\0')
		region = "us-east-1";
	sb->region = strdup(region);
	if (sb->region == NULL) {
		rc = -ENOMEM;
		goto err;
	}
	rc = s3_endpoint_resolve(
		opts ? opts->endpoint : NULL, sb->bucket, sb->region,
		opts ? opts->addressing : BACKEND_ADDRESSING_AUTO, &sb->ep);
	if (rc < 0) {
		if (rc == -EINVAL)
			log_msg(LOG_ERR,
				"s3://%s: bad endpoint (want http(s)://host[:"
				"port]) or a bucket name that cannot be "
				"virtual-hosted",
				sb->bucket);
		goto err;
	}
	rc = http_global_init();
	if (rc < 0)
		goto err;
	objstore_pool_options(opts, &ho);
	ho.ca_bundle = getenv("AWS_CA_BUNDLE");
	if (ho.ca_bundle != NULL && ho.ca_bundle[0] == '\0')
		ho.ca_bundle = NULL;
	rc = http_pool_new(&ho, &sb->http);
	if (rc < 0)
		goto err;
	if (opts == NULL || !opts->anonymous) {
		rc = s3_creds_provider_new(sb->http, sb->region, &sb->creds);
		if (rc < 0)
			goto err;
	}
	log_msg(LOG_DEBUG, "s3://%s/%s: %s, %s addressing, region %s",
		sb->bucket, sb->prefix, sb->ep.base,
		sb->ep.virtual_hosted ? "virtual-hosted" : "path", sb->region);
	*out = &sb->base;
	return 0;
err:
	s3_close(&sb->base);
	return rc;
}

const struct backend_ops backend_s3_ops = {
	.name = "s3",
	.handles = s3_handles,
	.open = s3_open,
	.list = s3_list,
	.stat = s3_stat,
	.read = backend_read_unclaimed,
	.read_claim = s3_read_claim,
	.close = s3_close,
};
