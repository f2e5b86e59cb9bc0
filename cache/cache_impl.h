/*
 * cache_impl.h: what the files of cache/ share behind cache.h (its public
 * contract). Nothing outside cache/ includes it.
 *
 * Files, one job each:
 *   open.c   open and free, the fetch options, stats: wiring only
 *   read.c   the reader (docs/DESIGN.md §8): cache_read(), its sources
 *            chosen once (memory -> queued -> index -> fetch, or memory
 *            -> the backend without a disk cache)
 *   read_lookup.c a chunk's name, and its lookup in the disk cache
 *            (queue, index, blob; CRC-checked)
 *   ahead.c  the prefetcher's state (windows per reader, orders) and the
 *            chunks it queues (prefetch.h decides)
 *   entry.c  chunk identity, its hash, the row format, CRC blocks
 *   index.c  the LMDB environment, transactions and the fault guard;
 *            the only file that includes lmdb.h
 *   store.c  blob files, the queue of new rows and its committer thread
 *   evict.c  access-time batches, LRU eviction, dropping one entry
 *   maint.c  cleanup at open, cache stat, verify and clear
 *   warn.c   the rate-limited warning of a failure served uncached
 *   fetch_*.c the fetch engine (fetch.h; its files, one job each, are
 *            listed in fetch_impl.h, which they share)
 *   prefetch.c the prefetcher's policy, pure (prefetch.h)
 *   derived.c derived (transformed) objects: one producer run per object
 *            at a time, its stream stored chunk by chunk
 *   whole.c  the whole-object check: an object the store gave a checksum
 *            for, once this node holds all of its chunks, compared with it
 *            by a checker thread (whole_check.c: the comparison, and a
 *            mismatch drops every chunk of it)
 *
 * Index (LMDB, one environment per process, MDB_NOTLS so a FUSE worker may
 * run a short read transaction on any thread):
 *   idx   SHA-256(identity) -> entry header, CRC32 per 64 KiB block,
 *         identity. The identity is (backend id, key, etag, [transform,]
 *         chunk size, chunk number), the strings length-prefixed (the
 *         transform only for a derived object: a raw identity ends 16
 *         bytes after the etag, a derived one cannot); it is stored in
 *         full and compared on every lookup, so a hash collision is a
 *         miss, never wrong bytes.
 *   data  SHA-256(identity) -> the chunk's bytes, for inline entries.
 *   meta  "live_bytes", "budget", "chunk_size": u64 values. live_bytes is
 *         changed in the same transaction as every put and delete, so all
 *         processes agree on it.
 * Headers are separate from inline bytes so that eviction, verify and stat
 * scan a compact table.
 *
 * Ordering that makes crashes and concurrent processes harmless:
 *   store:  write blobs/tmp/HASH.PID.N, (fsync), rename to
 *           blobs/XX/HASH.ID (ID random, recorded in the row), then put the
 *           row. Of two stores of one chunk, the first row wins and the
 *           loser unlinks its own file; a file is only ever referenced by
 *           the one row holding its ID, so evicting a row never takes the
 *           file of a newer store of the same chunk with it.
 *   evict:  delete the rows (one transaction), then unlink the blobs.
 * So a crash leaves at worst a blob without a row (cleaned at open) or a
 * tmp file; a row whose blob is gone (a race between evict and store, or a
 * file removed by hand) reads as a miss and is dropped.
 *
 * Cleanup at open: every process holds a shared flock on owners.lock. An
 * opener that gets it exclusively is alone: it removes every tmp file and
 * every blob without a row, drops rows without blobs and recounts live
 * bytes. An opener that is not alone removes only tmp files of dead PIDs
 * and orphan blobs older than an hour, since a younger one may be a blob
 * another process renamed and is about to index.
 *
 * Threads: FUSE workers look chunks up and ask the fetch engine
 * (fetch.h) for misses; its workers read the backend and store whole
 * chunks: a store queues the row for the process' committer thread
 * (started on the first store), which indexes everything queued in one
 * transaction; a stored chunk with a whole-object claim is noted for the
 * checker thread (whole.c, started on the first note). Locks (each field
 * of struct cache below names its own):
 * the index's lock (index.c: the environment of this process), q.lock
 * (the queue), evict.touch_lock (access times), evict.lock (one eviction
 * at a time; takes evict.touch_lock and LMDB's writer lock inside),
 * warn_lock, pf_lock (the prefetcher's orders), ahead.lock (the
 * read-ahead windows), derived.lock (the producers and the runs of
 * derived objects), whole.lock (the checker's queue), and the engine's
 * own lock inside fetch_impl.h's struct fetch. None is held across backend I/O or a call into
 * the engine; q.lock, evict.touch_lock, warn_lock, pf_lock, ahead.lock,
 * derived.lock and whole.lock are never held while taking another lock.
 * A derived run also holds its object's node lock (derived_node.c: an
 * OFD lock shared with other processes) across its producer's reads and
 * stores; a transform's length run takes its output object's inside its
 * own, never the reverse, so no two runs wait for each other.
 */
#ifndef SHARDFS_CACHE_IMPL_H
#define SHARDFS_CACHE_IMPL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "cache/cache.h"
#include "cache/fetch.h"
#include "cache/prefetch.h"

#define HASH_LEN 32
#define ENTRY_VERSION 2u
#define ENTRY_INLINE 1u
#define QUEUE_BYTES_MAX (UINT64_C(64) << 20) /* chunk bytes awaiting rows */

/* The fixed part of an idx value; CRCs and the identity follow. Copied out
 * with memcpy: LMDB values are not aligned. */
struct entry_hdr {
	uint32_t version;
	uint32_t flags;
	uint64_t length;
	uint64_t atime; /* seconds; updated in batches */
	uint64_t ctime;
	uint64_t blob_id; /* names the blob file; 0 for inline entries */
	uint32_t n_crcs;
	uint32_t id_len;
};

/* A parsed idx value (entry_parse()). */
struct entry {
	struct entry_hdr h;
	uint32_t *crcs; /* h.n_crcs, malloc'd */
};

/* A stored chunk whose row the committer thread has not written yet. */
struct pending {
	/* The queue's link. The tail's next is written by store_chunk()
	 * (under q.lock) when it appends; once an item has a successor its
	 * next never changes. So the committer, which takes a run
	 * first..last under q.lock and walks it unlocked, never reads
	 * last->next without q.lock (last may be the tail). */
	struct pending *next;
	uint8_t hash[HASH_LEN];
	uint8_t *val; /* the idx value: header, CRCs, identity */
	size_t val_len;
	/* Inline bytes; NULL for a blob (already renamed). They are the
	 * fetched chunk's own, held by pin, or malloc'd when owned. */
	const uint8_t *data;
	struct fetch_pin pin;
	bool owned;
	uint64_t blob_id;
	uint64_t len;
	bool dropped; /* found bad while queued: not to be indexed (atomic) */
};

/* An access time waiting to be written (evict.c). */
struct touch {
	uint8_t hash[HASH_LEN];
	uint64_t atime;
};

/* The prefetcher's state for one order (rank). */
struct order_slot {
	uint64_t order;
	struct prefetch_order st;
	/* The reader's pace (see cache_order_open()): */
	uint64_t last_ns;    /* its last open (CLOCK_MONOTONIC), 0: none */
	uint64_t gap_ns;     /* time between its opens, averaged */
	uint64_t stalls;     /* the engine's stalls at its last open */
	uint64_t file_bytes; /* bytes asked for per file ahead, averaged */
	/* The pusher (push.c): the reader's last noted position, and the
	 * highest position a pusher took (pushed, left, or being pushed). */
	uint64_t known;
	uint64_t claimed;
	uint64_t noted_ns; /* when the reader was last noted */
};

/* The pusher (push.c). lock protects every field; it is taken with no
 * other lock held, and pf_lock is taken inside it only to look at or
 * claim an order's positions. */
#define PUSH_THREADS 2
struct push_state {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work may have come, or stop */
	pthread_cond_t idle; /* a call of fn ended */
	cache_push_fn fn;
	void *ctx;
	uint64_t budget;
	unsigned calls;	  /* fn calls running */
	unsigned threads; /* pusher threads started */
	bool stop;
	pthread_t tid[PUSH_THREADS];
	/* Relaxed atomics: statistics. */
	uint64_t files, bytes, failures, sentinels;
};

/* Rows waiting for the committer thread (store.c, see store_chunk()).
 * lock protects every field; it is never held while taking another
 * lock. */
struct store_queue {
	pthread_mutex_t lock;
	pthread_cond_t work; /* the queue grew, or stop */
	pthread_cond_t idle; /* a batch was indexed */
	struct pending *head, **tail;
	uint64_t bytes;	   /* bytes queued: inline in memory, blobs on disk */
	uint64_t max;	   /* most bytes before stores wait */
	unsigned count;	   /* chunks queued */
	unsigned drainers; /* threads in store_drain(): no delay */
	bool busy;	   /* the committer holds a batch */
	bool stop;
	/* cache_free() is about to free the engine: stores index their rows
	 * themselves rather than queue them with a pin on its memory. */
	bool closing;
	bool running; /* the committer thread runs */
	/* A store found no room for a whole wait: stores skip the queue
	 * until the committer indexes a batch (see store_wait_room()). */
	bool stalled;
	pthread_t thread;
};

/* Access times waiting to be written, and eviction (evict.c). */
struct evict_state {
	pthread_mutex_t touch_lock; /* protects touched, n_touched,
				     * cap_touched, last_flush */
	struct touch *touched;
	size_t n_touched, cap_touched;
	time_t last_flush;
	/* One eviction at a time in this process; never held with
	 * touch_lock or across backend I/O. */
	pthread_mutex_t lock;
};

/* Derived objects (derived.c). lock protects every field and what the
 * lists hold; it is never held while taking another lock, across I/O or
 * across a producer's call (only a sink's copies into waiting readers'
 * buffers run under it). */
struct derived_fn;
struct derived_flight;
struct derived_state {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* a run ended */
	struct derived_fn *fns;		/* registered producers */
	struct derived_flight *flights; /* runs going on now */
	uint64_t fails;	  /* runs that failed (their chunks dropped) */
	uint64_t ended;	  /* runs that ended */
	uint64_t wait_ns; /* a waiter's bound without output */
};

#define WHOLE_RECENT 64 /* objects checked lately (whole.c) */

/* The whole-object check (whole.c). lock protects the queue of notes,
 * n_notes, running and stop; it is never held while taking another lock
 * or across I/O. Only the checker thread touches what whole.c keeps per
 * object. */
struct whole_note;
struct whole_obj;
struct whole_state {
	pthread_mutex_t lock;
	pthread_cond_t work; /* a note was queued, or stop */
	struct whole_note *head, **tail;
	unsigned n_notes;
	bool running, stop;
	pthread_t thread;
	pid_t pid;    /* atomic: the process whose checker runs; 0: none */
	uint64_t seq; /* notes queued so far */
	/* The checker thread's own: */
	struct whole_obj **buckets;	       /* by the object's identity */
	struct whole_obj *lru_head, *lru_tail; /* most recently noted first */
	struct whole_obj *dirty; /* noted in the batch being taken */
	struct {
		uint64_t hash, seq; /* an object checked when seq was w.seq */
	} recent[WHOLE_RECENT];
	unsigned recent_next;
	size_t n_objs;
	uint64_t obj_bytes; /* what the objects' chunk records take */
	uint64_t close_ns;  /* CLOCK_MONOTONIC: give up checking then */
	/* Relaxed atomics: statistics. */
	uint64_t checked;    /* objects that matched what the store said */
	uint64_t mismatches; /* objects that did not: their chunks dropped */
};

struct cache {
	/* Every backend request goes through it; created with the cache, it
	 * owns the (borrowed) backend and counts its requests. */
	struct fetch *fetch;

	/* The prefetcher. pf_lock protects order_fn, order_ctx and
	 * orders[]; it is never held across I/O or while taking another
	 * lock. */
	pthread_mutex_t pf_lock;
	cache_order_fn order_fn;
	void *order_ctx;
	struct order_slot *orders;
	size_t n_orders, cap_orders;
	unsigned pf_files;  /* atomic: prefetch.files */
	unsigned pf_conns;  /* atomic: prefetch.connections (0: no bound) */
	uint64_t pf_memory; /* atomic: bytes files ahead may hold (0: no
			     * bound) */
	uint64_t pf_gap_ns; /* atomic: statistics, the last order's pace */
	uint64_t ra_cap;    /* atomic: read-ahead window cap */
	uint64_t ra_memory; /* atomic: prefetch.memory, which bounds the
			     * window a flow stretches (0: no stretching) */
	uint64_t ext_cap;   /* atomic: named extents' read-ahead cap
			     * (prefetch_extents_cap()) */
	/* Relaxed atomics: statistics only. */
	uint64_t pf_issued, pf_bytes, pf_hits, pf_misses, pf_depth, ra_window;
	/* The pusher (push.c). */
	struct push_state push;

	/* Read-ahead windows (ahead.c): lock protects streams[] and clock
	 * and is never held while taking another lock. */
	struct {
		pthread_mutex_t lock;
		struct ahead_stream *streams;
		uint64_t clock;
	} ahead;

	/* Relaxed atomics: statistics only. */
	uint64_t hits;
	uint64_t misses;
	uint64_t bytes_from_cache;
	uint64_t evictions;
	uint64_t crc_failures;
	uint64_t store_failures;
	uint64_t derived_runs;
	uint64_t derived_bytes;

	/* derived.c: producers and runs. */
	struct derived_state derived;

	/* whole.c: the whole-object check. */
	struct whole_state whole;

	/* The disk cache; index is NULL for a pass-through cache. All of it
	 * is read-only after cache_open() except as noted. */
	bool disk;	  /* a disk cache, not a pass-through */
	char *index_path; /* DIR/index.mdb */
	/* The LMDB environment of this process (index.c; its own lock). */
	struct index *index;
	char *dir;
	char *backend_id;
	size_t backend_id_len;
	uint64_t budget; /* 0: none (inspection) */
	uint64_t chunk_size;
	uint64_t inline_max;
	bool fsync;
	bool readonly; /* DIR cannot be written: serve hits, store nothing */
	/* Set once the index is found damaged while in use (a fault inside
	 * LMDB, or LMDB reporting corruption): from then on lookups miss and
	 * stores are dropped; the next cache_open() moves it aside. Atomic. */
	bool broken;
	bool opened; /* cache_open() is done: index_broken() logs */
	int owners_fd;
	uint64_t tmp_seq;   /* atomic: unique tmp names and blob ids */
	uint64_t blob_seed; /* random per cache_open(), for blob ids */

	/* store.c: rows waiting for the committer thread. */
	struct store_queue q;

	/* evict.c: access times and eviction. */
	struct evict_state evict;

	/* warn.c: the last rate-limited warning. */
	pthread_mutex_t warn_lock; /* protects last_warn */
	time_t last_warn;

	/* Blobs whose CRC blocks this process checked (verified.c); set
	 * once, atomically, on first use. */
	struct verified *verified;
};

static inline void stat_add(uint64_t *v, uint64_t n)
{
	__atomic_add_fetch(v, n, __ATOMIC_RELAXED);
}

static inline uint64_t stat_load(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static inline uint64_t now_seconds(void)
{
	return (uint64_t)time(NULL);
}

/* The chunk size obj is cut at (cache.h, struct cache_object). */
static inline uint64_t cache_obj_chunk(const struct cache *c,
				       const struct cache_object *obj)
{
	return obj->chunk_size != 0 ? obj->chunk_size : c->chunk_size;
}

/* Whether obj's chunk size is one the cache can cut it at: 0, or a
 * multiple of CACHE_CRC_BLOCK up to the cache's (read_obj_check() logs). */
static inline bool cache_obj_chunk_ok(const struct cache *c,
				      const struct cache_object *obj)
{
	return obj->chunk_size == 0 ||
	       (obj->chunk_size % CACHE_CRC_BLOCK == 0 &&
		obj->chunk_size <= c->chunk_size);
}

/* ---- warn.c ---- */

/* Logs at most once a minute that what failed with rc (any errno or LMDB
 * code: index_strerror()) and the read is served uncached: a full disk
 * would otherwise log per read. */
void cache_warn_limited(struct cache *c, const char *what, int rc);

/* ---- index.c ----
 * Every function returns 0 or a negative errno (LMDB's codes are mapped in
 * index.c). INDEX_BROKEN: the index was found damaged (a fault inside
 * LMDB, or LMDB reporting corruption), logged once already; from then on
 * every call returns it. */
#define INDEX_BROKEN (-ENOTRECOVERABLE)

/* The index's tables keyed by a chunk's hash: its rows (header, CRCs,
 * identity) and inline chunks' bytes. */
enum index_table { INDEX_ROWS, INDEX_DATA, INDEX_TABLES };

/* The thread's one transaction (STYLE.md), from index_begin() to
 * index_end(); values read in it are borrowed until then. */
struct index_txn;
struct index;

/* Text for a code of the index or an errno of either sign. */
const char *index_strerror(int rc);
/* Any code of the index to a negative errno (INDEX_BROKEN is -EIO). */
int index_errno(int rc);
/* False once the index was found damaged in this process. */
bool index_ok(const struct cache *c);

typedef int (*guard_fn)(struct cache *c, void *arg);
/* Runs fn(c, arg) with the fault guard armed: every transaction runs
 * inside one. Returns what fn returned, or INDEX_BROKEN after a fault. */
int index_guarded(struct cache *c, guard_fn fn, void *arg);
/* Whether this process' environment is open (opening it on first use in
 * a new process; a failure is logged and the caller reads uncached). */
bool index_available(struct cache *c);
/* Whether the environment was opened by this process (not inherited over
 * a fork). */
bool index_ours(const struct cache *c);
/* Begins (read-only unless write) and ends (commit or abort) the thread's
 * transaction. index_end() returns the commit's result. */
int index_begin(struct cache *c, bool write, struct index_txn **t);
int index_end(struct index_txn *t, bool commit);
/* The value of hash in table: 0 and *val (borrowed), -ENOENT, or an
 * error. */
int index_get(struct index_txn *t, enum index_table table, const uint8_t *hash,
	      const void **val, size_t *len);
int index_put(struct index_txn *t, enum index_table table, const uint8_t *hash,
	      const void *val, size_t len);
/* Calls fn for every row in key order: fn returns 0 to go on, 1 to stop
 * (index_scan() returns 0) or a negative errno to stop with it. */
typedef int (*index_scan_fn)(void *arg, const uint8_t *key, size_t key_len,
			     const void *val, size_t val_len);
int index_scan(struct index_txn *t, index_scan_fn fn, void *arg);
/* Empties the rows and data tables (live bytes 0). */
int index_clear(struct index_txn *t);
/* The meta table's u64 values ("live_bytes", "budget", "chunk_size"). */
int index_meta_get(struct index_txn *t, const char *name, uint64_t *out);
int index_meta_put(struct index_txn *t, const char *name, uint64_t value);
int index_live_add(struct index_txn *t, int64_t delta);
/* Calls fn(arg, val, len) with the row of hash (borrowed for the call),
 * in a read transaction of its own with the guard armed. Returns 0, -ENOENT
 * (no row; fn not called), or an error. */
typedef void (*index_row_fn)(void *arg, const void *val, size_t len);
int index_row_visit(struct cache *c, const uint8_t *hash, index_row_fn fn,
		    void *arg);
/* Live bytes of the index (0 when it cannot be read). */
uint64_t index_live_bytes(struct cache *c);
/* Deletes the row hash in t if it exists (and, with id, holds id). Sets
 * *blob when the caller must unlink a blob after commit. Returns 0,
 * -ENOENT, or an error. */
int index_row_delete(struct index_txn *t, const uint8_t *hash,
		     const uint8_t *id, size_t id_len, bool *blob,
		     uint64_t *blob_id);
/* Closes the environment and frees c->index (NULL: nothing). */
void index_close(struct cache *c);
/* Called, with the index's lock held and before the environment is
 * opened again, when the index is first used in a process forked from the
 * one that opened it: whatever else of the cache belongs to the process
 * that opened it starts afresh there (open.c passes store_forked()). */
typedef void (*index_forked_fn)(struct cache *c);
/* Opens c->index_path after checking it; a damaged one is moved aside
 * when may_move, else -EIO (logged). forked (may be NULL): see
 * index_forked_fn. Returns 0 or a negative errno. */
int index_open(struct cache *c, bool may_move, index_forked_fn forked);
/* Records the budget and chunk size (arg: uint64_t[2]); for guarded. */
int index_meta_record(struct cache *c, void *arg);

/* ---- entry.c ---- */

/* Identities hold their numbers as 8 bytes, little-endian (util/le.h). */
/* The identity of chunk n of obj, and its hash. *id is malloc'd. */
int entry_ident_build(const struct cache *c, const struct cache_object *obj,
		      uint64_t n, uint8_t **id, size_t *id_len,
		      uint8_t hash[HASH_LEN]);
/* Splits an identity into its parts (pointers into id); false if it is
 * malformed. */
bool entry_ident_parse(const uint8_t *id, size_t len, const uint8_t *part[3],
		       size_t part_len[3], uint64_t *chunk);
void entry_hash_hex(const uint8_t hash[HASH_LEN], char out[2 * HASH_LEN + 1]);
/* 64 lower-case hex digits to a hash; -EINVAL if not. */
int entry_hex_parse(const char *s, uint8_t hash[HASH_LEN]);
/* DIR/blobs/XX/HASH.ID, malloc'd; NULL when out of memory. */
char *entry_blob_path(const struct cache *c, const uint8_t hash[HASH_LEN],
		      uint64_t blob_id);
/* Unlinks the blob file of hash and blob_id; a failure (the file gone
 * already, no memory for its name) is ignored. */
void entry_blob_unlink(const struct cache *c, const uint8_t hash[HASH_LEN],
		       uint64_t blob_id);
uint32_t entry_n_blocks(uint64_t length);
uint32_t entry_block_crc(const uint8_t *data, uint64_t length, uint32_t b);
/* Parses an idx value. With id, the stored identity must equal it.
 * Returns 0, -ENOENT (another identity: a collision), -EBADMSG
 * (malformed), -ENOMEM. */
int entry_parse(const void *val, size_t val_len, const uint8_t *id,
		size_t id_len, struct entry *e);
/* Whether blocks b0..b1 of data (which starts at data_start of a chunk of
 * length bytes) match crcs. */
bool entry_crcs_ok(const uint8_t *data, uint64_t data_start, uint64_t length,
		   const uint32_t *crcs, uint32_t b0, uint32_t b1);
/* Reads [off, off + len) of the blob fd of a chunk of length bytes into
 * dst and checks the CRC of every block the range touches: whole blocks
 * straight into dst, a block the range covers only part of through edge
 * (CACHE_CRC_BLOCK bytes; may be NULL if entry_blob_edges() is false). A
 * read so needs no second buffer of its size. Returns true if every byte
 * was read and every block matched. */
bool entry_blob_read(int fd, uint64_t length, const uint32_t *crcs,
		     uint64_t off, size_t len, uint8_t *dst, uint8_t *edge);
/* Whether [off, off + len) of a chunk of length bytes covers a CRC block
 * only in part (entry_blob_read() then needs edge). */
bool entry_blob_edges(uint64_t length, uint64_t off, size_t len);

/* ---- evict.c ---- */

/* Writes the access times batched so far. */
void evict_touches_flush(struct cache *c);
/* Records an access to hash (written in a batch later). */
void evict_touch(struct cache *c, const uint8_t *hash);
/* Evicts least recently used entries until live bytes <= target. */
void evict_to(struct cache *c, uint64_t target);
/* Drops one entry (bad CRC, missing blob): its row, then its blob. A
 * failure other than a missing row or a broken index is warned of
 * (rate-limited); a read-only cache drops nothing. */
void evict_entry_drop(struct cache *c, const uint8_t *hash, const uint8_t *id,
		      size_t id_len);

/* ---- store.c ---- */

/* What a lookup found (read.c, store_pending_find()). */
enum { LOOKUP_MISS = 0, LOOKUP_HIT = 1, LOOKUP_BAD = 2, LOOKUP_BLOB = 3 };

/* Counts and logs (rate-limited) a chunk that could not be stored. */
void store_failed(struct cache *c, int rc);
/* Waits until every chunk this process queued is indexed, or until
 * STORE_WAIT_MS passed (the committer is stuck: see store.c). */
void store_drain(struct cache *c);
/* In a child after fork(): the parent's committer thread did not come
 * along, and its queue, if any, is the parent's to index. */
void store_forked(struct cache *c);
/* Stores a fetched chunk: writes its blob (large chunks) now, and queues
 * its row for the committer thread, an inline chunk's bytes with it: kept
 * in the engine through keep (see fetch_done_fn), or copied when keep is
 * NULL. Failures are counted and logged, never returned. */
void store_chunk(struct cache *c, const uint8_t *hash, const uint8_t *id,
		 size_t id_len, const uint8_t *data, uint64_t len,
		 struct fetch_pin *keep);
/* Lets go of the queue's hold on the engine's memory (cache_free(),
 * before fetch_free()): stores index their rows themselves from now on,
 * and what is queued is indexed. */
void store_close(struct cache *c);
/* Serves [off, off + len) of a chunk still queued for indexing. Returns
 * LOOKUP_HIT (copied), LOOKUP_MISS (not queued), or LOOKUP_BLOB with e
 * filled for the caller to read the blob. */
int store_pending_find(struct cache *c, const uint8_t *hash, const uint8_t *id,
		       size_t id_len, uint64_t chunk_len, uint64_t off,
		       size_t len, void *dst, struct entry *e);
/* Keeps a queued chunk found bad from being indexed. */
void store_pending_drop(struct cache *c, const uint8_t *hash);
/* Directories 0700 and files 0600 of the cache, whatever the umask. */
int store_dir_make(const char *path);
int store_mkdir_p(const char *path);
int store_file_open(const char *path, int flags);

/* ---- derived.c ---- */

void derived_init(struct cache *c);
/* Frees the producers (no read may run). */
void derived_destroy(struct cache *c);
void derived_set_wait(struct cache *c, uint64_t wait_ms);
/* cache_read() of a transformed obj with a disk cache, offset and len
 * already clamped to obj->size (len > 0). */
ssize_t derived_read(struct cache *c, const struct cache_object *obj,
		     uint64_t offset, size_t len, void *buf);
/* read_stored() of [in_off, in_off + len) of chunk n of a transformed
 * obj, unless a run of obj is going on or a run failed meanwhile (whose
 * chunks may be being dropped). Returns len, -ENOENT, or -ENOMEM naming
 * the chunk. */
ssize_t derived_stored(struct cache *c, const struct cache_object *obj,
		       uint64_t n, uint64_t in_off, size_t len, void *dst);
/* A fill of a transformed obj with a disk cache. */
int derived_fill(struct cache *c, const struct cache_object *obj,
		 uint64_t *fetched);

/* ---- derived_node.c ----
 * One run of a derived object per node: the lock a process's runner takes
 * before it runs the producer (the file comment says how and why). */
struct derived_node {
	int fd; /* DIR/derived.lock, holding obj's lock; -1: none */
};
/* Told of each of obj's chunks that another process's run stores while
 * this one waits (derived.c restarts its waiters' bound). */
typedef void (*derived_node_progress_fn)(struct cache *c, void *arg);
/* Takes obj's node lock, waiting while another process holds it: at most
 * wait_ns without another of obj's chunks appearing in the index (each
 * one that does is passed on: progress(c, arg)).
 * Returns 0 with the lock in *node (node->fd -1: run without it: a
 * read-only cache, or no lock to be had, logged once), 1 when every chunk
 * of obj is stored (by another process; no lock held: look it up),
 * -EIO when the wait ran out (logged), or -ENOMEM. */
int derived_node_lock(struct cache *c, const struct cache_object *obj,
		      uint64_t wait_ns, derived_node_progress_fn progress,
		      void *arg, struct derived_node *node);
/* Releases what derived_node_lock() took (no lock: a no-op). */
void derived_node_unlock(struct derived_node *node);
/* Whether chunks *have.. of obj to its end are all queued or indexed;
 * *have grows past each one found, so that a caller polling it sees
 * progress and does not look the same chunks up again. */
bool derived_node_stored(struct cache *c, const struct cache_object *obj,
			 uint64_t *have);

/* ---- whole.c ----
 * The whole-object check (docs/DESIGN.md §8, "What the store vouches
 * for"): once this node holds every chunk of an object the store gave a
 * checksum for, the checker thread compares the object with it and drops
 * every chunk of an object that does not match. */

/* An object the checker follows (whole.c). Only its thread touches it. */
struct whole_obj {
	struct whole_obj *bnext;       /* its bucket's chain */
	struct whole_obj *prev, *next; /* the LRU list */
	struct whole_obj *dnext;       /* the batch's list of noted ones */
	bool dirty;		       /* on that list */
	uint64_t hash;		       /* of prefix */
	uint8_t *prefix;	       /* the identity of its chunks, less n */
	size_t prefix_len;
	uint64_t object_size, chunk_size, n_chunks;
	struct backend_claim claim;
	bool conflict;	 /* replies claimed different checksums */
	uint64_t cursor; /* chunks before it are noted or stored */
	uint8_t *noted;	 /* a bit per chunk: noted here (crc[] set) */
	uint8_t *seen;	 /* a bit per chunk: found stored, not noted */
	uint32_t *crc;	 /* per chunk, for a CRC-32C claim; else NULL */
	uint64_t bytes;	 /* what the records take */
};

#define WHOLE_PIECE ((size_t)1 << 20) /* read back this much at a time */

static inline bool whole_bit(const uint8_t *bits, uint64_t n)
{
	return bits[n / 8] >> (n % 8) & 1;
}

/* Sets up c->whole (cache_alloc()). */
void whole_init(struct cache *c);
/* Stops the checker thread, letting it check what is queued for at most
 * WHOLE_CLOSE_MS, and frees what it holds; notes after it are dropped.
 * Before the engine and the index go (cache_free()). */
void whole_close(struct cache *c);
/* Frees the rest, once nothing can note any more (after fetch_free()). */
void whole_destroy(struct cache *c);
/* In a child after fork(): the parent's checker did not come along. */
void whole_forked(struct cache *c);
/* Chunk id (raw, not derived) of len bytes at data was stored (or
 * offered to the store) with what its replies vouched for (v; NULL:
 * nothing): computes its CRC-32C if the claim is one, and queues it for
 * the checker. Cheap for objects with no claim (returns at once) and
 * never waits. data is only read during the call. */
void whole_note(struct cache *c, const uint8_t *id, size_t id_len,
		const uint8_t *data, uint64_t len, const struct fetch_vouch *v);

/* whole_check.c: every chunk of o is stored; compares the object with its
 * claim (reading chunks back into buf, WHOLE_PIECE bytes), counts the
 * verdict, and on a mismatch drops every chunk of it at every chunk size
 * and logs it. Returns WHOLE_DONE; WHOLE_MISSING with *missing a chunk
 * found not stored when read back (evicted); or WHOLE_STOPPED: no verdict
 * (the close cut it short, or no digest). */
enum { WHOLE_DONE = 0, WHOLE_MISSING = 1, WHOLE_STOPPED = 2 };
int whole_check(struct cache *c, const struct whole_obj *o, uint8_t *buf,
		uint64_t *missing);
/* whole_check.c, for whole.c too: names chunk n of o. Returns 0 or
 * -ENOMEM; release with read_chunk_release(). */
struct read_chunk;
int whole_obj_chunk(const struct whole_obj *o, uint64_t n,
		    struct read_chunk *ch);
/* True once cache_free() has waited for the checker long enough. */
bool whole_closing_late(struct cache *c);

/* ---- read_lookup.c ---- */

/* 0, or -EINVAL (logged) if obj's chunk size is not one the cache can cut
 * it at (cache.h, struct cache_object). */
int read_obj_check(const struct cache *c, const struct cache_object *obj);

/* Chunk n of an object, named once for every step of a read: its
 * identity, hash, and the engine's request (which points into it, so a
 * read_chunk does not move while used). */
struct read_chunk {
	uint64_t n;   /* chunk number */
	uint64_t len; /* its bytes */
	uint8_t hash[HASH_LEN];
	uint8_t *id; /* the identity, malloc'd */
	size_t id_len;
	struct fetch_request r;
};

/* What a reply holds until it is sent (read_reply()): the piece, and the
 * descriptor behind it (the bytes of a checked blob are in the read's own
 * buffer, read_lookup()). */
struct read_hold {
	struct cache_piece piece;
	int fd; /* -1: none */
};

/* Closes what h holds, if anything. */
void read_hold_release(struct read_hold *h);
/* Steps 2 and 3 of the reader (read_lookup.c): serves [off, off + len) of
 * chunk ch from the queue or the index into dst. A bad entry (CRC
 * mismatch, short blob) is dropped and counted. With hold, hold->piece
 * points at the bytes: in dst, or in the blob's descriptor (see struct
 * read_hold). Returns LOOKUP_HIT or LOOKUP_MISS (or LOOKUP_BAD: a miss). */
int read_lookup(struct cache *c, const struct read_chunk *ch, uint64_t off,
		size_t len, void *dst, struct read_hold *hold);
/* Bytes of chunk n of obj. */
uint64_t read_chunk_len(const struct cache *c, const struct cache_object *obj,
			uint64_t n);
/* The part of a read at byte pos of obj, left bytes still to go, that lies
 * in one chunk: sets *n to that chunk and *in_off to pos's offset in it,
 * and returns how many bytes of it the read takes (at most left). */
size_t read_chunk_span(const struct cache *c, const struct cache_object *obj,
		       uint64_t pos, size_t left, uint64_t *n,
		       uint64_t *in_off);
/* Names chunk n of obj (obj's strings borrowed while ch is used). Returns
 * 0 or -ENOMEM. Free with read_chunk_release(). */
int read_chunk_name(const struct cache *c, const struct cache_object *obj,
		    uint64_t n, struct read_chunk *ch);
void read_chunk_release(struct read_chunk *ch);
/* Whether chunk ch is queued or indexed (not read, not checked). */
bool read_chunk_present(struct cache *c, const struct read_chunk *ch);
/* Steps 2 and 3 of the reader only: [in_off, in_off + len) of chunk ch
 * into dst from the committer's queue or the index (CRC-checked; a bad
 * entry is dropped and counted), counted as a hit. Never fetches. Returns
 * len or -ENOENT (not stored, or dropped). */
ssize_t read_stored(struct cache *c, const struct read_chunk *ch,
		    uint64_t in_off, size_t len, void *dst);
/* read_stored() not counted as a hit (the whole-object check reading
 * chunks back). */
ssize_t read_stored_uncounted(struct cache *c, const struct read_chunk *ch,
			      uint64_t in_off, size_t len, void *dst);

/* What read_look() serves: [off, off + len) of chunk ch, copied into the
 * destination it is given, or with hold, where hold points. */
struct read_look_arg {
	struct cache *c;
	const struct read_chunk *ch;
	uint64_t off;
	size_t len;
	struct read_hold *hold;
};
/* Names chunk n of obj into *ch (read_chunk_name()) and points a at it
 * and at c. Returns 0 or -ENOMEM; release ch with read_chunk_release(). */
int read_look_name(struct read_look_arg *a, struct cache *c,
		   const struct cache_object *obj, uint64_t n,
		   struct read_chunk *ch);
/* The disk cache's part of a read (a fetch_look_fn; arg a struct
 * read_look_arg): the committer's queue or the index. */
int read_look(void *arg, void *dst);
/* The disk cache's part of a fill or a prefetch (a fetch_look_fn; arg a
 * struct read_look_arg, c and ch set): is the chunk queued or indexed (not
 * read, not checked)? */
int read_look_present(void *arg, void *dst);

/* ---- read.c ---- */

/* Hands got bytes of buf (from fetch_buffer_alloc(len)) to fn as one
 * piece unless got is an error, then frees buf. Returns got or fn's
 * error. */
ssize_t read_reply_buffer(struct cache *c, void *buf, size_t len, ssize_t got,
			  cache_reply_fn fn, void *arg);
/* verified.c: blob blocks this process checked (see there). True if
 * blocks b0..b1 of the blob st (an fstat() of its open file) describes
 * were checked and it is unchanged since. */
bool verified_covers(struct cache *c, const struct stat *st, uint32_t b0,
		     uint32_t b1);
/* Blocks b0..b1 of the blob st (taken before the read) describes passed
 * their CRC check. */
void verified_mark(struct cache *c, const struct stat *st, uint32_t b0,
		   uint32_t b1);
/* Frees the table (cache_free()). */
void verified_free(struct cache *c);

/* ---- ahead.c ---- */

struct ahead_stream;
int ahead_init(struct cache *c);
void ahead_destroy(struct cache *c);
/* Moves r's reader's window over r->obj for a read of [offset, offset +
 * len) (clamped, len > 0) and queues what it reaches (nothing for reader
 * 0). Never waits. */
void ahead_read(struct cache *c, const struct cache_read *r, uint64_t offset,
		size_t len);
/* Queues the chunks of [offset, offset + len) of obj (len > 0; cut
 * smaller than the cache's chunk size, a disk cache) that are neither
 * stored nor in the engine, in runs of one backend read each
 * (fetch_run()): at reader priority for a reader about to read them, or
 * as a prefetch (counted in the prefetch stats). Returns 0, -ENOBUFS (no
 * memory now: what was queued stays) or -ENOMEM. */
int ahead_run(struct cache *c, const struct cache_object *obj, uint64_t offset,
	      uint64_t len, bool reader);

/* ---- push.c ---- */

void push_init(struct cache *c);
/* Stops and joins the pusher threads (cache_free()). */
void push_destroy(struct cache *c);
/* Wakes the pusher: an order's reader was noted or its window grew. */
void push_wake(struct cache *c);

/* ---- maint.c ---- */

/* Makes a cache readable by other users 0700/0600 (when we own it). */
void maint_perms_tighten(struct cache *c);
/* Allocates LMDB's lock file, so a full filesystem fails the open. */
int maint_lock_file_prepare(const char *path);
/* Takes owners.lock (LOCK_SH or LOCK_EX), giving up after a while. */
int maint_owners_lock(struct cache *c, const char *path, int op);
/* Cleanup at open (not for inspection): records the budget and chunk
 * size, removes tmp files, drops rows without blobs, removes blobs without
 * rows (all of them when alone, else only those of dead writers or older
 * than an hour), and evicts down to the budget. */
void maint_at_open(struct cache *c, bool alone);

#endif
