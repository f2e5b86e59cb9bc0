/*
 * fetch: the fetch engine behind the cache (docs/DESIGN.md §8, §12).
 * Internal to cache/: fs/ never includes this header.
 *
 * Every backend request of a cache goes through one engine, which owns:
 *   - the threads that run requests: a reader's own, when a connection is
 *     free, else the engine's workers;
 *   - a fixed connection budget: at most `connections` backend requests
 *     run at once, whoever asked for them;
 *   - single-flight: a chunk (named by its identity hash, identity
 *     compared in full) is fetched at most once at a time; a second
 *     request for it waits for the first and gets its bytes;
 *   - priorities: chunks a reader waits for are fetched before queued
 *     prefetches, and a prefetch a reader starts waiting for is promoted;
 *     prefetch parts run at most 32 MiB at a time, in queue order, so the
 *     next one a reader needs does not share the server with all others;
 *   - retained chunks: a chunk fetched whole stays in memory until read
 *     once (see fetch_join());
 *   - parallel ranged reads: a large chunk is cut into parts of
 *     FETCH_PART_SIZE fetched at once, as far as connections are free;
 *   - the memory budget: every chunk buffer is accounted from when it is
 *     taken (from a pool of reusable buffers or newly mapped) until it is
 *     unmapped; reply buffers of the read path count in the same budget;
 *   - progress under any budget: a reader that cannot have memory for its
 *     chunk promptly reads just its bytes straight into its own buffer
 *     (a direct read, not cached), so no reader waits on memory that
 *     other readers' buffers hold;
 *   - bounded waits: a reader waits for a chunk another thread fetches,
 *     for memory or for a connection at most the engine's wait bound
 *     (fetch_set_wait()), then fails with -EIO (logged with the key).
 *     A backend read the reader runs itself is bounded by the backend.
 *
 * Worker threads (min(connections, FETCH_WORKERS_MAX)) start on the first
 * fetch in a process, so a daemon that forks after opening the cache runs
 * its own. They block SIGINT, SIGTERM and SIGHUP.
 */
#ifndef SHARDFS_CACHE_FETCH_H
#define SHARDFS_CACHE_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FETCH_HASH_LEN 32
#define FETCH_PART_SIZE (UINT64_C(8) << 20)
#define FETCH_PARTS_MAX 4
#define FETCH_WORKERS_MAX 64
/* The default wait bound: twice the backends' default read deadline
 * (30 s) and a margin, so a backend read ends (and is retried) before a
 * reader waiting for it gives up. */
#define FETCH_WAIT_MS_DEFAULT UINT64_C(75000)
#define FETCH_WAIT_MS_MAX UINT64_C(86400000) /* a day */

/* One chunk to fetch. Everything is borrowed for the call; the engine
 * copies what it keeps. */
struct fetch_request {
	const uint8_t *hash; /* FETCH_HASH_LEN bytes: the single-flight key */
	const uint8_t *id;   /* the full identity, compared on every match */
	size_t id_len;
	const char *key; /* NUL-terminated at key[key_len] */
	size_t key_len;
	const char *etag;
	size_t etag_len;
	uint64_t offset; /* of the chunk in the object */
	uint64_t len;	 /* chunk length (as the manifest says) */
};

/* Reads [offset, offset + len) of key into buf (a backend read); returns 0
 * and sets *nread or a negative errno. Anything but *nread == len fails
 * the read with -EIO (the engine logs it). */
typedef int (*fetch_read_fn)(void *ctx, const char *key, size_t key_len,
			     const char *etag, size_t etag_len, uint64_t offset,
			     size_t len, void *buf, size_t *nread);

/* Called once per chunk fetched whole, before the chunk leaves the
 * single-flight table, so a reader never misses both the table and the
 * store (e.g. the cache's store). data is borrowed for the call. */
typedef void (*fetch_done_fn)(void *ctx, const uint8_t *hash, const uint8_t *id,
			      size_t id_len, const uint8_t *data, uint64_t len);

struct fetch_stats {
	uint64_t singleflight_waits; /* requests that joined a fetch */
	uint64_t prefetch_queued;    /* prefetches queued */
	uint64_t prefetch_bytes;     /* bytes of queued prefetches */
	uint64_t prefetch_promoted;  /* prefetches a reader then waited for */
	uint64_t prefetch_refused;   /* prefetches refused for memory */
	uint64_t inflight;	     /* backend requests running now */
	uint64_t memory_in_use;	     /* bytes accounted now */
	uint64_t memory_high_water;  /* most bytes accounted at once */
	uint64_t memory_budget;
	uint64_t direct_reads; /* reads served by a direct read (no memory) */
	struct fetch_pace {
		/* Of the last FETCH_PACE_WINDOW backend reads that
		 * succeeded, each timed from its start to its end: */
		uint64_t latency_min_ns;    /* the least: no queueing */
		uint64_t latency_median_ns; /* the median */
		uint64_t reads_per_s;	    /* completed per second */
		uint64_t bytes_per_s;
	} pace;
};

/* The window of fetch_pace (0 everywhere until two reads finished). */
#define FETCH_PACE_WINDOW 64

struct fetch;

/* Creates an engine that reads with read_fn and hands complete chunks to
 * done_fn (may be NULL), both called with ctx, from worker threads.
 * connections >= 1 (0: 64), memory >= 1 (0: 512 MiB). Returns 0 and sets
 * *out, or -ENOMEM. */
int fetch_new(unsigned connections, uint64_t memory, fetch_read_fn read_fn,
	      fetch_done_fn done_fn, void *ctx, struct fetch **out);

/* Changes the limits; takes effect for the worker count only if no fetch
 * has started yet in this process. */
void fetch_set_limits(struct fetch *f, unsigned connections, uint64_t memory);

/* Sets the wait bound (see the file comment), in ms; 0: the default;
 * at most FETCH_WAIT_MS_MAX. */
void fetch_set_wait(struct fetch *f, uint64_t wait_ms);

/* Stops the workers (queued prefetches are dropped) and frees f. No
 * fetch_get() may be running. NULL is a no-op. */
void fetch_free(struct fetch *f);

/* Fetches chunk r (or joins its fetch in flight) at reader priority and
 * copies [off, off + len) of it into dst (may be NULL when len is 0: a
 * fill, which only makes sure the chunk is fetched and stored).
 * off + len <= r->len. If memory for the chunk cannot be had within
 * about 100 ms (at once when reply buffers alone fill the budget), reads
 * [off, off + len) straight into dst instead, not cached (a fill waits for
 * memory up to the wait bound instead). Returns len (exactly), -EAGAIN
 * (see fetch_epoch()), -EIO when the backend returned fewer bytes than
 * asked or a wait ran out (both logged), or a negative errno of the
 * read. */
ssize_t fetch_get(struct fetch *f, const struct fetch_request *r,
		  uint64_t epoch, uint64_t off, size_t len, void *dst);

/* Like fetch_get(), but only joins a fetch in flight or a chunk fetched
 * and retained in memory (see below); never fetches. Returns -ENOENT if r
 * is neither. Sets *ready (may be NULL) when the bytes were there without
 * waiting.
 *
 * A chunk fetched whole stays in memory, retained, until readers have
 * copied all of its bytes once or its memory is needed (a reader short of
 * memory takes the oldest; a prefetch only one unread for 2 s): a
 * prefetched chunk is served without a look at the disk cache. An idle
 * engine gives back chunks unread for 2 s and, after 2 s without a
 * request, its pooled buffers. */
ssize_t fetch_join(struct fetch *f, const struct fetch_request *r, uint64_t off,
		   size_t len, void *dst, bool *ready);

/* Like fetch_join(), but only copies a chunk fetched whole already (in
 * memory, retained or being stored); never waits. Returns -ENOENT
 * otherwise. */
ssize_t fetch_peek(struct fetch *f, const struct fetch_request *r, uint64_t off,
		   size_t len, void *dst);

/* A counter per group of chunks that moves when a fetch of one leaves the
 * table (after done_fn). A caller that looked r up elsewhere (the disk
 * cache) reads it first and passes it to fetch_get()/fetch_prefetch();
 * if it moved and r is not in flight, they return -EAGAIN
 * instead of fetching: the chunk may have been stored after the caller's
 * lookup, so the caller looks again. FETCH_NO_EPOCH: no such check. */
#define FETCH_NO_EPOCH UINT64_MAX
uint64_t fetch_epoch(struct fetch *f, const uint8_t *hash);

/* Queues chunk r at prefetch priority, to be handed to done_fn. Returns 0
 * if queued, 1 if it is in flight already, -EAGAIN (see fetch_epoch()),
 * -ENOBUFS if prefetch may not
 * take that much memory now (prefetches use at most 3/4 of the budget, so
 * a reader always finds room), -ENOMEM. Never waits. */
int fetch_prefetch(struct fetch *f, const struct fetch_request *r,
		   uint64_t epoch);

/* True if chunk r is being fetched now, queued, or retained. */
bool fetch_in_flight(struct fetch *f, const struct fetch_request *r);

/* A connection for a read outside the chunk machinery (the pass-through
 * cache): waits for a free one, ahead of queued prefetches, at most the
 * wait bound. Returns 0 (release it with fetch_slot_release()) or -EIO
 * (the caller, which knows the key, logs it). */
int fetch_slot_acquire(struct fetch *f);
void fetch_slot_release(struct fetch *f);

/* A buffer of len bytes accounted in the budget (never waits: the read
 * path's reply buffers are bounded by its thread count, and a reader
 * holding one never waits for memory another holds: see fetch_get()).
 * Returns NULL if out of memory. Free with fetch_buffer_free(f, p,
 * len). */
void *fetch_buffer_alloc(struct fetch *f, size_t len);
void fetch_buffer_free(struct fetch *f, void *p, size_t len);

void fetch_stats_get(struct fetch *f, struct fetch_stats *out);

/* The pace part of fetch_stats_get(), and in *stalls (may be NULL) the
 * count of reads of a file's first chunk (offset 0: what the prefetcher
 * asks for ahead of an order) that waited for the backend: joined it in
 * flight, or fetched it themselves (a prefetch that came too late or
 * never came). A wait for a later chunk of a large file is the read-ahead
 * window's, not a sign of too few files ahead. The prefetcher's
 * measurements. */
void fetch_pace_get(struct fetch *f, struct fetch_pace *out, uint64_t *stalls);

#endif
