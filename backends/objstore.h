/*
 * objstore: what the object-store backends (S3 in s3*.c, GCS in gcs*.c)
 * share above the HTTP layer, so that both follow one rule where their
 * logic is the same: source URLs and percent-encoding, request headers
 * and URLs, wiping secrets, the failure log, the credential refresh
 * thread and its retry schedule, the listing loop and the guard that makes it end, and the
 * checks on a ranged read's reply (DESIGN §9). What differs per store
 * (bucket names, the version pin, error codes, checksums) stays in the
 * backend and is passed in.
 *
 * Only backends/ includes this header (it names libcurl types).
 */
#ifndef SHARDFS_OBJSTORE_H
#define SHARDFS_OBJSTORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backends/backend.h"
#include "backends/http.h"

/* Splits "SCHEMEbucket[/prefix]" (scheme e.g. "s3://") into a malloc'd
 * bucket and a malloc'd prefix that is "" or ends in '/'. bucket_ok
 * judges the bucket name (not NUL-terminated). Returns 0, -EINVAL (not
 * this scheme, or a bad bucket) or -ENOMEM; out-params untouched on
 * failure. */
int objstore_url_split(const char *url, const char *scheme,
		       int (*bucket_ok)(const char *b, size_t len),
		       char **bucket, char **prefix);

/* Percent-encodes s[0..len) as RFC 3986 wants (unreserved characters
 * kept, '/' too if keep_slash). Returns a malloc'd string or NULL. */
char *objstore_uri_encode(const char *s, size_t len, int keep_slash);

/* base + path + "?" + query (no "?" when query is ""); malloc'd or
 * NULL. */
char *objstore_url(const char *base, const char *path, const char *query);

/* Appends a printf-formatted header line to *list. The formatted line is
 * wiped before it is freed (it may hold a token). Returns 0 or
 * -ENOMEM. */
int objstore_header(struct curl_slist **list, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Appends "Range: range" (if range is not NULL) and an empty "Accept:"
 * (curl's default "Accept: *" is noise no store needs). Returns 0 or
 * -ENOMEM. */
int objstore_headers_common(struct curl_slist **list, const char *range);

/* One entry of a service's error-code table. */
struct objstore_code {
	const char *code;
	int err;
};

/* The errno a final status means: 0 for 2xx, else the entry for code in
 * table (n entries), else http_status_errno(status). */
int objstore_error_errno(long status, const char *code,
			 const struct objstore_code *table, size_t n);

/* Wipes s (a secret: a key, a token, a request body holding one) and
 * frees it; NULL is a no-op. */
void objstore_wipe_free(char *s);

/* The pool options every object-store backend takes from [source]. */
void objstore_pool_options(const struct backend_options *opts,
			   struct http_pool_options *ho);

/* A service's map from a final status and its error code to errno. */
typedef int (*objstore_errno_cb)(long status, const char *code);

/* Logs a final non-2xx answer once per status and object (log_limit)
 * as "what: op: HTTP status CODE: MSG (after N tries)" and returns the
 * errno map gives it; -ENOENT is not logged if quiet_enoent. code and msg
 * are the service's, "" if none. */
int objstore_fail_log(const char *what, const char *op,
		      const struct http_response *resp, int quiet_enoent,
		      objstore_errno_cb map, const char *code, const char *msg);

/* A backend's failure logger: parses the service's error, maps it to
 * errno, logs it with objstore_fail_log() and returns the errno. */
typedef int (*objstore_fail_cb)(const char *what, const char *op,
				const struct http_response *resp,
				int quiet_enoent);

/* Credential refresh */

/* A credential provider's refresh thread, with the one lock it shares
 * with the provider's readers and the condition that wakes it to stop. */
struct objstore_worker {
	pthread_mutex_t lock; /* the provider's only lock, never held across
				 I/O or logging */
	pthread_cond_t cond;  /* on the clock given to init; signalled
				 (under lock) on stop */
	int stop;	      /* protected by lock */
	bool have_thread;
	pthread_t thread;
};

/* How long (s) a refresh thread waits before trying again after its
 * failures-th failed refresh in a row (1 = the first): util/backoff.h's
 * curve, 5 s doubling to at most 60 s, with jitter. Slower than a
 * request's retries because the credentials in hand are still good
 * (refreshes start minutes before expiry), and jittered so a job's nodes
 * do not ask the metadata service or STS in step. In [2, 60]. */
unsigned objstore_refresh_retry_s(unsigned failures);

/* Sets up lock and cond (cond's waits on clock). */
void objstore_worker_init(struct objstore_worker *w, clockid_t clock);

/* Starts fn(arg) with SIGTERM, SIGINT and SIGHUP blocked: they belong to
 * the main thread (docs/STYLE.md). Returns 0 or a negative errno. */
int objstore_worker_start(struct objstore_worker *w, void *(*fn)(void *),
			  void *arg);

/* Stops the thread if it runs (stop set and signalled, then joined) and
 * destroys lock and cond. */
void objstore_worker_fini(struct objstore_worker *w);

/* Listing */

/* A listing must end: a page token seen before, or a page that starts
 * with the first name of an earlier page (a server that restarts on a
 * token it does not know), is a server going round in circles. Pages
 * with no objects but a token are legal, but not GUARD_EMPTY_MAX in a
 * row; and no listing needs more than GUARD_PAGES_MAX pages (a billion
 * objects). */
#define OBJSTORE_LIST_PAGES_MAX 1000000u
#define OBJSTORE_LIST_EMPTY_MAX 1000u

struct objstore_list_guard {
	/* Set by the caller, for the messages: */
	const char *token_name; /* e.g. "continuation token" */
	const char *item_name;	/* e.g. "key" */
	const char *restart;	/* why a repeated first item, e.g. "the
				   server repeats itself" */
	/* Set by the caller with backend_list_bound_start(): the time and
	 * memory the listing may take, checked at every page and object. */
	struct backend_list_bound bound;
	/* private: a set of 64-bit hashes (open addressing, 0 free) */
	uint64_t *slot;
	size_t cap, n;
	unsigned pages, empty_run;
};

/* Counts a page (guard->pages is then its 1-based number) and checks that
 * it moves on: token (the next page's, or NULL on the last page) and the
 * first item's name first[0..first_len) (if count > 0) are new. Returns
 * 0, -EIO (logged with what) or -ENOMEM. */
int objstore_list_page(struct objstore_list_guard *guard, const char *what,
		       const char *token, size_t count, const char *first,
		       size_t first_len);

/* A listing: objstore_list_run() asks for one page after another until
 * a page names no next one, with the guard above. */
struct objstore_lister {
	const char *what; /* names the listing in logs */
	struct http_pool *http;
	struct http_request req; /* every page's fields but url and what */
	objstore_fail_cb fail;	 /* for a non-200 answer */
	struct objstore_list_guard guard;
	/* The URL of the page after token (NULL: the first page), malloc'd;
	 * NULL for -ENOMEM. */
	char *(*page_url)(void *arg, const char *token);
	/* Takes page guard.pages + 1's 200 answer: parses it, counts and
	 * checks it with objstore_list_page(guard, ...), hands its objects
	 * on, and sets *next to the next page's token (malloc'd) or NULL.
	 * Returns 0 or a negative errno, logged. */
	int (*page)(void *arg, const struct http_response *resp,
		    struct objstore_list_guard *guard, char **next);
	void *arg;
};

/* Where the objects of one listed page go. */
struct objstore_list_scope {
	const char *what; /* names the listing in logs */
	unsigned page;	  /* the page's number, from 1 */
	const char *must; /* every name in the answer starts with this */
	size_t must_len;
	size_t plen; /* the source prefix's length, cut off every name */
	backend_list_cb cb;
	void *arg;
	struct backend_list_bound *bound; /* the listing's */
};

/* Sets up sc for the next page (guard->pages + 1) of the listing what:
 * names must start with must, and lose the first plen bytes (the source
 * prefix); each counts against guard->bound. */
void objstore_list_scope_init(struct objstore_list_scope *sc,
			      struct objstore_list_guard *guard,
			      const char *what, const char *must, size_t plen,
			      backend_list_cb cb, void *arg);

/* Hands one listed object to sc->cb, its name without the source
 * prefix; the prefix's own marker (the name that is the prefix) is
 * skipped. Returns cb's answer, 0, or -EIO (logged) for a name that does
 * not start with sc->must or an object past the listing's bounds. */
int objstore_list_object(const struct objstore_list_scope *sc, const char *name,
			 size_t name_len, uint64_t size, const char *etag,
			 int64_t mtime_ns);

/* Runs the listing, checking guard.bound's time before each page after
 * the first. Returns 0, or the first errno a page, the request or a bound
 * gave (logged). Frees what the guard holds. */
int objstore_list_run(struct objstore_lister *l);

/* Ranged reads */

/* A ranged read into a caller's buffer; no byte outside [offset,
 * offset + len) of the object reaches buf. */
struct objstore_range {
	uint64_t offset;
	size_t len;
	char *buf;
	size_t filled;	 /* contiguous bytes from offset */
	uint64_t pos;	 /* object position of the next body byte */
	uint64_t total;	 /* the object's size per the reply, 0 unknown */
	char header[64]; /* "bytes=a-b" */
};

/* The start of a store's read_claim: *claim (claim may be NULL) vouches
 * for nothing yet, and a read of r->len 0 is done at once (*nread = 0, no
 * request): returns true. Otherwise sets up range for r->len bytes at
 * r->offset into r->buf, and req's fields for a ranged read (body and
 * check callbacks with arg, the expected size, the pool's retries), and
 * returns false. */
bool objstore_range_start(struct objstore_range *range,
			  const struct backend_read *r, size_t *nread,
			  struct backend_claim *claim, struct http_request *req,
			  http_body_cb on_body, http_check_cb check, void *arg);

/* The checks on a reply's status line and headers once the backend has
 * checked the version: exactly the range asked for (a 206 naming it, or
 * a 200 holding the whole object past its end). Starts the body over
 * (pos, filled) and sets total. Returns 0 or -EAGAIN (why said). */
int objstore_range_reply(struct objstore_range *r, struct http_response *resp);

/* Copies the part of a body piece that falls in the range into buf.
 * Returns 1 when the transfer can stop (a 200 going on past the range:
 * stopping closes the connection, so an answer that ends by itself is
 * left to), else 0. */
int objstore_range_body(struct objstore_range *r,
			const struct http_response *resp, const char *data,
			size_t len);

/* The checks once a reply is complete: every byte asked for arrived, and
 * a 206 held no more than the range. Returns 0 or -EAGAIN (why said). */
int objstore_range_complete(const struct objstore_range *r,
			    struct http_response *resp);

/* After http_perform() returned 0: logs a 416 (the object is shorter than
 * the manifest says) and a reply short of the range, hands another
 * non-2xx to fail. Returns 0 when buf holds the range (*nread is then its
 * length, as backend_ops.read promises), else the errno. */
int objstore_range_result(const struct objstore_range *r, const char *what,
			  const struct http_response *resp,
			  objstore_fail_cb fail, size_t *nread);

/* Logs, once per object, that what changed since the manifest was made:
 * "(<version_name> want, now now)". */
void objstore_log_stale(const char *what, const char *version_name,
			const char *want, size_t want_len, const char *now);

#endif
