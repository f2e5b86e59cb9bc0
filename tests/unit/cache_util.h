/*
 * cache_util: the suites' short forms of cache_read() (cache/cache.h):
 * a copy, a raw read, a fill, and a "file": an object read by one reader
 * (a read-ahead window of its own) at a place in an order, as the FUSE
 * layer reads. Header-only.
 */
#ifndef SHARDFS_TEST_CACHE_UTIL_H
#define SHARDFS_TEST_CACHE_UTIL_H

#include <errno.h>
#include <stdlib.h>

#include "cache/cache.h"

static inline ssize_t tc_read(struct cache *c, const struct cache_object *o,
			      uint64_t off, size_t len, void *buf)
{
	struct cache_read r = { .obj = o,
				.offset = off,
				.len = len,
				.buf = buf,
				.order = CACHE_NO_ORDER };

	return cache_read(c, &r);
}

static inline ssize_t tc_read_raw(struct cache *c, const struct cache_object *o,
				  uint64_t off, size_t len, void *buf)
{
	struct cache_read r = { .obj = o,
				.offset = off,
				.len = len,
				.buf = buf,
				.flags = CACHE_READ_RAW,
				.order = CACHE_NO_ORDER };

	return cache_read(c, &r);
}

/* A fill of the whole object; *fetched (may be NULL) gets the bytes
 * fetched. Returns 0 or the read's error. */
static inline int tc_fill(struct cache *c, const struct cache_object *o,
			  uint64_t *fetched)
{
	struct cache_read r = { .obj = o,
				.len = (size_t)o->size,
				.order = CACHE_NO_ORDER };
	ssize_t got = cache_read(c, &r);

	if (got >= 0 && fetched != NULL)
		*fetched = (uint64_t)got;
	return got < 0 ? (int)got : 0;
}

struct tc_file {
	struct cache *c;
	const struct cache_object *obj; /* the suite's, borrowed */
	uint64_t reader;
	uint64_t order, pos;
};

static inline int tc_file_open_at(struct cache *c, const struct cache_object *o,
				  uint64_t order, uint64_t pos,
				  struct tc_file **out)
{
	static uint64_t readers;
	struct tc_file *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -ENOMEM;
	f->c = c;
	f->obj = o;
	f->reader = __atomic_add_fetch(&readers, 1, __ATOMIC_RELAXED);
	f->order = order;
	f->pos = pos;
	*out = f;
	return 0;
}

static inline int tc_file_open(struct cache *c, const struct cache_object *o,
			       struct tc_file **out)
{
	return tc_file_open_at(c, o, CACHE_NO_ORDER, 0, out);
}

static inline struct cache_read tc_file_req(const struct tc_file *f,
					    uint64_t off, size_t len)
{
	struct cache_read r = { .obj = f->obj,
				.offset = off,
				.len = len,
				.reader = f->reader,
				.order = f->order,
				.pos = f->pos };

	return r;
}

static inline ssize_t tc_file_read(struct tc_file *f, uint64_t off, size_t len,
				   void *buf)
{
	struct cache_read r = tc_file_req(f, off, len);

	r.buf = buf;
	return cache_read(f->c, &r);
}

static inline ssize_t tc_file_ready(struct tc_file *f, uint64_t off, size_t len,
				    void *buf)
{
	struct cache_read r = tc_file_req(f, off, len);

	r.buf = buf;
	r.flags = CACHE_READ_READY;
	return cache_read(f->c, &r);
}

/* Copies what it needs of f first: fn may close f (a RELEASE racing the
 * reply). */
static inline ssize_t tc_file_reply(struct tc_file *f, uint64_t off, size_t len,
				    cache_reply_fn fn, void *arg)
{
	struct cache_read r = tc_file_req(f, off, len);
	struct cache *c = f->c;

	r.reply = fn;
	r.reply_arg = arg;
	return cache_read(c, &r);
}

static inline void tc_file_close(struct tc_file *f)
{
	free(f);
}

#endif
