/*
 * run: one object through a transform (transform.h): the poll loop that
 * services the process's stdin, stdout and stderr together (so no pipe
 * fills up and stops both sides), the per-object process, and the
 * workers: started by the transform's spawner thread, checked before each
 * request (alive, nothing unasked on stdout), replaced after any fault.
 * Failures are classified here, once, into a transform_failure.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transform/protocol.h"
#include "transform/transform_impl.h"
#include "util/log.h"
#include "util/str.h"

#define XF_READ_CHUNK 65536

static void xf_tail_add(struct xf_tail *t, const char *p, size_t n)
{
	if (n >= TRANSFORM_TAIL_MAX) {
		memcpy(t->buf, p + n - TRANSFORM_TAIL_MAX, TRANSFORM_TAIL_MAX);
		t->len = TRANSFORM_TAIL_MAX;
		return;
	}
	if (t->len + n > TRANSFORM_TAIL_MAX) {
		size_t drop = t->len + n - TRANSFORM_TAIL_MAX;

		memmove(t->buf, t->buf + drop, t->len - drop);
		t->len -= drop;
	}
	memcpy(t->buf + t->len, p, n);
	t->len += n;
}

void transform_fail_set(struct transform_failure *f, enum transform_fail what,
			const struct xf_tail *tail, const char *fmt, ...)
{
	char msg[sizeof(f->message)];
	va_list ap;

	f->what = what;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	str_printable(f->message, sizeof(f->message), msg, strlen(msg));
	f->stderr_tail[0] = '\0';
	if (tail != NULL && tail->len)
		str_printable(f->stderr_tail, sizeof(f->stderr_tail), tail->buf,
			      tail->len);
}

/* Does a failed command's stderr say it ran out of memory? The rlimit
 * makes allocations fail; how a program says so is up to it, so this
 * looks for what common runtimes print. */
static bool xf_says_memory(const struct xf_tail *tail)
{
	static const char *const words[] = { "MemoryError",
					     "Cannot allocate memory",
					     "out of memory",
					     "Out of memory",
					     "bad_alloc",
					     "memory exhausted",
					     NULL };
	char s[TRANSFORM_TAIL_MAX + 1];
	size_t i;

	memcpy(s, tail->buf, tail->len);
	for (i = 0; i < tail->len; i++)
		if (s[i] == '\0')
			s[i] = ' ';
	s[tail->len] = '\0';
	for (i = 0; words[i] != NULL; i++)
		if (strstr(s, words[i]) != NULL)
			return true;
	return false;
}

/* Fills f from a reaped process's wait status (not 0). */
static int xf_fail_status(struct transform *t, int st,
			  const struct xf_tail *tail,
			  struct transform_failure *f, const char *who)
{
	int sig = 0, code = -1;

	if (st == -1) {
		transform_fail_set(f, TRANSFORM_FAIL_EXIT, tail,
				   "%s ended, its exit status lost", who);
		f->status = -1;
		return -EIO;
	}
	if (WIFSIGNALED(st))
		sig = WTERMSIG(st);
	else if (WIFEXITED(st))
		code = WEXITSTATUS(st);
	/* bwrap exits 128 + N when the sandboxed command died of signal N. */
	if (t->bwrap && code > 128 && code < 128 + 65) {
		sig = code - 128;
		code = -1;
	}
	if (sig == SIGXCPU)
		transform_fail_set(f, TRANSFORM_FAIL_SIGNAL, tail,
				   "%s killed by SIGXCPU (cpu time limit)",
				   who);
	else if (sig)
		transform_fail_set(f, TRANSFORM_FAIL_SIGNAL, tail,
				   "%s killed by signal %d", who, sig);
	else
		transform_fail_set(f, TRANSFORM_FAIL_EXIT, tail,
				   "%s exited with status %d", who, code);
	f->status = code;
	f->signal = sig;
	if (xf_says_memory(tail)) {
		char m[sizeof(f->message) + 32];

		snprintf(m, sizeof(m), "out of memory (limit): %s", f->message);
		snprintf(f->message, sizeof(f->message), "%.*s",
			 (int)sizeof(f->message) - 1, m);
		f->what = TRANSFORM_FAIL_MEMORY;
	}
	return -EIO;
}

/* Reads what is there on fd into the tail; returns false at EOF/error. */
static bool xf_drain(int fd, struct xf_tail *tail)
{
	char buf[4096];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n > 0) {
			xf_tail_add(tail, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && errno == EAGAIN;
	}
}

/* One run's I/O: segments to write, then stdout into out. */
struct xf_io {
	const uint8_t *seg[2];
	size_t seg_len[2];
	size_t seg_i, seg_off;
	bool close_in; /* close stdin after the last byte (process mode) */
	uint8_t *out;
	size_t out_len, out_cap;
	bool framed;	  /* worker mode: stop at the end of one reply */
	uint64_t want;	  /* framed: bytes of reply expected in all */
	uint64_t out_max; /* the most stdout may hold */
	bool out_eof, err_eof;
};

enum xf_pump_end {
	XF_DONE,    /* framed: the reply is whole; else stdout EOF */
	XF_EOF,	    /* framed: stdout closed before the reply was whole */
	XF_TIMEOUT, /* the deadline passed */
	XF_TOO_BIG, /* past out_max */
	XF_BAD,	    /* framed: a bad reply header */
	XF_NOMEM,
};

static int xf_out_room(struct xf_io *io, size_t need)
{
	size_t cap;
	uint8_t *n;

	if (io->out_cap - io->out_len >= need)
		return 0;
	cap = io->out_cap ? io->out_cap : XF_READ_CHUNK;
	while (cap - io->out_len < need)
		cap *= 2;
	n = realloc(io->out, cap);
	if (n == NULL)
		return -ENOMEM;
	io->out = n;
	io->out_cap = cap;
	return 0;
}

/* A framed reply's header is in: checks it and sets want. */
static enum xf_pump_end xf_reply_header(struct xf_io *io)
{
	uint8_t status = io->out[0];
	uint64_t len = le_get64(io->out + 1);

	if (status == TRANSFORM_PROTO_OK && len > io->out_max)
		return XF_TOO_BIG;
	if (status == TRANSFORM_PROTO_ERROR && len > TRANSFORM_PROTO_ERROR_MAX)
		return XF_BAD;
	if (status != TRANSFORM_PROTO_OK && status != TRANSFORM_PROTO_ERROR)
		return XF_BAD;
	io->want = TRANSFORM_PROTO_REPLY_HDR + len;
	return XF_DONE;
}

static enum xf_pump_end xf_pump(struct transform_proc *p, struct xf_io *io,
				struct xf_tail *tail, uint64_t deadline)
{
	for (;;) {
		struct pollfd pfd[3];
		int n = 0, i_in = -1, i_out = -1, i_err = -1;
		uint64_t now = transform_now_ms();
		int r;

		if (io->framed && io->out_len == io->want)
			return XF_DONE;
		if (!io->framed && io->out_eof && (io->err_eof || p->err < 0))
			return XF_DONE;
		if (now >= deadline)
			return XF_TIMEOUT;
		if (p->in >= 0 && io->seg_i < 2) {
			i_in = n;
			pfd[n++] = (struct pollfd){ .fd = p->in,
						    .events = POLLOUT };
		}
		if (!io->out_eof) {
			i_out = n;
			pfd[n++] = (struct pollfd){ .fd = p->out,
						    .events = POLLIN };
		}
		if (!io->err_eof && p->err >= 0) {
			i_err = n;
			pfd[n++] = (struct pollfd){ .fd = p->err,
						    .events = POLLIN };
		}
		if (n == 0)
			return io->framed ? XF_EOF : XF_DONE;
		/* In steps: a timeout_ms past INT_MAX must not wrap. */
		r = poll(pfd, (nfds_t)n,
			 deadline - now > 10000 ? 10000
						: (int)(deadline - now));
		if (r < 0 && errno != EINTR)
			return XF_TIMEOUT;
		if (r <= 0)
			continue;
		if (i_err >= 0 && pfd[i_err].revents)
			io->err_eof = !xf_drain(p->err, tail);
		if (i_in >= 0 && pfd[i_in].revents) {
			ssize_t w = 0;

			while (io->seg_i < 2) {
				size_t left =
					io->seg_len[io->seg_i] - io->seg_off;

				if (left == 0) {
					io->seg_i++;
					io->seg_off = 0;
					continue;
				}
				w = write(p->in,
					  io->seg[io->seg_i] + io->seg_off,
					  left);
				if (w <= 0)
					break;
				io->seg_off += (size_t)w;
			}
			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				/* EPIPE: it stopped reading; what it wrote
				 * and how it exits decide. */
				close(p->in);
				p->in = -1;
			} else if (io->seg_i == 2 && io->close_in) {
				close(p->in);
				p->in = -1;
			}
		}
		if (i_out >= 0 && pfd[i_out].revents) {
			for (;;) {
				size_t room;
				ssize_t got;

				if (io->framed) {
					uint64_t need = io->want - io->out_len;

					if (need == 0)
						break;
					room = need > XF_READ_CHUNK
						       ? XF_READ_CHUNK
						       : (size_t)need;
				} else {
					if (io->out_len > io->out_max)
						return XF_TOO_BIG;
					room = XF_READ_CHUNK;
				}
				if (xf_out_room(io, room))
					return XF_NOMEM;
				got = read(p->out, io->out + io->out_len, room);
				if (got < 0 && errno == EINTR)
					continue;
				if (got < 0 && errno == EAGAIN)
					break;
				if (got <= 0) {
					io->out_eof = true;
					if (io->framed)
						return XF_EOF;
					break;
				}
				io->out_len += (size_t)got;
				if (!io->framed && io->out_len > io->out_max)
					return XF_TOO_BIG;
				if (io->framed &&
				    io->want == TRANSFORM_PROTO_REPLY_HDR &&
				    io->out_len == TRANSFORM_PROTO_REPLY_HDR) {
					enum xf_pump_end e =
						xf_reply_header(io);

					if (e != XF_DONE)
						return e;
				}
			}
		}
	}
}

/* Sends SIGPIPE's for a write to a closed pipe to nowhere: blocked in
 * this thread during a run, and taken back if the run raised it. */
struct xf_sigpipe {
	sigset_t old;
	bool was_pending;
};

static void xf_sigpipe_block(struct xf_sigpipe *s)
{
	sigset_t set, pend;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &s->old);
	sigpending(&pend);
	s->was_pending = sigismember(&pend, SIGPIPE);
}

static void xf_sigpipe_restore(struct xf_sigpipe *s)
{
	sigset_t set, pend;
	struct timespec zero = { 0, 0 };

	sigpending(&pend);
	if (!s->was_pending && sigismember(&pend, SIGPIPE)) {
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &s->old, NULL);
}

static int xf_fail_start(struct transform_failure *f, int rc, const char *err)
{
	transform_fail_set(f, TRANSFORM_FAIL_START, NULL, "could not start: %s",
			   err);
	return rc == -ENOMEM ? -ENOMEM : -ECHILD;
}

/* Kills p, reaps it (SIGKILL: it goes at once) and closes its pipes. */
void transform_kill_reap(struct transform_proc *p)
{
	int st;

	if (p->pid > 0) {
		transform_proc_kill(p);
		if (transform_proc_reap(p, 10000, &st))
			log_msg(LOG_ERR,
				"transform: process %d survived SIGKILL 10 s",
				(int)p->pid);
	}
	transform_proc_close_fds(p);
}

static int transform_run_process(struct transform *t, const void *in,
				 size_t in_len, struct transform_output *out,
				 struct transform_failure *f)
{
	struct transform_proc p = { -1, -1, -1, -1, &t->cpu_ns };
	struct xf_tail tail = { .len = 0 };
	struct xf_io io = { .seg = { in, NULL },
			    .seg_len = { in_len, 0 },
			    .close_in = true,
			    .out_max = t->output_max };
	uint64_t deadline = transform_now_ms() + t->timeout_ms;
	char err[200];
	enum xf_pump_end e;
	int st, rc;

	rc = transform_launch_start(t->launch, &p, err, sizeof(err));
	if (rc)
		return xf_fail_start(f, rc, err);
	if (in_len == 0) {
		close(p.in);
		p.in = -1;
	}
	e = xf_pump(&p, &io, &tail, deadline);
	if (e == XF_DONE) {
		/* stdout and stderr are closed; it exits now, or within
		 * the deadline. */
		uint64_t now = transform_now_ms();

		if (transform_proc_reap(
			    &p, now < deadline ? (unsigned)(deadline - now) : 0,
			    &st))
			e = XF_TIMEOUT;
	}
	if (e != XF_DONE) {
		transform_kill_reap(&p);
		if (e == XF_TIMEOUT) {
			transform_fail_set(f, TRANSFORM_FAIL_TIMEOUT, &tail,
					   "killed after the timeout of %u ms",
					   t->timeout_ms);
			rc = -ETIMEDOUT;
		} else if (e == XF_TOO_BIG) {
			transform_fail_set(
				f, TRANSFORM_FAIL_OUTPUT_MAX, &tail,
				"killed: output over output_max (%llu bytes)",
				(unsigned long long)t->output_max);
			rc = -EFBIG;
		} else {
			rc = -ENOMEM;
			transform_fail_set(f, TRANSFORM_FAIL_START, &tail,
					   "out of memory in the daemon");
		}
		goto done;
	}
	transform_proc_close_fds(&p);
	if (st != 0) {
		rc = xf_fail_status(t, st, &tail, f, "the transform");
		goto done;
	}
	if (io.out_len == 0) {
		transform_fail_set(f, TRANSFORM_FAIL_EMPTY, &tail,
				   "exited 0 with no output");
		rc = -EIO;
		goto done;
	}
	out->data = io.out;
	out->len = io.out_len;
	io.out = NULL;
	rc = 0;
done:
	free(io.out);
	return rc;
}

void *transform_spawner(void *arg)
{
	struct transform *t = arg;

	pthread_mutex_lock(&t->spawn_mu);
	for (;;) {
		struct xf_spawn_req *r = t->spawn_head;

		if (r == NULL) {
			if (t->spawn_stop)
				break;
			pthread_cond_wait(&t->spawn_cv, &t->spawn_mu);
			continue;
		}
		t->spawn_head = r->next;
		pthread_mutex_unlock(&t->spawn_mu);
		r->rc = transform_launch_start(t->launch, &r->p, r->err,
					       sizeof(r->err));
		pthread_mutex_lock(&t->spawn_mu);
		r->done = true;
		pthread_cond_broadcast(&t->spawn_cv);
	}
	pthread_mutex_unlock(&t->spawn_mu);
	return NULL;
}

/* Starts a worker through the spawner thread. The wait ends when the
 * spawner is done, which transform_launch_start() bounds. */
static int xf_worker_start(struct transform *t, struct xf_worker *w, char *err,
			   size_t cap)
{
	struct xf_spawn_req r = { .rc = -ECHILD };
	struct xf_spawn_req **pp;

	pthread_mutex_lock(&t->spawn_mu);
	for (pp = &t->spawn_head; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = &r;
	pthread_cond_broadcast(&t->spawn_cv);
	while (!r.done)
		pthread_cond_wait(&t->spawn_cv, &t->spawn_mu);
	pthread_mutex_unlock(&t->spawn_mu);
	if (r.rc) {
		snprintf(err, cap, "%s", r.err);
		return r.rc;
	}
	w->p = r.p;
	w->p.cpu_ns = &t->cpu_ns;
	w->tail.len = 0;
	return 0;
}

/* Is an idle worker still fit for a request: alive and with nothing on
 * its stdout? Drains its stderr. */
static bool xf_worker_idle_ok(struct xf_worker *w)
{
	struct pollfd pfd = { .fd = w->p.out, .events = POLLIN };

	if (w->p.err >= 0 && !xf_drain(w->p.err, &w->tail)) {
		close(w->p.err);
		w->p.err = -1;
	}
	/* A worker whose stdin broke (EPIPE) cannot take a request. */
	return w->p.in >= 0 && poll(&pfd, 1, 0) == 0;
}

static int transform_run_worker(struct transform *t, struct xf_worker *w,
				const void *in, size_t in_len,
				struct transform_output *out,
				struct transform_failure *f)
{
	uint8_t hdr[TRANSFORM_PROTO_REQ_HDR];
	struct xf_io io = { .seg = { hdr, in },
			    .seg_len = { sizeof(hdr), in_len },
			    .framed = true,
			    .want = TRANSFORM_PROTO_REPLY_HDR,
			    .out_max = t->output_max };
	uint64_t deadline;
	char err[200];
	enum xf_pump_end e;
	unsigned attempt;
	uint64_t len;
	int st = 0, rc;

	le_put64(hdr, in_len);
	deadline = transform_now_ms() + t->timeout_ms;
	for (attempt = 0;; attempt++) {
		if (w->p.pid > 0 && !xf_worker_idle_ok(w))
			transform_kill_reap(
				&w->p); /* died idle, or wrote unasked */
		if (w->p.pid <= 0) {
			rc = xf_worker_start(t, w, err, sizeof(err));
			if (rc)
				return xf_fail_start(f, rc, err);
		}
		e = xf_pump(&w->p, &io, &w->tail, deadline);
		/* A worker may end itself cleanly after a reply (recycling,
		 * like gunicorn's max_requests); if it did so just as this
		 * request went out, it exits 0 with no byte of reply: that
		 * is "died between objects", so a new worker gets the
		 * object, once. */
		if (e != XF_EOF || io.out_len != 0 || attempt > 0 ||
		    transform_proc_reap(&w->p, 2000, &st) || st != 0)
			break;
		transform_proc_close_fds(&w->p);
		io.seg_i = 0;
		io.seg_off = 0;
		io.out_eof = false;
		io.err_eof = false;
	}
	if (e == XF_DONE && io.out[0] == TRANSFORM_PROTO_OK) {
		len = io.out_len - TRANSFORM_PROTO_REPLY_HDR;
		if (len == 0) {
			transform_fail_set(
				f, TRANSFORM_FAIL_EMPTY, &w->tail,
				"the worker replied ok with no output");
			rc = -EIO;
			goto done;
		}
		memmove(io.out, io.out + TRANSFORM_PROTO_REPLY_HDR, len);
		out->data = io.out;
		out->len = len;
		io.out = NULL;
		rc = 0;
		goto done;
	}
	if (e == XF_DONE) {
		len = io.out_len - TRANSFORM_PROTO_REPLY_HDR;
		transform_fail_set(f, TRANSFORM_FAIL_ERROR, &w->tail,
				   "error: %.*s", (int)(len > 200 ? 200 : len),
				   (const char *)io.out +
					   TRANSFORM_PROTO_REPLY_HDR);
		/* A worker that caught its MemoryError (shardfs.transform's
		 * serve() does) hit the limit all the same. */
		if (strstr(f->message, "MemoryError") != NULL)
			f->what = TRANSFORM_FAIL_MEMORY;
		rc = -EIO; /* the worker is fine: it said no */
		goto done;
	}
	/* Anything else ends this worker. One that closed its stdout is
	 * likely exiting: its own status says more than our SIGKILL. */
	if (w->p.pid > 0 &&
	    (e != XF_EOF || transform_proc_reap(&w->p, 2000, &st))) {
		st = 0;
		transform_proc_kill(&w->p);
		if (transform_proc_reap(&w->p, 10000, &st))
			st = 0;
	}
	if (w->p.err >= 0)
		xf_drain(w->p.err, &w->tail);
	switch (e) {
	case XF_TIMEOUT:
		transform_fail_set(f, TRANSFORM_FAIL_TIMEOUT, &w->tail,
				   "worker killed after the timeout of %u ms",
				   t->timeout_ms);
		rc = -ETIMEDOUT;
		break;
	case XF_TOO_BIG:
		transform_fail_set(
			f, TRANSFORM_FAIL_OUTPUT_MAX, &w->tail,
			"worker killed: reply of %llu bytes over output_max "
			"(%llu bytes)",
			(unsigned long long)le_get64(io.out + 1),
			(unsigned long long)t->output_max);
		rc = -EFBIG;
		break;
	case XF_BAD:
		transform_fail_set(
			f, TRANSFORM_FAIL_PROTOCOL, &w->tail,
			"worker killed: bad reply header (status %u, length "
			"%llu)",
			io.out[0], (unsigned long long)le_get64(io.out + 1));
		rc = -EIO;
		break;
	case XF_NOMEM:
		transform_fail_set(f, TRANSFORM_FAIL_START, &w->tail,
				   "out of memory in the daemon");
		rc = -ENOMEM;
		break;
	default: /* XF_EOF: it died mid-object */
		if (st != 0)
			rc = xf_fail_status(t, st, &w->tail, f,
					    "the worker (mid-object)");
		else {
			transform_fail_set(
				f, TRANSFORM_FAIL_PROTOCOL, &w->tail,
				"worker exited mid-object (%zu of %llu reply "
				"bytes)",
				io.out_len, (unsigned long long)io.want);
			rc = -EIO;
		}
		break;
	}
	w->p.pid = -1;
	transform_proc_close_fds(&w->p);
done:
	free(io.out);
	return rc;
}

int transform_run_slot(struct transform *t, int slot, const void *in,
		       size_t in_len, struct transform_output *out,
		       struct transform_failure *f)
{
	struct xf_sigpipe sp;
	int rc;

	xf_sigpipe_block(&sp);
	if (t->mode == TRANSFORM_MODE_WORKER)
		rc = transform_run_worker(t, &t->wk[slot], in, in_len, out, f);
	else
		rc = transform_run_process(t, in, in_len, out, f);
	xf_sigpipe_restore(&sp);
	return rc;
}
