/*
 * transform: slots, the per-object and worker runs, the identity
 * (transform.h). The I/O of one run is a single poll loop in the caller's
 * thread over the process's stdin, stdout and stderr, so no pipe can fill
 * up and stop both sides. A slot is a permit to run (process mode) or one
 * worker (worker mode); `workers` slots bound the processes at once.
 *
 * Workers are started by the transform's own spawner thread, not by the
 * caller's: bwrap's --die-with-parent (and the child's PDEATHSIG) fire
 * when the *thread* that forked exits, and callers' threads come and go.
 *
 * Lock order: t->mu (slots), then t->spawn_mu; neither is held across I/O.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transform/protocol.h"
#include "transform/spawn.h"
#include "transform/transform.h"
#include "util/log.h"
#include "util/str.h"
#include "util/thread.h"

#define XF_READ_CHUNK 65536

struct xf_tail {
	char buf[TRANSFORM_TAIL_MAX];
	size_t len;
};

struct xf_worker {
	struct transform_proc p; /* p.pid < 0: not running */
	struct xf_tail tail;
};

/* A worker start asked of the spawner thread. */
struct xf_spawn_req {
	struct xf_spawn_req *next;
	struct transform_proc p;
	int rc;
	char err[200];
	bool done; /* protected by spawn_mu */
};

struct transform {
	char *name;
	enum transform_mode mode;
	bool bwrap;
	unsigned workers;
	unsigned timeout_ms;
	uint64_t output_max;
	struct transform_launch *launch;
	uint8_t identity[SHA256_LEN];

	pthread_mutex_t mu;
	pthread_cond_t cv;    /* a slot freed */
	bool *slot_busy;      /* protected by mu */
	struct xf_worker *wk; /* wk[i] used only by slot i's holder */

	pthread_mutex_t spawn_mu;
	pthread_cond_t spawn_cv;	 /* a request, or one done */
	struct xf_spawn_req *spawn_head; /* protected by spawn_mu */
	bool spawn_stop;		 /* protected by spawn_mu */
	bool spawner_started;
	pthread_t spawner;
};

static const char *const xf_fail_names[] = {
	[TRANSFORM_FAIL_NONE] = "none",
	[TRANSFORM_FAIL_EXIT] = "exit",
	[TRANSFORM_FAIL_SIGNAL] = "signal",
	[TRANSFORM_FAIL_TIMEOUT] = "timeout",
	[TRANSFORM_FAIL_OUTPUT_MAX] = "output too large",
	[TRANSFORM_FAIL_EMPTY] = "empty output",
	[TRANSFORM_FAIL_MEMORY] = "memory",
	[TRANSFORM_FAIL_PROTOCOL] = "protocol error",
	[TRANSFORM_FAIL_ERROR] = "error reply",
	[TRANSFORM_FAIL_START] = "could not start",
	[TRANSFORM_FAIL_BUSY] = "no free worker",
};

const char *transform_fail_name(enum transform_fail what)
{
	if ((unsigned)what >= sizeof(xf_fail_names) / sizeof(xf_fail_names[0]))
		return "?";
	return xf_fail_names[what];
}

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

static void xf_fail(struct transform_failure *f, enum transform_fail what,
		    const struct xf_tail *tail, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void xf_fail(struct transform_failure *f, enum transform_fail what,
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
		xf_fail(f, TRANSFORM_FAIL_SIGNAL, tail,
			"%s killed by SIGXCPU (cpu time limit)", who);
	else if (sig)
		xf_fail(f, TRANSFORM_FAIL_SIGNAL, tail,
			"%s killed by signal %d", who, sig);
	else
		xf_fail(f, TRANSFORM_FAIL_EXIT, tail,
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
	uint64_t len = transform_proto_get_u64(io->out + 1);

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
		r = poll(pfd, (nfds_t)n, (int)(deadline - now));
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
	xf_fail(f, TRANSFORM_FAIL_START, NULL, "could not start: %s", err);
	return rc == -ENOMEM ? -ENOMEM : -ECHILD;
}

/* Kills p, reaps it (SIGKILL: it goes at once) and closes its pipes. */
static void xf_kill_reap(struct transform_proc *p)
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

static int xf_run_process(struct transform *t, const void *in, size_t in_len,
			  struct transform_output *out,
			  struct transform_failure *f)
{
	struct transform_proc p = { -1, -1, -1, -1 };
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
		xf_kill_reap(&p);
		if (e == XF_TIMEOUT) {
			xf_fail(f, TRANSFORM_FAIL_TIMEOUT, &tail,
				"killed after the timeout of %u ms",
				t->timeout_ms);
			rc = -ETIMEDOUT;
		} else if (e == XF_TOO_BIG) {
			xf_fail(f, TRANSFORM_FAIL_OUTPUT_MAX, &tail,
				"killed: output over output_max (%llu bytes)",
				(unsigned long long)t->output_max);
			rc = -EFBIG;
		} else {
			rc = -ENOMEM;
			xf_fail(f, TRANSFORM_FAIL_START, &tail,
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
		xf_fail(f, TRANSFORM_FAIL_EMPTY, &tail,
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

static void *xf_spawner(void *arg)
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
	return poll(&pfd, 1, 0) == 0;
}

static int xf_run_worker(struct transform *t, struct xf_worker *w,
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

	transform_proto_put_u64(hdr, in_len);
	deadline = transform_now_ms() + t->timeout_ms;
	for (attempt = 0;; attempt++) {
		if (w->p.pid > 0 && !xf_worker_idle_ok(w))
			xf_kill_reap(&w->p); /* died idle, or wrote unasked */
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
			xf_fail(f, TRANSFORM_FAIL_EMPTY, &w->tail,
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
		xf_fail(f, TRANSFORM_FAIL_ERROR, &w->tail, "error: %.*s",
			(int)(len > 200 ? 200 : len),
			(const char *)io.out + TRANSFORM_PROTO_REPLY_HDR);
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
		xf_fail(f, TRANSFORM_FAIL_TIMEOUT, &w->tail,
			"worker killed after the timeout of %u ms",
			t->timeout_ms);
		rc = -ETIMEDOUT;
		break;
	case XF_TOO_BIG:
		xf_fail(f, TRANSFORM_FAIL_OUTPUT_MAX, &w->tail,
			"worker killed: reply of %llu bytes over output_max "
			"(%llu bytes)",
			(unsigned long long)transform_proto_get_u64(io.out + 1),
			(unsigned long long)t->output_max);
		rc = -EFBIG;
		break;
	case XF_BAD:
		xf_fail(f, TRANSFORM_FAIL_PROTOCOL, &w->tail,
			"worker killed: bad reply header (status %u, length "
			"%llu)",
			io.out[0],
			(unsigned long long)transform_proto_get_u64(io.out +
								    1));
		rc = -EIO;
		break;
	case XF_NOMEM:
		xf_fail(f, TRANSFORM_FAIL_START, &w->tail,
			"out of memory in the daemon");
		rc = -ENOMEM;
		break;
	default: /* XF_EOF: it died mid-object */
		if (st != 0)
			rc = xf_fail_status(t, st, &w->tail, f,
					    "the worker (mid-object)");
		else {
			xf_fail(f, TRANSFORM_FAIL_PROTOCOL, &w->tail,
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

/* Takes a free slot, waiting until deadline. Returns its index or -1. */
static int xf_slot_get(struct transform *t, uint64_t deadline_ms)
{
	struct timespec ts = { (time_t)(deadline_ms / 1000),
			       (long)(deadline_ms % 1000) * 1000000 };
	int slot = -1;
	unsigned i;

	pthread_mutex_lock(&t->mu);
	for (;;) {
		for (i = 0; i < t->workers; i++)
			if (!t->slot_busy[i])
				break;
		if (i < t->workers) {
			t->slot_busy[i] = true;
			slot = (int)i;
			break;
		}
		if (pthread_cond_timedwait(&t->cv, &t->mu, &ts) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&t->mu);
	return slot;
}

static void xf_slot_put(struct transform *t, int slot)
{
	pthread_mutex_lock(&t->mu);
	t->slot_busy[slot] = false;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

int transform_run(struct transform *t, const void *in, size_t in_len,
		  struct transform_output *out, struct transform_failure *fp)
{
	struct transform_failure fdummy;
	struct transform_failure *f = fp ? fp : &fdummy;
	struct xf_sigpipe sp;
	int slot, rc;

	memset(f, 0, sizeof(*f));
	f->status = -1;
	slot = xf_slot_get(t, transform_now_ms() + t->timeout_ms);
	if (slot < 0) {
		xf_fail(f, TRANSFORM_FAIL_BUSY, NULL,
			"no free worker within the timeout of %u ms",
			t->timeout_ms);
		return -EAGAIN;
	}
	xf_sigpipe_block(&sp);
	if (t->mode == TRANSFORM_MODE_WORKER)
		rc = xf_run_worker(t, &t->wk[slot], in, in_len, out, f);
	else
		rc = xf_run_process(t, in, in_len, out, f);
	xf_sigpipe_restore(&sp);
	xf_slot_put(t, slot);
	return rc;
}

/* PATH lookup of a name without '/': into buf. */
static int xf_which(const char *name, char *buf, size_t cap)
{
	const char *path = getenv("PATH"), *p, *e;

	if (strchr(name, '/') != NULL) {
		if ((size_t)snprintf(buf, cap, "%s", name) >= cap)
			return -ENAMETOOLONG;
		return access(buf, X_OK) == 0 ? 0 : -errno;
	}
	if (path == NULL || *path == '\0')
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p != '\0'; p = *e ? e + 1 : e) {
		struct stat st;

		e = strchrnul(p, ':');
		if ((size_t)snprintf(buf, cap, "%.*s/%s", (int)(e - p), p,
				     name) >= cap)
			continue;
		if (buf[0] == '/' && stat(buf, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/* Adds a length, then the bytes. */
static int xf_id_add(struct sha256 *s, const void *p, size_t n)
{
	uint8_t len[8];

	transform_proto_put_u64(len, n);
	if (sha256_update(s, len, sizeof(len)) || sha256_update(s, p, n))
		return -EIO;
	return 0;
}

/* Adds the bytes of the regular file at path (its length first). */
static int xf_id_add_file(struct sha256 *s, const char *path)
{
	uint8_t buf[65536], len[8];
	struct stat st;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = -errno;
		goto out;
	}
	transform_proto_put_u64(len, (uint64_t)st.st_size);
	if (sha256_update(s, len, sizeof(len))) {
		rc = -EIO;
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		if (sha256_update(s, buf, (size_t)n)) {
			rc = -EIO;
			break;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

static int xf_identity(struct transform *t, const struct transform_spec *spec,
		       const char *exe)
{
	static const char tag[] = "shardfs-transform-1";
	struct sha256 *s = sha256_new();
	size_t i;
	int rc;

	if (s == NULL)
		return -ENOMEM;
	rc = xf_id_add(s, tag, sizeof(tag));
	if (!rc)
		rc = xf_id_add(s, spec->name, strlen(spec->name));
	if (!rc)
		rc = xf_id_add(s, spec->version, strlen(spec->version));
	for (i = 0; !rc && spec->argv[i] != NULL; i++)
		rc = xf_id_add(s, spec->argv[i], strlen(spec->argv[i]));
	if (!rc)
		rc = xf_id_add_file(s, exe);
	/* A script named as an argument (python3 resize.py) is the
	 * transform as much as the interpreter is. */
	for (i = 1; !rc && spec->argv[i] != NULL; i++) {
		struct stat st;

		if (stat(spec->argv[i], &st) == 0 && S_ISREG(st.st_mode)) {
			rc = xf_id_add(s, spec->argv[i], strlen(spec->argv[i]));
			if (!rc)
				rc = xf_id_add_file(s, spec->argv[i]);
		}
	}
	if (!rc)
		rc = sha256_final(s, t->identity);
	sha256_free(s);
	return rc;
}

void transform_identity(const struct transform *t, uint8_t out[SHA256_LEN])
{
	memcpy(out, t->identity, SHA256_LEN);
}

int transform_open(const struct transform_spec *spec, struct transform **tp)
{
	char exe[4096], bwrap[4096], err[200];
	struct transform *t;
	pthread_condattr_t ca;
	const char *name = spec->name ? spec->name : "?";
	unsigned i;
	int rc;

	if (spec->name == NULL || spec->name[0] == '\0' ||
	    spec->version == NULL || spec->argv == NULL ||
	    spec->argv[0] == NULL || spec->argv[0][0] == '\0') {
		log_msg(LOG_ERR,
			"transform %s: needs a name, a version and a "
			"command",
			name);
		return -EINVAL;
	}
	rc = xf_which(spec->argv[0], exe, sizeof(exe));
	if (rc) {
		log_msg(LOG_ERR, "transform %s: command '%s' not found (%s)",
			name, spec->argv[0], strerror(-rc));
		return -ENOENT;
	}
	if (spec->sandbox == TRANSFORM_SANDBOX_BWRAP &&
	    xf_which(spec->bwrap ? spec->bwrap : "bwrap", bwrap,
		     sizeof(bwrap))) {
		log_msg(LOG_ERR,
			"transform %s: bwrap not found (install Debian's "
			"bubblewrap, or set sandbox = none)",
			name);
		return -ENOENT;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	t->mode = spec->mode;
	t->bwrap = spec->sandbox == TRANSFORM_SANDBOX_BWRAP;
	t->workers = spec->workers;
	if (t->workers == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		t->workers = n > 0 ? (unsigned)n : 1;
	}
	t->timeout_ms = spec->timeout_ms ? spec->timeout_ms
					 : TRANSFORM_TIMEOUT_MS_DEFAULT;
	t->output_max = spec->output_max ? spec->output_max
					 : TRANSFORM_OUTPUT_MAX_DEFAULT;
	t->name = strdup(spec->name);
	t->slot_busy = calloc(t->workers, sizeof(*t->slot_busy));
	t->wk = calloc(t->workers, sizeof(*t->wk));
	if (t->name == NULL || t->slot_busy == NULL || t->wk == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < t->workers; i++)
		t->wk[i].p = (struct transform_proc){ -1, -1, -1, -1 };
	rc = transform_launch_new(spec, exe, t->bwrap ? bwrap : NULL,
				  &t->launch, err, sizeof(err));
	if (rc) {
		log_msg(LOG_ERR, "transform %s: %s", name, err);
		goto fail;
	}
	rc = xf_identity(t, spec, exe);
	if (rc) {
		log_msg(LOG_ERR, "transform %s: cannot read %s: %s", name, exe,
			strerror(-rc));
		goto fail;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&t->mu, NULL);
	pthread_mutex_init(&t->spawn_mu, NULL);
	pthread_cond_init(&t->spawn_cv, NULL);
	if (t->mode == TRANSFORM_MODE_WORKER) {
		rc = thread_start(&t->spawner, xf_spawner, t);
		if (rc) {
			log_msg(LOG_ERR, "transform %s: cannot start a thread",
				name);
			pthread_cond_destroy(&t->cv);
			pthread_cond_destroy(&t->spawn_cv);
			pthread_mutex_destroy(&t->mu);
			pthread_mutex_destroy(&t->spawn_mu);
			goto fail;
		}
		t->spawner_started = true;
	}
	*tp = t;
	return 0;
fail:
	transform_launch_free(t->launch);
	free(t->wk);
	free(t->slot_busy);
	free(t->name);
	free(t);
	return rc;
}

void transform_close(struct transform *t)
{
	uint64_t end;
	unsigned i;

	if (t == NULL)
		return;
	/* Closing stdin asks a worker to stop (protocol.h); SIGTERM to
	 * the group tells it too; SIGKILL after TRANSFORM_STOP_MS. */
	for (i = 0; i < t->workers; i++) {
		struct transform_proc *p = &t->wk[i].p;

		if (p->pid <= 0)
			continue;
		if (p->in >= 0) {
			close(p->in);
			p->in = -1;
		}
		kill(-p->pid, SIGTERM);
		kill(p->pid, SIGTERM);
	}
	end = transform_now_ms() + TRANSFORM_STOP_MS;
	for (i = 0; i < t->workers; i++) {
		struct transform_proc *p = &t->wk[i].p;
		uint64_t now = transform_now_ms();
		int st;

		if (p->pid > 0 &&
		    transform_proc_reap(
			    p, now < end ? (unsigned)(end - now) : 0, &st))
			xf_kill_reap(p);
		transform_proc_close_fds(p);
	}
	if (t->spawner_started) {
		pthread_mutex_lock(&t->spawn_mu);
		t->spawn_stop = true;
		pthread_cond_broadcast(&t->spawn_cv);
		pthread_mutex_unlock(&t->spawn_mu);
		pthread_join(t->spawner, NULL);
	}
	pthread_cond_destroy(&t->cv);
	pthread_cond_destroy(&t->spawn_cv);
	pthread_mutex_destroy(&t->mu);
	pthread_mutex_destroy(&t->spawn_mu);
	transform_launch_free(t->launch);
	free(t->wk);
	free(t->slot_busy);
	free(t->name);
	free(t);
}
