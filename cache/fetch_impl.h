/*
 * fetch_impl.h: what the files of the fetch engine share behind fetch.h
 * (its contract). Nothing outside fetch*.c includes it.
 *
 *   fetch_open.c   the engine's life: fetch_new(), limits, fetch_free(),
 *                  stats
 *   fetch_fork.c   the engine in a forked child (fetch_fork_check())
 *   fetch_request.c requests: fetch_obtain(), fetch_ahead(),
 *                  fetch_direct(), pins and forgetting
 *   fetch_table.c  flights: the single-flight table, the queues, the
 *                  retained list, references, reclaiming, epochs
 *   fetch_worker.c running parts: connection slots, backend reads, a
 *                  flight's finish, the worker threads
 *   fetch_run.c    runs: several chunks' flights, one backend read
 *   fetch_buf.c    buffers: the memory budget's account and the pool of
 *                  reusable buffers
 *   fetch_hedge.c  hedged reads: latencies per size class, when a read is
 *                  overdue, the second read and which answer wins
 *   fetch_pace.c   the pace of backend reads the prefetcher measures
 *   fetch_fail.c   ranges that failed just now (fetch_fail.h)
 *
 * Every function here is called with f->lock held unless it says
 * otherwise. The design of the whole engine, since all its files keep the
 * same invariants (a flight's reference count, its place in the table and
 * queues, its buffer's accounting) under the same lock:
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
#ifndef SHARDFS_CACHE_FETCH_IMPL_H
#define SHARDFS_CACHE_FETCH_IMPL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "backends/backend.h"
#include "cache/fetch.h"
#include "cache/prefetch.h"
#include "util/clock.h"

#define FETCH_BUCKETS 256
#define FETCH_PAGE 4096u
#define FETCH_POOL_MIN_SHIFT 16		    /* 64 KiB, the smallest class */
#define FETCH_POOL_CLASSES 9		    /* 64 KiB .. 16 MiB */
#define FETCH_POOL_BUF (UINT64_C(16) << 20) /* the largest class */
/* Idle buffers a class keeps: 16, or as many as fill FETCH_POOL_CLASS_BYTES
 * if that is more (a record view's 64 KiB chunks are a few hundred
 * buffers at a time: mapping and faulting in each anew was a third of
 * the daemon's CPU on a cold read). */
#define FETCH_POOL_CLASS_BYTES (UINT64_C(16) << 20)
#define FETCH_POOL_MAX_LARGE 16
#define FETCH_POOL_MAX (FETCH_POOL_CLASS_BYTES >> FETCH_POOL_MIN_SHIFT)
#define FETCH_RETAIN_STALE_NS (UINT64_C(2000000000)) /* see the file comment */
#define FETCH_STORE_INLINE_MAX (UINT64_C(1) << 20) /* larger: a worker stores */
#define FETCH_CONNECTIONS_DEFAULT 64
#define FETCH_MEMORY_DEFAULT (UINT64_C(512) << 20)
/* How long a reader waits for memory for its chunk before reading its
 * bytes directly; short, since a direct read costs one request. */
#define FETCH_DIRECT_AFTER_NS (UINT64_C(100000000))
/* The longest an idle worker sleeps before it looks at its state again;
 * the trimmer trims at most this often, and at least this often while it
 * holds memory. */
#define FETCH_WORKER_WAIT_NS (UINT64_C(1000000000))
/* Hedged reads (see fetch.h): the window of read latencies kept per size
 * class, the samples needed before a class hedges, how often its
 * threshold is recomputed, the threshold's floor, how soon a waiter tries
 * again when no connection, memory or credit was free, the median latency
 * above which a reader hands its chunk to a worker, how long it leaves it
 * there before running it itself, the share of the other reads' bytes
 * that hedges may re-read (1/FETCH_HEDGE_BUDGET_DIV) and the most credit
 * kept (one 8 MiB part can always be hedged once earned, and a long quiet
 * spell does not bank a burst of hedges). */
#define FETCH_HEDGE_WINDOW 128
#define FETCH_HEDGE_CLASSES 4 /* up to 128 KiB, 1 MiB, 8 MiB, larger */
#define FETCH_HEDGE_MIN_SAMPLES 32
#define FETCH_HEDGE_RECOMPUTE 16
#define FETCH_HEDGE_FLOOR_NS (UINT64_C(10000000))
#define FETCH_HEDGE_RETRY_NS (UINT64_C(10000000))
#define FETCH_HANDOFF_MIN_NS (UINT64_C(1000000))
#define FETCH_HANDOFF_GRACE_NS (UINT64_C(5000000))
#define FETCH_HEDGE_BUDGET_DIV 32
#define FETCH_HEDGE_CREDIT_MAX (2 * FETCH_PART_SIZE)
/* Backend reads between recomputations of the bound on prefetch bytes in
 * flight: a sort of the pace window's 64 latencies each time. */
#define FETCH_FLOW_RECOMPUTE 8

enum { FETCH_PRIO_READER = 0, FETCH_PRIO_PREFETCH = 1, FETCH_NPRIO };

struct flight {
	struct flight *tnext;	      /* table bucket chain */
	struct flight *qprev, *qnext; /* queue links while queued */
	struct flight *rprev, *rnext; /* retained list links */
	struct flight *snext;	      /* store queue link */
	pthread_cond_t cv;	      /* done, for its waiters */
	bool queued, in_table, done, retained;
	bool storing; /* done_fn has it: stays in the table, not retained */
	uint64_t store_ticket; /* while storing: f->store_next when it began */
	int prio;
	uint8_t hash[FETCH_HASH_LEN];
	uint8_t *id;
	size_t id_len;
	char *key, *etag;
	size_t key_len, etag_len;
	bool has_etag; /* etag NULL means: do not check */
	uint64_t offset, len;
	uint8_t *buf;
	uint64_t buf_bytes; /* mapped and accounted */
	unsigned n_parts, next_part, parts_done;
	uint64_t part_size;
	size_t nread[FETCH_PARTS_MAX];
	int rc;		  /* first error of a part */
	uint64_t valid;	  /* bytes fetched, from the start, once done */
	uint64_t served;  /* bytes readers copied out */
	uint64_t done_ns; /* when it was done (CLOCK_MONOTONIC) */
	unsigned refs;
	/* Hedging, for a flight of one part: when its first read started,
	 * whether that read is running, whether a hedge was issued and is
	 * running. */
	uint64_t start_ns;
	bool first_running, hedged, hedge_running;
	uint8_t *hedge_buf;   /* the hedge's buffer while queued */
	struct flight *hnext; /* hedge queue link */
	/* What its replies vouched for about the whole object (fetch_claim_add()),
	 * for done_fn. */
	uint64_t object_size;
	struct backend_claim claim;
	unsigned claims; /* replies that said it */
	bool claim_conflict;
	bool forgotten; /* fetch_forget() while storing: not retained */
	/* A run (fetch_run()): flights of consecutive chunks that one
	 * backend read fetches. While the run is queued, each flight links
	 * to its first (run_head) and the next (run_next), and holds a
	 * reference for the read; the head holds the read's buffer
	 * (run_buf, run_len bytes, accounted in chunk_bytes). Cleared when
	 * the read has returned, before its flights finish. */
	struct flight *run_head, *run_next;
	uint8_t *run_buf;
	uint64_t run_len;
};

struct queue {
	struct flight *head, *tail;
};

/* The recent read latencies of one size class (see fetch.h). */
struct hedge_class {
	uint32_t us[FETCH_HEDGE_WINDOW]; /* a ring, in microseconds */
	unsigned n, next, since; /* samples, next slot, new since sorted */
	uint64_t p50_ns;	 /* 0 until FETCH_HEDGE_MIN_SAMPLES */
	uint64_t after_ns;	 /* the hedge threshold; 0: do not hedge */
};

struct fetch {
	struct backend *be; /* borrowed; NULL: reads fail with -ENXIO */
	fetch_done_fn done_fn;
	void *ctx;
	struct fetch_fail *fails; /* ranges that failed just now; own lock */

	pthread_mutex_t lock;  /* see the file comment */
	pthread_cond_t work;   /* a part was queued, a slot freed, or stop */
	pthread_cond_t done;   /* a worker started; with no workers, also:
				* a flight finished or a slot freed */
	pthread_cond_t slot;   /* a slot freed, for slot waiters */
	pthread_cond_t memory; /* memory was released */
	pthread_cond_t stored; /* a flight went through done_fn */
	/* Protected by lock: flights fetched whole and not through done_fn
	 * yet (queued for a worker, or being stored: in the table, storing
	 * set), and the ticket the next one gets (fetch_drain_stores() waits
	 * for those with a ticket below the next at its call only). */
	unsigned n_storing;
	uint64_t store_next;
	unsigned connections; /* protected by lock */
	uint64_t budget;      /* protected by lock */
	unsigned inflight;    /* protected by lock: requests running */
	uint64_t pf_inflight; /* protected by lock: bytes of prefetch parts
				* running */
	/* Written under lock, read atomically: how many bytes of prefetch
	 * parts may run at once (prefetch_inflight(), recomputed by
	 * fetch_pace_record()). */
	uint64_t pf_inflight_max;
	unsigned slot_waiters;				/* protected by lock */
	struct queue q[FETCH_NPRIO];			/* protected by lock */
	struct flight *table[FETCH_BUCKETS];		/* protected by lock */
	uint64_t in_use, chunk_bytes, high_water;	/* protected by lock */
	void *pool[FETCH_POOL_CLASSES][FETCH_POOL_MAX]; /* protected by lock */
	unsigned n_pool[FETCH_POOL_CLASSES];		/* protected by lock */
	struct flight *ret_head, *ret_tail;	/* protected by lock: retained
						   * flights, oldest first */
	struct flight *store_head, *store_tail; /* protected by lock: chunks
						   * for a worker to store */
	/* The process whose engine this is (see fetch_fork_check()), and its
	 * workers; protected by lock. */
	pid_t owner_pid;
	bool workers_started;
	pthread_t *workers;
	unsigned n_workers, n_started;
	bool trimmer; /* a worker trims while idle (fetch_trim_idle()) */
	bool stop;
	uint64_t active_ns; /* protected by lock: last request or buffer */
	uint64_t trim_ns;   /* protected by lock: last fetch_trim_idle() */
	uint64_t wait_ns;   /* protected by lock: a reader's wait bound */
	/* Protected by lock: statistics. */
	uint64_t waits, queued, queued_bytes, promoted, refused, reclaimed;
	uint64_t direct_reads;
	/* Relaxed atomics: statistics of backend_read(). */
	uint64_t backend_reads, backend_bytes, backend_errors;
	uint64_t
		epochs[FETCH_BUCKETS]; /* written under lock, read atomically */
	/* Protected by lock: hedged reads. */
	bool hedge_on;
	unsigned idle_workers; /* workers waiting for work */
	struct hedge_class lat[FETCH_HEDGE_CLASSES];
	struct flight *hedge_head, *hedge_tail; /* hedges for a worker */
	uint64_t hedges, hedge_wins;
	uint64_t hedge_credit; /* bytes hedges may re-read now */
	/* Protected by lock: the last FETCH_PACE_WINDOW backend reads that
	 * succeeded (see fetch_pace_get()), a ring from pace_next. */
	uint64_t pace_lat[FETCH_PACE_WINDOW], pace_end[FETCH_PACE_WINDOW];
	uint64_t pace_bytes[FETCH_PACE_WINDOW];
	unsigned pace_n, pace_next;
	unsigned pace_since; /* protected by lock: reads since the bound on
			      * prefetch bytes in flight was recomputed */
	uint64_t stalls;     /* protected by lock: see fetch_pace_get() */
	uint64_t stall_ns;   /* atomic: time those reads waited, summed */
};

static inline uint64_t fetch_round_page(uint64_t n)
{
	return (n + FETCH_PAGE - 1) / FETCH_PAGE * FETCH_PAGE;
}

/* A counter per group of chunks (a table bucket) that moves when a fetch
 * of one leaves the table (after done_fn). fetch_obtain() reads it before
 * its look and passes it to get(): if it moved and the chunk is not in
 * flight, get() returns -EAGAIN instead of fetching, since the chunk may
 * have been stored after the look. FETCH_EPOCH_NONE: no such check. */
#define FETCH_EPOCH_NONE UINT64_MAX

/* Caller holds f->lock: may a part start now? (A hedge asks too.) */
static inline bool fetch_slot_free(const struct fetch *f)
{
	return f->inflight < f->connections && f->slot_waiters == 0;
}

/* Every condition variable here waits on CLOCK_MONOTONIC (see
 * fetch_wait_until()), so a clock step neither ends a wait early nor makes it
 * longer. */
static inline void fetch_cond_init(pthread_cond_t *cv)
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
static inline int fetch_wait_until(pthread_cond_t *cv, pthread_mutex_t *m,
				   uint64_t deadline_ns)
{
	struct timespec ts;

	if (clock_now_ns() >= deadline_ns)
		return ETIMEDOUT;
	ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
	ts.tv_nsec = (long)(deadline_ns % 1000000000u);
	return pthread_cond_timedwait(cv, m, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}

/* ---- fetch_fork.c ---- */

/* In a process forked from the owner (`shardfs mount` daemonizing after
 * opening the cache), the owner's threads did not come along, and its
 * locks and flights are not ours: start afresh. Runs before the child
 * has threads of its own that use the engine (see cache.h), so unlocked. */
void fetch_fork_check(struct fetch *f);

/* ---- fetch_table.c ---- */

/* Which table bucket (and epoch) a chunk's hash falls in. */
unsigned fetch_bucket_of(const uint8_t *hash);

/* Caller holds f->lock. */
struct flight *fetch_table_find(struct fetch *f, const struct fetch_request *r);

/* Caller holds f->lock. */
void fetch_queue_push(struct fetch *f, struct flight *fl, int prio);

/* Caller holds f->lock. */
void fetch_queue_unlink(struct fetch *f, struct flight *fl);

/* Frees a flight no longer referenced; called without f->lock (a buffer
 * still set is out of the account and must be unmapped). */
void fetch_flight_free(struct flight *fl);

/* Drops a reference; caller holds f->lock. Returns the flight if the
 * caller must free it (after unlocking), else NULL. */
struct flight *fetch_flight_unref(struct fetch *f, struct flight *fl);

/* Caller holds f->lock. */
void fetch_flight_retain(struct fetch *f, struct flight *fl);

/* Takes fl out of the table (and the retained list) and drops the table's
 * reference; caller holds f->lock. Returns the flight if the caller must
 * free it (after unlocking), else NULL. */
struct flight *fetch_table_drop(struct fetch *f, struct flight *fl);

/* Frees dead (if not NULL), with f->lock held and dropped while freeing. */
void fetch_flight_free_unlocked(struct fetch *f, struct flight *dead);

/* fetch_table_drop(), then frees the flight if that was its last reference,
 * with f->lock held and dropped while freeing. */
void fetch_table_drop_free(struct fetch *f, struct flight *fl);

/* Takes run head (not started) out of the queues and the table, with its
 * buffer and the run's references, with f->lock held and dropped while
 * freeing. */
void fetch_run_drop(struct fetch *f, struct flight *head);

/* Frees memory for a caller short of it, with f->lock held: an idle
 * pooled buffer, else the oldest retained flight (for a prefetch only a
 * stale one), else (for a reader) a queued prefetch not started. Drops
 * the lock while unmapping, so the caller looks at everything again.
 * Returns false if there was nothing to free. */
bool fetch_reclaim_one(struct fetch *f, bool reader);

/* With f->lock held: what an idle engine gives back, so a daemon whose
 * readers stopped does not keep their memory: retained chunks unread for
 * FETCH_RETAIN_STALE_NS and, once nothing was asked for that long, the pooled
 * buffers. */
void fetch_trim_idle(struct fetch *f);

/* With f->lock held: is there anything for fetch_trim_idle() to give back? */
bool fetch_holds_idle(const struct fetch *f);

/* Makes a flight for r with a buffer, queued at prio, in the table, and
 * wakes workers for its parts but `self` of them (parts the caller runs
 * itself). Caller holds f->lock and has checked the budget. */
struct flight *fetch_flight_create(struct fetch *f,
				   const struct fetch_request *r, int prio,
				   unsigned self);

uint64_t fetch_epoch_of(struct fetch *f, const uint8_t *hash);

/* Caller holds f->lock. */
bool fetch_epoch_moved(struct fetch *f, const uint8_t *hash, uint64_t epoch);

/* Counts bytes a reader took out of fl, drops fl from the table once all
 * of a retained chunk was read, and drops the reader's reference. Caller
 * holds f->lock; returns with it released. */
void fetch_served_unref(struct fetch *f, struct flight *fl, uint64_t bytes);

/* ---- fetch_worker.c ---- */

/* Records what part `part` of fl returned (rc, nread) and, when it was
 * the last, finishes fl: wakes its readers, then stores and retains it,
 * or drops it on an error. Drops the reference the read held. Caller
 * holds f->lock (dropped around done_fn and a free). */
void fetch_part_finish(struct fetch *f, struct flight *fl, unsigned part,
		       int rc, size_t nread, bool worker);

/* One backend read of [offset, offset + len) of key into buf, counted in
 * the engine's stats; returns 0 and sets *nread, or a negative errno
 * (-ENXIO without a backend). With claim (may be NULL), also what the
 * reply vouched for about the whole object (backend.h, read_claim()). A
 * read of a range that failed just now fails at once (fetch_fail.h). It
 * takes no connection: its caller holds one. */
int fetch_backend_read(struct fetch *f, const char *key, size_t key_len,
		       const char *etag, size_t etag_len, uint64_t offset,
		       size_t len, void *buf, size_t *nread,
		       struct backend_claim *claim);

/* Caller holds f->lock: one more reply of fl (a part, the first read or
 * its hedge) that brought every byte asked for vouched for claim. */
void fetch_claim_add(struct flight *fl, const struct backend_claim *claim);

/* Drops a reference to fl; caller holds f->lock, dropped while freeing. */
void fetch_flight_unref_free(struct fetch *f, struct flight *fl);

/* Caller holds f->lock: gives back a slot taken by fetch_slot_take(). */
void fetch_slot_put(struct fetch *f);

/* Caller holds f->lock. */
bool fetch_runnable(const struct fetch *f);

/* Caller holds f->lock. */
struct flight *fetch_queue_next(struct fetch *f);

/* Hands done flight fl to done_fn, then leaves it retained, or drops it
 * if readers have copied it all meanwhile. Caller holds f->lock (dropped
 * around done_fn) and a reference. */
void fetch_flight_store(struct fetch *f, struct flight *fl);

/* Runs the next part of queued flight fl (a flight of a run: the run's
 * read). Caller holds f->lock and has checked fetch_slot_free(); the lock
 * is dropped around the read and done_fn. worker: the caller is a worker
 * thread (it looks for more work itself). */
void fetch_part_run(struct fetch *f, struct flight *fl, bool worker);

/* Starts the workers on first use. Caller holds f->lock. */
void fetch_workers_ensure(struct fetch *f);

/* Caller holds f->lock: takes a connection slot, ahead of queued parts,
 * waiting until deadline_ns at most. Returns 0 or -ETIMEDOUT. */
int fetch_slot_take(struct fetch *f, uint64_t deadline_ns);

/* ---- fetch_buf.c ---- */

/* Bytes a buffer for n bytes takes: mapped, and accounted. */
uint64_t fetch_buf_size(uint64_t n);

/* Caller holds f->lock: what taking a buffer for n bytes would add to the
 * account (nothing when the pool has one). */
uint64_t fetch_buf_need(const struct fetch *f, uint64_t n);

/* Caller holds f->lock: a buffer for n bytes, accounted, from the pool or
 * newly mapped; NULL if out of memory. */
void *fetch_buf_take(struct fetch *f, uint64_t n);

/* Caller holds f->lock: gives back a buffer taken for n bytes, to the
 * pool (still accounted) or out of the account. Returns it if the caller
 * must munmap() it (fetch_buf_size(n) bytes) after unlocking, else NULL. */
void *fetch_buf_give(struct fetch *f, void *p, uint64_t n);

/* Unmaps one idle pooled buffer (the largest), with f->lock held and
 * dropped while unmapping. Returns false if the pools are empty. */
bool fetch_pool_release_one(struct fetch *f);

/* Caller holds f->lock: bytes held outside chunks and pools, i.e. reply
 * buffers (fetch_buffer_alloc()): what no reclaim can free. */
uint64_t fetch_replies_bytes(const struct fetch *f);

/* ---- fetch_hedge.c ---- */

/* Caller holds f->lock: a backend read of len bytes took ns. Every
 * FETCH_HEDGE_RECOMPUTE samples (once there are FETCH_HEDGE_MIN_SAMPLES) sets the
 * class's median and threshold: twice its 95th percentile, at least
 * FETCH_HEDGE_FLOOR_NS. */
void fetch_lat_record(struct fetch *f, uint64_t len, uint64_t ns);

/* Caller holds f->lock: a read that is not a hedge brought len bytes;
 * hedges may re-read 1/FETCH_HEDGE_BUDGET_DIV of them (see fetch.h). */
void fetch_hedge_earn(struct fetch *f, uint64_t len);

/* Caller holds f->lock: when fl may be hedged, the monotonic time at
 * which its first read is overdue; else 0. Only a flight of one part
 * (its buffer is then the read's own, so a hedge can bring another),
 * with its version pinned (etag), whose first read runs and which has no
 * hedge yet. */
uint64_t fetch_hedge_due(const struct fetch *f, const struct flight *fl);

/* Caller holds f->lock: should a reader whose chunk of len bytes is not
 * in flight leave its read to a worker and wait, so it can hedge it?
 * Only when hedging may fire for that class, a worker is idle, and reads
 * take long enough (median FETCH_HANDOFF_MIN_NS) that the two context
 * switches of the hand-off do not count. */
bool fetch_hedge_handoff(const struct fetch *f, uint64_t len);

/* Caller holds f->lock: one of the two reads of hedged flight fl (the
 * hedge, or the first) returned into buf, a valid answer or not (ok).
 * The first valid answer wins; an error waits for the other read while
 * it runs. Returns true if the caller finishes fl with its answer (buf is
 * then fl->buf, or the caller's error stands), false if it just leaves.
 * A buffer no read or reader will use again is given back; *unmap is set
 * if the caller must munmap() it after unlocking. */
bool fetch_hedge_arrive(struct fetch *f, struct flight *fl, uint8_t *buf,
			bool ok, bool hedge, void **unmap);

/* Caller holds f->lock: asks for the hedge of flight fl (fetch_hedge_due() has
 * passed): a second read of the same bytes of the same version, into a
 * buffer of its own, run by an idle worker, so the waiter goes on waiting
 * for whichever answer comes first. Only with a worker idle, a connection
 * free now (taken here for the worker), memory under the prefetches'
 * share of the budget (a hedge is optional work like a prefetch: it never
 * waits, never reclaims, so a reader always finds room) and the credit
 * for its bytes (fetch_hedge_earn()). Returns false if it could not be
 * asked for now. */
bool fetch_hedge_request(struct fetch *f, struct flight *fl);

/* ---- fetch_pace.c ---- */

/* Caller holds f->lock: a backend read of bytes ran from t0 to t1.
 * Every FETCH_FLOW_RECOMPUTE reads, sets the bound on prefetch bytes in
 * flight from the pace (fetch_flow_update()). */
void fetch_pace_record(struct fetch *f, uint64_t t0, uint64_t t1,
		       uint64_t bytes);

/* Caller holds f->lock: sets f->pf_inflight_max from the pace and the
 * budget (prefetch_inflight()) and, if it grew, wakes the workers, since
 * queued prefetch parts may start. */
void fetch_flow_update(struct fetch *f);

/* Caller holds f->lock. The least latency is what a read costs without
 * queueing at the server (or for a connection), so a deeper prefetch,
 * which queues more, does not make itself look necessary; throughput is
 * over the span of the window's reads. */
void fetch_pace_compute(const struct fetch *f, struct fetch_pace *out);

#endif
