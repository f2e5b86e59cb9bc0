/*
 * cache: the read path between the filesystem and a backend.
 *
 * Today this is a thin layer: every read goes to the backend, and the layer
 * counts what it fetched. It is the seam where the node-local cache (LMDB
 * index + blob files), the fetch engine and the prefetcher plug in
 * (docs/DESIGN.md §8); fs/ only ever reads through here and never calls a
 * backend itself.
 *
 * Thread safety: cache_read() and cache_stats_get() may be called from any
 * number of threads at once.
 */
#ifndef SHARDFS_CACHE_H
#define SHARDFS_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backends/backend.h"

/* The object a read is for, as pinned by the manifest. Borrowed. */
struct cache_object {
	const char *key; /* NUL-terminated at key[key_len] */
	size_t key_len;
	const char *etag;
	size_t etag_len;
	uint64_t size;
};

struct cache_stats {
	uint64_t backend_reads;	 /* read requests sent to the backend */
	uint64_t backend_bytes;	 /* bytes the backend returned */
	uint64_t backend_errors; /* backend reads that failed */
};

struct cache;

/* Creates the read path over be (borrowed: it must outlive the cache).
 * Returns 0 and sets *out, or -ENOMEM. */
int cache_new(struct backend *be, struct cache **out);

/* Frees c; NULL is a no-op. */
void cache_free(struct cache *c);

/* Reads up to len bytes of obj at offset into buf. Returns the byte count
 * (short only at the object's end) or a negative errno: -ESTALE if the
 * object changed since the manifest, -EIO for a store failure, or what the
 * backend returned. The backend has logged the detail. */
ssize_t cache_read(struct cache *c, const struct cache_object *obj,
		   uint64_t offset, size_t len, void *buf);

/* Copies the counters. */
void cache_stats_get(struct cache *c, struct cache_stats *out);

#endif
