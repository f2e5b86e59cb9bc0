/*
 * fs: the FUSE low-level handlers. See fs.h.
 *
 * Every handler resolves its inode to a generation and a node of that
 * generation's view (fs_impl.h: the generation id is the inode's high 32
 * bits), holding a reference on the generation until it is done, including
 * what it does after its reply. Positive lookup replies and readdirplus
 * entries are counted as references until the kernel FORGETs them; open
 * handles until release. Every handler replies exactly once. A name the
 * view lacks may be an epoch-E/, skip-K/ or transform-NAME/ tree
 * (epoch.c): the lookup then answers with that tree's node and counts the
 * reference on that tree. A transform tree's file is its object's output:
 * its size (a lookup, a getattr) may run the transform, which a listing
 * never does (do_readdir).
 *
 * Control files (their texts, kept or snapshotted, and their handles are
 * control_files.c's): kept texts are served with keep_cache; the stats snapshot
 * with direct_io, so its st_size of 0 does not truncate reads.
 *
 * Longer than 700 lines because the 25 handlers of one lowlevel ops table
 * belong together; the generation bookkeeping they share lives in gen.c.
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/control.h"
#include "fs/fs_impl.h"
#include "fs/recview.h"
#include "util/log.h"
#include "util/str.h"

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Counts a request of opcode op, unless the daemon made it itself (the
 * pusher's lookups and listings through the mount, fs/kernel.c). Returns
 * true for a reader's request. */
static bool count_op(struct fs *fs, fuse_req_t req, int op)
{
	pid_t pid = fuse_req_ctx(req)->pid;
	bool self = false;

	for (int i = 0; i < FS_SELF_MAX && !self; i++)
		self = __atomic_load_n(&fs->self[i], __ATOMIC_RELAXED) == pid;
	if (self) {
		if (op == FS_OP_LOOKUP || op == FS_OP_READDIR)
			__atomic_add_fetch(&fs->self_lookups, 1,
					   __ATOMIC_RELAXED);
		return false;
	}
	__atomic_add_fetch(&fs->ops[op], 1, __ATOMIC_RELAXED);
	return true;
}

/* The generation (with a reference) and node of ino, or NULL for both
 * (ENOENT: an inode this mount never gave out, or of a generation the
 * kernel had already forgotten). A stats snapshot's inode names its stats
 * node and, in *snap (NULL: not one), the snapshot; snap NULL refuses
 * snapshots. */
static struct fs_gen *node_of(struct fs *fs, fuse_ino_t ino,
			      const struct view_node **n, struct fs_snap **snap)
{
	struct fs_gen *g = fs_gen_of_ino(fs, ino);
	uint64_t vino = FS_INO_VIEW(ino);

	*n = NULL;
	if (snap != NULL)
		*snap = NULL;
	if (g == NULL)
		return NULL;
	if (ino != FUSE_ROOT_ID && (vino & FS_SNAP_BIT)) {
		struct fs_snap *sn =
			snap != NULL ? control_snap_find(g, (uint32_t)vino)
				     : NULL;

		if (sn != NULL) {
			*n = view_node(g->d.view, sn->node);
			*snap = sn;
		}
	} else {
		*n = view_node(g->d.view, vino);
	}
	if (*n == NULL) {
		fs_gen_put(fs, g, 1);
		return NULL;
	}
	return g;
}

/* The start getattr, opendir and open share (lookup and read keep their
 * own: lookup needs to know whose request it counts, read answers
 * ESTALE): counts the request as op, then resolves ino as node_of() does. When it is gone,
 * answers ENOENT and returns NULL: req is then answered and freed. */
static struct fs_gen *node_of_req(fuse_req_t req, fuse_ino_t ino, int op,
				  const struct view_node **n,
				  struct fs_snap **snap)
{
	struct fs *fs = fs_of(req);
	struct fs_gen *g = node_of(fs, ino, n, snap);

	count_op(fs, req, op);
	if (g == NULL)
		fuse_reply_err(req, ENOENT);
	return g;
}

static fuse_ino_t ino_of(const struct fs_gen *g, const struct view_node *n)
{
	return FS_INO(g->id, view_ino(g->d.view, n));
}

/* .shardfs/stats and .shardfs/log: a snapshot inode per lookup (struct
 * fs_snap). */
static bool is_stats(const struct view_node *n)
{
	return n->kind == VIEW_CTRL &&
	       (n->ctrl == VIEW_CTRL_STATS || n->ctrl == VIEW_CTRL_LOG);
}

/* Attributes of n (of snapshot snap, if not NULL). A stats node without
 * a snapshot (a listing's entry) shows size 0: its reads come through a
 * lookup, which makes a snapshot. */
static int fill_attr(struct fs *fs, struct fs_gen *g, const struct view_node *n,
		     const struct fs_snap *snap, struct stat *st)
{
	const struct ctrl_text *t;
	int rc;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino_of(g, n);
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
			&g->d.manifest->entries[n->u.item];
		struct cache_object obj;

		st->st_mode = S_IFREG | 0444;
		st->st_size = (off_t)e->size;
		if (g->xf != NULL) {
			/* A transform's output: its exact size, which may
			 * need a run (bounded: xform_size()). */
			rc = fs_item_object(g, n->u.item, &obj);
			if (rc < 0)
				return rc;
			st->st_size = (off_t)obj.size;
		}
		st->st_mtim.tv_sec = e->mtime_ns / 1000000000;
		st->st_mtim.tv_nsec = e->mtime_ns % 1000000000;
		if (st->st_mtim.tv_nsec < 0) {
			st->st_mtim.tv_sec--;
			st->st_mtim.tv_nsec += 1000000000;
		}
		break;
	}
	case VIEW_PART:
		st->st_mode = S_IFREG | 0444;
		st->st_mtim = fs->mount_time;
		st->st_size = (off_t)recview_part_size(&g->d, n->u.part.rank,
						       n->u.part.part);
		break;
	default:
		st->st_mode = S_IFREG | 0444;
		st->st_mtim = fs->mount_time;
		if (snap != NULL) {
			st->st_ino = FS_INO(g->id, snap->id);
			st->st_size = (off_t)snap->text.len;
			st->st_mtim = snap->mtime;
		} else if (!is_stats(n)) {
			rc = control_file_text(fs, g, n, &t);
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

/* The root's entries and attributes are what a reload changes: the
 * kernel keeps them for a second only, so that a reply that raced past
 * fs_swap's invalidation is corrected within a second. Everything below
 * the root belongs to one generation and never changes, but for stats,
 * whose entry is looked up again at every use (each lookup a snapshot). */
static double timeout_of(const struct view_node *n)
{
	return is_stats(n) ? 0 : n->parent == 0 ? FS_ROOT_TIMEOUT : FS_TIMEOUT;
}

static int fill_entry(struct fs *fs, struct fs_gen *g,
		      const struct view_node *n, const struct fs_snap *snap,
		      struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = snap != NULL ? FS_INO(g->id, snap->id) : ino_of(g, n);
	e->entry_timeout = timeout_of(n);
	/* A snapshot never changes. */
	e->attr_timeout = snap != NULL ? FS_TIMEOUT : timeout_of(n);
	return fill_attr(fs, g, n, snap, &e->attr);
}

static void fs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	static const struct {
		unsigned cap;
		const char *name;
	} wanted[] = {
		{ FUSE_CAP_ASYNC_READ, "async_read" },
		{ FUSE_CAP_PARALLEL_DIROPS, "parallel_dirops" },
		/* Every listing with attributes (not the kernel's
		 * heuristic): a listed file needs no lookup. */
		{ FUSE_CAP_READDIRPLUS, "readdirplus" },
		/* Read replies from a checked blob splice from its file. */
		{ FUSE_CAP_SPLICE_WRITE, "splice_write" },
	};
	struct fs *fs = userdata;
	size_t i;

	for (i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		if (conn->capable & wanted[i].cap)
			conn->want |= wanted[i].cap;
		else
			log_msg(LOG_INFO, "kernel lacks FUSE capability %s",
				wanted[i].name);
	}
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* A generation never changes (a reload makes new inodes): no need
	 * to re-validate cached pages. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* The kernel then opens files without asking (fs_op_open) and keeps
	 * their pages across opens. */
	fs->no_open = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
	if (!fs->no_open)
		log_msg(LOG_INFO, "kernel lacks FUSE capability no_open: "
				  "every open is a request");
	/* max_write also sets max_pages, which is what lets the kernel send
	 * 1 MiB reads; max_read must match the max_read mount option. */
	conn->max_write = FS_IO_SIZE;
	conn->max_read = FS_IO_SIZE;
	conn->max_readahead = FS_IO_SIZE;
}

/* The kernel knows one more entry of node n of g: a file's count for
 * the pusher. */
static void entry_known(struct fs_gen *g, const struct view_node *n, int delta)
{
	if (n->kind == VIEW_FILE &&
	    __atomic_add_fetch(&g->item_nlookup[n->u.item], (uint32_t)delta,
			       __ATOMIC_RELAXED) == 0)
		/* The inode goes, and its pages with it. */
		__atomic_store_n(&g->item_pushed[n->u.item], 0,
				 __ATOMIC_RELAXED);
}

/* A reader is at file n of g (a lookup, or a read at its start): the
 * prefetcher and the pusher go on from its place in its rank's order,
 * and near the end of an epoch the next one is planned. */
static void reader_at(struct fs *fs, struct fs_gen *g,
		      const struct view_node *n, uint64_t reader)
{
	const uint32_t *items;
	size_t count, npad;
	uint32_t item, rank;

	/* u.item means something only for a file (a union). */
	if (n->kind != VIEW_FILE)
		return;
	item = n->u.item;
	rank = g->item_rank[item];
	if (rank == UINT32_MAX)
		return;
	cache_order_open(fs->cache, FS_ORDER(g->id, rank), g->item_pos[item],
			 reader);
	/* A transform tree's: its transform runs ahead too (the order's
	 * objects are the sources, which the prefetcher fetches). */
	if (g->xf != NULL)
		fs_order_xf_ahead(fs, g, rank, g->item_pos[item]);
	shard_plan_rank(g->d.plan, rank, &items, &count, &npad);
	fs_epoch_opened(fs, g, g->item_pos[item], count - npad);
}

/* Answers a lookup with node n of g (held by the caller), counting the
 * kernel's reference; a stats node answers with a new snapshot. Returns
 * 0 once answered, or a negative errno (not answered). */
static int reply_node(struct fs *fs, fuse_req_t req, struct fs_gen *g,
		      const struct view_node *n)
{
	struct fs_snap *snap = NULL;
	struct fuse_entry_param e;
	int rc;

	if (is_stats(n)) {
		rc = control_snap_new(fs, g, n, &snap);
		if (rc < 0)
			return rc;
	}
	rc = fill_entry(fs, g, n, snap, &e);
	if (rc < 0) {
		if (snap != NULL)
			control_snap_forget(g, snap->id, 1);
		return rc;
	}
	/* The kernel counts the lookup once it has the reply, and may
	 * FORGET it at once: count it first. */
	fs_gen_ref(g, 1);
	entry_known(g, n, 1);
	if (fuse_reply_entry(req, &e) != 0) {
		/* Interrupted: not counted. */
		entry_known(g, n, -1);
		if (snap != NULL)
			control_snap_forget(g, snap->id, 1);
		fs_gen_put(fs, g, 1);
	}
	return 0;
}

static void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	const struct view_node *dir;
	struct fs_gen *g = node_of(fs, parent, &dir, NULL);
	bool reader = count_op(fs, req, FS_OP_LOOKUP);
	/* Read before the answer frees req; the id of a read's reader too
	 * (struct cache_read). */
	uint64_t who = (uint64_t)fuse_req_ctx(req)->pid + 1;
	struct fs_gen *tg = NULL;
	const struct view_node *tn = NULL;
	struct fuse_entry_param e;
	uint64_t ino;
	int rc;

	if (g == NULL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (parent == FUSE_ROOT_ID)
		__atomic_add_fetch(&g->root_ops, 1, __ATOMIC_ACQ_REL);
	rc = view_lookup(g->d.view, dir, name, strlen(name), &ino);
	if (rc == 0) {
		tg = g;
		fs_gen_ref(tg, 1);
		tn = view_node(g->d.view, ino);
	} else if (rc == -ENOENT) {
		/* epoch-E/ and skip-K/: another generation's node. */
		rc = fs_epoch_link(fs, g, dir, name, &tg, &tn);
	}
	if (rc == 0)
		rc = reply_node(fs, req, tg, tn);
	if (rc == -ENOENT) {
		/* A negative entry with a timeout lets the kernel cache
		 * misses too, e.g. for probes of files that never exist. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout =
			parent == FUSE_ROOT_ID ? FS_ROOT_TIMEOUT : FS_TIMEOUT;
		fuse_reply_entry(req, &e);
	} else if (rc < 0) {
		fuse_reply_err(req, -rc);
	} else if (reader) {
		/* After the answer: the reader goes on meanwhile. */
		reader_at(fs, tg, tn, who);
	}
	if (tg != NULL)
		fs_gen_put(fs, tg, 1);
	if (parent == FUSE_ROOT_ID)
		__atomic_sub_fetch(&g->root_ops, 1, __ATOMIC_ACQ_REL);
	fs_gen_put(fs, g, 1);
}

/* The kernel dropped nlookup lookups of ino (never of the root, which it
 * does not count). */
static void forget_one(struct fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	uint64_t vino = FS_INO_VIEW(ino);
	const struct view_node *n;
	struct fs_gen *g;

	if (ino == FUSE_ROOT_ID || nlookup == 0)
		return;
	g = fs_gen_get(fs, FS_INO_GEN(ino));
	if (g == NULL) {
		log_msg(LOG_WARNING, "forget of inode %llu: no generation %u",
			(unsigned long long)ino, FS_INO_GEN(ino));
		return;
	}
	if (vino & FS_SNAP_BIT) {
		control_snap_forget(g, (uint32_t)vino, nlookup);
	} else {
		n = view_node(g->d.view, vino);
		if (n != NULL)
			entry_known(g, n, -(int)nlookup);
	}
	fs_gen_put(fs, g, nlookup + 1);
}

static void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fs_of(req);

	count_op(fs, req, FS_OP_FORGET);
	forget_one(fs, ino, nlookup);
	fuse_reply_none(req);
}

static void fs_op_forget_multi(fuse_req_t req, size_t count,
			       struct fuse_forget_data *forgets)
{
	struct fs *fs = fs_of(req);

	count_op(fs, req, FS_OP_FORGET);
	for (size_t i = 0; i < count; i++)
		forget_one(fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void fs_op_getattr(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n;
	struct fs_snap *snap;
	struct fs_gen *g = node_of_req(req, ino, FS_OP_GETATTR, &n, &snap);
	struct stat st;
	int rc;

	(void)fi;
	if (g == NULL)
		return;
	rc = fill_attr(fs, g, n, snap, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st,
				snap != NULL ? FS_TIMEOUT : timeout_of(n));
	fs_gen_put(fs, g, 1);
}

/* An open directory holds a reference on its generation (fi->fh) until
 * releasedir. The root's listing, which a reload changes, is not kept by
 * the kernel and always comes from the current generation (do_readdir). */
static void fs_op_opendir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n;
	struct fs_gen *g = node_of_req(req, ino, FS_OP_OPENDIR, &n, NULL);

	if (g == NULL)
		return;
	if (n->kind != VIEW_DIR) {
		fs_gen_put(fs, g, 1);
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->cache_readdir = ino != FUSE_ROOT_ID;
	fi->keep_cache = ino != FUSE_ROOT_ID;
	fi->fh = (uint64_t)(uintptr_t)g;
	/* The reference taken by node_of() becomes the handle's. */
	if (fuse_reply_open(req, fi) != 0)
		fs_gen_put(fs, g, 1);
}

static void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
			     struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);

	(void)ino;
	count_op(fs, req, FS_OP_OTHER);
	fs_gen_put(fs, (struct fs_gen *)(uintptr_t)fi->fh, 1);
	fuse_reply_err(req, 0);
}

/* Offsets: 1 is after ".", 2 after "..", 2 + i + 1 after child i. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct fs *fs = fs_of(req);
	/* Held by the open directory; for the root, the current one: an
	 * old tree's entries must not land in the kernel's dentries after
	 * a reload (a listing that spans a reload may then skip or repeat
	 * a name of the root, never of a rank's tree). */
	struct fs_gen *g = ino == FUSE_ROOT_ID
				   ? fs_gen_current(fs)
				   : fs_gen_get(fs, FS_INO_GEN(ino));
	const struct view_node *dir =
		g != NULL ? view_node(g->d.view, FS_INO_VIEW(ino)) : NULL;
	uint64_t counted = 0;
	char *buf;
	size_t used = 0;
	off_t i, end, last = off;

	(void)fi;
	count_op(fs, req, FS_OP_READDIR);
	if (dir == NULL || dir->kind != VIEW_DIR) {
		if (g != NULL)
			fs_gen_put(fs, g, 1);
		fuse_reply_err(req, dir == NULL ? ENOENT : ENOTDIR);
		return;
	}
	if (plus && ino == FUSE_ROOT_ID)
		__atomic_add_fetch(&g->root_ops, 1, __ATOMIC_ACQ_REL);
	buf = malloc(size);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		goto out;
	}
	/* The root lists transform-NAME/ after its own children (those
	 * are another generation's: looked up, fs_epoch_link). */
	end = 2 + (off_t)dir->u.dir.count;
	if (ino == FUSE_ROOT_ID)
		end += (off_t)g->d.n_transforms;
	for (i = off; i < end; i++) {
		const struct view_node *n;
		char name[NAME_MAX + 1];
		struct fuse_entry_param e;
		size_t need;
		int rc;

		if (i >= 2 + (off_t)dir->u.dir.count) {
			size_t k = (size_t)(i - 2 - dir->u.dir.count);

			snprintf(name, sizeof(name), "transform-%s",
				 g->d.transforms[k].name);
			/* No attributes (node id 0): a lookup links it. */
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = FS_INO(g->id, FS_SNAP_BIT - 1 - k);
			e.attr.st_mode = S_IFDIR | 0555;
			need = plus ? fuse_add_direntry_plus(req, buf + used,
							     size - used, name,
							     &e, i + 1)
				    : fuse_add_direntry(req, buf + used,
							size - used, name,
							&e.attr, i + 1);
			if (need > size - used)
				break;
			used += need;
			last = i + 1;
			continue;
		}
		if (i < 2) {
			n = i == 0 ? dir
				   : view_node(g->d.view, dir->parent + 1);
			strcpy(name, i == 0 ? "." : "..");
		} else {
			n = view_child(g->d.view, dir, (uint32_t)(i - 2));
			memcpy(name, n->name, n->name_len);
			name[n->name_len] = '\0';
		}
		if (plus && g->xf != NULL && n->kind == VIEW_FILE) {
			/* A transform's output: its size needs a run, and a
			 * listing never runs one. No attributes (node id 0:
			 * the kernel links no entry and looks the name up
			 * at its first use). */
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = ino_of(g, n);
			e.attr.st_mode = S_IFREG | 0444;
		} else if (plus) {
			/* Attributes travel with the entry: fill them all
			 * (a stats entry as its node: size 0, looked up
			 * again at its first use). */
			rc = fill_entry(fs, g, n, NULL, &e);
			if (rc < 0) {
				free(buf);
				fuse_reply_err(req, -rc);
				goto out;
			}
		} else {
			/* Only the type and number are used. */
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = ino_of(g, n);
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
		/* The kernel counts a lookup for every readdirplus entry
		 * but "." and ".." (fuse_direntplus_link). */
		if (plus && i >= 2 && e.ino != 0) {
			counted++;
			entry_known(g, n, 1);
		}
		last = i + 1;
	}
	fs_gen_ref(g, counted);
	if (fuse_reply_buf(req, buf, used) != 0) {
		fs_gen_put(fs, g, counted);
		for (i = off < 2 ? 2 : off;
		     plus && i < last && i < 2 + (off_t)dir->u.dir.count; i++) {
			const struct view_node *c =
				view_child(g->d.view, dir, (uint32_t)(i - 2));

			if (g->xf == NULL || c->kind != VIEW_FILE)
				entry_known(g, c, -1);
		}
	}
	free(buf);
out:
	if (plus && ino == FUSE_ROOT_ID)
		__atomic_sub_fetch(&g->root_ops, 1, __ATOMIC_ACQ_REL);
	fs_gen_put(fs, g, 1);
}

static void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			  off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 0);
}

static void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			      off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

/* The mount keeps nothing per open file: a file's bytes come through the
 * cache by inode, a control file's from its kept text or its snapshot.
 * So where the kernel can open files itself (no_open), the first open
 * answers ENOSYS and the kernel never asks again: it opens every file of
 * the connection itself, keeping its page cache (FOPEN_KEEP_CACHE), and
 * sends no RELEASE. Otherwise each open answers with keep_cache. */
static void fs_op_open(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n;
	struct fs_snap *snap;
	struct fs_gen *g = node_of_req(req, ino, FS_OP_OPEN, &n, &snap);
	int rc;

	if (g == NULL)
		return;
	rc = n->kind == VIEW_DIR ? -EISDIR : 0;
	if (rc == 0 &&
	    ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)))
		rc = -EROFS;
	fs_gen_put(fs, g, 1);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (fs->no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->fh = 0;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* fs_op_read()'s reply, from where the cache holds the bytes. */
struct fs_read_reply {
	fuse_req_t req;
	struct cache *cache;
	bool replied;
	size_t bytes;
};

/* The most bytes of a file libfuse splices into a reply: its pipe must
 * hold the reply and three pages more, and grows at most to
 * fs.pipe-max-size (1 MiB by default, so a 1 MiB read does not fit).
 * Past it libfuse would read the file into a fresh allocation per reply;
 * fs_read_reply_send() reads into a pooled buffer instead. 0: unknown. */
static size_t fs_splice_max(void)
{
	static size_t max = SIZE_MAX; /* SIZE_MAX: not read yet */
	size_t m = __atomic_load_n(&max, __ATOMIC_RELAXED);
	long page = sysconf(_SC_PAGESIZE);
	unsigned long v = 0;
	FILE *f;

	if (m != SIZE_MAX)
		return m;
	f = fopen("/proc/sys/fs/pipe-max-size", "re");
	if (f != NULL) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 0;
		fclose(f);
	}
	m = v > 4 * (unsigned long)page ? v - 4 * (size_t)page : 0;
	__atomic_store_n(&max, m, __ATOMIC_RELAXED);
	return m;
}

/* fs_read_reply_send() for pieces all in memory: one writev() of them.
 * libfuse's splice path would write() them into its pipe (a copy) and
 * splice the pipe to the kernel (a second copy, three system calls);
 * writev() copies once. */
static int fs_read_reply_mem(struct fs_read_reply *r,
			     const struct cache_piece *pieces, unsigned n)
{
	struct iovec one, *iov = &one;
	unsigned i;

	if (n > 1) {
		iov = calloc(n, sizeof(*iov));
		if (iov == NULL)
			return -ENOMEM;
	}
	r->bytes = 0;
	for (i = 0; i < n; i++) {
		iov[i].iov_base = (void *)(uintptr_t)pieces[i].mem;
		iov[i].iov_len = pieces[i].len;
		r->bytes += pieces[i].len;
	}
	r->replied = true;
	fuse_reply_iov(r->req, iov, (int)n);
	if (iov != &one)
		free(iov);
	return 0;
}

/* A cache_reply_fn: replies with the pieces in place. libfuse writes the
 * reply to the kernel within fuse_reply_data() (splicing a descriptor
 * where the kernel allows), so the pieces need live only this long. */
static int fs_read_reply_send(void *arg, const struct cache_piece *pieces,
			      unsigned n)
{
	struct fs_read_reply *r = arg;
	struct fuse_bufvec one = FUSE_BUFVEC_INIT(0), *bv = &one;
	unsigned i;

	if (n == 0) {
		r->replied = true;
		fuse_reply_buf(r->req, NULL, 0);
		return 0;
	}
	if (n == 1 && pieces[0].mem == NULL &&
	    (pieces[0].len < 2 * 4096 || pieces[0].len > fs_splice_max())) {
		/* libfuse would not splice it: read it here, into a pooled
		 * buffer, and a file cut short is an error, not a short
		 * reply. */
		size_t len = pieces[0].len;
		char *buf = cache_buffer_alloc(r->cache, len);
		ssize_t got;

		if (buf == NULL)
			return -ENOMEM;
		got = pread(pieces[0].fd, buf, len, (off_t)pieces[0].pos);
		if (got != (ssize_t)len) {
			cache_buffer_free(r->cache, buf, len);
			return -EIO;
		}
		r->replied = true;
		r->bytes = len;
		fuse_reply_buf(r->req, buf, len);
		cache_buffer_free(r->cache, buf, len);
		return 0;
	}
	for (i = 0; i < n && pieces[i].mem != NULL; i++)
		;
	if (i == n)
		return fs_read_reply_mem(r, pieces, n);
	if (n > 1) {
		bv = calloc(1, sizeof(*bv) + (n - 1) * sizeof(bv->buf[0]));
		if (bv == NULL)
			return -ENOMEM;
		bv->count = n;
	}
	r->bytes = 0;
	for (i = 0; i < n; i++) {
		struct fuse_buf *b = &bv->buf[i];

		b->size = pieces[i].len;
		if (pieces[i].mem != NULL) {
			b->flags = 0;
			b->mem = (void *)(uintptr_t)pieces[i].mem;
		} else {
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
			b->fd = pieces[i].fd;
			b->pos = (off_t)pieces[i].pos;
		}
		r->bytes += pieces[i].len;
	}
	r->replied = true;
	/* On an error libfuse has answered the request or dropped it with
	 * its connection: either way it is done. */
	fuse_reply_data(r->req, bv, 0);
	if (bv != &one)
		free(bv);
	return 0;
}

/* Answers a read from buf (size bytes from cache_buffer_alloc(), got of
 * them read, or a negative errno) and frees buf. */
static void reply_buffer(struct fs *fs, fuse_req_t req, char *buf, size_t size,
			 ssize_t got)
{
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
	cache_buffer_free(fs->cache, buf, size);
}

/* A record view's part: its bytes are assembled from several records
 * (fs/recview.h) into a reply buffer. Drops the request's reference. */
static void fs_read_part(struct fs *fs, struct fs_gen *g,
			 const struct view_node *n, fuse_req_t req, size_t size,
			 uint64_t off)
{
	uint64_t total =
		recview_part_size(&g->d, n->u.part.rank, n->u.part.part);
	ssize_t got;
	char *buf;

	if (off >= total) {
		fs_gen_put(fs, g, 1);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > total - off)
		size = (size_t)(total - off);
	buf = cache_buffer_alloc(fs->cache, size);
	if (buf == NULL) {
		fs_gen_put(fs, g, 1);
		__atomic_add_fetch(&fs->read_errors, 1, __ATOMIC_RELAXED);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	got = recview_read(&g->d, g->rv_ahead, n->u.part.rank, n->u.part.part,
			   off, size, buf);
	fs_gen_put(fs, g, 1);
	reply_buffer(fs, req, buf, size, got);
}

/* A read of a control file: its kept text (immutable, in g) or its
 * snapshot (immutable until the kernel forgets it, which it does not
 * while it reads it). A stats node without a snapshot has size 0. */
static void fs_read_ctrl(struct fs *fs, struct fs_gen *g,
			 const struct view_node *n, struct fs_snap *snap,
			 fuse_req_t req, size_t size, uint64_t off)
{
	static const struct ctrl_text none;
	const struct ctrl_text *t = &none;
	size_t len = 0;
	int rc;

	if (snap != NULL) {
		t = &snap->text;
		/* The next lookup makes a fresh one (struct fs_snap). */
		__atomic_store_n(&snap->read, true, __ATOMIC_RELAXED);
	} else if (!is_stats(n)) {
		rc = control_file_text(fs, g, n, &t);
		if (rc < 0) {
			fuse_reply_err(req, -rc);
			return;
		}
	}
	if (off < t->len)
		len = t->len - off < size ? (size_t)(t->len - off) : size;
	__atomic_add_fetch(&fs->read_bytes, len, __ATOMIC_RELAXED);
	fuse_reply_buf(req, len ? t->buf + off : NULL, len);
}

static void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct view_node *n;
	struct fs_snap *snap;
	struct fs_gen *g = node_of(fs, ino, &n, &snap);
	const struct manifest_entry *e;
	struct cache_object obj = { 0 };
	struct fs_read_reply r = { .req = req, .cache = fs->cache };
	struct cache_read rd = { 0 };
	const uint8_t *stale;
	ssize_t got;

	(void)fi;
	count_op(fs, req, FS_OP_READ);
	__atomic_add_fetch(&fs->reads, 1, __ATOMIC_RELAXED);
	if (g == NULL) {
		/* The kernel reads only inodes it knows: cannot happen. */
		__atomic_add_fetch(&fs->read_errors, 1, __ATOMIC_RELAXED);
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (n->kind == VIEW_CTRL) {
		fs_read_ctrl(fs, g, n, snap, req, size, (uint64_t)off);
		fs_gen_put(fs, g, 1);
		return;
	}
	if (n->kind == VIEW_PART) {
		fs_read_part(fs, g, n, req, size, (uint64_t)off);
		return;
	}
	e = &g->d.manifest->entries[n->u.item];
	stale = g->base != NULL ? g->base->item_stale : g->item_stale;
	if (__atomic_load_n(&stale[n->u.item], __ATOMIC_RELAXED)) {
		/* A reload changed it: no old byte after the SIGHUP. */
		uint64_t k = __atomic_fetch_add(&fs->stale_reads, 1,
						__ATOMIC_RELAXED);

		if (k == 0) {
			char *key = manifest_escaped_copy(e->key, e->key_len);

			log_msg(LOG_WARNING,
				"a reload changed files still open: their "
				"reads fail (EIO) until reopened, e.g. %s",
				key != NULL ? key : "?");
			free(key);
		}
		fs_gen_put(fs, g, 1);
		__atomic_add_fetch(&fs->read_errors, 1, __ATOMIC_RELAXED);
		fuse_reply_err(req, EIO);
		return;
	}
	/* A transform tree's file: its output (the size is known, or the
	 * run is joined or made now: xform_size()). */
	got = fs_item_object(g, n->u.item, &obj);
	if (got < 0) {
		fs_gen_put(fs, g, 1);
		__atomic_add_fetch(&fs->read_errors, 1, __ATOMIC_RELAXED);
		fuse_reply_err(req, got == -ENOMEM ? ENOMEM : EIO);
		return;
	}
	rd.obj = &obj;
	rd.offset = (uint64_t)off;
	rd.len = size;
	rd.reply = fs_read_reply_send;
	rd.reply_arg = &r;
	/* Its reads share a read-ahead window per reading thread. */
	rd.reader = (uint64_t)fuse_req_ctx(req)->pid + 1;
	rd.order = CACHE_NO_ORDER;
	/* An output is not its order's object (the source is: the
	 * prefetcher follows a transform tree's reader from its lookups). */
	if (g->xf == NULL && g->item_rank[n->u.item] != UINT32_MAX) {
		rd.order = FS_ORDER(g->id, g->item_rank[n->u.item]);
		rd.pos = g->item_pos[n->u.item];
	}
	/* The reply may let the reader go on before it returns: the request
	 * holds g, whose strings obj borrows. */
	got = cache_read(fs->cache, &rd);
	if (off == 0 && rd.order != CACHE_NO_ORDER) {
		const uint32_t *items;
		size_t count, npad;

		shard_plan_rank(g->d.plan, g->item_rank[n->u.item], &items,
				&count, &npad);
		fs_epoch_opened(fs, g, rd.pos, count - npad);
	}
	fs_gen_put(fs, g, 1);
	if (r.replied) {
		__atomic_add_fetch(&fs->read_bytes, r.bytes, __ATOMIC_RELAXED);
		return;
	}
	__atomic_add_fetch(&fs->read_errors, 1, __ATOMIC_RELAXED);
	/* The detail was logged where it was understood; a reader sees EIO
	 * for any store fault, never stale bytes. */
	fuse_reply_err(req, got == -ENOMEM ? ENOMEM : EIO);
}

/* Only where the kernel asks for opens (fs_op_open): nothing was kept. */
static void fs_op_release(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	count_op(fs_of(req), req, FS_OP_RELEASE);
	fuse_reply_err(req, 0);
}

/* df: the dataset's size, none of it used and all of it free, inodes
 * likewise. A read-only mount with nothing free read as 100% used and
 * tripped disk-full alerts (node_exporter's avail/size); rclone's mounts
 * report free space too when the store gives none. Free space here
 * promises no write: every write is EROFS. docs/OPERATIONS.md. */
static void fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	struct fs_gen *g = fs_gen_current(fs);
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (g->d.manifest->total_bytes + 4095) / 4096;
	sv.f_bfree = sv.f_bavail = sv.f_blocks;
	sv.f_files = view_node_count(g->d.view);
	sv.f_ffree = sv.f_favail = sv.f_files;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
	fs_gen_put(fs, g, 1);
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
	.forget_multi = fs_op_forget_multi,
	.getattr = fs_op_getattr,
	.opendir = fs_op_opendir,
	.releasedir = fs_op_releasedir,
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
