/*
 * http: the HTTP layer the object-store backends share (S3 and GCS): a
 * pool of libcurl easy handles, one request per handle at a time, and one
 * retry loop with util/backoff.h's capped exponential backoff and jitter
 * (100 ms doubling to 5 s: HTTP_BACKOFF in http.c says why).
 *
 * Why a free list of easy handles rather than one handle per thread: FUSE
 * threads come and go, and an easy handle keeps its own connection cache,
 * so handing a returned handle to the next request reuses its keep-alive
 * connection whatever thread asks. The pool lock is held only to push or
 * pop a handle, never across network I/O.
 *
 * Retries: a transport failure (refused, reset, timeout, nothing received,
 * a body cut short, a garbled status line), HTTP 5xx, 429 and 408, and a
 * 2xx reply the caller's checks reject (-EAGAIN from on_body or check) are
 * retried; every other status is final and handed back to the caller,
 * which knows the service's error codes. A failure on a reused keep-alive
 * connection that the server closed while it sat idle is retried at once
 * on a fresh connection and does not count against the retry budget, since
 * nothing was wrong with the server. After any failed or rejected attempt
 * the handle and its connections are dropped: bytes a broken reply left on
 * a connection must never be read as the next reply.
 *
 * Stray replies. A store or proxy may send a second, well-formed reply
 * after a real one (answering a request twice); on a kept-alive HTTP/1
 * connection the next request would take it for its answer, and if that
 * request is for the same object and range, every check passes on the
 * wrong bytes. So a connection with anything left to read after a
 * complete reply (bytes, or the server's close) is closed, never reused:
 * each handle keeps one connection, which is looked at with a
 * zero-timeout poll when the handle comes back to the pool, before a
 * retry reuses it, and when it is taken again; and a handle is taken
 * again only after it rested HTTP_REUSE_AFTER_MS (else a new one, with a
 * new connection, serves the request), so a stray reply that comes in
 * the same segment as the real one, right after it or up to that long
 * after it is seen before any request is sent on the connection. What
 * remains: a stray reply later than that, arriving just after the next
 * request went out, and a proxy that holds its wrong answer until it sees
 * the next request, are indistinguishable from a real answer; only the
 * caller's checks catch those (version, Content-Range, lengths, the
 * whole-object checksums). HTTP/2 connections are not looked at: every
 * frame names its stream, and a frame for a finished one is ignored. Over
 * TLS the poll sees what is still in the socket: bytes of a stray reply
 * that OpenSSL already read into its own buffer with the end of the real
 * one are not seen (not checked here: curl 7.88 gives no way to ask).
 *
 * Time: every wait is bounded. An attempt fails when fewer than
 * HTTP_MIN_RATE bytes a second arrive for request_timeout_ms (a silent or
 * trickling server), and when it takes longer than request_timeout_ms plus
 * expect_bytes at HTTP_MIN_TOTAL_RATE. A request with all its retries and
 * backoff ends within deadline_ms of its start: no retry starts once the
 * deadline has passed, and the last attempt's limit is cut to what is
 * left. So a backend request fails with -EIO at most deadline_ms after it
 * started (plus scheduling delays), whatever the server does. (A read the
 * kernel makes again at once after such a failure is failed by the fetch
 * engine without a request: cache/fetch_fail.h.)
 *
 * Only backends/ includes this header (it names libcurl types).
 */
#ifndef SHARDFS_HTTP_H
#define SHARDFS_HTTP_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An attempt slower than this for request_timeout_ms is a stall. */
#define HTTP_MIN_RATE 1024u
/* How long an HTTP/1 connection rests between two requests, so that a
 * stray reply shows before the next request is sent (see above). The
 * cost: at a steady R requests a second, about R x this / 1000 more
 * connections in use than requests run at once. */
#define HTTP_REUSE_AFTER_MS 20
/* The rate an attempt's whole-body time limit assumes (bytes/s). */
#define HTTP_MIN_TOTAL_RATE (1024u * 1024u)

/* A 0 below is backend.h's default: BACKEND_CONNECT_TIMEOUT_MS_DEFAULT,
 * BACKEND_REQUEST_TIMEOUT_MS_DEFAULT, BACKEND_READ_TIMEOUT_MS_DEFAULT. */
struct http_pool_options {
	unsigned connect_timeout_ms;
	unsigned request_timeout_ms; /* stall limit, see above */
	unsigned deadline_ms;	     /* a request, retries included */
	unsigned retries;	     /* retries after the first try */
	const char *ca_bundle;	     /* CA file for TLS, or NULL: system */
};

struct http_pool;

/* Creates a pool. Call http_global_init() once before, from one thread.
 * Returns 0 and sets *out (free with http_pool_free), -ENOMEM. */
int http_pool_new(const struct http_pool_options *opts, struct http_pool **out);

/* Frees the pool and every idle handle. No request may be in flight.
 * NULL is a no-op. */
void http_pool_free(struct http_pool *pool);

/* curl_global_init, once per process (idempotent, thread-safe).
 * Returns 0 or -EIO. */
int http_global_init(void);

/* The libcurl version this build was compiled against ("7.88.1"), for
 * the stats' shardfs_build_info: the layers above name no curl header. */
const char *http_version(void);

struct http_response;

/* Called with each piece of a 2xx body. Returns 0 to go on, 1 to stop the
 * transfer as a success (the caller has all it wants), -EAGAIN when the
 * reply is wrong (retried, see above; say why with http_response_why()),
 * or another negative errno to fail the request with it (not retried). */
typedef int (*http_body_cb)(void *arg, struct http_response *resp,
			    const char *data, size_t len);

/* Called once a 2xx attempt has received its whole body, to check it
 * (lengths, ranges, checksums) before the caller uses it. Returns 0 to
 * accept it, -EAGAIN to reject it (retried; say why with
 * http_response_why()), or another negative errno (final). */
typedef int (*http_check_cb)(void *arg, struct http_response *resp);

/* Called before every attempt to add the request's headers (signing goes
 * here, so each retry is signed with the current time and credentials).
 * Appends to *headers with curl_slist_append; the list is freed after the
 * attempt whatever happens. Returns 0 or a negative errno (not retried). */
typedef int (*http_prepare_cb)(void *arg, struct curl_slist **headers);

/* Called with each response header of an attempt, name and value trimmed
 * (not NUL-terminated), and with name NULL when a response starts (each
 * attempt, and again after an interim 1xx), so the caller forgets what an
 * earlier one said. The trailers of a chunked reply come here too, after
 * the body (libcurl passes them to its header callback): a caller that
 * trusts a header only before the body must say so itself. For headers
 * the response struct does not keep. */
typedef void (*http_header_cb)(void *arg, const char *name, size_t name_len,
			       const char *value, size_t value_len);

struct http_request {
	const char *method; /* "GET", "HEAD", "PUT" or "POST" */
	const char *url;    /* may hold secrets: never logged */
	const char *what;   /* names the request in logs, e.g. s3://b/k */
	const char *body;   /* request body for PUT/POST, or NULL */
	size_t body_len;
	http_prepare_cb prepare; /* NULL: no extra headers */
	void *prepare_arg;
	http_header_cb on_header; /* NULL: none */
	void *header_arg;
	/* Where a 2xx body goes: to on_body if set, else into
	 * response.body (growing up to max_body bytes, then -EFBIG). */
	http_body_cb on_body;
	void *body_arg;
	size_t max_body;     /* 0: 16 MiB */
	http_check_cb check; /* NULL: every complete 2xx is accepted */
	void *check_arg;
	uint64_t expect_bytes;	     /* body size expected, for the time
					limit of an attempt; 0: small */
	unsigned connect_timeout_ms; /* 0: the pool's */
	unsigned total_timeout_ms;   /* 0: none beyond the above */
	unsigned deadline_ms;	     /* 0: the pool's */
	int retries;		     /* < 0: the pool's */
	/* Never through a proxy (CURLOPT_NOPROXY "*"), whatever
	 * http_proxy says: for the metadata server and loopback token
	 * endpoints, whose answers are identities and whose replies carry
	 * tokens in clear. */
	bool no_proxy;
	/* The caller logs the failure itself: the final failure is logged
	 * here at LOG_DEBUG only, so a failure is logged once. */
	bool quiet;
};

/* What came back. Non-2xx bodies are kept (up to 64 KiB) in body, for the
 * caller's error-code parser. */
struct http_response {
	long status; /* HTTP status of the last attempt */
	char *body;  /* owned; NUL-terminated when not NULL */
	size_t body_len;
	char etag[256];		/* ETag header as sent, "" if none */
	int64_t range_start;	/* Content-Range first byte, -1 if none */
	int64_t range_end;	/* Content-Range last byte, -1 if none */
	int64_t range_total;	/* Content-Range total, -1 if none or '*' */
	int64_t content_length; /* -1 if unknown */
	int64_t mtime;		/* Last-Modified, seconds; -1 if none */
	unsigned attempts;	/* tries made */
	/* 2xx body bytes this attempt delivered before the current on_body
	 * call; 0 marks a fresh attempt (a retry starts over). */
	uint64_t body_seen;
	/* Why the last attempt's reply was rejected, "" if it was not;
	 * after -EIO from http_perform, why the request failed (no URL),
	 * for a caller that logs it itself (quiet). */
	char why[160];
	/* private: */
	size_t body_cap;
	size_t max_body;
	int cb_rc;
};

/* Runs req with retries. Returns 0 when an HTTP answer was final: a 2xx
 * that passed req->check, a status that is not retried, or a retried
 * status once the budget is spent (check resp->status). Returns a negative
 * errno when no usable answer came: -EIO after transport failures or
 * rejected replies once the budget or the deadline is spent (logged here
 * once, with req->what, the tries, the time and the last reason, never the
 * URL; at LOG_DEBUG when req->quiet), the callbacks' errno, -EFBIG,
 * -ENOMEM. resp is always initialised
 * and must be released with http_response_fini(). */
int http_perform(struct http_pool *pool, const struct http_request *req,
		 struct http_response *resp);

/* Sets resp->why (printf format) for a rejected reply. */
void http_response_why(struct http_response *resp, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Frees what resp owns; safe to call twice. */
void http_response_fini(struct http_response *resp);

/* True for the statuses the retry loop retries (5xx, 429, 408). */
int http_status_retryable(long status);

/* The errno a final HTTP status means when the service's error code says
 * nothing more precise: 404 -ENOENT, 401/403 -EACCES, 412 -ESTALE,
 * 416 -ERANGE, anything else outside 2xx -EIO; 2xx is 0. */
int http_status_errno(long status);

#endif
