/*
 * nfs_call: one asynchronous libnfs call on a context, driven by poll()
 * under a deadline of our own (the contract is in nfs_call.h), and the
 * trace of the calls. The bottom of the nfs backend's files: it calls
 * none of them. Each callback marks its struct nfs_call done and keeps
 * what libnfs handed it; nfsb_wait() services the context until the call
 * is done, the deadline passes or the connection fails.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backends/nfs_call.h"
#include "util/hex.h"

/* A call cancelled because its context is being destroyed (-EINTR,
 * "Command was cancelled") keeps the detail it had: the reason for the
 * destroy is logged, not the cancellation. */
static void call_error(struct nfs_call *c, int status, void *data)
{
	c->status = status;
	if (data != NULL && status != -EINTR)
		snprintf(c->err, sizeof(c->err), "%s", (const char *)data);
}

/* Marks c done with status 0, or with status and its detail if it
 * failed; true when the call succeeded and its data is to be taken. */
static bool call_done(struct nfs_call *c, int status, void *data)
{
	c->done = true;
	c->status = 0;
	if (status < 0) {
		call_error(c, status, data);
		return false;
	}
	return true;
}

void nfsb_cb_plain(int status, struct nfs_context *ctx, void *data, void *priv)
{
	(void)ctx;
	call_done(priv, status, data);
}

void nfsb_cb_open(int status, struct nfs_context *ctx, void *data, void *priv)
{
	struct nfs_call *c = priv;

	(void)ctx;
	if (call_done(c, status, data))
		c->fh = data;
}

void nfsb_cb_stat(int status, struct nfs_context *ctx, void *data, void *priv)
{
	struct nfs_call *c = priv;

	(void)ctx;
	if (call_done(c, status, data))
		memcpy(&c->st, data, sizeof(c->st));
}

void nfsb_cb_pread(int status, struct nfs_context *ctx, void *data, void *priv)
{
	struct nfs_call *c = priv;

	(void)ctx;
	if (!call_done(c, status, data))
		return;
	/* A server that sends more than was asked is not trusted with it. */
	if ((size_t)status > c->cap) {
		c->status = -EIO;
		snprintf(c->err, sizeof(c->err),
			 "READ returned %d bytes, %zu "
			 "asked",
			 status, c->cap);
		return;
	}
	memcpy(c->buf, data, (size_t)status);
	c->status = status;
}

void nfsb_cb_opendir(int status, struct nfs_context *ctx, void *data,
		     void *priv)
{
	struct nfs_call *c = priv;

	(void)ctx;
	if (call_done(c, status, data))
		c->dir = data;
}

int nfsb_wait(struct nfs_context *ctx, struct nfs_call *c, uint64_t deadline)
{
	while (!c->done) {
		uint64_t now = clock_now_ms();
		struct pollfd p;
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		p.fd = nfs_get_fd(ctx);
		p.events = (short)nfs_which_events(ctx);
		p.revents = 0;
		n = poll(&p, 1,
			 (int)nfsb_min(deadline - now, NFS_POLL_SLICE_MS));
		if (n < 0 && errno != EINTR)
			return -EIO;
		if (nfs_service(ctx, n > 0 ? p.revents : 0) < 0 && !c->done) {
			snprintf(c->err, sizeof(c->err), "%s",
				 nfs_get_error(ctx));
			return -ECONNRESET;
		}
	}
	return 0;
}

/* The outcome of a started call: the wait's failure, else the call's. */
int nfsb_finish(struct nfs_context *ctx, struct nfs_call *c, uint64_t deadline)
{
	int rc = nfsb_wait(ctx, c, deadline);

	if (rc < 0)
		return rc;
	return c->status < 0 ? c->status : 0;
}

/* A call that could not even be queued: the context is unusable. */
int nfsb_unqueued(struct nfs_context *ctx, struct nfs_call *c)
{
	snprintf(c->err, sizeof(c->err), "%s", nfs_get_error(ctx));
	return -ECONNRESET;
}

/* With SHARDFS_NFS_TRACE, every read attempt appends one line,
 * "GET /PATH/KEY STATUS BYTES CONN open=N read=N getattr=N" (the key
 * percent-encoded but for '/', STATUS 200, or 404, 412 (changed), 416
 * (short) or 503; then the RPCs the attempt made), the form of the test
 * suites' HTTP request logs, so they count what the server was asked for
 * over nfs:// as over s3://. A kept handle's life adds "OPEN", "CLOSE"
 * and "DROP" (forgotten without a CLOSE) lines of the same form. One
 * write(2) per line: appends from several processes do not interleave. */
void nfsb_trace(const struct nfs_backend *nb, const char *verb,
		const char *path, int rc, size_t bytes,
		const struct nfs_conn *conn, const char *extra)
{
	char line[8192];
	size_t n = 0, i, plen, vlen;
	int status = rc == 0	      ? 200
		     : rc == -ENOENT  ? 404
		     : rc == -ESTALE  ? 412
		     : rc == -ENODATA ? 416
		     : rc == -EINTR   ? 499
				      : 503;

	if (nb->trace_fd < 0)
		return;
	plen = strlen(nb->src.path);
	vlen = strnlen(verb, 16);
	memcpy(line, verb, vlen);
	line[vlen] = ' ';
	n = vlen + 1;
	if (plen > 1 && plen < 1024) {
		memcpy(line + n, nb->src.path, plen);
		n += plen;
	}
	for (i = 0; path[i] && n < sizeof(line) - 256; i++) {
		unsigned char c = (unsigned char)path[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || strchr("-._~/", c) != NULL) {
			line[n++] = (char)c;
		} else {
			hex_percent(c, line + n);
			n += 3;
		}
	}
	n += (size_t)snprintf(line + n, sizeof(line) - n, " %d %zu %td%s%s\n",
			      status, bytes, conn - nb->conns,
			      extra != NULL ? " " : "",
			      extra != NULL ? extra : "");
	if (n >= sizeof(line))
		n = sizeof(line) - 1;
	if (write(nb->trace_fd, line, n) < 0) {
		/* a diagnostic: nothing to do */
	}
}
