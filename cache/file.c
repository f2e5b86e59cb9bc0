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

struct cache_file {
	struct cache *c;
	struct cache_object obj; /* borrowed */
	pthread_mutex_t lock;	 /* protects win; taken with no other lock */
	struct prefetch_window win;
	struct cache_file *prev, *next; /* c->files; protected by
					 * c->files_lock */
};

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

	if (read_chunk_name(c, obj, n, &ch) < 0)
		return -ENOBUFS;
	for (tries = 0;; tries++) {
		/* See fetch_epoch(); after a few rounds, without it. */
		epoch = tries < 3 ? fetch_epoch(c->fetch, ch.hash)
				  : FETCH_NO_EPOCH;
		rc = 1;
		if (fetch_in_flight(c->fetch, &ch.r) ||
		    read_chunk_present(c, &ch))
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

void cache_order_open(struct cache *c, uint64_t order, uint64_t pos)
{
	unsigned limit = __atomic_load_n(&c->pf_files, __ATOMIC_RELAXED);
	struct order_slot *slot = NULL;
	uint64_t from, to, p;
	cache_order_fn fn;
	bool hit, miss;
	void *ctx;
	size_t i;

	if (!c->disk || order == CACHE_NO_ORDER)
		return;
	pthread_mutex_lock(&c->pf_lock);
	fn = c->order_fn;
	ctx = c->order_ctx;
	for (i = 0; i < c->n_orders; i++)
		if (c->orders[i].order == order)
			slot = &c->orders[i];
	if (fn != NULL && slot == NULL) {
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
	prefetch_order_open(&slot->st, pos, limit, &hit, &miss, &from, &to);
	__atomic_store_n(&c->pf_depth, (uint64_t)slot->st.depth,
			 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->pf_lock);
	if (hit)
		stat_add(&c->pf_hits, 1);
	if (miss)
		stat_add(&c->pf_misses, 1);

	for (p = from; p <= to; p++) {
		struct cache_object next;

		if (!fn(ctx, order, p, &next))
			break;
		if (next.size == 0)
			continue;
		/* The first chunk: a whole small file, or the start of a
		 * large one, whose reads then read ahead. */
		if (file_prefetch_chunk(c, &next, 0) < 0) {
			pthread_mutex_lock(&c->pf_lock);
			for (i = 0; i < c->n_orders; i++)
				if (c->orders[i].order == order)
					prefetch_order_stopped(&c->orders[i].st,
							       p);
			pthread_mutex_unlock(&c->pf_lock);
			break;
		}
	}
}

int cache_file_open(struct cache *c, const struct cache_object *obj,
		    struct cache_file **out)
{
	struct cache_file *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -ENOMEM;
	f->c = c;
	f->obj = *obj;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_lock(&c->files_lock);
	f->next = c->files;
	if (c->files != NULL)
		c->files->prev = f;
	c->files = f;
	pthread_mutex_unlock(&c->files_lock);
	*out = f;
	return 0;
}

/* cache_file_read() and cache_file_reply(): moves the read-ahead window
 * for a read of [offset, offset + len) and queues what it reaches. */
static void file_read_ahead(struct cache_file *f, uint64_t offset, size_t len)
{
	struct cache *c = f->c;
	const struct cache_object *obj = &f->obj;
	uint64_t from, to, n, first, last, end;

	if (!c->disk || offset >= obj->size || len == 0)
		return;
	end = offset + len < obj->size ? offset + len : obj->size;
	pthread_mutex_lock(&f->lock);
	prefetch_window_read(&f->win, offset, end - offset, obj->size,
			     __atomic_load_n(&c->ra_cap, __ATOMIC_RELAXED),
			     &from, &to);
	__atomic_store_n(&c->ra_window, f->win.window, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
	if (prefetch_window_chunks(end, from, to, c->chunk_size, &first, &last))
		for (n = first; n <= last; n++)
			if (file_prefetch_chunk(c, obj, n) < 0)
				break;
}

ssize_t cache_file_read(struct cache_file *f, uint64_t offset, size_t len,
			void *buf)
{
	file_read_ahead(f, offset, len);
	return cache_read(f->c, &f->obj, offset, len, buf);
}

ssize_t cache_file_reply(struct cache_file *f, uint64_t offset, size_t len,
			 cache_reply_fn fn, void *arg)
{
	file_read_ahead(f, offset, len);
	return read_reply(f->c, &f->obj, offset, len, fn, arg);
}

ssize_t cache_file_read_ready(struct cache_file *f, uint64_t offset, size_t len,
			      void *buf)
{
	struct cache *c = f->c;
	const struct cache_object *obj = &f->obj;
	uint64_t n, clen, in_off;
	struct read_chunk ch;
	ssize_t got;

	if (!c->disk || len == 0 || offset >= obj->size ||
	    len > obj->size - offset)
		return -ENOENT;
	n = offset / c->chunk_size;
	clen = read_chunk_len(c, obj, n);
	in_off = offset - n * c->chunk_size;
	if (len > clen - in_off)
		return -ENOENT; /* past its chunk */
	got = read_chunk_name(c, obj, n, &ch);
	if (got < 0)
		return got;
	got = fetch_peek(c->fetch, &ch.r, in_off, len, buf);
	read_chunk_release(&ch);
	if (got >= 0) {
		stat_add(&c->hits, 1);
		stat_add(&c->bytes_from_cache, (uint64_t)got);
	}
	return got;
}

void cache_file_close(struct cache_file *f)
{
	if (f == NULL)
		return;
	pthread_mutex_lock(&f->c->files_lock);
	if (f->prev != NULL)
		f->prev->next = f->next;
	else
		f->c->files = f->next;
	if (f->next != NULL)
		f->next->prev = f->prev;
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
