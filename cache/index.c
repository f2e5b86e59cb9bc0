/*
 * index: the LMDB environment of this process, its transactions, the
 * fault guard around every one of them, the tables' reads and writes,
 * and opening (checking, moving aside) the index file. The only file of
 * shardfs that includes lmdb.h: what leaves it is a negative errno (LMDB's
 * codes are mapped in index_code()) and borrowed bytes. It calls no file
 * of cache/ that uses it: a row it deletes says which blob the caller
 * unlinks (index_row_delete()), and what else must start afresh in a
 * forked process is the caller's hook (index_open()).
 *
 * About 770 lines, past the usual 700, for that reason: every use of the
 * LMDB API is here, so its error codes, fault guard and per-process
 * environment are handled in one place; the callers' logic is not.
 */
#include "cache/cache_impl.h"

#include <lmdb.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/fault_guard.h"
#include "cache/index_check.h"
#include "util/log.h"
#include "util/thread.h"

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

/* This process' environment: (re)opened by index_env() on first use in
 * a new process (`shardfs mount` without -f forks after opening, and
 * LMDB's locks and reader slots belong to the process that opened the
 * environment). */
struct index {
	pthread_mutex_t lock; /* protects env, the dbis and pid changes */
	MDB_env *env;
	MDB_dbi dbi[INDEX_TABLES]; /* idx, data */
	MDB_dbi dbi_meta;
	pid_t pid;		/* atomic: the process env belongs to */
	index_forked_fn forked; /* index_open()'s, for a new process */
};

/* LMDB returns errno values (positive) and its own codes MDB_KEYEXIST
 * (-30799) .. MDB_LAST_ERRCODE. One place turns any of them into text
 * and into an errno. */
static bool index_mdb_code(int rc)
{
	return rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE;
}

const char *index_strerror(int rc)
{
	if (rc == INDEX_BROKEN)
		return "the index is damaged";
	if (index_mdb_code(rc))
		return mdb_strerror(rc);
	return strerror(rc < 0 ? -rc : rc);
}

/* Codes that mean the index file cannot be trusted. */
static bool index_damaged(int rc)
{
	return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
	       rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ||
	       rc == MDB_PANIC;
}

/* Any LMDB code or errno to a negative errno (INDEX_BROKEN as -EIO). */
int index_errno(int rc)
{
	if (rc == 0)
		return 0;
	if (rc == INDEX_BROKEN)
		return -EIO;
	if (!index_mdb_code(rc))
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
		return -EIO; /* damaged (index_damaged()) or a bug */
	}
}

static void index_broken(struct cache *c, const char *why);

/* What leaves this file: an LMDB result as a negative errno; damage marks
 * the index broken (logged there once) and is INDEX_BROKEN. */
static int index_code(struct cache *c, int rc)
{
	if (index_damaged(rc)) {
		index_broken(c, mdb_strerror(rc));
		return INDEX_BROKEN;
	}
	return index_errno(rc);
}

/* ---- the fault guard -----------------------------------------------------
 *
 * LMDB reads the index through a shared mapping and trusts its pages. A
 * page damaged after the check at open, or the file truncated by someone
 * else while we serve, would kill the process with SIGSEGV or SIGBUS
 * inside LMDB. So every LMDB transaction runs inside index_guarded(), through
 * fault_guard.h: after a fault it aborts the thread's transaction
 * (releasing LMDB's writer lock, which other processes wait for), marks
 * the index broken and returns INDEX_BROKEN.
 *
 * Only LMDB calls and reads of LMDB values run armed, and no mutex of ours
 * is held while the map is read, so a jump never leaves one locked (a
 * nested index_guarded() call, e.g. eviction under evict.lock, catches its own
 * faults). A thread runs at most one transaction at a time (STYLE.md):
 * guard_txn is it, and the handle index_begin() gives out.
 */
struct index_txn {
	struct cache *c;
	MDB_txn *txn; /* NULL: none */
};

static __thread struct index_txn guard_txn;

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

bool index_ok(const struct cache *c)
{
	return !__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE);
}

struct index_guard_call {
	struct cache *c;
	guard_fn fn;
	void *arg;
};

static int index_guard_trampoline(void *arg)
{
	struct index_guard_call *g = arg;

	return g->fn(g->c, g->arg);
}

/* Runs fn(c, arg) with the guard armed. Returns what fn returned, or
 * MDB_PANIC after a fault (or when the index is broken already). Inside
 * this file fn may return LMDB codes, and damage among them marks the
 * index broken. */
static int index_guard_raw(struct cache *c, guard_fn fn, void *arg)
{
	struct index_guard_call g = { c, fn, arg };
	int rc = 0, sig;

	if (!index_ok(c))
		return MDB_PANIC;
	sig = fault_guard_call(index_guard_trampoline, &g, &rc);
	if (sig == 0) {
		if (index_damaged(rc))
			index_broken(c, mdb_strerror(rc));
		return rc;
	}
	if (guard_txn.txn != NULL) {
		MDB_txn *txn = guard_txn.txn;

		guard_txn.txn = NULL;
		mdb_txn_abort(txn);
	}
	index_broken(c, sig == SIGBUS	 ? "SIGBUS reading it: truncated?"
			: sig == SIGABRT ? "an LMDB assertion failed on it"
					 : "SIGSEGV reading it: damaged pages");
	return MDB_PANIC;
}

int index_guarded(struct cache *c, guard_fn fn, void *arg)
{
	int rc = index_guard_raw(c, fn, arg);

	return rc == MDB_PANIC ? INDEX_BROKEN : rc;
}

/* LMDB checks some of its pages with assertions, then abort()s: inside a
 * guarded call that is damage like a fault. */
static void index_assert_cb(MDB_env *env, const char *msg)
{
	(void)env;
	log_msg(LOG_ERR, "cache: LMDB: %s", msg);
	fault_guard_jump(SIGABRT); /* returns only when not guarded */
}

static int index_env_open(struct cache *c, const char *path);

/* The environment for this process, or NULL when it cannot be opened
 * (logged; the caller reads uncached). */
static MDB_env *index_env(struct cache *c)
{
	struct index *ix = c->index;
	pid_t pid = thread_pid();
	int rc;

	if (ix == NULL)
		return NULL;
	if (__atomic_load_n(&ix->pid, __ATOMIC_ACQUIRE) == pid)
		return ix->env;
	pthread_mutex_lock(&ix->lock);
	if (ix->pid != pid) {
		/* Inherited over fork(): closing it drops nothing of the
		 * parent's (locks and reader slots are per process). */
		if (ix->env != NULL)
			mdb_env_close(ix->env);
		ix->env = NULL;
		/* What else of the cache is the parent's (index_open()). */
		if (ix->forked != NULL)
			ix->forked(c);
		rc = index_env_open(c, c->index_path);
		if (rc != 0)
			log_msg(LOG_WARNING,
				"cache %s: cannot open the index %s: %s; "
				"reading uncached",
				c->dir, c->index_path, index_strerror(rc));
		__atomic_store_n(&ix->pid, pid, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ix->lock);
	return ix->env;
}

bool index_available(struct cache *c)
{
	return index_env(c) != NULL;
}

bool index_ours(const struct cache *c)
{
	return c->index != NULL &&
	       __atomic_load_n(&c->index->pid, __ATOMIC_ACQUIRE) ==
		       thread_pid();
}

/* Begins a transaction on env (c's, being opened) and records it as the
 * thread's for the guard. Returns 0 or an LMDB code. */
static int index_begin_on(struct cache *c, MDB_env *env, unsigned flags,
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
	if (rc == 0) {
		guard_txn.c = c;
		guard_txn.txn = *txn;
	}
	return rc;
}

int index_begin(struct cache *c, bool write, struct index_txn **t)
{
	MDB_txn *txn;
	int rc = index_begin_on(c, index_env(c), write ? 0 : MDB_RDONLY, &txn);

	if (rc != 0)
		return index_code(c, rc);
	*t = &guard_txn;
	return 0;
}

/* Commits (commit true) or aborts the thread's transaction. Returns the
 * commit's result, an LMDB code. */
static int index_end_raw(bool commit)
{
	MDB_txn *txn = guard_txn.txn;
	int rc;

	if (commit) {
		/* Guarded until the commit returns: it reads the map (the
		 * free list), and a fault there must abort the transaction,
		 * or its writer lock stays held for every other process (as
		 * LMDB's own commit error path does). */
		rc = mdb_txn_commit(txn);
		guard_txn.txn = NULL;
		return rc;
	}
	guard_txn.txn = NULL;
	mdb_txn_abort(txn);
	return 0;
}

int index_end(struct index_txn *t, bool commit)
{
	return index_code(t->c, index_end_raw(commit));
}

static MDB_dbi index_dbi(const struct index_txn *t, enum index_table table)
{
	return t->c->index->dbi[table];
}

int index_get(struct index_txn *t, enum index_table table, const uint8_t *hash,
	      const void **val, size_t *len)
{
	MDB_val k = { HASH_LEN, (void *)hash }, v;
	int rc = mdb_get(t->txn, index_dbi(t, table), &k, &v);

	if (rc != 0)
		return index_code(t->c, rc);
	*val = v.mv_data;
	*len = v.mv_size;
	return 0;
}

int index_put(struct index_txn *t, enum index_table table, const uint8_t *hash,
	      const void *val, size_t len)
{
	MDB_val k = { HASH_LEN, (void *)hash }, v = { len, (void *)val };

	return index_code(t->c,
			  mdb_put(t->txn, index_dbi(t, table), &k, &v, 0));
}

int index_scan(struct index_txn *t, index_scan_fn fn, void *arg)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, stop = 0, op = MDB_FIRST;

	rc = mdb_cursor_open(t->txn, index_dbi(t, INDEX_ROWS), &cur);
	if (rc != 0)
		return index_code(t->c, rc);
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		op = MDB_NEXT;
		stop = fn(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
		if (stop != 0)
			break;
	}
	mdb_cursor_close(cur);
	if (stop != 0)
		return stop < 0 ? stop : 0;
	return rc == MDB_NOTFOUND ? 0 : index_code(t->c, rc);
}

int index_clear(struct index_txn *t)
{
	int rc = mdb_drop(t->txn, index_dbi(t, INDEX_ROWS), 0);

	if (rc == 0)
		rc = mdb_drop(t->txn, index_dbi(t, INDEX_DATA), 0);
	if (rc != 0)
		return index_code(t->c, rc);
	return index_meta_put(t, "live_bytes", 0);
}

/* The meta table's u64 values, in LMDB's codes (also for index_open). */
static int index_meta_get_raw(MDB_txn *txn, const struct index *ix,
			      const char *name, uint64_t *out)
{
	MDB_val k = { strlen(name), (void *)name }, v;
	int rc = mdb_get(txn, ix->dbi_meta, &k, &v);

	*out = 0;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	if (v.mv_size == 8)
		memcpy(out, v.mv_data, 8);
	return 0;
}

int index_meta_get(struct index_txn *t, const char *name, uint64_t *out)
{
	return index_code(t->c,
			  index_meta_get_raw(t->txn, t->c->index, name, out));
}

int index_meta_put(struct index_txn *t, const char *name, uint64_t value)
{
	MDB_val k = { strlen(name), (void *)name }, v = { 8, &value };

	return index_code(t->c,
			  mdb_put(t->txn, t->c->index->dbi_meta, &k, &v, 0));
}

int index_live_add(struct index_txn *t, int64_t delta)
{
	uint64_t live;
	int rc = index_meta_get(t, "live_bytes", &live);

	if (rc != 0)
		return rc;
	if (delta < 0 && (uint64_t)-delta > live)
		live = 0;
	else
		live += (uint64_t)delta;
	return index_meta_put(t, "live_bytes", live);
}

struct index_visit_args {
	const uint8_t *hash;
	index_row_fn fn;
	void *arg;
};

static int index_row_visit_run(struct cache *c, void *arg)
{
	struct index_visit_args *a = arg;
	struct index_txn *t;
	const void *v = NULL;
	size_t v_len = 0;
	int rc = index_begin(c, false, &t);

	if (rc != 0)
		return rc;
	rc = index_get(t, INDEX_ROWS, a->hash, &v, &v_len);
	if (rc == 0)
		a->fn(a->arg, v, v_len);
	index_end(t, false);
	return rc;
}

int index_row_visit(struct cache *c, const uint8_t *hash, index_row_fn fn,
		    void *arg)
{
	struct index_visit_args a = { hash, fn, arg };

	return index_guarded(c, index_row_visit_run, &a);
}

static int index_live_bytes_run(struct cache *c, void *arg)
{
	struct index_txn *t;
	int rc = index_begin(c, false, &t);

	if (rc != 0)
		return rc;
	rc = index_meta_get(t, "live_bytes", arg);
	index_end(t, false);
	return rc;
}

uint64_t index_live_bytes(struct cache *c)
{
	uint64_t live = 0;

	if (index_guarded(c, index_live_bytes_run, &live) != 0)
		return 0;
	return live;
}

int index_row_delete(struct index_txn *t, const uint8_t *hash,
		     const uint8_t *id, size_t id_len, bool *blob,
		     uint64_t *blob_id)
{
	MDB_val k = { HASH_LEN, (void *)hash }, v;
	MDB_dbi rows = index_dbi(t, INDEX_ROWS);
	struct entry_hdr h;
	int rc;

	*blob = false;
	rc = mdb_get(t->txn, rows, &k, &v);
	if (rc != 0)
		return index_code(t->c, rc);
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
		return -ENOENT;
	rc = mdb_del(t->txn, rows, &k, NULL);
	if (rc != 0)
		return index_code(t->c, rc);
	if (h.flags & ENTRY_INLINE) {
		rc = mdb_del(t->txn, index_dbi(t, INDEX_DATA), &k, NULL);
		if (rc != 0 && rc != MDB_NOTFOUND)
			return index_code(t->c, rc);
	} else {
		*blob = true;
		*blob_id = h.blob_id;
	}
	return index_live_add(t, -(int64_t)h.length);
}

static int index_dbis_open(struct cache *c, void *arg)
{
	struct index *ix = c->index;
	unsigned flags = c->readonly ? 0 : MDB_CREATE;
	MDB_txn *txn;
	int rc;

	(void)arg;
	rc = index_begin_on(c, ix->env, c->readonly ? MDB_RDONLY : 0, &txn);
	if (rc != 0)
		return rc;
	rc = mdb_dbi_open(txn, "idx", flags, &ix->dbi[INDEX_ROWS]);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "data", flags, &ix->dbi[INDEX_DATA]);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "meta", flags, &ix->dbi_meta);
	if (rc == 0) /* even read-only: an abort forgets the handles */
		rc = index_end_raw(true);
	else
		index_end_raw(false);
	return rc;
}

/* Also after a fault: the faulting transaction was aborted, and what is
 * left (the map, the files, this process' reader slots) closes as
 * usual. */
static void index_env_close(struct index *ix)
{
	if (ix->env != NULL)
		mdb_env_close(ix->env);
	ix->env = NULL;
}

void index_close(struct cache *c)
{
	if (c->index == NULL)
		return;
	index_env_close(c->index);
	pthread_mutex_destroy(&c->index->lock);
	free(c->index);
	c->index = NULL;
}

/* Opens the environment at path and its databases. Returns 0 or an LMDB
 * code (an errno value or MDB_*), logged by the caller. */
static int index_env_open(struct cache *c, const char *path)
{
	struct index *ix = c->index;
	unsigned flags =
		MDB_NOSUBDIR | MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC;
	int rc;

	if (c->readonly)
		flags |= MDB_RDONLY;
	/* Without [cache] fsync no commit waits for the disk: a commit is
	 * in the page cache at once, and a system crash may lose recent
	 * commits or damage the file. The open's deep check finds such
	 * damage and moves the index aside, and every blob read is checked
	 * against its CRC: a crash costs refetches, never a wrong byte.
	 * Syncing cost one fdatasync per chunk on the fetch path. */
	if (!c->fsync)
		flags |= MDB_NOSYNC;
	for (;;) {
		rc = mdb_env_create(&ix->env);
		if (rc != 0) {
			ix->env = NULL;
			return rc;
		}
		mdb_env_set_maxdbs(ix->env, 4);
		mdb_env_set_assert(ix->env, index_assert_cb);
		mdb_env_set_mapsize(ix->env, (size_t)MAP_SIZE);
		mdb_env_set_maxreaders(ix->env, MAX_READERS);
		/* NOMETASYNC (with fsync): each commit syncs its data
		 * pages but not the meta page, so a system crash may lose
		 * the last commit, never the index. */
		rc = mdb_env_open(ix->env, path, flags, 0600);
		if (rc == 0)
			break;
		mdb_env_close(ix->env);
		ix->env = NULL;
		/* A read-only cache whose lock file we may not open: read
		 * without LMDB's locks (nobody may write it through us). */
		if (!c->readonly || (flags & MDB_NOLOCK) ||
		    (rc != EACCES && rc != EROFS))
			return rc;
		flags |= MDB_NOLOCK;
	}
	if (!c->readonly)
		mdb_reader_check(ix->env, NULL);
	rc = index_guard_raw(c, index_dbis_open, NULL);
	if (rc != 0)
		index_env_close(ix);
	return rc;
}

/* The deep check of the open index, in a read transaction so that the
 * pages it walks stay put while other processes write. */
struct index_deep_args {
	int fd;
	char *why;
	size_t why_len;
	int result; /* index_check_tree()'s */
};

static int index_deep_run(struct cache *c, void *arg)
{
	struct index_deep_args *a = arg;
	MDB_txn *txn;
	int rc, tries;

	for (tries = 0; tries < 5; tries++) {
		rc = index_begin_on(c, c->index->env, MDB_RDONLY, &txn);
		if (rc != 0)
			return rc;
		a->result = index_check_tree(a->fd, mdb_txn_id(txn), a->why,
					     a->why_len);
		index_end_raw(false);
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
int index_open(struct cache *c, bool may_move, index_forked_fn forked)
{
	char why[256];
	int attempt, rc, fd;

	if (c->index == NULL) {
		c->index = calloc(1, sizeof(*c->index));
		if (c->index == NULL)
			return -ENOMEM;
		pthread_mutex_init(&c->index->lock, NULL);
	}
	c->index->forked = forked;
	for (attempt = 0; attempt < 2; attempt++) {
		struct index_deep_args a = { .why = why,
					     .why_len = sizeof(why) };

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
			rc = index_env_open(c, c->index_path);
			if (rc == MDB_PANIC) /* a fault: the guard said why */
				snprintf(why, sizeof(why), "a fault in LMDB");
			else if (index_damaged(rc))
				snprintf(why, sizeof(why), "%s",
					 mdb_strerror(rc));
			else if (rc != 0) {
				log_msg(LOG_WARNING,
					"cache %s: cannot open the index %s: "
					"%s",
					c->dir, c->index_path,
					index_strerror(rc));
				if (fd >= 0)
					close(fd);
				return index_errno(rc);
			}
			rc = rc != 0 ? 1 : 0;
		}
		if (rc == 0 && fd >= 0) {
			a.fd = fd;
			rc = index_guard_raw(c, index_deep_run, &a);
			if (rc == 0)
				rc = a.result;
			else if (!index_damaged(rc))
				rc = -EAGAIN; /* e.g. ENOMEM, readers full:
					       * not the file's fault */
			if (rc != 0 && why[0] == '\0')
				snprintf(why, sizeof(why), "%s",
					 index_strerror(rc));
			if (rc < 0 && rc != -ENOMEM && rc != -EAGAIN)
				rc = 1;
			else if (rc < 0)
				rc = 0; /* could not check: LMDB's own checks */
			if (rc != 0)
				index_env_close(c->index);
		}
		if (fd >= 0)
			close(fd);
		if (rc == 0) {
			__atomic_store_n(&c->index->pid, getpid(),
					 __ATOMIC_RELEASE);
			return 0;
		}
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

/* Records the budget and chunk size of this opener (cache stat). */
int index_meta_record(struct cache *c, void *arg)
{
	const uint64_t *v = arg;
	struct index_txn *t;
	int rc = index_begin(c, true, &t);

	if (rc != 0)
		return rc;
	rc = index_meta_put(t, "budget", v[0]);
	if (rc == 0)
		rc = index_meta_put(t, "chunk_size", v[1]);
	if (rc == 0)
		return index_end(t, true);
	index_end(t, false);
	return rc;
}
