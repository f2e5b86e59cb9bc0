/*
 * cache: see cache.h. Counters are relaxed atomics: they are statistics,
 * read without ordering against anything else.
 */
#include "cache/cache.h"

#include <errno.h>
#include <stdlib.h>

struct cache {
	struct backend *be;
	uint64_t backend_reads;	 /* atomic */
	uint64_t backend_bytes;	 /* atomic */
	uint64_t backend_errors; /* atomic */
};

int cache_new(struct backend *be, struct cache **out)
{
	struct cache *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return -ENOMEM;
	c->be = be;
	*out = c;
	return 0;
}

void cache_free(struct cache *c)
{
	free(c);
}

ssize_t cache_read(struct cache *c, const struct cache_object *obj,
		   uint64_t offset, size_t len, void *buf)
{
	size_t nread = 0;
	int rc;

	if (offset >= obj->size)
		return 0;
	if (len > obj->size - offset)
		len = (size_t)(obj->size - offset);
	__atomic_add_fetch(&c->backend_reads, 1, __ATOMIC_RELAXED);
	rc = c->be->ops->read(c->be, obj->key, obj->key_len, obj->etag,
			      obj->etag_len, offset, len, buf, &nread);
	if (rc < 0) {
		__atomic_add_fetch(&c->backend_errors, 1, __ATOMIC_RELAXED);
		return rc;
	}
	__atomic_add_fetch(&c->backend_bytes, nread, __ATOMIC_RELAXED);
	return (ssize_t)nread;
}

void cache_stats_get(struct cache *c, struct cache_stats *out)
{
	out->backend_reads =
		__atomic_load_n(&c->backend_reads, __ATOMIC_RELAXED);
	out->backend_bytes =
		__atomic_load_n(&c->backend_bytes, __ATOMIC_RELAXED);
	out->backend_errors =
		__atomic_load_n(&c->backend_errors, __ATOMIC_RELAXED);
}
