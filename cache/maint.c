/*
 * maint: the cache directory's housekeeping: permissions and owners.lock
 * at open, cleanup at open (tmp files, blobs without rows, rows without
 * blobs), and `shardfs cache stat|verify|clear`.
 */
#include "cache/cache_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/crc32.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/str.h"

/* Bigger than LMDB's lock file for MAX_READERS, so LMDB keeps our size. */
#define LOCK_FILE_BYTES (128u << 10)
#define ORPHAN_GRACE_SECONDS 3600
#define LOCK_WAIT_SECONDS 10 /* most an open waits for owners.lock */

static int maint_tighten_one(const char *path, const struct stat *st, int type,
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
void maint_perms_tighten(struct cache *c)
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
	nftw(c->dir, maint_tighten_one, 16, FTW_PHYS | FTW_MOUNT);
	log_msg(LOG_WARNING,
		"cache %s was readable by other users (mode %04o): made it "
		"0700 and its files 0600",
		c->dir, (unsigned)(st.st_mode & 07777));
}

/* LMDB writes its lock file through a shared mapping; on a full tmpfs a
 * write to an unallocated page of it is SIGBUS, not ENOSPC. Allocating it
 * first turns a full filesystem into an error at open. */
int maint_lock_file_prepare(const char *path)
{
	int fd = store_file_open(path, O_RDWR | O_CREAT), rc;
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
int maint_owners_lock(struct cache *c, const char *path, int op)
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

static bool maint_file_old(const struct stat *st)
{
	return (uint64_t)st->st_mtime + ORPHAN_GRACE_SECONDS < now_seconds();
}

/* Removes tmp files of writers that are gone. */
static void maint_cleanup_tmp(struct cache *c, bool alone)
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
			if (!maint_file_old(&st) && pid > 0 &&
			    !(kill((pid_t)pid, 0) != 0 && errno == ESRCH))
				continue;
		}
		unlinkat(dirfd(d), de->d_name, 0);
	}
	if (d != NULL)
		closedir(d);
	free(dir);
}

int maint_scan_begin(struct cache *c, MDB_txn **txn, MDB_cursor **cur)
{
	int rc = index_txn_begin(c, MDB_RDONLY, txn);

	if (rc != 0)
		return rc;
	rc = mdb_cursor_open(*txn, c->dbi_idx, cur);
	if (rc != 0)
		index_txn_end(*txn, false);
	return rc;
}

/* Drops rows whose blob is missing; when alone, also recounts live bytes
 * (it cannot drift, but this heals a foreign or damaged index). Returns
 * an LMDB error of the scan (damage is noticed here first). */
static int maint_cleanup_rows_run(struct cache *c, void *arg)
{
	bool alone = *(const bool *)arg;
	uint8_t(*gone)[HASH_LEN] = NULL;
	size_t n = 0, cap = 0, i;
	uint64_t live = 0;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *txn;
	int rc, op = MDB_FIRST;

	rc = maint_scan_begin(c, &txn, &cur);
	if (rc != 0)
		return rc;
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
				char *path = entry_blob_path(c, k.mv_data,
							     h.blob_id);
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
	index_txn_end(txn, false);
	if (rc != MDB_NOTFOUND && rc != 0)
		goto out;
	if (n == 0 && !alone)
		goto out;
	rc = index_txn_begin(c, 0, &txn);
	if (rc != 0)
		goto out;
	if (alone)
		rc = index_meta_put(txn, c, "live_bytes", live);
	for (i = 0; i < n && rc == 0; i++) {
		bool blob;
		uint64_t blob_id;

		rc = index_row_delete(txn, c, gone[i], NULL, 0, &blob,
				      &blob_id);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (rc == 0)
		rc = index_txn_end(txn, true);
	else
		index_txn_end(txn, false);
	if (n > 0 && rc == 0)
		log_msg(LOG_INFO, "cache %s: dropped %zu rows without blobs",
			c->dir, n);
out:
	free(gone);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Whether a file in blobs/XX/ is the blob of a row: its name is
 * HASH.BLOBID and the row of HASH holds that blob id. */
struct maint_ref_args {
	uint8_t hash[HASH_LEN];
	uint64_t blob_id;
	bool found;
};

static int maint_blob_referenced_run(struct cache *c, void *arg)
{
	struct maint_ref_args *a = arg;
	MDB_val k = { HASH_LEN, a->hash }, v;
	struct entry_hdr h;
	MDB_txn *txn;
	int rc = index_txn_begin(c, MDB_RDONLY, &txn);

	if (rc != 0)
		return rc;
	rc = mdb_get(txn, c->dbi_idx, &k, &v);
	if (rc == 0 && v.mv_size >= sizeof(h)) {
		memcpy(&h, v.mv_data, sizeof(h));
		a->found = !(h.flags & ENTRY_INLINE) && h.blob_id == a->blob_id;
	}
	index_txn_end(txn, false);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

static bool maint_blob_referenced(struct cache *c, const char *name)
{
	struct maint_ref_args a = { .found = false };
	char *end;

	if (strlen(name) != 2 * HASH_LEN + 17 || name[2 * HASH_LEN] != '.' ||
	    entry_hex_parse(name, a.hash) != 0)
		return false;
	a.blob_id = strtoull(name + 2 * HASH_LEN + 1, &end, 16);
	if (*end != '\0')
		return false;
	if (index_guarded(c, maint_blob_referenced_run, &a) != 0)
		return true; /* when in doubt, keep the blob */
	return a.found;
}

/* Calls fn(c, d, name, arg) for every file in DIR/blobs/XX/ (XX: two
 * characters, so not tmp/), d being its open directory; names starting
 * with a dot are skipped. Returns 0 or -ENOMEM; a directory that cannot be
 * opened is skipped. */
typedef void (*blob_fn)(struct cache *c, DIR *d, const char *name, void *arg);

static int maint_blobs_walk(struct cache *c, blob_fn fn, void *arg)
{
	char *root = NULL;
	struct dirent *sub;
	DIR *top;

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
				fn(c, d, de->d_name, arg);
		closedir(d);
	}
	if (top != NULL)
		closedir(top);
	free(root);
	return 0;
}

struct maint_orphan_args {
	bool alone;
	size_t removed;
};

static void maint_orphan_remove(struct cache *c, DIR *d, const char *name,
				void *arg)
{
	struct maint_orphan_args *a = arg;
	struct stat st;

	if (maint_blob_referenced(c, name))
		return;
	if (!a->alone &&
	    (fstatat(dirfd(d), name, &st, 0) != 0 || !maint_file_old(&st)))
		return;
	if (unlinkat(dirfd(d), name, 0) == 0)
		a->removed++;
}

/* Removes blobs without rows (when not alone, only old ones). */
static void maint_cleanup_blobs(struct cache *c, bool alone)
{
	struct maint_orphan_args a = { .alone = alone, .removed = 0 };

	maint_blobs_walk(c, maint_orphan_remove, &a);
	if (a.removed > 0)
		log_msg(LOG_INFO, "cache %s: removed %zu blobs without rows",
			c->dir, a.removed);
}

void maint_at_open(struct cache *c, bool alone)
{
	uint64_t meta[2] = { c->budget, c->chunk_size };

	index_guarded(c, index_meta_record, meta);
	maint_cleanup_tmp(c, alone);
	if (index_guarded(c, maint_cleanup_rows_run, &alone) == 0)
		maint_cleanup_blobs(c, alone);
	if (c->budget > 0 && index_live_bytes(c) > c->budget)
		evict_to(c, c->budget / 10 * 9);
}

static int maint_info_run(struct cache *c, void *arg)
{
	struct cache_info *out = arg;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *txn;
	int rc, op = MDB_FIRST;

	rc = maint_scan_begin(c, &txn, &cur);
	if (rc != 0)
		return rc;
	index_meta_get(txn, c, "live_bytes", &out->live_bytes);
	index_meta_get(txn, c, "budget", &out->budget_bytes);
	index_meta_get(txn, c, "chunk_size", &out->chunk_size);
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
	index_txn_end(txn, false);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int cache_info(struct cache *c, struct cache_info *out)
{
	struct stat st;
	char *path;

	memset(out, 0, sizeof(*out));
	if (!c->disk)
		return -EINVAL;
	store_drain(c);
	if (index_guarded(c, maint_info_run, out) != 0)
		return -EIO; /* logged */
	if (asprintf(&path, "%s/index.mdb", c->dir) >= 0) {
		if (stat(path, &st) == 0)
			out->data_file_bytes = (uint64_t)st.st_size;
		free(path);
	}
	return 0;
}

/* Checks one entry; returns NULL if good, else the reason. */
static const char *maint_entry_check(struct cache *c, MDB_txn *txn,
				     const MDB_val *k, const MDB_val *v,
				     struct entry *e)
{
	uint8_t hash[HASH_LEN], *buf;
	const uint8_t *id;
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
	if (sha256(id, e->h.id_len, hash) < 0 ||
	    memcmp(hash, k->mv_data, HASH_LEN) != 0)
		return "identity does not match its hash";
	if (e->h.flags & ENTRY_INLINE) {
		if (mdb_get(txn, c->dbi_data, (MDB_val *)k, &d) != 0)
			return "inline bytes missing";
		if (d.mv_size != e->h.length)
			return "length mismatch";
		if (e->h.length > 0 &&
		    !entry_crcs_ok(d.mv_data, 0, e->h.length, e->crcs, 0,
				   e->h.n_crcs - 1))
			return "crc mismatch";
		return NULL;
	}
	path = entry_blob_path(c, k->mv_data, e->h.blob_id);
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

struct maint_verify_args {
	cache_bad_cb cb;
	void *arg;
	uint64_t *checked;
	int bad;
};

static int maint_verify_run(struct cache *c, void *varg)
{
	struct maint_verify_args *va = varg;
	cache_bad_cb cb = va->cb;
	void *arg = va->arg;
	uint64_t *checked = va->checked;
	MDB_cursor *cur;
	MDB_val k, v;
	MDB_txn *txn;
	int rc, op = MDB_FIRST;

	rc = maint_scan_begin(c, &txn, &cur);
	if (rc != 0)
		return rc;
	while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		struct entry e = { .crcs = NULL };
		const char *why;

		op = MDB_NEXT;
		(*checked)++;
		why = maint_entry_check(c, txn, &k, &v, &e);
		if (why != NULL) {
			struct cache_bad_entry b = { .reason = why };
			const uint8_t *part[3] = { NULL, NULL, NULL };
			size_t part_len[3] = { 0, 0, 0 };
			char hex[2 * HASH_LEN + 1] = "";
			char *s[3] = { NULL, NULL, NULL };
			int i;

			if (k.mv_size == HASH_LEN)
				entry_hash_hex(k.mv_data, hex);
			if (v.mv_size >= sizeof(e.h) &&
			    v.mv_size == sizeof(e.h) + (size_t)e.h.n_crcs * 4 +
						 e.h.id_len)
				entry_ident_parse(
					(const uint8_t *)v.mv_data +
						sizeof(e.h) +
						(size_t)e.h.n_crcs * 4,
					e.h.id_len, part, part_len, &b.chunk);
			for (i = 0; i < 3; i++)
				s[i] = str_memdup(part[i] ? part[i]
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
	index_txn_end(txn, false);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int cache_verify(struct cache *c, cache_bad_cb cb, void *arg, uint64_t *checked)
{
	struct maint_verify_args va = { cb, arg, checked, 0 };

	*checked = 0;
	if (!c->disk)
		return -EINVAL;
	store_drain(c);
	if (index_guarded(c, maint_verify_run, &va) != 0)
		return -EIO; /* logged */
	return va.bad;
}

static int maint_clear_run(struct cache *c, void *arg)
{
	MDB_txn *txn;
	int rc;

	(void)arg;
	rc = index_txn_begin(c, 0, &txn);
	if (rc != 0)
		return rc;
	rc = mdb_drop(txn, c->dbi_idx, 0);
	if (rc == 0)
		rc = mdb_drop(txn, c->dbi_data, 0);
	if (rc == 0)
		rc = index_meta_put(txn, c, "live_bytes", 0);
	if (rc == 0)
		return index_txn_end(txn, true);
	index_txn_end(txn, false);
	return rc;
}

static void maint_blob_remove(struct cache *c, DIR *d, const char *name,
			      void *arg)
{
	(void)c;
	(void)arg;
	unlinkat(dirfd(d), name, 0);
}

int cache_clear(struct cache *c)
{
	struct dirent *sub;
	DIR *top;
	int rc;

	if (!c->disk)
		return -EINVAL;
	store_drain(c);
	pthread_mutex_lock(&c->touch_lock);
	c->n_touched = 0;
	pthread_mutex_unlock(&c->touch_lock);
	rc = index_guarded(c, maint_clear_run, NULL);
	if (rc != 0)
		return index_errno(rc);
	if (maint_blobs_walk(c, maint_blob_remove, NULL) < 0)
		return -ENOMEM;
	top = opendir(c->dir);
	while (top != NULL && (sub = readdir(top)) != NULL)
		if (!strncmp(sub->d_name, "index.mdb.corrupt-", 18))
			unlinkat(dirfd(top), sub->d_name, 0);
	if (top != NULL)
		closedir(top);
	return 0;
}
