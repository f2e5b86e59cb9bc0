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

struct maint_rows_args {
	struct cache *c;
	uint8_t (*gone)[HASH_LEN];
	size_t n, cap;
	uint64_t live;
};

/* Counts a row's bytes and notes it if its blob is missing (a row for
 * index_scan()). */
static int maint_row_check(void *arg, const uint8_t *key, size_t key_len,
			   const void *val, size_t val_len)
{
	struct maint_rows_args *a = arg;
	struct entry_hdr h;
	bool bad = false;

	if (key_len != HASH_LEN || val_len < sizeof(h)) {
		bad = true;
	} else {
		memcpy(&h, val, sizeof(h));
		a->live += h.length;
		if (!(h.flags & ENTRY_INLINE)) {
			char *path = entry_blob_path(a->c, key, h.blob_id);
			struct stat st;

			bad = path != NULL && stat(path, &st) != 0 &&
			      errno == ENOENT;
			free(path);
		}
	}
	if (!bad || key_len != HASH_LEN)
		return 0;
	if (a->n == a->cap) {
		size_t ncap = a->cap ? 2 * a->cap : 64;
		void *ng = realloc(a->gone, ncap * HASH_LEN);

		if (ng == NULL)
			return 1;
		a->gone = ng;
		a->cap = ncap;
	}
	memcpy(a->gone[a->n++], key, HASH_LEN);
	return 0;
}

/* Drops rows whose blob is missing; when alone, also recounts live bytes
 * (it cannot drift, but this heals a foreign or damaged index). Returns
 * an error of the scan (damage is noticed here first). */
static int maint_cleanup_rows_run(struct cache *c, void *arg)
{
	bool alone = *(const bool *)arg;
	struct maint_rows_args a = { .c = c };
	struct index_txn *txn;
	size_t i;
	int rc;

	rc = index_begin(c, false, &txn);
	if (rc != 0)
		return rc;
	rc = index_scan(txn, maint_row_check, &a);
	index_end(txn, false);
	if (rc != 0)
		goto out;
	if (a.n == 0 && !alone)
		goto out;
	rc = index_begin(c, true, &txn);
	if (rc != 0)
		goto out;
	if (alone)
		rc = index_meta_put(txn, "live_bytes", a.live);
	for (i = 0; i < a.n && rc == 0; i++) {
		bool blob;
		uint64_t blob_id;

		rc = index_row_delete(txn, a.gone[i], NULL, 0, &blob, &blob_id);
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0)
		rc = index_end(txn, true);
	else
		index_end(txn, false);
	if (a.n > 0 && rc == 0)
		log_msg(LOG_INFO, "cache %s: dropped %zu rows without blobs",
			c->dir, a.n);
out:
	free(a.gone);
	return rc == -ENOENT ? 0 : rc;
}

/* Whether a file in blobs/XX/ is the blob of a row: its name is
 * HASH.BLOBID and the row of HASH holds that blob id. */
struct maint_ref_args {
	uint8_t hash[HASH_LEN];
	uint64_t blob_id;
	bool found;
};

static void maint_blob_row(void *arg, const void *val, size_t len)
{
	struct maint_ref_args *a = arg;
	struct entry_hdr h;

	if (len < sizeof(h))
		return;
	memcpy(&h, val, sizeof(h));
	a->found = !(h.flags & ENTRY_INLINE) && h.blob_id == a->blob_id;
}

static bool maint_blob_referenced(struct cache *c, const char *name)
{
	struct maint_ref_args a = { .found = false };
	char *end;
	int rc;

	if (strlen(name) != 2 * HASH_LEN + 17 || name[2 * HASH_LEN] != '.' ||
	    entry_hex_parse(name, a.hash) != 0)
		return false;
	a.blob_id = strtoull(name + 2 * HASH_LEN + 1, &end, 16);
	if (*end != '\0')
		return false;
	rc = index_row_visit(c, a.hash, maint_blob_row, &a);
	if (rc != 0 && rc != -ENOENT)
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

/* Counts a row (index_scan()). */
static int maint_info_row(void *arg, const uint8_t *key, size_t key_len,
			  const void *val, size_t val_len)
{
	struct cache_info *out = arg;
	struct entry_hdr h;

	(void)key;
	(void)key_len;
	out->entries++;
	if (val_len < sizeof(h))
		return 0;
	memcpy(&h, val, sizeof(h));
	if (h.flags & ENTRY_INLINE)
		out->inline_entries++;
	else
		out->blob_entries++;
	return 0;
}

static int maint_info_run(struct cache *c, void *arg)
{
	struct cache_info *out = arg;
	struct index_txn *txn;
	int rc;

	rc = index_begin(c, false, &txn);
	if (rc != 0)
		return rc;
	index_meta_get(txn, "live_bytes", &out->live_bytes);
	index_meta_get(txn, "budget", &out->budget_bytes);
	index_meta_get(txn, "chunk_size", &out->chunk_size);
	rc = index_scan(txn, maint_info_row, out);
	index_end(txn, false);
	return rc;
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
static const char *maint_entry_check(struct cache *c, struct index_txn *txn,
				     const uint8_t *key, size_t key_len,
				     const void *val, size_t val_len,
				     struct entry *e)
{
	uint8_t hash[HASH_LEN], *buf;
	const uint8_t *id;
	const void *d;
	size_t d_len;
	uint64_t pos;
	char *path;
	struct stat st;
	const char *why = NULL;
	int fd;

	if (key_len != HASH_LEN || entry_parse(val, val_len, NULL, 0, e) != 0)
		return "malformed row";
	id = (const uint8_t *)val + sizeof(e->h) + (size_t)e->h.n_crcs * 4;
	if (sha256(id, e->h.id_len, hash) < 0 ||
	    memcmp(hash, key, HASH_LEN) != 0)
		return "identity does not match its hash";
	if (e->h.flags & ENTRY_INLINE) {
		if (index_get(txn, INDEX_DATA, key, &d, &d_len) != 0)
			return "inline bytes missing";
		if (d_len != e->h.length)
			return "length mismatch";
		if (e->h.length > 0 &&
		    !entry_crcs_ok(d, 0, e->h.length, e->crcs, 0,
				   e->h.n_crcs - 1))
			return "crc mismatch";
		return NULL;
	}
	path = entry_blob_path(c, key, e->h.blob_id);
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
	struct cache *c;
	struct index_txn *txn;
	cache_bad_cb cb;
	void *arg;
	uint64_t *checked;
	int bad;
};

/* Checks a row and reports it if bad (index_scan()). */
static int maint_verify_row(void *varg, const uint8_t *key, size_t key_len,
			    const void *val, size_t val_len)
{
	struct maint_verify_args *va = varg;
	struct entry e = { .crcs = NULL };
	const char *why;

	(*va->checked)++;
	why = maint_entry_check(va->c, va->txn, key, key_len, val, val_len, &e);
	if (why != NULL) {
		struct cache_bad_entry b = { .reason = why };
		const uint8_t *part[3] = { NULL, NULL, NULL };
		size_t part_len[3] = { 0, 0, 0 };
		char hex[2 * HASH_LEN + 1] = "";
		char *s[3] = { NULL, NULL, NULL };
		int i;

		if (key_len == HASH_LEN)
			entry_hash_hex(key, hex);
		if (val_len >= sizeof(e.h) &&
		    val_len ==
			    sizeof(e.h) + (size_t)e.h.n_crcs * 4 + e.h.id_len)
			entry_ident_parse((const uint8_t *)val + sizeof(e.h) +
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
		if (va->cb != NULL)
			va->cb(va->arg, &b);
		for (i = 0; i < 3; i++)
			free(s[i]);
	}
	free(e.crcs);
	return 0;
}

static int maint_verify_run(struct cache *c, void *varg)
{
	struct maint_verify_args *va = varg;
	int rc;

	rc = index_begin(c, false, &va->txn);
	if (rc != 0)
		return rc;
	rc = index_scan(va->txn, maint_verify_row, va);
	index_end(va->txn, false);
	return rc;
}

int cache_verify(struct cache *c, cache_bad_cb cb, void *arg, uint64_t *checked)
{
	struct maint_verify_args va = { c, NULL, cb, arg, checked, 0 };

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
	struct index_txn *txn;
	int rc;

	(void)arg;
	rc = index_begin(c, true, &txn);
	if (rc != 0)
		return rc;
	rc = index_clear(txn);
	if (rc == 0)
		return index_end(txn, true);
	index_end(txn, false);
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
	pthread_mutex_lock(&c->evict.touch_lock);
	c->evict.n_touched = 0;
	pthread_mutex_unlock(&c->evict.touch_lock);
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
