/*
 * fs_impl: what the files of fs/ share. Not for use outside fs/. Calls
 * between them go one way, from the top:
 *   session.c     -> swap.c (the state and the swap on reload), kernel.c,
 *                    epoch.c
 *   swap.c        -> kernel.c, epoch.c, gen.c
 *   fuse_ops.c    -> control_files.c, order.c, epoch.c, xfview.c, gen.c
 *   kernel.c      -> order.c, gen.c
 *   order.c       -> epoch.c, xfview.c, gen.c (the orders read-ahead walks)
 *   control_files.c -> control_stats.c -> control.c (the control texts);
 *                    control_files.c -> control.c, gen.c
 *   epoch.c       -> xfview.c, gen.c
 * and gen.c, xfview.c, control.c call none of them; any may use the
 * trees (view.c, recview.c), which call nothing of fs/.
 *
 * Generations. What a mount serves (manifest, plan, view, the order tables,
 * the control texts) is one generation, immutable once built. A reload
 * (fs_swap) builds a new one and makes it current; the old one is retired
 * and freed once nothing can reach it any more. A FUSE inode number names
 * its generation in its high 32 bits and its view node in its low 32
 * (FS_INO), so a request on an inode of a retired generation still finds
 * that generation's node, never another tree's node with the same number.
 * Generation 0 (the one the mount started with) therefore keeps the plain
 * view inode numbers. The root is the exception: FUSE_ROOT_ID always means
 * the current generation's root, since the kernel never forgets it.
 *
 * Lifetime: gen->refs counts what can still reach a generation:
 *   1 while it is current,
 *   + the kernel's lookups of its inodes (each positive lookup reply and
 *     readdirplus entry; each FORGET subtracts its nlookup),
 *   + its open files and directories' handles (open to release),
 *   + the requests working on it right now (fs_gen_get to fs_gen_put).
 * The kernel does not forget an inode it still uses (an open file, a
 * cwd, a cached dentry), so refs cannot reach 0 while a request can still
 * name one of its inodes; whoever drops refs to 0 unlinks it from
 * fs->gens and frees it. fs_gen_get only takes a reference while refs is
 * not 0 (a generation at 0 is being freed and is gone for good).
 */
#ifndef SHARDFS_FS_IMPL_H
#define SHARDFS_FS_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "fs/control.h"
#include "fs/fs.h"

/* Entries and attributes of a generation never change; a reload makes new
 * inodes and tells the kernel to drop the root's entries (fs_swap). */
#define FS_TIMEOUT (24.0 * 3600)
/* ... except the root's own entries and attributes (fuse_ops.c). */
#define FS_ROOT_TIMEOUT 1.0
#define FS_IO_SIZE (1u << 20) /* read request size asked of the kernel */
/* Worker threads (made on demand). Well above the kernel's limit on
 * background requests (max_background, 12), which is what bounds the
 * reads in flight: however many of those wait on a slow store, lookups,
 * opens and the .shardfs/ control files still find a thread. */
#define FS_THREADS_DEFAULT 64
#define FS_BLKSIZE (1u << 20) /* st_blksize: readers buffer this much */

/* Threads that may look files up through the mount at once (the
 * cache's pushers). */
#define FS_SELF_MAX 4

/* Inode numbers: generation id << 32 | view inode (the root: 1). */
#define FS_INO(gen_id, view_ino)                                               \
	((view_ino) == FUSE_ROOT_ID                                            \
		 ? (uint64_t)FUSE_ROOT_ID                                      \
		 : ((uint64_t)(gen_id) << 32 | (uint64_t)(view_ino)))
#define FS_INO_GEN(ino) ((uint32_t)((uint64_t)(ino) >> 32))
#define FS_INO_VIEW(ino) ((uint64_t)(ino)&UINT32_MAX)
/* A view inode with this bit set is a stats snapshot (below), not a view
 * node: views have fewer nodes (view_build()). */
#define FS_SNAP_BIT (UINT32_C(1) << 31)

struct ctrl_text {
	char *buf;
	size_t len;
};

/* A .shardfs/stats snapshot. The mount keeps no state per open file (the
 * kernel opens files without asking, fs_op_open), so a stats file that
 * must be as fresh as an open and never change under a reader is an inode
 * of its own: a lookup of a stats node (its entry times out at once, so
 * every open looks it up) makes a new snapshot with a new inode number,
 * whose text never changes; the kernel's FORGETs free it. One exception
 * keeps `cp` and friends working, which stat a file and then open it and
 * refuse one whose inode changed in between: a lookup answers with the
 * node's last snapshot while nothing read it yet and it is younger than
 * FS_SNAP_FRESH_NS. Listed in its generation's snaps. */
#define FS_SNAP_FRESH_NS (UINT64_C(1000000000))
struct fs_snap {
	uint32_t id;   /* FS_SNAP_BIT | serial: its view inode number */
	uint32_t node; /* the stats node it was looked up as */
	struct ctrl_text text;
	struct timespec mtime; /* when it was written */
	uint64_t born_ns;      /* the same, on CLOCK_MONOTONIC */
	bool read;	       /* atomic: a READ of it was answered */
	uint64_t nlookup; /* the kernel's lookups; protected by ctrl_lock */
	struct fs_snap *prev, *next;
};

/* The epoch trees a base generation keeps (epoch.c builds and evicts
 * them; gen.c makes and frees the table with the generation). At most
 * FS_EPOCH_VIEWS trees per base generation are kept; one evicted
 * lives on while the kernel still uses it (its entries are invalidated,
 * so only open files and working directories hold it). */
#define FS_EPOCH_VIEWS 4

/* Which tree: epoch-E, or epoch-E/skip-K[-of-W] with is_skip; with xf
 * (1 + the transform's index in fs_data.transforms; 0: none) the same
 * under transform-NAME/, and xf_top is transform-NAME/ itself (the
 * configured epoch, epoch ignored). */
struct epoch_key {
	uint64_t epoch;
	uint64_t skip, skip_world; /* with is_skip */
	bool is_skip;
	bool xf_top;
	uint32_t xf;
};

struct fs_epochs {
	pthread_mutex_t lock; /* guards everything below */
	struct {
		struct epoch_key key;
		struct fs_gen *gen; /* NULL: free; one reference */
		uint64_t used;	    /* LRU clock */
	} slot[FS_EPOCH_VIEWS];
	uint64_t clock;
	bool retired; /* the base is no longer current: no new trees */
};

struct fs_gen {
	uint32_t id;	 /* the high 32 bits of its inode numbers */
	uint32_t serial; /* base: reloads before it (fs_generation) */
	struct fs_data d;
	/* Called once when the generation is freed (NULL: nothing). */
	void (*release)(void *owner);
	void *owner;

	/* Where each manifest item sits in its rank's order (the
	 * prefetcher's hint), UINT32_MAX for items no rank reads;
	 * immutable. */
	uint32_t *item_rank;
	uint32_t *item_pos;
	/* Each manifest item's view inode (0: not in this view); immutable.
	 * And the kernel's lookups of it (relaxed atomics: + each positive
	 * entry, - each FORGET), so the pusher knows whether the kernel
	 * knows the file (kernel.c). */
	uint32_t *item_ino;
	uint32_t *item_nlookup;
	/* Relaxed atomics, one per item: 1 once the pusher put the whole
	 * file into the kernel's page cache, 0 again when the kernel forgets
	 * the inode (its pages go with it). A hint: the kernel may drop
	 * pages before, and reads of them then come to the daemon. */
	uint8_t *item_pushed;
	/* Relaxed atomics, one per manifest item: 1 once a reload found the
	 * object changed (kernel.c): reads of it through this tree fail. A
	 * base's; its epoch trees (same manifest) use the base's. */
	uint8_t *item_stale;

	/* A record view's: how far each part being read was asked for
	 * ahead (fs/recview.h); NULL otherwise. */
	struct recview_ahead *rv_ahead;

	/* Immutable control texts, built on first use. Slots: 0 manifest,
	 * 1 plan, 2 + r rank r's order. */
	pthread_mutex_t ctrl_lock; /* protects ctrl[], snaps, snap_serial */
	struct ctrl_text **ctrl;
	size_t n_ctrl;
	struct fs_snap *snaps;	   /* stats snapshots the kernel knows */
	struct fs_snap *snap_last; /* the newest, while the kernel knows it */
	uint32_t snap_serial;
	/* How the mount's root reaches this tree: "" for a base,
	 * "epoch-E/" or "epoch-E/skip-K[-of-W]/" for an epoch tree (set
	 * before it is listed; the pusher's own lookups). */
	char *path_prefix;

	/* Epoch trees (fs/epoch.c). A generation made by a reload or the
	 * mount (a base) keeps the epoch-E trees built from it in epochs;
	 * an epoch tree has base set (holding a reference on it: it
	 * borrows the base's manifest, index and cache) and shows its
	 * nodes data_node (epoch-E/ or skip-K/) and ctrl_node (their
	 * .shardfs/ directory) through the base's lookups. Immutable once
	 * the generation is listed (fs_gen_add sets them before). */
	struct fs_epochs *epochs;
	struct fs_gen *base;
	uint32_t data_node, ctrl_node; /* view inode numbers */
	bool skip;		       /* a skip-K tree (no skip-K below it) */
	/* A transform tree's (docs/DESIGN.md §3, "Transform views"): its
	 * transform (NULL: none), its index + 1 (epoch_key.xf), whether it
	 * is transform-NAME/ itself (epoch-E/ below it), and the manifest
	 * of the source keys (d.manifest has the renamed ones, same
	 * indices). */
	const struct fs_transform *xf;
	uint32_t xf_id;
	bool xf_top;
	const struct manifest *source;
	uint8_t next_asked; /* atomic: the next epoch's warm-up was asked */

	uint64_t refs; /* atomic; see the file comment */
	/* Atomic: lookups and readdirplus of the root working on this
	 * generation. fs_swap waits for them to end before telling the
	 * kernel to drop the root's entries, so no reply naming the old
	 * tree lands after the invalidation (it would stay a day). */
	uint64_t root_ops;
	struct fs_gen *next; /* protected by fs->gens_lock */
};

struct fs {
	struct cache *cache; /* shared by every generation */
	uid_t uid;
	gid_t gid;
	struct timespec mount_time; /* realtime: directory times */
	struct timespec start_mono; /* monotonic: uptime */

	/* Relaxed atomics: statistics only. */
	uint64_t reads;
	uint64_t read_bytes;
	uint64_t read_errors;
	uint64_t epoch_builds; /* epoch trees planned (fs/epoch.c) */
	/* Requests by opcode (FS_OP_*) from readers, and lookups the daemon
	 * made through its own mount (kernel.c). */
	uint64_t ops[FS_OP_COUNT];
	uint64_t self_lookups;
	uint64_t stale_reads; /* reads of a file a reload found changed */

	/* The kernel path (kernel.c): whether the kernel opens files without
	 * asking (set in init), the mountpoint for the pusher's own lookups
	 * (NULL: none), this process (whose own requests are not a
	 * reader's), and the bytes the pusher may put ahead of readers. */
	bool no_open;
	char *mountpoint;
	/* The threads looking a file up through the mount right now (their
	 * ids, as the kernel names a request's sender; 0: a free slot;
	 * relaxed atomics): their lookups are not a reader's. */
	pid_t self[FS_SELF_MAX];
	uint64_t page_cache;
	struct xform *const *xforms; /* fs_options': for the stats */
	size_t n_xforms;
	const char *libcurl; /* fs_options': for the stats */
	/* Pushes hold push_lock for reading around their notification;
	 * kernel_stop() takes it for writing, once, to let no more start
	 * before the unmount closes the session's fd (push_stop). */
	pthread_rwlock_t push_lock;
	bool push_stop; /* protected by push_lock */

	/* gens_lock protects current, the gens list and next_gen: readers
	 * (every request) find a generation and take a reference under the
	 * read lock; fs_swap and the last fs_gen_put change the list under
	 * the write lock. Lock order: swap_lock, then gens_lock; a
	 * generation's ctrl_lock is never taken with either held. Neither
	 * gens_lock nor ctrl_lock is held across a reply or I/O; swap_lock,
	 * which only fs_swap takes, is held across its notifications to the
	 * kernel (no request handler ever waits for it). */
	pthread_rwlock_t gens_lock;
	struct fs_gen *current;
	struct fs_gen *gens; /* every generation not yet freed */
	uint32_t next_gen;
	uint32_t swaps;		   /* fs_swap()s done: fs_generation() */
	pthread_mutex_t swap_lock; /* one fs_swap at a time */
	bool stopping; /* protected by swap_lock: the session is ending, no
			* more swaps (their notifications would go to a
			* closed or reused fd) */

	struct fuse_session *se;	      /* set before the loop starts */
	struct fs_epoch_worker *epoch_worker; /* fs/epoch.c */
};

extern const struct fuse_lowlevel_ops fs_ops;

/* swap.c. Refuses every later fs_swap (-ECANCELED); returns once a swap in
 * progress has sent its notifications. Call before the unmount. */
void fs_swap_stop(struct fs *fs);

/* Sets up fs's state over data (borrowed; it must outlive fs) as
 * generation 0. Returns 0 or -ENOMEM; fs_state_destroy() undoes either
 * way. */
int fs_state_init(struct fs *fs, const struct fs_data *data);
/* Frees every generation left (the loop has ended: no request runs). */
void fs_state_destroy(struct fs *fs);

/* gen.c. The generation with this id with a reference taken (NULL if it
 * is gone); FUSE_ROOT_ID's, the current one, through fs_gen_current(). */
struct fs_gen *fs_gen_get(struct fs *fs, uint32_t id);
struct fs_gen *fs_gen_current(struct fs *fs);
/* The generation of inode ino (the current one for the root), with a
 * reference, or NULL. */
struct fs_gen *fs_gen_of_ino(struct fs *fs, fuse_ino_t ino);
/* Adds n references to g, which the caller already holds one of. */
void fs_gen_ref(struct fs_gen *g, uint64_t n);
/* Drops n references; the last frees g. */
void fs_gen_put(struct fs *fs, struct fs_gen *g, uint64_t n);
/* Number of generations not yet freed (tests, stats), and of those the
 * epoch trees. */
size_t fs_gen_count(struct fs *fs);
size_t fs_epoch_count(struct fs *fs);
/* Makes a generation over data that is not current (an epoch tree), with
 * one reference for the caller and a new id. Returns 0, -ENOMEM or
 * -EOVERFLOW (ids ran out); on failure release is not called. */
struct fs_gen_tree {
	struct fs_gen *base; /* a reference the new generation owns */
	uint32_t data_node, ctrl_node;
	bool skip;
	char path[160]; /* its path_prefix, e.g. "epoch-7/skip-40-of-8/" */
	/* A transform tree's: as in struct fs_gen. */
	const struct fs_transform *xf;
	uint32_t xf_id;
	bool xf_top;
	const struct manifest *source;
};
int fs_gen_add(struct fs *fs, const struct fs_data *data,
	       const struct fs_gen_tree *tree, void (*release)(void *owner),
	       void *owner, struct fs_gen **out);
/* fs_state_init: makes generation 0 over data, current and listed.
 * Returns 0 or -ENOMEM. */
int fs_gen_first(struct fs *fs, const struct fs_data *data);
/* fs_swap (swap_lock held): makes a new base generation over data and
 * makes it current. Returns 0 with *new_out and *old_out, the generation
 * it replaced, which carries two references for the caller (the one it
 * held as current, and one more); or -ENOMEM, or -EOVERFLOW (ids ran
 * out; release is not called, the caller keeps owner). */
int fs_gen_install(struct fs *fs, const struct fs_data *data,
		   void (*release)(void *owner), void *owner,
		   struct fs_gen **new_out, struct fs_gen **old_out);
/* fs_state_destroy (no request runs): frees every generation left,
 * epoch trees before their bases. */
void fs_gen_free_all(struct fs *fs);

/* epoch.c: the epoch-E/ and skip-K/ trees (docs/DESIGN.md §3, "Epochs"). */
/* The largest W in skip-K-of-W: the plan on W ranks costs 16 bytes per
 * rank, so a name must not be able to ask for gigabytes. The config's own
 * bound on world_size (CONFIG_WORLD_SIZE_MAX). */
#define FS_SKIP_WORLD_MAX (1u << 20)
/* Starts and stops the worker that builds the next epoch's plan near the
 * end of an epoch and drops evicted trees from the kernel's caches.
 * fs_epoch_start returns 0 or -ENOMEM/-EAGAIN; fs_epoch_stop (idempotent)
 * returns once the worker has ended (before the unmount). */
int fs_epoch_start(struct fs *fs);
void fs_epoch_stop(struct fs *fs);
/* A lookup of name in dir (of generation g) that the view does not
 * have: epoch-E at the root or in .shardfs/, skip-K[-of-W] in an epoch-E
 * directory or its .shardfs/. Returns 0 with *tg (a reference for the
 * caller) and *tn, the node to answer; -ENOENT for any other name; or
 * -ENOMEM/-EOVERFLOW building the tree. */
int fs_epoch_link(struct fs *fs, struct fs_gen *g, const struct view_node *dir,
		  const char *name, struct fs_gen **tg,
		  const struct view_node **tn);
/* The next epoch's generation of g if it is built (a reference for the
 * caller), else NULL; never builds. */
struct fs_gen *fs_epoch_next(struct fs *fs, struct fs_gen *g);
/* An object at position pos of rank's order (count non-pad items) was
 * opened in g: near the end, asks for the next epoch's tree. */
void fs_epoch_opened(struct fs *fs, struct fs_gen *g, uint64_t pos,
		     uint64_t count);
/* g stops being current (fs_swap, with swap_lock held; or the end):
 * drops its kept trees and the kernel's entries for them. */
void fs_epoch_retire(struct fs *fs, struct fs_gen *g);

/* xfview.c: a transform tree's names (docs/DESIGN.md §3, "Transform
 * views"). m is the source manifest with each key's file name changed by
 * the rule (same indices, sizes and etags; its keys point into keys);
 * skip[i] is 1 for an item whose new name collides (another item's, a
 * directory's, or longer than 255 bytes), n_skipped their count. */
struct fs_xf_names {
	struct manifest m;
	char *keys;
	uint8_t *skip;
	size_t n_skipped;
};
/* Returns 0 and *out, or -ENOMEM. */
int fs_xf_names_build(const struct manifest *src, const struct fs_transform *t,
		      struct fs_xf_names **out);
void fs_xf_names_free(struct fs_xf_names *n);
/* p without the positions whose item skip marks (pads stay pads).
 * Returns 0 and *out (shard_plan_free), or -ENOMEM. */
int fs_xf_plan_filter(const struct shard_plan *p, const uint8_t *skip,
		      struct shard_plan **out);
/* The object to read for item of g: the source's, or for a transform
 * tree the output's (its size from xform_size(), which may run the
 * transform). Returns 0, or xform_size()'s error. */
int fs_item_object(struct fs_gen *g, uint32_t item, struct cache_object *out);
/* The source object of item (what the transform of a transform tree
 * reads; any tree's own object otherwise). */
void fs_item_source(const struct fs_gen *g, uint32_t item,
		    struct cache_object *out);

/* control_files.c: the .shardfs/ files of generation g (node n, kind VIEW_CTRL,
 * not stats). n's kept text, built on first use (borrowed: it lives as
 * long as g). Returns 0, or -ENOMEM building the text. */
int control_file_text(struct fs *fs, struct fs_gen *g,
		      const struct view_node *n, const struct ctrl_text **out);
/* A stats snapshot of stats node n for a lookup, with the lookup counted:
 * a new one listed in g->snaps, or the last one (see struct fs_snap).
 * Returns 0 and sets *out, or -ENOMEM. */
int control_snap_new(struct fs *fs, struct fs_gen *g, const struct view_node *n,
		     struct fs_snap **out);
/* The snapshot of g with view inode id, NULL if there is none. The
 * caller holds a reference on g; the snapshot lives until the kernel
 * forgets it, which it does not while it uses the inode. */
struct fs_snap *control_snap_find(struct fs_gen *g, uint32_t id);
/* The kernel forgot nlookup lookups of snapshot id: the last frees it. */
void control_snap_forget(struct fs_gen *g, uint32_t id, uint64_t nlookup);

/* kernel.c: what the daemon puts into the kernel on its own. */
/* Starts pushing (cache_set_push()) once the mount answers; the pusher's
 * own lookups go through mountpoint (copied). */
void kernel_start(struct fs *fs, const char *mountpoint);
/* Before the unmount: no push notification starts any more (they need
 * the session's fd, which the unmount closes). */
void kernel_stop(struct fs *fs);
/* After the unmount: waits for the pushes still running (a lookup of
 * their own ends with the connection) and closes the root. */
void kernel_end(struct fs *fs);
/* fs_swap: tells the kernel to drop what it caches of every file of old
 * (and of old's epoch trees) whose object new changed or dropped, and
 * marks those items stale in old. Called with swap_lock held. */
void kernel_reload(struct fs *fs, struct fs_gen *old, struct fs_gen *new);

/* order.c: the prefetcher's order callback (ctx: the fs). Orders are
 * gen id << 32 | rank (FS_ORDER), so a reload never mixes two plans. */
#define FS_ORDER(gen_id, rank) ((uint64_t)(gen_id) << 32 | (uint64_t)(rank))
bool fs_order_object(void *ctx, uint64_t order, uint64_t pos,
		     struct cache_object *out);
/* The generation (with a reference for the caller) and manifest item at
 * position pos of order, on into the next epoch's order past its end (if
 * that is planned); NULL past the end. */
struct fs_gen *fs_order_item(struct fs *fs, uint64_t order, uint64_t pos,
			     uint32_t *item);
/* A reader of transform tree g looked up position pos of rank's order:
 * queues the transform's runs of the next files of that order (on into
 * the next epoch's, once planned) ahead of it (xform_ahead()). Never
 * waits for a run. */
void fs_order_xf_ahead(struct fs *fs, struct fs_gen *g, uint32_t rank,
		       uint64_t pos);

#endif
