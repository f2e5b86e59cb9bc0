/*
 * fs: the FUSE low-level handlers. See fs.h.
 *
 * Inode numbers are view node numbers; lookups are never counted because
 * nodes never go away while mounted (forget is a no-op). Every handler
 * replies exactly once.
 *
 * Control files: manifest.tsv, plan and rank-R.order never change, so their
 * text is built on first use (getattr or open), kept, and served with
 * keep_cache; stats is rebuilt at each open into a handle-owned snapshot and
 * served with direct_io, so its st_size of 0 does not truncate reads.
 */
#include "fs/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/control.h"
#include "fs/fs_impl.h"
#include "util/log.h"

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static const struct view_node *node_of(struct fs *fs, fuse_ino_t ino)
{
	return view_node(fs->d.view, ino);
}

static size_t ctrl_slot(const struct view_node *n)
{
	switch (n->ctrl) {
	case VIEW_CTRL_MANIFEST:
		return 0;
	case VIEW_CTRL_PLAN:
		return 1;
	default:
		return 2 + n->u.rank;
	}
}

int fs_stats_write(struct fs *fs, FILE *f)
{
	struct control_stats st = { 0 };
	struct cache_stats cs;
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	cache_stats_get(fs->d.cache, &cs);
	st.uptime_seconds = (uint64_t)(now.tv_sec - fs->start_mono.tv_sec);
	st.open_files = __atomic_load_n(&fs->open_files, __ATOMIC_RELAXED);
	st.reads = __atomic_load_n(&fs->reads, __ATOMIC_RELAXED);
	st.read_bytes = __atomic_load_n(&fs->read_bytes, __ATOMIC_RELAXED);
	st.read_errors = __atomic_load_n(&fs->read_errors, __ATOMIC_RELAXED);
	st.backend_reads = cs.backend_reads;
	st.backend_bytes = cs.backend_bytes;
	st.backend_errors = cs.backend_errors;
	st.cache = cs;
	log_errors_get(&st.log);
	return control_write_stats(f, fs->d.manifest, fs->d.spec, fs->d.plan,
				   fs->d.view, &st);
}

static int ctrl_generate(struct fs *fs, const struct view_node *n,
			 struct ctrl_text *out)
{
	FILE *f;
	int rc;

	out->buf = NULL;
	out->len = 0;
	f = open_memstream(&out->buf, &out->len);
	if (f == NULL)
		return -ENOMEM;
	switch (n->ctrl) {
	case VIEW_CTRL_MANIFEST:
		rc = manifest_write(fs->d.manifest, f);
		break;
	case VIEW_CTRL_PLAN:
		rc = control_write_plan(f, fs->d.manifest, fs->d.spec,
					fs->d.plan);
		break;
	case VIEW_CTRL_ORDER:
		rc = control_write_order(f, fs->d.manifest, fs->d.plan,
					 n->u.rank);
		break;
	default:
		rc = fs_stats_write(fs, f);
		break;
	}
	if (fclose(f) != 0 && rc == 0)
		rc = -ENOMEM;
	if (rc < 0) {
		free(out->buf);
		out->buf = NULL;
		out->len = 0;
	}
	return rc;
}

/* The kept text of an immutable control file, built on first use. */
static int ctrl_get(struct fs *fs, const struct view_node *n,
		    const struct ctrl_text **out)
{
	size_t slot = ctrl_slot(n);
	struct ctrl_text *t;
	int rc = 0;

	pthread_mutex_lock(&fs->ctrl_lock);
	t = fs->ctrl[slot];
	if (t == NULL) {
		t = malloc(sizeof(*t));
		if (t == NULL)
			rc = -ENOMEM;
		else if ((rc = ctrl_generate(fs, n, t)) < 0)
			free(t);
		else
			fs->ctrl[slot] = t;
	}
	pthread_mutex_unlock(&fs->ctrl_lock);
	if (rc == 0)
		*out = t;
	return rc;
}

static int fill_attr(struct fs *fs, const struct view_node *n, struct stat *st)
{
	const struct ctrl_text *t;
	int rc;

	memset(st, 0, sizeof(*st));
	st->st_ino = view_ino(fs->d.view, n);
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_nlink = n->nlink;
	st->st_blksize = FS_BLKSIZE;
	switch (n->kind) {
	case VIEW_DIR:
		st->st_mode = S_IFDIR | 0555;
		st->st_mtim = fs->mount_time;
		break;
	case VIEW_FILE: {
		const struct manifest_entry *e =
			&fs->d.manifest->entries[n->u.item];

		st->st_mode = S_IFREG | 0444;
		st->st_size = (off_t)e->size;
		st->st_mtim.tv_sec = e->mtime_ns / 1000000000;
		st->st_mtim.tv_nsec = e->mtime_ns % 1000000000;
		if (st->st_mtim.tv_nsec < 0) {
			st->st_mtim.tv_sec--;
			st->st_mtim.tv_nsec += 1000000000;
		}
		break;
	}
	default:
		st->st_mode = S_IFREG | 0444;
		st->st_mtim = fs->mount_time;
		if (n->ctrl != VIEW_CTRL_STATS) {
			rc = ctrl_get(fs, n, &t);
			if (rc < 0)
				return rc;
			st->st_size = (off_t)t->len;
		}
		break;
	}
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
	return 0;
}

static int fill_entry(struct fs *fs, fuse_ino_t ino, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = FS_TIMEOUT;
	e->entry_timeout = FS_TIMEOUT;
	return fill_attr(fs, node_of(fs, ino), &e->attr);
}

static void fs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	static const struct {
		unsigned cap;
		const char *name;
	} wanted[] = {
		{ FUSE_CAP_ASYNC_READ, "async_read" },
		{ FUSE_CAP_PARALLEL_DIROPS, "parallel_dirops" },
		{ FUSE_CAP_READDIRPLUS, "readdirplus" },
		{ FUSE_CAP_READDIRPLUS_AUTO, "readdirplus_auto" },
	};
	size_t i;

	(void)userdata;
	for (i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		if (conn->capable & wanted[i].cap)
			conn->want |= wanted[i].cap;
		else
			log_msg(LOG_INFO, "kernel lacks FUSE capability %s",
				wanted[i].name);
	}
	/* The view never changes: no need to re-validate cached pages. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* max_write also sets max_pages, which is what lets the kernel send
	 * 1 MiB reads; max_read must match the max_read mount option. */
	conn->max_write = FS_IO_SIZE;
	conn->max_read = FS_IO_SIZE;
	conn->max_readahead = FS_IO_SIZE;
}

static void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	const struct view_node *dir = node_of(fs, parent);
	struct fuse_entry_param e;
	uint64_t ino;
	int rc;

	if (dir == NULL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = view_lookup(fs->d.view, dir, name, strlen(name), &ino);
	if (rc == 0)
		rc = fill_entry(fs, ino, &e);
	if (rc < 0) {
		/* A negative entry with a timeout lets the kernel cache
		 * misses too, e.g. for probes of files that never exist. */
		if (rc == -ENOENT) {
			memset(&e, 0, sizeof(e));
			e.entry_timeout = FS_TIMEOUT;
			fuse_reply_entry(req, &e);
			return;
		}
		fuse_reply_err(req, -rc);
		return;
	}
	fuse_reply_entry(req, &e);
}

static void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req);
}

static void fs_op_getattr(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n = node_of(fs, ino);
	struct stat st;
	int rc;

	(void)fi;
	if (n == NULL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = fill_attr(fs, n, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, FS_TIMEOUT);
}

static void fs_op_opendir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n = node_of(fs, ino);

	if (n == NULL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->kind != VIEW_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* Offsets: 1 is after ".", 2 after "..", 2 + i + 1 after child i. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       int plus)
{
	struct fs *fs = fs_of(req);
	const struct view_node *dir = node_of(fs, ino);
	char *buf;
	size_t used = 0;
	off_t i;

	if (dir == NULL || dir->kind != VIEW_DIR) {
		fuse_reply_err(req, dir == NULL ? ENOENT : ENOTDIR);
		return;
	}
	buf = malloc(size);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (i = off; i < 2 + (off_t)dir->u.dir.count; i++) {
		const struct view_node *n;
		char name[NAME_MAX + 1];
		struct fuse_entry_param e;
		size_t need;
		int rc;

		if (i < 2) {
			n = i == 0 ? dir
				   : view_node(fs->d.view, dir->parent + 1);
			strcpy(name, i == 0 ? "." : "..");
		} else {
			n = view_child(fs->d.view, dir, (uint32_t)(i - 2));
			memcpy(name, n->name, n->name_len);
			name[n->name_len] = '\0';
		}
		if (plus) {
			/* Attributes travel with the entry: fill them all. */
			rc = fill_entry(fs, view_ino(fs->d.view, n), &e);
			if (rc < 0) {
				free(buf);
				fuse_reply_err(req, -rc);
				return;
			}
		} else {
			/* Only the type and number are used. */
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = view_ino(fs->d.view, n);
			e.attr.st_mode =
				n->kind == VIEW_DIR ? S_IFDIR : S_IFREG;
		}
		if (plus)
			need = fuse_add_direntry_plus(
				req, buf + used, size - used, name, &e, i + 1);
		else
			need = fuse_add_direntry(req, buf + used, size - used,
						 name, &e.attr, i + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			  off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 0);
}

static void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			      off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 1);
}

static void object_of(struct fs *fs, uint32_t item, struct cache_object *obj)
{
	const struct manifest_entry *e = &fs->d.manifest->entries[item];

	obj->key = e->key;
	obj->key_len = e->key_len;
	obj->etag = e->etag;
	obj->etag_len = e->etag_len;
	obj->size = e->size;
}

/* The prefetcher's view of rank `order`: its non-pad items, in order. */
static bool order_object(void *ctx, uint64_t order, uint64_t pos,
			 struct cache_object *out)
{
	struct fs *fs = ctx;
	const uint32_t *items;
	size_t count, npad;

	shard_plan_rank(fs->d.plan, order, &items, &count, &npad);
	if (pos >= count - npad)
		return false;
	object_of(fs, items[pos], out);
	return true;
}

/* Frees what fs_op_open() put in fi->fh. */
static void handle_free(const struct view_node *n, struct fuse_file_info *fi)
{
	if (n->kind == VIEW_CTRL) {
		struct ctrl_handle *h = (struct ctrl_handle *)(uintptr_t)fi->fh;

		if (h != NULL)
			free(h->snapshot.buf);
		free(h);
	} else {
		cache_file_close((struct cache_file *)(uintptr_t)fi->fh);
	}
}

/* A small file the prefetcher has in memory goes into the kernel's page
 * cache now, while its open is answered (the open keeps the cache): the
 * reader's read() then costs no round trip to this process. Anything
 * else is read as usual. */
static void push_ready(struct fs *fs, fuse_ino_t ino, struct cache_file *cf,
		       uint64_t size)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT((size_t)size);
	void *buf;
	int rc;

	if (size == 0 || size > FS_IO_SIZE || fs->se == NULL)
		return;
	buf = cache_buffer_alloc(fs->d.cache, (size_t)size);
	if (buf == NULL)
		return;
	if (cache_file_read_ready(cf, 0, (size_t)size, buf) == (ssize_t)size) {
		bv.buf[0].mem = buf;
		rc = fuse_lowlevel_notify_store(fs->se, ino, 0, &bv, 0);
		if (rc < 0)
			log_msg(LOG_DEBUG, "page cache store of inode %lu: %s",
				(unsigned long)ino, strerror(-rc));
	}
	cache_buffer_free(fs->d.cache, buf, (size_t)size);
}

static void fs_op_open(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n = node_of(fs, ino);
	struct ctrl_handle *h;
	int rc;

	if (n == NULL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->kind == VIEW_DIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->fh = 0;
	if (n->kind == VIEW_CTRL) {
		h = calloc(1, sizeof(*h));
		if (h == NULL) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		if (n->ctrl == VIEW_CTRL_STATS) {
			rc = ctrl_generate(fs, n, &h->snapshot);
			h->text = &h->snapshot;
			fi->direct_io = 1;
		} else {
			rc = ctrl_get(fs, n, &h->text);
			fi->keep_cache = 1;
		}
		if (rc < 0) {
			free(h);
			fuse_reply_err(req, -rc);
			return;
		}
		fi->fh = (uint64_t)(uintptr_t)h;
	} else {
		uint32_t item = n->u.item;
		struct cache_object obj;
		struct cache_file *cf;

		object_of(fs, item, &obj);
		rc = cache_file_open(fs->d.cache, &obj, &cf);
		if (rc < 0) {
			fuse_reply_err(req, -rc);
			return;
		}
		fi->fh = (uint64_t)(uintptr_t)cf;
		fi->keep_cache = 1;
		push_ready(fs, ino, cf, obj.size);
	}
	__atomic_add_fetch(&fs->open_files, 1, __ATOMIC_RELAXED);
	if (fuse_reply_open(req, fi) != 0) {
		/* The opener went away (interrupted): no release follows. */
		__atomic_sub_fetch(&fs->open_files, 1, __ATOMIC_RELAXED);
		handle_free(n, fi);
	}
	/* After the reply: the opener goes on while the next files of its
	 * order are queued (n and the tables outlive every request). */
	if (n->kind == VIEW_FILE && fs->item_rank[n->u.item] != UINT32_MAX)
		cache_order_open(fs->d.cache, fs->item_rank[n->u.item],
				 fs->item_pos[n->u.item]);
}

static void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n = node_of(fs, ino);
	const struct manifest_entry *e;
	struct cache_object obj;
	ssize_t got;
	char *buf;

	__atomic_add_fetch(&fs->reads, 1, __ATOMIC_RELAXED);
	if (n->kind == VIEW_CTRL) {
		struct ctrl_handle *h = (struct ctrl_handle *)(uintptr_t)fi->fh;
		const struct ctrl_text *t = h->text;
		size_t len = 0;
		char *copy;

		if ((size_t)off < t->len)
			len = t->len - (size_t)off < size ? t->len - (size_t)off
							  : size;
		__atomic_add_fetch(&fs->read_bytes, len, __ATOMIC_RELAXED);
		if (t != &h->snapshot) {
			fuse_reply_buf(req, len ? t->buf + off : NULL, len);
			return;
		}
		/* The kernel may deliver the reply, let the reader close the
		 * file and send RELEASE (which frees the snapshot) before
		 * fuse_reply_buf() returns here: reply from a copy. */
		copy = malloc(len ? len : 1);
		if (copy == NULL) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(copy, t->buf + off, len);
		fuse_reply_buf(req, copy, len);
		free(copy);
		return;
	}
	e = &fs->d.manifest->entries[n->u.item];
	if ((uint64_t)off >= e->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > e->size - (uint64_t)off)
		size = (size_t)(e->size - (uint64_t)off);
	/* Reply buffers count in the cache's memory budget. */
	buf = cache_buffer_alloc(fs->d.cache, size);
	if (buf == NULL) {
		__atomic_add_fetch(&fs->read_errors, 1, __ATOMIC_RELAXED);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (fi->fh != 0) {
		got = cache_file_read((struct cache_file *)(uintptr_t)fi->fh,
				      (uint64_t)off, size, buf);
	} else {
		object_of(fs, n->u.item, &obj);
		got = cache_read(fs->d.cache, &obj, (uint64_t)off, size, buf);
	}
	if (got < 0) {
		__atomic_add_fetch(&fs->read_errors, 1, __ATOMIC_RELAXED);
		/* The detail was logged where it was understood; a reader
		 * sees EIO for any store fault, never stale bytes. */
		fuse_reply_err(req, got == -ENOMEM ? ENOMEM : EIO);
	} else {
		__atomic_add_fetch(&fs->read_bytes, (uint64_t)got,
				   __ATOMIC_RELAXED);
		fuse_reply_buf(req, buf, (size_t)got);
	}
	cache_buffer_free(fs->d.cache, buf, size);
}

static void fs_op_release(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n = node_of(fs, ino);

	if (n != NULL)
		handle_free(n, fi);
	__atomic_sub_fetch(&fs->open_files, 1, __ATOMIC_RELAXED);
	fuse_reply_err(req, 0);
}

static void fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (fs->d.manifest->total_bytes + 4095) / 4096;
	sv.f_files = view_node_count(fs->d.view);
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
	fuse_reply_statfs(req, &sv);
}

/* Every request that would change the tree. */
static void reply_erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

static void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			  int to_set, struct fuse_file_info *fi)
{
	(void)ino, (void)attr, (void)to_set, (void)fi;
	reply_erofs(req);
}

static void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode, dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	reply_erofs(req);
}

static void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	reply_erofs(req);
}

static void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	reply_erofs(req);
}

static void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
			  const char *name)
{
	(void)link, (void)parent, (void)name;
	reply_erofs(req);
}

static void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			 fuse_ino_t newparent, const char *newname,
			 unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	reply_erofs(req);
}

static void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		       const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	reply_erofs(req);
}

static void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
			size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)size, (void)off, (void)fi;
	reply_erofs(req);
}

static void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode, struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	reply_erofs(req);
}

static void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			   const char *value, size_t size, int flags)
{
	(void)ino, (void)name, (void)value, (void)size, (void)flags;
	reply_erofs(req);
}

static void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino, (void)name;
	reply_erofs(req);
}

static void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			    off_t offset, off_t length,
			    struct fuse_file_info *fi)
{
	(void)ino, (void)mode, (void)offset, (void)length, (void)fi;
	reply_erofs(req);
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_op_init,
	.lookup = fs_op_lookup,
	.forget = fs_op_forget,
	.getattr = fs_op_getattr,
	.opendir = fs_op_opendir,
	.readdir = fs_op_readdir,
	.readdirplus = fs_op_readdirplus,
	.open = fs_op_open,
	.read = fs_op_read,
	.release = fs_op_release,
	.statfs = fs_op_statfs,
	.setattr = fs_op_setattr,
	.mknod = fs_op_mknod,
	.mkdir = fs_op_mkdir,
	.unlink = fs_op_unlink,
	.rmdir = fs_op_unlink,
	.symlink = fs_op_symlink,
	.rename = fs_op_rename,
	.link = fs_op_link,
	.write = fs_op_write,
	.create = fs_op_create,
	.setxattr = fs_op_setxattr,
	.removexattr = fs_op_removexattr,
	.fallocate = fs_op_fallocate,
};

/* Every non-pad item belongs to exactly one rank's order, so an open file
 * names its rank and position (8 bytes per manifest item). */
static int item_order_build(struct fs *fs)
{
	const struct shard_plan *plan = fs->d.plan;
	size_t n = plan->n_items ? plan->n_items : 1, i;
	uint64_t r;

	fs->item_rank = malloc(n * sizeof(*fs->item_rank));
	fs->item_pos = malloc(n * sizeof(*fs->item_pos));
	if (fs->item_rank == NULL || fs->item_pos == NULL)
		return -ENOMEM;
	for (i = 0; i < plan->n_items; i++)
		fs->item_rank[i] = fs->item_pos[i] = UINT32_MAX;
	for (r = 0; r < plan->world_size; r++) {
		const uint32_t *items;
		size_t count, npad;

		shard_plan_rank(plan, r, &items, &count, &npad);
		for (i = 0; i < count - npad; i++) {
			fs->item_rank[items[i]] = (uint32_t)r;
			fs->item_pos[items[i]] = (uint32_t)i;
		}
	}
	return 0;
}

int fs_state_init(struct fs *fs, const struct fs_data *data)
{
	memset(fs, 0, sizeof(*fs));
	fs->d = *data;
	fs->uid = getuid();
	fs->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->mount_time);
	clock_gettime(CLOCK_MONOTONIC, &fs->start_mono);
	pthread_mutex_init(&fs->ctrl_lock, NULL);
	fs->n_ctrl = 2 + data->plan->world_size;
	fs->ctrl = calloc(fs->n_ctrl, sizeof(*fs->ctrl));
	if (fs->ctrl == NULL || item_order_build(fs) < 0)
		return -ENOMEM;
	cache_set_order(fs->d.cache, order_object, fs);
	return 0;
}

void fs_state_destroy(struct fs *fs)
{
	for (size_t i = 0; fs->ctrl != NULL && i < fs->n_ctrl; i++) {
		if (fs->ctrl[i] != NULL)
			free(fs->ctrl[i]->buf);
		free(fs->ctrl[i]);
	}
	free(fs->ctrl);
	if (fs->item_rank != NULL)
		cache_set_order(fs->d.cache, NULL, NULL);
	free(fs->item_rank);
	free(fs->item_pos);
	pthread_mutex_destroy(&fs->ctrl_lock);
}
