/*
 * nfs_call: one asynchronous libnfs call on a context, driven by poll()
 * under a deadline of our own (libnfs' synchronous calls can block forever
 * on a server that stops answering), and the trace of what was asked.
 * Private to the nfs backend; the bottom of its files (nfs_types.h).
 *
 * A call: zero a struct nfs_call, start a libnfs *_async() operation with
 * one of the nfsb_cb_* callbacks and the call as its private data (or, if
 * it cannot be queued, return nfsb_unqueued()), then nfsb_finish() with a
 * deadline. A context is used by one thread at a time: the one that took
 * its connection from the pool (nfsb_with_retries() does).
 */
#ifndef SHARDFS_NFS_CALL_H
#define SHARDFS_NFS_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "backends/nfs_types.h"

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

/* With SHARDFS_NFS_TRACE (nb->trace_fd, opened by nfs.c), appends
 * "VERB /PATH/KEY STATUS BYTES CONN" and extra (if not NULL) to the trace
 * file: STATUS is 200 for rc 0, 404 -ENOENT, 412 -ESTALE, 416 -ENODATA,
 * 499 -EINTR (cancelled with its context), 503 for anything else. */
void nfsb_trace(const struct nfs_backend *nb, const char *verb,
		const char *path, int rc, size_t bytes,
		const struct nfs_conn *conn, const char *extra);

#endif
