/*
 * xform: the outputs of a user's transform (transform/transform.h) as
 * derived objects of the cache (cache.h, cache_set_transform()), so that
 * each node runs a transform once per object and every reader, process
 * and restart after that reads the stored output (issue 27).
 *
 * An output is named by the source object's identity (backend, key,
 * etag) and the transform's (its name and transform_identity(): version,
 * argv, the executable's bytes): change any of them and the old output is
 * never found. Its size is not known before a run, so each output is two
 * derived objects of the source:
 *  - "xf-NAME-ID.len": 8 bytes, the output's length (little-endian);
 *  - "xf-NAME-ID": the output, of that length,
 * where ID is the first 16 bytes of the identity in hex. The first
 * (xform_size()) runs the transform: it reads the source whole through
 * the cache, runs it, and stores the output (the second object, whose
 * producer takes it from memory) before the length, all in the length's
 * run: a process that finds the length stored finds the output too. The
 * second's producer runs the transform again only if the output is gone
 * (evicted from the disk later, or never stored: a read-only cache, where
 * the reader takes it from memory). Both are stored, CRC-checked, evicted
 * and verified like any chunk, and survive a cache's close and reopen.
 * Concurrent readers of one object join one run: the threads of a process
 * and the processes sharing the cache directory (mounts, shardfs warm),
 * by the derived objects' single flight and node lock (cache.h,
 * cache_set_transform()).
 *
 * A failed run (the transform's exit, signal, timeout, output_max, no
 * output...) is -EIO for every reader waiting for it, logged once with the
 * key, the failure and the tail of the command's stderr, and counted;
 * then reads of that object fail with -EIO without a run until a backoff
 * (util/backoff.h, growing with each failure of the object) has passed,
 * and the next read runs it again. A run never leaves part of an output:
 * the transform returns its output only whole, and a failed derived run
 * drops what it stored. A second run whose output has another length
 * than the first's (a transform that is not deterministic) fails too.
 *
 * Determinism checked (verify_percent): a lookup (xform_size()) that finds
 * a stored output, i.e. one this thread did not just produce, queues the
 * object for a background re-run if it is in a stable sample of
 * verify_percent % of objects (by a hash of its key and etag: the same
 * objects on every node and run), each object at most once per xform.
 * One verifier thread per transform (so at most one of its `workers`
 * slots) reads the stored output, runs the transform again and compares
 * SHA-256 digests: a mismatch is logged with the key and both digests and
 * counted; the stored output is kept and served. The reader never waits
 * for a verify.
 */
#ifndef SHARDFS_CACHE_XFORM_H
#define SHARDFS_CACHE_XFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "transform/transform.h"
#include "util/backoff.h"

struct xform;

struct xform_options {
	const char *name; /* the transform's name (copied) */
	/* The wait after a failure before the next run; 0s: base 1 s, cap
	 * 5 min (a failing transform is not re-run on every read of its
	 * file, and is tried again within minutes once fixed). */
	struct backoff_policy retry;
	/* Outputs kept in memory between the two derived reads, and their
	 * bytes; 0: 64 outputs, 256 MiB (the newest one is kept even if it
	 * is larger alone). */
	unsigned stash_max;
	uint64_t stash_bytes;
	/* The sample re-run to check determinism, 0-100 (above: 100);
	 * 0: none. */
	unsigned verify_percent;
};

struct xform_stats {
	uint64_t runs;	   /* transform_run() calls */
	uint64_t failures; /* runs that failed */
	uint64_t refused;  /* reads refused in a failure's backoff */
	uint64_t bytes_in, bytes_out;
	uint64_t timeouts; /* failures by the transform's timeout */
	/* The transform's CPU time, ns (transform_cpu_ns(): a worker's
	 * counts when it exits); verify runs included. */
	uint64_t cpu_ns;
	uint64_t verify_queued;	    /* objects queued for a verify */
	uint64_t verify_runs;	    /* re-runs of stored outputs */
	uint64_t verify_mismatches; /* of those, another output */
	/* Ahead of the reader (xform_ahead()): objects queued and not
	 * started yet (a gauge), and runs the ahead threads made (the rest
	 * of `runs` a reader's lookup or read made, or a verify). */
	uint64_t queued;
	uint64_t ahead_runs;
};

/* Attaches transform t (borrowed: it must outlive x) to cache c (which
 * needs a disk cache) under o->name, registering the two producers.
 * Returns 0 and *x, -EINVAL (no name), -ENOMEM. */
int xform_attach(struct cache *c, struct transform *t,
		 const struct xform_options *o, struct xform **x);

/* The size of src's output, running the transform if no stored output
 * has it. src is the source object as the manifest pins it (its own
 * bytes: no transform). Waits at most as long as the cache's derived
 * reads wait (cache_fetch_options.wait_ms) without progress, and the
 * transform's own timeout. Returns 0 and *size, -EIO (the transform
 * failed now or is in its backoff; logged once), or a cache_read()
 * error. Thread-safe. */
int xform_size(struct xform *x, const struct cache_object *src, uint64_t *size);

/* Fills *out with the output of src, of size (from xform_size()), as a
 * derived object for cache_read(); its strings are src's and x's. */
void xform_object(const struct xform *x, const struct cache_object *src,
		  uint64_t size, struct cache_object *out);

void xform_stats_get(struct xform *x, struct xform_stats *s);

/* Runs ahead of the reader: queues src (as for xform_size(); its strings
 * are copied) for x's ahead threads, which run it and store the output,
 * unless it was queued recently, the queue is full or x is stopping.
 * Never waits. A reader's lookup that comes while the run is made joins
 * it. Threads: `workers` - 1 (at least 1); the queue, its bounds and the
 * memory they hold: cache/xform_ahead.c. Thread-safe. */
void xform_ahead(struct xform *x, const struct cache_object *src);

/* How many of a reader's next files to queue ahead: 2 x workers, at most
 * 32 and at most prefetch.files (0: prefetch off, nothing run ahead). */
unsigned xform_ahead_depth(const struct xform *x);

/* The transform's name, as attached (owned by x). */
const char *xform_name(const struct xform *x);

/* The SHA-256 and size of src's output as stored (ready reads only:
 * never runs the transform, never fetches), for comparing nodes. With
 * run, first produces it (xform_size() and a fill of the output) if it is
 * not stored. Returns 0, -ENOENT (not stored, or part of it evicted or
 * not storable), xform_size()'s errors, -ENOMEM, -EIO. Thread-safe. */
int xform_digest(struct xform *x, const struct cache_object *src, bool run,
		 uint8_t digest[SHA256_LEN], uint64_t *size);

/* Ends the ahead threads and the verifier (waiting for the runs in
 * progress, bounded by the transform's timeout and the cache's reads) and
 * drops their queues; no run ahead or verify starts after it. Call before freeing the cache. NULL is a no-op;
 * idempotent. */
void xform_stop(struct xform *x);

/* Frees x; xform_stop() must have been called before the cache was
 * freed, and the cache must be freed first or no read of x's objects may
 * run or start. NULL is a no-op. */
void xform_free(struct xform *x);

#endif
