/*
 * nfs_conn: the nfs backend's connections (see nfs.c for the design and
 * nfs_conn.h for the contract): libnfs contexts in a pool, connected
 * lazily, reconnects and retries. Called by nfs.c and nfs_list.c; it calls
 * nfs_fh.c, whose kept file handles go with their connection's context
 * (the pool hands a request for a file the connection that keeps it open,
 * settles a connection before its next op and drops a failed one), and
 * nfs_call.c, which drives each call under its deadline.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/nfs_call.h"
#include "backends/nfs_conn.h"
#include "backends/nfs_fh.h"
#include "util/backoff.h"
#include "util/log.h"

/* Connects conn (a context of its own, mounted on the source path) within
 * deadline. 0 or a negative errno, detail in c->err. */
int nfsb_connect(struct nfs_backend *nb, struct nfs_conn *conn,
		 uint64_t deadline, struct nfs_call *c)
{
	struct nfs_context *ctx = nfs_init_context();
	struct nfs_url *u;
	char name[96];
	int rc;

	if (ctx == NULL)
		return -ENOMEM;
	u = nfs_parse_url_dir(ctx, nb->libnfs_url);
	if (u == NULL) {
		snprintf(c->err, sizeof(c->err), "%s", nfs_get_error(ctx));
		nfs_destroy_context(ctx);
		return -EINVAL;
	}
	nfs_destroy_url(u);
	/* Our own deadlines and reconnects, never libnfs' endless ones. */
	nfs_set_autoreconnect(ctx, 0);
	nfs_set_dircache(ctx, 0);
	if (nb->src.uid >= 0)
		nfs_set_uid(ctx, (int)nb->src.uid);
	if (nb->src.gid >= 0)
		nfs_set_gid(ctx, (int)nb->src.gid);
	/* NFSv4 servers key open state by client name: every context needs
	 * its own. libnfs' default ("Libnfs pid:P SECONDS") is the same for
	 * contexts made in one second, and the server refuses the second
	 * (NFS4ERR_CLID_INUSE). libnfs 4.0 leaks that default when it is
	 * replaced, about 30 bytes per connection (tests/lsan.supp). */
	snprintf(name, sizeof(name), "shardfs-%ld-%p-%" PRIuFAST32,
		 (long)getpid(), (void *)nb, atomic_fetch_add(&nb->serial, 1));
	if (nb->src.version == 4)
		nfs4_set_client_name(ctx, name);
	memset(c, 0, sizeof(*c));
	if (nfs_mount_async(ctx, nb->src.host, nb->src.path, nfsb_cb_plain,
			    c) != 0)
		rc = nfsb_unqueued(ctx, c);
	else
		rc = nfsb_finish(
			ctx, c,
			nfsb_min(deadline, clock_now_ms() + nb->connect_ms));
	if (rc < 0) {
		nfs_destroy_context(ctx);
		return rc;
	}
	conn->ctx = ctx;
	if (atomic_exchange(&nb->down, false))
		log_msg(LOG_NOTICE, "source %s: connected again", nb->display);
	return 0;
}

int nfsb_ready(struct nfs_backend *nb, struct nfs_conn *conn, uint64_t deadline,
	       struct nfs_call *c)
{
	if (conn->ctx == NULL) {
		int rc = nfsb_connect(nb, conn, deadline, c);

		if (rc < 0)
			return rc;
	}
	memset(c, 0, sizeof(*c));
	return 0;
}

/* Takes a free connection, waiting for one until deadline: one that
 * keeps path open, else a connected one (a new connection costs a
 * mount). */
static int pool_get(struct nfs_backend *nb, const char *path, uint64_t deadline,
		    struct nfs_conn **out)
{
	struct timespec ts;
	int rc = 0;

	pthread_mutex_lock(&nb->lock);
	for (;;) {
		struct nfs_conn *idle =
			nfsb_pool_pick(nb->conns, nb->src.connections, path);

		if (idle != NULL) {
			idle->busy = true;
			*out = idle;
			break;
		}
		ts.tv_sec = (time_t)(deadline / 1000);
		ts.tv_nsec = (long)(deadline % 1000) * 1000000;
		rc = pthread_cond_timedwait(&nb->cond, &nb->lock, &ts);
		if (rc == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
		rc = 0;
	}
	pthread_mutex_unlock(&nb->lock);
	return rc;
}

static void pool_put(struct nfs_backend *nb, struct nfs_conn *conn)
{
	pthread_mutex_lock(&nb->lock);
	conn->busy = false;
	pthread_cond_signal(&nb->cond);
	pthread_mutex_unlock(&nb->lock);
}

/* Worth another attempt on a new connection: not a refusal that libnfs
 * reports with a status that looks transient. */
static bool attempt_transient(int rc, const struct nfs_call *c)
{
	return nfs_errno_transient(rc) && !nfs_error_refused(rc, c->err);
}

/* Drops every idle connected context: they reach the same server, so a
 * restart, an expired lease or a replaced export root that broke one broke
 * them too, and a retry that took another of them would fail the same way. */
static void pool_drop_idle(struct nfs_backend *nb)
{
	unsigned i;

	pthread_mutex_lock(&nb->lock);
	for (i = 0; i < nb->src.connections; i++)
		if (!nb->conns[i].busy)
			nfsb_conn_drop(nb, &nb->conns[i]);
	pthread_mutex_unlock(&nb->lock);
}

/* After a failed attempt: a transient failure drops the connection (a
 * timed-out RPC may still be queued on it) and the idle ones, and is
 * logged once until a connection comes up again. */
static void conn_failed(struct nfs_backend *nb, struct nfs_conn *conn, int rc,
			const struct nfs_call *c)
{
	char err[sizeof(c->err)];

	if (!attempt_transient(rc, c))
		return;
	memcpy(err, c->err, sizeof(err)); /* c may be this context's call */
	nfsb_conn_drop(nb, conn);
	pool_drop_idle(nb);
	if (!atomic_exchange(&nb->down, true))
		log_msg(LOG_WARNING, "source %s: %s%s%s; reconnecting",
			nb->display,
			rc == -ETIMEDOUT ? "no answer in time"
					 : "connection failed",
			err[0] ? ": " : "", err);
}

/* Shorter than HTTP's (http.c, HTTP_BACKOFF): there is no object store's
 * SlowDown to wait out; what is retried here is a dropped connection, a
 * timeout or a server restart, each on a new connection, so 50 ms doubling
 * to 1 s reconnects quickly without spinning, and the request's deadline
 * ends the tries. */
static const struct backoff_policy NFS_BACKOFF = { .base_ms = 50,
						   .cap_ms = 1000 };

/* Sleeps before retry attempt (1 = first), never past deadline. */
static void backoff(unsigned attempt, uint64_t deadline)
{
	uint64_t ms = backoff_delay_ms(&NFS_BACKOFF, attempt);
	uint64_t now = clock_now_ms();
	struct timespec ts;

	if (now >= deadline)
		return;
	ms = nfsb_min(ms, deadline - now);
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	nanosleep(&ts, NULL);
}

/* Closes the expired handles of one idle connection, if one has any: a
 * connection the pool no longer hands out (fewer readers now) would
 * otherwise keep its files open on the server for as long as the daemon
 * runs. One per request, so a request pays for a few CLOSEs at most, and
 * only when a handle has been idle NFS_FH_IDLE_MS. */
static void sweep_idle(struct nfs_backend *nb)
{
	struct nfs_conn *conn = NULL;
	struct nfs_call c;
	uint64_t now = clock_now_ms();
	unsigned i;

	pthread_mutex_lock(&nb->lock);
	for (i = 0; i < nb->src.connections && conn == NULL; i++) {
		struct nfs_conn *cn = &nb->conns[i];

		if (!cn->busy && cn->ctx != NULL &&
		    nfsb_kept_expired(cn, now) != NULL) {
			cn->busy = true;
			conn = cn;
		}
	}
	pthread_mutex_unlock(&nb->lock);
	if (conn == NULL)
		return;
	memset(&c, 0, sizeof(c));
	/* Its own deadline: the request's may be spent, and a CLOSE cut
	 * short would drop a healthy connection. */
	if (nfsb_kept_settle(nb, conn, now + nb->request_ms, &c) < 0)
		log_msg(LOG_DEBUG, "source %s: closing idle files: %s",
			nb->display, c.err);
	pool_put(nb, conn);
}

/* Runs op on a pooled connection, retrying transient failures on a new
 * connection until retries or the deadline run out. */

int nfsb_with_retries(struct nfs_backend *nb, nfsb_op op, void *arg,
		      const char *path, uint64_t deadline, struct nfs_call *c)
{
	struct nfs_conn *conn;
	unsigned attempt;
	bool stale_retried = false;
	int rc = -EIO;

	for (attempt = 0; attempt <= nb->retries; attempt++) {
		if (attempt > 0 && !(stale_retried && rc == -ESTALE))
			backoff(attempt, deadline);
		if (clock_now_ms() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		memset(c, 0, sizeof(*c));
		rc = pool_get(nb, path, deadline, &conn);
		if (rc < 0) {
			snprintf(c->err, sizeof(c->err),
				 "all %u connections busy",
				 nb->src.connections);
			break;
		}
		/* A CLOSE left in flight that failed dropped the context:
		 * the server may be gone, so the others go too, but op
		 * itself still runs, on a new connection. */
		rc = nfsb_kept_settle(nb, conn, deadline, c);
		if (rc < 0)
			conn_failed(nb, conn, rc, c);
		memset(c, 0, sizeof(*c));
		rc = op(nb, conn, arg, deadline, c);
		if (rc < 0)
			conn_failed(nb, conn, rc, c);
		/* The server called a handle stale (not our etag check, which
		 * leaves c->status 0): the mount's root may have been replaced
		 * (the export's directory swapped). Once, at no cost in
		 * retries, on a fresh mount, which looks the path up again. */
		if (rc == -ESTALE && c->status == -ESTALE && !stale_retried) {
			stale_retried = true;
			nfsb_conn_drop(nb, conn);
			pool_drop_idle(nb);
			pool_put(nb, conn);
			attempt--;
			continue;
		}
		pool_put(nb, conn);
		if (rc >= 0 || !attempt_transient(rc, c))
			break;
	}
	sweep_idle(nb);
	return rc;
}
