/*
 * fs/kernel: what the daemon puts into the kernel on its own, outside a
 * request (docs/DESIGN.md §8, "The kernel path").
 *
 * Pushes. The cache's pusher (cache/push.c) walks each followed order
 * ahead of its reader and asks fs_push() to put a file into the kernel's
 * page cache: the file is read through the cache like any read (verified
 * bytes only) and written into the page cache with libfuse's store
 * notification. The kernel takes it only for an inode it knows; one it
 * does not (nothing looked the file up or listed its directory yet) the
 * daemon makes it know, through its own mount from the pusher's thread,
 * answered by a FUSE worker like any request: it lists the file's
 * directory from the file on (one READDIRPLUS makes the kernel know as
 * many files as the reply holds, and an order visits a directory's files
 * in any order, so the ones after it are as likely to come next as any),
 * and looks the file up if that did not do it. Both leave the kernel
 * dentries: the reader's open then needs no lookup either. These requests
 * are counted apart from readers'. (By the mountpoint's path: a
 * descriptor of the mount's root would keep the mount busy.)
 *
 * Lifetime: the pusher's thread may wait in such a lookup; kernel_stop()
 * (before the unmount) lets no notification start once the session's fd
 * may close, the unmount fails any lookup still waiting, and kernel_end()
 * (after it) waits for the pushes to end.
 *
 * Reloads. A reload makes new inodes (fs_swap), so a path looked up
 * again reads the new tree; but the kernel still holds the old tree's
 * inodes of files that are open, with their pages. kernel_reload() drops
 * those pages and attributes for every file whose object the reload
 * changed or dropped, and marks it stale: its reads through the old tree
 * then fail (EIO), so no old byte is served after the SIGHUP.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_impl.h"
#include "util/log.h"

/* The buffer of a listing the pusher makes (kernel_list_from()): the
 * kernel asks for as much in one READDIRPLUS (up to its max_pages). */
#define KERNEL_LIST_BYTES 32768

/* Marks this thread as the daemon's own (fs->self) for the requests its
 * next calls make through the mount, so they are not taken for a
 * reader's. Returns the slot for kernel_self_end(), or -1 if every slot
 * is taken (more pushers than slots: not now). */
static int kernel_self_begin(struct fs *fs)
{
	pid_t tid = gettid(), none = 0;
	int i;

	for (i = 0; i < FS_SELF_MAX; i++, none = 0)
		if (__atomic_compare_exchange_n(&fs->self[i], &none, tid, false,
						__ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return i;
	return -1;
}

static void kernel_self_end(struct fs *fs, int slot)
{
	__atomic_store_n(&fs->self[slot], 0, __ATOMIC_RELAXED);
}

/* Lists item's directory from item on, through the mount: the kernel
 * then knows every file the readdirplus reply held (one request for as
 * many lookups as fit in KERNEL_LIST_BYTES), and the files after item in
 * name order are as likely as any to be pushed next (an order visits a
 * directory's files in any order). path: item's own path in the mount. */
static void kernel_list_from(struct fs_gen *g, uint32_t item, char *path)
{
	const struct view_node *n = view_node(g->d.view, g->item_ino[item]);
	char *slash = strrchr(path, '/');
	int64_t pos = n != NULL ? view_child_pos(g->d.view, n) : -ENOENT;
	char buf[KERNEL_LIST_BYTES];
	int fd;

	if (pos < 0 || slash == NULL)
		return;
	*slash = '\0';
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*slash = '/';
	if (fd < 0)
		return;
	/* Offsets: 2 + i starts at child i (fs_op_readdir). */
	if (lseek(fd, (off_t)(2 + pos), SEEK_SET) == (off_t)(2 + pos))
		(void)!getdents64(fd, buf, sizeof(buf));
	close(fd);
}

/* Makes sure the kernel knows item of g: lists its directory from it,
 * or looks it up, through the mount unless it knows it already. Returns
 * 0 or -ENOENT. */
static int kernel_know(struct fs *fs, struct fs_gen *g, uint32_t item)
{
	const struct manifest_entry *e = &g->d.manifest->entries[item];
	struct fs_gen *cur;
	struct stat st;
	char *path = NULL;
	bool current;
	int rc, slot;

	if (__atomic_load_n(&g->item_nlookup[item], __ATOMIC_RELAXED) > 0)
		return 0;
	/* The path leads to the current tree: a base that is no longer
	 * current (or its epoch trees) is reached by open files only. */
	cur = fs_gen_current(fs);
	current = cur == (g->base != NULL ? g->base : g);
	fs_gen_put(fs, cur, 1);
	if (!current || fs->mountpoint == NULL ||
	    g->item_rank[item] == UINT32_MAX)
		return -ENOENT;
	if (asprintf(&path, "%s/%srank-%u/%.*s", fs->mountpoint,
		     g->path_prefix != NULL ? g->path_prefix : "",
		     g->item_rank[item], (int)e->key_len, e->key) < 0)
		return -ENOENT;
	slot = kernel_self_begin(fs);
	if (slot < 0) {
		free(path);
		return -ENOENT;
	}
	kernel_list_from(g, item, path);
	rc = __atomic_load_n(&g->item_nlookup[item], __ATOMIC_RELAXED) > 0
		     ? 0
		     : lstat(path, &st);
	kernel_self_end(fs, slot);
	free(path);
	if (rc == 0 &&
	    __atomic_load_n(&g->item_nlookup[item], __ATOMIC_RELAXED) > 0)
		return 0;
	/* Another tree's file of that name (a reload or an eviction came
	 * between): not this one's; the kernel forgets that lookup itself. */
	return -ENOENT;
}

/* The cache's push function (cache_push_fn, ctx: the fs). */
static ssize_t fs_push(void *ctx, uint64_t order, uint64_t pos, uint64_t max)
{
	struct fs *fs = ctx;
	const struct manifest_entry *e;
	const uint8_t *stale;
	struct cache_object obj = { 0 };
	struct fuse_bufvec bv;
	uint32_t item;
	struct fs_gen *g = fs_order_item(fs, order, pos, &item);
	ssize_t got;
	void *buf;
	int rc;

	if (g == NULL)
		return -ENOENT;
	/* Stopping: no new fetch or lookup through the mount starts, so
	 * cache_set_push(NULL) waits only for calls already past here. */
	pthread_rwlock_rdlock(&fs->push_lock);
	got = fs->push_stop ? -ECANCELED : 0;
	pthread_rwlock_unlock(&fs->push_lock);
	if (got < 0)
		goto out;
	e = &g->d.manifest->entries[item];
	stale = g->base != NULL ? g->base->item_stale : g->item_stale;
	got = -EFBIG;
	/* A transform tree's file is an output whose size only a run
	 * tells: left to its reader (and the prefetcher's runs). */
	if (g->xf != NULL || e->size == 0 || e->size > max ||
	    g->item_ino[item] == 0 ||
	    __atomic_load_n(&stale[item], __ATOMIC_RELAXED))
		goto out;
	/* Pushed already, and the kernel still has the inode (another pass
	 * over the order): its pages are most likely there. */
	got = -EALREADY;
	if (__atomic_load_n(&g->item_pushed[item], __ATOMIC_RELAXED))
		goto out;
	got = kernel_know(fs, g, item);
	if (got < 0)
		goto out;
	got = -ENOMEM;
	buf = cache_buffer_alloc(fs->cache, (size_t)e->size);
	if (buf == NULL)
		goto out;
	obj.key = e->key;
	obj.key_len = e->key_len;
	obj.etag = e->etag;
	obj.etag_len = e->etag_len;
	obj.size = e->size;
	got = cache_read(fs->cache,
			 &(struct cache_read){ .obj = &obj,
					       .len = (size_t)e->size,
					       .buf = buf,
					       .order = CACHE_NO_ORDER });
	if (got == (ssize_t)e->size) {
		bv = (struct fuse_bufvec)FUSE_BUFVEC_INIT((size_t)e->size);
		bv.buf[0].mem = buf;
		pthread_rwlock_rdlock(&fs->push_lock);
		/* Written, not spliced: see fs_read_reply_mem(). */
		rc = fs->push_stop
			     ? -ECANCELED
			     : fuse_lowlevel_notify_store(
				       fs->se, FS_INO(g->id, g->item_ino[item]),
				       0, &bv, FUSE_BUF_NO_SPLICE);
		pthread_rwlock_unlock(&fs->push_lock);
		if (rc == 0)
			__atomic_store_n(&g->item_pushed[item], 1,
					 __ATOMIC_RELAXED);
		if (rc < 0) {
			log_msg(LOG_DEBUG, "page cache store of inode %llu: %s",
				(unsigned long long)FS_INO(g->id,
							   g->item_ino[item]),
				strerror(-rc));
			got = rc;
		}
	} else if (got >= 0) {
		got = -EIO;
	}
	cache_buffer_free(fs->cache, buf, (size_t)e->size);
out:
	fs_gen_put(fs, g, 1);
	return got;
}

void kernel_start(struct fs *fs, const char *mountpoint)
{
	if (fs->page_cache == 0)
		return;
	/* A path, not a descriptor: an open descriptor of the mount's root
	 * would keep it busy, and unmounting it would fail. */
	fs->mountpoint = strdup(mountpoint);
	if (fs->mountpoint == NULL)
		log_msg(LOG_WARNING,
			"out of memory: files are pushed into the page cache "
			"only once a reader looked them up");
	cache_set_push(fs->cache, fs_push, fs, fs->page_cache);
}

void kernel_stop(struct fs *fs)
{
	pthread_rwlock_wrlock(&fs->push_lock);
	fs->push_stop = true;
	pthread_rwlock_unlock(&fs->push_lock);
}

void kernel_end(struct fs *fs)
{
	cache_set_push(fs->cache, NULL, NULL, 0);
	free(fs->mountpoint);
	fs->mountpoint = NULL;
}

/* What kernel_reload() invalidates. */
struct kernel_inval {
	uint64_t *ino;
	size_t n, cap;
};

static void inval_add(struct kernel_inval *v, uint64_t ino)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 256;
		uint64_t *p = realloc(v->ino, cap * sizeof(*p));

		if (p == NULL)
			return; /* its pages stay; its reads still fail */
		v->ino = p;
		v->cap = cap;
	}
	v->ino[v->n++] = ino;
}

/* The inodes of stale items of g that the kernel knows. */
static void inval_collect(struct fs_gen *g, const uint8_t *stale,
			  struct kernel_inval *v)
{
	size_t i, n = g->d.manifest->count;

	for (i = 0; i < n; i++)
		if (stale[i] && g->item_ino[i] != 0 &&
		    __atomic_load_n(&g->item_nlookup[i], __ATOMIC_RELAXED))
			inval_add(v, FS_INO(g->id, g->item_ino[i]));
}

void kernel_reload(struct fs *fs, struct fs_gen *old, struct fs_gen *new)
{
	const struct manifest *om = old->d.manifest, *nm = new->d.manifest;
	struct kernel_inval v = { 0 };
	size_t i, changed = 0;
	struct fs_gen *g;

	if (fs->se == NULL || om == nm)
		return;
	for (i = 0; i < om->count; i++) {
		const struct manifest_entry *e = &om->entries[i];
		long j = manifest_find(nm, e->key, e->key_len);

		if (j >= 0 && nm->entries[j].etag_len == e->etag_len &&
		    memcmp(nm->entries[j].etag, e->etag, e->etag_len) == 0)
			continue;
		__atomic_store_n(&old->item_stale[i], 1, __ATOMIC_RELAXED);
		changed++;
	}
	if (changed == 0)
		return;
	/* The base and its epoch trees (the same manifest, items and
	 * stale marks). Their inodes are collected under the lock and
	 * invalidated outside it: a notification may wait for an inode
	 * lock a request holds. */
	pthread_rwlock_rdlock(&fs->gens_lock);
	for (g = fs->gens; g != NULL; g = g->next)
		if (g == old || g->base == old)
			inval_collect(g, old->item_stale, &v);
	pthread_rwlock_unlock(&fs->gens_lock);
	for (i = 0; i < v.n; i++) {
		int rc = fuse_lowlevel_notify_inval_inode(fs->se, v.ino[i], 0,
							  0);

		if (rc < 0 && rc != -ENOENT)
			log_msg(LOG_DEBUG, "invalidating inode %llu: %s",
				(unsigned long long)v.ino[i], strerror(-rc));
	}
	log_msg(LOG_INFO,
		"reload: %zu objects changed or gone; the kernel dropped what "
		"it cached of %zu of their files, and reads of them through "
		"the old tree fail",
		changed, v.n);
	free(v.ino);
}
