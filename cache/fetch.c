/*
 * fetch: see fetch.h for the contract.
 *
 * A chunk being fetched is a flight: its buffer (mapped, accounted in the
 * budget), its parts (ranged reads of at most FETCH_PARTS_MAX pieces) and
 * a reference count: one for the single-flight table while it is there,
 * one per reader waiting for it. A flight with parts not yet started sits
 * in one of two queues, readers' first; a worker takes one part at a time
 * from the head, so a reader's chunk overtakes every queued prefetch and
 * its parts are fetched in parallel as connections free up.
 *
 * When the last part finishes, the flight is handed to done_fn (the cache
 * stores it), then marked done (waiting readers copy their bytes) and
 * leaves the table: a reader that comes meanwhile joins it instead of
 * missing both the table and the store.
 *
 * Lock: one mutex, f->lock, protects every field below marked so, the
 * queues, the table and every flight's state. It is never held across a
 * backend read, done_fn, a copy out of a flight or munmap; it is the
 * innermost lock of the cache (taken with no other cache lock held, and
 * no other lock is taken under it).
 *
 * Memory: chunk buffers are mmap()ed and munmap()ed, so what the budget
 * counts is what the process holds, without the allocator's caching.
 */
#include "cache/fetch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/log.h"

#define BUCKETS 256
#define PAGE 4096u
#define POOL_BUF (UINT64_C(1) << 20) /* reply buffers of the read path */
#define POOL_MAX 16
#define CONNECTIONS_DEFAULT 64
#define MEMORY_DEFAULT (UINT64_C(512) << 20)

enum { PRIO_READER = 0, PRIO_PREFETCH = 1, NPRIO };

struct flight {
	struct flight *tnext;	      /* table bucket chain */
	struct flight *qprev, *qnext; /* queue links while queued */
	bool queued, in_table, done;
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
	int rc;		/* first error of a part */
	uint64_t valid; /* bytes fetched, from the start, once done */
	unsigned refs;
};

struct queue {
	struct flight *head, *tail;
};

struct fetch {
	fetch_read_fn read_fn;
	fetch_done_fn done_fn;
	void *ctx;

	pthread_mutex_t lock;  /* see the file comment */
	pthread_cond_t work;   /* a part was queued, a slot freed, or stop */
	pthread_cond_t done;   /* some flight finished */
	pthread_cond_t slot;   /* a slot freed, for slot waiters */
	pthread_cond_t memory; /* memory was released */
	unsigned connections;  /* protected by lock */
	uint64_t budget;       /* protected by lock */
	unsigned inflight;     /* protected by lock: requests running */
	unsigned slot_waiters; /* protected by lock */
	struct queue q[NPRIO]; /* protected by lock */
	struct flight *table[BUCKETS];		  /* protected by lock */
	uint64_t in_use, chunk_bytes, high_water; /* protected by lock */
	void *pool[POOL_MAX];			  /* protected by lock */
	unsigned n_pool;			  /* protected by lock */
	/* The process whose engine this is (see fork_check()), and its
	 * workers; protected by lock. */
	pid_t owner_pid;
	bool workers_started;
	pthread_t *workers;
	unsigned n_workers, n_started;
	bool stop;
	/* Protected by lock: statistics. */
	uint64_t waits, queued, queued_bytes, promoted, refused;
	uint64_t epochs[BUCKETS]; /* written under lock, read atomically */
};

static void fork_check(struct fetch *f);

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

int fetch_new(unsigned connections, uint64_t memory, fetch_read_fn read_fn,
	      fetch_done_fn done_fn, void *ctx, struct fetch **out)
{
	struct fetch *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -ENOMEM;
	f->read_fn = read_fn;
	f->done_fn = done_fn;
	f->ctx = ctx;
	f->connections = connections ? connections : CONNECTIONS_DEFAULT;
	f->budget = memory ? memory : MEMORY_DEFAULT;
	f->owner_pid = getpid();
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->work, NULL);
	pthread_cond_init(&f->done, NULL);
	pthread_cond_init(&f->slot, NULL);
	pthread_cond_init(&f->memory, NULL);
	*out = f;
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

/* Frees a flight no longer referenced; called without f->lock (its
 * buffer was unaccounted under the lock). */
static void flight_free(struct flight *fl)
{
	if (fl == NULL)
		return;
	if (fl->buf != NULL)
		munmap(fl->buf, (size_t)fl->buf_bytes);
	free(fl->id);
	free(fl->key);
	free(fl->etag);
	free(fl);
}

/* Drops a reference; caller holds f->lock. Returns the flight if the
 * caller must free it (after unlocking), else NULL. */
static struct flight *flight_unref(struct fetch *f, struct flight *fl)
{
	if (--fl->refs > 0)
		return NULL;
	f->chunk_bytes -= fl->buf_bytes;
	unaccount(f, fl->buf_bytes);
	return fl;
}

/* Makes a flight for r with its buffer (already reserved: bytes), queued
 * at prio, in the table. Caller holds f->lock. */
static struct flight *flight_create(struct fetch *f,
				    const struct fetch_request *r, int prio,
				    uint64_t bytes)
{
	struct flight *fl = calloc(1, sizeof(*fl));
	unsigned n, free_slots;

	if (fl == NULL)
		return NULL;
	fl->id = malloc(r->id_len ? r->id_len : 1);
	fl->key = malloc(r->key_len + 1);
	fl->etag = malloc(r->etag_len + 1);
	fl->buf = bytes ? map(bytes) : NULL;
	if (fl->id == NULL || fl->key == NULL || fl->etag == NULL ||
	    (bytes && fl->buf == NULL)) {
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
	fl->len = r->len;
	fl->buf_bytes = bytes;
	f->chunk_bytes += bytes;
	account(f, bytes);
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
	pthread_cond_broadcast(&f->work);
	return fl;
}

/* ---- workers -------------------------------------------------------------- */

/* Caller holds f->lock. */
static bool runnable(const struct fetch *f)
{
	return (f->q[PRIO_READER].head != NULL ||
		f->q[PRIO_PREFETCH].head != NULL) &&
	       f->inflight < f->connections && f->slot_waiters == 0;
}

/* Runs one queued part. Caller holds f->lock and has checked runnable();
 * the lock is dropped around the read and done_fn. */
static void run_part(struct fetch *f)
{
	struct flight *fl = f->q[PRIO_READER].head, *dead = NULL;
	uint64_t start, plen;
	size_t nread = 0;
	unsigned part, i;
	int rc;

	if (fl == NULL)
		fl = f->q[PRIO_PREFETCH].head;
	part = fl->next_part++;
	if (fl->next_part == fl->n_parts)
		queue_unlink(f, fl);
	f->inflight++;
	start = (uint64_t)part * fl->part_size;
	plen = fl->len - start < fl->part_size ? fl->len - start
					       : fl->part_size;
	pthread_mutex_unlock(&f->lock);

	rc = f->read_fn(f->ctx, fl->key, fl->key_len,
			fl->has_etag ? fl->etag : NULL, fl->etag_len,
			fl->offset + start, (size_t)plen, fl->buf + start,
			&nread);

	pthread_mutex_lock(&f->lock);
	f->inflight--;
	if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot);
	else
		pthread_cond_signal(&f->work);
	fl->nread[part] = rc < 0 ? 0 : nread;
	if (rc < 0 && fl->rc == 0)
		fl->rc = rc;
	if (++fl->parts_done < fl->n_parts)
		return;
	for (i = 0; i < fl->n_parts; i++) {
		uint64_t want = fl->len - (uint64_t)i * fl->part_size;

		if (want > fl->part_size)
			want = fl->part_size;
		fl->valid += fl->nread[i];
		if (fl->nread[i] < want)
			break;
	}
	if (fl->rc == 0 && fl->valid == fl->len && f->done_fn != NULL) {
		/* Every part finished, so nothing writes the buffer any
		 * more; the table's reference keeps it alive. Readers wake
		 * only after the store, so what a read returned is in the
		 * cache (as when each reader fetched for itself). */
		pthread_mutex_unlock(&f->lock);
		f->done_fn(f->ctx, fl->hash, fl->id, fl->id_len, fl->buf,
			   fl->len);
		pthread_mutex_lock(&f->lock);
	}
	fl->done = true;
	pthread_cond_broadcast(&f->done);
	table_remove(f, fl);
	__atomic_add_fetch(&f->epochs[bucket_of(fl->hash)], 1,
			   __ATOMIC_RELEASE);
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
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_mutex_lock(&f->lock);
	f->n_started++;
	pthread_cond_broadcast(&f->done);
	for (;;) {
		while (!f->stop && !runnable(f))
			pthread_cond_wait(&f->work, &f->lock);
		if (f->stop)
			break;
		run_part(f);
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
	pid_t pid = getpid();

	if (__atomic_load_n(&f->owner_pid, __ATOMIC_ACQUIRE) == pid)
		return;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->work, NULL);
	pthread_cond_init(&f->done, NULL);
	pthread_cond_init(&f->slot, NULL);
	pthread_cond_init(&f->memory, NULL);
	memset(f->q, 0, sizeof(f->q));
	memset(f->table, 0, sizeof(f->table)); /* the parent's flights */
	f->inflight = f->slot_waiters = 0;
	f->chunk_bytes = 0;
	f->in_use = f->high_water = (uint64_t)f->n_pool * POOL_BUF;
	free(f->workers);
	f->workers = NULL;
	f->n_workers = f->n_started = 0;
	f->workers_started = false;
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
		if (pthread_create(&f->workers[f->n_workers], NULL, worker_main,
				   f) != 0)
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
		pthread_cond_wait(&f->done, &f->lock);
}

/* Caller holds f->lock: waits until fl is done, running queued parts in
 * this thread when no worker could be started. */
static void wait_done(struct fetch *f, struct flight *fl)
{
	while (!fl->done) {
		if (f->n_workers == 0 && runnable(f))
			run_part(f);
		else
			pthread_cond_wait(&f->done, &f->lock);
	}
}

void fetch_free(struct fetch *f)
{
	struct flight *dead = NULL;
	unsigned b;

	if (f == NULL)
		return;
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; i < f->n_workers; i++)
		pthread_join(f->workers[i], NULL);
	/* Only queued prefetches can be left: no reader and no worker. */
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
	while (f->n_pool > 0)
		munmap(f->pool[--f->n_pool], (size_t)POOL_BUF);
	free(f->workers);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->work);
	pthread_cond_destroy(&f->done);
	pthread_cond_destroy(&f->slot);
	pthread_cond_destroy(&f->memory);
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

ssize_t fetch_get(struct fetch *f, const struct fetch_request *r,
		  uint64_t epoch, uint64_t off, size_t len, void *dst)
{
	uint64_t bytes = round_page(r->len);
	struct flight *fl, *dead;
	ssize_t ret;

	fork_check(f);
	pthread_mutex_lock(&f->lock);
	workers_ensure(f);
	for (;;) {
		fl = table_find(f, r);
		if (fl != NULL) {
			fl->refs++;
			f->waits++;
			if (fl->queued && fl->prio == PRIO_PREFETCH) {
				queue_unlink(f, fl);
				queue_push(f, fl, PRIO_READER);
				f->promoted++;
				pthread_cond_broadcast(&f->work);
			}
			break;
		}
		if (epoch_moved(f, r->hash, epoch)) {
			pthread_mutex_unlock(&f->lock);
			return -EAGAIN;
		}
		/* Wait only for memory other chunks hold: they are
		 * released in bounded time, whatever this thread holds. */
		if (f->in_use + bytes <= f->budget || f->chunk_bytes == 0) {
			fl = flight_create(f, r, PRIO_READER, bytes);
			if (fl == NULL) {
				pthread_mutex_unlock(&f->lock);
				return -ENOMEM;
			}
			fl->refs = 2; /* the table's and ours */
			break;
		}
		pthread_cond_wait(&f->memory, &f->lock);
	}
	wait_done(f, fl);
	pthread_mutex_unlock(&f->lock);

	if (fl->rc < 0) {
		ret = fl->rc;
	} else {
		ret = 0;
		if (off < fl->valid && len > 0) {
			ret = (ssize_t)(fl->valid - off < len ? fl->valid - off
							      : len);
			memcpy(dst, fl->buf + off, (size_t)ret);
		}
	}
	pthread_mutex_lock(&f->lock);
	dead = flight_unref(f, fl);
	pthread_mutex_unlock(&f->lock);
	flight_free(dead);
	return ret;
}

int fetch_prefetch(struct fetch *f, const struct fetch_request *r,
		   uint64_t epoch)
{
	uint64_t bytes = round_page(r->len);
	struct flight *fl;
	int rc = 0;

	fork_check(f);
	pthread_mutex_lock(&f->lock);
	workers_ensure(f);
	if (f->n_workers == 0) {
		rc = -ENOBUFS; /* nobody would run it */
	} else if (table_find(f, r) != NULL) {
		rc = 1;
	} else if (epoch_moved(f, r->hash, epoch)) {
		rc = -EAGAIN;
	} else if (f->in_use + bytes > f->budget / 4 * 3) {
		f->refused++;
		rc = -ENOBUFS;
	} else {
		fl = flight_create(f, r, PRIO_PREFETCH, bytes);
		if (fl == NULL) {
			rc = -ENOMEM;
		} else {
			fl->refs = 1; /* the table's */
			f->queued++;
			f->queued_bytes += r->len;
		}
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

void fetch_slot_acquire(struct fetch *f)
{
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->slot_waiters++;
	while (f->inflight >= f->connections)
		pthread_cond_wait(&f->slot, &f->lock);
	f->slot_waiters--;
	f->inflight++;
	pthread_mutex_unlock(&f->lock);
}

void fetch_slot_release(struct fetch *f)
{
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->inflight--;
	if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot);
	else
		pthread_cond_signal(&f->work);
	pthread_mutex_unlock(&f->lock);
}

void *fetch_buffer_alloc(struct fetch *f, size_t len)
{
	uint64_t bytes = len <= POOL_BUF ? POOL_BUF : round_page(len);
	void *p = NULL;

	fork_check(f);
	pthread_mutex_lock(&f->lock);
	if (bytes == POOL_BUF && f->n_pool > 0) {
		p = f->pool[--f->n_pool];
		pthread_mutex_unlock(&f->lock);
		return p;
	}
	account(f, bytes);
	pthread_mutex_unlock(&f->lock);
	p = map(bytes);
	if (p == NULL) {
		pthread_mutex_lock(&f->lock);
		unaccount(f, bytes);
		pthread_mutex_unlock(&f->lock);
	}
	return p;
}

void fetch_buffer_free(struct fetch *f, void *p, size_t len)
{
	uint64_t bytes = len <= POOL_BUF ? POOL_BUF : round_page(len);

	if (p == NULL)
		return;
	fork_check(f);
	pthread_mutex_lock(&f->lock);
	/* Pooled buffers stay accounted: they stay resident. */
	if (bytes == POOL_BUF && f->n_pool < POOL_MAX) {
		f->pool[f->n_pool++] = p;
		pthread_mutex_unlock(&f->lock);
		return;
	}
	unaccount(f, bytes);
	pthread_mutex_unlock(&f->lock);
	munmap(p, (size_t)bytes);
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
	pthread_mutex_unlock(&f->lock);
}
