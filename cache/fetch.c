/*
 * fetch: see fetch.h for the contract; the engine's files share
 * fetch_impl.h. This one holds the flights and everything that keeps their
 * invariants: the single-flight table, the queues, retained flights and
 * reclaiming, running parts, the workers, the requests, and runs (several
 * chunks' flights fetched by one backend read).
 *
 * Over 700 lines (about 1,700) because every section below works on the
 * same flights under the same lock, f->lock, and their invariants (a
 * flight's reference count, its place in the table and queues, its
 * buffer's accounting) are kept across the sections in one critical
 * section at a time: split further, each file would hand the next half
 * of an invariant. Buffers, hedged reads and pace, which have narrow
 * interfaces, are fetch_buf.c, fetch_hedge.c and fetch_pace.c.
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
 * run's one read for all (run_read()) and finishes each as its part. A
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

/* Every condition variable here waits on CLOCK_MONOTONIC (see
 * wait_until()), so a clock step neither ends a wait early nor makes it
 * longer. */
static void cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &attr);
	pthread_condattr_destroy(&attr);
}

/* Waits on cv (with m held) until signalled or the monotonic time
 * deadline_ns. Returns ETIMEDOUT once the deadline has passed, else 0;
 * either way the caller re-checks its state. */
static int wait_until(pthread_cond_t *cv, pthread_mutex_t *m,
		      uint64_t deadline_ns)
{
	struct timespec ts;

	if (fetch_now_ns() >= deadline_ns)
		return ETIMEDOUT;
	ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
	ts.tv_nsec = (long)(deadline_ns % 1000000000u);
	return pthread_cond_timedwait(cv, m, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}

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
	cond_init(&f->work);
	cond_init(&f->done);
	cond_init(&f->slot);
	cond_init(&f->memory);
	*out = f;
	return 0;
}

/* One backend read of [offset, offset + len) of key into buf, counted in
 * the engine's stats; returns 0 and sets *nread, or a negative errno
 * (-ENXIO without a backend). With claim (may be NULL), also what the
 * reply vouched for about the whole object (backend.h, read_claim()). A
 * read of a range that failed just now fails at once (fetch_fail.h). It
 * takes no connection: its caller holds one. */
int fetch_backend_read(struct fetch *f, const char *key, size_t key_len,
		       const char *etag, size_t etag_len, uint64_t offset,
		       size_t len, void *buf, size_t *nread,
		       struct backend_claim *claim)
{
	int rc;

	if (claim != NULL)
		memset(claim, 0, sizeof(*claim));
	if (f->be == NULL)
		return -ENXIO;
	/* A range that failed just now fails at once (fetch_fail.h). */
	rc = fetch_fail_check(f->fails, key, key_len, etag, etag_len, offset,
			      len);
	if (rc < 0)
		return rc;
	__atomic_add_fetch(&f->backend_reads, 1, __ATOMIC_RELAXED);
	if (claim != NULL && f->be->ops->read_claim != NULL)
		rc = f->be->ops->read_claim(f->be, key, key_len, etag, etag_len,
					    offset, len, buf, nread, claim);
	else
		rc = f->be->ops->read(f->be, key, key_len, etag, etag_len,
				      offset, len, buf, nread);
	if (rc < 0) {
		__atomic_add_fetch(&f->backend_errors, 1, __ATOMIC_RELAXED);
		fetch_fail_note(f->fails, key, key_len, etag, etag_len, offset,
				len, rc);
		return rc;
	}
	__atomic_add_fetch(&f->backend_bytes, *nread, __ATOMIC_RELAXED);
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

/* ---- flights, table, queues ---------------------------------------------- */

static unsigned bucket_of(const uint8_t *hash)
{
	return hash[0];
}

/* Caller holds f->lock. */
static struct flight *table_find(struct fetch *f, const struct fetch_request *r)
{
	struct flight *fl;

	for (fl = f->table[bucket_of(r->hash)]; fl != NULL; fl = fl->tnext)
		if (memcmp(fl->hash, r->hash, FETCH_HASH_LEN) == 0 &&
		    fl->id_len == r->id_len &&
		    memcmp(fl->id, r->id, r->id_len) == 0 && fl->len == r->len)
			return fl;
	return NULL;
}

/* Caller holds f->lock. */
static void table_remove(struct fetch *f, struct flight *fl)
{
	struct flight **pp = &f->table[bucket_of(fl->hash)];

	while (*pp != fl)
		pp = &(*pp)->tnext;
	*pp = fl->tnext;
	fl->in_table = false;
}

/* Caller holds f->lock. */
static void queue_push(struct fetch *f, struct flight *fl, int prio)
{
	struct queue *q = &f->q[prio];

	fl->prio = prio;
	fl->qnext = NULL;
	fl->qprev = q->tail;
	if (q->tail != NULL)
		q->tail->qnext = fl;
	else
		q->head = fl;
	q->tail = fl;
	fl->queued = true;
}

/* Caller holds f->lock. */
static void queue_unlink(struct fetch *f, struct flight *fl)
{
	struct queue *q = &f->q[fl->prio];

	if (fl->qprev != NULL)
		fl->qprev->qnext = fl->qnext;
	else
		q->head = fl->qnext;
	if (fl->qnext != NULL)
		fl->qnext->qprev = fl->qprev;
	else
		q->tail = fl->qprev;
	fl->qprev = fl->qnext = NULL;
	fl->queued = false;
}

/* Frees a flight no longer referenced; called without f->lock (a buffer
 * still set is out of the account and must be unmapped). */
static void flight_free(struct flight *fl)
{
	if (fl == NULL)
		return;
	if (fl->buf != NULL)
		munmap(fl->buf, (size_t)fetch_buf_size(fl->len));
	if (fl->run_buf != NULL) /* a run that never read (fetch_free()) */
		munmap(fl->run_buf, (size_t)fetch_buf_size(fl->run_len));
	pthread_cond_destroy(&fl->cv);
	free(fl->id);
	free(fl->key);
	free(fl->etag);
	free(fl);
}

/* Drops a reference; caller holds f->lock. Returns the flight if the
 * caller must free it (after unlocking), else NULL. */
static struct flight *flight_unref(struct fetch *f, struct flight *fl)
{
	/* One reference fewer may make a queued prefetch cancellable
	 * (prefetch_cancel_one()): waiters look again. */
	pthread_cond_broadcast(&f->memory);
	if (--fl->refs > 0)
		return NULL;
	f->chunk_bytes -= fetch_buf_size(fl->len);
	fl->buf = fetch_buf_give(f, fl->buf, fl->len);
	pthread_cond_broadcast(&f->memory);
	return fl;
}

/* Caller holds f->lock. */
static void retain(struct fetch *f, struct flight *fl)
{
	fl->retained = true;
	fl->done_ns = fetch_now_ns();
	fl->rnext = NULL;
	fl->rprev = f->ret_tail;
	if (f->ret_tail != NULL)
		f->ret_tail->rnext = fl;
	else
		f->ret_head = fl;
	f->ret_tail = fl;
	/* Reclaimable now: a reader waiting for memory may take it. */
	pthread_cond_broadcast(&f->memory);
}

/* Takes fl out of the table (and the retained list) and drops the table's
 * reference; caller holds f->lock. Returns the flight if the caller must
 * free it (after unlocking), else NULL. */
static struct flight *table_drop(struct fetch *f, struct flight *fl)
{
	if (fl->retained) {
		if (fl->rprev != NULL)
			fl->rprev->rnext = fl->rnext;
		else
			f->ret_head = fl->rnext;
		if (fl->rnext != NULL)
			fl->rnext->rprev = fl->rprev;
		else
			f->ret_tail = fl->rprev;
		fl->retained = false;
	}
	table_remove(f, fl);
	/* Stored before it was done: see fetch_epoch(). */
	__atomic_add_fetch(&f->epochs[bucket_of(fl->hash)], 1,
			   __ATOMIC_RELEASE);
	return flight_unref(f, fl);
}

/* Frees dead (if not NULL), with f->lock held and dropped while freeing. */
static void flight_free_unlocked(struct fetch *f, struct flight *dead)
{
	if (dead != NULL) {
		pthread_mutex_unlock(&f->lock);
		flight_free(dead);
		pthread_mutex_lock(&f->lock);
	}
}

/* table_drop(), then frees the flight if that was its last reference,
 * with f->lock held and dropped while freeing. */
static void table_drop_free(struct fetch *f, struct flight *fl)
{
	flight_free_unlocked(f, table_drop(f, fl));
}

/* Drops the oldest retained flight, with f->lock held and dropped while
 * freeing; only a stale one unless any. Returns false if there was none. */
static bool retained_release_one(struct fetch *f, bool any)
{
	struct flight *fl = f->ret_head;

	if (fl == NULL ||
	    (!any && fetch_now_ns() - fl->done_ns < FETCH_RETAIN_STALE_NS))
		return false;
	f->reclaimed++;
	table_drop_free(f, fl);
	return true;
}

static bool run_idle(const struct flight *head);
static void run_drop(struct fetch *f, struct flight *head);

/* Drops the newest queued prefetch no part of which has started and no
 * reader waits for (a reader's own chunk comes first), a run whole, with
 * f->lock held and dropped while freeing. Returns false if there was
 * none. */
static bool prefetch_cancel_one(struct fetch *f)
{
	struct flight *fl;

	for (fl = f->q[FETCH_PRIO_PREFETCH].tail; fl != NULL; fl = fl->qprev)
		if (fl->next_part == 0 &&
		    (fl->run_head != NULL ? run_idle(fl->run_head)
					  : fl->refs == 1))
			break;
	if (fl == NULL)
		return false;
	f->reclaimed++;
	if (fl->run_head != NULL) {
		run_drop(f, fl->run_head);
		return true;
	}
	queue_unlink(f, fl);
	table_drop_free(f, fl);
	return true;
}

/* Frees memory for a caller short of it, with f->lock held: an idle
 * pooled buffer, else the oldest retained flight (for a prefetch only a
 * stale one), else (for a reader) a queued prefetch not started. Drops
 * the lock while unmapping, so the caller looks at everything again.
 * Returns false if there was nothing to free. */
static bool reclaim_one(struct fetch *f, bool reader)
{
	return fetch_pool_release_one(f) || retained_release_one(f, reader) ||
	       (reader && prefetch_cancel_one(f));
}

/* With f->lock held: what an idle engine gives back, so a daemon whose
 * readers stopped does not keep their memory: retained chunks unread for
 * FETCH_RETAIN_STALE_NS and, once nothing was asked for that long, the pooled
 * buffers. */
static void trim_idle(struct fetch *f)
{
	while (retained_release_one(f, false))
		;
	if (fetch_now_ns() - f->active_ns >= FETCH_RETAIN_STALE_NS)
		while (f->inflight == 0 && fetch_pool_release_one(f))
			;
}

/* With f->lock held: is there anything for trim_idle() to give back? */
static bool holds_idle(const struct fetch *f)
{
	int k;

	if (f->ret_head != NULL)
		return true;
	for (k = 0; k < FETCH_POOL_CLASSES; k++)
		if (f->n_pool[k] > 0)
			return true;
	return false;
}

/* Makes a flight for r with a buffer, queued at prio, in the table, and
 * wakes workers for its parts but `self` of them (parts the caller runs
 * itself). Caller holds f->lock and has checked the budget. */
static struct flight *flight_create(struct fetch *f,
				    const struct fetch_request *r, int prio,
				    unsigned self)
{
	struct flight *fl = calloc(1, sizeof(*fl));
	unsigned n, free_slots, i;

	if (fl == NULL)
		return NULL;
	cond_init(&fl->cv);
	fl->len = r->len;
	fl->id = malloc(r->id_len ? r->id_len : 1);
	fl->key = malloc(r->key_len + 1);
	fl->etag = malloc(r->etag_len + 1);
	fl->buf = r->len ? fetch_buf_take(f, r->len) : NULL;
	if (fl->id == NULL || fl->key == NULL || fl->etag == NULL ||
	    (r->len && fl->buf == NULL)) {
		fl->buf = fetch_buf_give(f, fl->buf, fl->len);
		flight_free(fl);
		return NULL;
	}
	memcpy(fl->hash, r->hash, FETCH_HASH_LEN);
	memcpy(fl->id, r->id, r->id_len);
	fl->id_len = r->id_len;
	memcpy(fl->key, r->key, r->key_len);
	fl->key[r->key_len] = '\0';
	fl->key_len = r->key_len;
	if (r->etag != NULL && r->etag_len)
		memcpy(fl->etag, r->etag, r->etag_len);
	fl->etag[r->etag_len] = '\0';
	fl->etag_len = r->etag_len;
	fl->has_etag = r->etag != NULL;
	fl->offset = r->offset;
	fl->object_size = r->object_size;
	f->chunk_bytes += fetch_buf_size(r->len);
	/* Parts only as far as connections are free now: splitting a chunk
	 * no one can fetch in parallel only adds requests. */
	n = (unsigned)((r->len + FETCH_PART_SIZE - 1) / FETCH_PART_SIZE);
	free_slots =
		f->connections > f->inflight ? f->connections - f->inflight : 1;
	if (n > FETCH_PARTS_MAX)
		n = FETCH_PARTS_MAX;
	if (n > free_slots)
		n = free_slots;
	if (n == 0)
		n = 1;
	fl->n_parts = n;
	fl->part_size =
		n == 1 ? r->len : fetch_round_page((r->len + n - 1) / n);
	fl->in_table = true;
	fl->tnext = f->table[bucket_of(r->hash)];
	f->table[bucket_of(r->hash)] = fl;
	queue_push(f, fl, prio);
	for (i = self; i < n; i++)
		pthread_cond_signal(&f->work);
	return fl;
}

/* ---- running parts -------------------------------------------------------- */

/* Caller holds f->lock: may a part start now? */
bool fetch_slot_free(const struct fetch *f)
{
	return f->inflight < f->connections && f->slot_waiters == 0;
}

/* Caller holds f->lock: may a queued prefetch part start now, as far as
 * the bytes in flight go (prefetch_inflight())? */
static bool prefetch_room(const struct fetch *f)
{
	return f->pf_inflight < f->pf_inflight_max;
}

/* Caller holds f->lock. */
static bool runnable(const struct fetch *f)
{
	return (f->q[FETCH_PRIO_READER].head != NULL ||
		(f->q[FETCH_PRIO_PREFETCH].head != NULL && prefetch_room(f))) &&
	       fetch_slot_free(f);
}

/* Caller holds f->lock. */
static struct flight *queue_next(struct fetch *f)
{
	return f->q[FETCH_PRIO_READER].head != NULL
		       ? f->q[FETCH_PRIO_READER].head
		       : f->q[FETCH_PRIO_PREFETCH].head;
}

/* Caller holds f->lock: one more reply of fl (a part, the first read or
 * its hedge) that brought every byte asked for vouched for claim. */
void fetch_claim_add(struct flight *fl, const struct backend_claim *claim)
{
	if (fl->claims++ == 0) {
		fl->claim = *claim;
	} else if (!backend_claim_same(&fl->claim, claim)) {
		fl->claim_conflict = true;
	} else {
		/* Checked whole only if every reply was: a part is not. */
		fl->claim.checked = fl->claim.checked && claim->checked;
	}
}

/* Hands done flight fl to done_fn, then leaves it retained, or drops it
 * if readers have copied it all meanwhile. Caller holds f->lock (dropped
 * around done_fn) and a reference. */
static void store(struct fetch *f, struct flight *fl)
{
	struct fetch_pin keep = { .fl = fl, .data = fl->buf };
	struct fetch_vouch v = { .object_size = fl->object_size,
				 .claim = fl->claim,
				 .conflict = fl->claim_conflict };

	if (v.conflict)
		memset(&v.claim, 0, sizeof(v.claim));
	fl->refs++; /* keep's */
	pthread_mutex_unlock(&f->lock);
	f->done_fn(f->ctx, fl->hash, fl->id, fl->id_len, fl->buf, fl->len, &v,
		   &keep);
	fetch_unpin(f, &keep); /* unless done_fn kept it */
	pthread_mutex_lock(&f->lock);
	fl->storing = false;
	if (fl->served >= fl->len || fl->forgotten)
		table_drop(f, fl); /* not the last reference: the caller's */
	else
		retain(f, fl);
}

/* Drops a reference to fl; caller holds f->lock, dropped while freeing. */
void fetch_flight_unref_free(struct fetch *f, struct flight *fl)
{
	flight_free_unlocked(f, flight_unref(f, fl));
}

static void run_read(struct fetch *f, struct flight *head, bool worker);

/* Runs the next part of queued flight fl (a flight of a run: the run's
 * read). Caller holds f->lock and has checked fetch_slot_free(); the lock
 * is dropped around the read and done_fn. worker: the caller is a worker
 * thread (it looks for more work itself). */
static void run_part(struct fetch *f, struct flight *fl, bool worker)
{
	uint64_t start, plen, t0;
	size_t nread = 0;
	unsigned part;
	bool pf = fl->prio == FETCH_PRIO_PREFETCH;
	void *unmap = NULL;
	struct backend_claim claim;
	uint8_t *buf;
	int rc;

	if (fl->run_head != NULL) {
		run_read(f, fl->run_head, worker);
		return;
	}
	part = fl->next_part++;
	if (fl->next_part == fl->n_parts)
		queue_unlink(f, fl);
	f->inflight++;
	fl->refs++; /* ours, while we use it unlocked */
	start = (uint64_t)part * fl->part_size;
	plen = fl->len - start < fl->part_size ? fl->len - start
					       : fl->part_size;
	if (pf)
		f->pf_inflight += plen;
	/* A part that failed fails the chunk: the rest need not wait out
	 * their own deadlines one after another. */
	rc = fl->rc;
	/* A hedge that wins puts its own buffer in fl->buf: this read keeps
	 * writing into the one it started with. */
	buf = fl->buf;
	t0 = fetch_now_ns();
	if (part == 0) {
		fl->start_ns = t0;
		fl->first_running = true;
	}
	pthread_mutex_unlock(&f->lock);

	if (rc == 0)
		rc = fetch_backend_read(
			f, fl->key, fl->key_len, fl->has_etag ? fl->etag : NULL,
			fl->etag_len, fl->offset + start, (size_t)plen,
			buf + start, &nread, &claim);

	pthread_mutex_lock(&f->lock);
	if (rc == 0 && nread == plen) {
		fetch_lat_record(f, plen, fetch_now_ns() - t0);
		fetch_claim_add(fl, &claim);
		fetch_hedge_earn(f, plen);
	}
	if (rc == 0)
		fetch_pace_record(f, t0, fetch_now_ns(), nread);
	f->inflight--;
	if (pf)
		f->pf_inflight -= plen;
	if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot);
	else if (!worker && runnable(f))
		pthread_cond_signal(&f->work);
	if (f->n_workers == 0)
		pthread_cond_broadcast(&f->done);
	if (!fl->hedged) {
		fl->first_running = false;
		fetch_part_finish(f, fl, part, rc, nread, worker);
		return;
	}
	if (fetch_hedge_arrive(f, fl, buf, rc == 0 && nread == plen, false,
			       &unmap))
		fetch_part_finish(f, fl, part, rc, nread, worker);
	else
		fetch_flight_unref_free(f, fl);
	if (unmap != NULL) {
		pthread_mutex_unlock(&f->lock);
		munmap(unmap, (size_t)fetch_buf_size(plen));
		pthread_mutex_lock(&f->lock);
	}
}

/* Records what part `part` of fl returned (rc, nread) and, when it was
 * the last, finishes fl: wakes its readers, then stores and retains it,
 * or drops it on an error. Drops the reference the read held. Caller
 * holds f->lock (dropped around done_fn and a free). */
void fetch_part_finish(struct fetch *f, struct flight *fl, unsigned part,
		       int rc, size_t nread, bool worker)
{
	char kb[LOG_KEY_MAX];
	struct flight *dead;
	unsigned i;

	fl->nread[part] = rc < 0 ? 0 : nread;
	if (rc < 0 && fl->rc == 0)
		fl->rc = rc;
	if (++fl->parts_done < fl->n_parts)
		goto out;
	for (i = 0; i < fl->n_parts; i++) {
		uint64_t want = fl->len - (uint64_t)i * fl->part_size;

		if (want > fl->part_size)
			want = fl->part_size;
		fl->valid += fl->nread[i];
		if (fl->nread[i] < want)
			break;
	}
	if (fl->rc == 0 && fl->valid != fl->len) {
		/* A read returns exactly the bytes asked for, or an error:
		 * a short chunk is never served, stored or retained. */
		log_msg(LOG_ERR,
			"fetch: %s: the backend returned %llu of %llu bytes "
			"at offset %llu; failing the read",
			log_key(kb, fl->key, fl->key_len),
			(unsigned long long)fl->valid,
			(unsigned long long)fl->len,
			(unsigned long long)fl->offset);
		fl->rc = -EIO;
	}
	/* Every part finished, so nothing writes the buffer any more:
	 * readers may copy while it is stored. */
	fl->done = true;
	pthread_cond_broadcast(&fl->cv);
	if (fl->rc != 0 || fl->valid != fl->len) {
		table_drop(f, fl); /* not the last reference: ours */
	} else if (f->done_fn == NULL) {
		retain(f, fl);
	} else if (!worker && fl->len > FETCH_STORE_INLINE_MAX &&
		   f->n_workers > 0) {
		/* Off the reader's path: a worker writes the blob. */
		fl->storing = true;
		fl->refs++; /* the store queue's */
		fl->snext = NULL;
		if (f->store_tail != NULL)
			f->store_tail->snext = fl;
		else
			f->store_head = fl;
		f->store_tail = fl;
		pthread_cond_signal(&f->work);
	} else {
		fl->storing = true;
		store(f, fl);
	}
out:
	dead = flight_unref(f, fl);
	if (dead != NULL) {
		pthread_mutex_unlock(&f->lock);
		flight_free(dead);
		pthread_mutex_lock(&f->lock);
	}
}

static void *worker_main(void *arg)
{
	struct fetch *f = arg;
	bool trimmer;

	pthread_setname_np(pthread_self(), "shardfs-fetch");
	pthread_mutex_lock(&f->lock);
	f->n_started++;
	/* One worker also gives back what the engine holds while idle. */
	trimmer = !f->trimmer;
	f->trimmer = true;
	pthread_cond_broadcast(&f->done);
	for (;;) {
		while (!f->stop && f->store_head == NULL &&
		       f->hedge_head == NULL && !runnable(f)) {
			uint64_t now = fetch_now_ns();

			/* Timed, so the trimmer gives back what it holds even
			 * when no one signals it. */
			if (trimmer && holds_idle(f) &&
			    now - f->trim_ns >= FETCH_WORKER_WAIT_NS) {
				f->trim_ns = now;
				trim_idle(f);
				continue;
			}
			f->idle_workers++;
			wait_until(&f->work, &f->lock,
				   now + FETCH_WORKER_WAIT_NS);
			f->idle_workers--;
		}
		if (f->hedge_head != NULL) { /* even when stopping */
			fetch_hedge_run(f);
			continue;
		}
		if (f->store_head != NULL) { /* even when stopping */
			struct flight *fl = f->store_head, *dead;

			f->store_head = fl->snext;
			if (f->store_head == NULL)
				f->store_tail = NULL;
			store(f, fl);
			dead = flight_unref(f, fl);
			if (dead != NULL) {
				pthread_mutex_unlock(&f->lock);
				flight_free(dead);
				pthread_mutex_lock(&f->lock);
			}
			continue;
		}
		if (f->stop)
			break;
		run_part(f, queue_next(f), true);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
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
	cond_init(&f->work);
	cond_init(&f->done);
	cond_init(&f->slot);
	cond_init(&f->memory);
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

/* Starts the workers on first use. Caller holds f->lock. */
static void workers_ensure(struct fetch *f)
{
	unsigned n, i;

	if (f->workers_started)
		return;
	f->workers_started = true;
	n = f->connections < FETCH_WORKERS_MAX ? f->connections
					       : FETCH_WORKERS_MAX;
	f->workers = calloc(n, sizeof(*f->workers));
	if (f->workers == NULL)
		return;
	for (i = 0; i < n; i++) {
		if (thread_start(&f->workers[f->n_workers], worker_main, f) !=
		    0)
			break;
		f->n_workers++;
	}
	if (f->n_workers < n)
		log_msg(LOG_WARNING,
			"fetch: started %u of %u worker threads; readers "
			"fetch in their own threads as needed",
			f->n_workers, n);
	/* Until a new thread runs its start routine, the threads library
	 * (or a sanitizer's runtime) may hold locks for it; a fork meanwhile
	 * would leave them held in the child. So return with every worker
	 * running. */
	while (f->n_started < f->n_workers)
		wait_until(&f->done, &f->lock,
			   fetch_now_ns() + FETCH_WORKER_WAIT_NS);
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
	uint64_t grace = handoff ? fetch_now_ns() + FETCH_HANDOFF_GRACE_NS : 0;
	uint64_t retry = 0; /* no hedge before: none could start */

	while (!fl->done) {
		uint64_t now = fetch_now_ns(), due = fetch_hedge_due(f, fl);
		uint64_t until = deadline_ns;

		if (fl->queued && fetch_slot_free(f) && now >= grace) {
			run_part(f, fl, false);
		} else if (f->n_workers == 0 && runnable(f)) {
			run_part(f, queue_next(f), false);
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
			if (wait_until(f->n_workers > 0 ? &fl->cv : &f->done,
				       &f->lock, until) == ETIMEDOUT &&
			    !fl->done && fetch_now_ns() >= deadline_ns)
				return -ETIMEDOUT;
		}
	}
	return 0;
}

/* Caller holds f->lock: takes a connection slot, ahead of queued parts,
 * waiting until deadline_ns at most. Returns 0 or -ETIMEDOUT. */
static int slot_take(struct fetch *f, uint64_t deadline_ns)
{
	int rc = 0;

	f->slot_waiters++;
	while (f->inflight >= f->connections)
		if (wait_until(&f->slot, &f->lock, deadline_ns) == ETIMEDOUT &&
		    f->inflight >= f->connections) {
			rc = -ETIMEDOUT;
			break;
		}
	f->slot_waiters--;
	if (rc == 0)
		f->inflight++;
	else if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot); /* pass on a missed wake-up */
	else
		pthread_cond_signal(&f->work); /* parts may start again */
	return rc;
}

/* Caller holds f->lock: gives back a slot taken by slot_take(). */
void fetch_slot_put(struct fetch *f)
{
	f->inflight--;
	if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot);
	else
		pthread_cond_signal(&f->work);
	if (f->n_workers == 0)
		pthread_cond_broadcast(&f->done);
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
	rc = slot_take(f, deadline_ns);
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

		flight_free(dead);
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

/* A counter per group of chunks (a table bucket) that moves when a fetch
 * of one leaves the table (after done_fn). fetch_obtain() reads it before
 * its look and passes it to get(): if it moved and the chunk is not in
 * flight, get() returns -EAGAIN instead of fetching, since the chunk may
 * have been stored after the look. EPOCH_NONE: no such check. */
#define EPOCH_NONE UINT64_MAX

static uint64_t epoch_of(struct fetch *f, const uint8_t *hash)
{
	return __atomic_load_n(&f->epochs[bucket_of(hash)], __ATOMIC_ACQUIRE);
}
/* Caller holds f->lock. */
static bool epoch_moved(struct fetch *f, const uint8_t *hash, uint64_t epoch)
{
	return epoch != EPOCH_NONE && f->epochs[bucket_of(hash)] != epoch;
}

/* Counts bytes a reader took out of fl, drops fl from the table once all
 * of a retained chunk was read, and drops the reader's reference. Caller
 * holds f->lock; returns with it released. */
static void served_unref(struct fetch *f, struct flight *fl, uint64_t bytes)
{
	struct flight *dead, *dead2 = NULL;

	fl->served += bytes;
	if (fl->retained && fl->served >= fl->len)
		dead2 = table_drop(f, fl); /* not the last reference: ours */
	dead = flight_unref(f, fl);
	pthread_mutex_unlock(&f->lock);
	flight_free(dead2);
	flight_free(dead);
}

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
	workers_ensure(f);
	start = fetch_now_ns();
	f->active_ns = start;
	wait_ns = f->wait_ns;
	deadline = start + wait_ns;
	direct_at = start + FETCH_DIRECT_AFTER_NS;
	for (;;) {
		fl = table_find(f, r);
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
				queue_unlink(f, fl);
				queue_push(f, fl, FETCH_PRIO_READER);
				f->promoted++;
				pthread_cond_signal(&f->work);
			}
			break;
		}
		if (mode != GET_FETCH) {
			pthread_mutex_unlock(&f->lock);
			return -ENOENT;
		}
		if (epoch_moved(f, r->hash, epoch)) {
			pthread_mutex_unlock(&f->lock);
			return -EAGAIN;
		}
		/* Memory for the whole chunk, or (a fill, which has no
		 * buffer of its own) no other chunk to wait for. */
		need = fetch_buf_need(f, r->len);
		if (f->in_use + need <= f->budget ||
		    (!direct_ok && f->chunk_bytes == 0)) {
			handoff = fetch_hedge_handoff(f, r->len);
			fl = flight_create(f, r, FETCH_PRIO_READER,
					   fetch_slot_free(f) && !handoff ? 1
									  : 0);
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
		if (reclaim_one(f, true))
			continue;
		if (wait_until(&f->memory, &f->lock,
			       direct_ok ? direct_at : deadline) == ETIMEDOUT &&
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
			__atomic_fetch_add(&f->stall_ns, fetch_now_ns() - start,
					   __ATOMIC_RELAXED);
		return ret;
	}
	if (wait_done(f, fl, deadline, handoff) < 0) {
		dead = flight_unref(f, fl);
		pthread_mutex_unlock(&f->lock);
		flight_free(dead);
		return wait_failed(r, "the chunk", wait_ns);
	}
	if (stalled)
		__atomic_fetch_add(&f->stall_ns, fetch_now_ns() - start,
				   __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);

	/* Done without an error means every byte is there (run_part()). */
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
	served_unref(f, fl, len > 0 ? (uint64_t)(ret > 0 ? ret : 0) : fl->len);
	return ret;
}

void fetch_unpin(struct fetch *f, struct fetch_pin *pin)
{
	struct flight *fl = pin->fl;

	if (pin->own != NULL) {
		fetch_buffer_free(f, pin->own, pin->own_len);
		pin->own = NULL;
	}

	if (fl == NULL)
		return;
	pin->fl = NULL;
	pthread_mutex_lock(&f->lock);
	served_unref(f, fl, pin->len);
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
	workers_ensure(f);
	f->active_ns = fetch_now_ns();
	for (;;) {
		if (f->n_workers == 0) {
			rc = -ENOBUFS; /* nobody would run it */
		} else if (table_find(f, r) != NULL) {
			rc = 1;
		} else if (epoch_moved(f, r->hash, epoch)) {
			rc = -EAGAIN;
		} else if (!prefetch_may_take(f->in_use,
					      fetch_buf_need(f, r->len),
					      f->budget)) {
			if (reclaim_one(f, false))
				continue;
			f->refused++;
			rc = -ENOBUFS;
		} else {
			fl = flight_create(f, r, FETCH_PRIO_PREFETCH, 0);
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
	found = table_find(f, r) != NULL;
	pthread_mutex_unlock(&f->lock);
	return found;
}

void fetch_forget(struct fetch *f, const uint8_t *hash, const uint8_t *id,
		  size_t id_len)
{
	struct flight *fl;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	for (fl = f->table[bucket_of(hash)]; fl != NULL; fl = fl->tnext)
		if ((fl->retained || fl->storing) &&
		    memcmp(fl->hash, hash, FETCH_HASH_LEN) == 0 &&
		    fl->id_len == id_len && memcmp(fl->id, id, id_len) == 0)
			break;
	/* One being stored (done_fn may be what told the caller) leaves the
	 * table instead of being retained when done_fn returns (store()). */
	if (fl != NULL && fl->storing)
		fl->forgotten = true;
	else if (fl != NULL)
		table_drop_free(f, fl);
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
	got = get(f, r, EPOCH_NONE, off, len, dst,
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
		uint64_t epoch = tries < FETCH_RELOOKS ? epoch_of(f, r->hash)
						       : EPOCH_NONE;

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
		uint64_t epoch = tries < FETCH_RELOOKS ? epoch_of(f, r->hash)
						       : EPOCH_NONE;

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
	f->active_ns = fetch_now_ns();
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

/* ---- runs: one backend read for several chunks ---------------------------- */

/* Whether run head (queued, not started) may be cancelled: each of its
 * flights queued as a prefetch that no reader waits for (referenced by
 * the table and the run only). Caller holds f->lock. */
static bool run_idle(const struct flight *head)
{
	const struct flight *m;

	for (m = head; m != NULL; m = m->run_next)
		if (m->prio != FETCH_PRIO_PREFETCH || m->refs != 2)
			return false;
	return true;
}

/* Takes run head (not started) out of the queues and the table, with its
 * buffer and the run's references, with f->lock held and dropped while
 * freeing. */
static void run_drop(struct fetch *f, struct flight *head)
{
	struct flight *m, *next, *dead = NULL, *d;
	uint64_t len = head->run_len;
	void *unmap;

	f->chunk_bytes -= fetch_buf_size(len);
	unmap = fetch_buf_give(f, head->run_buf, len);
	head->run_buf = NULL;
	for (m = head; m != NULL; m = next) {
		next = m->run_next;
		m->run_head = m->run_next = NULL;
		if (m->queued)
			queue_unlink(f, m);
		d = table_drop(f, m); /* the table's reference */
		if (d == NULL)
			d = flight_unref(f, m); /* the run's */
		if (d != NULL) {
			d->tnext = dead; /* out of the table: a free link */
			dead = d;
		}
	}
	pthread_mutex_unlock(&f->lock);
	while (dead != NULL) {
		next = dead->tnext;
		flight_free(dead);
		dead = next;
	}
	if (unmap != NULL)
		munmap(unmap, (size_t)fetch_buf_size(len));
	pthread_mutex_lock(&f->lock);
}

/* Runs the read of run head: one backend read of its range into the run's
 * buffer, copied to each flight, which then finishes as a part would
 * (fetch_part_finish(): stored, retained, its readers woken). Caller
 * holds f->lock (dropped around the read and the stores) and has checked
 * fetch_slot_free(). */
static void run_read(struct fetch *f, struct flight *head, bool worker)
{
	struct flight *fls[FETCH_RUN_MAX], *m;
	uint64_t start = head->offset, len = head->run_len, t0, t1;
	uint8_t *buf = head->run_buf;
	struct backend_claim claim;
	size_t nread = 0;
	unsigned n = 0, i;
	bool pf = true;
	void *unmap;
	int rc;

	/* Every flight of it starts now: none is queued or run again. */
	for (m = head; m != NULL; m = m->run_next) {
		fls[n++] = m;
		m->next_part = m->n_parts;
		if (m->queued)
			queue_unlink(f, m);
		pf = pf && m->prio == FETCH_PRIO_PREFETCH;
	}
	head->run_buf = NULL; /* the read's now */
	f->inflight++;
	if (pf)
		f->pf_inflight += len;
	t0 = fetch_now_ns();
	pthread_mutex_unlock(&f->lock);

	rc = fetch_backend_read(
		f, head->key, head->key_len, head->has_etag ? head->etag : NULL,
		head->etag_len, start, (size_t)len, buf, &nread, &claim);
	/* No one reads a flight's buffer before it is done. */
	if (rc == 0 && nread == len)
		for (i = 0; i < n; i++)
			memcpy(fls[i]->buf, buf + (fls[i]->offset - start),
			       (size_t)fls[i]->len);

	pthread_mutex_lock(&f->lock);
	t1 = fetch_now_ns();
	if (rc == 0)
		fetch_pace_record(f, t0, t1, nread);
	if (rc == 0 && nread == len) {
		fetch_lat_record(f, len, t1 - t0);
	} else if (rc == 0) {
		char kb[LOG_KEY_MAX];

		/* Once for the run, not once per chunk. */
		log_msg(LOG_ERR,
			"fetch: %s: the backend returned %zu of %llu bytes "
			"at offset %llu; failing the read",
			log_key(kb, head->key, head->key_len), nread,
			(unsigned long long)len, (unsigned long long)start);
		rc = -EIO;
	}
	f->inflight--;
	if (pf)
		f->pf_inflight -= len;
	if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot);
	else if (!worker && runnable(f))
		pthread_cond_signal(&f->work);
	if (f->n_workers == 0)
		pthread_cond_broadcast(&f->done);
	for (i = 0; i < n; i++)
		fls[i]->run_head = fls[i]->run_next = NULL;
	/* Each drops the run's reference (the part's). */
	for (i = 0; i < n; i++) {
		if (rc == 0)
			fetch_claim_add(fls[i], &claim);
		fetch_part_finish(f, fls[i], 0, rc,
				  rc == 0 ? (size_t)fls[i]->len : 0, worker);
	}
	f->chunk_bytes -= fetch_buf_size(len);
	unmap = fetch_buf_give(f, buf, len);
	if (unmap != NULL) {
		pthread_mutex_unlock(&f->lock);
		munmap(unmap, (size_t)fetch_buf_size(len));
		pthread_mutex_lock(&f->lock);
	}
}

/* Queues rs[0..n-1] (consecutive chunks, span bytes together) as one run
 * at prio, or as an ordinary chunk when n is 1. Caller holds f->lock and
 * has checked the budget. Returns 0 or -ENOMEM (nothing queued; the lock
 * may have been dropped). */
static int run_create(struct fetch *f, const struct fetch_request *rs,
		      unsigned n, uint64_t span, int prio)
{
	struct flight *head = NULL, *prev = NULL, *fl;
	uint8_t *buf;
	unsigned i;

	/* A reader's runs wait for it (it joins them next, and runs them
	 * in its thread, as its own chunk: fetch_obtain()), so that it
	 * cannot miss the end of its own run; a worker takes them only if
	 * no connection is free for it. */
	if (n == 1) {
		fl = flight_create(f, rs, prio,
				   prio == FETCH_PRIO_READER ? 1 : 0);
		if (fl == NULL)
			return -ENOMEM;
		fl->refs = 1; /* the table's */
		return 0;
	}
	buf = fetch_buf_take(f, span);
	if (buf == NULL)
		return -ENOMEM;
	f->chunk_bytes += fetch_buf_size(span);
	for (i = 0; i < n; i++) {
		/* Its one part is the run's read: no worker woken for it. */
		fl = flight_create(f, &rs[i], prio, 1);
		if (fl == NULL)
			break;
		fl->refs = 2; /* the table's and the run's */
		fl->run_head = head != NULL ? head : fl;
		if (prev != NULL)
			prev->run_next = fl;
		else
			head = fl;
		prev = fl;
	}
	if (head == NULL) {
		void *unmap = fetch_buf_give(f, buf, span);

		f->chunk_bytes -= fetch_buf_size(span);
		if (unmap != NULL) {
			pthread_mutex_unlock(&f->lock);
			munmap(unmap, (size_t)fetch_buf_size(span));
			pthread_mutex_lock(&f->lock);
		}
		return -ENOMEM;
	}
	head->run_buf = buf;
	head->run_len = span;
	if (i < n) {
		run_drop(f, head);
		return -ENOMEM;
	}
	if (prio != FETCH_PRIO_READER)
		pthread_cond_signal(&f->work);
	return 0;
}

/* What a chunk of fetch_run() is, as far as it knows. */
enum { RUN_LOOK, RUN_MISSING, RUN_THERE };

int fetch_run(struct fetch *f, const struct fetch_request *rs, unsigned n,
	      bool reader, fetch_look_fn look, void *const *look_args,
	      unsigned *queued, uint64_t *bytes)
{
	uint64_t epochs[FETCH_RUN_MAX], span, need;
	uint8_t state[FETCH_RUN_MAX];
	int prio = reader ? FETCH_PRIO_READER : FETCH_PRIO_PREFETCH;
	unsigned i, j, k, tries;
	bool again;
	int rc = 0;

	*queued = 0;
	*bytes = 0;
	if (n > FETCH_RUN_MAX)
		return -EINVAL;
	if (n == 0)
		return 0;
	fetch_fork_check(f);
	memset(state, RUN_LOOK, n);
	/* As fetch_obtain(): a chunk whose group's epoch moved between its
	 * look and the table may have been stored meanwhile: look again. */
	for (tries = 0;; tries++) {
		pthread_mutex_lock(&f->lock);
		for (i = 0; i < n; i++)
			if (state[i] == RUN_LOOK && table_find(f, &rs[i]))
				state[i] = RUN_THERE;
		pthread_mutex_unlock(&f->lock);
		for (i = 0; i < n; i++) {
			if (state[i] != RUN_LOOK)
				continue;
			epochs[i] = tries < FETCH_RELOOKS
					    ? epoch_of(f, rs[i].hash)
					    : EPOCH_NONE;
			state[i] = look != NULL && look(look_args[i], NULL) == 0
					   ? RUN_THERE
					   : RUN_MISSING;
		}
		pthread_mutex_lock(&f->lock);
		again = false;
		for (i = 0; i < n; i++) {
			if (state[i] != RUN_MISSING)
				continue;
			if (table_find(f, &rs[i]) != NULL) {
				state[i] = RUN_THERE;
			} else if (epoch_moved(f, rs[i].hash, epochs[i])) {
				state[i] = RUN_LOOK;
				again = true;
			}
		}
		if (!again)
			break;
		pthread_mutex_unlock(&f->lock);
	}
	workers_ensure(f);
	f->active_ns = fetch_now_ns();
	if (!reader && f->n_workers == 0) {
		pthread_mutex_unlock(&f->lock);
		return -ENOBUFS; /* nobody would run it */
	}
	for (i = 0; i < n;) {
		if (state[i] != RUN_MISSING) {
			i++;
			continue;
		}
		span = 0;
		need = 0;
		for (j = i; j < n && state[j] == RUN_MISSING &&
			    span + rs[j].len <= FETCH_PART_SIZE;
		     j++) {
			span += rs[j].len;
			need += fetch_buf_size(rs[j].len);
		}
		if (j - i > 1)
			need += fetch_buf_size(span);
		if (reader ? f->in_use + need > f->budget
			   : !prefetch_may_take(f->in_use, need, f->budget)) {
			if (reclaim_one(f, reader)) {
				/* The lock was dropped: the table again. */
				for (k = i; k < n; k++)
					if (state[k] == RUN_MISSING &&
					    table_find(f, &rs[k]) != NULL)
						state[k] = RUN_THERE;
				continue;
			}
			if (!reader)
				f->refused++;
			rc = -ENOBUFS;
			break;
		}
		rc = run_create(f, rs + i, j - i, span, prio);
		if (rc < 0)
			break;
		if (!reader) {
			f->queued += j - i;
			f->queued_bytes += span;
		}
		*queued += j - i;
		*bytes += span;
		i = j;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}
