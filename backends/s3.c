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
 * different object version ever reaches the caller's buffer.
 *
 * Failures are mapped to errno in s3_error_errno() and logged once, in
 * s3_fail(), with the key, the HTTP status and S3's error code; URLs are
 * never logged (they hold nothing secret today, but a presigned one would).
 */
#include "backends/s3.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backends/http.h"
#include "backends/s3_creds.h"
#include "backends/s3_sign.h"
#include "backends/s3_xml.h"
#include "util/fnv.h"
#include "util/log.h"

#define S3_AUTH_MAX 1024

struct s3_backend {
	struct backend base;
	char *bucket;
	char *prefix; /* "" or ends in '/'; read-only after open */
	char *region;
	struct s3_endpoint ep;
	struct http_pool *http;
	struct s3_creds_provider *creds; /* NULL when anonymous */
};

/* Pure parts (s3.h) */

static int valid_bucket_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

int s3_url_parse(const char *url, char **bucket, char **prefix)
{
	const char *b, *slash;
	size_t blen, plen, i;
	char *bk, *px;

	if (strncmp(url, "s3://", 5) != 0)
		return -EINVAL;
	b = url + 5;
	slash = strchr(b, '/');
	blen = slash ? (size_t)(slash - b) : strlen(b);
	if (blen == 0 || blen > 255)
		return -EINVAL;
	for (i = 0; i < blen; i++)
		if (!valid_bucket_char(b[i]))
			return -EINVAL;
	bk = strndup(b, blen);
	if (bk == NULL)
		return -ENOMEM;
	plen = slash ? strlen(slash + 1) : 0;
	px = malloc(plen + 2);
	if (px == NULL) {
		free(bk);
		return -ENOMEM;
	}
	if (plen > 0)
		memcpy(px, slash + 1, plen);
	if (plen > 0 && px[plen - 1] != '/')
		px[plen++] = '/';
	px[plen] = '\0';
	*bucket = bk;
	*prefix = px;
	return 0;
}

void s3_endpoint_fini(struct s3_endpoint *ep)
{
	free(ep->base);
	free(ep->host);
	free(ep->path_prefix);
	memset(ep, 0, sizeof(*ep));
}

static int dns_bucket(const char *b)
{
	size_t i, n = strlen(b);

	if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') ||
		      (b[i] >= '0' && b[i] <= '9') || b[i] == '-'))
			return 0;
	return 1;
}

static int aws_host(const char *host, size_t len)
{
	static const char *const suffixes[] = { ".amazonaws.com",
						".amazonaws.com.cn" };
	size_t i, n;

	for (i = 0; i < 2; i++) {
		n = strlen(suffixes[i]);
		if (len > n && strncasecmp(host + len - n, suffixes[i], n) == 0)
			return 1;
	}
	return 0;
}

int s3_endpoint_resolve(const char *endpoint, const char *bucket,
			const char *region, enum backend_addressing addressing,
			struct s3_endpoint *out)
{
	struct s3_endpoint ep = { 0 };
	const char *scheme_end, *auth, *auth_end, *host_end;
	char *deflt = NULL, *enc = NULL;
	size_t alen;
	int rc = -ENOMEM, is_aws;

	if (endpoint == NULL || endpoint[0] == '\0')
		endpoint = getenv("AWS_ENDPOINT_URL_S3");
	if (endpoint == NULL || endpoint[0] == '\0')
		endpoint = getenv("AWS_ENDPOINT_URL");
	if (endpoint == NULL || endpoint[0] == '\0') {
		if (asprintf(&deflt, "https://s3.%s.amazonaws.com", region) < 0)
			return -ENOMEM;
		endpoint = deflt;
	}
	scheme_end = strstr(endpoint, "://");
	if (scheme_end == NULL || !((scheme_end - endpoint == 4 &&
				     strncasecmp(endpoint, "http", 4) == 0) ||
				    (scheme_end - endpoint == 5 &&
				     strncasecmp(endpoint, "https", 5) == 0))) {
		rc = -EINVAL;
		goto out;
	}
	auth = scheme_end + 3;
	auth_end = auth + strcspn(auth, "/?#");
	/* Only a bare "/" may follow the authority. */
	if (auth_end == auth ||
	    (auth_end[0] != '\0' && strcmp(auth_end, "/"))) {
		rc = -EINVAL;
		goto out;
	}
	alen = (size_t)(auth_end - auth);
	if (memchr(auth, '@', alen) != NULL) {
		rc = -EINVAL; /* credentials never go in a URL */
		goto out;
	}
	host_end = auth[0] == '[' ? memchr(auth, ']', alen)
				  : memchr(auth, ':', alen);
	is_aws = aws_host(auth, host_end ? (size_t)(host_end - auth) : alen);
	if (addressing == BACKEND_ADDRESSING_AUTO)
		ep.virtual_hosted = is_aws && dns_bucket(bucket);
	else
		ep.virtual_hosted = addressing == BACKEND_ADDRESSING_VIRTUAL;
	if (ep.virtual_hosted && !dns_bucket(bucket)) {
		rc = -EINVAL;
		goto out;
	}
	if (ep.virtual_hosted) {
		if (asprintf(&ep.host, "%s.%.*s", bucket, (int)alen, auth) < 0)
			ep.host = NULL;
		ep.path_prefix = strdup("");
	} else {
		ep.host = strndup(auth, alen);
		enc = s3_uri_encode(bucket, strlen(bucket), 0);
		if (enc != NULL && asprintf(&ep.path_prefix, "/%s", enc) < 0)
			ep.path_prefix = NULL;
	}
	if (ep.host != NULL &&
	    asprintf(&ep.base, "%.*s://%s", (int)(scheme_end - endpoint),
		     endpoint, ep.host) < 0)
		ep.base = NULL;
	if (ep.host == NULL || ep.path_prefix == NULL || ep.base == NULL)
		goto out;
	*out = ep;
	memset(&ep, 0, sizeof(ep));
	rc = 0;
out:
	s3_endpoint_fini(&ep);
	free(enc);
	free(deflt);
	return rc;
}

char *s3_list_query(const char *prefix, const char *token)
{
	char *p = s3_uri_encode(prefix, strlen(prefix), 0);
	char *t = token ? s3_uri_encode(token, strlen(token), 0) : NULL;
	char *q = NULL;

	if (p != NULL && (token == NULL || t != NULL)) {
		/* Sorted by name: continuation-token, encoding-type,
		 * list-type, max-keys, prefix. */
		if (asprintf(&q,
			     "%s%s%sencoding-type=url&list-type=2&max-keys=1000"
			     "&prefix=%s",
			     t ? "continuation-token=" : "", t ? t : "",
			     t ? "&" : "", p) < 0)
			q = NULL;
	}
	free(p);
	free(t);
	return q;
}

int s3_error_errno(long status, const char *code)
{
	static const struct {
		const char *code;
		int err;
	} codes[] = {
		{ "NoSuchKey", -ENOENT },
		{ "NoSuchBucket", -ENOENT },
		{ "AccessDenied", -EACCES },
		{ "AllAccessDisabled", -EACCES },
		{ "InvalidAccessKeyId", -EACCES },
		{ "SignatureDoesNotMatch", -EACCES },
		{ "ExpiredToken", -EACCES },
		{ "InvalidToken", -EACCES },
		{ "AccountProblem", -EACCES },
		{ "PreconditionFailed", -ESTALE },
		{ "InvalidRange", -ERANGE },
		{ "SlowDown", -EIO },
		{ "InternalError", -EIO },
		{ "ServiceUnavailable", -EIO },
		{ "RequestTimeout", -EIO },
	};
	size_t i;

	if (status >= 200 && status < 300)
		return 0;
	if (code != NULL && code[0] != '\0')
		for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
			if (strcmp(code, codes[i].code) == 0)
				return codes[i].err;
	return http_status_errno(status);
}

/* Requests */

/* Logs a final non-2xx answer once and returns its errno. */
static int s3_fail(struct s3_backend *sb, const char *op, const char *key,
		   const struct http_response *resp, int quiet_enoent)
{
	char code[128], msg[256], what[1200], limit_key[1240];
	int err;

	s3_xml_error_parse(resp->body, resp->body_len, code, sizeof(code), msg,
			   sizeof(msg));
	err = s3_error_errno(resp->status, code);
	if (err == -ENOENT && quiet_enoent)
		return err;
	snprintf(what, sizeof(what), "s3://%s/%s", sb->bucket, key);
	snprintf(limit_key, sizeof(limit_key), "%ld %s", resp->status, what);
	if (log_limit(limit_key, NULL))
		return err;
	log_msg(LOG_ERR, "%s: %s: HTTP %ld%s%s%s%s (after %u %s)", what, op,
		resp->status, code[0] ? " " : "", code, msg[0] ? ": " : "", msg,
		resp->attempts, resp->attempts == 1 ? "try" : "tries");
	return err;
}

struct sign_ctx {
	struct s3_backend *sb;
	const char *method;
	const char *path;  /* canonical URI, as sent */
	const char *query; /* canonical query, "" if none */
	const char *range; /* "bytes=a-b" or NULL */
	const char *if_match;
};

static int append(struct curl_slist **list, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int append(struct curl_slist **list, const char *fmt, ...)
{
	struct curl_slist *n;
	va_list ap;
	char *line;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -ENOMEM;
	n = curl_slist_append(*list, line);
	explicit_bzero(line, strlen(line));
	free(line);
	if (n == NULL)
		return -ENOMEM;
	*list = n;
	return 0;
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

/* Adds Host, the x-amz-* headers and Authorization for this attempt. */
static int sign_prepare(void *arg, struct curl_slist **headers)
{
	struct sign_ctx *sc = arg;
	struct s3_backend *sb = sc->sb;
	struct s3_creds *c;
	char date[17], auth[S3_AUTH_MAX];
	int rc;

	rc = append(headers, "Host: %s", sb->ep.host);
	if (rc == 0 && sc->range != NULL)
		rc = append(headers, "Range: %s", sc->range);
	if (rc == 0 && sc->if_match != NULL)
		rc = append(headers, "If-Match: %s", sc->if_match);
	/* curl's default "Accept: *" is noise S3 does not need. */
	if (rc == 0)
		rc = append(headers, "Accept:");
	if (rc < 0 || sb->creds == NULL)
		return rc;
	c = s3_creds_get(sb->creds);
	s3_amz_date(time(NULL), date);
	rc = s3_authorization(&sb->ep, sb->region, c, sc->method, sc->path,
			      sc->query, date, auth, sizeof(auth));
	if (rc == 0)
		rc = append(headers, "x-amz-content-sha256: %s",
			    S3_EMPTY_SHA256);
	if (rc == 0)
		rc = append(headers, "x-amz-date: %s", date);
	if (rc == 0 && c->session_token != NULL)
		rc = append(headers, "x-amz-security-token: %s",
			    c->session_token);
	if (rc == 0)
		rc = append(headers, "Authorization: %s", auth);
	explicit_bzero(auth, sizeof(auth));
	s3_creds_put(c);
	return rc;
}

char *s3_object_path(const struct s3_endpoint *ep, const char *prefix,
		     const char *key, size_t key_len)
{
	size_t plen = strlen(prefix);
	char *full = malloc(plen + key_len + 1), *enc, *path = NULL;

	if (full == NULL)
		return NULL;
	memcpy(full, prefix, plen);
	memcpy(full + plen, key, key_len);
	full[plen + key_len] = '\0';
	enc = s3_uri_encode(full, plen + key_len, 1);
	free(full);
	if (enc != NULL && asprintf(&path, "%s/%s", ep->path_prefix, enc) < 0)
		path = NULL;
	free(enc);
	return path;
}

static char *make_url(struct s3_backend *sb, const char *path,
		      const char *query)
{
	char *url;

	if (asprintf(&url, "%s%s%s%s", sb->ep.base, path, query[0] ? "?" : "",
		     query) < 0)
		return NULL;
	return url;
}

/* list */

/* A listing must end: a continuation token seen before, or a page that
 * starts with the first key of an earlier page, is a server going round
 * in circles, and no real listing needs more than this many pages (a
 * billion keys; pin a manifest long before that). */
#define S3_LIST_PAGES_MAX 1000000u

/* A set of 64-bit hashes (open addressing, 0 marks a free slot). */
struct s3_seen {
	uint64_t *slot;
	size_t cap, n;
};

/* Adds h; returns 1 if it was there already, 0 if added, -ENOMEM. */
static int s3_seen_add(struct s3_seen *s, uint64_t h)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64, k;
		uint64_t *slot = calloc(cap, sizeof(*slot));

		if (slot == NULL)
			return -ENOMEM;
		for (k = 0; k < s->cap; k++) {
			if (s->slot[k] == 0)
				continue;
			for (i = s->slot[k] & (cap - 1); slot[i] != 0;
			     i = (i + 1) & (cap - 1))
				;
			slot[i] = s->slot[k];
		}
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	for (i = h & (s->cap - 1); s->slot[i] != 0; i = (i + 1) & (s->cap - 1))
		if (s->slot[i] == h)
			return 1;
	s->slot[i] = h;
	s->n++;
	return 0;
}

/* Checks that page number pages (1-based) of a listing moves on: its
 * first key and its continuation token are new. Returns 0 or -EIO
 * (logged), -ENOMEM. */
static int s3_list_progress(struct s3_seen *seen, const char *what,
			    unsigned pages, const struct s3_xml_list_page *page)
{
	int r;

	if (pages > S3_LIST_PAGES_MAX) {
		log_msg(LOG_ERR, "%s: list: more than %u pages; giving up",
			what, S3_LIST_PAGES_MAX);
		return -EIO;
	}
	if (page->truncated && page->next_token != NULL) {
		r = s3_seen_add(seen, fnv_hash(page->next_token,
					       strlen(page->next_token)));
		if (r == 1) {
			log_msg(LOG_ERR,
				"%s: list: page %u repeats an earlier "
				"continuation token; the server repeats "
				"itself",
				what, pages);
			return -EIO;
		}
		if (r < 0)
			return r;
	}
	if (page->count > 0) {
		/* Keys and tokens hash into one set: a clash between a key
		 * and a token is as unlikely as any other 64-bit clash. */
		r = s3_seen_add(seen, fnv_hash(page->objects[0].key,
					       page->objects[0].key_len) ^
					      0x6b6579u);
		if (r == 1) {
			log_msg(LOG_ERR,
				"%s: list: page %u starts with the key an "
				"earlier page started with; the server "
				"repeats itself",
				what, pages);
			return -EIO;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int s3_list(struct backend *be, const char *prefix, backend_list_cb cb,
		   void *arg)
{
	struct s3_seen seen = { 0 };
	struct s3_backend *sb = (struct s3_backend *)be;
	size_t plen = strlen(sb->prefix), i;
	struct s3_xml_list_page page = { 0 };
	struct http_response resp = { 0 };
	char *full = NULL, *token = NULL, *query = NULL, *url = NULL, *what;
	const char *path = sb->ep.path_prefix[0] ? sb->ep.path_prefix : "/";
	unsigned pages = 0;
	int rc = -ENOMEM;

	if (asprintf(&full, "%s%s", sb->prefix, prefix) < 0)
		return -ENOMEM;
	if (asprintf(&what, "s3://%s/%s", sb->bucket, full) < 0) {
		free(full);
		return -ENOMEM;
	}
	for (;;) {
		struct sign_ctx sc = { .sb = sb,
				       .method = "GET",
				       .path = path };
		struct http_request req = { .method = "GET",
					    .what = what,
					    .prepare = sign_prepare,
					    .prepare_arg = &sc,
					    .max_body = 64 * 1024 * 1024,
					    .retries = -1 };

		rc = -ENOMEM; /* a page listed before set rc to 0 */
		query = s3_list_query(full, token);
		if (query == NULL)
			break;
		url = make_url(sb, path, query);
		if (url == NULL)
			break;
		sc.query = query;
		req.url = url;
		rc = http_perform(sb->http, &req, &resp);
		if (rc < 0)
			break;
		if (resp.status != 200) {
			rc = s3_fail(sb, "list", full, &resp, 0);
			break;
		}
		rc = s3_xml_list_parse(resp.body, resp.body_len, &page);
		if (rc < 0) {
			if (rc == -EBADMSG)
				log_msg(LOG_ERR,
					"%s: list: malformed ListObjectsV2 "
					"answer (page %u)",
					what, pages + 1);
			rc = rc == -ENOMEM ? rc : -EIO;
			break;
		}
		pages++;
		rc = s3_list_progress(&seen, what, pages, &page);
		for (i = 0; i < page.count && rc == 0; i++) {
			struct s3_xml_object *o = &page.objects[i];
			struct backend_object obj;

			if (o->key_len < plen ||
			    memcmp(o->key, sb->prefix, plen) != 0) {
				log_msg(LOG_ERR,
					"%s: list: key outside the "
					"prefix in the answer",
					what);
				rc = -EIO;
				break;
			}
			if (o->key_len == plen)
				continue; /* the prefix's own marker */
			obj.key = o->key + plen;
			obj.key_len = o->key_len - plen;
			obj.size = o->size;
			obj.etag = o->etag;
			obj.etag_len = strlen(o->etag);
			obj.mtime_ns = o->mtime_ns;
			rc = cb(arg, &obj);
		}
		free(token);
		token = NULL;
		if (rc == 0 && page.truncated) {
			if (page.next_token == NULL || page.count == 0) {
				log_msg(LOG_ERR,
					"%s: list: truncated page %u without "
					"a continuation token",
					what, pages);
				rc = -EIO;
			} else {
				token = page.next_token;
				page.next_token = NULL;
			}
		}
		s3_xml_list_page_fini(&page);
		http_response_fini(&resp);
		free(query);
		free(url);
		query = url = NULL;
		if (rc != 0 || token == NULL)
			break;
	}
	log_msg(LOG_DEBUG, "%s: listed %u pages", what, pages);
	free(seen.slot);
	s3_xml_list_page_fini(&page);
	http_response_fini(&resp);
	free(query);
	free(url);
	free(token);
	free(full);
	free(what);
	return rc;
}

/* stat */

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
	char *path, *url = NULL, *what = NULL;
	size_t elen;
	int rc = -ENOMEM;

	path = s3_object_path(&sb->ep, sb->prefix, key, key_len);
	if (path == NULL)
		return -ENOMEM;
	url = make_url(sb, path, "");
	if (url == NULL ||
	    asprintf(&what, "s3://%s/%s%s", sb->bucket, sb->prefix, key) < 0) {
		what = NULL;
		goto out;
	}
	sc.path = path;
	req.url = url;
	req.what = what;
	rc = http_perform(sb->http, &req, &resp);
	if (rc < 0)
		goto out;
	if (resp.status != 200) {
		rc = s3_fail(sb, "stat", what + 6 + strlen(sb->bucket), &resp,
			     1);
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
	free(what);
	free(url);
	free(path);
	return rc;
}

/* read */

/* Whole-object reads up to this size are checked against a single-part
 * ETag (the object's MD5): cheap next to the request, and it catches a
 * byte changed in transit, which nothing else here would. */
#define S3_MD5_MAX (UINT64_C(8) << 20)

struct read_ctx {
	const char *etag; /* expected, or NULL */
	size_t etag_len;
	uint64_t offset;
	size_t len;
	char *buf;
	size_t filled;	 /* contiguous bytes from offset */
	uint64_t pos;	 /* object position of the next body byte */
	EVP_MD_CTX *md5; /* while the reply is a whole object to check */
	int stale;
};

static int etag_differs(const struct read_ctx *rc, const char *got)
{
	return rc->etag != NULL && got[0] != '\0' &&
	       (strlen(got) != rc->etag_len ||
		memcmp(got, rc->etag, rc->etag_len) != 0);
}

/* Is etag a single-part S3 ETag, "<32 hex digits>", the object's MD5? */
static bool etag_is_md5(const char *etag, size_t len)
{
	size_t i;

	if (etag == NULL || len != 34 || etag[0] != '"' || etag[33] != '"')
		return false;
	for (i = 1; i < 33; i++)
		if (!isxdigit((unsigned char)etag[i]))
			return false;
	return true;
}

/* The checks on a reply's status line and headers, before any byte of it
 * is used: the pinned version, and exactly the range asked for (a 206
 * naming it, or a 200 holding the whole object past its end). Returns 0,
 * -ESTALE (another version: final) or -EAGAIN (a wrong reply: retried). */
static int read_reply_check(struct read_ctx *rc, struct http_response *resp)
{
	uint64_t end = rc->offset + rc->len;

	if (rc->etag != NULL && resp->etag[0] == '\0') {
		/* Without it the version cannot be told: a server that
		 * ignores If-Match could be sending any. */
		http_response_why(resp, "no ETag in the reply");
		return -EAGAIN;
	}
	if (etag_differs(rc, resp->etag)) {
		rc->stale = 1;
		return -ESTALE;
	}
	if (resp->status == 206) {
		if (resp->range_start < 0) {
			http_response_why(resp,
					  "206 without a valid Content-Range");
			return -EAGAIN;
		}
		if ((uint64_t)resp->range_start != rc->offset ||
		    (uint64_t)resp->range_end != end - 1) {
			http_response_why(resp,
					  "Content-Range bytes %" PRId64
					  "-%" PRId64 " for a request of bytes "
					  "%" PRIu64 "-%" PRIu64,
					  resp->range_start, resp->range_end,
					  rc->offset, end - 1);
			return -EAGAIN;
		}
		if (resp->content_length >= 0 &&
		    (uint64_t)resp->content_length != rc->len) {
			http_response_why(resp,
					  "Content-Length %" PRId64
					  " for a range of %zu bytes",
					  resp->content_length, rc->len);
			return -EAGAIN;
		}
		return 0;
	}
	if (resp->status == 200) {
		if (resp->content_length < 0 ||
		    (uint64_t)resp->content_length < end) {
			http_response_why(resp,
					  "200 of %" PRId64 " bytes for bytes "
					  "%" PRIu64 "-%" PRIu64,
					  resp->content_length, rc->offset,
					  end - 1);
			return -EAGAIN;
		}
		return 0;
	}
	http_response_why(resp, "status %ld for a range", resp->status);
	return -EAGAIN;
}

/* Starts an MD5 of the reply when it is the whole object under a
 * single-part ETag. */
static void read_md5_start(struct read_ctx *rc,
			   const struct http_response *resp)
{
	uint64_t total = resp->status == 206 ? (uint64_t)resp->range_total
					     : (uint64_t)resp->content_length;

	EVP_MD_CTX_free(rc->md5);
	rc->md5 = NULL;
	if (rc->offset != 0 || total != rc->len || rc->len > S3_MD5_MAX ||
	    (resp->status == 206 && resp->range_total < 0) ||
	    !etag_is_md5(rc->etag, rc->etag_len))
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
	uint64_t end = rc->offset + rc->len;
	int r;

	/* A retry delivers the body again from its start. */
	if (resp->body_seen == 0) {
		r = read_reply_check(rc, resp);
		if (r < 0)
			return r;
		rc->pos = resp->status == 206 ? rc->offset : 0;
		rc->filled = 0;
		read_md5_start(rc, resp);
	}
	if (rc->pos + len > rc->offset && rc->pos < end) {
		uint64_t from = rc->pos > rc->offset ? rc->pos : rc->offset;
		uint64_t to = rc->pos + len < end ? rc->pos + len : end;

		memcpy(rc->buf + (from - rc->offset), data + (from - rc->pos),
		       (size_t)(to - from));
		rc->filled = (size_t)(to - rc->offset);
	}
	if (rc->md5 != NULL && EVP_DigestUpdate(rc->md5, data, len) != 1) {
		EVP_MD_CTX_free(rc->md5);
		rc->md5 = NULL;
	}
	rc->pos += len;
	/* Stopping a transfer closes its connection: stop early only when
	 * a 200 goes on past the range; an answer to the range, or the
	 * whole object asked for, ends by itself. */
	return rc->pos >= end && resp->status == 200 &&
			       (uint64_t)resp->content_length > end
		       ? 1
		       : 0;
}

/* The checks once a reply is complete: every byte asked for arrived, no
 * more than the framing said, and a whole object matches its MD5. */
static int read_check(void *arg, struct http_response *resp)
{
	struct read_ctx *rc = arg;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0, i;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	int r;

	if (resp->body_seen == 0) { /* no body: only the headers to check */
		r = read_reply_check(rc, resp);
		if (r < 0)
			return r;
		rc->filled = 0;
	}
	if (rc->filled != rc->len) {
		http_response_why(resp, "%zu of %zu bytes in the reply",
				  rc->filled, rc->len);
		return -EAGAIN;
	}
	if (resp->status == 206 && resp->body_seen != rc->len) {
		http_response_why(resp,
				  "%" PRIu64 " body bytes for a range of %zu",
				  resp->body_seen, rc->len);
		return -EAGAIN;
	}
	if (rc->md5 == NULL)
		return 0;
	r = EVP_DigestFinal_ex(rc->md5, md, &md_len);
	EVP_MD_CTX_free(rc->md5);
	rc->md5 = NULL;
	if (r != 1)
		return 0; /* no digest, no verdict */
	for (i = 0; i < md_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (strncasecmp(hex, rc->etag + 1, 32) != 0) {
		http_response_why(resp,
				  "the body's MD5 %s is not its ETag %.*s", hex,
				  (int)rc->etag_len, rc->etag);
		return -EAGAIN;
	}
	return 0;
}

static int s3_read(struct backend *be, const char *key, size_t key_len,
		   const char *etag, size_t etag_len, uint64_t offset,
		   size_t len, void *buf, size_t *nread)
{
	struct s3_backend *sb = (struct s3_backend *)be;
	struct http_response resp = { 0 };
	struct read_ctx ctx = { .etag = etag,
				.etag_len = etag_len,
				.offset = offset,
				.len = len,
				.buf = buf };
	char range[64], *etag_z = NULL, *path, *url = NULL, *what = NULL;
	struct sign_ctx sc = {
		.sb = sb, .method = "GET", .query = "", .range = range
	};
	struct http_request req = { .method = "GET",
				    .prepare = sign_prepare,
				    .prepare_arg = &sc,
				    .on_body = read_body,
				    .body_arg = &ctx,
				    .check = read_check,
				    .check_arg = &ctx,
				    .expect_bytes = len,
				    .retries = -1,
				    .hold = true,
				    .range_offset = offset,
				    .range_len = len };
	int rc = -ENOMEM;

	if (len == 0) {
		*nread = 0;
		return 0;
	}
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, offset,
		 offset + len - 1);
	path = s3_object_path(&sb->ep, sb->prefix, key, key_len);
	if (path == NULL)
		return -ENOMEM;
	if (etag != NULL) {
		etag_z = strndup(etag, etag_len);
		if (etag_z == NULL)
			goto out;
		sc.if_match = etag_z;
	}
	url = make_url(sb, path, "");
	if (url == NULL ||
	    asprintf(&what, "s3://%s/%s%s", sb->bucket, sb->prefix, key) < 0) {
		what = NULL;
		goto out;
	}
	sc.path = path;
	req.url = url;
	req.what = what;
	rc = http_perform(sb->http, &req, &resp);
	if (rc == -ESTALE) {
		char key_stale[1300];

		/* Its own key: an earlier failure of another kind must not
		 * keep this one out of the log. */
		snprintf(key_stale, sizeof(key_stale), "stale %s", what);
		if (!log_limit(key_stale, NULL))
			log_msg(LOG_ERR,
				"%s: changed since the manifest was made "
				"(etag %.*s, now %s)",
				what, (int)etag_len, etag, resp.etag);
		goto out;
	}
	if (rc < 0)
		goto out;
	if (resp.status == 416) {
		log_msg(LOG_ERR,
			"%s: bytes %" PRIu64 "-%" PRIu64 " are past the "
			"object's end: it is shorter than the manifest says",
			what, offset, offset + len - 1);
		rc = -EIO;
		goto out;
	}
	if (resp.status < 200 || resp.status >= 300) {
		rc = s3_fail(sb, "read", what + 6 + strlen(sb->bucket), &resp,
			     0);
		goto out;
	}
	/* http_perform() accepted the reply only through read_check(), or
	 * stopped it once read_body() had every byte. */
	if (ctx.filled != len) {
		log_msg(LOG_ERR, "%s: %zu of %zu bytes at %" PRIu64, what,
			ctx.filled, len, offset);
		rc = -EIO;
		goto out;
	}
	*nread = len;
out:
	EVP_MD_CTX_free(ctx.md5);
	http_response_fini(&resp);
	free(what);
	free(url);
	free(etag_z);
	free(path);
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
	rc = s3_url_parse(url, &sb->bucket, &sb->prefix);
	if (rc < 0) {
		if (rc == -EINVAL)
			log_msg(LOG_ERR,
				"source url '%s': expected s3://bucket/prefix/",
				url);
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
	ho.connect_timeout_ms = opts ? opts->connect_timeout_ms : 0;
	ho.request_timeout_ms = opts ? opts->request_timeout_ms : 0;
	ho.deadline_ms = opts ? opts->read_timeout_ms : 0;
	ho.retries = opts && opts->retries >= 0 ? (unsigned)opts->retries : 5;
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
	.close = s3_close,
};
