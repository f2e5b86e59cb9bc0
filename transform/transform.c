/*
 * transform: open, close, the slots and the identity (transform.h); one
 * run's I/O and the workers are in run.c. A slot is a permit to run
 * (process mode) or one worker (worker mode); `workers` slots bound the
 * processes at once.
 *
 * Workers are started by the transform's own spawner thread, not by the
 * caller's: bwrap's --die-with-parent (and the child's PDEATHSIG) fire
 * when the *thread* that forked exits, and callers' threads come and go.
 *
 * Lock order: t->mu (slots), then t->spawn_mu; neither is held across I/O.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "transform/protocol.h"
#include "transform/transform_impl.h"
#include "util/log.h"
#include "util/thread.h"

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

/* A slot this thread reserved (transform_reserve()), and whose. */
static __thread const struct transform *xf_reserved_t;
static __thread int xf_reserved_slot = -1;

bool transform_reserve(struct transform *t)
{
	if (xf_reserved_slot >= 0)
		return xf_reserved_t == t;
	/* A deadline now: a free slot, or none at once. */
	xf_reserved_slot = xf_slot_get(t, transform_now_ms());
	xf_reserved_t = xf_reserved_slot >= 0 ? t : NULL;
	return xf_reserved_slot >= 0;
}

void transform_unreserve(struct transform *t)
{
	if (xf_reserved_slot < 0 || xf_reserved_t != t)
		return;
	xf_slot_put(t, xf_reserved_slot);
	xf_reserved_slot = -1;
	xf_reserved_t = NULL;
}

int transform_run(struct transform *t, const void *in, size_t in_len,
		  struct transform_output *out, struct transform_failure *fp)
{
	struct transform_failure fdummy;
	struct transform_failure *f = fp ? fp : &fdummy;
	int slot, rc;

	memset(f, 0, sizeof(*f));
	f->status = -1;
	if (xf_reserved_slot >= 0 && xf_reserved_t == t) {
		slot = xf_reserved_slot; /* given back below */
		xf_reserved_slot = -1;
		xf_reserved_t = NULL;
	} else {
		slot = xf_slot_get(t, transform_now_ms() + t->timeout_ms);
	}
	if (slot < 0) {
		transform_fail_set(f, TRANSFORM_FAIL_BUSY, NULL,
				   "no free worker within the timeout of %u ms",
				   t->timeout_ms);
		return -EAGAIN;
	}
	rc = transform_run_slot(t, slot, in, in_len, out, f);
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

	le_put64(len, n);
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
	le_put64(len, (uint64_t)st.st_size);
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

unsigned transform_workers(const struct transform *t)
{
	return t->workers;
}

uint64_t transform_cpu_ns(const struct transform *t)
{
	return __atomic_load_n(&t->cpu_ns, __ATOMIC_RELAXED);
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
		t->wk[i].p =
			(struct transform_proc){ -1, -1, -1, -1, &t->cpu_ns };
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
		rc = thread_start(&t->spawner, transform_spawner, t);
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
			transform_kill_reap(p);
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
