/*
 * cache: see cache.h for the contract and the directory layout.
 *
 * Index (LMDB, one environment per process, MDB_NOTLS so a FUSE worker may
 * run a short read transaction on any thread):
 *   idx   SHA-256(identity) -> entry header, CRC32 per 64 KiB block,
 *         identity. The identity is (backend id, key, etag, chunk size,
 *         chunk number), each length-prefixed; it is stored in full and
 *         compared on every lookup, so a hash collision is a miss, never
 *         wrong bytes.
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
 * transaction. Locks: env_lock (the environment of this process), q_lock
 * (the queue), touch_lock (access times), evict_lock (one eviction at a
 * time; takes touch_lock and LMDB's writer lock inside), warn_lock,
 * pf_lock (the prefetcher's orders), a cache_file's lock (its read-ahead
 * window), and the engine's own lock inside fetch.c. None is held across
 * backend I/O or a call into the engine; q_lock, touch_lock, warn_lock,
 * pf_lock and a cache_file's lock are never held while taking another
 * lock.
 */
#include "cache/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>
#include <openssl/evp.h>

#include "cache/fault_guard.h"
#include "cache/fetch.h"
#include "cache/index_check.h"
#include "cache/prefetch.h"
#include "util/crc32.h"
#include "util/log.h"

#define HASH_LEN 32
#define ENTRY_VERSION 2u
#define ENTRY_INLINE 1u
/* Address space only: the data file grows as needed. One fixed size for
 * every process, so no process ever sees MDB_MAP_RESIZED. */
#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer's shadow leaves no 1 TiB hole in the address space
 * (LMDB's mmap fails with ENOMEM); its builds are for tests only. */
#define MAP_SIZE (UINT64_C(1) << 36)
#else
#define MAP_SIZE (UINT64_C(1) << 40)
#endif
#define MAX_READERS 1024
/* Bigger than LMDB's lock file for MAX_READERS, so LMDB keeps our size. */
#define LOCK_FILE_BYTES (128u << 10)
#define TOUCH_BATCH 1024
#define TOUCH_SECONDS 30
#define WARN_SECONDS 60
#define ORPHAN_GRACE_SECONDS 3600
#define QUEUE_BYTES_MAX (UINT64_C(64) << 20) /* chunk bytes awaiting rows */
#define COMMIT_BATCH 64	   /* chunks that make the committer start now */
#define COMMIT_DELAY_MS 20 /* else it waits this long for a batch */
#define PREFETCH_FILES_DEFAULT 32
#define LOCK_WAIT_SECONDS 10 /* most an open waits for owners.lock */

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

/* A stored chunk whose row the committer thread has not written yet. */
struct pending {
	/* The queue's link. The tail's next is written by chunk_store()
	 * (under q_lock) when it appends; once an item has a successor its
	 * next never changes. So the committer, which takes a run
	 * first..last under q_lock and walks it unlocked, never reads
	 * last->next without q_lock (last may be the tail). */
	struct pending *next;
	uint8_t hash[HASH_LEN];
	uint8_t *val; /* the idx value: header, CRCs, identity */
	size_t val_len;
	uint8_t *data; /* inline bytes; NULL for a blob (already renamed) */
	uint64_t blob_id;
	uint64_t len;
	bool dropped; /* found bad while queued: not to be indexed (atomic) */
};

struct touch {
	uint8_t hash[HASH_LEN];
	uint64_t atime;
};

/* The prefetcher's state for one order (rank). */
struct order_slot {
	uint64_t order;
	struct prefetch_order st;
};

struct cache_file {
	struct cache *c;
	struct cache_object obj; /* borrowed */
	pthread_mutex_t lock;	 /* protects win; taken with no other lock */
	struct prefetch_window win;
	struct cache_file *prev, *next; /* c->files; protected by
					 * c->files_lock */
};

struct cache {
	struct backend *be;
	/* Every backend request goes through it; created with the cache. */
	struct fetch *fetch;

	/* The prefetcher. pf_lock protects order_fn, order_ctx and
	 * orders[]; it is never held across I/O or while taking another
	 * lock. */
	pthread_mutex_t pf_lock;
	cache_order_fn order_fn;
	void *order_ctx;
	struct order_slot *orders;
	size_t n_orders, cap_orders;
	unsigned pf_files; /* atomic: prefetch.files */
	uint64_t ra_cap;   /* atomic: read-ahead window cap */
	/* Relaxed atomics: statistics only. */
	uint64_t pf_issued, pf_bytes, pf_hits, pf_misses, pf_depth, ra_window;
	/* Files open now: a FUSE release can be lost at unmount, so
	 * cache_free() frees what is left. files_lock protects the list and
	 * is never held while taking another lock. */
	pthread_mutex_t files_lock;
	struct cache_file *files;

	/* Relaxed atomics: statistics only. */
	uint64_t backend_reads;
	uint64_t backend_bytes;
	uint64_t backend_errors;
	uint64_t hits;
	uint64_t misses;
	uint64_t bytes_from_cache;
	uint64_t evictions;
	uint64_t crc_failures;
	uint64_t store_failures;

	/* The disk cache; env is NULL for a pass-through cache. All of it is
	 * read-only after cache_open() except as noted. */
	bool disk;	  /* a disk cache, not a pass-through */
	char *index_path; /* DIR/index.mdb */
	/* The environment of process env_pid, (re)opened by env_of() on first
	 * use in a new process: `shardfs mount` without -f forks after
	 * opening, and LMDB's locks and reader slots belong to the process
	 * that opened the environment. */
	pthread_mutex_t env_lock; /* protects env, dbi_*, env_pid changes */
	MDB_env *env;
	MDB_dbi dbi_idx, dbi_data, dbi_meta;
	pid_t env_pid; /* atomic */
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

	/* Rows waiting for the committer thread (see chunk_store()). Lock
	 * order: q_lock is never held while taking another lock. */
	pthread_mutex_t q_lock; /* protects q_*, committer_running */
	pthread_cond_t q_work;	/* the queue grew, or q_stop */
	pthread_cond_t q_idle;	/* a batch was indexed */
	struct pending *q_head, **q_tail;
	uint64_t q_bytes;    /* bytes queued: inline in memory, blobs on disk */
	uint64_t q_max;	     /* most q_bytes before stores wait */
	unsigned q_count;    /* chunks queued */
	unsigned q_drainers; /* threads in pending_drain(): no delay */
	bool q_busy;	     /* the committer holds a batch */
	bool q_stop;
	bool committer_running;
	pthread_t committer;

	pthread_mutex_t touch_lock; /* protects touched, n_touched, cap_touched,
				     * last_flush */
	struct touch *touched;
	size_t n_touched, cap_touched;
	time_t last_flush;

	/* One eviction at a time in this process; never held with
	 * touch_lock or across backend I/O. */
	pthread_mutex_t evict_lock;

	pthread_mutex_t warn_lock; /* protects last_warn */
	time_t last_warn;
};

static void stat_add(uint64_t *v, uint64_t n)
{
	__atomic_add_fetch(v, n, __ATOMIC_RELAXED);
}

static uint64_t stat_load(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static uint64_t now_seconds(void)
{
	return (uint64_t)time(NULL);
}

/* LMDB returns errno values (positive) and its own codes MDB_KEYEXIST
 * (-30799) .. MDB_LAST_ERRCODE; the code here also passes negative errno
 * values. One place turns any of them into text and into an errno. */
static bool mdb_code(int rc)
{
	return rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE;
}

static const char *err_str(int rc)
{
	if (mdb_code(rc))
		return mdb_strerror(rc);
	return strerror(rc < 0 ? -rc : rc);
}

/* Codes that mean the index file cannot be trusted. */
static bool mdb_damaged(int rc)
{
	return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
	       rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ||
	       rc == MDB_PANIC;
}

/* Any of the above to a negative errno. */
static int mdb_err(int rc)
{
	if (rc == 0)
		return 0;
	if (!mdb_code(rc))
		return rc < 0 ? rc : -rc;
	switch (rc) {
	case MDB_MAP_FULL:
		return -ENOSPC;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_READERS_FULL:
	case MDB_TXN_FULL:
	case MDB_CURSOR_FULL:
		return -EAGAIN;
	default:
		return -EIO; /* damaged (mdb_damaged()) or a bug */
	}
}

/* Logs at most once a minute: a full disk would otherwise log per read. */
static void warn_limited(struct cache *c, const char *what, int rc)
{
	time_t now = time(NULL);
	bool say;

	pthread_mutex_lock(&c->warn_lock);
	say = c->last_warn == 0 || now - c->last_warn >= WARN_SECONDS;
	if (say)
		c->last_warn = now;
	pthread_mutex_unlock(&c->warn_lock);
	if (say)
		log_msg(LOG_WARNING,
			"cache %s: %s: %s; serving uncached (this warning is "
			"repeated at most once a minute)",
			c->dir, what, err_str(rc));
}

/* ---- the fault guard -----------------------------------------------------
 *
 * LMDB reads the index through a shared mapping and trusts its pages. A
 * page damaged after the check at open, or the file truncated by someone
 * else while we serve, would kill the process with SIGSEGV or SIGBUS
 * inside LMDB. So every LMDB transaction runs inside guarded(), through
 * fault_guard.h: after a fault it aborts the thread's transaction
 * (releasing LMDB's writer lock, which other processes wait for), marks
 * the index broken and returns MDB_PANIC.
 *
 * Only LMDB calls and reads of LMDB values run armed, and no mutex of ours
 * is held while the map is read, so a jump never leaves one locked (a
 * nested guarded() call, e.g. eviction under evict_lock, catches its own
 * faults). A thread runs at most one transaction at a time (STYLE.md),
 * tracked in guard_txn by txn_begin()/txn_end().
 */
static __thread MDB_txn *guard_txn;

/* Marks the index unusable for this process; logs once. */
static void index_broken(struct cache *c, const char *why)
{
	if (__atomic_exchange_n(&c->broken, true, __ATOMIC_ACQ_REL) ||
	    !c->opened) /* at open, index_open() says what it does */
		return;
	log_msg(LOG_ERR,
		"cache %s: the index %s is damaged (%s): no more lookups or "
		"stores in this process (reads go to the source); the next "
		"open moves it aside and starts a fresh one",
		c->dir, c->index_path ? c->index_path : "index.mdb", why);
}

static bool index_ok(const struct cache *c)
{
	return !__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE);
}

typedef int (*guard_fn)(struct cache *c, void *arg);

struct guard_call {
	struct cache *c;
	guard_fn fn;
	void *arg;
};

static int guard_trampoline(void *arg)
{
	struct guard_call *g = arg;

	return g->fn(g->c, g->arg);
}

/* Runs fn(c, arg) with the guard armed. Returns what fn returned (and
 * marks the index broken if that is an LMDB code for damage), or
 * MDB_PANIC after a fault. */
static int guarded(struct cache *c, guard_fn fn, void *arg)
{
	struct guard_call g = { c, fn, arg };
	int rc = 0, sig;

	if (!index_ok(c))
		return MDB_PANIC;
	sig = fault_guard_call(guard_trampoline, &g, &rc);
	if (sig == 0) {
		if (mdb_damaged(rc))
			index_broken(c, mdb_strerror(rc));
		return rc;
	}
	if (guard_txn != NULL) {
		MDB_txn *txn = guard_txn;

		guard_txn = NULL;
		mdb_txn_abort(txn);
	}
	index_broken(c, sig == SIGBUS	 ? "SIGBUS reading it: truncated?"
			: sig == SIGABRT ? "an LMDB assertion failed on it"
					 : "SIGSEGV reading it: damaged pages");
	return MDB_PANIC;
}

/* LMDB checks some of its pages with assertions, then abort()s: inside a
 * guarded call that is damage like a fault. */
static void mdb_assert_cb(MDB_env *env, const char *msg)
{
	(void)env;
	log_msg(LOG_ERR, "cache: LMDB: %s", msg);
	fault_guard_jump(SIGABRT); /* returns only when not guarded */
}

static int env_open(struct cache *c, const char *path);

/* The environment for this process, or NULL when it cannot be opened
 * (logged; the caller reads uncached). */
static MDB_env *env_of(struct cache *c)
{
	pid_t pid = getpid();
	int rc;

	if (__atomic_load_n(&c->env_pid, __ATOMIC_ACQUIRE) == pid)
		return c->env;
	pthread_mutex_lock(&c->env_lock);
	if (c->env_pid != pid) {
		/* Inherited over fork(): closing it drops nothing of the
		 * parent's (locks and reader slots are per process). */
		if (c->env != NULL)
			mdb_env_close(c->env);
		c->env = NULL;
		/* The parent's committer thread did not come along; its
		 * queue, if any, is the parent's to index. */
		pthread_mutex_init(&c->q_lock, NULL);
		pthread_cond_init(&c->q_work, NULL);
		pthread_cond_init(&c->q_idle, NULL);
		c->q_head = NULL;
		c->q_tail = &c->q_head;
		c->q_bytes = 0;
		c->q_count = 0;
		c->q_drainers = 0;
		c->q_busy = false;
		c->committer_running = false;
		rc = env_open(c, c->index_path);
		if (rc != 0)
			log_msg(LOG_WARNING,
				"cache %s: cannot open the index %s: %s; "
				"reading uncached",
				c->dir, c->index_path, err_str(rc));
		__atomic_store_n(&c->env_pid, pid, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->env_lock);
	return c->env;
}

/* Begins a transaction on env (c's, being opened) and records it as the
 * thread's for the guard. */
static int txn_begin_on(struct cache *c, MDB_env *env, unsigned flags,
			MDB_txn **txn)
{
	int rc;

	if (env == NULL)
		return ENXIO;
	if (!index_ok(c))
		return MDB_PANIC;
	if (c->readonly && !(flags & MDB_RDONLY))
		return EROFS;
	rc = mdb_txn_begin(env, NULL, flags, txn);
	if (rc == 0)
		guard_txn = *txn;
	return rc;
}

static int txn_begin(struct cache *c, unsigned flags, MDB_txn **txn)
{
	return txn_begin_on(c, env_of(c), flags, txn);
}

/* Ends txn: commits it (commit true) or aborts it. Returns the commit's
 * result. */
static int txn_end(MDB_txn *txn, bool commit)
{
	int rc;

	if (commit) {
		/* Guarded until the commit returns: it reads the map (the
		 * free list), and a fault there must abort the transaction,
		 * or its writer lock stays held for every other process (as
		 * LMDB's own commit error path does). */
		rc = mdb_txn_commit(txn);
		guard_txn = NULL;
		return rc;
	}
	guard_txn = NULL;
	mdb_txn_abort(txn);
	return 0;
}

static void store_failed(struct cache *c, int rc)
{
	stat_add(&c->store_failures, 1);
	warn_limited(c, "cannot store a chunk", rc);
}

/* ---- identities, hashes, paths ---------------------------------------- */

static void put_le64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The identity of chunk n of obj, and its hash. *id is malloc'd. */
static int ident_build(const struct cache *c, const struct cache_object *obj,
		       uint64_t n, uint8_t **id, size_t *id_len,
		       uint8_t hash[HASH_LEN])
{
	size_t len = 8 + c->backend_id_len + 8 + obj->key_len + 8 +
		     obj->etag_len + 16;
	uint8_t *p, *buf = malloc(len);
	unsigned md_len = 0;

	if (buf == NULL)
		return -ENOMEM;
	p = buf;
	put_le64(p, c->backend_id_len);
	memcpy(p + 8, c->backend_id, c->backend_id_len);
	p += 8 + c->backend_id_len;
	put_le64(p, obj->key_len);
	memcpy(p + 8, obj->key, obj->key_len);
	p += 8 + obj->key_len;
	put_le64(p, obj->etag_len);
	memcpy(p + 8, obj->etag, obj->etag_len);
	p += 8 + obj->etag_len;
	put_le64(p, c->chunk_size);
	put_le64(p + 8, n);
	if (!EVP_Digest(buf, len, hash, &md_len, EVP_sha256(), NULL)) {
		free(buf);
		return -ENOMEM;
	}
	*id = buf;
	*id_len = len;
	return 0;
}

/* Splits an identity into its parts (pointers into id); false if it is
 * malformed. */
static bool ident_parse(const uint8_t *id, size_t len, const uint8_t *part[3],
			size_t part_len[3], uint64_t *chunk)
{
	size_t pos = 0;
	int i;

	for (i = 0; i < 3; i++) {
		uint64_t l;

		if (len - pos < 8)
			return false;
		l = get_le64(id + pos);
		pos += 8;
		if (l > len - pos)
			return false;
		part[i] = id + pos;
		part_len[i] = (size_t)l;
		pos += (size_t)l;
	}
	if (len - pos != 16)
		return false;
	*chunk = get_le64(id + pos + 8);
	return true;
}

static void hash_hex(const uint8_t hash[HASH_LEN], char out[2 * HASH_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < HASH_LEN; i++) {
		out[2 * i] = hex[hash[i] >> 4];
		out[2 * i + 1] = hex[hash[i] & 15];
	}
	out[2 * HASH_LEN] = '\0';
}

static int hex_hash(const char *s, uint8_t hash[HASH_LEN])
{
	int i;

	for (i = 0; i < 2 * HASH_LEN; i++) {
		int v;

		if (s[i] >= '0' && s[i] <= '9')
			v = s[i] - '0';
		else if (s[i] >= 'a' && s[i] <= 'f')
			v = s[i] - 'a' + 10;
		else
			return -EINVAL;
		if (i % 2 == 0)
			hash[i / 2] = (uint8_t)(v << 4);
		else
			hash[i / 2] |= (uint8_t)v;
	}
	return 0;
}

/* A blob's file is named by its hash and its blob id, and only the row
 * holding that id refers to it: a chunk evicted and stored again gets a new
 * file, so unlinking the old one can never take the new one with it. */
static char *blob_path(const struct cache *c, const uint8_t hash[HASH_LEN],
		       uint64_t blob_id)
{
	char hex[2 * HASH_LEN + 1], *p;

	hash_hex(hash, hex);
	if (asprintf(&p, "%s/blobs/%.2s/%s.%016" PRIx64, c->dir, hex, hex,
		     blob_id) < 0)
		return NULL;
	return p;
}

static uint32_t n_blocks(uint64_t length)
{
	return (uint32_t)((length + CACHE_CRC_BLOCK - 1) / CACHE_CRC_BLOCK);
}

static uint32_t block_crc(const uint8_t *data, uint64_t length, uint32_t b)
{
	uint64_t start = (uint64_t)b * CACHE_CRC_BLOCK;
	uint64_t n = length - start < CACHE_CRC_BLOCK ? length - start
						      : CACHE_CRC_BLOCK;

	return crc32_update(0, data + start, (size_t)n);
}

/* ---- the index ---------------------------------------------------------- */

struct entry {
	struct entry_hdr h;
	uint32_t *crcs; /* h.n_crcs, malloc'd */
};

/* Parses an idx value. With id, the stored identity must equal it.
 * Returns 0, -ENOENT (another identity: a collision), -EBADMSG
 * (malformed), -ENOMEM. */
static int entry_parse(const MDB_val *v, const uint8_t *id, size_t id_len,
		       struct entry *e)
{
	const uint8_t *p = v->mv_data;
	size_t crc_bytes;

	if (v->mv_size < sizeof(e->h))
		return -EBADMSG;
	memcpy(&e->h, p, sizeof(e->h));
	crc_bytes = (size_t)e->h.n_crcs * 4;
	if (e->h.version != ENTRY_VERSION ||
	    v->mv_size != sizeof(e->h) + crc_bytes + e->h.id_len ||
	    e->h.n_crcs != n_blocks(e->h.length))
		return -EBADMSG;
	if (id != NULL && (e->h.id_len != id_len ||
			   memcmp(p + sizeof(e->h) + crc_bytes, id, id_len)))
		return -ENOENT;
	e->crcs = malloc(crc_bytes ? crc_bytes : 1);
	if (e->crcs == NULL)
		return -ENOMEM;
	memcpy(e->crcs, p + sizeof(e->h), crc_bytes);
	return 0;
}

static int meta_get(MDB_txn *txn, const struct cache *c, const char *name,
		    uint64_t *out)
{
	MDB_val k = { strlen(name), (void *)name }, v;
	int rc = mdb_get(txn, c->dbi_meta, &k, &v);

	*out = 0;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	if (v.mv_size == 8)
		memcpy(out, v.mv_data, 8);
	return 0;
}

static int meta_put(MDB_txn *txn, const struct cache *c, const char *name,
		    uint64_t value)
{
	MDB_val k = { strlen(name), (void *)name }, v = { 8, &value };

	return mdb_put(txn, c->dbi_meta, &k, &v, 0);
}

static int live_add(MDB_txn *txn, const struct cache *c, int64_t delta)
{
	uint64_t live;
	int rc = meta_get(txn, c, "live_bytes", &live);

	if (rc != 0)
		return rc;
	if (delta < 0 && (uint64_t)-delta > live)
		live = 0;
	else
		live += (uint64_t)delta;
	return meta_put(txn, c, "live_bytes", live);
}

static int live_bytes_read(struct cache *c, void *arg)
{
	MDB_txn *txn;
	int rc = txn_begin(c, MDB_RDONLY, &txn);

	if (rc != 0)
		return rc;
	rc = meta_get(txn, c, "live_bytes", arg);
	txn_end(txn, false);
	return rc;
}

static uint64_t live_bytes(struct cache *c)
{
	uint64_t live = 0;

	if (guarded(c, live_bytes_read, &live) != 0)
		return 0;
	return live;
}

/* Deletes the row hash in txn if it exists (and, with id, holds id).
 * Sets *blob when the caller must unlink a blob after commit. Returns 0,
 * MDB_NOTFOUND, or an LMDB error. */
static int row_delete(MDB_txn *txn, struct cache *c, const uint8_t *hash,
		      const uint8_t *id, size_t id_len, bool *blob,
		      uint64_t *blob_id)
{
	MDB_val k = { HASH_LEN, (void *)hash }, v;
	struct entry_hdr h;
	int rc;

	*blob = false;
	rc = mdb_get(txn, c->dbi_idx, &k, &v);
	if (rc != 0)
		return rc;
	if (v.mv_size < sizeof(h))
		memset(&h, 0, sizeof(h));
	else
		memcpy(&h, v.mv_data, sizeof(h));
	/* A malformed row goes whoever asks; a well-formed one only if it is
	 * the entry the caller means. */
	if (id != NULL && v.mv_size >= sizeof(h) &&
	    v.mv_size == sizeof(h) + (size_t)h.n_crcs * 4 + h.id_len &&
	    (h.id_len != id_len ||
	     memcmp((uint8_t *)v.mv_data + sizeof(h) + (size_t)h.n_crcs * 4, id,
		    id_len) != 0))
		return MDB_NOTFOUND;
	rc = mdb_del(txn, c->dbi_idx, &k, NULL);
	if (rc != 0)
		return rc;
	if (h.flags & ENTRY_INLINE) {
		rc = mdb_del(txn, c->dbi_data, &k, NULL);
		if (rc != 0 && rc != MDB_NOTFOUND)
			return rc;
	} else {
		*blob = true;
		*blob_id = h.blob_id;
	}
	return live_add(txn, c, -(int64_t)h.length);
}

static void blob_unlink(struct cache *c, const uint8_t *hash, uint64_t blob_id)
{
	char *path = blob_path(c, hash, blob_id);

	if (path != NULL)
		unlink(path);
	free(path);
}

struct drop_args {
	const uint8_t *hash, *id;
	size_t id_len;
	bool blob;
	uint64_t blob_id;
};

static int entry_drop_txn(struct cache *c, void *arg)
{
	struct drop_args *a = arg;
	MDB_txn *txn;
	int rc;

	rc = txn_begin(c, 0, &txn);
	if (rc != 0)
		return rc;
	rc = row_delete(txn, c, a->hash, a->id, a->id_len, &a->blob,
			&a->blob_id);
	if (rc == 0)
		rc = txn_end(txn, true);
	else
		txn_end(txn, false);
	return rc;
}

/* Drops one entry (bad CRC, missing blob). */
static void entry_drop(struct cache *c, const uint8_t *hash, const uint8_t *id,
		       size_t id_len)
{
	struct drop_args a = { .hash = hash, .id = id, .id_len = id_len };
	int rc;

	if (c->readonly)
		return;
	rc = guarded(c, entry_drop_txn, &a);
	if (rc == 0 && a.blob)
		blob_unlink(c, hash, a.blob_id);
	else if (rc != 0 && rc != MDB_NOTFOUND && rc != MDB_PANIC)
		warn_limited(c, "cannot drop an entry", rc);
}

/* ---- access times ------------------------------------------------------- */

struct touch_args {
	struct touch *t;
	size_t n;
};

static int touches_write(struct cache *c, void *arg)
{
	struct touch_args *a = arg;
	struct touch *t = a->t;
	size_t n = a->n, i;
	MDB_txn *txn;
	int rc;

	rc = txn_begin(c, 0, &txn);
	if (rc != 0)
		return rc;
	for (i = 0; i < n && rc == 0; i++) {
		MDB_val k = { HASH_LEN, t[i].hash }, v, nv;
		struct entry_hdr h;

		if (mdb_get(txn, c->dbi_idx, &k, &v) != 0 ||
		    v.mv_size < sizeof(h))
			continue;
		memcpy(&h, v.mv_data, sizeof(h));
		if (h.atime >= t[i].atime)
			continue;
		h.atime = t[i].atime;
		/* A copy: v points into the map, which the put may change
		 * under it. */
		nv.mv_size = v.mv_size;
		nv.mv_data = malloc(v.mv_size);
		if (nv.mv_data == NULL) {
			rc = ENOMEM;
			break;
		}
		memcpy(nv.mv_data, v.mv_data, v.mv_size);
		memcpy(nv.mv_data, &h, sizeof(h));
		rc = mdb_put(txn, c->dbi_idx, &k, &nv, 0);
		free(nv.mv_data);
	}
	if (rc == 0)
		rc = txn_end(txn, true);
	else
		txn_end(txn, false);
	return rc;
}

static void touches_flush(struct cache *c)
{
	struct touch_args a;
	struct touch *t;
	size_t n;
	int rc;

	pthread_mutex_lock(&c->touch_lock);
	t = c->touched;
	n = c->n_touched;
	c->touched = NULL;
	c->n_touched = c->cap_touched = 0;
	c->last_flush = time(NULL);
	pthread_mutex_unlock(&c->touch_lock);
	if (n == 0 || c->readonly) {
		free(t);
		return;
	}
	a.t = t;
	a.n = n;
	rc = guarded(c, touches_write, &a);
	if (rc != 0 && rc != MDB_PANIC)
		warn_limited(c, "cannot record access times", rc);
	free(t);
}

static void touch(struct cache *c, const uint8_t *hash)
{
	uint64_t now = now_seconds();
	bool flush = false;

	pthread_mutex_lock(&c->touch_lock);
	if (c->n_touched > 0 &&
	    memcmp(c->touched[c->n_touched - 1].hash, hash, HASH_LEN) == 0 &&
	    c->touched[c->n_touched - 1].atime == now)
		goto out;
	if (c->n_touched == c->cap_touched) {
		size_t cap = c->cap_touched ? 2 * c->cap_touched : 64;
		struct touch *t = realloc(c->touched, cap * sizeof(*t));

		if (t == NULL)
			goto out; /* an access time is a hint */
		c->touched = t;
		c->cap_touched = cap;
	}
	memcpy(c->touched[c->n_touched].hash, hash, HASH_LEN);
	c->touched[c->n_touched++].atime = now;
	flush = c->n_touched >= TOUCH_BATCH ||
		(time_t)now - c->last_flush >= TOUCH_SECONDS;
out:
	pthread_mutex_unlock(&c->touch_lock);
	if (flush)
		touches_flush(c);
}

/* ---- eviction ------------------------------------------------------------ */

struct victim {
	uint64_t atime;
	uint8_t hash[HASH_LEN];
};

struct blob_ref {
	uint8_t hash[HASH_LEN];
	uint64_t blob_id;
};

static int victim_cmp(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;

	if (x->atime != y->atime)
		return x->atime < y->atime ? -1 : 1;
	return memcmp(x->hash, y->hash, HASH_LEN);
}

/* Evicts least recently used entries until live bytes <= target. A full
 * scan sorted by access time: eviction frees a tenth of the budget at a
 * time, so it runs rarely, and no second index has to be kept in step. */
static int evict_run(struct cache *c, void *arg)
{
	uint64_t target = *(const uint64_t *)arg;
	struct victim *v = NULL;
	struct blob_ref *unlink_list = NULL;
	size_t n = 0, cap = 0, n_unlink = 0, i;
	uint64_t live;
	MDB_cursor *cur;
	MDB_val k, val;
	MDB_txn *txn;
	int rc, op = MDB_FIRST;

	touches_flush(c);
	if (live_bytes(c) <= target)
		goto out;
	rc = txn_begin(c, MDB_RDONLY, &txn);
	if (rc != 0)
		goto fail;
	rc = mdb_cursor_open(txn, c->dbi_idx, &cur);
	if (rc != 0) {
		txn_end(txn, false);
		goto fail;
	}
	while ((rc = mdb_cursor_get(cur, &k, &val, op)) == 0) {
		struct entry_hdr h;

		op = MDB_NEXT;

		if (k.mv_size != HASH_LEN || val.mv_size < sizeof(h))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 1024;
			struct victim *nv = realloc(v, ncap * sizeof(*v));

			if (nv == NULL)
				break;
			v = nv;
			cap = ncap;
		}
		memcpy(&h, val.mv_data, sizeof(h));
		v[n].atime = h.atime;
		memcpy(v[n].hash, k.mv_data, HASH_LEN);
		n++;
	}
	mdb_cursor_close(cur);
	txn_end(txn, false);
	if (n == 0)
		goto out;
	qsort(v, n, sizeof(*v), victim_cmp);
	unlink_list = malloc(n * sizeof(*unlink_list));
	if (unlink_list == NULL)
		goto out;

	rc = txn_begin(c, 0, &txn);
	if (rc != 0)
		goto fail;
	rc = meta_get(txn, c, "live_bytes", &live);
	for (i = 0; rc == 0 && i < n && live > target; i++) {
		bool blob;
		uint64_t blob_id = 0;

		rc = row_delete(txn, c, v[i].hash, NULL, 0, &blob, &blob_id);
		if (rc == MDB_NOTFOUND) {
			rc = 0;
			continue;
		}
		if (rc != 0)
			break;
		stat_add(&c->evictions, 1);
		if (blob) {
			memcpy(unlink_list[n_unlink].hash, v[i].hash, HASH_LEN);
			unlink_list[n_unlink++].blob_id = blob_id;
		}
		rc = meta_get(txn, c, "live_bytes", &live);
	}
	if (rc == 0)
		rc = txn_end(txn, true);
	else
		txn_end(txn, false);
	if (rc != 0)
		goto fail;
	for (i = 0; i < n_unlink; i++)
		blob_unlink(c, unlink_list[i].hash, unlink_list[i].blob_id);
	goto out;
fail:
	if (rc != MDB_PANIC)
		warn_limited(c, "cannot evict", rc);
out:
	free(unlink_list);
	free(v);
	return 0;
}

static void evict_to(struct cache *c, uint64_t target)
{
	if (c->readonly)
		return;
	pthread_mutex_lock(&c->evict_lock);
	guarded(c, evict_run, &target);
	pthread_mutex_unlock(&c->evict_lock);
}

enum { LOOKUP_MISS = 0, LOOKUP_HIT = 1, LOOKUP_BAD = 2, LOOKUP_BLOB = 3 };

/* ---- store ----------------------------------------------------------------
 */

static int write_all(int fd, const uint8_t *p, uint64_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (uint64_t)w;
	}
	return 0;
}

static int dir_make(const char *path);
static int file_open(const char *path, int flags);

/* Writes the blob under a temporary name and renames it into place. */
static int blob_write(struct cache *c, const uint8_t *hash, uint64_t blob_id,
		      const uint8_t *data, uint64_t len)
{
	char hex[2 * HASH_LEN + 1], *tmp = NULL, *dir = NULL, *path = NULL;
	int fd = -1, rc;

	hash_hex(hash, hex);
	if (asprintf(&tmp, "%s/blobs/tmp/%s.%d.%" PRIu64, c->dir, hex,
		     (int)getpid(),
		     __atomic_add_fetch(&c->tmp_seq, 1, __ATOMIC_RELAXED)) <
		    0 ||
	    asprintf(&dir, "%s/blobs/%.2s", c->dir, hex) < 0 ||
	    asprintf(&path, "%s/%s.%016" PRIx64, dir, hex, blob_id) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	fd = file_open(tmp, O_WRONLY | O_CREAT | O_EXCL);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	rc = write_all(fd, data, len);
	if (rc == 0 && c->fsync && fdatasync(fd) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	fd = -1;
	if (rc == 0)
		rc = dir_make(dir);
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc != 0)
		unlink(tmp);
out:
	free(path);
	free(dir);
	free(tmp);
	return rc;
}

/* Writes the rows of pending chunks batch[0..n) in one transaction (one
 * sync for all of them), making room first. Returns the LMDB error, if
 * any; on error nothing of the batch is indexed. */
struct put_args {
	struct pending **batch;
	size_t n;
	bool *orphan;
};

static int batch_txn(struct cache *c, void *arg)
{
	struct put_args *a = arg;
	struct pending **batch = a->batch;
	bool *orphan = a->orphan;
	MDB_txn *txn = NULL;
	bool began;
	size_t i;
	int rc;

	rc = txn_begin(c, 0, &txn);
	began = rc == 0;
	for (i = 0; rc == 0 && i < a->n; i++) {
		struct pending *p = batch[i];
		MDB_val k = { HASH_LEN, p->hash }, v;

		if (__atomic_load_n(&p->dropped, __ATOMIC_ACQUIRE)) {
			orphan[i] = p->data == NULL;
			continue;
		}
		rc = mdb_get(txn, c->dbi_idx, &k, &v);
		if (rc == 0) {
			/* Stored first by another thread or process (same
			 * identity, same bytes), or a collision we leave
			 * alone: our blob file belongs to nobody. */
			orphan[i] = p->data == NULL;
			continue;
		}
		v.mv_size = p->val_len;
		v.mv_data = p->val;
		rc = mdb_put(txn, c->dbi_idx, &k, &v, 0);
		if (rc == 0 && p->data != NULL) {
			MDB_val d = { (size_t)p->len, p->data };

			rc = mdb_put(txn, c->dbi_data, &k, &d, 0);
		}
		if (rc == 0)
			rc = live_add(txn, c, (int64_t)p->len);
	}
	if (rc == 0)
		rc = txn_end(txn, true);
	else if (began)
		txn_end(txn, false);
	return rc;
}

static int batch_put(struct cache *c, struct pending **batch, size_t n)
{
	bool *orphan = calloc(n ? n : 1, sizeof(*orphan));
	uint64_t total = 0, target = c->budget / 10 * 9;
	struct put_args a = { batch, n, orphan };
	size_t i;
	int rc;

	if (orphan == NULL)
		return ENOMEM;
	for (i = 0; i < n; i++)
		total += batch[i]->len;
	if (live_bytes(c) + total > c->budget)
		evict_to(c, target > total ? target - total : 0);
	rc = guarded(c, batch_txn, &a);
	for (i = 0; i < n; i++)
		if (batch[i]->data == NULL && (rc != 0 || orphan[i]))
			blob_unlink(c, batch[i]->hash, batch[i]->blob_id);
	free(orphan);
	if (rc == 0 && live_bytes(c) > c->budget)
		evict_to(c, target); /* other processes stored meanwhile */
	return rc;
}

/* Whether DIR's filesystem is (nearly) full: LMDB reports a write cut
 * short by a full disk as EIO. */
static bool disk_full(const struct cache *c)
{
	struct statvfs sv;

	return statvfs(c->dir, &sv) == 0 &&
	       (uint64_t)sv.f_bavail * sv.f_frsize < 2 * c->chunk_size;
}

/* Indexes first..last (a run of the queue) in batches of at most half the
 * budget, so eviction can always make room for one. */
static void batch_commit(struct cache *c, struct pending *first,
			 struct pending *last)
{
	struct pending *p, **batch;
	size_t n = 0, i, start;
	uint64_t sum;
	int rc;

	for (p = first;; p = p->next) {
		n++;
		if (p == last)
			break;
	}
	batch = malloc(n * sizeof(*batch));
	if (batch == NULL) {
		stat_add(&c->store_failures, n);
		warn_limited(c, "cannot store chunks", -ENOMEM);
		return;
	}
	/* Not p = p->next after last: last->next is the tail's link, which
	 * chunk_store() writes under q_lock (see struct pending). */
	for (p = first, i = 0; i < n; i++) {
		batch[i] = p;
		if (p != last)
			p = p->next;
	}
	for (start = 0; start < n; start = i) {
		for (i = start, sum = 0;
		     i < n &&
		     (i == start || sum + batch[i]->len <= c->budget / 2);
		     i++)
			sum += batch[i]->len;
		rc = batch_put(c, batch + start, i - start);
		if (rc == EIO && disk_full(c))
			rc = ENOSPC; /* LMDB's word for a short write */
		if (rc != 0) {
			stat_add(&c->store_failures, i - start);
			if (rc != MDB_PANIC) /* logged once already */
				warn_limited(c, "cannot store chunks", rc);
		}
	}
	free(batch);
}

static void pending_free(struct pending *p)
{
	free(p->val);
	free(p->data);
	free(p);
}

/* Caller holds q_lock: is the queue worth a transaction now? */
static bool batch_full(const struct cache *c)
{
	return c->q_count >= COMMIT_BATCH || c->q_bytes >= c->q_max / 2;
}

/* The committer thread: indexes what chunk_store() queued, everything
 * queued so far in each round (waiting up to COMMIT_DELAY_MS for a batch
 * to gather), until cache_free() stops it. */
static void *committer_main(void *arg)
{
	struct cache *c = arg;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_setname_np(pthread_self(), "shardfs-commit");
	pthread_mutex_lock(&c->q_lock);
	for (;;) {
		struct pending *first, *last, *p, *next;
		uint64_t bytes = 0;
		unsigned count = 0;
		struct timespec deadline;

		while (c->q_head == NULL && !c->q_stop)
			pthread_cond_wait(&c->q_work, &c->q_lock);
		if (c->q_head == NULL)
			break;
		/* Let a batch gather: one transaction for many chunks, and
		 * one wake-up of this thread instead of one per chunk. */
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_nsec += COMMIT_DELAY_MS * 1000000L;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
		while (!c->q_stop && c->q_drainers == 0 && !batch_full(c))
			if (pthread_cond_timedwait(&c->q_work, &c->q_lock,
						   &deadline) == ETIMEDOUT)
				break;
		first = c->q_head;
		last = (struct pending *)((char *)c->q_tail -
					  offsetof(struct pending, next));
		c->q_busy = true;
		pthread_mutex_unlock(&c->q_lock);

		/* Items stay queued (and served from the queue) until
		 * their rows are committed. */
		batch_commit(c, first, last);

		pthread_mutex_lock(&c->q_lock);
		c->q_head = last->next;
		if (c->q_head == NULL)
			c->q_tail = &c->q_head;
		for (p = first;; p = p->next) {
			bytes += p->len;
			count++;
			if (p == last)
				break;
		}
		c->q_bytes -= bytes;
		c->q_count -= count;
		pthread_cond_broadcast(&c->q_idle);
		pthread_mutex_unlock(&c->q_lock);
		for (p = first;; p = next) {
			bool end = p == last;

			next = end ? NULL : p->next; /* see struct pending */
			pending_free(p);
			if (end)
				break;
		}
		pthread_mutex_lock(&c->q_lock);
		c->q_busy = false;
		pthread_cond_broadcast(&c->q_idle);
	}
	pthread_mutex_unlock(&c->q_lock);
	return NULL;
}

/* Waits until every chunk this process queued is indexed, and the
 * committer is done with them (idle: a process may fork right after, and
 * a thread in the allocator at a fork can leave its locks held in the
 * child under some allocators, e.g. AddressSanitizer's). */
static void pending_drain(struct cache *c)
{
	if (__atomic_load_n(&c->env_pid, __ATOMIC_ACQUIRE) != getpid())
		return; /* nothing was queued in this process */
	pthread_mutex_lock(&c->q_lock);
	c->q_drainers++;
	while ((c->q_head != NULL || c->q_busy) && c->committer_running) {
		pthread_cond_signal(&c->q_work);
		pthread_cond_wait(&c->q_idle, &c->q_lock);
	}
	c->q_drainers--;
	pthread_mutex_unlock(&c->q_lock);
}

/* Stores a fetched chunk: writes its blob (large chunks) now, and queues
 * its row for the committer thread, so the reader never waits for a
 * transaction's sync. Failures are counted and logged, never returned. */
static void chunk_store(struct cache *c, const uint8_t *hash, const uint8_t *id,
			size_t id_len, const uint8_t *data, uint64_t len)
{
	bool inl = len <= c->inline_max;
	struct entry_hdr h = { .version = ENTRY_VERSION,
			       .flags = inl ? ENTRY_INLINE : 0,
			       .length = len,
			       .n_crcs = n_blocks(len),
			       .id_len = (uint32_t)id_len };
	size_t crc_bytes = (size_t)h.n_crcs * 4;
	struct pending *p;
	uint32_t b;
	int rc;

	/* No chunk may flush half the cache; a read-only one stores none. */
	if (c->budget == 0 || len > c->budget / 2 || c->readonly)
		return;
	if (!index_ok(c)) {
		stat_add(&c->store_failures, 1); /* logged when it broke */
		return;
	}
	if (env_of(c) == NULL) {
		store_failed(c, ENXIO);
		return;
	}
	h.atime = h.ctime = now_seconds();
	if (!inl)
		h.blob_id = c->blob_seed + __atomic_add_fetch(&c->tmp_seq, 1,
							      __ATOMIC_RELAXED);
	p = calloc(1, sizeof(*p));
	if (p == NULL ||
	    (p->val = malloc(sizeof(h) + crc_bytes + id_len)) == NULL) {
		free(p);
		store_failed(c, -ENOMEM);
		return;
	}
	memcpy(p->hash, hash, HASH_LEN);
	p->val_len = sizeof(h) + crc_bytes + id_len;
	p->len = len;
	p->blob_id = h.blob_id;
	memcpy(p->val, &h, sizeof(h));
	for (b = 0; b < h.n_crcs; b++) {
		uint32_t crc = block_crc(data, len, b);

		memcpy(p->val + sizeof(h) + (size_t)b * 4, &crc, 4);
	}
	memcpy(p->val + sizeof(h) + crc_bytes, id, id_len);
	if (inl) {
		p->data = malloc(len);
		if (p->data == NULL) {
			pending_free(p);
			store_failed(c, -ENOMEM);
			return;
		}
		memcpy(p->data, data, len);
	} else {
		rc = blob_write(c, hash, h.blob_id, data, len);
		if (rc != 0) {
			pending_free(p);
			store_failed(c, rc);
			return;
		}
	}

	pthread_mutex_lock(&c->q_lock);
	while (c->q_bytes > c->q_max && c->committer_running)
		pthread_cond_wait(&c->q_idle, &c->q_lock);
	if (!c->committer_running &&
	    pthread_create(&c->committer, NULL, committer_main, c) == 0)
		c->committer_running = true;
	if (c->committer_running) {
		bool first = c->q_head == NULL;

		*c->q_tail = p;
		c->q_tail = &p->next;
		c->q_bytes += len;
		c->q_count++;
		if (first || batch_full(c))
			pthread_cond_signal(&c->q_work);
		p = NULL;
	}
	pthread_mutex_unlock(&c->q_lock);
	if (p != NULL) { /* no thread: index it here */
		batch_commit(c, p, p);
		pending_free(p);
	}
}

/* Serves [off, off + len) of a chunk still queued for indexing. Returns
 * LOOKUP_HIT (copied), LOOKUP_MISS (not queued), or LOOKUP_BLOB with e
 * filled for the caller to read the blob. */
static int pending_find(struct cache *c, const uint8_t *hash, const uint8_t *id,
			size_t id_len, uint64_t chunk_len, uint64_t off,
			size_t len, void *dst, struct entry *e)
{
	struct pending *p;
	int ret = LOOKUP_MISS;

	pthread_mutex_lock(&c->q_lock);
	for (p = c->q_head; p != NULL; p = p->next) {
		MDB_val v = { p->val_len, p->val };

		if (memcmp(p->hash, hash, HASH_LEN) != 0 ||
		    p->len != chunk_len ||
		    __atomic_load_n(&p->dropped, __ATOMIC_ACQUIRE))
			continue;
		if (entry_parse(&v, id, id_len, e) != 0)
			continue;
		if (p->data != NULL) {
			memcpy(dst, p->data + off, len);
			free(e->crcs);
			e->crcs = NULL;
			ret = LOOKUP_HIT;
		} else {
			ret = LOOKUP_BLOB;
		}
		break;
	}
	pthread_mutex_unlock(&c->q_lock);
	return ret;
}

/* A chunk found bad (missing blob, CRC) may still be queued: keeps the
 * committer from indexing it after the caller dropped its row. */
static void pending_drop(struct cache *c, const uint8_t *hash)
{
	struct pending *p;

	pthread_mutex_lock(&c->q_lock);
	for (p = c->q_head; p != NULL; p = p->next)
		if (memcmp(p->hash, hash, HASH_LEN) == 0)
			__atomic_store_n(&p->dropped, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->q_lock);
}

/* ---- lookup ---------------------------------------------------------------
 */

static bool crcs_ok(const uint8_t *data, uint64_t data_start, uint64_t length,
		    const uint32_t *crcs, uint32_t b0, uint32_t b1)
{
	uint32_t b;

	for (b = b0; b <= b1; b++) {
		uint64_t start = (uint64_t)b * CACHE_CRC_BLOCK;
		uint64_t n = length - start < CACHE_CRC_BLOCK ? length - start
							      : CACHE_CRC_BLOCK;

		if (crc32_update(0, data + (start - data_start), (size_t)n) !=
		    crcs[b])
			return false;
	}
	return true;
}

struct lookup_args {
	const uint8_t *hash, *id;
	size_t id_len;
	uint64_t chunk_len, off;
	size_t len;
	void *dst;
	uint32_t b0, b1;
	struct entry *e;
	int ret; /* LOOKUP_*: LOOKUP_BLOB to read the blob of *e */
};

/* The index part of chunk_lookup(): copies an inline entry's bytes. */
static int lookup_index(struct cache *c, void *arg)
{
	struct lookup_args *a = arg;
	MDB_val k = { HASH_LEN, (void *)a->hash }, v, d;
	MDB_txn *txn;
	int rc;

	a->ret = LOOKUP_MISS;
	rc = txn_begin(c, MDB_RDONLY, &txn);
	if (rc != 0)
		return rc;
	rc = mdb_get(txn, c->dbi_idx, &k, &v);
	if (rc != 0)
		goto out;
	rc = entry_parse(&v, a->id, a->id_len, a->e);
	if (rc == -ENOENT || rc == -ENOMEM) {
		rc = 0;
		goto out;
	}
	if (rc != 0 || a->e->h.length != a->chunk_len) {
		rc = 0;
		a->ret = LOOKUP_BAD;
		goto out;
	}
	if (!(a->e->h.flags & ENTRY_INLINE)) {
		a->ret = LOOKUP_BLOB;
		goto out;
	}
	rc = mdb_get(txn, c->dbi_data, &k, &d);
	if (rc != 0 && rc != MDB_NOTFOUND)
		goto out;
	if (rc != 0 || d.mv_size != a->chunk_len ||
	    !crcs_ok(d.mv_data, 0, a->chunk_len, a->e->crcs, a->b0, a->b1)) {
		a->ret = LOOKUP_BAD;
	} else {
		memcpy(a->dst, (uint8_t *)d.mv_data + a->off, a->len);
		a->ret = LOOKUP_HIT;
	}
	rc = 0;
out:
	txn_end(txn, false);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Serves [off, off + len) of a cached chunk of chunk_len bytes into dst.
 * A bad entry (CRC mismatch, short blob) is dropped and counted. */
static int chunk_lookup(struct cache *c, const uint8_t *hash, const uint8_t *id,
			size_t id_len, uint64_t chunk_len, uint64_t off,
			size_t len, void *dst)
{
	struct entry e = { .crcs = NULL };
	uint32_t b0 = (uint32_t)(off / CACHE_CRC_BLOCK);
	uint32_t b1 = (uint32_t)((off + len - 1) / CACHE_CRC_BLOCK);
	uint64_t start, end;
	uint8_t *scratch = NULL;
	char *path = NULL;
	int rc, fd, ret = LOOKUP_MISS;
	ssize_t got;

	if (env_of(c) == NULL)
		return LOOKUP_MISS;
	ret = pending_find(c, hash, id, id_len, chunk_len, off, len, dst, &e);
	if (ret == LOOKUP_HIT)
		return LOOKUP_HIT;
	if (ret == LOOKUP_BLOB) {
		ret = LOOKUP_MISS;
		goto blob;
	}
	{
		struct lookup_args a = { .hash = hash,
					 .id = id,
					 .id_len = id_len,
					 .chunk_len = chunk_len,
					 .off = off,
					 .len = len,
					 .dst = dst,
					 .b0 = b0,
					 .b1 = b1,
					 .e = &e };

		rc = guarded(c, lookup_index, &a);
		if (rc != 0) {
			if (rc != MDB_PANIC)
				warn_limited(c, "cannot read the index", rc);
			ret = LOOKUP_MISS;
			goto out;
		}
		ret = a.ret;
		if (ret != LOOKUP_BLOB)
			goto out;
		ret = LOOKUP_MISS;
	}

blob:
	/* A blob: read the whole CRC blocks that cover the range. */
	start = (uint64_t)b0 * CACHE_CRC_BLOCK;
	end = (uint64_t)(b1 + 1) * CACHE_CRC_BLOCK;
	if (end > chunk_len)
		end = chunk_len;
	path = blob_path(c, hash, e.h.blob_id);
	scratch = malloc(end - start);
	if (path == NULL || scratch == NULL)
		goto out;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* Evicted by another process, or removed: a miss. */
		if (errno == ENOENT) {
			pending_drop(c, hash);
			entry_drop(c, hash, id, id_len);
		}
		goto out;
	}
	got = pread(fd, scratch, end - start, (off_t)start);
	close(fd);
	if (got != (ssize_t)(end - start) ||
	    !crcs_ok(scratch, start, chunk_len, e.crcs, b0, b1)) {
		ret = LOOKUP_BAD;
		goto out;
	}
	memcpy(dst, scratch + (off - start), len);
	ret = LOOKUP_HIT;
out:
	if (ret == LOOKUP_BAD) {
		char hex[2 * HASH_LEN + 1];

		hash_hex(hash, hex);
		stat_add(&c->crc_failures, 1);
		log_msg(LOG_WARNING,
			"cache %s: entry %s failed its check (CRC or length); "
			"dropped, refetching",
			c->dir, hex);
		pending_drop(c, hash);
		entry_drop(c, hash, id, id_len);
	}
	if (ret == LOOKUP_HIT)
		touch(c, hash);
	free(scratch);
	free(path);
	free(e.crcs);
	return ret;
}

struct present_args {
	const uint8_t *hash, *id;
	size_t id_len;
	bool present;
};

static int present_index(struct cache *c, void *arg)
{
	struct present_args *a = arg;
	MDB_val k = { HASH_LEN, (void *)a->hash }, v;
	struct entry e = { .crcs = NULL };
	MDB_txn *txn;
	int rc = txn_begin(c, MDB_RDONLY, &txn);

	if (rc != 0)
		return rc;
	rc = mdb_get(txn, c->dbi_idx, &k, &v);
	if (rc == 0 && entry_parse(&v, a->id, a->id_len, &e) == 0)
		a->present = true;
	txn_end(txn, false);
	free(e.crcs);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static bool chunk_present(struct cache *c, const uint8_t *hash,
			  const uint8_t *id, size_t id_len)
{
	struct present_args a = { hash, id, id_len, false };
	bool present = false;
	struct pending *p;

	if (env_of(c) == NULL)
		return false;
	pthread_mutex_lock(&c->q_lock);
	for (p = c->q_head; p != NULL && !present; p = p->next)
		present = memcmp(p->hash, hash, HASH_LEN) == 0;
	pthread_mutex_unlock(&c->q_lock);
	if (present)
		return true;
	guarded(c, present_index, &a);
	return a.present;
}

/* ---- reads ------------------------------------------------------------------
 */

/* The fetch engine's read function: one backend request, counted. */
static int fetch_read(void *ctx, const char *key, size_t key_len,
		      const char *etag, size_t etag_len, uint64_t offset,
		      size_t len, void *buf, size_t *nread)
{
	struct cache *c = ctx;
	int rc;

	if (c->be == NULL)
		return -ENXIO;
	stat_add(&c->backend_reads, 1);
	rc = c->be->ops->read(c->be, key, key_len, etag, etag_len, offset, len,
			      buf, nread);
	if (rc < 0) {
		stat_add(&c->backend_errors, 1);
		return rc;
	}
	stat_add(&c->backend_bytes, *nread);
	return 0;
}

/* The fetch engine's completion: a whole chunk goes to the disk cache. */
static void fetch_done(void *ctx, const uint8_t *hash, const uint8_t *id,
		       size_t id_len, const uint8_t *data, uint64_t len)
{
	struct cache *c = ctx;

	if (c->disk)
		chunk_store(c, hash, id, id_len, data, len);
}

static void request_of(const struct cache *c, const struct cache_object *obj,
		       uint64_t n, uint64_t chunk_len, const uint8_t *hash,
		       const uint8_t *id, size_t id_len,
		       struct fetch_request *r)
{
	r->hash = hash;
	r->id = id;
	r->id_len = id_len;
	r->key = obj->key;
	r->key_len = obj->key_len;
	r->etag = obj->etag;
	r->etag_len = obj->etag_len;
	r->offset = n * c->chunk_size;
	r->len = chunk_len;
}

/* Fetches chunk n of obj (chunk_len bytes) through the engine, which
 * stores it, or joins its fetch in flight. With dst, copies [off, off +
 * len) into it (or, short of memory, reads just those bytes into it: see
 * fetch_get()). Returns len, -EAGAIN when the chunk may have been stored
 * since epoch was read (look it up again), or an error (-EIO when the
 * backend returned fewer bytes than asked). */
static ssize_t chunk_fetch(struct cache *c, const struct cache_object *obj,
			   uint64_t n, uint64_t chunk_len, const uint8_t *hash,
			   const uint8_t *id, size_t id_len, uint64_t epoch,
			   uint64_t off, size_t len, void *dst)
{
	struct fetch_request r;

	request_of(c, obj, n, chunk_len, hash, id, id_len, &r);
	return fetch_get(c->fetch, &r, epoch, off, dst != NULL ? len : 0, dst);
}

static ssize_t read_through(struct cache *c, const struct cache_object *obj,
			    uint64_t offset, size_t len, void *buf)
{
	size_t nread = 0;
	int rc;

	rc = fetch_slot_acquire(c->fetch);
	if (rc < 0) {
		log_msg(LOG_ERR,
			"cache: %.*s: no backend connection came free in time; "
			"failing the read at offset %llu",
			(int)obj->key_len, obj->key,
			(unsigned long long)offset);
		return rc;
	}
	rc = fetch_read(c, obj->key, obj->key_len, obj->etag, obj->etag_len,
			offset, len, buf, &nread);
	fetch_slot_release(c->fetch);
	if (rc < 0)
		return rc;
	if (nread != len) {
		/* Exactly the bytes asked for, or an error. */
		log_msg(LOG_ERR,
			"cache: %.*s: the backend returned %zu of %zu bytes at "
			"offset %llu; failing the read",
			(int)obj->key_len, obj->key, nread, len,
			(unsigned long long)offset);
		return -EIO;
	}
	return (ssize_t)len;
}

/* Bytes of chunk n of obj. */
static uint64_t chunk_len_of(const struct cache *c,
			     const struct cache_object *obj, uint64_t n)
{
	uint64_t cstart = n * c->chunk_size;

	return obj->size - cstart < c->chunk_size ? obj->size - cstart
						  : c->chunk_size;
}

/* Tries to serve one chunk's part from the disk cache, else fetches it
 * (once, however many readers want it at once). */
static ssize_t chunk_read(struct cache *c, const struct cache_object *obj,
			  uint64_t n, uint64_t in_off, size_t want, void *dst)
{
	uint64_t clen = chunk_len_of(c, obj, n);
	uint8_t hash[HASH_LEN], *id = NULL;
	struct fetch_request r;
	bool ready;
	size_t id_len;
	ssize_t got;
	int rc, tries;

	rc = ident_build(c, obj, n, &id, &id_len, hash);
	if (rc < 0)
		return rc;
	/* In flight or retained first: a prefetched chunk is served from
	 * memory, without the index or a CRC pass. */
	request_of(c, obj, n, clen, hash, id, id_len, &r);
	got = fetch_join(c->fetch, &r, in_off, want, dst, &ready);
	if (got != -ENOENT) {
		if (ready && got >= 0) {
			stat_add(&c->hits, 1);
			stat_add(&c->bytes_from_cache, (uint64_t)got);
		} else {
			stat_add(&c->misses, 1);
		}
		free(id);
		return got;
	}
	for (tries = 0;; tries++) {
		/* Read before the lookup: see fetch_epoch(). After a few
		 * rounds (a busy table), fetch without the check. */
		uint64_t epoch = tries < 3 ? fetch_epoch(c->fetch, hash)
					   : FETCH_NO_EPOCH;

		if (chunk_lookup(c, hash, id, id_len, clen, in_off, want,
				 dst) == LOOKUP_HIT) {
			stat_add(&c->hits, 1);
			stat_add(&c->bytes_from_cache, want);
			got = (ssize_t)want;
			break;
		}
		got = chunk_fetch(c, obj, n, clen, hash, id, id_len, epoch,
				  in_off, want, dst);
		if (got != -EAGAIN) {
			stat_add(&c->misses, 1);
			break;
		}
	}
	free(id);
	return got;
}

ssize_t cache_read(struct cache *c, const struct cache_object *obj,
		   uint64_t offset, size_t len, void *buf)
{
	size_t done = 0;

	if (offset >= obj->size)
		return 0;
	if (len > obj->size - offset)
		len = (size_t)(obj->size - offset);
	if (!c->disk)
		return read_through(c, obj, offset, len, buf);
	while (done < len) {
		uint64_t pos = offset + done, n = pos / c->chunk_size;
		uint64_t clen = chunk_len_of(c, obj, n);
		uint64_t in_off = pos - n * c->chunk_size;
		size_t want = clen - in_off < len - done
				      ? (size_t)(clen - in_off)
				      : len - done;
		ssize_t got;

		got = chunk_read(c, obj, n, in_off, want,
				 (uint8_t *)buf + done);
		if (got == -ENOMEM && done == 0) /* cannot even name it */
			return read_through(c, obj, offset, len, buf);
		if (got < 0)
			return got;
		if ((size_t)got != want) {
			/* The engine and the store serve whole ranges; a
			 * short count is a bug, never a shorter file. */
			log_msg(LOG_ERR,
				"cache: %.*s: chunk %llu gave %zd of %zu "
				"bytes; "
				"failing the read",
				(int)obj->key_len, obj->key,
				(unsigned long long)n, got, want);
			return -EIO;
		}
		done += want;
	}
	return (ssize_t)done;
}

int cache_fill(struct cache *c, const struct cache_object *obj,
	       uint64_t *fetched)
{
	uint64_t n, total = 0;

	if (fetched != NULL)
		*fetched = 0;
	if (!c->disk)
		return 0;
	for (n = 0; n * c->chunk_size < obj->size; n++) {
		uint64_t cstart = n * c->chunk_size;
		uint64_t clen = obj->size - cstart < c->chunk_size
					? obj->size - cstart
					: c->chunk_size;
		uint8_t hash[HASH_LEN], *id = NULL;
		size_t id_len;
		ssize_t got;
		int rc;

		uint64_t epoch;

		rc = ident_build(c, obj, n, &id, &id_len, hash);
		if (rc < 0)
			return rc;
		do {
			epoch = fetch_epoch(c->fetch, hash); /* see there */
			got = 1;
			if (chunk_present(c, hash, id, id_len))
				break;
			got = chunk_fetch(c, obj, n, clen, hash, id, id_len,
					  epoch, 0, 0, NULL);
		} while (got == -EAGAIN);
		free(id);
		if (got == 1)
			continue;
		stat_add(&c->misses, 1);
		if (got < 0)
			return (int)got;
		total += clen;
	}
	if (fetched != NULL)
		*fetched = total;
	return 0;
}

void cache_stats_get(struct cache *c, struct cache_stats *out)
{
	struct fetch_stats fs;

	memset(out, 0, sizeof(*out));
	out->backend_reads = stat_load(&c->backend_reads);
	out->backend_bytes = stat_load(&c->backend_bytes);
	out->backend_errors = stat_load(&c->backend_errors);
	fetch_stats_get(c->fetch, &fs);
	out->singleflight_waits = fs.singleflight_waits;
	out->prefetch_issued = stat_load(&c->pf_issued);
	out->prefetch_bytes = stat_load(&c->pf_bytes);
	out->prefetch_hits = stat_load(&c->pf_hits);
	out->prefetch_misses = stat_load(&c->pf_misses);
	out->prefetch_refused = fs.prefetch_refused;
	out->prefetch_depth = stat_load(&c->pf_depth);
	out->readahead_window_bytes = stat_load(&c->ra_window);
	out->memory_in_use_bytes = fs.memory_in_use;
	out->memory_high_water_bytes = fs.memory_high_water;
	out->memory_budget_bytes = fs.memory_budget;
	out->backend_inflight = fs.inflight;
	out->direct_reads = fs.direct_reads;
	out->hedges_issued = fs.hedges;
	out->hedges_won = fs.hedge_wins;
	if (!c->disk)
		return;
	pending_drain(c);
	out->enabled = true;
	out->hits = stat_load(&c->hits);
	out->misses = stat_load(&c->misses);
	out->bytes_from_cache = stat_load(&c->bytes_from_cache);
	out->evictions = stat_load(&c->evictions);
	out->crc_failures = stat_load(&c->crc_failures);
	out->store_failures = stat_load(&c->store_failures);
	out->live_bytes = live_bytes(c);
	out->budget_bytes = c->budget;
}

/* ---- prefetch ----------------------------------------------------------------
 */

void cache_set_fetch_options(struct cache *c,
			     const struct cache_fetch_options *o)
{
	struct fetch_stats fs;
	uint64_t memory, cap;

	fetch_set_limits(c->fetch, o->connections, o->memory);
	fetch_set_wait(c->fetch, o->wait_ms);
	fetch_set_hedge(c->fetch, !o->hedge_off);
	fetch_stats_get(c->fetch, &fs); /* the budget, defaults applied */
	memory = fs.memory_budget;
	/* Read-ahead and the committer's queue of inline bytes live in
	 * the same budget: neither may take more than a quarter of it. */
	cap = memory / 4;
	if (cap > PREFETCH_WINDOW_MAX)
		cap = PREFETCH_WINDOW_MAX;
	if (cap < PREFETCH_WINDOW_MIN)
		cap = PREFETCH_WINDOW_MIN;
	__atomic_store_n(&c->ra_cap, cap, __ATOMIC_RELAXED);
	__atomic_store_n(&c->pf_files, o->files, __ATOMIC_RELAXED);
	pthread_mutex_lock(&c->q_lock);
	c->q_max = memory / 4 < QUEUE_BYTES_MAX ? memory / 4 : QUEUE_BYTES_MAX;
	pthread_cond_broadcast(&c->q_idle);
	pthread_mutex_unlock(&c->q_lock);
}

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
static int prefetch_chunk(struct cache *c, const struct cache_object *obj,
			  uint64_t n)
{
	uint64_t clen = chunk_len_of(c, obj, n);
	uint8_t hash[HASH_LEN], *id = NULL;
	struct fetch_request r;
	uint64_t epoch;
	size_t id_len;
	int rc, tries;

	if (ident_build(c, obj, n, &id, &id_len, hash) < 0)
		return -ENOBUFS;
	request_of(c, obj, n, clen, hash, id, id_len, &r);
	for (tries = 0;; tries++) {
		/* See fetch_epoch(); after a few rounds, without it. */
		epoch = tries < 3 ? fetch_epoch(c->fetch, hash)
				  : FETCH_NO_EPOCH;
		rc = 1;
		if (fetch_in_flight(c->fetch, &r) ||
		    chunk_present(c, hash, id, id_len))
			break;
		rc = fetch_prefetch(c->fetch, &r, epoch);
		if (rc != -EAGAIN)
			break;
	}
	free(id);
	if (rc == 0) {
		stat_add(&c->pf_issued, 1);
		stat_add(&c->pf_bytes, clen);
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
		if (prefetch_chunk(c, &next, 0) < 0) {
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

ssize_t cache_file_read(struct cache_file *f, uint64_t offset, size_t len,
			void *buf)
{
	struct cache *c = f->c;
	const struct cache_object *obj = &f->obj;
	uint64_t from, to, n, last, end;

	if (!c->disk || offset >= obj->size || len == 0)
		return cache_read(c, obj, offset, len, buf);
	end = offset + len < obj->size ? offset + len : obj->size;
	pthread_mutex_lock(&f->lock);
	prefetch_window_read(&f->win, offset, end - offset, obj->size,
			     __atomic_load_n(&c->ra_cap, __ATOMIC_RELAXED),
			     &from, &to);
	__atomic_store_n(&c->ra_window, f->win.window, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
	/* Chunks the window reaches past the ones this read fetches. */
	n = (end - 1) / c->chunk_size + 1;
	if (from / c->chunk_size > n)
		n = from / c->chunk_size;
	last = from < to ? (to - 1) / c->chunk_size : 0;
	for (; from < to && n <= last; n++)
		if (prefetch_chunk(c, obj, n) < 0)
			break;
	return cache_read(c, obj, offset, len, buf);
}

ssize_t cache_file_read_ready(struct cache_file *f, uint64_t offset, size_t len,
			      void *buf)
{
	struct cache *c = f->c;
	const struct cache_object *obj = &f->obj;
	uint64_t n, clen, in_off;
	uint8_t hash[HASH_LEN], *id = NULL;
	struct fetch_request r;
	size_t id_len;
	ssize_t got;

	if (!c->disk || len == 0 || offset >= obj->size ||
	    len > obj->size - offset)
		return -ENOENT;
	n = offset / c->chunk_size;
	clen = chunk_len_of(c, obj, n);
	in_off = offset - n * c->chunk_size;
	if (len > clen - in_off)
		return -ENOENT; /* past its chunk */
	got = ident_build(c, obj, n, &id, &id_len, hash);
	if (got < 0)
		return got;
	request_of(c, obj, n, clen, hash, id, id_len, &r);
	got = fetch_peek(c->fetch, &r, in_off, len, buf);
	free(id);
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

/* ---- open, cleanup, close -------------------------------------------------
 */

/* Makes path 0700, exactly (umask-independent); an existing one is left
 * alone (perms_tighten() handles it). */
static int dir_make(const char *path)
{
	if (mkdir(path, 0700) == 0)
		return chmod(path, 0700) == 0 ? 0 : -errno;
	return errno == EEXIST ? 0 : -errno;
}

/* Creates path's missing parents (0755: they are not the cache's) and
 * path itself (0700). */
static int mkdir_p(const char *path)
{
	char *p = strdup(path), *s;
	int rc = 0;

	if (p == NULL)
		return -ENOMEM;
	for (s = p + 1; *s != '\0' && rc == 0; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			rc = -errno;
		*s = '/';
	}
	if (rc == 0)
		rc = dir_make(p);
	free(p);
	return rc;
}

/* Opens (creating 0600) a file of the cache; an existing one keeps its
 * mode (perms_tighten() handles it). */
static int file_open(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	return fd;
}

static int tighten_one(const char *path, const struct stat *st, int type,
		       struct FTW *ftw)
{
	(void)ftw;
	if ((type == FTW_F || type == FTW_D) && st->st_uid == geteuid() &&
	    (st->st_mode & 077) != 0)
		chmod(path, st->st_mode & 0700);
	return 0;
}

/* A cache made by an older shardfs (or by hand) may be readable by other
 * users: it holds dataset bytes the mount may deny them. When we own it,
 * take the group and other bits off everything in it, once. */
static void perms_tighten(struct cache *c)
{
	struct stat st, ist;
	char *index = NULL;
	bool loose;

	if (stat(c->dir, &st) != 0 || st.st_uid != geteuid())
		return;
	loose = (st.st_mode & 077) != 0;
	if (asprintf(&index, "%s/index.mdb", c->dir) >= 0 &&
	    stat(index, &ist) == 0 && ist.st_uid == geteuid() &&
	    (ist.st_mode & 077) != 0)
		loose = true;
	free(index);
	if (!loose)
		return;
	nftw(c->dir, tighten_one, 16, FTW_PHYS | FTW_MOUNT);
	log_msg(LOG_WARNING,
		"cache %s was readable by other users (mode %04o): made it "
		"0700 and its files 0600",
		c->dir, (unsigned)(st.st_mode & 07777));
}

/* LMDB writes its lock file through a shared mapping; on a full tmpfs a
 * write to an unallocated page of it is SIGBUS, not ENOSPC. Allocating it
 * first turns a full filesystem into an error at open. */
static int lock_file_prepare(const char *path)
{
	int fd = file_open(path, O_RDWR | O_CREAT), rc;
	struct stat st;

	if (fd < 0)
		return fd;
	rc = fstat(fd, &st) != 0 ? -errno : 0;
	if (rc == 0 && (uint64_t)st.st_size < LOCK_FILE_BYTES)
		rc = -posix_fallocate(fd, 0, LOCK_FILE_BYTES);
	else if (rc == 0)
		rc = -posix_fallocate(fd, 0, st.st_size);
	close(fd);
	return rc;
}

/* Takes owners.lock (op: LOCK_SH or LOCK_EX) without ever blocking for
 * good: any local user who can open the file could hold it forever. Polls
 * for LOCK_WAIT_SECONDS, then gives up with -ETIMEDOUT (logged, naming the
 * file). */
static int owners_lock(struct cache *c, const char *path, int op)
{
	struct timespec start, now, pause = { 0, 20 * 1000000L };

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if (flock(c->owners_fd, op | LOCK_NB) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return -errno;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 +
			    (now.tv_nsec - start.tv_nsec) / 1000000 >=
		    LOCK_WAIT_SECONDS * 1000)
			break;
		nanosleep(&pause, NULL);
	}
	log_msg(LOG_ERR,
		"cache %s: %s stayed locked by another process for %d s "
		"(a cache cleanup at open takes seconds, not this long); "
		"find the holder with `fuser -v %s` and stop it, or use "
		"another cache dir",
		c->dir, path, LOCK_WAIT_SECONDS, path);
	return -ETIMEDOUT;
}

static bool file_old(const struct stat *st)
{
	return (uint64_t)st->st_mtime + ORPHAN_GRACE_SECONDS < now_seconds();
}

/* Removes tmp files of writers that are gone. */
static void cleanup_tmp(struct cache *c, bool alone)
{
	char *dir = NULL;
	struct dirent *de;
	DIR *d;

	if (asprintf(&dir, "%s/blobs/tmp", c->dir) < 0)
		return;
	d = opendir(dir);
	while (d != NULL && (de = readdir(d)) != NULL) {
		const char *dot = strchr(de->d_name, '.');
		struct stat st;
		long pid = 0;

		if (de->d_name[0] == '.')
			continue;
		if (dot != NULL)
			pid = strtol(dot + 1, NULL, 10);
		if (!alone) {
			if (fstatat(dirfd(d), de->d_name, &st, 0) != 0)
				continue;
			if (!file_old(&st) && pid > 0 &&
			    !(kill((pid_t)pid, 0) != 0 && errno == ESRCH))
				continue;
		}
		unlinkat(dirfd(d), de->d_name, 0);
	}
	if (d != NULL)
		closedir(d);
	free(dir);
}

/* Drops rows whose blob is missing; when alone, also recounts live bytes
 * (it cannot drift, but this heals a foreign or damaged index). Returns
 * an LMDB error of the scan (damage is noticed here first). */
static int cleanup_rows_run(struct cache *c, void *arg)
{
	bool alone = *(const bool *)arg;
	uint8_t(*gone)[HASH_LEN] = NULL;
	size_t n = 0, cap = 0, i;
	uint64_t live = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *txn;
	int rc, op = MDB_FIRST;

	rc = txn_begin(c, MDB_RDONLY, &txn);
	if (rc != 0)
		return rc;
	rc = mdb_cursor_open(txn, c->dbi_idx, &cur);
	if (rc != 0) {
		txn_end(txn, false);
		return rc;
	}
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		struct entry_hdr h;
		bool bad = false;

		op = MDB_NEXT;
		if (k.mv_size != HASH_LEN || v.mv_size < sizeof(h)) {
			bad = true;
		} else {
			memcpy(&h, v.mv_data, sizeof(h));
			live += h.length;
			if (!(h.flags & ENTRY_INLINE)) {
				char *path = blob_path(c, k.mv_data, h.blob_id);
				struct stat st;

				bad = path != NULL && stat(path, &st) != 0 &&
				      errno == ENOENT;
				free(path);
			}
		}
		if (!bad || k.mv_size != HASH_LEN)
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			void *ng = realloc(gone, ncap * HASH_LEN);

			if (ng == NULL)
				break;
			gone = ng;
			cap = ncap;
		}
		memcpy(gone[n++], k.mv_data, HASH_LEN);
	}
	mdb_cursor_close(cur);
	txn_end(txn, false);
	if (rc != MDB_NOTFOUND && rc != 0)
		goto out;
	if (n == 0 && !alone)
		goto out;
	rc = txn_begin(c, 0, &txn);
	if (rc != 0)
		goto out;
	if (alone)
		rc = meta_put(txn, c, "live_bytes", live);
	for (i = 0; i < n && rc == 0; i++) {
		bool blob;
		uint64_t blob_id;

		rc = row_delete(txn, c, gone[i], NULL, 0, &blob, &blob_id);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (rc == 0)
		rc = txn_end(txn, true);
	else
		txn_end(txn, false);
	if (n > 0 && rc == 0)
		log_msg(LOG_INFO, "cache %s: dropped %zu rows without blobs",
			c->dir, n);
out:
	free(gone);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Whether a file in blobs/XX/ is the blob of a row: its name is
 * HASH.BLOBID and the row of HASH holds that blob id. */
struct ref_args {
	uint8_t hash[HASH_LEN];
	uint64_t blob_id;
	bool found;
};

static int blob_referenced_run(struct cache *c, void *arg)
{
	struct ref_args *a = arg;
	MDB_val k = { HASH_LEN, a->hash }, v;
	struct entry_hdr h;
	MDB_txn *txn;
	int rc = txn_begin(c, MDB_RDONLY, &txn);

	if (rc != 0)
		return rc;
	rc = mdb_get(txn, c->dbi_idx, &k, &v);
	if (rc == 0 && v.mv_size >= sizeof(h)) {
		memcpy(&h, v.mv_data, sizeof(h));
		a->found = !(h.flags & ENTRY_INLINE) && h.blob_id == a->blob_id;
	}
	txn_end(txn, false);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static bool blob_referenced(struct cache *c, const char *name)
{
	struct ref_args a = { .found = false };
	char *end;

	if (strlen(name) != 2 * HASH_LEN + 17 || name[2 * HASH_LEN] != '.' ||
	    hex_hash(name, a.hash) != 0)
		return false;
	a.blob_id = strtoull(name + 2 * HASH_LEN + 1, &end, 16);
	if (*end != '\0')
		return false;
	if (guarded(c, blob_referenced_run, &a) != 0)
		return true; /* when in doubt, keep the blob */
	return a.found;
}

/* Removes blobs without rows (when not alone, only old ones). */
static void cleanup_blobs(struct cache *c, bool alone)
{
	char *root = NULL;
	struct dirent *sub;
	size_t removed = 0;
	DIR *top;

	if (asprintf(&root, "%s/blobs", c->dir) < 0)
		return;
	top = opendir(root);
	while (top != NULL && (sub = readdir(top)) != NULL) {
		struct dirent *de;
		DIR *d;
		int fd;

		if (strlen(sub->d_name) != 2 || !strcmp(sub->d_name, ".."))
			continue;
		fd = openat(dirfd(top), sub->d_name,
			    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		d = fdopendir(fd);
		if (d == NULL) {
			close(fd);
			continue;
		}
		while ((de = readdir(d)) != NULL) {
			struct stat st;

			if (de->d_name[0] == '.')
				continue;
			if (blob_referenced(c, de->d_name))
				continue;
			if (!alone &&
			    (fstatat(dirfd(d), de->d_name, &st, 0) != 0 ||
			     !file_old(&st)))
				continue;
			if (unlinkat(dirfd(d), de->d_name, 0) == 0)
				removed++;
		}
		closedir(d);
	}
	if (top != NULL)
		closedir(top);
	if (removed > 0)
		log_msg(LOG_INFO, "cache %s: removed %zu blobs without rows",
			c->dir, removed);
	free(root);
}

static int dbis_open(struct cache *c, void *arg)
{
	unsigned flags = c->readonly ? 0 : MDB_CREATE;
	MDB_txn *txn;
	int rc;

	(void)arg;
	rc = txn_begin_on(c, c->env, c->readonly ? MDB_RDONLY : 0, &txn);
	if (rc != 0)
		return rc;
	rc = mdb_dbi_open(txn, "idx", flags, &c->dbi_idx);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "data", flags, &c->dbi_data);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "meta", flags, &c->dbi_meta);
	if (rc == 0) /* even read-only: an abort forgets the handles */
		rc = txn_end(txn, true);
	else
		txn_end(txn, false);
	return rc;
}

/* Also after a fault: the faulting transaction was aborted, and what is
 * left (the map, the files, this process' reader slots) closes as
 * usual. */
static void env_close(struct cache *c)
{
	if (c->env != NULL)
		mdb_env_close(c->env);
	c->env = NULL;
}

/* Opens the environment at path and its databases. Returns 0 or an LMDB
 * code (an errno value or MDB_*), logged by the caller. */
static int env_open(struct cache *c, const char *path)
{
	unsigned flags =
		MDB_NOSUBDIR | MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC;
	int rc;

	if (c->readonly)
		flags |= MDB_RDONLY;
	for (;;) {
		rc = mdb_env_create(&c->env);
		if (rc != 0) {
			c->env = NULL;
			return rc;
		}
		mdb_env_set_maxdbs(c->env, 4);
		mdb_env_set_assert(c->env, mdb_assert_cb);
		mdb_env_set_mapsize(c->env, (size_t)MAP_SIZE);
		mdb_env_set_maxreaders(c->env, MAX_READERS);
		/* NOMETASYNC: each commit syncs its data pages but not the
		 * meta page, so a system crash may lose the last commit,
		 * never the index. */
		rc = mdb_env_open(c->env, path, flags, 0600);
		if (rc == 0)
			break;
		mdb_env_close(c->env);
		c->env = NULL;
		/* A read-only cache whose lock file we may not open: read
		 * without LMDB's locks (nobody may write it through us). */
		if (!c->readonly || (flags & MDB_NOLOCK) ||
		    (rc != EACCES && rc != EROFS))
			return rc;
		flags |= MDB_NOLOCK;
	}
	if (!c->readonly)
		mdb_reader_check(c->env, NULL);
	rc = guarded(c, dbis_open, NULL);
	if (rc != 0)
		env_close(c);
	return rc;
}

/* The deep check of the open index, in a read transaction so that the
 * pages it walks stay put while other processes write. */
struct deep_args {
	int fd;
	char *why;
	size_t why_len;
	int result; /* index_check_tree()'s */
};

static int index_deep_run(struct cache *c, void *arg)
{
	struct deep_args *a = arg;
	MDB_txn *txn;
	int rc, tries;

	for (tries = 0; tries < 5; tries++) {
		rc = txn_begin_on(c, c->env, MDB_RDONLY, &txn);
		if (rc != 0)
			return rc;
		a->result = index_check_tree(a->fd, mdb_txn_id(txn), a->why,
					     a->why_len);
		txn_end(txn, false);
		if (a->result != -EAGAIN)
			break;
	}
	return 0;
}

/* Moves a damaged index aside (one old copy kept, for a post-mortem),
 * with its lock file: processes still using them keep their own. */
static void index_move_aside(struct cache *c, const char *why)
{
	char *aside = NULL, *lock = NULL;
	struct dirent *de;
	DIR *d = opendir(c->dir);

	while (d != NULL && (de = readdir(d)) != NULL)
		if (!strncmp(de->d_name, "index.mdb.corrupt-", 18))
			unlinkat(dirfd(d), de->d_name, 0);
	if (d != NULL)
		closedir(d);
	if (asprintf(&aside, "%s/index.mdb.corrupt-%llu", c->dir,
		     (unsigned long long)now_seconds()) < 0)
		aside = NULL;
	if (asprintf(&lock, "%s-lock", c->index_path) >= 0)
		unlink(lock);
	if (aside == NULL || rename(c->index_path, aside) != 0)
		unlink(c->index_path);
	log_msg(LOG_ERR,
		"cache %s: the index %s is damaged (%s): moved it aside to "
		"%s and started a fresh one; its chunks will be fetched again",
		c->dir, c->index_path, why, aside ? aside : "(removed)");
	free(lock);
	free(aside);
}

/* Opens c->index_path after checking it against its own structure: the
 * meta pages and file size before LMDB maps it, then every branch and
 * leaf page (index_check.h). A damaged index is moved aside and a fresh
 * one started when may_move, else it is an error (-EIO, logged). */
static int index_open(struct cache *c, bool may_move)
{
	char why[256];
	int attempt, rc, fd;

	for (attempt = 0; attempt < 2; attempt++) {
		struct deep_args a = { .why = why, .why_len = sizeof(why) };

		why[0] = '\0';
		fd = open(c->index_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && errno != ENOENT) {
			rc = -errno;
			log_msg(LOG_WARNING, "cache %s: cannot open %s: %s",
				c->dir, c->index_path, strerror(-rc));
			return rc;
		}
		rc = fd < 0 ? 0 : index_check_meta(fd, why, sizeof(why));
		if (rc == 0) {
			rc = env_open(c, c->index_path);
			if (rc == MDB_PANIC) /* a fault: the guard said why */
				snprintf(why, sizeof(why), "a fault in LMDB");
			else if (mdb_damaged(rc))
				snprintf(why, sizeof(why), "%s",
					 mdb_strerror(rc));
			else if (rc != 0) {
				log_msg(LOG_WARNING,
					"cache %s: cannot open the index %s: "
					"%s",
					c->dir, c->index_path, err_str(rc));
				if (fd >= 0)
					close(fd);
				return mdb_err(rc);
			}
			rc = rc != 0 ? 1 : 0;
		}
		if (rc == 0 && fd >= 0) {
			a.fd = fd;
			rc = guarded(c, index_deep_run, &a);
			if (rc == 0)
				rc = a.result;
			else if (!mdb_damaged(rc))
				rc = -EAGAIN; /* e.g. ENOMEM, readers full:
					       * not the file's fault */
			if (rc != 0 && why[0] == '\0')
				snprintf(why, sizeof(why), "%s", err_str(rc));
			if (rc < 0 && rc != -ENOMEM && rc != -EAGAIN)
				rc = 1;
			else if (rc < 0)
				rc = 0; /* could not check: LMDB's own checks */
			if (rc != 0)
				env_close(c);
		}
		if (fd >= 0)
			close(fd);
		if (rc == 0)
			return 0;
		/* Damaged. A fault at open is forgotten with the old file. */
		__atomic_store_n(&c->broken, false, __ATOMIC_RELEASE);
		if (!may_move || c->readonly || attempt > 0) {
			log_msg(LOG_ERR,
				"cache %s: the index %s is damaged (%s); "
				"`shardfs cache clear %s` or the next mount "
				"starts a fresh one",
				c->dir, c->index_path, why, c->dir);
			return -EIO;
		}
		index_move_aside(c, why);
	}
	return -EIO;
}

static int budget_compute(const struct cache_options *o, uint64_t *out)
{
	struct statvfs sv;

	if (o->size_bytes > 0 || o->size_percent == 0) {
		*out = o->size_bytes;
		return 0;
	}
	if (statvfs(o->dir, &sv) != 0)
		return -errno;
	*out = (uint64_t)sv.f_blocks * sv.f_frsize / 100 * o->size_percent;
	return 0;
}

static struct cache *cache_alloc(struct backend *be)
{
	struct cache *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->be = be;
	c->owners_fd = -1;
	if (fetch_new(0, 0, fetch_read, fetch_done, c, &c->fetch) < 0) {
		free(c);
		return NULL;
	}
	c->pf_files = PREFETCH_FILES_DEFAULT;
	c->ra_cap = PREFETCH_WINDOW_MAX;
	c->q_max = QUEUE_BYTES_MAX;
	pthread_mutex_init(&c->pf_lock, NULL);
	pthread_mutex_init(&c->files_lock, NULL);
	pthread_mutex_init(&c->touch_lock, NULL);
	pthread_mutex_init(&c->evict_lock, NULL);
	pthread_mutex_init(&c->warn_lock, NULL);
	pthread_mutex_init(&c->env_lock, NULL);
	pthread_mutex_init(&c->q_lock, NULL);
	pthread_cond_init(&c->q_work, NULL);
	pthread_cond_init(&c->q_idle, NULL);
	c->q_tail = &c->q_head;
	return c;
}

int cache_new(struct backend *be, struct cache **out)
{
	struct cache *c = cache_alloc(be);

	if (c == NULL)
		return -ENOMEM;
	*out = c;
	return 0;
}

/* Records the budget and chunk size of this opener (cache stat). */
static int meta_record(struct cache *c, void *arg)
{
	const uint64_t *v = arg;
	MDB_txn *txn;
	int rc = txn_begin(c, 0, &txn);

	if (rc != 0)
		return rc;
	rc = meta_put(txn, c, "budget", v[0]);
	if (rc == 0)
		rc = meta_put(txn, c, "chunk_size", v[1]);
	if (rc == 0)
		return txn_end(txn, true);
	txn_end(txn, false);
	return rc;
}

/* Whether DIR holds an index we may read but not write (a read-only
 * mount, or a directory without write permission for us). */
static bool dir_readonly(const char *dir, const char *index)
{
	struct stat st;

	if (access(dir, W_OK) == 0 || (errno != EROFS && errno != EACCES))
		return false;
	return stat(index, &st) == 0 && st.st_size > 0;
}

int cache_open(const struct cache_options *opts, struct backend *be,
	       struct cache **out)
{
	struct cache *c = cache_alloc(be);
	char *path = NULL, *lock = NULL, *sub = NULL;
	const char *id = opts->backend_id ? opts->backend_id : "";
	bool alone = false, inspect = opts->inspect;
	int rc;

	if (c == NULL)
		return -ENOMEM;
	c->dir = strdup(opts->dir);
	c->backend_id = strdup(id);
	c->backend_id_len = strlen(id);
	c->chunk_size =
		opts->chunk_size ? opts->chunk_size : CACHE_CHUNK_SIZE_DEFAULT;
	c->inline_max = opts->inline_max_set ? opts->inline_max
					     : CACHE_INLINE_MAX_DEFAULT;
	if (c->inline_max > c->chunk_size)
		c->inline_max = c->chunk_size;
	c->fsync = opts->fsync;
	c->last_flush = time(NULL);
	if (getrandom(&c->blob_seed, sizeof(c->blob_seed), 0) !=
	    sizeof(c->blob_seed))
		c->blob_seed = (uint64_t)time(NULL) << 32 ^ (uint64_t)getpid()
								    << 16;
	if (c->dir == NULL || c->backend_id == NULL ||
	    asprintf(&path, "%s/index.mdb", opts->dir) < 0 ||
	    asprintf(&lock, "%s/index.mdb-lock", opts->dir) < 0 ||
	    asprintf(&sub, "%s/owners.lock", opts->dir) < 0) {
		rc = -ENOMEM;
		goto fail;
	}
	c->index_path = path;
	path = NULL;
	c->readonly = dir_readonly(opts->dir, c->index_path);
	if (c->readonly) {
		inspect = true; /* no cleanup, no eviction */
		log_msg(LOG_WARNING,
			"cache %s is read-only (%s): serving the chunks it "
			"holds, storing nothing",
			opts->dir, strerror(errno == EROFS ? EROFS : EACCES));
	} else {
		char *blobs = NULL, *tmp = NULL;

		rc = mkdir_p(opts->dir);
		if (rc == 0 && (asprintf(&blobs, "%s/blobs", opts->dir) < 0 ||
				asprintf(&tmp, "%s/blobs/tmp", opts->dir) < 0))
			rc = -ENOMEM;
		if (rc == 0)
			rc = dir_make(blobs);
		if (rc == 0)
			rc = dir_make(tmp);
		free(blobs);
		free(tmp);
		if (rc < 0) {
			log_msg(LOG_WARNING, "cache %s: cannot create it: %s",
				opts->dir, strerror(-rc));
			goto fail;
		}
		perms_tighten(c);
	}
	rc = budget_compute(opts, &c->budget);
	if (rc < 0)
		goto fail_dir;
	rc = file_open(sub, c->readonly ? O_RDONLY : O_RDWR | O_CREAT);
	if (rc < 0 && !(c->readonly && rc == -ENOENT))
		goto fail_dir;
	c->owners_fd = rc;
	if (c->owners_fd >= 0) {
		if (!inspect && flock(c->owners_fd, LOCK_EX | LOCK_NB) == 0)
			alone = true;
		else if ((rc = owners_lock(c, sub, LOCK_SH)) < 0)
			goto fail; /* logged */
	}
	if (!c->readonly) {
		rc = lock_file_prepare(lock);
		if (rc < 0)
			goto fail_dir;
	}
	rc = index_open(c, !opts->inspect || opts->repair);
	if (rc < 0)
		goto fail;
	c->env_pid = getpid();
	c->disk = true;
	c->opened = true;
	if (!inspect) {
		uint64_t meta[2] = { c->budget, c->chunk_size };

		guarded(c, meta_record, meta);
		cleanup_tmp(c, alone);
		if (guarded(c, cleanup_rows_run, &alone) == 0)
			cleanup_blobs(c, alone);
		if (c->budget > 0 && live_bytes(c) > c->budget)
			evict_to(c, c->budget / 10 * 9);
	}
	if (alone)
		flock(c->owners_fd, LOCK_SH);
	free(sub);
	free(lock);
	*out = c;
	return 0;
fail_dir:
	log_msg(LOG_WARNING, "cache %s: %s", opts->dir, strerror(-rc));
fail:
	free(sub);
	free(lock);
	free(path);
	cache_free(c);
	return rc;
}

void cache_free(struct cache *c)
{
	if (c == NULL)
		return;
	/* First: its workers store what they fetch. */
	fetch_free(c->fetch);
	c->fetch = NULL;
	if (c->disk &&
	    __atomic_load_n(&c->env_pid, __ATOMIC_ACQUIRE) == getpid()) {
		pthread_mutex_lock(&c->q_lock);
		c->q_stop = true;
		pthread_cond_signal(&c->q_work);
		pthread_mutex_unlock(&c->q_lock);
		if (c->committer_running)
			pthread_join(c->committer, NULL);
		touches_flush(c);
	}
	env_close(c);
	if (c->owners_fd >= 0)
		close(c->owners_fd);
	free(c->touched);
	free(c->orders);
	while (c->files != NULL)
		cache_file_close(c->files);
	pthread_mutex_destroy(&c->files_lock);
	pthread_mutex_destroy(&c->pf_lock);
	pthread_mutex_destroy(&c->touch_lock);
	pthread_mutex_destroy(&c->evict_lock);
	pthread_mutex_destroy(&c->warn_lock);
	pthread_mutex_destroy(&c->env_lock);
	pthread_mutex_destroy(&c->q_lock);
	pthread_cond_destroy(&c->q_work);
	pthread_cond_destroy(&c->q_idle);
	free(c->index_path);
	free(c->backend_id);
	free(c->dir);
	free(c);
}

/* ---- stat, verify, clear ----------------------------------------------------
 */

static int info_run(struct cache *c, void *arg)
{
	struct cache_info *out = arg;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *txn;
	int rc, op = MDB_FIRST;

	rc = txn_begin(c, MDB_RDONLY, &txn);
	if (rc != 0)
		return rc;
	meta_get(txn, c, "live_bytes", &out->live_bytes);
	meta_get(txn, c, "budget", &out->budget_bytes);
	meta_get(txn, c, "chunk_size", &out->chunk_size);
	rc = mdb_cursor_open(txn, c->dbi_idx, &cur);
	if (rc != 0) {
		txn_end(txn, false);
		return rc;
	}
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		struct entry_hdr h;

		op = MDB_NEXT;
		out->entries++;
		if (v.mv_size < sizeof(h))
			continue;
		memcpy(&h, v.mv_data, sizeof(h));
		if (h.flags & ENTRY_INLINE)
			out->inline_entries++;
		else
			out->blob_entries++;
	}
	mdb_cursor_close(cur);
	txn_end(txn, false);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int cache_info(struct cache *c, struct cache_info *out)
{
	struct stat st;
	char *path;

	memset(out, 0, sizeof(*out));
	if (!c->disk)
		return -EINVAL;
	pending_drain(c);
	if (guarded(c, info_run, out) != 0)
		return -EIO; /* logged */
	if (asprintf(&path, "%s/index.mdb", c->dir) >= 0) {
		if (stat(path, &st) == 0)
			out->data_file_bytes = (uint64_t)st.st_size;
		free(path);
	}
	return 0;
}

/* Checks one entry; returns NULL if good, else the reason. */
static const char *entry_check(struct cache *c, MDB_txn *txn, const MDB_val *k,
			       const MDB_val *v, struct entry *e)
{
	uint8_t hash[HASH_LEN], *buf;
	const uint8_t *id;
	unsigned md_len = 0;
	MDB_val d;
	uint64_t pos;
	char *path;
	struct stat st;
	const char *why = NULL;
	int fd;

	if (k->mv_size != HASH_LEN || entry_parse(v, NULL, 0, e) != 0)
		return "malformed row";
	id = (const uint8_t *)v->mv_data + sizeof(e->h) +
	     (size_t)e->h.n_crcs * 4;
	if (!EVP_Digest(id, e->h.id_len, hash, &md_len, EVP_sha256(), NULL) ||
	    memcmp(hash, k->mv_data, HASH_LEN) != 0)
		return "identity does not match its hash";
	if (e->h.flags & ENTRY_INLINE) {
		if (mdb_get(txn, c->dbi_data, (MDB_val *)k, &d) != 0)
			return "inline bytes missing";
		if (d.mv_size != e->h.length)
			return "length mismatch";
		if (e->h.length > 0 && !crcs_ok(d.mv_data, 0, e->h.length,
						e->crcs, 0, e->h.n_crcs - 1))
			return "crc mismatch";
		return NULL;
	}
	path = blob_path(c, k->mv_data, e->h.blob_id);
	buf = malloc(CACHE_CRC_BLOCK);
	fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (path == NULL || buf == NULL)
		why = "out of memory";
	else if (fd < 0)
		why = errno == ENOENT ? "blob missing" : "blob unreadable";
	else if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != e->h.length)
		why = "blob length mismatch";
	for (pos = 0; why == NULL && pos < e->h.length;
	     pos += CACHE_CRC_BLOCK) {
		size_t n = e->h.length - pos < CACHE_CRC_BLOCK
				   ? (size_t)(e->h.length - pos)
				   : CACHE_CRC_BLOCK;

		if (pread(fd, buf, n, (off_t)pos) != (ssize_t)n)
			why = "blob unreadable";
		else if (crc32_update(0, buf, (size_t)n) !=
			 e->crcs[pos / CACHE_CRC_BLOCK])
			why = "crc mismatch";
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	free(path);
	return why;
}

static char *dup_part(const uint8_t *p, size_t len)
{
	char *s = malloc(len + 1);

	if (s != NULL) {
		memcpy(s, p, len);
		s[len] = '\0';
	}
	return s;
}

struct verify_args {
	cache_bad_cb cb;
	void *arg;
	uint64_t *checked;
	int bad;
};

static int verify_run(struct cache *c, void *varg)
{
	struct verify_args *va = varg;
	cache_bad_cb cb = va->cb;
	void *arg = va->arg;
	uint64_t *checked = va->checked;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *txn;
	int rc, op = MDB_FIRST;

	rc = txn_begin(c, MDB_RDONLY, &txn);
	if (rc != 0)
		return rc;
	rc = mdb_cursor_open(txn, c->dbi_idx, &cur);
	if (rc != 0) {
		txn_end(txn, false);
		return rc;
	}
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		struct entry e = { .crcs = NULL };
		const char *why;

		op = MDB_NEXT;
		(*checked)++;
		why = entry_check(c, txn, &k, &v, &e);
		if (why != NULL) {
			struct cache_bad_entry b = { .reason = why };
			const uint8_t *part[3] = { NULL, NULL, NULL };
			size_t part_len[3] = { 0, 0, 0 };
			char hex[2 * HASH_LEN + 1] = "";
			char *s[3] = { NULL, NULL, NULL };
			int i;

			if (k.mv_size == HASH_LEN)
				hash_hex(k.mv_data, hex);
			if (v.mv_size >= sizeof(e.h) &&
			    v.mv_size == sizeof(e.h) + (size_t)e.h.n_crcs * 4 +
						 e.h.id_len)
				ident_parse((const uint8_t *)v.mv_data +
						    sizeof(e.h) +
						    (size_t)e.h.n_crcs * 4,
					    e.h.id_len, part, part_len,
					    &b.chunk);
			for (i = 0; i < 3; i++)
				s[i] = dup_part(part[i] ? part[i]
							: (const uint8_t *)"",
						part_len[i]);
			b.hash_hex = hex;
			b.backend_id = s[0] ? s[0] : "";
			b.key = s[1] ? s[1] : "";
			b.etag = s[2] ? s[2] : "";
			va->bad++;
			if (cb != NULL)
				cb(arg, &b);
			for (i = 0; i < 3; i++)
				free(s[i]);
		}
		free(e.crcs);
	}
	mdb_cursor_close(cur);
	txn_end(txn, false);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int cache_verify(struct cache *c, cache_bad_cb cb, void *arg, uint64_t *checked)
{
	struct verify_args va = { cb, arg, checked, 0 };

	*checked = 0;
	if (!c->disk)
		return -EINVAL;
	pending_drain(c);
	if (guarded(c, verify_run, &va) != 0)
		return -EIO; /* logged */
	return va.bad;
}

static int clear_run(struct cache *c, void *arg)
{
	MDB_txn *txn;
	int rc;

	(void)arg;
	rc = txn_begin(c, 0, &txn);
	if (rc != 0)
		return rc;
	rc = mdb_drop(txn, c->dbi_idx, 0);
	if (rc == 0)
		rc = mdb_drop(txn, c->dbi_data, 0);
	if (rc == 0)
		rc = meta_put(txn, c, "live_bytes", 0);
	if (rc == 0)
		return txn_end(txn, true);
	txn_end(txn, false);
	return rc;
}

int cache_clear(struct cache *c)
{
	char *root = NULL;
	struct dirent *sub;
	DIR *top;
	int rc;

	if (!c->disk)
		return -EINVAL;
	pending_drain(c);
	pthread_mutex_lock(&c->touch_lock);
	c->n_touched = 0;
	pthread_mutex_unlock(&c->touch_lock);
	rc = guarded(c, clear_run, NULL);
	if (rc != 0)
		return mdb_err(rc);
	if (asprintf(&root, "%s/blobs", c->dir) < 0)
		return -ENOMEM;
	top = opendir(root);
	while (top != NULL && (sub = readdir(top)) != NULL) {
		struct dirent *de;
		DIR *d;
		int fd;

		if (strlen(sub->d_name) != 2 || !strcmp(sub->d_name, ".."))
			continue;
		fd = openat(dirfd(top), sub->d_name,
			    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		d = fdopendir(fd);
		if (d == NULL) {
			close(fd);
			continue;
		}
		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] != '.')
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	if (top != NULL)
		closedir(top);
	free(root);
	top = opendir(c->dir);
	while (top != NULL && (sub = readdir(top)) != NULL)
		if (!strncmp(sub->d_name, "index.mdb.corrupt-", 18))
			unlinkat(dirfd(top), sub->d_name, 0);
	if (top != NULL)
		closedir(top);
	return 0;
}
