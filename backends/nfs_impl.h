/*
 * nfs_impl: what the nfs backend's files share: nfs.c (the operations),
 * nfs_conn.c (its connections: the pool, the deadline-bound calls,
 * reconnects and retries), nfs_fh.c (the files a connection keeps open)
 * and nfs_list.c (the listing walk). Private to the nfs backend.
 *
 * A call: zero a struct nfs_call, start a libnfs *_async() operation with
 * one of the nfsb_cb_* callbacks and the call as its private data (or, if
 * it cannot be queued, return nfsb_unqueued()), then nfsb_finish() with a
 * deadline. A context is used by one thread at a time: the one that took
 * its connection from the pool (nfsb_with_retries() does).
 *
 * Kept handles (nfs_fh.c): each connection keeps up to NFS_FH_PER_CONN
 * files open (their libnfs file handles, which belong to its context), so
 * the ranges of one file after the first cost READs and one GETATTR, no
 * OPEN and no CLOSE. A handle lives until it is the least recently used
 * of a full table (then closed: the CLOSE goes out when the range that
 * filled the table is done, and its answer is taken before the
 * connection's next operation), until it was unused NFS_FH_IDLE_MS
 * (closed by the next operation that finds it so), or until its context
 * goes (any failure of the context, a reconnect, the backend's close:
 * forgotten without a CLOSE, the server's lease reclaims its state).
 * NFSv4.0 serialises OPEN and CLOSE per open owner (libnfs keeps one
 * seqid per context), so at most one CLOSE is ever in flight on a
 * context, and never beside an OPEN.
 */
#ifndef SHARDFS_NFS_IMPL_H
#define SHARDFS_NFS_IMPL_H

/* libnfs.h uses struct timeval without including its header. */
#include <sys/time.h>

#include <nfsc/libnfs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "backends/backend.h"
#include "backends/nfs.h"
#include "util/clock.h"

/* Exported by libnfs 4.0 but missing from its header: frees a file
 * handle without a CLOSE, for a handle whose context is already gone. */
void nfs_free_nfsfh(struct nfsfh *nfsfh);

#define NFS_READ_CHUNK_MAX (1u << 20) /* bytes per READ when unknown */
#define NFS_READ_DEPTH 4	      /* READs in flight per read */
#define NFS_POLL_SLICE_MS 100
#define NFS_SKIPPED_LOG_MAX 20
#define NFS_FH_PER_CONN 4   /* open files kept per connection */
#define NFS_FH_IDLE_MS 5000 /* a kept file unused this long is closed */

/* One asynchronous call and what its callback left. */
struct nfs_call {
	bool done;
	int status;
	struct nfsfh *fh;
	struct nfsdir *dir;
	struct nfs_stat_64 st;
	char *buf; /* pread destination */
	size_t cap;
	char err[160];
};

/* A file kept open on a connection's context. */
struct nfs_kept {
	char *path;	  /* "/KEY" below the mount, owned; NULL: free slot */
	struct nfsfh *fh; /* belongs to the connection's context */
	uint64_t used_ms; /* when a range last went through it (monotonic) */
};

/* A connection. Its context, kept handles and CLOSE in flight are used by
 * the thread that took it from the pool (busy), or, while it is idle,
 * under nfs_backend.lock (pool_get() looks for a kept path, a failure
 * drops idle connections). */
struct nfs_conn {
	struct nfs_context *ctx; /* NULL: not connected */
	bool busy;		 /* protected by nfs_backend.lock */
	struct nfs_kept kept[NFS_FH_PER_CONN];
	char *closing;		    /* path of the CLOSE in flight, or NULL */
	struct nfs_call close_call; /* its callback's; valid while closing */
	uint64_t close_deadline;    /* when its answer is overdue */
};

struct nfs_backend {
	struct backend base;
	struct nfs_source src;
	char *display;	  /* "nfs://HOST/PATH", for messages */
	char *libnfs_url; /* options for nfs_parse_url_dir(), no path */
	unsigned connect_ms, request_ms, read_ms, retries;
	unsigned list_timeout_ms; /* backend_options' */
	uint64_t list_memory;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a connection came free */
	struct nfs_conn *conns;
	atomic_bool down; /* a connection failed; not yet one up again */
	atomic_uint_fast64_t skipped;
	atomic_uint_fast32_t serial; /* NFSv4 client names */
	int trace_fd;		     /* SHARDFS_NFS_TRACE, or -1 */
};

static inline uint64_t nfsb_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The callbacks: each sets done and status (0 or the negative errno libnfs
 * gave, its message in err) and keeps what it was sent: the file handle
 * (open), the attributes (stat, fstat), the bytes (pread: status is the
 * count, at most cap), the directory (opendir). */
void nfsb_cb_plain(int status, struct nfs_context *ctx, void *data, void *priv);
void nfsb_cb_open(int status, struct nfs_context *ctx, void *data, void *priv);
void nfsb_cb_stat(int status, struct nfs_context *ctx, void *data, void *priv);
void nfsb_cb_pread(int status, struct nfs_context *ctx, void *data, void *priv);
void nfsb_cb_opendir(int status, struct nfs_context *ctx, void *data,
		     void *priv);

/* Drives ctx until c is done or deadline (monotonic ms) passes. Returns 0
 * (the call's own status is in c), -ETIMEDOUT, or -ECONNRESET when the
 * connection failed under it. */
int nfsb_wait(struct nfs_context *ctx, struct nfs_call *c, uint64_t deadline);

/* nfsb_wait(), then the call's own status: 0 or a negative errno. */
int nfsb_finish(struct nfs_context *ctx, struct nfs_call *c, uint64_t deadline);

/* For a call libnfs refused to queue: the context is unusable. Returns
 * -ECONNRESET with libnfs' message in c->err. */
int nfsb_unqueued(struct nfs_context *ctx, struct nfs_call *c);

/* Destroys conn's context, if any (pending calls are cancelled), and
 * forgets its kept handles (nfsb_kept_forget_all()). */
void nfsb_conn_drop(struct nfs_backend *nb, struct nfs_conn *conn);

/* Connects conn: a new context with the source's options, mounted on its
 * path within connect_timeout_ms (and deadline). 0 or a negative errno,
 * the detail in c->err. */
int nfsb_connect(struct nfs_backend *nb, struct nfs_conn *conn,
		 uint64_t deadline, struct nfs_call *c);

/* The start of every op: nfsb_connect() if conn has no context (it lost
 * it, or never had one), then c zeroed for the op's own call. 0 or
 * nfsb_connect()'s error (c then holds its detail). */
int nfsb_ready(struct nfs_backend *nb, struct nfs_conn *conn, uint64_t deadline,
	       struct nfs_call *c);

/* One attempt of an operation on conn (connected or not: the op connects
 * it when conn->ctx is NULL). */
typedef int (*nfsb_op)(struct nfs_backend *nb, struct nfs_conn *conn, void *arg,
		       uint64_t deadline, struct nfs_call *c);

/* Runs op on a pooled connection until it succeeds, fails for good, or
 * retries (with capped exponential backoff, each on a new connection) or
 * the deadline run out. path (NULL: none) is the file op reads: an idle
 * connection that keeps it open is taken first (nfsb_pool_pick()). Before
 * op runs, the connection is settled (nfsb_kept_settle()); after it, one
 * idle connection with a handle unused NFS_FH_IDLE_MS, if any, has it
 * closed. A transient failure drops the connection and
 * every idle one (they share the server's fate) and is logged once until
 * one comes up again. A stale handle the server reported (-ESTALE in
 * c->status, as opposed to op's own etag check) is retried once on a fresh
 * mount, outside the retry count. Returns op's result, or -ETIMEDOUT; c
 * holds the last attempt's detail. */
int nfsb_with_retries(struct nfs_backend *nb, nfsb_op op, void *arg,
		      const char *path, uint64_t deadline, struct nfs_call *c);

/* ---- kept handles (nfs_fh.c) ---- */

/* conn's slot that keeps path open, or NULL. */
struct nfs_kept *nfsb_kept_find(struct nfs_conn *conn, const char *path);

/* NULL if conn has a free slot; else the one to close to make room: the
 * least recently used other than keep (NULL: any). */
struct nfs_kept *nfsb_kept_victim(struct nfs_conn *conn,
				  const struct nfs_kept *keep);

/* A slot of conn last used more than NFS_FH_IDLE_MS before now, or NULL. */
struct nfs_kept *nfsb_kept_expired(struct nfs_conn *conn, uint64_t now);

/* The connection a request for path (NULL: any file) takes among the n
 * conns: an idle one that keeps path open, else the first idle connected
 * one, else the first idle one; NULL when all are busy. The caller holds
 * nfs_backend.lock. */
struct nfs_conn *nfsb_pool_pick(struct nfs_conn *conns, unsigned n,
				const char *path);

/* Opens path (O_RDONLY) on conn's connected context into a free slot,
 * closing the least recently used handle first if none is free. 0 and
 * *out, or a negative errno (detail in c; a failed CLOSE also dropped the
 * context). */
int nfsb_kept_open(struct nfs_backend *nb, struct nfs_conn *conn,
		   const char *path, uint64_t deadline, struct nfs_call *c,
		   struct nfs_kept **out);

/* CLOSEs k's handle and waits (request_timeout_ms, deadline); the slot is
 * free either way. 0, or a negative errno: the context is dropped then
 * (a context whose CLOSE failed is not trusted with the next OPEN). */
int nfsb_kept_close(struct nfs_backend *nb, struct nfs_conn *conn,
		    struct nfs_kept *k, uint64_t deadline, struct nfs_call *c);

/* After a range through keep: if conn's table is full, sends the CLOSE
 * of its least recently used other handle and leaves it in flight (at
 * most one per connection), so the next OPEN on conn finds a free slot
 * without a round trip. A context that cannot send it is dropped. */
void nfsb_kept_trim(struct nfs_backend *nb, struct nfs_conn *conn,
		    const struct nfs_kept *keep, uint64_t deadline);

/* Before any operation on conn: takes the answer of its CLOSE in flight,
 * then closes its handles unused more than NFS_FH_IDLE_MS. 0, or a
 * negative errno (detail in c): conn's context was dropped then, and the
 * operation connects afresh. */
int nfsb_kept_settle(struct nfs_backend *nb, struct nfs_conn *conn,
		     uint64_t deadline, struct nfs_call *c);

/* Frees k's handle without a CLOSE (its context is gone, or the server
 * no longer knows it) and empties the slot. */
void nfsb_kept_forget(struct nfs_backend *nb, struct nfs_conn *conn,
		      struct nfs_kept *k);

/* nfsb_kept_forget() for every slot of conn, and the end of its CLOSE in
 * flight, which its context's destruction cancelled (libnfs freed that
 * handle). Called when conn's context was destroyed. */
void nfsb_kept_forget_all(struct nfs_backend *nb, struct nfs_conn *conn);

/* With SHARDFS_NFS_TRACE, appends "VERB /PATH/KEY STATUS BYTES CONN" and
 * extra (if not NULL) to the trace file (nfs.c): STATUS is 200 for rc 0,
 * 404 -ENOENT, 412 -ESTALE, 416 -ENODATA, 499 -EINTR (cancelled with its
 * context), 503 for anything else. */
void nfsb_trace(const struct nfs_backend *nb, const char *verb,
		const char *path, int rc, size_t bytes,
		const struct nfs_conn *conn, const char *extra);

/* "mtime_ns:size:ctime_ns" into buf; its length (nfs.c). */
size_t nfsb_format_etag(uint64_t mtime_ns, uint64_t size, uint64_t ctime_ns,
			char *buf, size_t cap);

/* backend_ops.list (nfs_list.c). */
int nfsb_list(struct backend *be, const char *prefix, backend_list_cb cb,
	      void *arg);

#endif
