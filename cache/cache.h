/*
 * cache: the read path between the filesystem and a backend, and the
 * node-local disk cache behind it (docs/DESIGN.md §8).
 *
 * fs/ and the CLI only ever read object bytes through here. A cache made by
 * cache_new() is a pass-through: every read goes to the backend, and keeps
 * nothing on disk. There, an object of up to CACHE_UNCACHED_WHOLE_MAX
 * bytes is fetched whole whatever range is read (so the backend checks
 * the reply against the store's checksum of the whole object, where the
 * store gives one: docs/RELIABILITY.md), and every read of it is served
 * from that one copy while the engine holds it (single-flight, retained
 * until its bytes were read once: fetch.h), so a file the kernel reads
 * again in 4 KiB pieces after a failed read costs one request, not one per
 * piece. A larger object is read as asked (ranges, unchecked as a whole;
 * a sequential reader's next chunks are read ahead into memory,
 * struct cache_read). Short of memory for the whole object (the engine's
 * budget filled by reply buffers, fetch_obtain()), a read takes just its
 * bytes straight from the backend: unchecked, counted in direct_reads.
 * A cache made by cache_open() on a directory keeps what it fetched on
 * disk:
 *
 *   DIR/index.mdb        LMDB data file (MDB_NOSUBDIR) with three tables:
 *                        idx (a row per chunk: header, CRCs, identity),
 *                        data (inline chunks' bytes) and meta (live bytes,
 *                        the last budget and chunk size); shared by every
 *                        process on the node that uses DIR
 *   DIR/index.mdb-lock   LMDB's lock file (reader slots, writer lock)
 *   DIR/index.mdb.corrupt-TIME  the last index found damaged, moved aside
 *                        (TIME: seconds since the epoch)
 *   DIR/blobs/XX/HASH.ID one immutable file per large chunk (HASH: 64 hex
 *                        digits of SHA-256 of the chunk's identity, XX its
 *                        first two; ID: 16 hex digits, the blob id in its
 *                        row)
 *   DIR/blobs/tmp/       blobs being written (HASH.PID.SEQ: the writer's
 *                        PID and a per-process sequence number)
 *   DIR/owners.lock      every process holds a shared flock while open
 *   DIR/derived.lock     empty; a byte-range lock per derived object
 *                        being run (one run per node: cache/derived_node.c)
 *
 * Directories are 0700 and files 0600, whatever the umask: the cache holds
 * dataset bytes the mount may deny to other users. One cache directory
 * per service user (docs/RELIABILITY.md).
 *
 * Objects are cut into chunks of chunk_size bytes (or the object's own
 * chunk size); chunk n of an object is identified by (backend id, key,
 * etag, transform if any, chunk size, n), so a changed object
 * (new etag) can never be served from an old entry. A chunk of at most
 * inline_max bytes is stored inline in LMDB, a larger one as a blob file
 * written under a temporary name and renamed into place before it is
 * indexed. Each entry carries a CRC32 per 64 KiB block; every read checks
 * the blocks it serves, and a mismatch drops the entry and refetches, so a
 * reader never gets a wrong byte. When live bytes would exceed the budget,
 * the least recently used entries are evicted down to 90% of it. Access
 * times are kept in memory and written in batches, and so are new rows: a
 * committer thread per process indexes stored chunks in one transaction per
 * batch (a queued chunk is served from the queue meanwhile).
 *
 * What the store vouches for (docs/RELIABILITY.md): a chunk that came in
 * ranged replies was checked by the backend for its range and length, not
 * against the store's checksum of the whole object, which covers only a
 * reply of all of it. So where the replies carried such a checksum
 * (backend.h, read_claim(): S3's single-part MD5 ETag, GCS's crc32c), the
 * cache checks the object once this node holds every chunk of it, in a
 * checker thread at low priority: a CRC-32C combined from the chunks' as
 * they were stored (chunks stored before are read back), an MD5 over the
 * chunks read back in order. On a mismatch every chunk of the object, at
 * every chunk size, is dropped (index, queue, the engine's memory), and
 * it is logged with the key and both checksums and counted
 * (whole_mismatches); a match is counted in whole_checked. Bytes served
 * before the check ended, and objects never held whole, are not covered.
 *
 * The cache never turns a read into an error of its own: when the disk
 * cache cannot store (full filesystem, quota, any I/O error) it logs a
 * rate-limited warning and serves the fetched bytes uncached; when it
 * cannot read its index it reads from the backend.
 *
 * Every backend request goes through the cache's fetch engine: at most
 * prefetch.connections at once, one fetch per chunk however many readers
 * want it (single-flight), readers' chunks before prefetched ones, large
 * chunks fetched as parallel ranged reads, and every buffer counted in one
 * memory budget (prefetch.memory). The prefetcher reads ahead within a
 * file (a window per reader of an object, struct cache_read) and across
 * the files of an order (cache_order_open()); it needs a
 * disk cache, where the prefetched bytes go.
 *
 * Thread safety: cache_read(), the cache_order_*(), cache_prefetch_range()
 * and cache_buffer_*() calls and cache_stats_get() may be
 * called from any number of threads at once; any number of processes may open the same
 * directory at once.
 */
#ifndef SHARDFS_CACHE_H
#define SHARDFS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backends/backend.h"

#define CACHE_CHUNK_SIZE_DEFAULT (UINT64_C(8) << 20)
#define CACHE_INLINE_MAX_DEFAULT (UINT64_C(256) << 10)
#define CACHE_CRC_BLOCK (UINT64_C(64) << 10) /* bytes per stored CRC32 */
/* Without a disk cache, objects up to this size are read whole (above):
 * the largest reply the S3 backend checks against its MD5 ETag, the
 * engine's largest single backend read (FETCH_PART_SIZE) and a
 * pass-through cache's chunk size. Every small file of an image or audio
 * dataset is below it; the copy counts in the engine's memory budget
 * (prefetch.memory) until its bytes were read once. */
#define CACHE_UNCACHED_WHOLE_MAX (UINT64_C(8) << 20)

/* The object a read is for, as pinned by the manifest. Borrowed. Fields
 * a caller does not use must be 0 (initialise the whole struct). */
struct cache_object {
	const char *key; /* NUL-terminated at key[key_len] */
	size_t key_len;
	const char *etag;
	size_t etag_len;
	uint64_t size; /* of the bytes read: a derived object's derived size */
	/* Its chunk size; 0: the cache's. Else a multiple of CACHE_CRC_BLOCK
	 * and at most the cache's chunk size (a read of any other fails
	 * with -EINVAL). A reader of scattered small extents of a large
	 * object (a record view) sets e.g. CACHE_CRC_BLOCK, so that a miss
	 * fetches the blocks around the extent instead of a whole chunk; a
	 * cache_read() over several such chunks that are all missing
	 * fetches them in one backend read (up to 8 MiB). The chunk size is
	 * part of a chunk's identity: chunks of one object cut at different
	 * sizes are separate entries and never mix. */
	uint64_t chunk_size;
	/* NULL: the object's own bytes. Else the name of a transform
	 * registered with cache_set_transform() (e.g. "gunzip"): the object
	 * is the transform's output over the object's own bytes, a derived
	 * object named by (backend, key, etag, transform), cached like any
	 * other (see cache_set_transform()). */
	const char *transform;
	/* With a transform: the size of the object's own bytes (the
	 * manifest's size), which the producer reads; unused otherwise. */
	uint64_t source_size;
};

struct cache_stats {
	uint64_t backend_reads;	 /* read requests sent to the backend */
	uint64_t backend_bytes;	 /* bytes the backend returned */
	uint64_t backend_errors; /* backend reads that failed */
	/* The disk cache; all 0 for a pass-through cache. */
	bool enabled;		   /* a disk cache is open */
	uint64_t hits;		   /* chunk lookups served from the cache */
	uint64_t misses;	   /* chunk lookups that went to the backend */
	uint64_t bytes_from_cache; /* bytes served from cached entries */
	uint64_t evictions;	   /* entries this process evicted */
	uint64_t crc_failures;	   /* entries dropped for a CRC mismatch */
	uint64_t store_failures;   /* chunks that could not be stored */
	uint64_t live_bytes;	   /* bytes indexed now, by all processes */
	uint64_t budget_bytes;	   /* this process' budget */
	/* The fetch engine and the prefetcher (both kinds of cache). */
	uint64_t singleflight_waits; /* reads that joined a fetch in flight */
	uint64_t prefetch_issued;    /* chunks queued ahead of readers */
	uint64_t prefetch_hits;	     /* opens of files queued ahead */
	uint64_t prefetch_misses;    /* opens off the order while ahead */
	uint64_t prefetch_bytes;     /* bytes of chunks queued ahead */
	uint64_t prefetch_refused;   /* prefetches refused for memory */
	uint64_t prefetch_depth;     /* files ahead, last order opened */
	uint64_t prefetch_gap_ns;    /* its reader's time between opens */
	uint64_t first_waits;	     /* reads that found a file's first
				      * chunk not fetched yet */
	uint64_t first_wait_ns;	     /* the time those reads waited */
	/* Backend reads (the last FETCH_PACE_WINDOW that succeeded): */
	uint64_t backend_latency_min_ns;    /* least start-to-end time */
	uint64_t backend_latency_median_ns; /* median */
	uint64_t backend_reads_per_s;	    /* completed per second */
	uint64_t backend_bytes_per_s;
	uint64_t readahead_window_bytes; /* window of the last read */
	/* Bytes of prefetch parts that may run at once now: throughput x
	 * latency, measured (cache/prefetch.h, prefetch_inflight()). */
	uint64_t prefetch_inflight_max_bytes;
	uint64_t memory_in_use_bytes; /* buffers accounted now */
	uint64_t memory_high_water_bytes;
	uint64_t memory_budget_bytes; /* prefetch.memory */
	uint64_t backend_inflight;    /* backend requests running now */
	uint64_t direct_reads;	      /* reads sent straight to the backend, not
				* cached: no memory for their chunk */
	uint64_t hedges_issued; /* slow reads re-issued (prefetch.hedge) */
	uint64_t hedges_won;	/* of those, the ones whose answer was used */
	/* Derived objects (cache_set_transform()); 0 without a disk cache. */
	uint64_t derived_runs;	/* producer runs, failed ones too */
	uint64_t derived_bytes; /* bytes those runs produced */
	/* Whole-object checks (below); 0 without a disk cache. */
	uint64_t whole_checked;	   /* objects that matched the store's
				    * checksum of the whole object */
	uint64_t whole_mismatches; /* objects that did not: dropped */
	/* The pusher (cache_set_push()). */
	uint64_t pushed_files; /* files put into the kernel's page cache */
	uint64_t pushed_bytes;
	uint64_t push_failures;	 /* pushes fn refused */
	uint64_t push_sentinels; /* files left to the reader on purpose */
};

/* How to open a disk cache. Strings are borrowed for the call. */
struct cache_options {
	const char *dir;	/* created if missing (with its parents) */
	const char *backend_id; /* names the store, e.g. the source URL */
	uint64_t size_bytes;	/* budget; 0: use size_percent */
	unsigned size_percent;	/* 1..100 of DIR's filesystem; 0 with
				 * size_bytes 0: no budget (inspection) */
	uint64_t chunk_size;	/* 0: CACHE_CHUNK_SIZE_DEFAULT */
	uint64_t inline_max;	/* chunks up to this size live in LMDB;
				 * capped at chunk_size */
	bool inline_max_set;	/* false: CACHE_INLINE_MAX_DEFAULT */
	bool fsync;		/* fsync blobs before the rename */
	bool inspect;		/* no cleanup at open (stat, verify) */
	bool repair;		/* with inspect: a damaged index is still
				 * moved aside for a fresh one (clear) */
};

struct cache;

/* Creates a pass-through read path over be (borrowed: it must outlive the
 * cache). Returns 0 and sets *out, or -ENOMEM. */
int cache_new(struct backend *be, struct cache **out);

/* Opens (creating if needed) the disk cache in opts->dir, reading misses
 * from be (borrowed; may be NULL for cache stat/verify/clear, and then
 * reads fail with -ENXIO). Unless opts->inspect, removes blobs without
 * index rows and rows without blobs first (see cache_impl.h for how this
 * stays safe while other processes use the directory).
 *
 * The index is checked against its own structure first; a damaged one is
 * moved aside and a fresh one started (with opts->inspect and not
 * opts->repair: -EIO instead). A directory we cannot write (a read-only
 * mount) is opened read-only: hits are served, nothing is stored. A
 * directory we own that other users can read is made 0700/0600.
 *
 * Returns 0 and sets *out, or a negative errno (logged): -ETIMEDOUT when
 * owners.lock stays locked by another process for 10 s, -ENOSPC and
 * other errors of the directory, -EIO for an index that cannot be opened
 * (or is damaged, see above), -ENOMEM. */
int cache_open(const struct cache_options *opts, struct backend *be,
	       struct cache **out);

/* The fetch engine's and the prefetcher's limits ([prefetch]). */
struct cache_fetch_options {
	unsigned connections; /* backend requests at once; 0: 64 */
	uint64_t memory;      /* bytes of buffers; 0: 512 MiB */
	unsigned files;	      /* the most files prefetched ahead in an order
			       * (the depth itself is measured); 0: none */
	/* The longest a read waits inside the engine for a chunk another
	 * thread fetches, for memory or for a connection before it fails
	 * with -EIO (a backend read it runs itself ends by the backend's own
	 * deadline). Meant to be twice the backend's read timeout and a
	 * margin; 0: FETCH_WAIT_MS_DEFAULT (75 s). */
	uint64_t wait_ms;
	/* true: no hedged reads (prefetch.hedge = false); see
	 * cache/fetch.h. */
	bool hedge_off;
};

/* Sets the limits. Call before the first read: the number of fetch
 * threads (min(connections, 64)) is fixed when the first fetch of the
 * process starts them. Without this call: 64, 512 MiB, 32. Fetch threads
 * start lazily, so a process may fork after cache_open() and before its
 * first read (as `shardfs mount` does), but not while reads run. */
void cache_set_fetch_options(struct cache *c,
			     const struct cache_fetch_options *o);

/* Indexes queued chunks, writes pending access times and frees c; NULL is
 * a no-op. */
void cache_free(struct cache *c);

/* Whether c stores chunks: a disk cache whose directory is writable
 * (not cache_new(), not a read-only directory). */
bool cache_stores(const struct cache *c);

/* One part of a read's bytes, handed to a cache_reply_fn: len bytes at
 * mem, or (mem NULL) len bytes of the open file fd at pos. */
struct cache_piece {
	const void *mem;
	int fd;
	uint64_t pos;
	size_t len;
};

/* Sends the pieces, in order, to the reader; returns 0 or a negative
 * errno (handed back by cache_read()). The pieces are valid only during
 * the call, which should not wait for anything (memory and pins are held
 * until it returns). Nothing reads the request's object after it returns:
 * a reply may let the reader go on before fn returns. */
typedef int (*cache_reply_fn)(void *arg, const struct cache_piece *pieces,
			      unsigned n);

/* cache_read() flags. */
#define CACHE_READ_RAW                                                         \
	1u /* obj's own bytes (obj->transform NULL) in one
			     * backend read at reader priority, never looked
			     * up in or stored to the disk cache: a
			     * producer reads its source once, and only the
			     * derived bytes are kept */
#define CACHE_READ_READY                                                       \
	2u /* only bytes at hand, within one chunk: in
			     * memory and fetched whole (a prefetched chunk
			     * not yet read; they count as read), or stored
			     * (checked as any read checks them); never
			     * fetches, never waits: -ENOENT otherwise */

#define CACHE_NO_ORDER UINT64_MAX

/* A read of [offset, offset + len) of obj. Fields a caller does not use
 * must be 0 (initialise the whole struct). Where the bytes go, one of:
 *   buf     copied into buf (len bytes of room);
 *   reply   handed to reply(reply_arg, ...) once, in place: a chunk in
 *           memory pinned until reply returns, a blob whose CRC blocks
 *           this process checked and that has not changed since (see
 *           docs/DESIGN.md, "Replies without copies") as its descriptor,
 *           anything else read and checked into a buffer counted in the
 *           memory budget; at or past the end, reply gets no pieces;
 *   neither a fill: every chunk of the range is made present in the disk
 *           cache, fetching only the missing ones (present ones are not
 *           read or checked), and the read returns the bytes it fetched
 *           from the backend (derived objects: the derived bytes made);
 *           nothing on a pass-through cache. */
struct cache_read {
	const struct cache_object *obj;
	uint64_t offset;
	size_t len;
	void *buf;
	cache_reply_fn reply;
	void *reply_arg;
	unsigned flags; /* CACHE_READ_* */
	/* Who reads (e.g. the requesting process' id; 0: nobody in
	 * particular). Sequential reads of one object by one reader grow a
	 * read-ahead window (with a disk cache, into the disk cache; without,
	 * whole chunks into memory, retained until read once): from 1 MiB
	 * doubling to min(64 MiB, memory / 4), or as far as the bytes the
	 * engine keeps in flight need (at most memory / 4), restarted by a
	 * seek. */
	uint64_t reader;
	/* The object's place in an order (CACHE_NO_ORDER: none), so a
	 * reader's window may reach past the object's end into the next one
	 * of the order (see cache_set_order()). */
	uint64_t order, pos;
};

/* The one way to read. Returns the bytes read, exactly min(len,
 * obj->size - offset) (0 at or past the end), a fill's bytes fetched, or
 * a negative errno: -EINVAL for a bad obj->chunk_size or a raw read of a
 * transformed object, -EOPNOTSUPP for a transformed object the cache
 * cannot produce (see cache_set_transform()), -ENOENT for a ready read
 * whose bytes are not at hand, -ESTALE if the object changed since the
 * manifest, -EIO for a store failure, a backend read that returned fewer
 * bytes than asked, or a wait inside the engine that ran out
 * (cache_fetch_options.wait_ms), reply's error, or what the backend
 * returned. The detail has been logged. Never fails because of the disk
 * cache; short of memory, reads straight into buf (or a reply's buffer). */
ssize_t cache_read(struct cache *c, const struct cache_read *r);

/* Derived objects. A transform turns an object's own bytes into other
 * bytes (the decompressed stream of a .gz source): a producer writes the
 * whole derived stream of raw, in order, from offset 0 to its end, by
 * calling sink with consecutive pieces (any sizes), reading raw only
 * through raw reads (CACHE_READ_RAW). It may read another derived object
 * of raw, never its own (that would wait for itself), and never the other
 * way round too (a transform's length run fills its output object, whose
 * producer reads nothing derived: cache/xform_run.c). It returns 0 or a
 * negative errno; an error
 * sink returns must be returned (it passes through to the readers). raw
 * is borrowed for the call; raw->size is the source's size. */
typedef int (*cache_sink_fn)(void *sink_arg, const void *buf, size_t len);
typedef int (*cache_transform_fn)(void *ctx, struct cache *c,
				  const struct cache_object *raw,
				  cache_sink_fn sink, void *sink_arg);

/* Registers fn (with ctx, borrowed until the cache is freed) as the
 * producer of transform name (copied), replacing one of the same name.
 * Call before the first read of such an object. Returns 0, -EINVAL (no
 * name or fn) or -ENOMEM.
 *
 * A read (cache_read()) of an object with a transform serves its
 * chunks from the disk cache like any others: CRC-checked, counted as
 * hits, evicted, verified, surviving restarts. On a miss it runs the
 * producer once for the whole object (however many threads of the
 * process read it at once: they wait for that one run, each wait ending
 * with -EIO after cache_fetch_options.wait_ms without output; and once
 * per node: a process whose reader misses while another process on the
 * same directory runs the object waits for that run, -EIO after the same
 * bound without another of its chunks stored, and then reads what it
 * stored, or runs it if it is still missing, e.g. the runner died), storing
 * every derived chunk as the stream passes it, and serves the read from
 * the stream. If the stream's length is not obj->size, the read fails
 * with -EIO ("KEY: NAME gave N bytes, the record index says M"), and so
 * does every read waiting for the run; a producer's error is returned to
 * every reader waiting for it. Nothing of a failed run is served in this
 * process: the chunks it stored are dropped. (Another process sharing the
 * directory may read one of them before they are dropped: they are the
 * producer's true output at their offsets.) A chunk evicted later makes
 * the next read of it run the producer again. Without a disk cache
 * (cache_new()) a read of a transformed object fails with -EOPNOTSUPP, and
 * without a producer registered for its name with -EOPNOTSUPP on a miss:
 * the mount refuses such views without a cache directory. The prefetcher
 * never reads derived objects ahead; a fill runs the producer if
 * any chunk is missing. */
int cache_set_transform(struct cache *c, const char *name,
			cache_transform_fn fn, void *ctx);

/* Orders of objects readers are expected to open one after the other
 * (a rank's epoch order). Fills *out with the object at position pos of
 * order and returns true, or returns false past the order's end. *out's
 * strings are borrowed and must stay valid until the cache is freed or
 * the function is replaced. Called from any thread, with no cache lock
 * held. */
typedef bool (*cache_order_fn)(void *ctx, uint64_t order, uint64_t pos,
			       struct cache_object *out);

/* Sets (fn NULL: clears) where the prefetcher finds the files after an
 * opened one, and forgets every order's prefetch state. To change fn or
 * ctx, call while no read runs; setting the same ones again is
 * safe at any time (a mount's reload does, to start the new plan's orders
 * afresh). */
void cache_set_order(struct cache *c, cache_order_fn fn, void *ctx);

/* Pushing ahead into the kernel's page cache. fn puts the whole file at
 * position pos of order, if it has at most max bytes, into the kernel's
 * page cache, so that the reader's read() of it never reaches the daemon:
 * it reads the file with cache_read() (the bytes are verified as any
 * read's) and hands them to the kernel. It returns the bytes pushed, or a
 * negative errno: -EFBIG (larger than max, or nothing to push), -EALREADY
 * (pushed before, and the kernel still has the file), -ENOENT (past the
 * order's end, or the kernel does not know the file and it could not be
 * looked up), a read's error. Called from the cache's pusher
 * threads, with no cache lock held. */
typedef ssize_t (*cache_push_fn)(void *ctx, uint64_t order, uint64_t pos,
				 uint64_t max);

/* Sets (fn NULL: stops) the push function and the bytes the pusher may
 * have put ahead of the readers, all orders together ([prefetch]
 * page_cache; 0: none). The pusher reads ahead, within the files the
 * prefetcher asked for (cache_order_note()), the files of each order a
 * reader follows, and pushes them, leaving one file out every so often
 * (a sentinel) so that the reader's read of it (a READ, or a lookup the
 * caller notes) tells the prefetcher where the reader is: reads that hit
 * the page cache never reach the daemon. Stopping returns once no fn call
 * runs (call it after the kernel connection is gone, or while fn cannot
 * block: a call may be waiting for a lookup through the mount). */
void cache_set_push(struct cache *c, cache_push_fn fn, void *ctx,
		    uint64_t budget);

/* Forgets the prefetch state of every order o with (o & mask) == value
 * (orders that can no longer be opened, e.g. a freed epoch tree's), so
 * the table of orders stays as small as what is in use. */
void cache_order_forget(struct cache *c, uint64_t mask, uint64_t value);

/* Position pos of order (CACHE_NO_ORDER: none) was opened by reader (an
 * id that tells the readers of one order apart, e.g. the thread's id + 1;
 * 0: unknown). With a disk
 * cache and an order function set, queues the first chunk of the next
 * files of the order that are not cached (prefetch.files at most, fewer
 * while readers do not follow the order, within the memory budget); the
 * bytes go to the disk cache. Call it after answering the open: the
 * opener need not wait for it. */
void cache_order_open(struct cache *c, uint64_t order, uint64_t pos,
		      uint64_t reader);

/* cache_order_open() in two steps, for an opener answered in between:
 * cache_order_note() measures the reader and moves its window (cheap, no
 * I/O) and must be called before the open is answered, so that the notes
 * of one reader's opens come in the order it made them (after the answer
 * its next open can overtake this one, which would look like a jump off
 * the order and re-ask the whole window); cache_order_ask() then queues
 * the files the note chose, and may run after the answer. */
struct cache_order_ask {
	uint64_t order;
	uint64_t pos;	   /* of the file just opened */
	uint64_t from, to; /* positions to ask for; none if from > to */
	bool noted;	   /* the order has a slot: ask */
};
void cache_order_note(struct cache *c, uint64_t order, uint64_t pos,
		      uint64_t reader, struct cache_order_ask *ask);
void cache_order_ask(struct cache *c, const struct cache_order_ask *ask);

/* The ends of some orders may have moved (fs/epoch.c planned a next
 * epoch, whose order the callback now continues into): for each order
 * want(ctx, order) accepts (called with no lock held), asks again for
 * what its readers wanted past its old end, and wakes the pusher.
 * Without this, only a reader's next note would (and a reader whose last
 * files the kernel serves, pushed, makes none). The caller must keep the
 * objects of the accepted orders alive (as a request does for
 * cache_order_ask()). */
void cache_order_resume(struct cache *c,
			bool (*want)(void *ctx, uint64_t order), void *ctx);

/* Queues the chunks of obj that cover [offset, offset + len) at prefetch
 * priority into the disk cache, unless stored or in flight (a reader that
 * knows what it reads next and where, e.g. a record view's next records).
 * An object cut smaller than the cache's chunk size (a record view's) has
 * each run of consecutive missing chunks (up to 8 MiB) fetched by ONE
 * backend read, every chunk of it registered on its own, so that a
 * reader of any of them joins that read, and stored on its own; so ask
 * for a whole record (or records next to each other) at once. Never
 * waits. Returns 0 (queued, or nothing to do: a pass-through cache, a
 * derived object), or -ENOBUFS when prefetching may not take more memory
 * now (stop asking). */
int cache_prefetch_range(struct cache *c, const struct cache_object *obj,
			 uint64_t offset, uint64_t len);

/* How many bytes of its stream a reader that names what it reads next
 * with cache_prefetch_range() (a record view's part, read in order)
 * should have asked for past a read that ends done bytes into the stream,
 * and in *step (may be NULL) the least it should ask for at a time, so
 * that what lies next to each other is asked for together (docs/RECORDS.md
 * §3): the prefetcher's rule over this cache's memory budget
 * (prefetch.memory). 0 without a disk cache (nothing to read ahead
 * into). */
uint64_t cache_prefetch_ahead(struct cache *c, uint64_t done, uint64_t *step);

/* prefetch.files: the most files ahead of a reader (0: prefetch off). */
unsigned cache_prefetch_files(struct cache *c);

/* A buffer of len bytes for a read reply, counted in the memory budget
 * (it never waits: replies are bounded by the reader threads). Returns
 * NULL when out of memory. Free with cache_buffer_free(c, p, len). */
void *cache_buffer_alloc(struct cache *c, size_t len);
void cache_buffer_free(struct cache *c, void *p, size_t len);

/* Copies the counters; waits for this process' queued rows, then reads
 * live bytes from the index. */
void cache_stats_get(struct cache *c, struct cache_stats *out);

/* Waits until what this process fetched so far is stored and indexed, at
 * most about 10 s for the stores and as long for the rows: after it,
 * another process sharing the directory finds every chunk this one
 * fetched. A read of MOUNT/.shardfs/stats calls it (fs/control_stats.c);
 * the STATUS= ticker does not (it must not hold up the watchdog). */
void cache_settle(struct cache *c);

/* What cache_info() reports about a directory. */
struct cache_info {
	uint64_t entries; /* index rows */
	uint64_t inline_entries;
	uint64_t blob_entries;
	uint64_t live_bytes;   /* sum of entry lengths */
	uint64_t budget_bytes; /* last budget a mount set, 0 if unknown */
	uint64_t chunk_size;   /* last chunk size a mount set, 0 if unknown */
	uint64_t data_file_bytes; /* size of the LMDB data file */
};

/* Fills *out for c's directory. Returns 0 or -EIO. */
int cache_info(struct cache *c, struct cache_info *out);

/* One entry cache_verify() found bad. Borrowed for the callback. */
struct cache_bad_entry {
	const char *hash_hex;		     /* the index key, 64 hex digits */
	const char *backend_id, *key, *etag; /* NUL-terminated copies */
	uint64_t chunk;
	const char *reason; /* "crc mismatch", "blob missing", ... */
};

typedef void (*cache_bad_cb)(void *arg, const struct cache_bad_entry *bad);

/* Checks every entry's CRCs, lengths and identities (without changing
 * anything) and calls cb for each bad one. *checked gets the entries
 * checked. Returns the number of bad entries (>= 0) or a negative errno. */
int cache_verify(struct cache *c, cache_bad_cb cb, void *arg,
		 uint64_t *checked);

/* Removes every entry and blob. Other processes may keep using the
 * directory: what they looked up is refetched. Returns 0 or a negative
 * errno. */
int cache_clear(struct cache *c);

#endif
