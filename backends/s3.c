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
 * Failures are mapped to errno in s3_error_errno() and logged once, in
 * s3_fail(), with the key, the HTTP status and S3's error code; URLs are
 * never logged (they hold nothing secret today, but a presigned one would).
 */
#include "backends/s3.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backends/http.h"
#include "backends/objstore.h"
#include "backends/s3_creds.h"
#include "backends/s3_sign.h"
#include "backends/s3_xml.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/str.h"

#define S3_AUTH_MAX 1024

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

/* Requests */

/* Logs a final non-2xx answer once, with S3's error code, and returns
 * its errno (an objstore_fail_cb). */
static int s3_fail(const char *what, const char *op,
		   const struct http_response *resp, int quiet_enoent)
{
	char code[128], msg[256];

	s3_xml_error_parse(resp->body, resp->body_len, code, sizeof(code), msg,
			   sizeof(msg));
	return objstore_fail_log(what, op, resp, quiet_enoent, s3_error_errno,
				 code, msg);
}

struct sign_ctx {
	struct s3_backend *sb;
	const char *method;
	const char *path;  /* canonical URI, as sent */
	const char *query; /* canonical query, "" if none */
	const char *range; /* "bytes=a-b" or NULL */
	const char *if_match;
};

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

/* Adds Host, the x-amz-* headers and Authorization for this attempt. */
static int sign_prepare(void *arg, struct curl_slist **headers)
{
	struct sign_ctx *sc = arg;
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
	struct sign_ctx sc;
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
			 .prepare = sign_prepare,
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
	lc.sc = (struct sign_ctx){
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
struct s3_obj_req {
	char *path, *url, *what;
};

static void s3_obj_req_fini(struct s3_obj_req *o)
{
	free(o->what);
	free(o->url);
	free(o->path);
}

/* Points sc and req at prefix + key. Returns 0 or -ENOMEM; o is to be
 * freed with s3_obj_req_fini() either way. */
static int s3_obj_req(struct s3_backend *sb, const char *key, size_t key_len,
		      struct sign_ctx *sc, struct http_request *req,
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
	struct sign_ctx sc = { .sb = sb, .method = "HEAD", .query = "" };
	struct http_request req = { .method = "HEAD",
				    .prepare = sign_prepare,
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

/* read */

/* Whole-object reads up to this size are checked against a single-part
 * ETag (the object's MD5): cheap next to the request, and it catches a
 * byte changed in transit, which nothing else here would. */
#define S3_MD5_MAX (UINT64_C(8) << 20)

struct read_ctx {
	struct objstore_range range;
	const char *etag; /* expected, or NULL */
	size_t etag_len;
	EVP_MD_CTX *md5;    /* while the reply is a whole object to check */
	bool whole_checked; /* this attempt's body matched the MD5 */
	/* From this attempt's headers (read_header()): */
	char sse[32]; /* x-amz-server-side-encryption, "" if none */
	bool sse_customer;
};

void s3_etag_claim(const char *etag, size_t etag_len, const char *sse,
		   bool sse_customer, struct backend_claim *out)
{
	memset(out, 0, sizeof(*out));
	/* SSE-KMS, DSSE-KMS and SSE-C objects have ETags that are not an
	 * MD5 of their bytes; so may any encryption not known here. */
	if (sse_customer || (sse != NULL && strcmp(sse, "AES256") != 0))
		return;
	if (etag == NULL || etag_len != 34 || etag[0] != '"' || etag[33] != '"')
		return;
	if (hex_decode(etag + 1, BACKEND_MD5_LEN, out->md5) < 0) {
		memset(out->md5, 0, sizeof(out->md5));
		return;
	}
	out->kind = BACKEND_CLAIM_MD5;
	out->source = "ETag";
}

/* The claim of this attempt's reply under etag (the pinned one, or the
 * reply's own). */
static void read_claim_of(const struct read_ctx *rc, const char *etag,
			  size_t etag_len, struct backend_claim *out)
{
	s3_etag_claim(etag, etag_len, rc->sse[0] ? rc->sse : NULL,
		      rc->sse_customer, out);
}

/* Keeps the headers that say whether the ETag is an MD5 (see
 * s3_etag_claim()). */
static void read_header(void *arg, const char *name, size_t name_len,
			const char *value, size_t value_len)
{
	struct read_ctx *rc = arg;
	static const char sse[] = "x-amz-server-side-encryption";
	static const char cust[] =
		"x-amz-server-side-encryption-customer-algorithm";

	if (name == NULL) { /* a new reply: forget the last one */
		rc->sse[0] = '\0';
		rc->sse_customer = false;
		return;
	}
	if (name_len == sizeof(sse) - 1 &&
	    strncasecmp(name, sse, name_len) == 0) {
		/* One too long for any known value is kept as one that
		 * is not AES256. */
		if (value_len >= sizeof(rc->sse))
			value_len = sizeof(rc->sse) - 1;
		memcpy(rc->sse, value, value_len);
		rc->sse[value_len] = '\0';
		if (value_len == 0)
			strcpy(rc->sse, "?");
	} else if (name_len == sizeof(cust) - 1 &&
		   strncasecmp(name, cust, name_len) == 0) {
		rc->sse_customer = true;
	}
}

/* The checks on a reply's status line and headers, before any byte of it
 * is used: the pinned version, then the range (objstore_range_reply).
 * Returns 0, -ESTALE (another version: final) or -EAGAIN (a wrong reply:
 * retried). */
static int read_reply_check(struct read_ctx *rc, struct http_response *resp)
{
	if (rc->etag != NULL && resp->etag[0] == '\0') {
		/* Without it the version cannot be told: a server that
		 * ignores If-Match could be sending any. */
		http_response_why(resp, "no ETag in the reply");
		return -EAGAIN;
	}
	if (rc->etag != NULL && (strlen(resp->etag) != rc->etag_len ||
				 memcmp(resp->etag, rc->etag, rc->etag_len)))
		return -ESTALE;
	return objstore_range_reply(&rc->range, resp);
}

/* Starts an MD5 of the reply when it is the whole object under a
 * single-part ETag that is its MD5 (s3_etag_claim()). */
static void read_md5_start(struct read_ctx *rc)
{
	const struct objstore_range *r = &rc->range;
	struct backend_claim claim;

	EVP_MD_CTX_free(rc->md5);
	rc->md5 = NULL;
	rc->whole_checked = false;
	if (r->offset != 0 || r->total != r->len || r->len > S3_MD5_MAX ||
	    rc->etag == NULL)
		return;
	read_claim_of(rc, rc->etag, rc->etag_len, &claim);
	if (claim.kind != BACKEND_CLAIM_MD5)
		return;
	rc->md5 = EVP_MD_CTX_new();
	if (rc->md5 != NULL &&
	    EVP_DigestInit_ex(rc->md5, EVP_md5(), NULL) != 1) {
		EVP_MD_CTX_free(rc->md5);
		rc->md5 = NULL;
	}
}

static int read_body(void *arg, struct http_response *resp, const char *data,
		     size_t len)
{
	struct read_ctx *rc = arg;
	int r;

	/* A retry delivers the body again from its start. */
	if (resp->body_seen == 0) {
		r = read_reply_check(rc, resp);
		if (r < 0)
			return r;
		read_md5_start(rc);
	}
	if (rc->md5 != NULL && EVP_DigestUpdate(rc->md5, data, len) != 1) {
		EVP_MD_CTX_free(rc->md5);
		rc->md5 = NULL;
	}
	return objstore_range_body(&rc->range, resp, data, len);
}

/* The checks once a reply is complete (objstore_range_complete), and a
 * whole object against its MD5. */
static int read_check(void *arg, struct http_response *resp)
{
	struct read_ctx *rc = arg;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	int r;

	if (resp->body_seen == 0) { /* no body: only the headers to check */
		r = read_reply_check(rc, resp);
		if (r < 0)
			return r;
	}
	r = objstore_range_complete(&rc->range, resp);
	if (r < 0 || rc->md5 == NULL)
		return r;
	r = EVP_DigestFinal_ex(rc->md5, md, &md_len);
	EVP_MD_CTX_free(rc->md5);
	rc->md5 = NULL;
	if (r != 1)
		return 0; /* no digest, no verdict */
	hex_encode(md, md_len, hex);
	if (strncasecmp(hex, rc->etag + 1, 32) != 0) {
		http_response_why(resp,
				  "the body's MD5 %s is not its ETag %.*s", hex,
				  (int)rc->etag_len, rc->etag);
		return -EAGAIN;
	}
	rc->whole_checked = true;
	return 0;
}

/* read() and read_claim() (claim may be NULL). */
static int s3_read_any(struct backend *be, const char *key, size_t key_len,
		       const char *etag, size_t etag_len, uint64_t offset,
		       size_t len, void *buf, size_t *nread,
		       struct backend_claim *claim)
{
	struct s3_backend *sb = (struct s3_backend *)be;
	struct http_response resp = { 0 };
	struct read_ctx ctx = { .etag = etag, .etag_len = etag_len };
	struct s3_obj_req o = { 0 };
	char *etag_z = NULL;
	struct sign_ctx sc = { .sb = sb, .method = "GET", .query = "" };
	struct http_request req = { .method = "GET",
				    .prepare = sign_prepare,
				    .prepare_arg = &sc,
				    .on_header = read_header,
				    .header_arg = &ctx };
	int rc = -ENOMEM;

	if (len == 0) {
		*nread = 0;
		if (claim != NULL)
			memset(claim, 0, sizeof(*claim));
		return 0;
	}
	objstore_range_init(&ctx.range, offset, len, buf, &req, read_body,
			    read_check, &ctx);
	sc.range = ctx.range.header;
	if (etag != NULL) {
		etag_z = strndup(etag, etag_len);
		if (etag_z == NULL)
			return -ENOMEM;
		sc.if_match = etag_z;
	}
	rc = s3_obj_req(sb, key, key_len, &sc, &req, &o);
	if (rc == 0)
		rc = http_perform(sb->http, &req, &resp);
	if (rc == -ESTALE)
		objstore_log_stale(o.what, "etag", etag, etag_len, resp.etag);
	if (rc == 0)
		rc = objstore_range_result(&ctx.range, o.what, &resp, s3_fail);
	if (rc == 0)
		*nread = len;
	if (rc == 0 && claim != NULL) {
		read_claim_of(&ctx, resp.etag, strlen(resp.etag), claim);
		claim->checked = ctx.whole_checked;
	}
	EVP_MD_CTX_free(ctx.md5);
	http_response_fini(&resp);
	s3_obj_req_fini(&o);
	free(etag_z);
	return rc;
}

static int s3_read(struct backend *be, const char *key, size_t key_len,
		   const char *etag, size_t etag_len, uint64_t offset,
		   size_t len, void *buf, size_t *nread)
{
	return s3_read_any(be, key, key_len, etag, etag_len, offset, len, buf,
			   nread, NULL);
}

static int s3_read_claim(struct backend *be, const char *key, size_t key_len,
			 const char *etag, size_t etag_len, uint64_t offset,
			 size_t len, void *buf, size_t *nread,
			 struct backend_claim *claim)
{
	return s3_read_any(be, key, key_len, etag, etag_len, offset, len, buf,
			   nread, claim);
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
	.read = s3_read,
	.read_claim = s3_read_claim,
	.close = s3_close,
};
