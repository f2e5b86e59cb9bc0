/*
 * http: see http.h. One retry loop over the handles of http_pool.c, and
 * the parsing of what comes back (status, headers, body) into a
 * struct http_response.
 */
#include "backends/http.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "backends/http_impl.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/str.h"

#define HTTP_ERROR_BODY_MAX (64 * 1024) /* enough for any S3 <Error> */
#define HTTP_DEFAULT_MAX_BODY (16 * 1024 * 1024)

/* An object store's 503 SlowDown and 429 ask the client to slow down for
 * seconds, not milliseconds: the first retry waits ~100 ms (a dropped
 * connection), later ones grow to 5 s, so the default 30 s deadline holds
 * about eight tries. */
static const struct backoff_policy HTTP_BACKOFF = { .base_ms = 100,
						    .cap_ms = 5000 };

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_rc;

static void global_init_once(void)
{
	global_rc =
		curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

int http_global_init(void)
{
	pthread_once(&global_once, global_init_once);
	if (global_rc < 0)
		log_msg(LOG_ERR, "cannot initialise libcurl");
	return global_rc;
}

const char *http_version(void)
{
	return LIBCURL_VERSION;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int http_status_retryable(long status)
{
	return status >= 500 || status == 429 || status == 408;
}

int http_status_errno(long status)
{
	if (status >= 200 && status < 300)
		return 0;
	switch (status) {
	case 404:
		return -ENOENT;
	case 401:
	case 403:
		return -EACCES;
	case 412:
		return -ESTALE;
	case 416:
		return -ERANGE;
	default:
		return -EIO;
	}
}

void http_response_why(struct http_response *resp, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(resp->why, sizeof(resp->why), fmt, ap);
	va_end(ap);
}

void http_response_fini(struct http_response *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->body_len = resp->body_cap = 0;
}

static void response_reset(struct http_response *resp, size_t max_body)
{
	http_response_fini(resp);
	memset(resp, 0, sizeof(*resp));
	resp->range_start = resp->range_end = resp->range_total = -1;
	resp->content_length = resp->mtime = -1;
	resp->max_body = max_body;
}

static int body_append(struct http_response *resp, const char *data, size_t len,
		       size_t limit)
{
	char *p;
	size_t cap;

	if (resp->body_len + len > limit)
		return -EFBIG;
	if (resp->body_len + len + 1 > resp->body_cap) {
		cap = resp->body_cap ? resp->body_cap * 2 : 4096;
		while (cap < resp->body_len + len + 1)
			cap *= 2;
		p = realloc(resp->body, cap);
		if (p == NULL)
			return -ENOMEM;
		resp->body = p;
		resp->body_cap = cap;
	}
	memcpy(resp->body + resp->body_len, data, len);
	resp->body_len += len;
	resp->body[resp->body_len] = '\0';
	return 0;
}

struct attempt {
	const struct http_request *req;
	struct http_response *resp;
	CURL *h;
};

/* Parses "bytes FIRST-LAST/TOTAL", or with a star for an unknown total,
 * exactly (every number in range, nothing after it) into r's range
 * fields. */
static void http_parse_content_range(const char *s, struct http_response *r)
{
	long long v[3] = { -1, -1, -1 };
	const char *p;
	char *end;
	int i;

	if (strncmp(s, "bytes ", 6) != 0)
		return;
	p = s + 6;
	for (i = 0; i < 3; i++) {
		if (i == 2 && strcmp(p, "*") == 0)
			break;
		if (*p < '0' || *p > '9')
			return;
		errno = 0;
		v[i] = strtoll(p, &end, 10);
		if (errno != 0)
			return;
		p = end;
		if (*p != (i == 0 ? '-' : i == 1 ? '/' : '\0'))
			return;
		p += i < 2;
	}
	if (v[1] < v[0] || (v[2] >= 0 && v[2] <= v[1]))
		return;
	r->range_start = v[0];
	r->range_end = v[1];
	r->range_total = v[2];
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	struct attempt *a = arg;
	struct http_response *r = a->resp;
	size_t len = size * n, vlen;
	const char *colon = memchr(data, ':', len), *v, *vend;

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		/* A new status line (e.g. after 100 Continue): forget
		 * headers of the interim response. */
		r->etag[0] = '\0';
		r->range_start = r->range_end = r->range_total = -1;
		r->content_length = -1;
		if (a->req->on_header != NULL)
			a->req->on_header(a->req->header_arg, NULL, 0, NULL, 0);
		return len;
	}
	if (colon == NULL)
		return len;
	v = colon + 1;
	vend = data + len;
	str_trim_span(&v, &vend);
	vlen = (size_t)(vend - v);
	if (a->req->on_header != NULL)
		a->req->on_header(a->req->header_arg, data,
				  (size_t)(colon - data), v, vlen);
	if ((size_t)(colon - data) == 4 && strncasecmp(data, "etag", 4) == 0) {
		/* One that does not fit is kept as "?", which matches no
		 * quoted ETag, rather than as none at all. */
		if (vlen < sizeof(r->etag)) {
			memcpy(r->etag, v, vlen);
			r->etag[vlen] = '\0';
		} else {
			strcpy(r->etag, "?");
		}
	} else if ((size_t)(colon - data) == 14 &&
		   strncasecmp(data, "content-length", 14) == 0) {
		char buf[32], *end;
		unsigned long long cl;

		/* Known before the body, so body callbacks can check it. */
		if (vlen > 0 && vlen < sizeof(buf)) {
			memcpy(buf, v, vlen);
			buf[vlen] = '\0';
			errno = 0;
			cl = strtoull(buf, &end, 10);
			if (errno == 0 && *end == '\0' && buf[0] != '-' &&
			    cl <= INT64_MAX)
				r->content_length = (int64_t)cl;
		}
	} else if ((size_t)(colon - data) == 13 &&
		   strncasecmp(data, "content-range", 13) == 0) {
		char buf[128];

		if (vlen < sizeof(buf)) {
			memcpy(buf, v, vlen);
			buf[vlen] = '\0';
			/* Anything but a well-formed range leaves all
			 * three at -1, which no check accepts. */
			http_parse_content_range(buf, r);
		}
	}
	return len;
}

static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
	struct attempt *a = arg;
	struct http_response *r = a->resp;
	size_t len = size * n;
	long status = 0;
	int rc;

	curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &status);
	r->status = status;
	if (status < 200 || status >= 300) {
		/* Error bodies are small; keep what fits and drop the rest
		 * without failing the transfer. */
		if (r->body_len < HTTP_ERROR_BODY_MAX)
			body_append(r, data,
				    len < HTTP_ERROR_BODY_MAX - r->body_len
					    ? len
					    : HTTP_ERROR_BODY_MAX - r->body_len,
				    HTTP_ERROR_BODY_MAX);
		return len;
	}
	if (a->req->on_body != NULL) {
		rc = a->req->on_body(a->req->body_arg, r, data, len);
		r->body_seen += len;
		if (rc != 0) {
			r->cb_rc = rc;
			return 0; /* makes curl stop with CURLE_WRITE_ERROR */
		}
		return len;
	}
	rc = body_append(r, data, len, r->max_body);
	if (rc < 0) {
		r->cb_rc = rc;
		return 0;
	}
	return len;
}

static int curl_retryable(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_WEIRD_SERVER_REPLY:	 /* a garbled status line */
	case CURLE_UNSUPPORTED_PROTOCOL: /* "Received HTTP/0.9" */
		return 1;
	default:
		return 0;
	}
}

/* The time limit of one attempt: the stall limit for the first byte plus
 * the expected body at HTTP_MIN_TOTAL_RATE, cut to what is left of the
 * request's deadline (never 0, which curl reads as "no limit"). */
static long attempt_timeout_ms(const struct http_pool *pool,
			       const struct http_request *req, uint64_t left_ms)
{
	uint64_t t = pool->opts.request_timeout_ms +
		     req->expect_bytes * 1000 / HTTP_MIN_TOTAL_RATE;

	if (req->total_timeout_ms && req->total_timeout_ms < t)
		t = req->total_timeout_ms;
	if (left_ms < t)
		t = left_ms;
	return t > 0 ? (long)t : 1;
}

static int setup(struct http_pool *pool, struct attempt *a,
		 struct curl_slist *headers, uint64_t left_ms)
{
	const struct http_request *req = a->req;
	CURL *h = a->h;
	long stall_s = (long)(pool->opts.request_timeout_ms + 999) / 1000;
	unsigned cto = req->connect_timeout_ms ? req->connect_timeout_ms
					       : pool->opts.connect_timeout_ms;
	CURLcode cc = CURLE_OK;

#define SET(opt, val)                                                          \
	do {                                                                   \
		if (cc == CURLE_OK)                                            \
			cc = curl_easy_setopt(h, opt, val);                    \
	} while (0)
	SET(CURLOPT_URL, req->url);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, (long)cto);
	SET(CURLOPT_LOW_SPEED_LIMIT, (long)HTTP_MIN_RATE);
	SET(CURLOPT_LOW_SPEED_TIME, stall_s > 0 ? stall_s : 1L);
	SET(CURLOPT_TIMEOUT_MS, attempt_timeout_ms(pool, req, left_ms));
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_MAXCONNECTS, 1L); /* one connection to look at */
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_FILETIME, 1L);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_USERAGENT, "shardfs/" SHARDFS_VERSION);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, a);
	SET(CURLOPT_WRITEFUNCTION, on_write);
	SET(CURLOPT_WRITEDATA, a);
	SET(CURLOPT_HTTPHEADER, headers);
	if (pool->opts.ca_bundle != NULL)
		SET(CURLOPT_CAINFO, pool->opts.ca_bundle);
	/* Set either way: a handle renewed or reused within this request
	 * must not keep another request's choice (http_pool_put's reset clears
	 * it between requests too). NULL goes back to the environment's
	 * no_proxy. */
	SET(CURLOPT_NOPROXY, req->no_proxy ? "*" : NULL);
	if (strcmp(req->method, "HEAD") == 0) {
		SET(CURLOPT_NOBODY, 1L);
	} else if (strcmp(req->method, "POST") == 0 ||
		   strcmp(req->method, "PUT") == 0) {
		/* Not COPYPOSTFIELDS: curl would keep a copy until the
		 * handle is reset and free it unwiped, and a token
		 * request's body is a secret the caller wipes. The body
		 * lives until http_perform returns, after the transfer;
		 * http_pool_put's reset drops the pointer. (curl 7.88 still
		 * appends a small body to its request buffer for the send,
		 * a transient copy out of our reach.) */
		SET(CURLOPT_POSTFIELDS, req->body ? req->body : "");
		SET(CURLOPT_POSTFIELDSIZE, (long)req->body_len);
		if (strcmp(req->method, "PUT") == 0)
			SET(CURLOPT_CUSTOMREQUEST, "PUT");
	} else if (strcmp(req->method, "GET") != 0) {
		SET(CURLOPT_CUSTOMREQUEST, req->method);
	}
#undef SET
	return cc == CURLE_OK ? 0 : -EIO;
}

/* Drops a handle whose connection may hold the rest of a broken reply and
 * takes a fresh one. Returns -ENOMEM if none can be made. */
static int handle_renew(struct attempt *a)
{
	curl_easy_cleanup(a->h);
	a->h = curl_easy_init();
	return a->h != NULL ? 0 : -ENOMEM;
}

int http_perform(struct http_pool *pool, const struct http_request *req,
		 struct http_response *resp)
{
	struct attempt a = { .req = req, .resp = resp };
	unsigned retries =
		req->retries >= 0 ? (unsigned)req->retries : pool->opts.retries;
	unsigned failures = 0, attempts = 0;
	uint64_t start = clock_now_ms(), deadline;
	int reuse_retried = 0;
	size_t max_body = req->max_body ? req->max_body : HTTP_DEFAULT_MAX_BODY;
	char errbuf[CURL_ERROR_SIZE], last[CURL_ERROR_SIZE + 32];
	CURLcode cc;
	int rc;

	deadline = start + (req->deadline_ms ? req->deadline_ms
					     : pool->opts.deadline_ms);
	memset(resp, 0, sizeof(*resp));
	response_reset(resp, max_body);
	a.h = http_pool_get(pool);
	if (a.h == NULL)
		return -ENOMEM;
	for (;;) {
		struct curl_slist *headers = NULL;
		long connects = 0;
		curl_off_t filetime = -1, clen = -1;
		uint64_t now = clock_now_ms();
		int rejected = 0;

		response_reset(resp, max_body);
		attempts++;
		rc = req->prepare ? req->prepare(req->prepare_arg, &headers)
				  : 0;
		/* No "Expect: 100-continue" round trip for our small bodies. */
		if (rc == 0 && req->body != NULL) {
			struct curl_slist *n =
				curl_slist_append(headers, "Expect:");

			if (n == NULL)
				rc = -ENOMEM;
			else
				headers = n;
		}
		if (rc == 0)
			rc = setup(pool, &a, headers,
				   deadline > now ? deadline - now : 1);
		if (rc < 0) {
			curl_slist_free_all(headers);
			break;
		}
		errbuf[0] = '\0';
		curl_easy_setopt(a.h, CURLOPT_ERRORBUFFER, errbuf);
		cc = curl_easy_perform(a.h);
		curl_slist_free_all(headers);
		curl_easy_getinfo(a.h, CURLINFO_RESPONSE_CODE, &resp->status);
		curl_easy_getinfo(a.h, CURLINFO_NUM_CONNECTS, &connects);
		if (curl_easy_getinfo(a.h, CURLINFO_FILETIME_T, &filetime) ==
			    CURLE_OK &&
		    filetime >= 0)
			resp->mtime = (int64_t)filetime;
		if (curl_easy_getinfo(a.h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
				      &clen) == CURLE_OK &&
		    clen >= 0)
			resp->content_length = (int64_t)clen;
		resp->attempts = attempts;
		if (cc == CURLE_WRITE_ERROR && resp->cb_rc != 0) {
			if (resp->cb_rc != -EAGAIN) {
				rc = resp->cb_rc > 0 ? 0 : resp->cb_rc;
				break;
			}
			rejected = 1;
		} else if (cc == CURLE_OK && resp->status >= 200 &&
			   resp->status < 300 && req->check != NULL) {
			rc = req->check(req->check_arg, resp);
			if (rc == 0)
				break;
			if (rc != -EAGAIN)
				break;
			rejected = 1;
		} else if (cc == CURLE_OK &&
			   !http_status_retryable(resp->status)) {
			rc = 0;
			break;
		}
		if (cc != CURLE_OK && !rejected && !curl_retryable(cc)) {
			log_msg(req->quiet ? LOG_DEBUG : LOG_ERR, "%s: %s %s",
				req->what, req->method,
				errbuf[0] ? errbuf : curl_easy_strerror(cc));
			http_response_why(resp, "%s",
					  errbuf[0] ? errbuf
						    : curl_easy_strerror(cc));
			rc = -EIO;
			break;
		}
		if (rejected)
			snprintf(last, sizeof(last), "bad reply: %s",
				 resp->why[0] ? resp->why : "rejected");
		else if (cc != CURLE_OK)
			snprintf(last, sizeof(last), "%s",
				 errbuf[0] ? errbuf : curl_easy_strerror(cc));
		else
			snprintf(last, sizeof(last), "HTTP %ld", resp->status);
		/* A keep-alive connection the server closed while idle
		 * fails without a new connect (or reads what a broken reply
		 * left on it): retry at once, for free, but once per
		 * request, so a server that really resets every request
		 * still spends the budget. */
		if ((cc == CURLE_SEND_ERROR || cc == CURLE_RECV_ERROR ||
		     cc == CURLE_GOT_NOTHING ||
		     cc == CURLE_WEIRD_SERVER_REPLY ||
		     cc == CURLE_UNSUPPORTED_PROTOCOL) &&
		    !rejected && connects == 0 && !reuse_retried &&
		    clock_now_ms() < deadline) {
			log_msg(LOG_DEBUG,
				"%s: reused connection failed (%s), retrying "
				"on a new one",
				req->what, curl_easy_strerror(cc));
			reuse_retried = 1;
			if (handle_renew(&a) < 0) {
				rc = -ENOMEM;
				break;
			}
			continue;
		}
		/* Whatever a broken reply left on the connection must not
		 * become the next reply. */
		if ((cc != CURLE_OK || rejected) && handle_renew(&a) < 0) {
			rc = -ENOMEM;
			break;
		}
		now = clock_now_ms();
		if (failures >= retries || now >= deadline) {
			if (cc == CURLE_OK && !rejected) {
				rc = 0; /* the caller maps the status */
			} else {
				unsigned long quiet = 0;

				char key[1300];

				snprintf(key, sizeof(key), "failed %s",
					 req->what);
				http_response_why(resp, "%u tries: %s",
						  attempts, last);
				/* A quiet request's caller logs it: here
				 * only at LOG_DEBUG, and never limited. */
				if (req->quiet || !log_limit(key, &quiet))
					log_msg(req->quiet ? LOG_DEBUG
							   : LOG_ERR,
						"%s: %s failed after %u tries "
						"in %.1f s: %s%s",
						req->what, req->method,
						attempts,
						(double)(now - start) / 1000,
						last,
						quiet ? " (and earlier "
							"failures, not logged)"
						      : "");
				rc = -EIO;
			}
			break;
		}
		failures++;
		log_msg(LOG_DEBUG, "%s: try %u failed (%s), retrying",
			req->what, attempts, last);
		{
			uint64_t d = backoff_delay_ms(&HTTP_BACKOFF, failures);

			/* Leave the last attempt some time of its own. */
			if (now + d >= deadline)
				d = (deadline - now) / 2;
			sleep_ms((unsigned)d);
		}
		/* The retry may reuse the connection of a reply that was
		 * final but retryable (a 503): whatever came after that
		 * reply must not answer the retry. */
		if (!http_conn_clean(a.h, req->what) && handle_renew(&a) < 0) {
			rc = -ENOMEM;
			break;
		}
	}
	if (a.h != NULL)
		http_pool_put(pool, a.h, req->what);
	return rc;
}
