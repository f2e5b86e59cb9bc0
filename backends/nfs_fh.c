/*
 * nfs_fh: the files each nfs connection keeps open across ranges, and the
 * drop of a connection's context, which takes them with it (the contract
 * is in nfs_fh.h; why and what is checked when: nfs.c and
 * docs/backends/nfs.md). Called by nfs.c (a read's handle) and nfs_conn.c
 * (the pool); it calls only nfs_call.c.
 *
 * A table of NFS_FH_PER_CONN slots per connection, searched by path (a
 * few string compares; the pool searches the idle connections' tables
 * for the one that keeps a file open, so the ranges of one file tend to
 * go to one connection). Only the thread that holds a connection changes
 * its table, except that a connection dropped while idle (its context
 * destroyed under the pool's lock) forgets its handles there.
 *
 * Closing: NFSv4.0 OPEN and CLOSE carry the open owner's seqid, which
 * libnfs 4.0 keeps per context and reads when it builds the call, so two
 * of them in flight at once on one context would carry the same seqid.
 * A CLOSE is therefore either waited for at once (nfsb_kept_close()) or
 * sent and left in flight while the connection goes back to the pool
 * (nfsb_kept_trim()), and then taken by nfsb_kept_settle() before the
 * connection's next operation of any kind. Once libnfs has queued a
 * CLOSE the handle is its own: freed whether the CLOSE succeeds, fails or
 * is cancelled with its context (libnfs 4.0's nfs4_close_async; NFSv3's
 * close frees it at once, there is no CLOSE RPC).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/nfs_call.h"
#include "backends/nfs_fh.h"
#include "util/log.h"

struct nfs_kept *nfsb_kept_find(struct nfs_conn *conn, const char *path)
{
	unsigned i;

	for (i = 0; i < NFS_FH_PER_CONN; i++)
		if (conn->kept[i].path != NULL &&
		    strcmp(conn->kept[i].path, path) == 0)
			return &conn->kept[i];
	return NULL;
}

struct nfs_kept *nfsb_kept_victim(struct nfs_conn *conn,
				  const struct nfs_kept *keep)
{
	struct nfs_kept *lru = NULL;
	unsigned i;

	for (i = 0; i < NFS_FH_PER_CONN; i++) {
		struct nfs_kept *k = &conn->kept[i];

		if (k->path == NULL)
			return NULL;
		if (k != keep && (lru == NULL || k->used_ms < lru->used_ms))
			lru = k;
	}
	return lru;
}

struct nfs_kept *nfsb_kept_expired(struct nfs_conn *conn, uint64_t now)
{
	unsigned i;

	for (i = 0; i < NFS_FH_PER_CONN; i++) {
		struct nfs_kept *k = &conn->kept[i];

		if (k->path != NULL && k->used_ms + NFS_FH_IDLE_MS < now)
			return k;
	}
	return NULL;
}

struct nfs_conn *nfsb_pool_pick(struct nfs_conn *conns, unsigned n,
				const char *path)
{
	struct nfs_conn *connected = NULL, *any = NULL;
	unsigned i;

	for (i = 0; i < n; i++) {
		struct nfs_conn *cn = &conns[i];

		if (cn->busy)
			continue;
		if (cn->ctx == NULL) {
			if (any == NULL)
				any = cn;
			continue;
		}
		if (path != NULL && nfsb_kept_find(cn, path) != NULL)
			return cn;
		if (connected == NULL)
			connected = cn;
	}
	return connected != NULL ? connected : any;
}

/* Empties k's slot; the handle is someone else's concern by now. */
static void kept_clear(struct nfs_kept *k)
{
	free(k->path);
	k->path = NULL;
	k->fh = NULL;
	k->used_ms = 0;
}

void nfsb_kept_forget(struct nfs_backend *nb, struct nfs_conn *conn,
		      struct nfs_kept *k)
{
	nfsb_trace(nb, "DROP", k->path, 0, 0, conn, NULL);
	nfs_free_nfsfh(k->fh);
	kept_clear(k);
}

void nfsb_kept_forget_all(struct nfs_backend *nb, struct nfs_conn *conn)
{
	unsigned i;

	for (i = 0; i < NFS_FH_PER_CONN; i++)
		if (conn->kept[i].path != NULL)
			nfsb_kept_forget(nb, conn, &conn->kept[i]);
	if (conn->closing != NULL) {
		/* Its context is gone: libnfs cancelled the CLOSE and freed
		 * the handle. */
		nfsb_trace(nb, "CLOSE", conn->closing, -EINTR, 0, conn, NULL);
		free(conn->closing);
		conn->closing = NULL;
	}
}

void nfsb_conn_drop(struct nfs_backend *nb, struct nfs_conn *conn)
{
	if (conn->ctx != NULL) {
		nfs_destroy_context(conn->ctx);
		conn->ctx = NULL;
	}
	nfsb_kept_forget_all(nb, conn);
}

/* Queues the CLOSE of k's handle with c as its call; the handle is
 * libnfs' from here on, whatever happens. 0, or -ECONNRESET when libnfs
 * could not even queue it (the handle is freed here then). */
static int close_queue(struct nfs_conn *conn, struct nfs_kept *k,
		       struct nfs_call *c)
{
	memset(c, 0, sizeof(*c));
	if (nfs_close_async(conn->ctx, k->fh, nfsb_cb_plain, c) != 0) {
		nfs_free_nfsfh(k->fh);
		return nfsb_unqueued(conn->ctx, c);
	}
	return 0;
}

int nfsb_kept_close(struct nfs_backend *nb, struct nfs_conn *conn,
		    struct nfs_kept *k, uint64_t deadline, struct nfs_call *c)
{
	int rc = close_queue(conn, k, c);

	if (rc == 0)
		rc = nfsb_finish(
			conn->ctx, c,
			nfsb_min(deadline, clock_now_ms() + nb->request_ms));
	nfsb_trace(nb, "CLOSE", k->path, rc, 0, conn, NULL);
	kept_clear(k);
	if (rc < 0)
		nfsb_conn_drop(nb, conn);
	return rc;
}

/* Sends what libnfs has queued on ctx, without waiting for answers: its
 * async calls only write from nfs_service(). */
static int flush_out(struct nfs_context *ctx, uint64_t deadline)
{
	while (nfs_which_events(ctx) & POLLOUT) {
		uint64_t now = clock_now_ms();
		struct pollfd p = { .fd = nfs_get_fd(ctx), .events = POLLOUT };
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&p, 1,
			 (int)nfsb_min(deadline - now, NFS_POLL_SLICE_MS));
		if (n < 0 && errno != EINTR)
			return -EIO;
		if (nfs_service(ctx, n > 0 ? p.revents : 0) < 0)
			return -ECONNRESET;
	}
	return 0;
}

void nfsb_kept_trim(struct nfs_backend *nb, struct nfs_conn *conn,
		    const struct nfs_kept *keep, uint64_t deadline)
{
	struct nfs_kept *k;
	int rc;

	if (conn->ctx == NULL || conn->closing != NULL)
		return;
	k = nfsb_kept_victim(conn, keep);
	if (k == NULL)
		return;
	conn->close_deadline =
		nfsb_min(deadline, clock_now_ms() + nb->request_ms);
	rc = close_queue(conn, k, &conn->close_call);
	if (rc == 0) {
		conn->closing = k->path;
		k->path = NULL;
		kept_clear(k);
		rc = flush_out(conn->ctx, conn->close_deadline);
	} else {
		nfsb_trace(nb, "CLOSE", k->path, rc, 0, conn, NULL);
		kept_clear(k);
	}
	/* A connection that cannot even send is no use to the next op. */
	if (rc < 0)
		nfsb_conn_drop(nb, conn);
}

int nfsb_kept_settle(struct nfs_backend *nb, struct nfs_conn *conn,
		     uint64_t deadline, struct nfs_call *c)
{
	struct nfs_kept *k;
	int rc = 0;

	if (conn->ctx == NULL)
		return 0;
	if (conn->closing != NULL) {
		/* Overdue at close_deadline; but an answer that came while
		 * the connection sat idle is only read now, so it gets one
		 * poll slice even when that time has passed. */
		uint64_t due = clock_now_ms() + NFS_POLL_SLICE_MS;

		if (due < conn->close_deadline)
			due = conn->close_deadline;
		rc = nfsb_finish(conn->ctx, &conn->close_call,
				 nfsb_min(deadline, due));
		nfsb_trace(nb, "CLOSE", conn->closing, rc, 0, conn, NULL);
		free(conn->closing);
		conn->closing = NULL;
		if (rc < 0) {
			memcpy(c->err, conn->close_call.err, sizeof(c->err));
			nfsb_conn_drop(nb, conn);
			return rc;
		}
	}
	while ((k = nfsb_kept_expired(conn, clock_now_ms())) != NULL) {
		rc = nfsb_kept_close(nb, conn, k, deadline, c);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int nfsb_kept_open(struct nfs_backend *nb, struct nfs_conn *conn,
		   const char *path, uint64_t deadline, struct nfs_call *c,
		   struct nfs_kept **out)
{
	struct nfs_kept *k = nfsb_kept_victim(conn, NULL);
	char *dup;
	int rc;
	unsigned i;

	/* Settled already, unless the table filled while no CLOSE could
	 * go out: then the least recently used one is closed now. */
	if (k != NULL) {
		rc = nfsb_kept_close(nb, conn, k, deadline, c);
		if (rc < 0)
			return rc;
	}
	dup = strdup(path);
	if (dup == NULL)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	if (nfs_open_async(conn->ctx, path, O_RDONLY, nfsb_cb_open, c) != 0)
		rc = nfsb_unqueued(conn->ctx, c);
	else
		rc = nfsb_finish(
			conn->ctx, c,
			nfsb_min(deadline, clock_now_ms() + nb->request_ms));
	nfsb_trace(nb, "OPEN", path, rc, 0, conn, NULL);
	if (rc < 0) {
		free(dup);
		return rc;
	}
	for (i = 0; i < NFS_FH_PER_CONN && conn->kept[i].path != NULL; i++)
		;
	k = &conn->kept[i]; /* one is free: the victim above was closed */
	k->path = dup;
	k->fh = c->fh;
	k->used_ms = clock_now_ms();
	*out = k;
	return 0;
}
