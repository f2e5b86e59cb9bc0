/*
 * view: the immutable directory tree a mount serves (docs/DESIGN.md §3).
 *
 *   /rank-R/<key path>      rank R's non-pad items, for each selected rank
 *   /rank-R/records/part-PPPPP-of-QQQQQ.EXT
 *                           instead, for a record view: rank R's records
 *                           (records/rplan.h), pads included
 *   /.shardfs/manifest.tsv  control files, served by fs/control_files.c
 *                           (texts: fs/control.c, fs/control_stats.c)
 *   /.shardfs/plan
 *   /.shardfs/rank-R.order  for each selected rank
 *   /.shardfs/stats
 *
 * Nodes live in one array; a node's inode number is its index + 1, so the
 * root is inode 1 (FUSE_ROOT_ID) and inodes are stable for the life of the
 * view. Each directory's children are sorted by name bytes, which is both
 * the readdir order and what lookup binary-searches. Names point into the
 * manifest's keys, so the manifest must outlive the view.
 *
 * After view_build() nothing changes: any number of threads may read it.
 */
#ifndef SHARDFS_VIEW_H
#define SHARDFS_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan/manifest.h"
#include "plan/shard.h"
#include "records/rplan.h"

enum view_kind {
	VIEW_DIR = 0,
	VIEW_FILE, /* an object: item is its manifest index */
	VIEW_CTRL, /* a control file under .shardfs/ */
	VIEW_PART, /* a record view's part file: u.part */
};

enum view_ctrl {
	VIEW_CTRL_MANIFEST = 0,
	VIEW_CTRL_PLAN,
	VIEW_CTRL_ORDER, /* rank says whose */
	VIEW_CTRL_STATS,
	VIEW_CTRL_LOG, /* the last warnings and errors */
};

struct view_node {
	const char *name; /* not NUL-terminated */
	uint32_t name_len;
	uint32_t parent; /* node index; the root is its own parent */
	uint8_t kind;	 /* enum view_kind */
	uint8_t ctrl;	 /* enum view_ctrl, for VIEW_CTRL */
	uint32_t nlink;	 /* directories: 2 + subdirectories; else 1 */
	union {
		uint32_t item; /* VIEW_FILE */
		uint32_t rank; /* VIEW_CTRL order files */
		struct {
			uint32_t rank;
			uint32_t part;
		} part; /* VIEW_PART */
		struct {
			uint32_t first; /* into the children array */
			uint32_t count;
		} dir;
	} u;
};

struct view;

/* Returns true if rank r is to be shown. */
typedef bool (*view_rank_filter)(const void *ctx, uint64_t r);

/* Builds the tree for the ranks selected by filter (all if NULL); with rp
 * (a record view; plan then has no items) each rank directory holds
 * records/ and its parts. m, plan and rp are borrowed and must outlive the
 * view. Returns 0 and sets *out, or -ENOMEM, or -EOVERFLOW (more than
 * 2^32 - 2 nodes). */
int view_build(const struct manifest *m, const struct shard_plan *plan,
	       const struct rplan *rp, view_rank_filter filter,
	       const void *filter_ctx, struct view **out);

/* The same with the rank directories in a directory named top (borrowed;
 * a child of the root beside .shardfs) instead of in the root: an
 * epoch-E/ tree (fs/epoch.c), whose root is never shown. top NULL is
 * view_build(). */
int view_build_under(const struct manifest *m, const struct shard_plan *plan,
		     const struct rplan *rp, view_rank_filter filter,
		     const void *filter_ctx, const char *top,
		     struct view **out);

/* Frees the view; NULL is a no-op. */
void view_free(struct view *v);

/* The node for an inode number, or NULL if there is none. */
const struct view_node *view_node(const struct view *v, uint64_t ino);

/* The inode number of a node returned by this view. */
uint64_t view_ino(const struct view *v, const struct view_node *n);

/* Finds name in directory dir. Returns 0 and sets *ino, -ENOENT, or
 * -ENOTDIR if dir is not a directory. */
int view_lookup(const struct view *v, const struct view_node *dir,
		const char *name, size_t name_len, uint64_t *ino);

/* The i-th child of dir in name order (i < dir->u.dir.count). */
const struct view_node *view_child(const struct view *v,
				   const struct view_node *dir, uint32_t i);

/* The position of n among its parent's children (its readdir offset is
 * 2 + that), or -ENOENT for the root. */
int64_t view_child_pos(const struct view *v, const struct view_node *n);

/* Number of nodes (the largest inode number). */
size_t view_node_count(const struct view *v);

#endif
