/*
 * file: open files and the prefetch glue. prefetch.h decides what to read
 * ahead (a window within a file, the next files of an order); this file
 * applies it: it queues those chunks with the fetch engine unless they are
 * cached or in flight.
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/dlist.h"

struct cache_file {
	struct cache *c;
	struct cache_object obj; /* borrowed */
	pthread_mutex_t lock;	 /* protects win; taken with no other lock */
	struct prefetch_window win;
	struct cache_file *prev, *next; /* c->files; protected by
					 * c->files_lock */
	uint64_t left; /* atomic: reads done with f, see file_leave() */
	/* Atomic: the order and position it was opened at (set by
	 * cache_order_open(), under c->files_lock; CACHE_NO_ORDER: none). */
	uint64_t order, pos;
	uint64_t spilled; /* protected by lock: bytes of the next file of
			   * the order asked for (file_spill()) */
};

/* A read is done with f (it goes on with copies of f->c and f->obj,
 * whose strings the FUSE request holds): from here RELEASE may free f.
 * The kernel sends RELEASE only after the reads of the file were
 * answered; this release increment, read with acquire by
 * cache_file_close(), makes that order visible to ThreadSanitizer, which
 * cannot see it through /dev/fuse. */
static void file_leave(struct cache_file *f)
{
	__atomic_fetch_add(&f->left, 1, __ATOMIC_RELEASE);
}

void cache_order_forget(struct cache *c, uint64_t mask, uint64_t value)
{
	size_t i = 0;

	pthread_mutex_lock(&c->pf_lock);
	while (i < c->n_orders) {
		if ((c->orders[i].order & mask) == value)
			c->orders[i] = c->orders[--c->n_orders];
		else
			i++;
	}
	pthread_mutex_unlock(&c->pf_lock);
}

void cache_set_order(struct cache *c, cache_order_fn fn, void *ctx)
{
	pthread_mutex_lock(&c->pf_lock);
	c->order_fn = fn;
	c->order_ctx = ctx;
	c->n_orders = 0;
	pthread_mutex_unlock(&c->pf_lock);
}

/* Queues chunk n of obj ahead of readers unless it is cached or in
 * flight. Returns 0 (queued or nothing to do) or -ENOBUFS (no memory for
 * prefetching now: stop). */
static int file_prefetch_chunk(struct cache *c, const struct cache_object *obj,
			       uint64_t n)
{
	struct read_chunk ch;
	uint64_t epoch;
	int rc, tries;

	/* A derived object is produced whole by a reader, never ahead, and
	 * a bad chunk size is the reader's error to report. */
	if (obj->transform != NULL || !cache_obj_chunk_ok(c, obj))
		return 0;
	if (read_chunk_name(c, obj, n, &ch) < 0)
		return -ENOBUFS;
	for (tries = 0;; tries++) {
		/* See fetch_epoch(); after a few rounds, without it. */
		epoch = tries < 3 ? fetch_epoch(c->fetch, ch.hash)
				  : FETCH_NO_EPOCH;
		rc = 1;
		if (fetch_in_flight(c->fetch, &ch.r) ||
		    (c->disk && read_chunk_present(c, &ch)))
			break;
		rc = fetch_prefetch(c->fetch, &ch.r, epoch);
		if (rc != -EAGAIN)
			break;
	}
	read_chunk_release(&ch);
	if (rc == 0) {
		stat_add(&c->pf_issued, 1);
		stat_add(&c->pf_bytes, ch.len);
	}
	return rc == -ENOBUFS || rc == -ENOMEM ? -ENOBUFS : 0;
}

int cache_prefetch_range(struct cache *c, const struct cache_object *obj,
			 uint64_t offset, uint64_t len)
{
	uint64_t unit = cache_obj_chunk(c, obj), n, end;

	if (!c->disk || len == 0 || offset >= obj->size || unit == 0)
		return 0;
	end = obj->size - offset < len ? obj->size : offset + len;
	for (n = offset / unit; n * unit < end; n++)
		if (file_prefetch_chunk(c, obj, n) < 0)
			return -ENOBUFS;
	return 0;
}

/* The longest gap between opens that counts toward a reader's pace: a
 * pause (an epoch's end, a checkpoint) is not the reader's pace. */
#define GAP_MAX_NS (UINT64_C(1000000000))

static uint64_t order_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Measures the reader of slot at an open now (pf_lock held) and returns
 * the working depth for it (prefetch_depth()). */
static unsigned order_pace(struct cache *c, struct order_slot *slot,
			   const struct fetch_pace *fp, uint64_t stalls,
			   uint64_t now)
{
	struct prefetch_pace p = { 0 };
	uint64_t gap;

	if (slot->last_ns != 0) {
		gap = now - slot->last_ns;
		if (gap > GAP_MAX_NS)
			gap = GAP_MAX_NS;
		/* An average over about 8 opens: one slow file (a large
		 * one, a page the trainer logs) is not a change of pace. */
		slot->gap_ns =
			slot->gap_ns ? (slot->gap_ns * 7 + gap) / 8 : gap;
		p.starved = stalls != slot->stalls;
	}
	slot->last_ns = now;
	slot->stalls = stalls;
	__atomic_store_n(&c->pf_gap_ns, slot->gap_ns, __ATOMIC_RELAXED);
	p.latency_ns = fp->latency_min_ns;
	p.latency_slow_ns = fp->latency_p90_ns;
	p.gap_ns = slot->gap_ns;
	p.depth = slot->st.depth;
	p.file_bytes = slot->file_bytes;
	p.memory = __atomic_load_n(&c->pf_memory, __ATOMIC_RELAXED);
	p.connections = __atomic_load_n(&c->pf_conns, __ATOMIC_RELAXED);
	p.cap = __atomic_load_n(&c->pf_files, __ATOMIC_RELAXED);
	return prefetch_depth(&p);
}

/* Tells the file just opened at position pos of order (the newest open
 * file of that object not in an order yet) where it is, so its reads can
 * read ahead into the next file (file_spill()). Only a file larger than a
 * chunk has a window that can reach past its end. */
static void file_link_order(struct cache *c, cache_order_fn fn, void *ctx,
			    uint64_t order, uint64_t pos)
{
	struct cache_object cur = { 0 };
	struct cache_file *f;

	if (!fn(ctx, order, pos, &cur) || cur.size <= cache_obj_chunk(c, &cur))
		return;
	pthread_mutex_lock(&c->files_lock);
	/* The same manifest entry: the same strings. */
	for (f = c->files; f != NULL; f = f->next)
		if (f->obj.key == cur.key && f->obj.size == cur.size &&
		    __atomic_load_n(&f->order, __ATOMIC_RELAXED) ==
			    CACHE_NO_ORDER) {
			__atomic_store_n(&f->pos, pos, __ATOMIC_RELAXED);
			__atomic_store_n(&f->order, order, __ATOMIC_RELEASE);
			break;
		}
	pthread_mutex_unlock(&c->files_lock);
}

void cache_order_note(struct cache *c, uint64_t order, uint64_t pos,
		      struct cache_order_ask *ask)
{
	struct order_slot *slot = NULL;
	uint64_t stalls, now;
	struct fetch_pace fp;
	unsigned limit;
	bool hit, miss;
	size_t i;

	ask->order = order;
	ask->pos = pos;
	ask->from = 1;
	ask->to = 0;
	ask->link = false;
	if (!c->disk || order == CACHE_NO_ORDER)
		return;
	/* The engine's lock is innermost: measured before pf_lock. */
	fetch_pace_get(c->fetch, &fp, &stalls);
	now = order_now_ns();
	pthread_mutex_lock(&c->pf_lock);
	for (i = 0; i < c->n_orders; i++)
		if (c->orders[i].order == order)
			slot = &c->orders[i];
	if (c->order_fn != NULL && slot == NULL) {
		if (c->n_orders == c->cap_orders) {
			size_t cap = c->cap_orders ? 2 * c->cap_orders : 8;
			struct order_slot *o =
				realloc(c->orders, cap * sizeof(*o));

			if (o != NULL) {
				c->orders = o;
				c->cap_orders = cap;
			}
		}
		if (c->n_orders < c->cap_orders) {
			slot = &c->orders[c->n_orders++];
			memset(slot, 0, sizeof(*slot));
			slot->order = order;
		}
	}
	if (slot == NULL) {
		pthread_mutex_unlock(&c->pf_lock);
		return;
	}
	limit = order_pace(c, slot, &fp, stalls, now);
	prefetch_order_open(&slot->st, pos, limit, &hit, &miss, &ask->from,
			    &ask->to);
	ask->link = true;
	__atomic_store_n(&c->pf_depth, (uint64_t)slot->st.depth,
			 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->pf_lock);
	if (hit)
		stat_add(&c->pf_hits, 1);
	if (miss)
		stat_add(&c->pf_misses, 1);
}

void cache_order_ask(struct cache *c, const struct cache_order_ask *ask)
{
	uint64_t order = ask->order, p, asked = 0, n_asked = 0;
	cache_order_fn fn;
	void *ctx;
	size_t i;

	if (!ask->link)
		return;
	pthread_mutex_lock(&c->pf_lock);
	fn = c->order_fn;
	ctx = c->order_ctx;
	pthread_mutex_unlock(&c->pf_lock);
	if (fn != NULL)
		file_link_order(c, fn, ctx, order, ask->pos);
	for (p = ask->from; fn != NULL && p <= ask->to; p++) {
		struct cache_object next = { 0 };
		bool end = !fn(ctx, order, p, &next);

		/* The end of an order may move (the next epoch's order joins
		 * it once planned, fs/epoch.c): ask again from there. */
		if (end || ((next.size != 0 && next.transform == NULL) &&
			    file_prefetch_chunk(c, &next, 0) < 0)) {
			pthread_mutex_lock(&c->pf_lock);
			for (i = 0; i < c->n_orders; i++)
				if (c->orders[i].order == order)
					prefetch_order_stopped(&c->orders[i].st,
							       p);
			pthread_mutex_unlock(&c->pf_lock);
			break;
		}
		if (next.size == 0 || next.transform != NULL)
			continue; /* nothing to read, or never ahead */
		/* The first chunk: a whole small file, or the start of a
		 * large one, whose reads then read ahead. */
		asked += read_chunk_len(c, &next, 0);
		n_asked++;
	}
	if (n_asked == 0)
		return;
	/* What a file ahead holds, for the memory bound. */
	pthread_mutex_lock(&c->pf_lock);
	for (i = 0; i < c->n_orders; i++)
		if (c->orders[i].order == order) {
			uint64_t *fb = &c->orders[i].file_bytes;

			*fb = *fb ? (*fb * 7 + asked / n_asked) / 8
				  : asked / n_asked;
		}
	pthread_mutex_unlock(&c->pf_lock);
}

void cache_order_open(struct cache *c, uint64_t order, uint64_t pos)
{
	struct cache_order_ask ask;

	cache_order_note(c, order, pos, &ask);
	cache_order_ask(c, &ask);
}

int cache_file_open(struct cache *c, const struct cache_object *obj,
		    struct cache_file **out)
{
	struct cache_file *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -ENOMEM;
	f->c = c;
	f->obj = *obj;
	f->order = CACHE_NO_ORDER;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_lock(&c->files_lock);
	DLIST_PUSH(c->files, f);
	pthread_mutex_unlock(&c->files_lock);
	*out = f;
	return 0;
}

/* A read with the disk cache off: a sequential reader's next chunks are
 * read ahead into the engine's memory, where they are retained until read
 * once and then freed (fetch_join()); everything else (the first MiB of a
 * run, a seek, a read across chunks, a chunk not read ahead) goes straight
 * to the backend, as before. */
static ssize_t file_read_uncached(struct cache_file *f, uint64_t offset,
				  size_t len, void *buf)
{
	struct cache *c = f->c;
	const struct cache_object o = f->obj, *obj = &o;
	uint64_t from, to, n, last, end, unit = cache_obj_chunk(c, obj), cur;
	struct read_chunk ch;
	ssize_t got;

	end = offset + len < obj->size ? offset + len : obj->size;
	pthread_mutex_lock(&f->lock);
	prefetch_window_read(&f->win, offset, end - offset, obj->size,
			     __atomic_load_n(&c->ra_cap, __ATOMIC_RELAXED),
			     &from, &to);
	/* Whole chunks only for a reader past its first MiB (not one that
	 * reads a header), and only those after the one it reads. */
	if (end < f->win.start + PREFETCH_WINDOW_MIN)
		from = to;
	prefetch_window_unit(&f->win, end, obj->size, unit, &from, &to);
	__atomic_store_n(&c->ra_window, f->win.window, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
	file_leave(f);
	cur = offset / unit;
	n = from / unit > cur + 1 ? from / unit : cur + 1;
	last = from < to ? (to - 1) / unit : 0;
	for (; from < to && n <= last; n++)
		if (file_prefetch_chunk(c, obj, n) < 0)
			break;
	if (cur != (end - 1) / unit || read_chunk_name(c, obj, cur, &ch) < 0)
		return cache_read(c, obj, offset, len, buf);
	got = fetch_join(c->fetch, &ch.r, offset - cur * unit, end - offset,
			 buf, NULL);
	read_chunk_release(&ch);
	if (got == -ENOENT)
		return cache_read(c, obj, offset, len, buf);
	return got;
}

static bool file_uncached(const struct cache_file *f, uint64_t offset,
			  size_t len)
{
	/* A derived object or a bad chunk size: cache_read() answers. */
	return !f->c->disk && f->c->chunk_size > 0 && offset < f->obj.size &&
	       len > 0 && f->obj.transform == NULL &&
	       cache_obj_chunk_ok(f->c, &f->obj);
}

/* Reads [from, to) of the file after position pos of order ahead (the
 * window's part past the end of the file read: prefetch_window_spill()),
 * if the order's reader follows it (depth > 0: the prefetcher has seen it
 * open the positions it asked for). The order's generation outlives this
 * call: the reader's open file holds it, so the strings fn puts in the
 * next object stay valid. */
static void file_spill(struct cache *c, uint64_t order, uint64_t pos,
		       uint64_t from, uint64_t to)
{
	struct cache_object next = { 0 };
	cache_order_fn fn;
	bool follows = false;
	uint64_t n, unit;
	void *ctx;
	size_t i;

	pthread_mutex_lock(&c->pf_lock);
	fn = c->order_fn;
	ctx = c->order_ctx;
	for (i = 0; i < c->n_orders; i++)
		if (c->orders[i].order == order)
			follows = c->orders[i].st.depth > 0;
	pthread_mutex_unlock(&c->pf_lock);
	if (!follows || fn == NULL || !fn(ctx, order, pos + 1, &next))
		return;
	if (to > next.size)
		to = next.size;
	unit = cache_obj_chunk(c, &next);
	for (n = from / unit; n * unit < to; n++)
		if (file_prefetch_chunk(c, &next, n) < 0)
			break;
}

/* cache_file_read() and cache_file_reply(): moves the read-ahead window
 * for a read of [offset, offset + len) and queues what it reaches; leaves
 * f (file_leave()). */
static void file_read_ahead(struct cache_file *f, uint64_t offset, size_t len)
{
	struct cache *c = f->c;
	const struct cache_object o = f->obj, *obj = &o;
	uint64_t from, to, n, first, last, end, order, pos, spill, spill_from;
	uint64_t unit = cache_obj_chunk(c, obj);

	if (!c->disk || offset >= obj->size || len == 0 ||
	    obj->transform != NULL || !cache_obj_chunk_ok(c, obj)) {
		file_leave(f);
		return;
	}
	end = offset + len < obj->size ? offset + len : obj->size;
	pthread_mutex_lock(&f->lock);
	prefetch_window_read(&f->win, offset, end - offset, obj->size,
			     __atomic_load_n(&c->ra_cap, __ATOMIC_RELAXED),
			     &from, &to);
	prefetch_window_unit(&f->win, end, obj->size, unit, &from, &to);
	__atomic_store_n(&c->ra_window, f->win.window, __ATOMIC_RELAXED);
	order = __atomic_load_n(&f->order, __ATOMIC_ACQUIRE);
	pos = __atomic_load_n(&f->pos, __ATOMIC_RELAXED);
	spill = order == CACHE_NO_ORDER
			? 0
			: prefetch_window_spill(&f->win, end, obj->size);
	spill_from = f->spilled;
	if (spill > f->spilled)
		f->spilled = spill;
	pthread_mutex_unlock(&f->lock);
	file_leave(f);
	if (prefetch_window_chunks(end, from, to, unit, &first, &last))
		for (n = first; n <= last; n++)
			if (file_prefetch_chunk(c, obj, n) < 0)
				return;
	if (spill > spill_from)
		file_spill(c, order, pos, spill_from, spill);
}

ssize_t cache_file_read(struct cache_file *f, uint64_t offset, size_t len,
			void *buf)
{
	struct cache *c = f->c;
	const struct cache_object obj = f->obj;

	if (file_uncached(f, offset, len))
		return file_read_uncached(f, offset, len, buf);
	file_read_ahead(f, offset, len);
	return cache_read(c, &obj, offset, len, buf);
}

ssize_t cache_file_reply(struct cache_file *f, uint64_t offset, size_t len,
			 cache_reply_fn fn, void *arg)
{
	/* Copies: the reply may let the reader close the file (and free f)
	 * before fn returns. */
	struct cache *c = f->c;
	const struct cache_object obj = f->obj;
	ssize_t got;
	void *buf;

	if (!file_uncached(f, offset, len)) {
		file_read_ahead(f, offset, len);
		return read_reply(c, &obj, offset, len, fn, arg);
	}
	/* No disk cache: one accounted buffer, as read_reply() has then. */
	if (len > obj.size - offset)
		len = (size_t)(obj.size - offset);
	buf = fetch_buffer_alloc(c->fetch, len);
	if (buf == NULL) {
		file_leave(f);
		return -ENOMEM;
	}
	got = file_read_uncached(f, offset, len, buf);
	return read_reply_buffer(c, buf, len, got, fn, arg);
}

ssize_t cache_file_read_ready(struct cache_file *f, uint64_t offset, size_t len,
			      void *buf)
{
	struct cache *c = f->c;
	const struct cache_object o = f->obj, *obj = &o;
	uint64_t n, clen, in_off, unit = cache_obj_chunk(c, obj);
	struct read_chunk ch;
	ssize_t got;

	file_leave(f);
	if (!c->disk || len == 0 || offset >= obj->size ||
	    len > obj->size - offset || !cache_obj_chunk_ok(c, obj))
		return -ENOENT;
	n = offset / unit;
	clen = read_chunk_len(c, obj, n);
	in_off = offset - n * unit;
	if (len > clen - in_off)
		return -ENOENT; /* past its chunk */
	got = read_chunk_name(c, obj, n, &ch);
	if (got < 0)
		return got;
	if (obj->transform != NULL) {
		/* A derived chunk is never in the engine: only stored. */
		got = derived_stored(c, obj, &ch, in_off, len, buf);
		read_chunk_release(&ch);
		return got;
	}
	got = fetch_peek(c->fetch, &ch.r, in_off, len, buf);
	if (got >= 0) {
		stat_add(&c->hits, 1);
		stat_add(&c->bytes_from_cache, (uint64_t)got);
	} else if (got == -ENOENT) {
		/* Not in memory: stored, e.g. after a remount. */
		got = read_stored(c, &ch, in_off, len, buf);
	}
	read_chunk_release(&ch);
	return got;
}

void cache_file_close(struct cache_file *f)
{
	if (f == NULL)
		return;
	/* See file_leave(). */
	(void)__atomic_load_n(&f->left, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&f->c->files_lock);
	DLIST_UNLINK(f->c->files, f);
	pthread_mutex_unlock(&f->c->files_lock);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

void *cache_buffer_alloc(struct cache *c, size_t len)
{
	return fetch_buffer_alloc(c->fetch, len);
}

void cache_buffer_free(struct cache *c, void *p, size_t len)
{
	fetch_buffer_free(c->fetch, p, len);
}
