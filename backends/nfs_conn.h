/*
 * nfs_conn: the nfs backend's connections: connecting a context (mounted
 * on the source's path within connect_timeout_ms), the pool that hands
 * each request a connection of its own, and the retries of an operation
 * on new connections. Private to the nfs backend; called by nfs.c and
 * nfs_list.c, it calls nfs_fh.c (a connection's kept files, its drop) and
 * nfs_call.c; the types are nfs_types.h's.
 */
#ifndef SHARDFS_NFS_CONN_H
#define SHARDFS_NFS_CONN_H

#include <stdint.h>

#include "backends/nfs_types.h"

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

#endif
