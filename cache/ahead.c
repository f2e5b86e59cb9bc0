/*
 * ahead: the prefetcher's hands. prefetch.h decides what to read ahead (a
 * window within an object per reader, the next files of an order); this
 * file keeps that state and queues the chunks it names with the fetch
 * engine unless they are stored or in flight: into the disk cache, or
 * without one (a window's whole chunks only) into the engine's memory,
 * retained until read once. Small chunks go in runs of one backend read
 * each (ahead_run()), which a reader about to read them queues too
 * (read.c), at its own priority.
 *
 * Windows live in a small table of streams, one per (object, reader),
 * replaced least recently used first: a reader that comes back after its
 * stream was replaced starts a new window, which costs read-ahead, never
 * a byte. Orders live in c->orders (cache_order_note()).
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/fnv.h"

/* Queues chunk ch at prefetch priority (fetch_ahead()) unless it is in
 * flight or, with a disk cache, stored. Returns as fetch_ahead(). */
static int ahead_queue(struct cache *c, const struct read_chunk *ch)
{
	struct read_look_arg a = { .c = c, .ch = ch };

	return fetch_ahead(c->fetch, &ch->r, c->disk ? read_look_present : NULL,
			   &a);
}

/* Queues chunk n of obj ahead of readers unless it is cached or in
 * flight. Returns 0 (queued or nothing to do) or -ENOBUFS (no memory for
 * prefetching now: stop). */
static int ahead_chunk(struct cache *c, const struct cache_object *obj,
		       uint64_t n)
{
	struct read_chunk ch;
	int rc;

	/* A derived object is produced whole by a reader, never ahead, and
	 * a bad chunk size is the reader's error to report. */
	if (obj->transform != NULL || !cache_obj_chunk_ok(c, obj))
		return 0;
	if (read_chunk_name(c, obj, n, &ch) < 0)
		return -ENOBUFS;
	rc = ahead_queue(c, &ch);
	read_chunk_release(&ch);
	if (rc == 0) {
		stat_add(&c->pf_issued, 1);
		stat_add(&c->pf_bytes, ch.len);
	}
	return rc == -ENOBUFS || rc == -ENOMEM ? -ENOBUFS : 0;
}

int ahead_run(struct cache *c, const struct cache_object *obj, uint64_t offset,
	      uint64_t len, bool reader)
{
	uint64_t unit = cache_obj_chunk(c, obj), n = offset / unit;
	uint64_t last = (offset + len - 1) / unit;
	struct read_chunk *ch = NULL;
	struct read_look_arg *a = NULL;
	struct fetch_request *rs = NULL;
	void **args = NULL;
	unsigned k = 0, i, queued;
	uint64_t bytes;
	int rc = 0;

	ch = calloc(FETCH_RUN_MAX, sizeof(*ch));
	a = calloc(FETCH_RUN_MAX, sizeof(*a));
	rs = calloc(FETCH_RUN_MAX, sizeof(*rs));
	args = calloc(FETCH_RUN_MAX, sizeof(*args));
	if (ch == NULL || a == NULL || rs == NULL || args == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	while (rc == 0 && n <= last) {
		/* At most a run's worth at a time (FETCH_PART_SIZE). */
		for (k = 0, bytes = 0;
		     n <= last && k < FETCH_RUN_MAX &&
		     bytes + read_chunk_len(c, obj, n) <= FETCH_PART_SIZE;
		     k++, n++) {
			rc = read_chunk_name(c, obj, n, &ch[k]);
			if (rc < 0)
				break;
			bytes += ch[k].len;
			a[k] = (struct read_look_arg){ .c = c, .ch = &ch[k] };
			rs[k] = ch[k].r;
			args[k] = &a[k];
		}
		queued = 0;
		bytes = 0;
		if (rc == 0)
			rc = fetch_run(c->fetch, rs, k, reader,
				       read_look_present, args, &queued,
				       &bytes);
		if (!reader) {
			stat_add(&c->pf_issued, queued);
			stat_add(&c->pf_bytes, bytes);
		}
		for (i = 0; i < k; i++)
			read_chunk_release(&ch[i]);
	}
out:
	free(args);
	free(rs);
	free(a);
	free(ch);
	return rc;
}

int cache_prefetch_range(struct cache *c, const struct cache_object *obj,
			 uint64_t offset, uint64_t len)
{
	uint64_t unit = cache_obj_chunk(c, obj), n, end;

	if (!c->disk || len == 0 || offset >= obj->size || unit == 0)
		return 0;
	end = obj->size - offset < len ? obj->size : offset + len;
	/* Chunks cut small (a record view's): runs of one backend read. */
	if (unit < c->chunk_size && obj->transform == NULL &&
	    cache_obj_chunk_ok(c, obj)) {
		int rc = ahead_run(c, obj, offset, end - offset, false);

		return rc == -ENOBUFS || rc == -ENOMEM ? -ENOBUFS : 0;
	}
	for (n = offset / unit; n * unit < end; n++)
		if (ahead_chunk(c, obj, n) < 0)
			return -ENOBUFS;
	return 0;
}

/* ---- orders ------------------------------------------------------------- */

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

/* Measures the reader of slot at a note of position pos now (pf_lock
 * held) and returns the working depth for it (prefetch_depth()). Files
 * the reader read without a note (pushed into the kernel) count: the gap
 * is per position moved. */
static unsigned ahead_pace(struct cache *c, struct order_slot *slot,
			   const struct fetch_pace *fp, uint64_t stalls,
			   uint64_t now, uint64_t pos, uint64_t reader)
{
	struct prefetch_pace p = { 0 };
	uint64_t moved = prefetch_order_moved(&slot->st, reader, pos);

	if (slot->last_ns != 0) {
		slot->gap_ns = prefetch_pace_gap(slot->gap_ns,
						 now - slot->last_ns, moved);
		p.starved = stalls != slot->stalls;
	}
	slot->last_ns = now;
	slot->stalls = stalls;
	__atomic_store_n(&c->pf_gap_ns, slot->gap_ns, __ATOMIC_RELAXED);
	p.latency_ns = fp->latency_min_ns;
	p.latency_slow_ns = fp->latency_p90_ns;
	p.gap_ns = slot->gap_ns;
	p.depth = prefetch_order_depth(&slot->st, reader);
	p.file_bytes = slot->file_bytes;
	p.memory = __atomic_load_n(&c->pf_memory, __ATOMIC_RELAXED);
	p.connections = __atomic_load_n(&c->pf_conns, __ATOMIC_RELAXED);
	p.cap = __atomic_load_n(&c->pf_files, __ATOMIC_RELAXED);
	return prefetch_depth(&p);
}

void cache_order_note(struct cache *c, uint64_t order, uint64_t pos,
		      uint64_t reader, struct cache_order_ask *ask)
{
	struct order_slot *slot = NULL;
	struct prefetch_open op;
	uint64_t stalls, now;
	struct fetch_pace fp;
	unsigned limit;
	size_t i;

	ask->order = order;
	ask->pos = pos;
	ask->from = 1;
	ask->to = 0;
	ask->noted = false;
	if (!c->disk || order == CACHE_NO_ORDER)
		return;
	/* The engine's lock is innermost: measured before pf_lock. */
	fetch_pace_get(c->fetch, &fp, &stalls);
	now = clock_now_ns();
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
	if (slot->st.opened && pos == slot->st.last) {
		/* Noted again (a lookup, then the read): nothing moved. */
		slot->noted_ns = now;
		pthread_mutex_unlock(&c->pf_lock);
		return;
	}
	limit = ahead_pace(c, slot, &fp, stalls, now, pos, reader);
	prefetch_order_open(&slot->st, pos, reader, limit, &op);
	ask->from = op.from;
	ask->to = op.to;
	ask->noted = true;
	/* The pusher goes on after the readers' cursors; one that jumped
	 * back (another pass) starts it over from there. */
	slot->known = prefetch_order_floor(&slot->st);
	if (op.rerun && pos < slot->claimed)
		slot->claimed = slot->known;
	slot->noted_ns = now;
	__atomic_store_n(&c->pf_depth, (uint64_t)slot->st.depth,
			 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->pf_lock);
	if (op.hit)
		stat_add(&c->pf_hits, 1);
	if (op.miss)
		stat_add(&c->pf_misses, 1);
	push_wake(c);
}

void cache_order_ask(struct cache *c, const struct cache_order_ask *ask)
{
	uint64_t order = ask->order, p, asked = 0, n_asked = 0;
	cache_order_fn fn;
	void *ctx;
	size_t i;

	if (!ask->noted)
		return;
	pthread_mutex_lock(&c->pf_lock);
	fn = c->order_fn;
	ctx = c->order_ctx;
	pthread_mutex_unlock(&c->pf_lock);
	for (p = ask->from; fn != NULL && p <= ask->to; p++) {
		struct cache_object next = { 0 };
		bool end = !fn(ctx, order, p, &next);

		/* The end of an order may move (the next epoch's order joins
		 * it once planned, fs/epoch.c): ask again from there. */
		if (end || ((next.size != 0 && next.transform == NULL) &&
			    ahead_chunk(c, &next, 0) < 0)) {
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

			*fb = prefetch_file_bytes(*fb, asked / n_asked);
		}
	pthread_mutex_unlock(&c->pf_lock);
}

void cache_order_resume(struct cache *c,
			bool (*want)(void *ctx, uint64_t order), void *ctx)
{
	uint64_t *ids = NULL, from[PREFETCH_LANES], to[PREFETCH_LANES];
	struct cache_order_ask *asks = NULL;
	size_t i, j, n_ids = 0, n = 0;
	unsigned k, m;

	/* The orders first, then which of them to resume (want() takes the
	 * caller's locks: never under pf_lock), then their ranges. */
	pthread_mutex_lock(&c->pf_lock);
	if (c->n_orders > 0)
		ids = calloc(c->n_orders, sizeof(*ids));
	for (i = 0; ids != NULL && i < c->n_orders; i++)
		ids[n_ids++] = c->orders[i].order;
	pthread_mutex_unlock(&c->pf_lock);
	for (i = j = 0; i < n_ids; i++)
		if (want(ctx, ids[i]))
			ids[j++] = ids[i];
	n_ids = j;
	if (n_ids > 0)
		asks = calloc(n_ids * PREFETCH_LANES, sizeof(*asks));
	pthread_mutex_lock(&c->pf_lock);
	for (i = 0; asks != NULL && i < c->n_orders; i++) {
		for (j = 0; j < n_ids && ids[j] != c->orders[i].order; j++)
			;
		if (j == n_ids)
			continue;
		m = prefetch_order_resume(&c->orders[i].st, from, to);
		for (k = 0; k < m; k++)
			asks[n++] = (struct cache_order_ask){
				.order = c->orders[i].order,
				.pos = c->orders[i].st.last,
				.from = from[k],
				.to = to[k],
				.noted = true
			};
	}
	pthread_mutex_unlock(&c->pf_lock);
	for (i = 0; i < n; i++)
		cache_order_ask(c, &asks[i]);
	free(asks);
	free(ids);
	if (n > 0)
		push_wake(c);
}

void cache_order_open(struct cache *c, uint64_t order, uint64_t pos,
		      uint64_t reader)
{
	struct cache_order_ask ask;

	cache_order_note(c, order, pos, reader, &ask);
	cache_order_ask(c, &ask);
}

/* ---- windows ------------------------------------------------------------ */

/* A stream: one reader's window over one object. */
struct ahead_stream {
	uint64_t hash;	 /* of the object and the reader; 0: free */
	uint64_t used;	 /* c->ahead.clock at its last read */
	uint64_t reader; /* compared too: hashes of readers may collide */
	struct prefetch_window win;
	uint64_t spilled; /* bytes of the next file of the order asked for
			   * (ahead_spill()) */
};

#define AHEAD_STREAMS 256 /* slots, a power of 2 */
#define AHEAD_WAYS 4	  /* slots an object and reader may take */

/* The stream's key: the object's identity (its bytes, not its pointers:
 * a caller's strings may move) and the reader. */
static uint64_t ahead_hash(const struct cache_object *obj, uint64_t reader)
{
	uint64_t h = fnv_hash(obj->key, obj->key_len);

	if (obj->etag != NULL)
		h ^= fnv_hash(obj->etag, obj->etag_len) * 31;
	h ^= (obj->size + 1) * UINT64_C(0x9E3779B97F4A7C15);
	h ^= (reader + 1) * UINT64_C(0xBF58476D1CE4E5B9);
	return h != 0 ? h : 1;
}

/* The stream of (obj, reader), made (replacing the least recently used
 * of its ways) if it has none. Caller holds c->ahead.lock. */
static struct ahead_stream *
ahead_stream(struct cache *c, const struct cache_object *obj, uint64_t reader)
{
	uint64_t h = ahead_hash(obj, reader);
	size_t base = (size_t)(h & (AHEAD_STREAMS - AHEAD_WAYS)), i;
	struct ahead_stream *s = &c->ahead.streams[base], *old = s;

	for (i = 0; i < AHEAD_WAYS; i++, s++) {
		if (s->hash == h && s->reader == reader)
			goto found;
		if (s->used < old->used)
			old = s;
	}
	s = old;
	memset(s, 0, sizeof(*s));
	s->hash = h;
	s->reader = reader;
found:
	s->used = ++c->ahead.clock;
	return s;
}

/* Reads [from, to) of the file after position pos of order ahead (the
 * window's part past the end of the file read: prefetch_window_spill()),
 * if the order's reader follows it (depth > 0: the prefetcher has seen it
 * open the positions it asked for). The reader's request holds the
 * order's generation, so the strings fn puts in the next object stay
 * valid through this call. */
static void ahead_spill(struct cache *c, uint64_t order, uint64_t pos,
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
		if (ahead_chunk(c, &next, n) < 0)
			break;
}

void ahead_read(struct cache *c, const struct cache_read *r, uint64_t offset,
		size_t len)
{
	const struct cache_object *obj = r->obj;
	uint64_t from, to, n, first, last, end, spill = 0, spill_from = 0;
	uint64_t unit = cache_obj_chunk(c, obj), cur, cap;
	struct ahead_stream *s;

	if (r->order != CACHE_NO_ORDER && offset == 0 && c->disk) {
		/* The reader is at this file of its order: the prefetcher
		 * and the pusher go on from here. */
		struct cache_order_ask ask;

		cache_order_note(c, r->order, r->pos, r->reader, &ask);
		cache_order_ask(c, &ask);
	}
	if (r->reader == 0 || obj->transform != NULL ||
	    !cache_obj_chunk_ok(c, obj) || (!c->disk && unit == 0))
		return;
	end = offset + len;
	/* The window reaches as far as the engine's flow needs (the engine's
	 * lock is innermost: read before ours). */
	cap = prefetch_window_stretch(
		__atomic_load_n(&c->ra_cap, __ATOMIC_RELAXED),
		__atomic_load_n(&c->ra_memory, __ATOMIC_RELAXED),
		fetch_inflight_max(c->fetch), unit);
	pthread_mutex_lock(&c->ahead.lock);
	s = ahead_stream(c, obj, r->reader);
	prefetch_window_read(&s->win, offset, len, obj->size, cap, &from, &to);
	if (!c->disk && !prefetch_uncached_ahead(&s->win, end))
		from = to;
	prefetch_window_unit(&s->win, end, obj->size, unit, &from, &to);
	__atomic_store_n(&c->ra_window, s->win.window, __ATOMIC_RELAXED);
	/* Only an object larger than a chunk has a window that can reach
	 * past its end. */
	if (c->disk && r->order != CACHE_NO_ORDER && obj->size > unit) {
		spill = prefetch_window_spill(&s->win, end, obj->size);
		spill_from = s->spilled;
		if (spill > s->spilled)
			s->spilled = spill;
	}
	pthread_mutex_unlock(&c->ahead.lock);
	if (!c->disk) {
		/* Only the chunks after the one read: it is read just as
		 * asked for, straight from the backend. */
		cur = offset / unit;
		n = from / unit > cur + 1 ? from / unit : cur + 1;
		last = from < to ? (to - 1) / unit : 0;
		for (; from < to && n <= last; n++)
			if (ahead_chunk(c, obj, n) < 0)
				break;
		return;
	}
	if (prefetch_window_chunks(end, from, to, unit, &first, &last))
		for (n = first; n <= last; n++)
			if (ahead_chunk(c, obj, n) < 0)
				return;
	if (spill > spill_from)
		ahead_spill(c, r->order, r->pos, spill_from, spill);
}

int ahead_init(struct cache *c)
{
	pthread_mutex_init(&c->ahead.lock, NULL);
	c->ahead.streams = calloc(AHEAD_STREAMS, sizeof(*c->ahead.streams));
	return c->ahead.streams != NULL ? 0 : -ENOMEM;
}

void ahead_destroy(struct cache *c)
{
	free(c->ahead.streams);
	c->ahead.streams = NULL;
	pthread_mutex_destroy(&c->ahead.lock);
}

void *cache_buffer_alloc(struct cache *c, size_t len)
{
	return fetch_buffer_alloc(c->fetch, len);
}

void cache_buffer_free(struct cache *c, void *p, size_t len)
{
	fetch_buffer_free(c->fetch, p, len);
}
