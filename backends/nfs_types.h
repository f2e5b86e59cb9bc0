/*
 * nfs_types: the state the nfs backend's files share: a call (struct
 * nfs_call), a kept file (struct nfs_kept), a connection (struct nfs_conn)
 * and the backend (struct nfs_backend), with the limits they are sized
 * by; types and constants only, and nfsb_min(). Private to the nfs
 * backend. The files, from the top down: nfs_list.c (the listing) ->
 * nfs.c (the other operations; nfs_impl.h) -> nfs_conn.c (nfs_conn.h:
 * the pool, connecting, retries) -> nfs_fh.c (nfs_fh.h: the files a
 * connection keeps open) -> nfs_call.c (nfs_call.h: one call on a context
 * under a deadline). Each calls only files below it.
 */
#ifndef SHARDFS_NFS_TYPES_H
#define SHARDFS_NFS_TYPES_H

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

#endif
