/*
 * backend: the one small interface every object store implements.
 *
 * A backend is opened on a source URL (an absolute path, s3://bucket/prefix/,
 * gs://bucket/prefix/, nfs://server/path) and then addresses objects by
 * keys relative to that prefix. A backend is one `const struct backend_ops`
 * (a table of functions: handles, open, list, stat, read, close);
 * backend_open() picks it by URL scheme from the table in backend.c, the
 * only place that names them all. Its code is the files in backends/ that
 * share its prefix, one job each:
 *   posix.c   the whole posix backend;
 *   s3*.c     s3.c the operations and signing each request, s3_read.c
 *             ranged reads, s3_url.c URLs and the error map (pure),
 *             s3_sign.c SigV4, s3_creds.c credentials and their documents,
 *             s3_creds_source.c the chain and its refresh, s3_xml.c
 *             the XML replies;
 *   gcs*.c    gcs.c the operations and listing, gcs_read.c ranged reads,
 *             gcs_url.c URLs and the error map (pure), gcs_json.c the JSON
 *             replies, gcs_jwt.c the OAuth2 documents, gcs_creds.c the
 *             credential chain;
 *   nfs*.c    nfs.c the operations, nfs_list.c the listing walk,
 *             nfs_conn.c the pool of connections and retries, nfs_fh.c
 *             the files a connection keeps open, nfs_call.c one call
 *             under a deadline, nfs_url.c URLs and error classes (pure).
 * Shared by several: http*.c the HTTP layer of S3 and GCS (http.h),
 * objstore.c the object-store rules above it (objstore.h), backend_list.c
 * a listing's bounds and the entries it skips. A backend's private headers (s3_impl.h, s3_creds_impl.h,
 * gcs_impl.h, nfs_types.h and the other nfs_*.h, http_impl.h) are included
 * by its own files only.
 *
 * Backends know nothing of ranks, manifests or FUSE. Credentials, signing,
 * retries and HTTP live behind this interface. Every operation returns 0 or
 * a negative errno and logs its own detail (key, status, service code) once,
 * so callers never log the same failure again.
 *
 * Keys are passed as (key, key_len) and are always NUL-terminated at
 * key[key_len], so a backend may use them as C strings.
 *
 * Thread safety: after open, list/stat/read may be called from any number of
 * threads at once. close is called once, after every other call returned.
 */
#ifndef SHARDFS_BACKEND_H
#define SHARDFS_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum backend_addressing {
	BACKEND_ADDRESSING_AUTO = 0, /* virtual for AWS, path for others */
	BACKEND_ADDRESSING_PATH,
	BACKEND_ADDRESSING_VIRTUAL,
};

/* Options from the [source] section. Strings are borrowed for the duration
 * of open(); a backend copies what it keeps. NULL or 0 means the default,
 * except for retries, where 0 means none. */
struct backend_options {
	const char *endpoint; /* S3/GCS endpoint override, e.g. http://h:9000 */
	const char *region;   /* S3 region; default us-east-1 */
	enum backend_addressing addressing;
	int anonymous; /* no credentials (public buckets) */
	/* Connect limit; 0: BACKEND_CONNECT_TIMEOUT_MS_DEFAULT. */
	unsigned connect_timeout_ms;
	/* Stall limit per attempt (under 1 KiB/s for this long); 0:
	 * BACKEND_REQUEST_TIMEOUT_MS_DEFAULT. */
	unsigned request_timeout_ms;
	/* A request with all its retries ends (with -EIO at worst) within
	 * this time of its start; 0: BACKEND_READ_TIMEOUT_MS_DEFAULT. */
	unsigned read_timeout_ms;
	/* Retries after the first try; < 0: BACKEND_RETRIES_DEFAULT. */
	int retries;
	/* A listing ends with -EIO (logged, naming the limit) once it has run
	 * this long; 0: BACKEND_LIST_TIMEOUT_MS_DEFAULT. */
	unsigned list_timeout_ms;
	/* ... or once the objects it listed hold more than this many bytes
	 * (backend_list_bound); 0: BACKEND_LIST_MEMORY_DEFAULT. */
	uint64_t list_memory;
};

/* The defaults of [source] connect_timeout_ms, request_timeout_ms,
 * read_timeout_ms, retries, list_timeout_ms and list_memory, which every
 * backend applies for 0 (retries: < 0), for a caller without a config
 * (`shardfs manifest`); the config table's defaults are the same
 * (check_config compares them). */
#define BACKEND_CONNECT_TIMEOUT_MS_DEFAULT 5000u
#define BACKEND_REQUEST_TIMEOUT_MS_DEFAULT 10000u
#define BACKEND_READ_TIMEOUT_MS_DEFAULT 30000u
#define BACKEND_RETRIES_DEFAULT 5u
#define BACKEND_LIST_TIMEOUT_MS_DEFAULT 3600000u
#define BACKEND_LIST_MEMORY_DEFAULT (UINT64_C(4) << 30)
/* What a listed object costs besides its key and etag: the manifest's
 * record of it (struct manifest_entry and two terminating NULs). */
#define BACKEND_LIST_OBJECT_BYTES 48u

/* One object as reported by list(). In a list() callback the
 * pointers are borrowed until the callback returns. */
struct backend_object {
	const char *key; /* relative to the source prefix, not NUL-free */
	size_t key_len;
	uint64_t size;
	const char *etag; /* S3 ETag, GCS generation, posix
			     mtime_ns:size:ino:ctime_ns, nfs
			     mtime_ns:size:ctime_ns */
	size_t etag_len;
	int64_t mtime_ns; /* last modified, ns since the epoch */
};

/* What stat() reports. An etag that does not fit is never truncated: stat()
 * returns -ENAMETOOLONG instead. */
#define BACKEND_ETAG_MAX 256
struct backend_stat {
	uint64_t size;
	int64_t mtime_ns;
	size_t etag_len;
	char etag[BACKEND_ETAG_MAX];
};

/* One ranged read of an object: [offset, offset + len) of key, of the
 * version etag (NULL: any), into buf. All borrowed for the call. */
struct backend_read {
	const char *key;
	size_t key_len;
	const char *etag; /* NULL: any version */
	size_t etag_len;
	uint64_t offset;
	size_t len;
	void *buf;
};

/* What a store vouches for about a whole object, as a reply to a read
 * states it (read_claim()): a checksum of all of the object's bytes,
 * whatever range the reply held. */
enum backend_claim_kind {
	BACKEND_CLAIM_NONE = 0, /* the reply vouched for nothing */
	BACKEND_CLAIM_CRC32C,	/* util/crc32c.h: GCS's x-goog-hash crc32c */
	BACKEND_CLAIM_MD5,	/* S3's single-part ETag */
};
#define BACKEND_MD5_LEN 16
struct backend_claim {
	enum backend_claim_kind kind;
	uint32_t crc32c;	      /* BACKEND_CLAIM_CRC32C */
	uint8_t md5[BACKEND_MD5_LEN]; /* BACKEND_CLAIM_MD5 */
	/* The reply held the whole object and its bytes matched the claim
	 * (the backend checked them); false for a part of it. */
	bool checked;
	/* What said it, for logs: a static string ("ETag", "x-goog-hash"),
	 * or NULL. */
	const char *source;
};

/* True if a and b claim the same thing (kind and value; checked and
 * source aside). */
bool backend_claim_same(const struct backend_claim *a,
			const struct backend_claim *b);

/* Called once per object; a non-zero return stops the listing and list()
 * returns that value. */
typedef int (*backend_list_cb)(void *arg, const struct backend_object *obj);

/* The bounds of a listing. A listing ends, however the store answers: a
 * store that hands out a new page token with every page (with new names,
 * or the same ones under a prefix that changes) would otherwise be listed
 * until the process runs out of memory. Every backend but posix (a local
 * directory) counts its listing against these: time, and the bytes its
 * listed objects hold once the caller keeps them (key, etag and
 * BACKEND_LIST_OBJECT_BYTES each). */
struct backend_list_bound {
	const char *what;    /* names the listing in the message */
	uint64_t timeout_ms; /* from start */
	uint64_t memory;     /* bytes */
	uint64_t start_ms;   /* CLOCK_MONOTONIC */
	uint64_t bytes, objects;
};

/* Starts b for the listing what (borrowed for b's life) with the
 * backend_options fields list_timeout_ms and list_memory (0: their
 * defaults). */
void backend_list_bound_start(struct backend_list_bound *b, unsigned timeout_ms,
			      uint64_t memory, const char *what);

/* Counts obj (NULL: none, at a page or directory) and checks both
 * bounds. Returns 0, or -EIO when one is passed, logged once with what,
 * the bound, how far the listing got and the [source] key that raises
 * it. */
int backend_list_bound_check(struct backend_list_bound *b,
			     const struct backend_object *obj);

/* Counts one entry a listing skipped (a symlink, a special file) in
 * *count, the backend's total, and logs the first
 * BACKEND_LIST_SKIPPED_LOG_MAX of them at level, so a source with
 * thousands logs a few lines: "source WHERE SEP KEY: WHY, skipped" (key
 * as log_key() shows it). Thread-safe. */
#define BACKEND_LIST_SKIPPED_LOG_MAX 20
void backend_list_skipped(atomic_uint_fast64_t *count, int level,
			  const char *where, const char *sep, const char *key,
			  const char *why);

struct backend;

struct backend_ops {
	const char *name; /* "posix", "s3", "gcs", "nfs" */

	/* Returns 1 if this backend serves url (by scheme or form), else 0. */
	int (*handles)(const char *url);

	/* Opens url. On success *out owns the backend (free with close).
	 * Errors: -ENOENT (source missing), -ENOTDIR, -EINVAL (bad URL),
	 * -EACCES, -EIO, -ENOMEM. */
	int (*open)(const char *url, const struct backend_options *opts,
		    struct backend **out);

	/* Lists every object under prefix, in any order: prefix is "" for
	 * all, or a directory below the source ending in '/' ("train/").
	 * Keys are relative to the source prefix, not to this one. A prefix
	 * that names nothing lists nothing or returns -ENOENT. */
	int (*list)(struct backend *be, const char *prefix, backend_list_cb cb,
		    void *arg);

	/* Fills *st for one key. -ENOENT if absent. */
	int (*stat)(struct backend *be, const char *key, size_t key_len,
		    struct backend_stat *st);

	/* Reads r->len bytes at r->offset of r->key into r->buf and sets
	 * *nread. On success *nread == r->len exactly: callers ask only for
	 * bytes the object has (clamped to its manifest size), and an object
	 * that ends sooner is an error (-EIO, or -ESTALE if it changed), never
	 * a short success. If r->etag is not NULL and the object's current
	 * etag differs, returns -ESTALE without returning any byte of the new
	 * object. On error r->buf's contents are unspecified. */
	int (*read)(struct backend *be, const struct backend_read *r,
		    size_t *nread);

	/* Optional: NULL for a store that vouches for nothing (posix, nfs),
	 * whose callers use read(). claim may be NULL (then this is read():
	 * backend_read_unclaimed()). As read(), and on success also fills
	 * *claim with what the reply vouched for about the whole object
	 * (kind BACKEND_CLAIM_NONE: nothing), however little of it was read:
	 * S3's ETag when it is a single-part MD5 of an object not encrypted
	 * with SSE-KMS or SSE-C (backends/s3.h, s3_etag_claim()), GCS's
	 * x-goog-hash crc32c, which GCS sends on ranged replies too. A
	 * claim is what the reply says, not a verdict: unless claim->checked,
	 * the bytes read were not compared with it (a part of an object
	 * cannot be), and the caller compares the whole object once it has
	 * all of it. On error *claim is unspecified. */
	int (*read_claim)(struct backend *be, const struct backend_read *r,
			  size_t *nread, struct backend_claim *claim);

	/* Frees everything the backend owns. close(NULL) is a no-op. */
	void (*close)(struct backend *be);
};

/* Every backend's state starts with this, so generic code can reach ops. */
struct backend {
	const struct backend_ops *ops;
};

/* Opens url with the backend that handles it. Errors as ops->open, plus
 * -EPROTONOSUPPORT when no backend handles the URL (logged). */
int backend_open(const char *url, const struct backend_options *opts,
		 struct backend **out);

/* Closes a backend opened by backend_open(); NULL is a no-op. */
void backend_close(struct backend *be);

/* backend_ops.read for a store whose reads all go through its read_claim
 * (S3, GCS): calls be->ops->read_claim with claim NULL. */
int backend_read_unclaimed(struct backend *be, const struct backend_read *r,
			   size_t *nread);

/* For the backends that resolve keys as paths below their root (posix,
 * nfs): 0 if key is a relative path that stays below it (not empty, no
 * NUL, no empty, "." or ".." component, so not absolute either), else
 * -EINVAL. Keys from a manifest passed the path rules already; checking
 * again keeps each backend safe on its own. */
int backend_key_relative(const char *key, size_t key_len);

/* The posix backend: an absolute directory path (local disk or NFS). */
extern const struct backend_ops backend_posix_ops;

/* The S3 backend: s3://bucket/prefix/ on AWS or an S3-compatible store. */
extern const struct backend_ops backend_s3_ops;

/* The GCS backend: gs://bucket/prefix/ through the JSON API (or its
 * emulator). */
extern const struct backend_ops backend_gcs_ops;

/* The NFS backend: nfs://server/path through libnfs, no kernel mount
 * (backends/nfs.h has the URL form). */
extern const struct backend_ops backend_nfs_ops;

#endif
