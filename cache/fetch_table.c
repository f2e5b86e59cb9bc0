/*
 * fetch_table: the fetch engine's flights and where they are kept
 * (the design is in fetch_impl.h's file comment). A flight is in
 * the single-flight table (a bucket per first byte of its hash) from its
 * creation until it is dropped; while none of its parts has started it is
 * in one of two queues, readers' first; once stored it is retained,
 * oldest first, until read whole or reclaimed. Here: the table, the
 * queues and the retained list, a flight's references and freeing,
 * reclaiming memory (a pooled buffer, a retained flight, a queued
 * prefetch, a run whole), and the epochs that tell a reader its look may
 * have raced a store.
 */
#include "cache/fetch_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Which table bucket (and epoch) a chunk's hash falls in. */
unsigned fetch_bucket_of(const uint8_t *hash)
{
	return hash[0];
}

/* Caller holds f->lock. */
struct flight *fetch_table_find(struct fetch *f, const struct fetch_request *r)
{
	struct flight *fl;

	for (fl = f->table[fetch_bucket_of(r->hash)]; fl != NULL;
	     fl = fl->tnext)
		if (memcmp(fl->hash, r->hash, FETCH_HASH_LEN) == 0 &&
		    fl->id_len == r->id_len &&
		    memcmp(fl->id, r->id, r->id_len) == 0 && fl->len == r->len)
			return fl;
	return NULL;
}

/* Caller holds f->lock. */
static void table_remove(struct fetch *f, struct flight *fl)
{
	struct flight **pp = &f->table[fetch_bucket_of(fl->hash)];

	while (*pp != fl)
		pp = &(*pp)->tnext;
	*pp = fl->tnext;
	fl->in_table = false;
}

/* Caller holds f->lock. */
void fetch_queue_push(struct fetch *f, struct flight *fl, int prio)
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
void fetch_queue_unlink(struct fetch *f, struct flight *fl)
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
void fetch_flight_free(struct flight *fl)
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
struct flight *fetch_flight_unref(struct fetch *f, struct flight *fl)
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
void fetch_flight_retain(struct fetch *f, struct flight *fl)
{
	fl->retained = true;
	fl->done_ns = clock_now_ns();
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
struct flight *fetch_table_drop(struct fetch *f, struct flight *fl)
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
	__atomic_add_fetch(&f->epochs[fetch_bucket_of(fl->hash)], 1,
			   __ATOMIC_RELEASE);
	return fetch_flight_unref(f, fl);
}

/* Frees dead (if not NULL), with f->lock held and dropped while freeing. */
void fetch_flight_free_unlocked(struct fetch *f, struct flight *dead)
{
	if (dead != NULL) {
		pthread_mutex_unlock(&f->lock);
		fetch_flight_free(dead);
		pthread_mutex_lock(&f->lock);
	}
}

/* fetch_table_drop(), then frees the flight if that was its last reference,
 * with f->lock held and dropped while freeing. */
void fetch_table_drop_free(struct fetch *f, struct flight *fl)
{
	fetch_flight_free_unlocked(f, fetch_table_drop(f, fl));
}

/* Drops the oldest retained flight, with f->lock held and dropped while
 * freeing; only a stale one unless any. Returns false if there was none. */
static bool retained_release_one(struct fetch *f, bool any)
{
	struct flight *fl = f->ret_head;

	if (fl == NULL ||
	    (!any && clock_now_ns() - fl->done_ns < FETCH_RETAIN_STALE_NS))
		return false;
	f->reclaimed++;
	fetch_table_drop_free(f, fl);
	return true;
}

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
void fetch_run_drop(struct fetch *f, struct flight *head)
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
			fetch_queue_unlink(f, m);
		d = fetch_table_drop(f, m); /* the table's reference */
		if (d == NULL)
			d = fetch_flight_unref(f, m); /* the run's */
		if (d != NULL) {
			d->tnext = dead; /* out of the table: a free link */
			dead = d;
		}
	}
	pthread_mutex_unlock(&f->lock);
	while (dead != NULL) {
		next = dead->tnext;
		fetch_flight_free(dead);
		dead = next;
	}
	if (unmap != NULL)
		munmap(unmap, (size_t)fetch_buf_size(len));
	pthread_mutex_lock(&f->lock);
}

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
		fetch_run_drop(f, fl->run_head);
		return true;
	}
	fetch_queue_unlink(f, fl);
	fetch_table_drop_free(f, fl);
	return true;
}

/* Frees memory for a caller short of it, with f->lock held: an idle
 * pooled buffer, else the oldest retained flight (for a prefetch only a
 * stale one), else (for a reader) a queued prefetch not started. Drops
 * the lock while unmapping, so the caller looks at everything again.
 * Returns false if there was nothing to free. */
bool fetch_reclaim_one(struct fetch *f, bool reader)
{
	return fetch_pool_release_one(f) || retained_release_one(f, reader) ||
	       (reader && prefetch_cancel_one(f));
}

/* With f->lock held: what an idle engine gives back, so a daemon whose
 * readers stopped does not keep their memory: retained chunks unread for
 * FETCH_RETAIN_STALE_NS and, once nothing was asked for that long, the pooled
 * buffers. */
void fetch_trim_idle(struct fetch *f)
{
	while (retained_release_one(f, false))
		;
	if (clock_now_ns() - f->active_ns >= FETCH_RETAIN_STALE_NS)
		while (f->inflight == 0 && fetch_pool_release_one(f))
			;
}

/* With f->lock held: is there anything for fetch_trim_idle() to give back? */
bool fetch_holds_idle(const struct fetch *f)
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
struct flight *fetch_flight_create(struct fetch *f,
				   const struct fetch_request *r, int prio,
				   unsigned self)
{
	struct flight *fl = calloc(1, sizeof(*fl));
	unsigned n, free_slots, i;

	if (fl == NULL)
		return NULL;
	fetch_cond_init(&fl->cv);
	fl->len = r->len;
	fl->id = malloc(r->id_len ? r->id_len : 1);
	fl->key = malloc(r->key_len + 1);
	fl->etag = malloc(r->etag_len + 1);
	fl->buf = r->len ? fetch_buf_take(f, r->len) : NULL;
	if (fl->id == NULL || fl->key == NULL || fl->etag == NULL ||
	    (r->len && fl->buf == NULL)) {
		fl->buf = fetch_buf_give(f, fl->buf, fl->len);
		fetch_flight_free(fl);
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
	fl->tnext = f->table[fetch_bucket_of(r->hash)];
	f->table[fetch_bucket_of(r->hash)] = fl;
	fetch_queue_push(f, fl, prio);
	for (i = self; i < n; i++)
		pthread_cond_signal(&f->work);
	return fl;
}

uint64_t fetch_epoch_of(struct fetch *f, const uint8_t *hash)
{
	return __atomic_load_n(&f->epochs[fetch_bucket_of(hash)],
			       __ATOMIC_ACQUIRE);
}

/* Caller holds f->lock. */
bool fetch_epoch_moved(struct fetch *f, const uint8_t *hash, uint64_t epoch)
{
	return epoch != FETCH_EPOCH_NONE &&
	       f->epochs[fetch_bucket_of(hash)] != epoch;
}

/* Counts bytes a reader took out of fl, drops fl from the table once all
 * of a retained chunk was read, and drops the reader's reference. Caller
 * holds f->lock; returns with it released. */
void fetch_served_unref(struct fetch *f, struct flight *fl, uint64_t bytes)
{
	struct flight *dead, *dead2 = NULL;

	fl->served += bytes;
	if (fl->retained && fl->served >= fl->len)
		dead2 = fetch_table_drop(f,
					 fl); /* not the last reference: ours */
	dead = fetch_flight_unref(f, fl);
	pthread_mutex_unlock(&f->lock);
	fetch_flight_free(dead2);
	fetch_flight_free(dead);
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
	fetch_served_unref(f, fl, pin->len);
}
