/*
 * whole: the whole-object check (docs/DESIGN.md §8, "What the store
 * vouches for"; docs/RELIABILITY.md, "Whole-object checks").
 *
 * A reply that holds a whole object is checked by the backend against the
 * checksum the store gives for it. A large object arrives in ranged
 * replies, none of which the store's checksum can check on its own, so a
 * bit flipped inside one would be cached with a valid CRC and served on
 * every read after. Here the cache checks such an object once it holds
 * all of its chunks: the backend reports with each reply what the store
 * vouches for about the whole object (backend.h, read_claim()), every
 * chunk stored with such a claim is noted (whole_note(), on the storing
 * thread: a CRC-32C of the chunk when the claim is one, nothing heavier),
 * and a checker thread of the process, at low CPU and I/O priority,
 * follows each such object and, once every chunk of it is stored, compares
 * the object with the claim:
 *   - CRC-32C (GCS): combined from the chunks' CRCs (crc32c_combine()),
 *     reading back only chunks this process did not note (stored before,
 *     or by another process);
 *   - MD5 (S3's single-part ETag): the chunks read back from the cache in
 *     order, 1 MiB at a time.
 * On a mismatch (or when two replies claimed different checksums) every
 * chunk of the object is dropped, at every chunk size it is cached at,
 * from the index, the committer's queue and the engine's memory; the
 * mismatch is logged once with the key and both checksums and counted
 * (cache_stats.whole_mismatches). A match is counted too (whole_checked).
 *
 * Which chunks are stored: per object a cursor moves over its chunks in
 * order, past chunks noted here and chunks found stored (one index lookup
 * each), and stops at the first missing one; each note moves it again.
 * So each chunk is looked up about once, and an object completed by this
 * process is checked even if another process or an earlier mount stored
 * some of its chunks. A chunk found missing when read back (evicted
 * meanwhile) sends the cursor back to it.
 *
 * Bounds: WHOLE_NOTES_MAX notes queued (more are dropped: their chunks
 * are then found by the cursor and read back), WHOLE_OBJS_MAX
 * objects followed and WHOLE_BYTES_MAX bytes of per-chunk records (the
 * least recently noted object is forgotten first: it is checked later
 * only if a chunk of it is stored again), objects of up to
 * WHOLE_CHUNKS_MAX chunks. The checker's read-back buffer (WHOLE_PIECE)
 * is its own, outside the engine's budget. At cache_free() the checker
 * goes on for at most WHOLE_CLOSE_MS with what is queued, then stops.
 *
 * What is not checked (the window, docs/RELIABILITY.md): bytes served
 * before the last chunk is stored and the check has ended; an object
 * never held whole; one forgotten as above or whose check the close cut
 * short.
 *
 * This file: the notes, the objects followed and their cursors, and the
 * checker thread; whole_check.c: the check itself and the drop.
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/crc32c.h"
#include "util/fnv.h"
#include "util/le.h"
#include "util/thread.h"

#define WHOLE_NOTES_MAX 16384u /* each a few hundred bytes */
#define WHOLE_OBJS_MAX 4096u
#define WHOLE_BYTES_MAX (UINT64_C(16) << 20)
#define WHOLE_CHUNKS_MAX (UINT64_C(1) << 20)
#define WHOLE_CLOSE_MS 5000
#define WHOLE_BUCKETS 1024u
#define WHOLE_IDLE_NS (UINT64_C(1000000000))

/* A chunk stored with a claim (whole_note()), for the checker. */
struct whole_note {
	struct whole_note *next;
	uint64_t seq; /* whole_state.seq when it was queued */
	uint64_t n, len, object_size;
	struct backend_claim claim;
	bool conflict, has_crc;
	uint32_t crc; /* CRC-32C of the chunk, with a CRC-32C claim */
	size_t prefix_len;
	uint8_t prefix[]; /* the chunk's identity without its number */
};

static void bit_set(uint8_t *b, uint64_t n, bool on)
{
	if (on)
		b[n / 8] |= (uint8_t)(1u << (n % 8));
	else
		b[n / 8] &= (uint8_t) ~(1u << (n % 8));
}

static void cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &attr);
	pthread_condattr_destroy(&attr);
}

void whole_init(struct cache *c)
{
	struct whole_state *w = &c->whole;

	pthread_mutex_init(&w->lock, NULL);
	cond_init_mono(&w->work);
	w->tail = &w->head;
}

/* ---- the objects the checker follows (its thread only) ---------------- */

static void obj_free(struct whole_obj *o)
{
	if (o == NULL)
		return;
	free(o->prefix);
	free(o->noted);
	free(o->seen);
	free(o->crc);
	free(o);
}

/* Unlinks o from its bucket, the LRU list and the batch's list, and
 * frees it. */
static void obj_drop(struct whole_state *w, struct whole_obj *o)
{
	struct whole_obj **pp = &w->buckets[o->hash % WHOLE_BUCKETS];

	while (*pp != o)
		pp = &(*pp)->bnext;
	*pp = o->bnext;
	for (pp = &w->dirty; o->dirty && *pp != NULL; pp = &(*pp)->dnext)
		if (*pp == o) {
			*pp = o->dnext;
			break;
		}
	if (o->prev != NULL)
		o->prev->next = o->next;
	else
		w->lru_head = o->next;
	if (o->next != NULL)
		o->next->prev = o->prev;
	else
		w->lru_tail = o->prev;
	w->n_objs--;
	w->obj_bytes -= o->bytes;
	obj_free(o);
}

static void obj_touch(struct whole_state *w, struct whole_obj *o)
{
	if (w->lru_head == o)
		return;
	o->prev->next = o->next; /* not the head: has a prev */
	if (o->next != NULL)
		o->next->prev = o->prev;
	else
		w->lru_tail = o->prev;
	o->prev = NULL;
	o->next = w->lru_head;
	w->lru_head->prev = o;
	w->lru_head = o;
}

static void objs_free(struct whole_state *w)
{
	while (w->lru_head != NULL)
		obj_drop(w, w->lru_head);
	free(w->buckets);
	w->buckets = NULL;
	w->dirty = NULL;
	memset(w->recent, 0, sizeof(w->recent));
}

/* The object nt is a chunk of, followed from now on if it is not yet (the
 * least recently noted ones forgotten to make room); NULL if it cannot be
 * (too many chunks, no memory). */
static struct whole_obj *obj_for(struct whole_state *w,
				 const struct whole_note *nt)
{
	uint64_t h = fnv_hash(nt->prefix, nt->prefix_len), n_chunks, chunk;
	struct whole_obj *o;
	size_t bits;

	if (w->buckets == NULL) {
		w->buckets = calloc(WHOLE_BUCKETS, sizeof(*w->buckets));
		if (w->buckets == NULL)
			return NULL;
	}
	for (o = w->buckets[h % WHOLE_BUCKETS]; o != NULL; o = o->bnext)
		if (o->hash == h && o->prefix_len == nt->prefix_len &&
		    memcmp(o->prefix, nt->prefix, nt->prefix_len) == 0)
			return o;
	/* The identity ends in the chunk size (then the number, cut off). */
	chunk = le_get64(nt->prefix + nt->prefix_len - 8);
	if (chunk == 0 || nt->object_size == 0)
		return NULL;
	n_chunks = (nt->object_size + chunk - 1) / chunk;
	if (n_chunks > WHOLE_CHUNKS_MAX || nt->n >= n_chunks)
		return NULL;
	o = calloc(1, sizeof(*o));
	if (o == NULL)
		return NULL;
	bits = (size_t)((n_chunks + 7) / 8);
	o->hash = h;
	o->prefix = malloc(nt->prefix_len);
	o->prefix_len = nt->prefix_len;
	o->noted = calloc(1, bits);
	o->seen = calloc(1, bits);
	if (nt->claim.kind == BACKEND_CLAIM_CRC32C)
		o->crc = calloc((size_t)n_chunks, sizeof(*o->crc));
	if (o->prefix == NULL || o->noted == NULL || o->seen == NULL ||
	    (nt->claim.kind == BACKEND_CLAIM_CRC32C && o->crc == NULL)) {
		obj_free(o);
		return NULL;
	}
	memcpy(o->prefix, nt->prefix, nt->prefix_len);
	o->object_size = nt->object_size;
	o->chunk_size = chunk;
	o->n_chunks = n_chunks;
	o->claim = nt->claim;
	o->conflict = nt->conflict;
	o->bytes = sizeof(*o) + o->prefix_len + 2 * bits +
		   (o->crc != NULL ? n_chunks * sizeof(*o->crc) : 0);
	while (w->lru_tail != NULL &&
	       (w->n_objs >= WHOLE_OBJS_MAX ||
		w->obj_bytes + o->bytes > WHOLE_BYTES_MAX))
		obj_drop(w, w->lru_tail);
	o->bnext = w->buckets[h % WHOLE_BUCKETS];
	w->buckets[h % WHOLE_BUCKETS] = o;
	o->next = w->lru_head;
	if (w->lru_head != NULL)
		w->lru_head->prev = o;
	else
		w->lru_tail = o;
	w->lru_head = o;
	w->n_objs++;
	w->obj_bytes += o->bytes;
	return o;
}

/* Moves o's cursor past the chunks noted or stored. Returns true when
 * every chunk is. */
static bool obj_advance(struct cache *c, struct whole_obj *o)
{
	while (o->cursor < o->n_chunks) {
		uint64_t n = o->cursor;

		if (!whole_bit(o->noted, n) && !whole_bit(o->seen, n)) {
			struct read_chunk ch;
			bool there;

			if (whole_obj_chunk(o, n, &ch) < 0)
				return false;
			there = read_chunk_present(c, &ch);
			read_chunk_release(&ch);
			if (!there)
				return false;
			bit_set(o->seen, n, true);
		}
		o->cursor++;
	}
	return true;
}

/* Whether a note is older than the last check of its object: its chunk
 * was stored before that check read the object (found by its cursor), so
 * the note adds nothing (and would start the object over). */
static bool note_stale(const struct whole_state *w, const struct whole_note *nt,
		       uint64_t hash)
{
	unsigned i;

	for (i = 0; i < WHOLE_RECENT; i++)
		if (w->recent[i].hash == hash && nt->seq <= w->recent[i].seq)
			return true;
	return false;
}

/* Takes one note: records its chunk, and puts its object on the batch's
 * list to be looked at (whole_batch()). */
static void whole_apply(struct cache *c, struct whole_note *nt)
{
	struct whole_state *w = &c->whole;
	struct whole_obj *o;

	if (note_stale(w, nt, fnv_hash(nt->prefix, nt->prefix_len)))
		return;
	o = obj_for(w, nt);
	/* Another size, or a chunk of another length: not this object. */
	if (o == NULL || o->object_size != nt->object_size ||
	    nt->len != (nt->n < o->n_chunks - 1
				? o->chunk_size
				: o->object_size - nt->n * o->chunk_size))
		return;
	obj_touch(w, o);
	if (nt->conflict || !backend_claim_same(&o->claim, &nt->claim))
		o->conflict = true;
	bit_set(o->noted, nt->n, true);
	if (o->crc != NULL)
		o->crc[nt->n] =
			nt->crc; /* (a note of another kind: conflict) */
	if (!o->dirty) {
		o->dirty = true;
		o->dnext = w->dirty;
		w->dirty = o;
	}
}

/* Takes a batch of notes (freeing them), then checks every object they
 * made whole: notes first, so that the notes of an object's last chunks
 * do not each start a check of their own. */
static void whole_batch(struct cache *c, struct whole_note *batch, uint8_t *buf)
{
	struct whole_state *w = &c->whole;
	struct whole_obj *o;

	while (batch != NULL) {
		struct whole_note *nt = batch;

		batch = nt->next;
		if (buf != NULL && !whole_closing_late(c))
			whole_apply(c, nt);
		free(nt);
	}
	while ((o = w->dirty) != NULL) {
		uint64_t seq, missing = 0;
		int rc;

		w->dirty = o->dnext;
		o->dirty = false;
		if (whole_closing_late(c) || !obj_advance(c, o))
			continue;
		/* Notes queued from here on may be of chunks stored after
		 * this check read the object: they count. */
		pthread_mutex_lock(&w->lock);
		seq = w->seq;
		pthread_mutex_unlock(&w->lock);
		rc = whole_check(c, o, buf, &missing);
		if (rc == WHOLE_MISSING) {
			/* Evicted meanwhile: wait for it again. */
			bit_set(o->noted, missing, false);
			bit_set(o->seen, missing, false);
			if (o->cursor > missing)
				o->cursor = missing;
			continue;
		}
		w->recent[w->recent_next].hash = o->hash;
		w->recent[w->recent_next].seq = seq;
		w->recent_next = (w->recent_next + 1) % WHOLE_RECENT;
		obj_drop(w, o);
	}
}

/* ---- the checker thread ------------------------------------------------ */

/* Low CPU and I/O priority for this thread: a check is never what a
 * reader waits for. Best effort. */
static void whole_lower_priority(void)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);

	(void)setpriority(PRIO_PROCESS, (id_t)tid, 19);
#ifdef SYS_ioprio_set
	/* IOPRIO_WHO_PROCESS (1) of this thread: best effort (2), lowest
	 * level (7). */
	(void)syscall(SYS_ioprio_set, 1, (int)tid, 2 << 13 | 7);
#endif
}

static void notes_free(struct whole_note *nt)
{
	while (nt != NULL) {
		struct whole_note *next = nt->next;

		free(nt);
		nt = next;
	}
}

static void *whole_main(void *arg)
{
	struct cache *c = arg;
	struct whole_state *w = &c->whole;
	uint8_t *buf = NULL;
	struct whole_note *batch = NULL;

	pthread_setname_np(pthread_self(), "shardfs-check");
	whole_lower_priority();
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (w->head == NULL && !w->stop) {
			struct timespec ts;
			uint64_t until = clock_now_ns() + WHOLE_IDLE_NS;

			ts.tv_sec = (time_t)(until / 1000000000u);
			ts.tv_nsec = (long)(until % 1000000000u);
			pthread_cond_timedwait(&w->work, &w->lock, &ts);
		}
		if (w->head == NULL || whole_closing_late(c))
			break;
		batch = w->head;
		w->head = NULL;
		w->tail = &w->head;
		w->n_notes = 0;
		pthread_mutex_unlock(&w->lock);
		if (buf == NULL)
			buf = malloc(WHOLE_PIECE);
		whole_batch(c, batch, buf);
		pthread_mutex_lock(&w->lock);
	}
	batch = w->head;
	w->head = NULL;
	w->tail = &w->head;
	w->n_notes = 0;
	pthread_mutex_unlock(&w->lock);
	notes_free(batch);
	free(buf);
	return NULL;
}

void whole_note(struct cache *c, const uint8_t *id, size_t id_len,
		const uint8_t *data, uint64_t len, const struct fetch_vouch *v)
{
	struct whole_state *w = &c->whole;
	pid_t pid = __atomic_load_n(&w->pid, __ATOMIC_ACQUIRE);
	struct whole_note *nt;
	uint64_t n;

	if (pid != 0 && pid != thread_pid())
		whole_forked(c); /* see fetch_fork_check() */
	if (v == NULL ||
	    (v->claim.kind == BACKEND_CLAIM_NONE && !v->conflict) ||
	    v->object_size == 0 || id_len < 24 || c->readonly)
		return;
	n = le_get64(id + id_len - 8);
	/* A reply of the whole object the backend checked: nothing to add. */
	if (n == 0 && len == v->object_size && v->claim.checked && !v->conflict)
		return;
	nt = malloc(sizeof(*nt) + id_len - 8);
	if (nt == NULL)
		return;
	nt->next = NULL;
	nt->n = n;
	nt->len = len;
	nt->object_size = v->object_size;
	nt->claim = v->claim;
	nt->conflict = v->conflict;
	nt->has_crc = v->claim.kind == BACKEND_CLAIM_CRC32C;
	/* The one cost on the storing thread: a CRC-32C of the chunk (SSE4.2,
	 * about 4 GB/s), for a CRC-32C claim only. */
	nt->crc = nt->has_crc ? crc32c_update(0, data, (size_t)len) : 0;
	nt->prefix_len = id_len - 8;
	memcpy(nt->prefix, id, id_len - 8);
	pthread_mutex_lock(&w->lock);
	if (w->stop || w->n_notes >= WHOLE_NOTES_MAX) {
		pthread_mutex_unlock(&w->lock);
		free(nt);
		return;
	}
	if (!w->running && thread_start(&w->thread, whole_main, c) == 0) {
		w->running = true;
		__atomic_store_n(&w->pid, thread_pid(), __ATOMIC_RELEASE);
	}
	if (!w->running) {
		pthread_mutex_unlock(&w->lock);
		free(nt);
		return;
	}
	nt->seq = ++w->seq;
	*w->tail = nt;
	w->tail = &nt->next;
	w->n_notes++;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->lock);
}

void whole_forked(struct cache *c)
{
	struct whole_state *w = &c->whole;

	/* The parent's lock may have been held at the fork: a new one. */
	pthread_mutex_init(&w->lock, NULL);
	cond_init_mono(&w->work);
	notes_free(w->head);
	w->head = NULL;
	w->tail = &w->head;
	w->n_notes = 0;
	objs_free(w);
	w->n_objs = 0;
	w->obj_bytes = 0;
	w->running = false;
	w->stop = false;
	__atomic_store_n(&w->pid, 0, __ATOMIC_RELEASE);
}

void whole_close(struct cache *c)
{
	struct whole_state *w = &c->whole;
	pid_t pid = __atomic_load_n(&w->pid, __ATOMIC_ACQUIRE);

	if (pid != 0 && pid != thread_pid())
		whole_forked(c); /* not our thread to join */
	pthread_mutex_lock(&w->lock);
	w->stop = true; /* notes from here on are dropped */
	__atomic_store_n(&w->close_ns,
			 clock_now_ns() + UINT64_C(1000000) * WHOLE_CLOSE_MS,
			 __ATOMIC_RELAXED);
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->lock);
	if (w->running)
		pthread_join(w->thread, NULL);
	w->running = false;
	objs_free(w);
}

void whole_destroy(struct cache *c)
{
	struct whole_state *w = &c->whole;

	notes_free(w->head);
	w->head = NULL;
	w->tail = &w->head;
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->work);
}
