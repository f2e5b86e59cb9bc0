/*
 * fetch: see fetch.h for the contract.
 *
 * Why one file of about 1,800 lines: every section below (buffers,
 * flights and queues, parts, hedged reads, pace, requests) works on the
 * same flights under the same lock, f->lock, and their invariants (a
 * flight's reference count, its place in the table and queues, its
 * buffer's accounting) are kept across the sections in one critical
 * section at a time. Split into files, each would need struct flight and
 * the lock rules through a shared header, and a reviewer would have to
 * read them together anyway. The sections are marked; hedged reads and
 * pace are the first candidates to move out once they have a narrow
 * interface of their own.
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
 * a reader's thread leaves the store of a chunk over STORE_INLINE_MAX to
 * a worker. Then it stays in the table, retained, until readers have
 * copied all of it or
 * its memory is needed: a prefetched chunk is then served from memory
 * without a look at the disk cache, and a reader that comes meanwhile
 * joins it instead of missing both the table and the store. Retained
 * flights are reclaimed oldest first: by a reader that needs memory, and
 * by a prefetch or an idle engine only once they are RETAIN_STALE_NS old
 * (the reader did not come for them); an engine idle that long also
 * unmaps its pooled buffers.
 *
 * Lock: one mutex, f->lock, protects every field below marked so, the
 * queues, the table and every flight's state. It is never held across a
 * backend read, done_fn, a copy out of a flight or munmap; it is the
 * innermost lock of the cache (taken with no other cache lock held, and
 * no other lock is taken under it).
 *
 * Memory: buffers are mmap()ed, so what the budget counts is what the
 * process holds, without the allocator's caching. Buffers of up to
 * POOL_BUF bytes come in power-of-two classes from 64 KiB and are kept in
 * a small pool per class for reuse (mapping, faulting in and zeroing a
 * buffer per chunk costs more than fetching a small one); pooled buffers stay
 * accounted, and a reader short of memory unmaps them first.
 *
 * Progress under any budget: a reader short of memory for its chunk frees
 * what it can (pooled buffers, the oldest retained flight, a queued
 * prefetch not started), then waits at most DIRECT_AFTER_NS for memory to
 * come free; failing that (at once when the reply buffers alone leave no
 * room), it reads just the bytes it asked for straight into its own
 * buffer through a connection slot (a direct read: no memory, not
 * cached). Every change that frees memory or makes it reclaimable
 * (unmapping, pooling, an unreference, retaining a flight) wakes memory
 * waiters. Every wait is a timed wait on CLOCK_MONOTONIC that re-checks
 * its state; a reader waiting for a chunk another thread fetches, for
 * memory (a fill) or for a slot gives up with -EIO at its deadline
 * (f->wait_ns after it asked); workers wake at least every
 * WORKER_WAIT_NS, so the trimmer runs even when no one signals it.
 *
 * Hedged reads (the policy is in fetch.h): a flight of one part has at
 * most two reads, its first (run_part()) and its hedge (hedge_request()
 * by a waiter, hedge_run() by a worker), each into its own buffer:
 * fl->buf is the first's until an answer wins, then the winner's. Each
 * read holds a reference and, under f->lock, clears its *_running flag
 * when it returns (hedge_arrive()); whichever returns last gives back the
 * buffer that did not win, so no buffer is written after it is freed or
 * served, and the budget counts both while both run.
 *
 * A chunk whose parts returned fewer bytes than asked (nread != len) is
 * an error for every reader (-EIO, logged once with the key and counts)
 * and is neither stored nor retained: a read returns exactly the bytes
 * asked for, or an error.
 */
#include "cache/fetch.h"

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

#define BUCKETS 256
#define PAGE 4096u
#define POOL_MIN_SHIFT 16	      /* 64 KiB, the smallest class */
#define POOL_CLASSES 9		      /* 64 KiB .. 16 MiB */
#define POOL_BUF (UINT64_C(16) << 20) /* the largest class */
#define POOL_MAX 16	  /* idle buffers kept per class up to 1 MiB, */
#define POOL_MAX_LARGE 16 /* and per larger class */
#define RETAIN_STALE_NS (UINT64_C(2000000000)) /* see the file comment */
#define STORE_INLINE_MAX (UINT64_C(1) << 20)   /* larger: a worker stores */
/* Prefetch parts run at once up to this many bytes: streams share the
 * server's bandwidth, so the part a reader will need next should not
 * share it with every chunk the window reaches; small files (latency
 * bound) still go many at a time. */
#define PREFETCH_INFLIGHT_MAX (UINT64_C(32) << 20)
#define CONNECTIONS_DEFAULT 64
#define MEMORY_DEFAULT (UINT64_C(512) << 20)
/* How long a reader waits for memory for its chunk before reading its
 * bytes directly; short, since a direct read costs one request. */
#define DIRECT_AFTER_NS (UINT64_C(100000000))
/* The longest an idle worker sleeps before it looks at its state again;
 * the trimmer trims at most this often, and at least this often while it
 * holds memory. */
#define WORKER_WAIT_NS (UINT64_C(1000000000))
/* Hedged reads (see fetch.h): the window of read latencies kept per size
 * class, the samples needed before a class hedges, how often its
 * threshold is recomputed, the threshold's floor, how soon a waiter tries
 * again when no connection, memory or credit was free, the median latency
 * above which a reader hands its chunk to a worker, how long it leaves it
 * there before running it itself, the share of the other reads' bytes
 * that hedges may re-read (1/HEDGE_BUDGET_DIV) and the most credit kept
 * (one 8 MiB part can always be hedged once earned, and a long quiet
 * spell does not bank a burst of hedges). */
#define HEDGE_WINDOW 128
#define HEDGE_CLASSES 4 /* up to 128 KiB, 1 MiB, 8 MiB, larger */
#define HEDGE_MIN_SAMPLES 32
#define HEDGE_RECOMPUTE 16
#define HEDGE_FLOOR_NS (UINT64_C(10000000))
#define HEDGE_RETRY_NS (UINT64_C(10000000))
#define HANDOFF_MIN_NS (UINT64_C(1000000))
#define HANDOFF_GRACE_NS (UINT64_C(5000000))
#define HEDGE_BUDGET_DIV 32
#define HEDGE_CREDIT_MAX (2 * FETCH_PART_SIZE)

enum { PRIO_READER = 0, PRIO_PREFETCH = 1, NPRIO };

struct flight {
	struct flight *tnext;	      /* table bucket chain */
	struct flight *qprev, *qnext; /* queue links while queued */
	struct flight *rprev, *rnext; /* retained list links */
	struct flight *snext;	      /* store queue link */
	pthread_cond_t cv;	      /* done, for its waiters */
	bool queued, in_table, done, retained;
	bool storing; /* done_fn has it: stays in the table, not retained */
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
	/* What its replies vouched for about the whole object (claim_add()),
	 * for done_fn. */
	uint64_t object_size;
	struct backend_claim claim;
	unsigned claims; /* replies that said it */
	bool claim_conflict;
	bool forgotten; /* fetch_forget() while storing: not retained */
};

struct queue {
	struct flight *head, *tail;
};

/* The recent read latencies of one size class (see fetch.h). */
struct hedge_class {
	uint32_t us[HEDGE_WINDOW]; /* a ring, in microseconds */
	unsigned n, next, since;   /* samples, next slot, new since sorted */
	uint64_t p50_ns;	   /* 0 until HEDGE_MIN_SAMPLES */
	uint64_t after_ns;	   /* the hedge threshold; 0: do not hedge */
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
	unsigned connections;  /* protected by lock */
	uint64_t budget;       /* protected by lock */
	unsigned inflight;     /* protected by lock: requests running */
	uint64_t pf_inflight;  /* protected by lock: bytes of prefetch parts
				* running */
	unsigned slot_waiters; /* protected by lock */
	struct queue q[NPRIO]; /* protected by lock */
	struct flight *table[BUCKETS];		  /* protected by lock */
	uint64_t in_use, chunk_bytes, high_water; /* protected by lock */
	void *pool[POOL_CLASSES][POOL_MAX];	  /* protected by lock */
	unsigned n_pool[POOL_CLASSES];		  /* protected by lock */
	struct flight *ret_head, *ret_tail;	  /* protected by lock: retained
						   * flights, oldest first */
	struct flight *store_head, *store_tail;	  /* protected by lock: chunks
						   * for a worker to store */
	/* The process whose engine this is (see fork_check()), and its
	 * workers; protected by lock. */
	pid_t owner_pid;
	bool workers_started;
	pthread_t *workers;
	unsigned n_workers, n_started;
	bool trimmer; /* a worker trims while idle (trim_idle()) */
	bool stop;
	uint64_t active_ns; /* protected by lock: last request or buffer */
	uint64_t trim_ns;   /* protected by lock: last trim_idle() */
	uint64_t wait_ns;   /* protected by lock: a reader's wait bound */
	/* Protected by lock: statistics. */
	uint64_t waits, queued, queued_bytes, promoted, refused, reclaimed;
	uint64_t direct_reads;
	/* Relaxed atomics: statistics of fetch_backend_read(). */
	uint64_t backend_reads, backend_bytes, backend_errors;
	uint64_t epochs[BUCKETS]; /* written under lock, read atomically */
	/* Protected by lock: hedged reads. */
	bool hedge_on;
	unsigned idle_workers; /* workers waiting for work */
	struct hedge_class lat[HEDGE_CLASSES];
	struct flight *hedge_head, *hedge_tail; /* hedges for a worker */
	uint64_t hedges, hedge_wins;
	uint64_t hedge_credit; /* bytes hedges may re-read now */
	/* Protected by lock: the last FETCH_PACE_WINDOW backend reads that
	 * succeeded (see fetch_pace_get()), a ring from pace_next. */
	uint64_t pace_lat[FETCH_PACE_WINDOW], pace_end[FETCH_PACE_WINDOW];
	uint64_t pace_bytes[FETCH_PACE_WINDOW];
	unsigned pace_n, pace_next;
	uint64_t stalls;   /* protected by lock: see fetch_pace_get() */
	uint64_t stall_ns; /* atomic: time those reads waited, summed */
};

static void fork_check(struct fetch *f);
static void part_finish(struct fetch *f, struct flight *fl, unsigned part,
			int rc, size_t nread, bool worker);
static bool hedge_request(struct fetch *f, struct flight *fl);
static void hedge_run(struct fetch *f);

static uint64_t round_page(uint64_t n)
{
	return (n + PAGE - 1) / PAGE * PAGE;
}

static void *map(uint64_t bytes)
{
	void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

	if (now_ns() >= deadline_ns)
		return ETIMEDOUT;
	ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
	ts.tv_nsec = (long)(deadline_ns % 1000000000u);
	return pthread_cond_timedwait(cv, m, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}

/* Caller holds f->lock. */
static void account(struct fetch *f, uint64_t bytes)
{
	f->in_use += bytes;
	if (f->in_use > f->high_water)
		f->high_water = f->in_use;
}

/* Caller holds f->lock. */
static void unaccount(struct fetch *f, uint64_t bytes)
{
	f->in_use -= bytes;
	pthread_cond_broadcast(&f->memory);
}

/* ---- buffers ------------------------------------------------------------- */

/* The pool class of a buffer of n bytes, or -1: mapped to its size. */
static int class_of(uint64_t n)
{
	int k = 0;

	if (n > POOL_BUF)
		return -1;
	while (k < POOL_CLASSES - 1 &&
	       (UINT64_C(1) << (POOL_MIN_SHIFT + k)) < n)
		k++;
	return k;
}

/* Bytes a buffer for n bytes takes: mapped, and accounted. */
static uint64_t buf_size(uint64_t n)
{
	int k = class_of(n);

	return k < 0 ? round_page(n) : UINT64_C(1) << (POOL_MIN_SHIFT + k);
}

/* Caller holds f->lock: what taking a buffer for n bytes would add to the
 * account (nothing when the pool has one). */
static uint64_t buf_need(const struct fetch *f, uint64_t n)
{
	int k = class_of(n);

	return k >= 0 && f->n_pool[k] > 0 ? 0 : buf_size(n);
}

/* Caller holds f->lock: a buffer for n bytes, accounted, from the pool or
 * newly mapped; NULL if out of memory. */
static void *buf_take(struct fetch *f, uint64_t n)
{
	int k = class_of(n);
	void *p;

	if (k >= 0 && f->n_pool[k] > 0)
		return f->pool[k][--f->n_pool[k]];
	p = map(buf_size(n));
	if (p != NULL)
		account(f, buf_size(n));
	return p;
}

/* Caller holds f->lock: gives back a buffer taken for n bytes, to the
 * pool (still accounted) or out of the account. Returns it if the caller
 * must munmap() it (buf_size(n) bytes) after unlocking, else NULL. */
static void *buf_give(struct fetch *f, void *p, uint64_t n)
{
	int k = class_of(n);

	if (p == NULL)
		return NULL;
	if (k >= 0 && f->n_pool[k] < (k <= 4 ? POOL_MAX : POOL_MAX_LARGE)) {
		f->pool[k][f->n_pool[k]++] = p;
		pthread_cond_broadcast(&f->memory);
		return NULL;
	}
	unaccount(f, buf_size(n));
	return p;
}

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
	f->connections = connections ? connections : CONNECTIONS_DEFAULT;
	f->budget = memory ? memory : MEMORY_DEFAULT;
	f->wait_ns = FETCH_WAIT_MS_DEFAULT * UINT64_C(1000000);
	f->hedge_on = true;
	f->owner_pid = getpid();
	pthread_mutex_init(&f->lock, NULL);
	cond_init(&f->work);
	cond_init(&f->done);
	cond_init(&f->slot);
	cond_init(&f->memory);
	*out = f;
	return 0;
}

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
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	if (connections)
		f->connections = connections;
	if (memory)
		f->budget = memory;
	pthread_cond_broadcast(&f->work);
	pthread_cond_broadcast(&f->memory);
	pthread_mutex_unlock(&f->lock);
}

void fetch_set_wait(struct fetch *f, uint64_t wait_ms)
{
	fork_check(f);
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
	fork_check(f);
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
		munmap(fl->buf, (size_t)buf_size(fl->len));
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
	f->chunk_bytes -= buf_size(fl->len);
	fl->buf = buf_give(f, fl->buf, fl->len);
	pthread_cond_broadcast(&f->memory);
	return fl;
}

/* Caller holds f->lock. */
static void retain(struct fetch *f, struct flight *fl)
{
	fl->retained = true;
	fl->done_ns = now_ns();
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

/* Unmaps one idle pooled buffer (the largest), with f->lock held and
 * dropped while unmapping. Returns false if the pools are empty. */
static bool pool_release_one(struct fetch *f)
{
	void *p;
	uint64_t bytes;
	int k;

	for (k = POOL_CLASSES - 1; k >= 0; k--)
		if (f->n_pool[k] > 0)
			break;
	if (k < 0)
		return false;
	p = f->pool[k][--f->n_pool[k]];
	bytes = UINT64_C(1) << (POOL_MIN_SHIFT + k);
	unaccount(f, bytes);
	pthread_mutex_unlock(&f->lock);
	munmap(p, (size_t)bytes);
	pthread_mutex_lock(&f->lock);
	return true;
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

	if (fl == NULL || (!any && now_ns() - fl->done_ns < RETAIN_STALE_NS))
		return false;
	f->reclaimed++;
	table_drop_free(f, fl);
	return true;
}

/* Drops the newest queued prefetch no part of which has started and no
 * reader waits for (a reader's own chunk comes first), with f->lock held
 * and dropped while freeing. Returns false if there was none. */
static bool prefetch_cancel_one(struct fetch *f)
{
	struct flight *fl;

	for (fl = f->q[PRIO_PREFETCH].tail; fl != NULL; fl = fl->qprev)
		if (fl->next_part == 0 && fl->refs == 1)
			break;
	if (fl == NULL)
		return false;
	queue_unlink(f, fl);
	f->reclaimed++;
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
	return pool_release_one(f) || retained_release_one(f, reader) ||
	       (reader && prefetch_cancel_one(f));
}

/* Caller holds f->lock: bytes held outside chunks and pools, i.e. reply
 * buffers (fetch_buffer_alloc()): what no reclaim can free. */
static uint64_t replies_bytes(const struct fetch *f)
{
	uint64_t held = f->chunk_bytes;
	int k;

	for (k = 0; k < POOL_CLASSES; k++)
		held += (uint64_t)f->n_pool[k] << (POOL_MIN_SHIFT + k);
	return f->in_use > held ? f->in_use - held : 0;
}

/* With f->lock held: what an idle engine gives back, so a daemon whose
 * readers stopped does not keep their memory: retained chunks unread for
 * RETAIN_STALE_NS and, once nothing was asked for that long, the pooled
 * buffers. */
static void trim_idle(struct fetch *f)
{
	while (retained_release_one(f, false))
		;
	if (now_ns() - f->active_ns >= RETAIN_STALE_NS)
		while (f->inflight == 0 && pool_release_one(f))
			;
}

/* With f->lock held: is there anything for trim_idle() to give back? */
static bool holds_idle(const struct fetch *f)
{
	int k;

	if (f->ret_head != NULL)
		return true;
	for (k = 0; k < POOL_CLASSES; k++)
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
	fl->buf = r->len ? buf_take(f, r->len) : NULL;
	if (fl->id == NULL || fl->key == NULL || fl->etag == NULL ||
	    (r->len && fl->buf == NULL)) {
		fl->buf = buf_give(f, fl->buf, fl->len);
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
	f->chunk_bytes += buf_size(r->len);
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
	fl->part_size = n == 1 ? r->len : round_page((r->len + n - 1) / n);
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
static bool slot_free(const struct fetch *f)
{
	return f->inflight < f->connections && f->slot_waiters == 0;
}

/* Caller holds f->lock: may a queued prefetch part start now? */
static bool prefetch_room(const struct fetch *f)
{
	return f->pf_inflight < PREFETCH_INFLIGHT_MAX;
}

/* Caller holds f->lock. */
static bool runnable(const struct fetch *f)
{
	return (f->q[PRIO_READER].head != NULL ||
		(f->q[PRIO_PREFETCH].head != NULL && prefetch_room(f))) &&
	       slot_free(f);
}

/* Caller holds f->lock. */
static struct flight *queue_next(struct fetch *f)
{
	return f->q[PRIO_READER].head != NULL ? f->q[PRIO_READER].head
					      : f->q[PRIO_PREFETCH].head;
}

/* Caller holds f->lock: one more reply of fl (a part, the first read or
 * its hedge) that brought every byte asked for vouched for claim. */
static void claim_add(struct flight *fl, const struct backend_claim *claim)
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
	struct fetch_pin keep = { fl, fl->buf, 0 };
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

/* ---- hedged reads --------------------------------------------------------- */

/* The size class of a read of len bytes: classes 8 times apart, since a
 * large read's time is its transfer, a small one's the first byte. */
static unsigned lat_class(uint64_t len)
{
	unsigned k = 0;

	while (k < HEDGE_CLASSES - 1 && len > (UINT64_C(128) << 10) << (3 * k))
		k++;
	return k;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Caller holds f->lock: a backend read of len bytes took ns. Every
 * HEDGE_RECOMPUTE samples (once there are HEDGE_MIN_SAMPLES) sets the
 * class's median and threshold: twice its 95th percentile, at least
 * HEDGE_FLOOR_NS. */
static void lat_record(struct fetch *f, uint64_t len, uint64_t ns)
{
	struct hedge_class *hc = &f->lat[lat_class(len)];
	uint32_t sorted[HEDGE_WINDOW];
	uint64_t us = ns / 1000, p95;

	hc->us[hc->next] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
	hc->next = (hc->next + 1) % HEDGE_WINDOW;
	if (hc->n < HEDGE_WINDOW)
		hc->n++;
	hc->since++;
	if (hc->n < HEDGE_MIN_SAMPLES ||
	    (hc->since < HEDGE_RECOMPUTE && hc->after_ns != 0))
		return;
	hc->since = 0;
	/* Until the ring is full its samples are its first n slots. */
	memcpy(sorted, hc->us, hc->n * sizeof(*sorted));
	qsort(sorted, hc->n, sizeof(*sorted), cmp_u32);
	hc->p50_ns = (uint64_t)sorted[hc->n / 2] * 1000;
	p95 = (uint64_t)sorted[hc->n * 95 / 100] * 1000;
	hc->after_ns = 2 * p95 > HEDGE_FLOOR_NS ? 2 * p95 : HEDGE_FLOOR_NS;
}

/* Caller holds f->lock: a read that is not a hedge brought len bytes;
 * hedges may re-read 1/HEDGE_BUDGET_DIV of them (see fetch.h). */
static void hedge_earn(struct fetch *f, uint64_t len)
{
	f->hedge_credit += len / HEDGE_BUDGET_DIV;
	if (f->hedge_credit > HEDGE_CREDIT_MAX)
		f->hedge_credit = HEDGE_CREDIT_MAX;
}

/* Caller holds f->lock: when fl may be hedged, the monotonic time at
 * which its first read is overdue; else 0. Only a flight of one part
 * (its buffer is then the read's own, so a hedge can bring another),
 * with its version pinned (etag), whose first read runs and which has no
 * hedge yet. */
static uint64_t hedge_due(const struct fetch *f, const struct flight *fl)
{
	uint64_t after = f->lat[lat_class(fl->len)].after_ns;

	if (!f->hedge_on || after == 0 || fl->done || fl->hedged ||
	    fl->n_parts != 1 || !fl->first_running || !fl->has_etag ||
	    fl->etag_len == 0)
		return 0;
	return fl->start_ns + after;
}

/* Caller holds f->lock: should a reader whose chunk of len bytes is not
 * in flight leave its read to a worker and wait, so it can hedge it?
 * Only when hedging may fire for that class, a worker is idle, and reads
 * take long enough (median HANDOFF_MIN_NS) that the two context
 * switches of the hand-off do not count. */
static bool hedge_handoff(const struct fetch *f, uint64_t len)
{
	const struct hedge_class *hc = &f->lat[lat_class(len)];

	return f->hedge_on && hc->after_ns != 0 &&
	       hc->p50_ns >= HANDOFF_MIN_NS && f->idle_workers > 0 &&
	       len <= FETCH_PART_SIZE;
}

/* Caller holds f->lock: gives back a read's buffer of fl that fl no
 * longer uses. Returns it if the caller must munmap() it
 * (buf_size(fl->len) bytes) after unlocking, else NULL. */
static void *spare_give(struct fetch *f, struct flight *fl, uint8_t *buf)
{
	f->chunk_bytes -= buf_size(fl->len);
	return buf_give(f, buf, fl->len);
}

/* Caller holds f->lock: one of the two reads of hedged flight fl (the
 * hedge, or the first) returned into buf, a valid answer or not (ok).
 * The first valid answer wins; an error waits for the other read while
 * it runs. Returns true if the caller finishes fl with its answer (buf is
 * then fl->buf, or the caller's error stands), false if it just leaves.
 * A buffer no read or reader will use again is given back; *unmap is set
 * if the caller must munmap() it after unlocking. */
static bool hedge_arrive(struct fetch *f, struct flight *fl, uint8_t *buf,
			 bool ok, bool hedge, void **unmap)
{
	bool other;

	if (hedge)
		fl->hedge_running = false;
	else
		fl->first_running = false;
	other = hedge ? fl->first_running : fl->hedge_running;
	if (fl->done || (!ok && other)) {
		if (buf != fl->buf) /* the first's stays until fl ends */
			*unmap = spare_give(f, fl, buf);
		return false;
	}
	if (!ok) { /* both failed: fl fails with this, the later, error */
		if (buf != fl->buf)
			*unmap = spare_give(f, fl, buf);
		return true;
	}
	if (buf != fl->buf) { /* the hedge won */
		uint8_t *old = fl->buf;

		fl->buf = buf;
		f->hedge_wins++;
		/* A read still running writes into old: it gives it back
		 * when it returns. */
		if (!other)
			*unmap = spare_give(f, fl, old);
	}
	return true;
}

/* Drops a reference to fl; caller holds f->lock, dropped while freeing. */
static void flight_unref_free(struct fetch *f, struct flight *fl)
{
	flight_free_unlocked(f, flight_unref(f, fl));
}

/* Caller holds f->lock: a backend read of bytes ran from t0 to t1. */
static void pace_record(struct fetch *f, uint64_t t0, uint64_t t1,
			uint64_t bytes)
{
	f->pace_lat[f->pace_next] = t1 - t0;
	f->pace_end[f->pace_next] = t1;
	f->pace_bytes[f->pace_next] = bytes;
	f->pace_next = (f->pace_next + 1) % FETCH_PACE_WINDOW;
	if (f->pace_n < FETCH_PACE_WINDOW)
		f->pace_n++;
}

/* Caller holds f->lock. The least latency is what a read costs without
 * queueing at the server (or for a connection), so a deeper prefetch,
 * which queues more, does not make itself look necessary; throughput is
 * over the span of the window's reads. */
static void pace_compute(const struct fetch *f, struct fetch_pace *out)
{
	uint64_t lat[FETCH_PACE_WINDOW], first = UINT64_MAX, last = 0,
					 bytes = 0, v;
	unsigned n = f->pace_n, i, j;

	memset(out, 0, sizeof(*out));
	if (n < 2)
		return;
	for (i = 0; i < n; i++) {
		/* Insertion sort: 64 entries, at most once per open. */
		v = f->pace_lat[i];
		for (j = i; j > 0 && lat[j - 1] > v; j--)
			lat[j] = lat[j - 1];
		lat[j] = v;
		if (f->pace_end[i] < first)
			first = f->pace_end[i];
		if (f->pace_end[i] > last)
			last = f->pace_end[i];
		bytes += f->pace_bytes[i];
	}
	out->latency_min_ns = lat[0];
	out->latency_median_ns = lat[n / 2];
	out->latency_p90_ns = lat[n * 9 / 10];
	if (last > first) {
		/* n - 1 reads (and their bytes, but the first's) ended in
		 * last - first; the first's bytes are close enough. */
		out->reads_per_s =
			(uint64_t)(n - 1) * 1000000000u / (last - first);
		out->bytes_per_s = (uint64_t)((double)bytes * (n - 1) / n *
					      1e9 / (double)(last - first));
	}
}

/* Runs the next part of queued flight fl. Caller holds f->lock and has
 * checked slot_free(); the lock is dropped around the read and done_fn.
 * worker: the caller is a worker thread (it looks for more work itself). */
static void run_part(struct fetch *f, struct flight *fl, bool worker)
{
	uint64_t start, plen, t0;
	size_t nread = 0;
	unsigned part;
	bool pf = fl->prio == PRIO_PREFETCH;
	void *unmap = NULL;
	struct backend_claim claim;
	uint8_t *buf;
	int rc;

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
	t0 = now_ns();
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
		lat_record(f, plen, now_ns() - t0);
		claim_add(fl, &claim);
		hedge_earn(f, plen);
	}
	if (rc == 0)
		pace_record(f, t0, now_ns(), nread);
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
		part_finish(f, fl, part, rc, nread, worker);
		return;
	}
	if (hedge_arrive(f, fl, buf, rc == 0 && nread == plen, false, &unmap))
		part_finish(f, fl, part, rc, nread, worker);
	else
		flight_unref_free(f, fl);
	if (unmap != NULL) {
		pthread_mutex_unlock(&f->lock);
		munmap(unmap, (size_t)buf_size(plen));
		pthread_mutex_lock(&f->lock);
	}
}

/* Records what part `part` of fl returned (rc, nread) and, when it was
 * the last, finishes fl: wakes its readers, then stores and retains it,
 * or drops it on an error. Drops the reference the read held. Caller
 * holds f->lock (dropped around done_fn and a free). */
static void part_finish(struct fetch *f, struct flight *fl, unsigned part,
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
	} else if (!worker && fl->len > STORE_INLINE_MAX && f->n_workers > 0) {
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
			uint64_t now = now_ns();

			/* Timed, so the trimmer gives back what it holds even
			 * when no one signals it. */
			if (trimmer && holds_idle(f) &&
			    now - f->trim_ns >= WORKER_WAIT_NS) {
				f->trim_ns = now;
				trim_idle(f);
				continue;
			}
			f->idle_workers++;
			wait_until(&f->work, &f->lock, now + WORKER_WAIT_NS);
			f->idle_workers--;
		}
		if (f->hedge_head != NULL) { /* even when stopping */
			hedge_run(f);
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
static void fork_check(struct fetch *f)
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
	for (k = 0; k < POOL_CLASSES; k++)
		pooled += (uint64_t)f->n_pool[k] << (POOL_MIN_SHIFT + k);
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
		wait_until(&f->done, &f->lock, now_ns() + WORKER_WAIT_NS);
}

/* Caller holds f->lock: waits until fl is done, running its parts in this
 * thread while connections are free (and any queued part when no worker
 * could be started), and its hedge once its read is overdue. handoff:
 * the caller left fl to a worker (hedge_handoff()); it runs fl itself
 * only if still queued after HANDOFF_GRACE_NS. Returns 0, or -ETIMEDOUT
 * if fl is not done by deadline_ns (a read this thread runs ends by the
 * backend's deadline). */
static int wait_done(struct fetch *f, struct flight *fl, uint64_t deadline_ns,
		     bool handoff)
{
	uint64_t grace = handoff ? now_ns() + HANDOFF_GRACE_NS : 0;
	uint64_t retry = 0; /* no hedge before: none could start */

	while (!fl->done) {
		uint64_t now = now_ns(), due = hedge_due(f, fl);
		uint64_t until = deadline_ns;

		if (fl->queued && slot_free(f) && now >= grace) {
			run_part(f, fl, false);
		} else if (f->n_workers == 0 && runnable(f)) {
			run_part(f, queue_next(f), false);
		} else if (due != 0 && now >= due && now >= retry) {
			if (!hedge_request(f, fl))
				retry = now + HEDGE_RETRY_NS;
		} else {
			/* Every wait stays bounded by deadline_ns; the hedge
			 * and the hand-off only wake the waiter sooner. */
			if (due != 0 && (due > retry ? due : retry) < until)
				until = due > retry ? due : retry;
			if (fl->queued && grace > now && grace < until)
				until = grace;
			if (wait_until(f->n_workers > 0 ? &fl->cv : &f->done,
				       &f->lock, until) == ETIMEDOUT &&
			    !fl->done && now_ns() >= deadline_ns)
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
static void slot_put(struct fetch *f)
{
	f->inflight--;
	if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot);
	else
		pthread_cond_signal(&f->work);
	if (f->n_workers == 0)
		pthread_cond_broadcast(&f->done);
}

/* Caller holds f->lock: asks for the hedge of flight fl (hedge_due() has
 * passed): a second read of the same bytes of the same version, into a
 * buffer of its own, run by an idle worker, so the waiter goes on waiting
 * for whichever answer comes first. Only with a worker idle, a connection
 * free now (taken here for the worker), memory under the prefetches'
 * share of the budget (a hedge is optional work like a prefetch: it never
 * waits, never reclaims, so a reader always finds room) and the credit
 * for its bytes (hedge_earn()). Returns false if it could not be asked
 * for now. */
static bool hedge_request(struct fetch *f, struct flight *fl)
{
	uint8_t *buf;

	if (f->idle_workers == 0 || !slot_free(f) ||
	    f->hedge_credit < fl->len ||
	    f->in_use + buf_need(f, fl->len) > f->budget / 4 * 3)
		return false;
	buf = buf_take(f, fl->len);
	if (buf == NULL)
		return false;
	f->hedge_credit -= fl->len;
	f->chunk_bytes += buf_size(fl->len);
	f->inflight++;
	fl->refs++; /* the hedge's, until it returns */
	fl->hedged = fl->hedge_running = true;
	fl->hedge_buf = buf;
	fl->hnext = NULL;
	if (f->hedge_tail != NULL)
		f->hedge_tail->hnext = fl;
	else
		f->hedge_head = fl;
	f->hedge_tail = fl;
	f->hedges++;
	pthread_cond_signal(&f->work);
	return true;
}

/* Runs the hedge at the head of the hedge queue, in a worker; its slot
 * and buffer were taken by hedge_request(). Caller holds f->lock,
 * dropped around the read. A stopping engine does not read: the hedge
 * just gives back what it holds. */
static void hedge_run(struct fetch *f)
{
	char kb[LOG_KEY_MAX];
	struct flight *fl = f->hedge_head;
	uint64_t len = fl->len, t0, late_ms;
	uint8_t *buf = fl->hedge_buf;
	size_t nread = 0;
	void *unmap = NULL;
	struct backend_claim claim;
	/* A first read that finished since the hedge was queued makes it
	 * moot: no request, hedge_arrive() gives the buffer back. */
	bool ok, skip = f->stop || fl->done;
	int rc = -ECANCELED;

	f->hedge_head = fl->hnext;
	if (f->hedge_head == NULL)
		f->hedge_tail = NULL;
	fl->hedge_buf = NULL;
	t0 = now_ns();
	late_ms = (t0 - fl->start_ns) / 1000000u;
	pthread_mutex_unlock(&f->lock);

	if (!skip) {
		log_msg(LOG_DEBUG,
			"fetch: %s: read running for %llu ms; hedging it",
			log_key(kb, fl->key, fl->key_len),
			(unsigned long long)late_ms);
		rc = fetch_backend_read(f, fl->key, fl->key_len,
					fl->has_etag ? fl->etag : NULL,
					fl->etag_len, fl->offset, (size_t)len,
					buf, &nread, &claim);
	}

	pthread_mutex_lock(&f->lock);
	slot_put(f);
	ok = rc == 0 && nread == len;
	if (ok) {
		lat_record(f, len, now_ns() - t0);
		claim_add(fl, &claim);
	}
	if (hedge_arrive(f, fl, buf, ok, true, &unmap))
		part_finish(f, fl, 0, rc, nread, true);
	else
		flight_unref_free(f, fl);
	if (unmap != NULL) {
		pthread_mutex_unlock(&f->lock);
		munmap(unmap, (size_t)buf_size(len));
		pthread_mutex_lock(&f->lock);
	}
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

/* A read of [off, off + len) of chunk r straight into dst, outside the
 * chunk machinery, for a reader with no memory for the chunk. Called
 * without f->lock. Returns len or a negative errno. */
static ssize_t direct_read(struct fetch *f, const struct fetch_request *r,
			   uint64_t off, size_t len, void *dst,
			   uint64_t deadline_ns)
{
	char kb[LOG_KEY_MAX];
	size_t nread = 0;
	uint64_t wait_ns;
	int rc;

	pthread_mutex_lock(&f->lock);
	wait_ns = f->wait_ns;
	rc = slot_take(f, deadline_ns);
	if (rc == 0)
		f->direct_reads++;
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		return wait_failed(r, "a connection", wait_ns);
	rc = fetch_backend_read(f, r->key, r->key_len, r->etag, r->etag_len,
				r->offset + off, len, dst, &nread, NULL);
	pthread_mutex_lock(&f->lock);
	slot_put(f);
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		return rc;
	if (nread != len) {
		log_msg(LOG_ERR,
			"fetch: %s: the backend returned %zu of %zu bytes "
			"at offset %llu; failing the read",
			log_key(kb, r->key, r->key_len), nread, len,
			(unsigned long long)(r->offset + off));
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
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; i < f->n_workers; i++)
		pthread_join(f->workers[i], NULL);
	/* Only queued prefetches and retained flights can be left: no
	 * reader and no worker. */
	for (b = 0; b < BUCKETS; b++)
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
	for (k = 0; k < POOL_CLASSES; k++)
		while (f->n_pool[k] > 0)
			munmap(f->pool[k][--f->n_pool[k]],
			       (size_t)UINT64_C(1) << (POOL_MIN_SHIFT + k));
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

uint64_t fetch_epoch(struct fetch *f, const uint8_t *hash)
{
	return __atomic_load_n(&f->epochs[bucket_of(hash)], __ATOMIC_ACQUIRE);
}

/* Caller holds f->lock. */
static bool epoch_moved(struct fetch *f, const uint8_t *hash, uint64_t epoch)
{
	return epoch != FETCH_NO_EPOCH && f->epochs[bucket_of(hash)] != epoch;
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

/* fetch_get(), fetch_join() and fetch_peek(); -ENOENT when mode does not
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
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	workers_ensure(f);
	start = now_ns();
	f->active_ns = start;
	wait_ns = f->wait_ns;
	deadline = start + wait_ns;
	direct_at = start + DIRECT_AFTER_NS;
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
			if (fl->queued && fl->prio == PRIO_PREFETCH) {
				queue_unlink(f, fl);
				queue_push(f, fl, PRIO_READER);
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
		need = buf_need(f, r->len);
		if (f->in_use + need <= f->budget ||
		    (!direct_ok && f->chunk_bytes == 0)) {
			handoff = hedge_handoff(f, r->len);
			fl = flight_create(f, r, PRIO_READER,
					   slot_free(f) && !handoff ? 1 : 0);
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
		if (direct_ok && replies_bytes(f) + need > f->budget)
			break;
		if (reclaim_one(f, true))
			continue;
		if (wait_until(&f->memory, &f->lock,
			       direct_ok ? direct_at : deadline) == ETIMEDOUT &&
		    f->in_use + buf_need(f, r->len) > f->budget) {
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
		ret = direct_read(f, r, off, len, dst, deadline);
		if (stalled)
			__atomic_fetch_add(&f->stall_ns, now_ns() - start,
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
		__atomic_fetch_add(&f->stall_ns, now_ns() - start,
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

ssize_t fetch_get(struct fetch *f, const struct fetch_request *r,
		  uint64_t epoch, uint64_t off, size_t len, void *dst)
{
	return get(f, r, epoch, off, len, dst, GET_FETCH, NULL, NULL);
}

ssize_t fetch_join(struct fetch *f, const struct fetch_request *r, uint64_t off,
		   size_t len, void *dst, bool *ready)
{
	return get(f, r, FETCH_NO_EPOCH, off, len, dst, GET_JOIN, ready, NULL);
}

ssize_t fetch_join_pin(struct fetch *f, const struct fetch_request *r,
		       uint64_t off, size_t len, bool *ready,
		       struct fetch_pin *pin)
{
	ssize_t got;

	pin->fl = NULL;
	if (len == 0)
		return -EINVAL;
	got = get(f, r, FETCH_NO_EPOCH, off, len, NULL, GET_JOIN, ready, pin);
	if (got >= 0 && pin->fl == NULL)
		got = -EIO; /* cannot happen: len > 0 pins or fails */
	return got;
}

void fetch_unpin(struct fetch *f, struct fetch_pin *pin)
{
	struct flight *fl = pin->fl;

	if (fl == NULL)
		return;
	pin->fl = NULL;
	pthread_mutex_lock(&f->lock);
	served_unref(f, fl, pin->len);
}

ssize_t fetch_peek(struct fetch *f, const struct fetch_request *r, uint64_t off,
		   size_t len, void *dst)
{
	return get(f, r, FETCH_NO_EPOCH, off, len, dst, GET_DONE, NULL, NULL);
}

int fetch_prefetch(struct fetch *f, const struct fetch_request *r,
		   uint64_t epoch)
{
	struct flight *fl;
	int rc = 0;

	fork_check(f);
	pthread_mutex_lock(&f->lock);
	workers_ensure(f);
	f->active_ns = now_ns();
	for (;;) {
		if (f->n_workers == 0) {
			rc = -ENOBUFS; /* nobody would run it */
		} else if (table_find(f, r) != NULL) {
			rc = 1;
		} else if (epoch_moved(f, r->hash, epoch)) {
			rc = -EAGAIN;
		} else if (f->in_use + buf_need(f, r->len) >
			   f->budget / 4 * 3) {
			if (reclaim_one(f, false))
				continue;
			f->refused++;
			rc = -ENOBUFS;
		} else {
			fl = flight_create(f, r, PRIO_PREFETCH, 0);
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

	fork_check(f);
	pthread_mutex_lock(&f->lock);
	found = table_find(f, r) != NULL;
	pthread_mutex_unlock(&f->lock);
	return found;
}

void fetch_forget(struct fetch *f, const uint8_t *hash, const uint8_t *id,
		  size_t id_len)
{
	struct flight *fl;

	fork_check(f);
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

int fetch_slot_acquire(struct fetch *f)
{
	int rc;

	fork_check(f);
	pthread_mutex_lock(&f->lock);
	rc = slot_take(f, now_ns() + f->wait_ns);
	pthread_mutex_unlock(&f->lock);
	return rc < 0 ? -EIO : 0;
}

void fetch_slot_release(struct fetch *f)
{
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	slot_put(f);
	pthread_mutex_unlock(&f->lock);
}

void *fetch_buffer_alloc(struct fetch *f, size_t len)
{
	void *p;

	fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->active_ns = now_ns();
	p = buf_take(f, len ? len : 1);
	pthread_mutex_unlock(&f->lock);
	return p;
}

void fetch_buffer_free(struct fetch *f, void *p, size_t len)
{
	void *unmap;

	if (p == NULL)
		return;
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	unmap = buf_give(f, p, len ? len : 1);
	pthread_mutex_unlock(&f->lock);
	if (unmap != NULL)
		munmap(unmap, (size_t)buf_size(len ? len : 1));
}

void fetch_stats_get(struct fetch *f, struct fetch_stats *out)
{
	fork_check(f);
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
	pace_compute(f, &out->pace);
	pthread_mutex_unlock(&f->lock);
	out->backend_reads =
		__atomic_load_n(&f->backend_reads, __ATOMIC_RELAXED);
	out->backend_bytes =
		__atomic_load_n(&f->backend_bytes, __ATOMIC_RELAXED);
	out->backend_errors =
		__atomic_load_n(&f->backend_errors, __ATOMIC_RELAXED);
}

void fetch_pace_get(struct fetch *f, struct fetch_pace *out, uint64_t *stalls)
{
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	pace_compute(f, out);
	if (stalls != NULL)
		*stalls = f->stalls;
	pthread_mutex_unlock(&f->lock);
}
