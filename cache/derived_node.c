/*
 * derived_node: one run of a derived object per node, across the
 * processes that share a cache directory (mounts, shardfs warm). derived.c
 * joins the readers of one process in one run; this makes the runner of
 * each process take a lock first, so that a second process waits for the
 * first one's run and then finds its chunks instead of running again.
 *
 * The lock: an OFD lock (fcntl F_OFD_SETLK, Linux 3.15+) on one byte of
 * DIR/derived.lock, at an offset named by the object's identity (the
 * first 62 bits of its chunk 0's hash: backend, key, etag, transform,
 * chunk size). Why this and not a file per object with flock(2): one file
 * for every object, created once, so nothing is left behind per object
 * (a lock file per identity would have to be unlinked by its holder, with
 * the reopen-and-compare dance that needs, and a killed holder would
 * leave its file); a byte past the end of the file takes no space. Each
 * run opens the file afresh: an OFD lock belongs to the open file, so two
 * runs in one process (two objects whose offsets collide, or the nested
 * run of a producer that fills another object) conflict like two
 * processes, and closing the descriptor releases only its own lock. The
 * kernel drops the lock when its holder dies (kill -9 included): a
 * waiter then takes it and runs the object itself. The file is 0600 like
 * every file of the directory (store_file_open()) and opened O_CLOEXEC,
 * so a transform's process never holds it.
 *
 * Bounded: a waiter tries the lock without blocking, sleeping between
 * tries (util/backoff.h), and looks the object's chunks up meanwhile: once
 * every one is indexed the other run succeeded (its last chunk is stored
 * only once the stream's length was right) and the waiter is done
 * without the lock; each chunk that appears is progress and restarts the
 * wait bound (the derived wait, cache_fetch_options.wait_ms, as for the
 * waiters of a run in this process). A bound that passes without progress
 * is -EIO for the read, logged: another process's run that stores nothing
 * for that long would fail this process's waiters too. A lock that cannot
 * be taken at all (the file cannot be opened, or the filesystem has no
 * OFD locks) does not fail the read: the run goes on without it, logged
 * once, as before this module (a run per process at worst).
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/backoff.h"
#include "util/clock.h"
#include "util/log.h"

/* The tries' sleeps: short at first (a run of a small object ends in
 * milliseconds), then a few tries a second, so that a long run costs a
 * waiter little CPU and the end of a run is seen within 100 ms. */
static const struct backoff_policy derived_node_poll = { .base_ms = 2,
							 .cap_ms = 100 };

static int derived_node_warned; /* atomic: the no-lock warning once */

static void derived_node_warn(const char *path, int err)
{
	if (__atomic_exchange_n(&derived_node_warned, 1, __ATOMIC_RELAXED))
		return;
	log_msg(LOG_WARNING,
		"cache: %s: %s; derived objects (transforms, gunzip) may run "
		"once per process instead of once per node",
		path, strerror(err));
}

/* The byte of DIR/derived.lock that stands for obj. */
static int derived_node_offset(const struct cache *c,
			       const struct cache_object *obj, off_t *off)
{
	struct read_chunk ch;
	uint64_t v = 0;
	int rc, i;

	rc = read_chunk_name(c, obj, 0, &ch);
	if (rc < 0)
		return rc;
	for (i = 0; i < 8; i++)
		v = v << 8 | ch.hash[i];
	read_chunk_release(&ch);
	*off = (off_t)(v >> 2); /* positive, and off + 1 cannot overflow */
	return 0;
}

bool derived_node_stored(struct cache *c, const struct cache_object *obj,
			 uint64_t *have)
{
	uint64_t unit = cache_obj_chunk(c, obj);

	while (*have * unit < obj->size) {
		struct read_chunk ch;
		bool present;

		if (read_chunk_name(c, obj, *have, &ch) < 0)
			return false;
		present = read_chunk_present(c, &ch);
		read_chunk_release(&ch);
		if (!present)
			return false;
		(*have)++;
	}
	return true;
}

static void derived_node_sleep(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int derived_node_lock(struct cache *c, const struct cache_object *obj,
		      uint64_t wait_ns, derived_node_progress_fn progress,
		      void *arg, struct derived_node *node)
{
	char kb[LOG_KEY_MAX];
	struct flock fl = { .l_type = F_WRLCK,
			    .l_whence = SEEK_SET,
			    .l_len = 1 };
	uint64_t have = 0, deadline;
	unsigned attempt = 0;
	char *path = NULL;
	int fd, rc;

	node->fd = -1;
	if (!c->disk || c->readonly)
		return 0; /* nothing is stored: nothing to join */
	rc = derived_node_offset(c, obj, &fl.l_start);
	if (rc < 0)
		return rc;
	if (asprintf(&path, "%s/derived.lock", c->dir) < 0)
		return -ENOMEM;
	fd = store_file_open(path, O_RDWR | O_CREAT);
	if (fd < 0) {
		derived_node_warn(path, -fd);
		free(path);
		return 0;
	}
	deadline = clock_now_ns() + wait_ns;
	for (;;) {
		uint64_t now, before = have;
		unsigned ms;

		if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
			break;
		if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
			derived_node_warn(path, errno);
			close(fd);
			free(path);
			return 0;
		}
		/* Another process runs it: done once its chunks are all in
		 * the index; each new one is progress. */
		if (derived_node_stored(c, obj, &have)) {
			close(fd);
			free(path);
			return 1;
		}
		now = clock_now_ns();
		if (have > before) {
			deadline = now + wait_ns;
			progress(c, arg);
		}
		if (now >= deadline) {
			log_msg(LOG_ERR,
				"cache: %s: %s: another process on the node "
				"runs it and stored no more of it for the "
				"wait bound (its lock in %s); failing the "
				"read",
				log_key(kb, obj->key, obj->key_len),
				obj->transform, path);
			close(fd);
			free(path);
			return -EIO;
		}
		ms = backoff_delay_ms(&derived_node_poll, ++attempt);
		if ((uint64_t)ms * 1000000u > deadline - now)
			ms = (unsigned)((deadline - now) / 1000000u) + 1;
		derived_node_sleep(ms);
	}
	free(path);
	node->fd = fd;
	/* Another process may have stored it while this one waited, or
	 * between this one's lookup and the lock. */
	if (derived_node_stored(c, obj, &have)) {
		derived_node_unlock(node);
		return 1;
	}
	return 0;
}

void derived_node_unlock(struct derived_node *node)
{
	if (node->fd >= 0)
		close(node->fd); /* releases the OFD lock */
	node->fd = -1;
}
