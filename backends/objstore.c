/*
 * objstore: see objstore.h. The ranged-read checks are the ones DESIGN
 * §9 gives for every object store: because some servers ignore the
 * version pin and some mishandle ranges, a reply's Content-Range and
 * lengths are checked before any byte is used, and a wrong reply is
 * retried (-EAGAIN), never passed on.
 */
#include "backends/objstore.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/backoff.h"
#include "util/fnv.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/thread.h"

int objstore_url_split(const char *url, const char *scheme,
		       int (*bucket_ok)(const char *b, size_t len),
		       char **bucket, char **prefix)
{
	size_t slen = strlen(scheme), blen, plen;
	const char *b, *slash;
	char *bk, *px;

	if (strncmp(url, scheme, slen) != 0)
		return -EINVAL;
	b = url + slen;
	slash = strchr(b, '/');
	blen = slash ? (size_t)(slash - b) : strlen(b);
	if (!bucket_ok(b, blen))
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

char *objstore_uri_encode(const char *s, size_t len, int keep_slash)
{
	char *out = malloc(len * 3 + 1), *o = out;
	size_t i;

	if (out == NULL)
		return NULL;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~' || (keep_slash && c == '/')) {
			*o++ = (char)c;
		} else {
			hex_percent(c, o);
			o += 3;
		}
	}
	*o = '\0';
	return out;
}

char *objstore_url(const char *base, const char *path, const char *query)
{
	char *url;

	if (asprintf(&url, "%s%s%s%s", base, path, query[0] ? "?" : "", query) <
	    0)
		return NULL;
	return url;
}

int objstore_header(struct curl_slist **list, const char *fmt, ...)
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

int objstore_headers_common(struct curl_slist **list, const char *range)
{
	int rc = 0;

	if (range != NULL)
		rc = objstore_header(list, "Range: %s", range);
	return rc == 0 ? objstore_header(list, "Accept:") : rc;
}

int objstore_error_errno(long status, const char *code,
			 const struct objstore_code *table, size_t n)
{
	size_t i;

	if (status >= 200 && status < 300)
		return 0;
	if (code != NULL && code[0] != '\0')
		for (i = 0; i < n; i++)
			if (strcmp(code, table[i].code) == 0)
				return table[i].err;
	return http_status_errno(status);
}

void objstore_wipe_free(char *s)
{
	if (s != NULL) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void objstore_pool_options(const struct backend_options *opts,
			   struct http_pool_options *ho)
{
	ho->connect_timeout_ms = opts ? opts->connect_timeout_ms : 0;
	ho->request_timeout_ms = opts ? opts->request_timeout_ms : 0;
	ho->deadline_ms = opts ? opts->read_timeout_ms : 0;
	ho->retries = opts && opts->retries >= 0 ? (unsigned)opts->retries
						 : BACKEND_RETRIES_DEFAULT;
}

int objstore_fail_log(const char *what, const char *op,
		      const struct http_response *resp, int quiet_enoent,
		      objstore_errno_cb map, const char *code, const char *msg)
{
	int err = map(resp->status, code);
	char limit_key[1300];

	if (err == -ENOENT && quiet_enoent)
		return err;
	snprintf(limit_key, sizeof(limit_key), "%ld %s", resp->status, what);
	if (log_limit(limit_key, NULL))
		return err;
	log_msg(LOG_ERR, "%s: %s: HTTP %ld%s%s%s%s (after %u %s)", what, op,
		resp->status, code[0] ? " " : "", code, msg[0] ? ": " : "", msg,
		resp->attempts, resp->attempts == 1 ? "try" : "tries");
	return err;
}

/* Credential refresh */

unsigned objstore_refresh_retry_s(unsigned failures)
{
	static const struct backoff_policy refresh = { .base_ms = 5000,
						       .cap_ms = 60000 };
	unsigned ms = backoff_delay_ms(&refresh, failures);

	return (ms + 500) / 1000;
}

void objstore_worker_init(struct objstore_worker *w, clockid_t clock)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, clock);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	w->stop = 0;
	w->have_thread = false;
}

int objstore_worker_start(struct objstore_worker *w, void *(*fn)(void *),
			  void *arg)
{
	int rc;

	rc = thread_start(&w->thread, fn, arg);
	if (rc < 0)
		return rc;
	w->have_thread = true;
	return 0;
}

void objstore_worker_fini(struct objstore_worker *w)
{
	if (w->have_thread) {
		pthread_mutex_lock(&w->lock);
		w->stop = 1;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
		w->have_thread = false;
	}
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
}

/* Listing */

/* Adds h; returns 1 if it was there already, 0 if added, -ENOMEM. */
static int objstore_seen_add(struct objstore_list_guard *s, uint64_t h)
{
	size_t i, k;

	h |= 1; /* never 0, which marks a free slot */
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
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

int objstore_list_page(struct objstore_list_guard *g, const char *what,
		       const char *token, size_t count, const char *first,
		       size_t first_len)
{
	int r;

	g->pages++;
	if (g->pages > OBJSTORE_LIST_PAGES_MAX) {
		log_msg(LOG_ERR, "%s: list: more than %u pages; giving up",
			what, OBJSTORE_LIST_PAGES_MAX);
		return -EIO;
	}
	g->empty_run = count == 0 ? g->empty_run + 1 : 0;
	if (g->empty_run > OBJSTORE_LIST_EMPTY_MAX) {
		log_msg(LOG_ERR,
			"%s: list: %u pages in a row without objects but with "
			"a %s; giving up",
			what, g->empty_run, g->token_name);
		return -EIO;
	}
	if (token != NULL) {
		r = objstore_seen_add(g, fnv_hash(token, strlen(token)));
		if (r == 1) {
			log_msg(LOG_ERR,
				"%s: list: page %u repeats an earlier %s; the "
				"server repeats itself",
				what, g->pages, g->token_name);
			return -EIO;
		}
		if (r < 0)
			return r;
	}
	if (count > 0) {
		/* Names and tokens hash into one set, names marked (some
		 * servers' tokens are names). */
		r = objstore_seen_add(g,
				      fnv_hash(first, first_len) ^ 0x6e616d65u);
		if (r == 1) {
			log_msg(LOG_ERR,
				"%s: list: page %u starts with the %s an "
				"earlier page started with; %s",
				what, g->pages, g->item_name, g->restart);
			return -EIO;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

void objstore_list_scope_init(struct objstore_list_scope *sc,
			      struct objstore_list_guard *guard,
			      const char *what, const char *must, size_t plen,
			      backend_list_cb cb, void *arg)
{
	sc->what = what;
	sc->page = guard->pages + 1;
	sc->bound = &guard->bound;
	sc->must = must;
	sc->must_len = strlen(must);
	sc->plen = plen;
	sc->cb = cb;
	sc->arg = arg;
}

int objstore_list_object(const struct objstore_list_scope *sc, const char *name,
			 size_t name_len, uint64_t size, const char *etag,
			 int64_t mtime_ns)
{
	struct backend_object obj = {
		.key = name + sc->plen,
		.key_len = name_len - sc->plen,
		.size = size,
		.etag = etag,
		.etag_len = strlen(etag),
		.mtime_ns = mtime_ns,
	};
	int rc;

	if (name_len < sc->must_len || memcmp(name, sc->must, sc->must_len)) {
		log_msg(LOG_ERR,
			"%s: list: page %u: an object outside the prefix in "
			"the answer",
			sc->what, sc->page);
		return -EIO;
	}
	if (name_len == sc->plen)
		return 0;
	rc = backend_list_bound_check(sc->bound, &obj);
	return rc < 0 ? rc : sc->cb(sc->arg, &obj);
}

int objstore_list_run(struct objstore_lister *l)
{
	struct http_response resp = { 0 };
	char *token = NULL, *next = NULL, *url;
	int rc;

	for (;;) {
		struct http_request req = l->req;

		rc = -ENOMEM;
		url = l->page_url(l->arg, token);
		if (url == NULL)
			break;
		req.url = url;
		req.what = l->what;
		rc = http_perform(l->http, &req, &resp);
		if (rc == 0 && resp.status != 200)
			rc = l->fail(l->what, "list", &resp, 0);
		if (rc == 0)
			rc = l->page(l->arg, &resp, &l->guard, &next);
		http_response_fini(&resp);
		free(url);
		free(token);
		token = next;
		next = NULL;
		if (rc != 0 || token == NULL)
			break;
		/* Every page is bounded by the request's deadline; the
		 * listing as a whole by this. */
		rc = backend_list_bound_check(&l->guard.bound, NULL);
		if (rc != 0)
			break;
	}
	log_msg(LOG_DEBUG, "%s: listed %u pages", l->what, l->guard.pages);
	free(token);
	free(l->guard.slot);
	l->guard.slot = NULL;
	l->guard.cap = l->guard.n = 0;
	return rc;
}

/* Ranged reads */

bool objstore_range_start(struct objstore_range *range,
			  const struct backend_read *r, size_t *nread,
			  struct backend_claim *claim, struct http_request *req,
			  http_body_cb on_body, http_check_cb check, void *arg)
{
	if (claim != NULL)
		memset(claim, 0, sizeof(*claim));
	if (r->len == 0) {
		*nread = 0;
		return true;
	}
	memset(range, 0, sizeof(*range));
	range->offset = r->offset;
	range->len = r->len;
	range->buf = r->buf;
	snprintf(range->header, sizeof(range->header),
		 "bytes=%" PRIu64 "-%" PRIu64, r->offset,
		 r->offset + r->len - 1);
	req->on_body = on_body;
	req->body_arg = arg;
	req->check = check;
	req->check_arg = arg;
	req->expect_bytes = r->len;
	req->retries = -1;
	return false;
}

int objstore_range_reply(struct objstore_range *r, struct http_response *resp)
{
	uint64_t end = r->offset + r->len;

	if (resp->status == 206) {
		if (resp->range_start < 0) {
			http_response_why(resp,
					  "206 without a valid Content-Range");
			return -EAGAIN;
		}
		if ((uint64_t)resp->range_start != r->offset ||
		    (uint64_t)resp->range_end != end - 1) {
			http_response_why(resp,
					  "Content-Range bytes %" PRId64
					  "-%" PRId64 " for a request of bytes "
					  "%" PRIu64 "-%" PRIu64,
					  resp->range_start, resp->range_end,
					  r->offset, end - 1);
			return -EAGAIN;
		}
		if (resp->content_length >= 0 &&
		    (uint64_t)resp->content_length != r->len) {
			http_response_why(resp,
					  "Content-Length %" PRId64
					  " for a range of %zu bytes",
					  resp->content_length, r->len);
			return -EAGAIN;
		}
		r->total = resp->range_total >= 0 ? (uint64_t)resp->range_total
						  : 0;
		r->pos = r->offset;
	} else if (resp->status == 200) {
		if (resp->content_length < 0 ||
		    (uint64_t)resp->content_length < end) {
			http_response_why(resp,
					  "200 of %" PRId64 " bytes for bytes "
					  "%" PRIu64 "-%" PRIu64,
					  resp->content_length, r->offset,
					  end - 1);
			return -EAGAIN;
		}
		r->total = (uint64_t)resp->content_length;
		r->pos = 0;
	} else {
		http_response_why(resp, "status %ld for a range", resp->status);
		return -EAGAIN;
	}
	r->filled = 0;
	return 0;
}

int objstore_range_body(struct objstore_range *r,
			const struct http_response *resp, const char *data,
			size_t len)
{
	uint64_t end = r->offset + r->len;

	if (r->pos + len > r->offset && r->pos < end) {
		uint64_t from = r->pos > r->offset ? r->pos : r->offset;
		uint64_t to = r->pos + len < end ? r->pos + len : end;

		memcpy(r->buf + (from - r->offset), data + (from - r->pos),
		       (size_t)(to - from));
		r->filled = (size_t)(to - r->offset);
	}
	r->pos += len;
	return r->pos >= end && resp->status == 200 && r->total > end ? 1 : 0;
}

int objstore_range_complete(const struct objstore_range *r,
			    struct http_response *resp)
{
	if (r->filled != r->len) {
		http_response_why(resp, "%zu of %zu bytes in the reply",
				  r->filled, r->len);
		return -EAGAIN;
	}
	if (resp->status == 206 && resp->body_seen != r->len) {
		http_response_why(resp,
				  "%" PRIu64 " body bytes for a range of %zu",
				  resp->body_seen, r->len);
		return -EAGAIN;
	}
	return 0;
}

int objstore_range_result(const struct objstore_range *r, const char *what,
			  const struct http_response *resp,
			  objstore_fail_cb fail, size_t *nread)
{
	if (resp->status == 416) {
		log_msg(LOG_ERR,
			"%s: bytes %" PRIu64 "-%" PRIu64 " are past the "
			"object's end: it is shorter than the manifest says",
			what, r->offset, r->offset + r->len - 1);
		return -EIO;
	}
	if (resp->status < 200 || resp->status >= 300)
		return fail(what, "read", resp, 0);
	/* http_perform() accepted the reply only through the check
	 * callback, or stopped it once the body callback had every byte. */
	if (r->filled != r->len) {
		log_msg(LOG_ERR, "%s: %zu of %zu bytes at %" PRIu64, what,
			r->filled, r->len, r->offset);
		return -EIO;
	}
	*nread = r->len;
	return 0;
}

void objstore_log_stale(const char *what, const char *version_name,
			const char *want, size_t want_len, const char *now)
{
	char key_stale[1300];

	/* Its own key: an earlier failure of another kind must not keep
	 * this one out of the log. */
	snprintf(key_stale, sizeof(key_stale), "stale %s", what);
	if (!log_limit(key_stale, NULL))
		log_msg(LOG_ERR,
			"%s: changed since the manifest was made (%s %.*s, "
			"now %s)",
			what, version_name, (int)want_len, want, now);
}
