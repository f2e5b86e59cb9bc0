/*
 * index: the LMDB environment of this process, its transactions, the
 * fault guard around every one of them, the meta table and row deletes,
 * and opening (checking, moving aside) the index file.
 */
#include "cache/cache_impl.h"

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

/* LMDB returns errno values (positive) and its own codes MDB_KEYEXIST
 * (-30799) .. MDB_LAST_ERRCODE; the code here also passes negative errno
 * values. One place turns any of them into text and into an errno. */
static bool index_mdb_code(int rc)
{
	return rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE;
}

const char *index_strerror(int rc)
{
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

/* Any of the above to a negative errno. */
int index_errno(int rc)
{
	if (rc == 0)
		return 0;
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

/* ---- the fault guard -----------------------------------------------------
 *
 * LMDB reads the index through a shared mapping and trusts its pages. A
 * page damaged after the check at open, or the file truncated by someone
 * else while we serve, would kill the process with SIGSEGV or SIGBUS
 * inside LMDB. So every LMDB transaction runs inside index_guarded(), through
 * fault_guard.h: after a fault it aborts the thread's transaction
 * (releasing LMDB's writer lock, which other processes wait for), marks
 * the index broken and returns MDB_PANIC.
 *
 * Only LMDB calls and reads of LMDB values run armed, and no mutex of ours
 * is held while the map is read, so a jump never leaves one locked (a
 * nested index_guarded() call, e.g. eviction under evict_lock, catches its own
 * faults). A thread runs at most one transaction at a time (STYLE.md),
 * tracked in guard_txn by index_txn_begin()/index_txn_end().
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

bool index_ok(const struct cache *c)
{
	return !__atomic_load_n(&c->broken, __ATOMIC_ACQUIRE);
}

typedef int (*guard_fn)(struct cache *c, void *arg);

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

/* Runs fn(c, arg) with the guard armed. Returns what fn returned (and
 * marks the index broken if that is an LMDB code for damage), or
 * MDB_PANIC after a fault. */
int index_guarded(struct cache *c, guard_fn fn, void *arg)
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
static void index_assert_cb(MDB_env *env, const char *msg)
{
	(void)env;
	log_msg(LOG_ERR, "cache: LMDB: %s", msg);
	fault_guard_jump(SIGABRT); /* returns only when not guarded */
}

static int index_env_open(struct cache *c, const char *path);

/* The environment for this process, or NULL when it cannot be opened
 * (logged; the caller reads uncached). */
MDB_env *index_env(struct cache *c)
{
	pid_t pid = thread_pid();
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
		rc = index_env_open(c, c->index_path);
		if (rc != 0)
			log_msg(LOG_WARNING,
				"cache %s: cannot open the index %s: %s; "
				"reading uncached",
				c->dir, c->index_path, index_strerror(rc));
		__atomic_store_n(&c->env_pid, pid, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->env_lock);
	return c->env;
}

/* Begins a transaction on env (c's, being opened) and records it as the
 * thread's for the guard. */
int index_txn_begin_on(struct cache *c, MDB_env *env, unsigned flags,
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

int index_txn_begin(struct cache *c, unsigned flags, MDB_txn **txn)
{
	return index_txn_begin_on(c, index_env(c), flags, txn);
}

/* Ends txn: commits it (commit true) or aborts it. Returns the commit's
 * result. */
int index_txn_end(MDB_txn *txn, bool commit)
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

int index_meta_get(MDB_txn *txn, const struct cache *c, const char *name,
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

int index_meta_put(MDB_txn *txn, const struct cache *c, const char *name,
		   uint64_t value)
{
	MDB_val k = { strlen(name), (void *)name }, v = { 8, &value };

	return mdb_put(txn, c->dbi_meta, &k, &v, 0);
}

int index_live_add(MDB_txn *txn, const struct cache *c, int64_t delta)
{
	uint64_t live;
	int rc = index_meta_get(txn, c, "live_bytes", &live);

	if (rc != 0)
		return rc;
	if (delta < 0 && (uint64_t)-delta > live)
		live = 0;
	else
		live += (uint64_t)delta;
	return index_meta_put(txn, c, "live_bytes", live);
}

static int index_live_bytes_run(struct cache *c, void *arg)
{
	MDB_txn *txn;
	int rc = index_txn_begin(c, MDB_RDONLY, &txn);

	if (rc != 0)
		return rc;
	rc = index_meta_get(txn, c, "live_bytes", arg);
	index_txn_end(txn, false);
	return rc;
}

uint64_t index_live_bytes(struct cache *c)
{
	uint64_t live = 0;

	if (index_guarded(c, index_live_bytes_run, &live) != 0)
		return 0;
	return live;
}

/* Deletes the row hash in txn if it exists (and, with id, holds id).
 * Sets *blob when the caller must unlink a blob after commit. Returns 0,
 * MDB_NOTFOUND, or an LMDB error. */
int index_row_delete(MDB_txn *txn, struct cache *c, const uint8_t *hash,
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
	return index_live_add(txn, c, -(int64_t)h.length);
}

struct index_drop_args {
	const uint8_t *hash, *id;
	size_t id_len;
	bool blob;
	uint64_t blob_id;
};

static int index_entry_drop_run(struct cache *c, void *arg)
{
	struct index_drop_args *a = arg;
	MDB_txn *txn;
	int rc;

	rc = index_txn_begin(c, 0, &txn);
	if (rc != 0)
		return rc;
	rc = index_row_delete(txn, c, a->hash, a->id, a->id_len, &a->blob,
			      &a->blob_id);
	if (rc == 0)
		rc = index_txn_end(txn, true);
	else
		index_txn_end(txn, false);
	return rc;
}

/* Drops one entry (bad CRC, missing blob). */
void index_entry_drop(struct cache *c, const uint8_t *hash, const uint8_t *id,
		      size_t id_len)
{
	struct index_drop_args a = { .hash = hash, .id = id, .id_len = id_len };
	int rc;

	if (c->readonly)
		return;
	rc = index_guarded(c, index_entry_drop_run, &a);
	if (rc == 0 && a.blob)
		store_blob_unlink(c, hash, a.blob_id);
	else if (rc != 0 && rc != MDB_NOTFOUND && rc != MDB_PANIC)
		cache_warn_limited(c, "cannot drop an entry", rc);
}

static int index_dbis_open(struct cache *c, void *arg)
{
	unsigned flags = c->readonly ? 0 : MDB_CREATE;
	MDB_txn *txn;
	int rc;

	(void)arg;
	rc = index_txn_begin_on(c, c->env, c->readonly ? MDB_RDONLY : 0, &txn);
	if (rc != 0)
		return rc;
	rc = mdb_dbi_open(txn, "idx", flags, &c->dbi_idx);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "data", flags, &c->dbi_data);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "meta", flags, &c->dbi_meta);
	if (rc == 0) /* even read-only: an abort forgets the handles */
		rc = index_txn_end(txn, true);
	else
		index_txn_end(txn, false);
	return rc;
}

/* Also after a fault: the faulting transaction was aborted, and what is
 * left (the map, the files, this process' reader slots) closes as
 * usual. */
void index_env_close(struct cache *c)
{
	if (c->env != NULL)
		mdb_env_close(c->env);
	c->env = NULL;
}

/* Opens the environment at path and its databases. Returns 0 or an LMDB
 * code (an errno value or MDB_*), logged by the caller. */
static int index_env_open(struct cache *c, const char *path)
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
		mdb_env_set_assert(c->env, index_assert_cb);
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
	rc = index_guarded(c, index_dbis_open, NULL);
	if (rc != 0)
		index_env_close(c);
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
		rc = index_txn_begin_on(c, c->env, MDB_RDONLY, &txn);
		if (rc != 0)
			return rc;
		a->result = index_check_tree(a->fd, mdb_txn_id(txn), a->why,
					     a->why_len);
		index_txn_end(txn, false);
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
int index_open(struct cache *c, bool may_move)
{
	char why[256];
	int attempt, rc, fd;

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
			rc = index_guarded(c, index_deep_run, &a);
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
				index_env_close(c);
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

/* Records the budget and chunk size of this opener (cache stat). */
int index_meta_record(struct cache *c, void *arg)
{
	const uint64_t *v = arg;
	MDB_txn *txn;
	int rc = index_txn_begin(c, 0, &txn);

	if (rc != 0)
		return rc;
	rc = index_meta_put(txn, c, "budget", v[0]);
	if (rc == 0)
		rc = index_meta_put(txn, c, "chunk_size", v[1]);
	if (rc == 0)
		return index_txn_end(txn, true);
	index_txn_end(txn, false);
	return rc;
}
