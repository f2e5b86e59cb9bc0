/*
 * nfs_fh: the files each nfs connection keeps open across ranges, and the
 * end of a connection's context, which takes its kept files with it.
 * Private to the nfs backend; called by nfs.c (a read's handle) and
 * nfs_conn.c (the pool), it calls only nfs_call.c; the types are
 * nfs_types.h's.
 *
 * Each connection keeps up to NFS_FH_PER_CONN files open (their libnfs
 * file handles, which belong to its context), so the ranges of one file
 * after the first cost READs and one GETATTR, no OPEN and no CLOSE. A
 * handle lives until it is the least recently used of a full table (then
 * closed: the CLOSE goes out when the range that filled the table is done,
 * and its answer is taken before the connection's next operation), until
 * it was unused NFS_FH_IDLE_MS (closed by the next operation that finds it
 * so), or until its context goes (any failure of the context, a reconnect,
 * the backend's close: forgotten without a CLOSE, the server's lease
 * reclaims its state). NFSv4.0 serialises OPEN and CLOSE per open owner
 * (libnfs keeps one seqid per context), so at most one CLOSE is ever in
 * flight on a context, and never beside an OPEN.
 */
#ifndef SHARDFS_NFS_FH_H
#define SHARDFS_NFS_FH_H

#include <stdint.h>

#include "backends/nfs_types.h"

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

/* Destroys conn's context, if any (pending calls are cancelled), and
 * forgets its kept handles (nfsb_kept_forget_all()). */
void nfsb_conn_drop(struct nfs_backend *nb, struct nfs_conn *conn);

#endif
