/*
 * fetch: see fetch.h for the contract; the engine's files share
 * fetch_impl.h. This one is the engine's life (fetch_new(), its limits,
 * a fork, fetch_free(), its stats) and the requests: a reader's chunk
 * (joined in flight, or fetched, waiting for memory and a connection, or
 * read directly), prefetches, pins and forgetting. The flights and their
 * table are fetch_table.c; running parts and the workers,
 * fetch_worker.c; runs, fetch_run.c; buffers, hedged reads and pace,
 * fetch_buf.c, fetch_hedge.c and fetch_pace.c. The design of the whole
 * engine is described here, since all its files keep the same
 * invariants (a flight's reference count, its place in the table and
 * queues, its buffer's accounting) under the same lock.
 *
 * A chunk being fetched is a flight: its buffer (mapped, accounted in the
 * budget), its parts (ranged reads of at most FETCH_PARTS_MAX pieces) and
 * a reference count: one for the single-flight table while it is there,
 * one per reader waiting for it. A flight with parts not yet started sits
 * in one of two queues, readers' first; a worker takes one part at a time
 * from the head, so a reader's chunk overtakes every queued prefetch and
 * its parts are fetched in parallel as connections free up.
 *
 * A reader whose chunk is not in flight runs it in its own thread when a
 * connection is free (a hand-off to a worker and back costs two context
 * switches, more than a loopback round trip on a small machine); workers
 * run prefetches, extra parts, and readers' chunks that had to queue.
 *
 * When the last part finishes, the flight is marked done (waiting readers
 * copy their bytes) and handed to done_fn (the cache stores it) while it
 * stays in the table, so a reader finds either the flight or the store;
 * a reader's thread leaves the store of a chunk over FETCH_STORE_INLINE_MAX to
 * a worker. Then it stays in the table, retained, until readers have
 * copied all of it or
 * its memory is needed: a prefetched chunk is then served from memory
 * without a look at the disk cache, and a reader that comes meanwhile
 * joins it instead of missing both the table and the store. Retained
 * flights are reclaimed oldest first: by a reader that needs memory, and
 * by a prefetch or an idle engine only once they are FETCH_RETAIN_STALE_NS old
 * (the reader did not come for them); an engine idle that long also
 * unmaps its pooled buffers.
 *
 * Lock: one mutex, f->lock, protects every field below marked so, the
 * queues, the table and every flight's state. It is never held across a
 * backend read, done_fn, a copy out of a flight or munmap; it is the
 * innermost lock of the cache (taken with no other cache lock held, and
 * no other lock is taken under it).
 *
 * Memory: every buffer is accounted in the budget (fetch_buf.c).
 *
 * Progress under any budget: a reader short of memory for its chunk frees
 * what it can (pooled buffers, the oldest retained flight, a queued
 * prefetch not started), then waits at most FETCH_DIRECT_AFTER_NS for memory to
 * come free; failing that (at once when the reply buffers alone leave no
 * room), it reads just the bytes it asked for straight into its own
 * buffer through a connection slot (a direct read: no memory, not
 * cached). Every change that frees memory or makes it reclaimable
 * (unmapping, pooling, an unreference, retaining a flight) wakes memory
 * waiters. Every wait is a timed wait on CLOCK_MONOTONIC that re-checks
 * its state; a reader waiting for a chunk another thread fetches, for
 * memory (a fill) or for a slot gives up with -EIO at its deadline
 * (f->wait_ns after it asked); workers wake at least every
 * FETCH_WORKER_WAIT_NS, so the trimmer runs even when no one signals it.
 *
 * Hedged reads: fetch_hedge.c.
 *
 * Runs (fetch_run()): each chunk of a run is an ordinary flight in the
 * table, queued with one part, holding one more reference for the run's
 * read; its head holds the read's buffer. Whoever would run a part of any
 * of them (a worker, or a reader that joined one still queued) runs the
 * run's one read for all (fetch_worker.c's run_read()) and finishes each
 * as its part. A
 * run is never hedged (its read is not its flights' first part), and a
 * queued prefetch run no reader waits for is cancelled whole.
 *
 * A chunk whose parts returned fewer bytes than asked (nread != len) is
 * an error for every reader (-EIO, logged once with the key and counts)
 * and is neither stored nor retained: a read returns exactly the bytes
 * asked for, or an error.
 */
#include "cache/fetch_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "cache/fetch_fail.h"
#include "util/log.h"
#include "util/thread.h"

/* ---- the engine ---------------------------------------------------------- */

int fetch_new(struct backend *be, unsigned connections, uint64_t memory,
	      fetch_done_fn done_fn, void *ctx, struct fetch **out)
{
	struct fetch *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -ENOMEM;
	if (fetch_fail_new(&f->fails) < 0) {
		free(f);
		return -ENOMEM;
	}
	f->be = be;
	f->done_fn = done_fn;
	f->ctx = ctx;
	f->connections = connections ? connections : FETCH_CONNECTIONS_DEFAULT;
	f->budget = memory ? memory : FETCH_MEMORY_DEFAULT;
	f->wait_ns = FETCH_WAIT_MS_DEFAULT * UINT64_C(1000000);
	f->hedge_on = true;
	f->pf_inflight_max = PREFETCH_INFLIGHT_MIN;
	f->owner_pid = getpid();
	pthread_mutex_init(&f->lock, NULL);
	fetch_cond_init(&f->work);
	fetch_cond_init(&f->done);
	fetch_cond_init(&f->slot);
	fetch_cond_init(&f->memory);
	*out = f;
	return 0;
}

void fetch_set_limits(struct fetch *f, unsigned connections, uint64_t memory)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	if (connections)
		f->connections = connections;
	if (memory)
		f->budget = memory;
	fetch_flow_update(f); /* its cap is the budget's */
	pthread_cond_broadcast(&f->work);
	pthread_cond_broadcast(&f->memory);
	pthread_mutex_unlock(&f->lock);
}

void fetch_set_wait(struct fetch *f, uint64_t wait_ms)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	if (wait_ms == 0)
		wait_ms = FETCH_WAIT_MS_DEFAULT;
	if (wait_ms > FETCH_WAIT_MS_MAX) /* deadlines must not wrap */
		wait_ms = FETCH_WAIT_MS_MAX;
	f->wait_ns = wait_ms * UINT64_C(1000000);
	pthread_mutex_unlock(&f->lock);
}

void fetch_set_hedge(struct fetch *f, bool on)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->hedge_on = on;
	pthread_mutex_unlock(&f->lock);
}

/* In a process forked from the owner (`shardfs mount` daemonizing after
 * opening the cache), the owner's threads did not come along, and its
 * locks and flights are not ours: start afresh. Runs before the child
 * has threads of its own that use the engine (see cache.h), so unlocked. */
void fetch_fork_check(struct fetch *f)
{
	pid_t pid = thread_pid();
	uint64_t pooled = 0;
	int k;

	if (__atomic_load_n(&f->owner_pid, __ATOMIC_ACQUIRE) == pid)
		return;
	pthread_mutex_init(&f->lock, NULL);
	fetch_fail_forked(f->fails);
	fetch_cond_init(&f->work);
	fetch_cond_init(&f->done);
	fetch_cond_init(&f->slot);
	fetch_cond_init(&f->memory);
	memset(f->q, 0, sizeof(f->q));
	memset(f->table, 0, sizeof(f->table)); /* the parent's flights */
	f->ret_head = f->ret_tail = NULL;
	f->store_head = f->store_tail = NULL;
	f->hedge_head = f->hedge_tail = NULL;
	f->inflight = f->slot_waiters = 0;
	f->idle_workers = 0;
	f->pf_inflight = 0;
	f->chunk_bytes = 0;
	for (k = 0; k < FETCH_POOL_CLASSES; k++)
		pooled += (uint64_t)f->n_pool[k] << (FETCH_POOL_MIN_SHIFT + k);
	f->in_use = f->high_water = pooled;
	free(f->workers);
	f->workers = NULL;
	f->n_workers = f->n_started = 0;
	f->workers_started = false;
	f->trimmer = false;
	f->stop = false;
	__atomic_store_n(&f->owner_pid, pid, __ATOMIC_RELEASE);
}

/* Caller holds f->lock: waits until fl is done, running its parts in this
 * thread while connections are free (and any queued part when no worker
 * could be started), and its hedge once its read is overdue. handoff:
 * the caller left fl to a worker (fetch_hedge_handoff()); it runs fl itself
 * only if still queued after FETCH_HANDOFF_GRACE_NS. Returns 0, or -ETIMEDOUT
 * if fl is not done by deadline_ns (a read this thread runs ends by the
 * backend's deadline). */
static int wait_done(struct fetch *f, struct flight *fl, uint64_t deadline_ns,
		     bool handoff)
{
	uint64_t grace = handoff ? clock_now_ns() + FETCH_HANDOFF_GRACE_NS : 0;
	uint64_t retry = 0; /* no hedge before: none could start */

	while (!fl->done) {
		uint64_t now = clock_now_ns(), due = fetch_hedge_due(f, fl);
		uint64_t until = deadline_ns;

		if (fl->queued && fetch_slot_free(f) && now >= grace) {
			fetch_part_run(f, fl, false);
		} else if (f->n_workers == 0 && fetch_runnable(f)) {
			fetch_part_run(f, fetch_queue_next(f), false);
		} else if (due != 0 && now >= due && now >= retry) {
			if (!fetch_hedge_request(f, fl))
				retry = now + FETCH_HEDGE_RETRY_NS;
		} else {
			/* Every wait stays bounded by deadline_ns; the hedge
			 * and the hand-off only wake the waiter sooner. */
			if (due != 0 && (due > retry ? due : retry) < until)
				until = due > retry ? due : retry;
			if (fl->queued && grace > now && grace < until)
				until = grace;
			if (fetch_wait_until(f->n_workers > 0 ? &fl->cv
							      : &f->done,
					     &f->lock, until) == ETIMEDOUT &&
			    !fl->done && clock_now_ns() >= deadline_ns)
				return -ETIMEDOUT;
		}
	}
	return 0;
}

/* Logs a reader's wait that ran out; returns -EIO. */
static int wait_failed(const struct fetch_request *r, const char *what,
		       uint64_t wait_ns)
{
	char kb[LOG_KEY_MAX];
	log_msg(LOG_ERR,
		"fetch: %s: gave up waiting for %s after %llu ms "
		"(chunk at offset %llu); failing the read",
		log_key(kb, r->key, r->key_len), what,
		(unsigned long long)(wait_ns / 1000000u),
		(unsigned long long)r->offset);
	return -EIO;
}

/* A read of [offset, offset + len) of key straight into dst, outside the
 * chunk machinery, taking a connection slot by deadline_ns at most;
 * for_memory: instead of a chunk there was no memory for (counted in
 * direct_reads); claim as fetch_backend_read()'s. Called without f->lock.
 * Returns len or a negative errno (logged). */
static ssize_t direct_read(struct fetch *f, const char *key, size_t key_len,
			   const char *etag, size_t etag_len, uint64_t offset,
			   size_t len, void *dst, uint64_t deadline_ns,
			   bool for_memory, struct backend_claim *claim)
{
	char kb[LOG_KEY_MAX];
	size_t nread = 0;
	uint64_t wait_ns;
	int rc;

	pthread_mutex_lock(&f->lock);
	wait_ns = f->wait_ns;
	rc = fetch_slot_take(f, deadline_ns);
	if (rc == 0 && for_memory)
		f->direct_reads++;
	pthread_mutex_unlock(&f->lock);
	if (rc < 0) {
		log_msg(LOG_ERR,
			"fetch: %s: gave up waiting for a connection after "
			"%llu ms (read at offset %llu); failing the read",
			log_key(kb, key, key_len),
			(unsigned long long)(wait_ns / 1000000u),
			(unsigned long long)offset);
		return -EIO;
	}
	rc = fetch_backend_read(f, key, key_len, etag, etag_len, offset, len,
				dst, &nread, claim);
	pthread_mutex_lock(&f->lock);
	fetch_slot_put(f);
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		return rc;
	if (nread != len) {
		log_msg(LOG_ERR,
			"fetch: %s: the backend returned %zu of %zu bytes "
			"at offset %llu; failing the read",
			log_key(kb, key, key_len), nread, len,
			(unsigned long long)offset);
		return -EIO;
	}
	return (ssize_t)len;
}

void fetch_free(struct fetch *f)
{
	struct flight *dead = NULL;
	unsigned b;
	int k;

	if (f == NULL)
		return;
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; i < f->n_workers; i++)
		pthread_join(f->workers[i], NULL);
	/* Only queued prefetches and retained flights can be left: no
	 * reader and no worker. */
	for (b = 0; b < FETCH_BUCKETS; b++)
		while (f->table[b] != NULL) {
			struct flight *fl = f->table[b];

			f->table[b] = fl->tnext;
			fl->tnext = dead;
			dead = fl;
		}
	while (dead != NULL) {
		struct flight *next = dead->tnext;

		fetch_flight_free(dead);
		dead = next;
	}
	for (k = 0; k < FETCH_POOL_CLASSES; k++)
		while (f->n_pool[k] > 0)
			munmap(f->pool[k][--f->n_pool[k]],
			       (size_t)UINT64_C(1)
				       << (FETCH_POOL_MIN_SHIFT + k));
	free(f->workers);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->work);
	pthread_cond_destroy(&f->done);
	pthread_cond_destroy(&f->slot);
	pthread_cond_destroy(&f->memory);
	fetch_fail_free(f->fails);
	free(f);
}

/* ---- requests -------------------------------------------------------------- */

/* What get() does with a chunk: fetch it unless in the table, join it if
 * in the table, or copy it only if fetched already. */
enum get_mode { GET_FETCH, GET_JOIN, GET_DONE };

/* fetch_obtain()'s engine part; -ENOENT when mode does not
 * fetch and the chunk is not there (for GET_DONE: not there whole). */
static ssize_t get(struct fetch *f, const struct fetch_request *r,
		   uint64_t epoch, uint64_t off, size_t len, void *dst,
		   enum get_mode mode, bool *ready, struct fetch_pin *pin)
{
	struct flight *fl, *dead;
	/* A reader with a buffer can be served without a chunk's memory. */
	bool direct_ok = mode == GET_FETCH && dst != NULL && len > 0;
	bool handoff = false, stalled = false;
	uint64_t start, deadline, direct_at, wait_ns, need;
	ssize_t ret;

	if (ready != NULL)
		*ready = false;
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	fetch_workers_ensure(f);
	start = clock_now_ns();
	f->active_ns = start;
	wait_ns = f->wait_ns;
	deadline = start + wait_ns;
	direct_at = start + FETCH_DIRECT_AFTER_NS;
	for (;;) {
		fl = fetch_table_find(f, r);
		if (fl != NULL && mode == GET_DONE &&
		    (!fl->done || fl->rc != 0 || fl->valid != fl->len))
			fl = NULL;
		if (fl != NULL) {
			fl->refs++;
			if (fl->done && ready != NULL)
				*ready = true;
			if (!fl->done) {
				f->waits++;
				stalled = r->offset == 0;
				f->stalls += stalled;
			}
			if (fl->queued && fl->prio == FETCH_PRIO_PREFETCH) {
				fetch_queue_unlink(f, fl);
				fetch_queue_push(f, fl, FETCH_PRIO_READER);
				f->promoted++;
				pthread_cond_signal(&f->work);
			}
			break;
		}
		if (mode != GET_FETCH) {
			pthread_mutex_unlock(&f->lock);
			return -ENOENT;
		}
		if (fetch_epoch_moved(f, r->hash, epoch)) {
			pthread_mutex_unlock(&f->lock);
			return -EAGAIN;
		}
		/* Memory for the whole chunk, or (a fill, which has no
		 * buffer of its own) no other chunk to wait for. */
		need = fetch_buf_need(f, r->len);
		if (f->in_use + need <= f->budget ||
		    (!direct_ok && f->chunk_bytes == 0)) {
			handoff = fetch_hedge_handoff(f, r->len);
			fl = fetch_flight_create(
				f, r, FETCH_PRIO_READER,
				fetch_slot_free(f) && !handoff ? 1 : 0);
			if (fl == NULL) {
				pthread_mutex_unlock(&f->lock);
				return -ENOMEM;
			}
			fl->refs = 2; /* the table's and ours */
			stalled = r->offset == 0;
			f->stalls += stalled;
			break;
		}
		/* Reply buffers alone leave no room: nothing this thread
		 * could free or wait for would make it. */
		if (direct_ok && fetch_replies_bytes(f) + need > f->budget)
			break;
		if (fetch_reclaim_one(f, true))
			continue;
		if (fetch_wait_until(&f->memory, &f->lock,
				     direct_ok ? direct_at : deadline) ==
			    ETIMEDOUT &&
		    f->in_use + fetch_buf_need(f, r->len) > f->budget) {
			if (direct_ok)
				break;
			pthread_mutex_unlock(&f->lock);
			return wait_failed(r, "memory", wait_ns);
		}
	}
	if (fl == NULL) {
		stalled = r->offset == 0;
		f->stalls += stalled;
		pthread_mutex_unlock(&f->lock);
		ret = direct_read(f, r->key, r->key_len, r->etag, r->etag_len,
				  r->offset + off, len, dst, deadline, true,
				  NULL);
		if (stalled)
			__atomic_fetch_add(&f->stall_ns, clock_now_ns() - start,
					   __ATOMIC_RELAXED);
		return ret;
	}
	if (wait_done(f, fl, deadline, handoff) < 0) {
		dead = fetch_flight_unref(f, fl);
		pthread_mutex_unlock(&f->lock);
		fetch_flight_free(dead);
		return wait_failed(r, "the chunk", wait_ns);
	}
	if (stalled)
		__atomic_fetch_add(&f->stall_ns, clock_now_ns() - start,
				   __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);

	/* Done without an error means every byte is there (fetch_part_run()). */
	if (fl->rc < 0) {
		ret = fl->rc;
	} else {
		ret = 0;
		if (off < fl->len && len > 0) {
			ret = (ssize_t)(fl->len - off < len ? fl->len - off
							    : len);
			if (pin != NULL) {
				/* Keep our reference: fetch_unpin() does
				 * the rest of this function. */
				pin->fl = fl;
				pin->data = fl->buf + off;
				pin->len = (size_t)ret;
				return ret;
			}
			memcpy(dst, fl->buf + off, (size_t)ret);
		}
	}
	pthread_mutex_lock(&f->lock);
	/* A caller that wants no bytes (a fill) leaves nothing to serve. */
	fetch_served_unref(f, fl,
			   len > 0 ? (uint64_t)(ret > 0 ? ret : 0) : fl->len);
	return ret;
}

/* Queues chunk r at prefetch priority unless it is in the table; see
 * fetch_ahead(). */
static int prefetch(struct fetch *f, const struct fetch_request *r,
		    uint64_t epoch)
{
	struct flight *fl;
	int rc = 0;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	fetch_workers_ensure(f);
	f->active_ns = clock_now_ns();
	for (;;) {
		if (f->n_workers == 0) {
			rc = -ENOBUFS; /* nobody would run it */
		} else if (fetch_table_find(f, r) != NULL) {
			rc = 1;
		} else if (fetch_epoch_moved(f, r->hash, epoch)) {
			rc = -EAGAIN;
		} else if (!prefetch_may_take(f->in_use,
					      fetch_buf_need(f, r->len),
					      f->budget)) {
			if (fetch_reclaim_one(f, false))
				continue;
			f->refused++;
			rc = -ENOBUFS;
		} else {
			fl = fetch_flight_create(f, r, FETCH_PRIO_PREFETCH, 0);
			if (fl == NULL) {
				rc = -ENOMEM;
			} else {
				fl->refs = 1; /* the table's */
				f->queued++;
				f->queued_bytes += r->len;
			}
		}
		break;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

bool fetch_in_flight(struct fetch *f, const struct fetch_request *r)
{
	bool found;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	found = fetch_table_find(f, r) != NULL;
	pthread_mutex_unlock(&f->lock);
	return found;
}

void fetch_forget(struct fetch *f, const uint8_t *hash, const uint8_t *id,
		  size_t id_len)
{
	struct flight *fl;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	for (fl = f->table[fetch_bucket_of(hash)]; fl != NULL; fl = fl->tnext)
		if ((fl->retained || fl->storing) &&
		    memcmp(fl->hash, hash, FETCH_HASH_LEN) == 0 &&
		    fl->id_len == id_len && memcmp(fl->id, id, id_len) == 0)
			break;
	/* One being stored (done_fn may be what told the caller) leaves the
	 * table instead of being retained when done_fn returns (fetch_flight_store()). */
	if (fl != NULL && fl->storing)
		fl->forgotten = true;
	else if (fl != NULL)
		fetch_table_drop_free(f, fl);
	pthread_mutex_unlock(&f->lock);
}

ssize_t fetch_obtain(struct fetch *f, const struct fetch_request *r,
		     enum fetch_how how, uint64_t off, size_t len, void *dst,
		     struct fetch_pin *pin, fetch_look_fn look, void *look_arg,
		     enum fetch_from *from)
{
	enum fetch_from dummy;
	bool ready = false;
	ssize_t got;
	int tries;

	if (from == NULL)
		from = &dummy;
	if (pin != NULL)
		*pin = (struct fetch_pin){ NULL, NULL, 0, NULL, 0 };
	/* The engine first: a chunk in memory needs no look. A fill joins
	 * what is in flight, which a look would find missing. */
	got = get(f, r, FETCH_EPOCH_NONE, off, len, dst,
		  how == FETCH_READY ? GET_DONE : GET_JOIN, &ready,
		  pin != NULL && len > 0 ? pin : NULL);
	if (got != -ENOENT) {
		*from = ready ? FETCH_FROM_MEMORY : FETCH_FROM_JOINED;
		return got;
	}
	if (pin != NULL && dst == NULL && len > 0) {
		/* Not in the engine: the bytes need a place of their own. */
		dst = fetch_buffer_alloc(f, len);
		if (dst == NULL)
			return -ENOMEM;
		pin->own = dst;
		pin->own_len = len;
		pin->data = dst;
		pin->len = len;
	}
	if (how == FETCH_DIRECT) {
		*from = FETCH_FROM_BACKEND;
		return fetch_direct(f, r->key, r->key_len, r->etag, r->etag_len,
				    r->offset + off, len, dst, NULL);
	}
	for (tries = 0;; tries++) {
		uint64_t epoch = tries < FETCH_RELOOKS
					 ? fetch_epoch_of(f, r->hash)
					 : FETCH_EPOCH_NONE;

		if (look != NULL && look(look_arg, dst) == 0) {
			*from = FETCH_FROM_LOOK;
			return (ssize_t)len;
		}
		if (how == FETCH_READY)
			return -ENOENT;
		got = get(f, r, epoch, off, len, dst, GET_FETCH, &ready, NULL);
		if (got != -EAGAIN) {
			*from = FETCH_FROM_BACKEND;
			return got;
		}
	}
}

int fetch_ahead(struct fetch *f, const struct fetch_request *r,
		fetch_look_fn look, void *look_arg)
{
	int tries, rc;

	for (tries = 0;; tries++) {
		uint64_t epoch = tries < FETCH_RELOOKS
					 ? fetch_epoch_of(f, r->hash)
					 : FETCH_EPOCH_NONE;

		if (fetch_in_flight(f, r) ||
		    (look != NULL && look(look_arg, NULL) == 0))
			return 1;
		rc = prefetch(f, r, epoch);
		if (rc != -EAGAIN)
			return rc;
	}
}

ssize_t fetch_direct(struct fetch *f, const char *key, size_t key_len,
		     const char *etag, size_t etag_len, uint64_t offset,
		     size_t len, void *buf, struct backend_claim *claim)
{
	uint64_t deadline;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->active_ns = clock_now_ns();
	deadline = f->active_ns + f->wait_ns;
	pthread_mutex_unlock(&f->lock);
	return direct_read(f, key, key_len, etag, etag_len, offset, len, buf,
			   deadline, false, claim);
}

void fetch_stats_get(struct fetch *f, struct fetch_stats *out)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	out->singleflight_waits = f->waits;
	out->prefetch_queued = f->queued;
	out->prefetch_bytes = f->queued_bytes;
	out->prefetch_promoted = f->promoted;
	out->prefetch_refused = f->refused;
	out->inflight = f->inflight;
	out->memory_in_use = f->in_use;
	out->memory_high_water = f->high_water;
	out->memory_budget = f->budget;
	out->direct_reads = f->direct_reads;
	out->hedges = f->hedges;
	out->hedge_wins = f->hedge_wins;
	out->first_waits = f->stalls;
	out->first_wait_ns = __atomic_load_n(&f->stall_ns, __ATOMIC_RELAXED);
	out->prefetch_inflight_max = f->pf_inflight_max;
	fetch_pace_compute(f, &out->pace);
	pthread_mutex_unlock(&f->lock);
	out->backend_reads =
		__atomic_load_n(&f->backend_reads, __ATOMIC_RELAXED);
	out->backend_bytes =
		__atomic_load_n(&f->backend_bytes, __ATOMIC_RELAXED);
	out->backend_errors =
		__atomic_load_n(&f->backend_errors, __ATOMIC_RELAXED);
}

uint64_t fetch_inflight_max(struct fetch *f)
{
	return __atomic_load_n(&f->pf_inflight_max, __ATOMIC_RELAXED);
}
