/*
 * fetch: the fetch engine behind the cache (docs/DESIGN.md §8, docs/DECISIONS.md).
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
 *     prefetch parts run in queue order, as many bytes at a time as the
 *     measured throughput x latency needs (fetch_inflight_max()), so the
 *     next one a reader needs does not share the server with all others;
 *   - retained chunks: a chunk fetched whole stays in memory until read
 *     once (see fetch_obtain());
 *   - parallel ranged reads: a large chunk is cut into parts of
 *     FETCH_PART_SIZE fetched at once, as far as connections are free;
 *   - runs: consecutive small chunks of one object fetched by one backend
 *     read, each still a flight of its own that readers join
 *     (fetch_run());
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
 *     A backend read the reader runs itself is bounded by the backend,
 *     and a range that failed just now fails again at once
 *     (fetch_fail.h), so one read() waits out one deadline, not two;
 *   - hedged reads (fetch_set_hedge(), on by default): a read much slower
 *     than the recent ones is issued again on another connection, and
 *     the first valid answer is served (below).
 *
 * Hedged reads. Per size class of read (up to 128 KiB, 1 MiB, 8 MiB,
 * larger: a small read's time is its first byte, a large one's its
 * transfer) the engine keeps the latencies of the last 128 backend reads
 * that succeeded. Once a class has 32, a read of it running longer than
 * max(2 x their 95th percentile, 10 ms) is overdue. At twice the p95
 * fewer than 1 in 20 reads are re-issued even in a steady state ("The
 * Tail at Scale" hedges at the p95); the floor keeps a fast store's
 * jitter from doubling its requests. Slow reads are recorded too: a store
 * that slows down as a whole raises the threshold instead of being hedged
 * on every read, but only once the window has seen enough of them.
 *
 * Hedges are paid for: every byte a read that is not a hedge brings earns
 * 1/32 byte of credit (kept up to 16 MiB), and a hedge spends its length,
 * so hedges never re-read more than 1/32 of the bytes read otherwise,
 * however the latencies move. A machine under load slows every read at
 * once: against the latencies learnt before, all of them are overdue,
 * and re-issuing them only adds load (a loaded test machine saw 5% more
 * bytes fetched, all of them hedges).
 *
 * Who notices: a reader waiting for the chunk, whose timed wait also ends
 * when the read is due (every wait stays bounded by the wait bound); a
 * prefetch no reader waits for is not hedged. A reader running the read
 * in its own thread could not take another answer (backend reads cannot
 * be cancelled), so a reader whose size class hedges and takes a median
 * of 1 ms or more leaves its read to an idle worker and waits (two
 * context switches, noise at that latency; below it the store is local
 * and a second read meets the same disk); if no worker took it within
 * 5 ms it runs it itself. The waiter has an idle worker run the hedge, so
 * it still takes whichever answer comes first.
 *
 * Limits: a hedge needs a connection free now (one of `connections`,
 * never more), memory under 3/4 of the budget, like a prefetch (it never
 * waits for memory and never reclaims, so it cannot starve or deadlock a
 * reader), and the credit for its bytes; failing any, the waiter tries
 * again 10 ms later.
 * At most one hedge per chunk; only chunks fetched in one part (parts
 * share one buffer, and run in parallel already), only reads pinned to a
 * version (etag or generation: both reads return the same bytes or
 * -ESTALE); direct reads are never hedged.
 *
 * Answers: each read has its own buffer and passes the backend's reply
 * checks on its own. The first valid answer (every byte) wins: its
 * buffer becomes the chunk's, stored and served; the other's bytes are
 * never looked at, and its buffer (counted in the budget meanwhile) is
 * given back when its read returns. An error waits for the other read
 * while it runs: the chunk fails only if both do (with the later error),
 * and a loser's error after a winner is no error of the read.
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

#include "backends/backend.h"

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
	/* The whole object's size (the manifest's), handed to done_fn for
	 * its whole-object check; 0: unknown. */
	uint64_t object_size;
};

/* What the backend replies that brought a chunk vouched for about its
 * whole object (backend.h, read_claim()), for done_fn. */
struct fetch_vouch {
	uint64_t object_size; /* fetch_request.object_size */
	/* What every reply of the chunk claimed (its parts, a hedge that
	 * answered too); kind BACKEND_CLAIM_NONE if nothing, and checked
	 * only if every reply was checked whole. */
	struct backend_claim claim;
	bool conflict; /* two replies claimed different things */
};

/* Called once per chunk fetched whole, before the chunk leaves the
 * single-flight table, so a reader never misses both the table and the
 * store (e.g. the cache's store). data and *v are borrowed for the call,
 * unless done_fn keeps the pin *keep on data (keep->len is 0: releasing it
 * counts no bytes as read): it copies *keep, sets keep->fl to NULL, and
 * releases its copy with fetch_unpin() when done with data, before
 * fetch_free(). */
struct fetch_pin;
typedef void (*fetch_done_fn)(void *ctx, const uint8_t *hash, const uint8_t *id,
			      size_t id_len, const uint8_t *data, uint64_t len,
			      const struct fetch_vouch *v,
			      struct fetch_pin *keep);

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
	uint64_t direct_reads;	 /* reads served by a direct read (no memory) */
	uint64_t backend_reads;	 /* read requests sent to the backend */
	uint64_t backend_bytes;	 /* bytes the backend returned */
	uint64_t backend_errors; /* backend reads that failed */
	uint64_t hedges;	 /* hedged reads issued */
	uint64_t hedge_wins;	 /* hedged reads whose answer was served */
	/* Reads of a file's first chunk that found it not fetched yet
	 * (they waited for a fetch in flight or fetched it), and the time
	 * they waited, summed: what prefetching did not hide. */
	uint64_t first_waits;
	uint64_t first_wait_ns;
	uint64_t prefetch_inflight_max; /* fetch_inflight_max() */
	struct fetch_pace {
		/* Of the last FETCH_PACE_WINDOW backend reads that
		 * succeeded, each timed from its start to its end: */
		uint64_t latency_min_ns;    /* the least: no queueing */
		uint64_t latency_median_ns; /* the median */
		uint64_t latency_p90_ns;    /* the 90th percentile */
		uint64_t reads_per_s;	    /* completed per second */
		uint64_t bytes_per_s;
	} pace;
};

/* The window of fetch_pace (0 everywhere until two reads finished). */
#define FETCH_PACE_WINDOW 64

struct fetch;
struct backend;

/* Creates an engine that reads from be (borrowed: it must outlive the
 * engine; NULL: every read fails with -ENXIO) and hands complete chunks to
 * done_fn (may be NULL), called with ctx, from worker threads.
 * connections >= 1 (0: 64), memory >= 1 (0: 512 MiB). Returns 0 and sets
 * *out, or -ENOMEM. */
int fetch_new(struct backend *be, unsigned connections, uint64_t memory,
	      fetch_done_fn done_fn, void *ctx, struct fetch **out);

/* Changes the limits; takes effect for the worker count only if no fetch
 * has started yet in this process. */
void fetch_set_limits(struct fetch *f, unsigned connections, uint64_t memory);

/* Sets the wait bound (see the file comment), in ms; 0: the default;
 * at most FETCH_WAIT_MS_MAX. */
void fetch_set_wait(struct fetch *f, uint64_t wait_ms);

/* Turns hedged reads on (the default) or off; see the file comment. */
void fetch_set_hedge(struct fetch *f, bool on);

/* Stops the workers (queued prefetches are dropped) and frees f. No
 * fetch_obtain() may be running. NULL is a no-op. */
void fetch_free(struct fetch *f);

/* A reader's hold on the bytes of a chunk in memory (fetch_obtain()).
 * While pinned, the chunk's buffer stays mapped and counted in the memory
 * budget; reclaiming may take the chunk out of the table meanwhile, and
 * its memory then goes when the pin does. */
struct flight;
struct fetch_pin {
	struct flight *fl; /* NULL: nothing pinned */
	const uint8_t *data;
	size_t len;
	void *own; /* or a buffer of own_len bytes fetch_obtain() took */
	size_t own_len;
};

/* Where a reader's chunk may be besides the engine: the caller's other
 * place (the disk cache). Returns 0 if it answered there (copied into dst,
 * handed over some other way, or for a fill: present), -ENOENT if not.
 * Called with no lock of the engine's held. */
typedef int (*fetch_look_fn)(void *arg, void *dst);

/* How fetch_obtain() gets a chunk, after it looked in the engine (in
 * flight, or fetched whole and retained: joined, pinned or copied):
 *   FETCH_READ    else look, else fetch the chunk at reader priority
 *                 (stored through done_fn, copied out);
 *   FETCH_DIRECT  else read just the bytes asked for straight into dst
 *                 (no look, nothing stored or retained): a read without
 *                 a disk cache that no read-ahead brought into memory;
 *   FETCH_READY   the engine only if fetched whole, else look; never
 *                 fetches and never waits (-ENOENT);
 *   FETCH_FILL    else look (present?), else fetch the chunk; no bytes
 *                 are copied (len 0, dst NULL).
 * Between the look and the fetch the engine compares the epoch of the
 * chunk's group (below): if a fetch of it left the engine meanwhile (it
 * may have been stored after the look missed), it looks again, at most
 * FETCH_RELOOKS times, then fetches anyway (a busy table costs at worst a
 * duplicate GET). */
enum fetch_how { FETCH_READ, FETCH_DIRECT, FETCH_READY, FETCH_FILL };

/* Which place answered a fetch_obtain(). */
enum fetch_from {
	FETCH_FROM_MEMORY,  /* the engine, fetched whole already */
	FETCH_FROM_JOINED,  /* the engine, after waiting for a fetch */
	FETCH_FROM_LOOK,    /* the caller's look */
	FETCH_FROM_BACKEND, /* fetched (or read directly) now */
};

#define FETCH_RELOOKS 3

/* [off, off + len) of chunk r (off + len <= r->len) the way how says:
 * copied into dst; or, with pin (and dst NULL), in place: pinned in the
 * engine, or else in a buffer counted in the budget that fetch_obtain()
 * takes only then (pin->own), which the look and the fetch fill.
 * pin->data points at the bytes (pin->len of them) unless the look
 * answered some other way; release with fetch_unpin() as soon as they are
 * sent, without waiting for anything in between (only then do they count
 * as read: a retained chunk read whole leaves memory). If a fetch cannot have memory for the
 * chunk within about 100 ms (at once when reply buffers alone fill the
 * budget), it reads [off, off + len) straight into dst instead, not
 * cached (a fill waits for memory up to the wait bound instead). Sets
 * *from (may be NULL). Returns len (0 for a fill), -ENOENT (FETCH_READY:
 * not at hand), -EIO when the backend returned fewer bytes than asked or
 * a wait ran out (both logged), or a negative errno of the read. */
ssize_t fetch_obtain(struct fetch *f, const struct fetch_request *r,
		     enum fetch_how how, uint64_t off, size_t len, void *dst,
		     struct fetch_pin *pin, fetch_look_fn look, void *look_arg,
		     enum fetch_from *from);
void fetch_unpin(struct fetch *f, struct fetch_pin *pin);

/* Queues chunk r at prefetch priority, to be handed to done_fn, unless it
 * is in the engine already or look (may be NULL) finds it present (the
 * same re-check as fetch_obtain()). Returns 0 if queued, 1 if there
 * already, -ENOBUFS if prefetch may not take that much memory now
 * (prefetches use at most 3/4 of the budget, so a reader always finds
 * room), -ENOMEM. Never waits. */
int fetch_ahead(struct fetch *f, const struct fetch_request *r,
		fetch_look_fn look, void *look_arg);

/* True if chunk r is being fetched now, queued, or retained. */
bool fetch_in_flight(struct fetch *f, const struct fetch_request *r);

/* Runs: several consecutive chunks of one object in ONE backend read
 * (a record and its neighbours' blocks, cut small: cache.h, struct
 * cache_object), each still a flight of its own. rs[0..n-1] (n <=
 * FETCH_RUN_MAX) are chunks of one object (same key and etag), back to
 * back (rs[i].offset + rs[i].len == rs[i + 1].offset). Each run of
 * consecutive ones that are neither in the engine nor found present by
 * look(look_args[i], NULL) (look may be NULL; the same re-check as
 * fetch_obtain()), cut at FETCH_PART_SIZE bytes, is queued as one
 * backend read of its range; every chunk of it is in the single-flight
 * table from now until it leaves as any chunk does, so a reader of any of
 * them joins that read (fetch_obtain(), which runs it in the reader's
 * thread when it is still queued and a connection is free), and each is
 * handed to done_fn on its own. A run of one chunk is an ordinary chunk.
 * With reader, at reader priority within the whole budget (the caller
 * reads them next); else at prefetch priority within the prefetches'
 * share (3/4, as fetch_ahead()). A run is never hedged; a read that
 * fails or returns short fails every chunk of it (logged once with the
 * key), and the failed range is remembered (fetch_fail.h). Its buffer is
 * counted in the budget from when it is queued until it returns, beside
 * its chunks' (the bytes are copied to them). A queued prefetch run no
 * reader waits for may be cancelled whole to give a reader memory.
 * Sets *queued to the chunks queued and *bytes to their bytes. Returns
 * 0 (queued, or nothing to do), -ENOBUFS (not enough memory now for the next run: the runs
 * before it stay queued; or no worker to run a prefetch), -EINVAL (n
 * too large) or -ENOMEM. Never waits. */
#define FETCH_RUN_MAX 128 /* FETCH_PART_SIZE in 64 KiB chunks */
int fetch_run(struct fetch *f, const struct fetch_request *rs, unsigned n,
	      bool reader, fetch_look_fn look, void *const *look_args,
	      unsigned *queued, uint64_t *bytes);

/* Drops the chunk of identity (hash, id) from memory if it was fetched
 * and is retained (see fetch_obtain()), or, while done_fn has it, makes it
 * leave the table instead of being retained when done_fn returns, so no
 * new reader is served its bytes: the cache found its object's bytes
 * bad. A chunk still being fetched is left alone (its bytes come from a
 * new reply); readers that joined or pinned it keep what they have. */
void fetch_forget(struct fetch *f, const uint8_t *hash, const uint8_t *id,
		  size_t id_len);

/* One backend read of [offset, offset + len) of key (pinned to etag; NULL:
 * unchecked) straight into buf, outside the chunk machinery (nothing
 * stored, joined or retained): a raw read, a read without a disk cache
 * that no chunk in memory serves, or several small chunks at once. It
 * takes a connection, ahead of queued prefetches, waiting at most the wait
 * bound; a range that failed just now fails at once (fetch_fail.h). With
 * claim (may be NULL), also what the reply vouched for about the whole
 * object (backend.h, read_claim()). Returns len (exactly), or a negative
 * errno: -EIO when no connection came free in time or the backend
 * returned fewer bytes (both logged with the key), -ENXIO without a
 * backend, or the backend's error. */
ssize_t fetch_direct(struct fetch *f, const char *key, size_t key_len,
		     const char *etag, size_t etag_len, uint64_t offset,
		     size_t len, void *buf, struct backend_claim *claim);

/* A buffer of len bytes accounted in the budget (never waits: the read
 * path's reply buffers are bounded by its thread count, and a reader
 * holding one never waits for memory another holds: see fetch_obtain()).
 * Returns NULL if out of memory. Free with fetch_buffer_free(f, p,
 * len). */
void *fetch_buffer_alloc(struct fetch *f, size_t len);
void fetch_buffer_free(struct fetch *f, void *p, size_t len);

void fetch_stats_get(struct fetch *f, struct fetch_stats *out);

/* Waits until every chunk fetched whole so far has been through done_fn
 * (a large one a reader fetched is stored later by a worker), at most
 * wait_ns. For a caller that then asks what the disk cache holds
 * (cache_stats_get(): after it, another process finds what this one
 * fetched). */
void fetch_drain_stores(struct fetch *f, uint64_t wait_ns);

/* The pace part of fetch_stats_get(), and in *stalls (may be NULL) the
 * count of reads of a file's first chunk (offset 0: what the prefetcher
 * asks for ahead of an order) that waited for the backend: joined it in
 * flight, or fetched it themselves (a prefetch that came too late or
 * never came). A wait for a later chunk of a large file is the read-ahead
 * window's, not a sign of too few files ahead. The prefetcher's
 * measurements. */
void fetch_pace_get(struct fetch *f, struct fetch_pace *out, uint64_t *stalls);

/* How many bytes of prefetch parts may run at once now: set from the pace
 * and the budget as reads finish (cache/prefetch.h, prefetch_inflight()),
 * PREFETCH_INFLIGHT_MIN before anything is measured. Never waits. */
uint64_t fetch_inflight_max(struct fetch *f);

#endif
