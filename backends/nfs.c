/*
 * nfs: a directory on an NFS server, reached through libnfs in user space
 * (no kernel mount), addressed as nfs://HOST[:PORT]/PATH (see nfs.h).
 *
 * Connections: a small pool of libnfs contexts, each one TCP connection
 * (and, over NFSv4, one client id of its own). A libnfs context is not
 * thread-safe, so a request takes one context for itself and gives it back
 * when done: requests run in parallel up to the pool size, which is what
 * makes the fetch engine's concurrency real. Contexts connect lazily.
 *
 * Deadlines: libnfs' synchronous calls can block forever on a server that
 * stops answering, so only its asynchronous calls are used, each driven by
 * poll() here with a deadline of our own: an RPC ends within
 * request_timeout_ms, a connection (mount) within connect_timeout_ms, and a
 * read with all its retries within read_timeout_ms of its start, whatever
 * the server does (a stalled or vanished server gives -EIO). A context
 * whose RPC timed out or whose connection failed is destroyed (libnfs'
 * own reconnect is off) and the next use connects afresh; transient
 * failures are retried on a new connection with capped exponential
 * backoff, up to `retries` times.
 *
 * Etag: "mtime_ns:size:ctime_ns", from the attributes the server reports
 * (readdir's for the manifest, GETATTR's for stat and read). Not the posix
 * backend's "mtime:size:ino:ctime": libnfs' NFSv4 readdir leaves the fileid 0,
 * and the change time serves as well, since a rewrite, a truncation or a
 * file renamed into place all set it, even when mtime is restored.
 *
 * Reads: a range is read through an open handle that its connection
 * keeps for the file's later ranges (nfs_fh.c): exactly the bytes asked
 * for, then one GETATTR of the handle once every READ has been answered,
 * whose etag must be the manifest's (read_checked() says why that one
 * check covers the READs before it). A file changed after the manifest,
 * before or during the range, gives -ESTALE, one shorter than asked -EIO;
 * bytes of two versions never reach a caller. A range that fails through
 * a kept handle is read once more through a handle opened now, so a file
 * replaced at its path is judged by what the path names now.
 *
 * Listing (nfs_list.c) walks directories recursively (libnfs reads a
 * directory whole, with READDIRPLUS or the NFSv4 equivalent, so there is
 * one round trip per directory and none per file). Only regular files and
 * directories are followed: symlinks and other types are skipped (counted,
 * the first few logged).
 *
 * Files, each calling only those below it: nfs_list.c (the listing,
 * which takes the etag's form from here) -> nfs.c -> nfs_conn.c (the
 * pool, connecting, retries) -> nfs_fh.c (kept file handles, dropping a
 * context) -> nfs_call.c (one call under a deadline, the trace);
 * nfs_types.h holds the state they share.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/nfs.h"
#include "backends/nfs_call.h"
#include "backends/nfs_conn.h"
#include "backends/nfs_fh.h"
#include "backends/nfs_impl.h"
#include "util/log.h"

size_t nfsb_format_etag(uint64_t mtime_ns, uint64_t size, uint64_t ctime_ns,
			char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%" PRIu64 ":%" PRIu64 ":%" PRIu64, mtime_ns,
			 size, ctime_ns);

	return n > 0 ? (size_t)n : 0;
}

static uint64_t stat_mtime_ns(const struct nfs_stat_64 *st)
{
	return st->nfs_mtime * 1000000000 + st->nfs_mtime_nsec;
}

static size_t stat_etag(const struct nfs_stat_64 *st, char *buf, size_t cap)
{
	return nfsb_format_etag(stat_mtime_ns(st), st->nfs_size,
				st->nfs_ctime * 1000000000 + st->nfs_ctime_nsec,
				buf, cap);
}

static bool same_version(const struct nfs_stat_64 *a,
			 const struct nfs_stat_64 *b)
{
	return a->nfs_ino == b->nfs_ino && a->nfs_size == b->nfs_size &&
	       a->nfs_mtime == b->nfs_mtime &&
	       a->nfs_mtime_nsec == b->nfs_mtime_nsec &&
	       a->nfs_ctime == b->nfs_ctime &&
	       a->nfs_ctime_nsec == b->nfs_ctime_nsec;
}

/* "/KEY", the path below the mount, for a key backend_key_relative()
 * accepts (libnfs would resolve "..": the result must stay below the
 * source). */
static int key_to_path(const char *key, size_t key_len, char **out)
{
	char *p;
	int rc = backend_key_relative(key, key_len);

	if (rc < 0)
		return rc;
	p = malloc(key_len + 2);
	if (p == NULL)
		return -ENOMEM;
	p[0] = '/';
	memcpy(p + 1, key, key_len);
	p[key_len + 1] = '\0';
	*out = p;
	return 0;
}

static bool stat_is_reg(const struct nfs_stat_64 *st)
{
	return S_ISREG((mode_t)st->nfs_mode);
}

/* ---- stat ---- */

static int stat_once(struct nfs_backend *nb, struct nfs_conn *conn,
		     const char *path, uint64_t deadline, struct nfs_call *c)
{
	int rc = nfsb_ready(nb, conn, deadline, c);

	if (rc < 0)
		return rc;
	if (nfs_stat64_async(conn->ctx, path, nfsb_cb_stat, c) != 0)
		return nfsb_unqueued(conn->ctx, c);
	return nfsb_finish(conn->ctx, c,
			   nfsb_min(deadline, clock_now_ms() + nb->request_ms));
}

/* The argument of every op on one file, or the head of it. */
struct file_arg {
	const char *path; /* "/KEY" below the mount */
};

static int stat_op(struct nfs_backend *nb, struct nfs_conn *conn, void *arg,
		   uint64_t deadline, struct nfs_call *c)
{
	return stat_once(nb, conn, ((struct file_arg *)arg)->path, deadline, c);
}

/* Runs op on the file key names, with file (op's argument, or its head)
 * pointing at its path, which *path receives (the caller frees it). Every
 * attempt, with its retries, ends within read_timeout_ms of now. reads:
 * op reads the file, so a connection that keeps it open is taken first.
 * Returns key_to_path()'s error (*path untouched: the key is not one a
 * source accepts), else nfsb_with_retries()'s result. */
static int key_op(struct nfs_backend *nb, const char *key, size_t key_len,
		  nfsb_op op, struct file_arg *file, bool reads, char **path,
		  struct nfs_call *c)
{
	int rc = key_to_path(key, key_len, path);

	if (rc < 0)
		return rc;
	file->path = *path;
	return nfsb_with_retries(nb, op, file, reads ? *path : NULL,
				 clock_now_ms() + nb->read_ms, c);
}

static int nfs_be_stat(struct backend *be, const char *key, size_t key_len,
		       struct backend_stat *st)
{
	struct nfs_backend *nb = (struct nfs_backend *)be;
	struct file_arg a;
	struct nfs_call c;
	char *path = NULL;
	int rc = key_op(nb, key, key_len, stat_op, &a, false, &path, &c);

	if (path == NULL)
		return rc;
	if (rc == 0 && !stat_is_reg(&c.st))
		rc = -ENOENT;
	if (rc == 0) {
		st->size = c.st.nfs_size;
		st->mtime_ns = (int64_t)stat_mtime_ns(&c.st);
		st->etag_len = stat_etag(&c.st, st->etag, sizeof(st->etag));
	} else if (rc != -ENOENT) {
		char kb[LOG_KEY_MAX];

		log_msg(LOG_ERR, "source %s%s: stat: %s%s%s", nb->display,
			log_key(kb, path, strlen(path)),
			strerror(-nfs_errno_map(rc)), c.err[0] ? ": " : "",
			c.err);
	}
	free(path);
	return rc < 0 ? nfs_errno_map(rc) : 0;
}

/* ---- read ---- */

struct read_arg {
	struct file_arg file; /* first: key_op() sets it */
	const struct backend_read *r;
	unsigned opens, reads, getattrs; /* this attempt's RPCs (the trace) */
	char why[200];			 /* a non-transient failure's detail */
};

static int fstat_fh(struct nfs_backend *nb, struct nfs_context *ctx,
		    struct nfsfh *fh, uint64_t deadline, struct nfs_call *c,
		    struct nfs_stat_64 *out)
{
	int rc;

	memset(c, 0, sizeof(*c));
	if (nfs_fstat64_async(ctx, fh, nfsb_cb_stat, c) != 0)
		return nfsb_unqueued(ctx, c);
	rc = nfsb_finish(ctx, c,
			 nfsb_min(deadline, clock_now_ms() + nb->request_ms));
	if (rc == 0)
		*out = c->st;
	return rc;
}

/* Reads a->r->len bytes at a->r->offset with up to NFS_READ_DEPTH READs in
 * flight on conn (one round trip per batch, not per READ); *done is how
 * many bytes from the start arrived (fewer at the end of the file). On a
 * failure with READs still in flight, the context is dropped here, so no
 * callback can reach this frame's calls later. A READ the server refused
 * leaves its status in c->status (-ESTALE: the server's word). */
static int read_range(struct nfs_backend *nb, struct nfs_conn *conn,
		      struct nfsfh *fh, struct read_arg *a, uint64_t deadline,
		      struct nfs_call *c, size_t *done_out)
{
	struct nfs_call calls[NFS_READ_DEPTH];
	size_t want[NFS_READ_DEPTH], done = 0;
	uint64_t chunk = nfs_get_readmax(conn->ctx);
	int rc = 0;

	if (chunk == 0 || chunk > NFS_READ_CHUNK_MAX)
		chunk = NFS_READ_CHUNK_MAX;
	while (done < a->r->len) {
		uint64_t dl =
			nfsb_min(deadline, clock_now_ms() + nb->request_ms);
		size_t off = done;
		int k, n;

		for (n = 0; n < NFS_READ_DEPTH && off < a->r->len; n++) {
			want[n] = nfsb_min(a->r->len - off, chunk);
			memset(&calls[n], 0, sizeof(calls[n]));
			calls[n].buf = (char *)a->r->buf + off;
			calls[n].cap = want[n];
			if (nfs_pread_async(conn->ctx, fh, a->r->offset + off,
					    want[n], nfsb_cb_pread,
					    &calls[n]) != 0) {
				rc = nfsb_unqueued(conn->ctx, c);
				break;
			}
			off += want[n];
		}
		a->reads += (unsigned)n;
		for (k = 0; k < n && rc == 0; k++) {
			rc = nfsb_wait(conn->ctx, &calls[k], dl);
			if (rc < 0)
				memcpy(c->err, calls[k].err, sizeof(c->err));
		}
		if (rc < 0) {
			nfsb_conn_drop(nb, conn);
			return rc;
		}
		/* In order: a short READ ends the bytes known contiguous; what
		 * came after it is asked again. */
		for (k = 0; k < n; k++) {
			if (calls[k].status < 0) {
				memcpy(c->err, calls[k].err, sizeof(c->err));
				c->status = calls[k].status;
				return calls[k].status;
			}
			done += (size_t)calls[k].status;
			if ((size_t)calls[k].status < want[k])
				break;
		}
		if (k < n && calls[k].status == 0)
			break; /* the end of the file */
		if (k < n)     /* the server reads less at a time: ask that */
			chunk = (uint64_t)calls[k].status;
	}
	*done_out = done;
	return 0;
}

/* One range through an open handle: its READs, then one GETATTR, which
 * is the check. The GETATTR is sent only once every READ has been
 * answered, so the server runs it after them: if it still reports the
 * manifest's mtime, size and ctime, no write reached the file before it,
 * and so none before the READs either (a write sets ctime as it starts,
 * and ctime never goes back), and the bytes are the manifest's version.
 * That holds for a handle just opened and for one kept from an earlier
 * range alike, so no GETATTR is needed before the READs. Without an etag
 * (nothing to compare with) the attributes before and after the READs
 * must agree instead, as they always did. */
static int read_checked(struct nfs_backend *nb, struct nfs_conn *conn,
			struct nfsfh *fh, struct read_arg *a, uint64_t deadline,
			struct nfs_call *c)
{
	struct nfs_stat_64 before, after;
	char cur[96];
	size_t done = 0, cur_len;
	int rc;

	if (a->r->etag == NULL) {
		a->getattrs++;
		rc = fstat_fh(nb, conn->ctx, fh, deadline, c, &before);
		if (rc < 0)
			return rc;
	}
	rc = read_range(nb, conn, fh, a, deadline, c, &done);
	if (rc < 0)
		return rc;
	a->getattrs++;
	rc = fstat_fh(nb, conn->ctx, fh, deadline, c, &after);
	if (rc < 0)
		return rc;
	if (!stat_is_reg(&after)) {
		snprintf(a->why, sizeof(a->why), "not a regular file");
		return -ENOENT;
	}
	cur_len = stat_etag(&after, cur, sizeof(cur));
	if (a->r->etag != NULL &&
	    (cur_len != a->r->etag_len ||
	     memcmp(cur, a->r->etag, a->r->etag_len) != 0)) {
		snprintf(a->why, sizeof(a->why),
			 "changed since the manifest was made (etag %.*s, now "
			 "%s)",
			 (int)(a->r->etag_len < 96 ? a->r->etag_len : 96),
			 a->r->etag, cur);
		return -ESTALE;
	}
	if (a->r->etag == NULL && !same_version(&before, &after)) {
		snprintf(a->why, sizeof(a->why),
			 "changed while being read (now %s)", cur);
		return -ESTALE;
	}
	if (done < a->r->len) {
		snprintf(a->why, sizeof(a->why),
			 "%zu bytes at %" PRIu64 " asked, the file ends at "
			 "%" PRIu64,
			 a->r->len, a->r->offset, after.nfs_size);
		return -ENODATA; /* not transient; -EIO to the caller */
	}
	return 0;
}

/* For a file the server says is not there: true if the directory conn's
 * context is mounted on was removed (its link count is 0). The server
 * then still finds that directory by its handle, and finds nothing in
 * it, rather than calling the handle stale, as long as anything keeps it
 * in use, as a file kept open in the old tree does: the source directory
 * was replaced, and the path must be looked up again on a fresh mount.
 * A GETATTR that gets no answer drops the context (its call would
 * outlive this frame); false then. */
static bool root_removed(struct nfs_backend *nb, struct nfs_conn *conn,
			 uint64_t deadline)
{
	struct nfs_call c;
	int rc;

	memset(&c, 0, sizeof(c));
	if (nfs_stat64_async(conn->ctx, "/", nfsb_cb_stat, &c) != 0)
		return false;
	rc = nfsb_wait(conn->ctx, &c,
		       nfsb_min(deadline, clock_now_ms() + nb->request_ms));
	if (rc < 0) {
		nfsb_conn_drop(nb, conn);
		return false;
	}
	return c.status == 0 && c.st.nfs_nlink == 0;
}

/* One attempt: through the handle conn keeps for the file, or one opened
 * now and kept. */
static int read_op(struct nfs_backend *nb, struct nfs_conn *conn, void *arg,
		   uint64_t deadline, struct nfs_call *c)
{
	struct read_arg *a = arg;
	struct nfs_kept *k;
	struct nfs_call cc;
	char rpcs[64];
	bool reused;
	int rc = 0;

	a->opens = a->reads = a->getattrs = 0;
	if (conn->ctx == NULL)
		rc = nfsb_connect(nb, conn, deadline, c);
	if (rc < 0)
		return rc;
	k = nfsb_kept_find(conn, a->file.path);
	reused = k != NULL;
	for (;;) {
		if (k == NULL) {
			a->opens++;
			rc = nfsb_kept_open(nb, conn, a->file.path, deadline, c,
					    &k);
			if (rc == -ENOENT && conn->ctx != NULL &&
			    root_removed(nb, conn, deadline)) {
				snprintf(c->err, sizeof(c->err),
					 "the source directory was removed "
					 "on the server");
				c->status = rc = -ESTALE;
			} else if (rc == -ENOENT && conn->ctx == NULL) {
				snprintf(c->err, sizeof(c->err),
					 "no answer to a GETATTR of the "
					 "source directory");
				rc = -ETIMEDOUT; /* retried */
			}
			if (rc < 0)
				break;
		}
		k->used_ms = clock_now_ms();
		rc = read_checked(nb, conn, k->fh, a, deadline, c);
		if (rc == 0 || !reused || conn->ctx == NULL ||
		    nfs_errno_transient(rc))
			break;
		/* A kept handle names the file that was at the path when it
		 * was opened. If that file changed, went or is no longer the
		 * one there (a new version renamed into place, the source
		 * directory replaced and the manifest reloaded), the answer
		 * must come from the path as it is now: once, close the
		 * handle (forget it if the server no longer knows it) and
		 * open the path again. A fresh handle's failure is the
		 * answer (a stale one goes to nfsb_with_retries(), which
		 * mounts afresh). */
		reused = false;
		a->why[0] = '\0';
		if (c->status == -ESTALE) {
			nfsb_kept_forget(nb, conn, k);
		} else if (nfsb_kept_close(nb, conn, k, deadline, &cc) < 0) {
			memcpy(c->err, cc.err, sizeof(c->err));
			rc = -ECONNRESET; /* the context went: retried */
			break;
		}
		k = NULL;
	}
	snprintf(rpcs, sizeof(rpcs), "open=%u read=%u getattr=%u", a->opens,
		 a->reads, a->getattrs);
	nfsb_trace(nb, "GET", a->file.path, rc, rc == 0 ? a->r->len : 0, conn,
		   rpcs);
	if (rc == 0) {
		nfsb_kept_trim(nb, conn, k, deadline);
		return 0;
	}
	if (conn->ctx == NULL)
		return rc; /* its handles went with it */
	if (nfs_errno_transient(rc)) {
		/* The connection is going away (nfsb_with_retries()): no
		 * CLOSE on it. */
		nfsb_conn_drop(nb, conn);
		return rc;
	}
	/* A file that changed, shrank or went: no more ranges through this
	 * handle. c keeps the failure's detail. */
	if (k != NULL && c->status == -ESTALE)
		nfsb_kept_forget(nb, conn, k);
	else if (k != NULL)
		nfsb_kept_close(nb, conn, k, deadline, &cc);
	return rc;
}

static int nfs_be_read(struct backend *be, const struct backend_read *r,
		       size_t *nread)
{
	struct nfs_backend *nb = (struct nfs_backend *)be;
	struct read_arg a = { .r = r };
	struct nfs_call c;
	char *path = NULL;
	int rc = key_op(nb, r->key, r->key_len, read_op, &a.file, true, &path,
			&c);

	if (path == NULL)
		return rc;
	if (rc < 0) {
		char kb[LOG_KEY_MAX];

		log_msg(LOG_ERR, "source %s%s: read at %" PRIu64 ": %s",
			nb->display, log_key(kb, path, strlen(path)), r->offset,
			a.why[0]	   ? a.why
			: c.err[0]	   ? c.err
			: rc == -ETIMEDOUT ? "no answer within read_timeout_ms"
					   : strerror(-nfs_errno_map(rc)));
		free(path);
		return nfs_errno_map(rc);
	}
	free(path);
	*nread = r->len;
	return 0;
}

/* ---- open and close ---- */

static int nfs_be_handles(const char *url)
{
	return strncmp(url, "nfs://", 6) == 0;
}

static void nfs_be_close(struct backend *be)
{
	struct nfs_backend *nb = (struct nfs_backend *)be;
	unsigned i;

	if (nb == NULL)
		return;
	/* Every call returned: contexts are idle. Destroying one without
	 * an UMOUNT lets the server expire its state (NFSv4 leases). */
	for (i = 0; nb->conns != NULL && i < nb->src.connections; i++)
		nfsb_conn_drop(nb, &nb->conns[i]);
	if (nb->trace_fd >= 0)
		close(nb->trace_fd);
	free(nb->conns);
	pthread_cond_destroy(&nb->cond);
	pthread_mutex_destroy(&nb->lock);
	free(nb->display);
	free(nb->libnfs_url);
	nfs_source_free(&nb->src);
	free(nb);
}

/* The libnfs URL that carries the options only (nfs_parse_url_dir()
 * applies them to a context); the path is passed to the mount itself,
 * so it needs no escaping. */
static char *libnfs_options_url(const struct nfs_source *s)
{
	char buf[512];
	size_t n;

	n = (size_t)snprintf(buf, sizeof(buf), "nfs://x/x?version=%d",
			     s->version);
	if (s->nfsport && n < sizeof(buf))
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "&nfsport=%u",
				      s->nfsport);
	if (s->mountport && n < sizeof(buf))
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "&mountport=%u",
				      s->mountport);
	if (n >= sizeof(buf))
		return NULL;
	return strdup(buf);
}

static int nfs_be_open(const char *url, const struct backend_options *opts,
		       struct backend **out)
{
	struct nfs_backend *nb;
	struct file_arg a = { .path = "/" };
	struct nfs_call c;
	const char *why = NULL;
	int rc;

	nb = calloc(1, sizeof(*nb));
	if (nb == NULL)
		return -ENOMEM;
	nb->base.ops = &backend_nfs_ops;
	nb->trace_fd = -1;
	rc = nfs_source_parse(url, &nb->src, &why);
	if (rc < 0) {
		if (rc == -EINVAL)
			log_msg(LOG_ERR, "source url '%s': %s", url, why);
		free(nb);
		return rc;
	}
	nb->connect_ms = opts && opts->connect_timeout_ms
				 ? opts->connect_timeout_ms
				 : BACKEND_CONNECT_TIMEOUT_MS_DEFAULT;
	nb->request_ms = opts && opts->request_timeout_ms
				 ? opts->request_timeout_ms
				 : BACKEND_REQUEST_TIMEOUT_MS_DEFAULT;
	nb->read_ms = opts && opts->read_timeout_ms
			      ? opts->read_timeout_ms
			      : BACKEND_READ_TIMEOUT_MS_DEFAULT;
	nb->retries = opts && opts->retries >= 0 ? (unsigned)opts->retries
						 : BACKEND_RETRIES_DEFAULT;
	if (opts != NULL) {
		nb->list_timeout_ms = opts->list_timeout_ms;
		nb->list_memory = opts->list_memory;
	}
	pthread_mutex_init(&nb->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&nb->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	nb->conns = calloc(nb->src.connections, sizeof(*nb->conns));
	if (getenv("SHARDFS_NFS_TRACE") != NULL) {
		/* A test and debug aid: unbounded, so never on by default. */
		const char *tf = getenv("SHARDFS_NFS_TRACE");

		nb->trace_fd = open(tf,
				    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
					    O_NOFOLLOW,
				    0600);
		if (nb->trace_fd < 0)
			log_msg(LOG_WARNING,
				"SHARDFS_NFS_TRACE: cannot open %s: %s; not "
				"tracing",
				tf, strerror(errno));
		else
			log_msg(LOG_NOTICE,
				"SHARDFS_NFS_TRACE: every nfs read is "
				"appended to %s",
				tf);
	}
	{
		char port[16] = "";
		bool v6 = strchr(nb->src.host, ':') != NULL;

		if (nb->src.nfsport)
			snprintf(port, sizeof(port), ":%u", nb->src.nfsport);
		rc = asprintf(&nb->display, "nfs://%s%s%s%s%s", v6 ? "[" : "",
			      nb->src.host, v6 ? "]" : "", port,
			      strcmp(nb->src.path, "/") ? nb->src.path : "");
	}
	nb->libnfs_url = libnfs_options_url(&nb->src);
	if (nb->conns == NULL || rc < 0 || nb->libnfs_url == NULL) {
		if (rc < 0)
			nb->display = NULL;
		nfs_be_close(&nb->base);
		return -ENOMEM;
	}
	/* Connect once now, so a wrong server, path or port fails the open
	 * (and a mount) with the reason, not the first read. */
	rc = nfsb_with_retries(nb, stat_op, &a, NULL,
			       clock_now_ms() + nb->read_ms, &c);
	if (rc == 0 && !S_ISDIR((mode_t)c.st.nfs_mode))
		rc = -ENOTDIR;
	if (rc < 0) {
		log_msg(LOG_ERR, "source %s: %s%s%s", nb->display,
			rc == -ETIMEDOUT ? "no answer in time"
					 : strerror(-nfs_errno_map(rc)),
			c.err[0] ? ": " : "", c.err);
		nfs_be_close(&nb->base);
		return nfs_errno_map(rc);
	}
	*out = &nb->base;
	return 0;
}

const struct backend_ops backend_nfs_ops = {
	.name = "nfs",
	.handles = nfs_be_handles,
	.open = nfs_be_open,
	.list = nfsb_list,
	.stat = nfs_be_stat,
	.read = nfs_be_read,
	.close = nfs_be_close,
};
