/*
 * nfs_impl: what nfs.c (the backend's operations) and nfs_conn.c (its
 * connections: the pool, the deadline-bound calls, reconnects and retries)
 * share. Private to the nfs backend.
 *
 * A call: zero a struct nfs_call, start a libnfs *_async() operation with
 * one of the nfsb_cb_* callbacks and the call as its private data (or, if
 * it cannot be queued, return nfsb_unqueued()), then nfsb_finish() with a
 * deadline. A context is used by one thread at a time: the one that took
 * its connection from the pool (nfsb_with_retries() does).
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

/* Exported by libnfs 4.0 but missing from its header: frees a file
 * handle without a CLOSE, for a handle whose context is already gone. */
void nfs_free_nfsfh(struct nfsfh *nfsfh);

#define NFS_READ_CHUNK_MAX (1u << 20) /* bytes per READ when unknown */
#define NFS_READ_DEPTH 4	      /* READs in flight per read */
#define NFS_BACKOFF_MIN_MS 50
#define NFS_BACKOFF_MAX_MS 1000
#define NFS_POLL_SLICE_MS 100
#define NFS_SKIPPED_LOG_MAX 20

struct nfs_conn {
	struct nfs_context *ctx; /* NULL: not connected */
	bool busy;		 /* protected by nfs_backend.lock */
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

static inline uint64_t nfsb_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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

/* Destroys conn's context, if any (pending calls are cancelled). */
void nfsb_conn_drop(struct nfs_conn *conn);

/* Connects conn: a new context with the source's options, mounted on its
 * path within connect_timeout_ms (and deadline). 0 or a negative errno,
 * the detail in c->err. */
int nfsb_connect(struct nfs_backend *nb, struct nfs_conn *conn,
		 uint64_t deadline, struct nfs_call *c);

/* One attempt of an operation on conn (connected or not: the op connects
 * it when conn->ctx is NULL). */
typedef int (*nfsb_op)(struct nfs_backend *nb, struct nfs_conn *conn, void *arg,
		       uint64_t deadline, struct nfs_call *c);

/* Runs op on a pooled connection until it succeeds, fails for good, or
 * retries (with capped exponential backoff, each on a new connection) or
 * the deadline run out. A transient failure drops the connection and
 * every idle one (they share the server's fate) and is logged once until
 * one comes up again. A stale handle the server reported (-ESTALE in
 * c->status, as opposed to op's own etag check) is retried once on a fresh
 * mount, outside the retry count. Returns op's result, or -ETIMEDOUT; c
 * holds the last attempt's detail. */
int nfsb_with_retries(struct nfs_backend *nb, nfsb_op op, void *arg,
		      uint64_t deadline, struct nfs_call *c);

/* "mtime_ns:size:ctime_ns" into buf; its length (nfs.c). */
size_t nfsb_format_etag(uint64_t mtime_ns, uint64_t size, uint64_t ctime_ns,
			char *buf, size_t cap);

/* backend_ops.list (nfs_list.c). */
int nfsb_list(struct backend *be, const char *prefix, backend_list_cb cb,
	      void *arg);

#endif
