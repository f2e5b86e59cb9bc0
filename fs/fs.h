/*
 * fs: the FUSE low-level filesystem over a view (docs/DESIGN.md §3, §8).
 *
 * Read-only: every mutating request gets EROFS, and the mount itself is
 * "ro". What a mount serves (a generation: manifest, plan, view) is
 * immutable, so entries and attributes get day-long timeouts, files open
 * with keep_cache, and the kernel is asked for 1 MiB read requests. A
 * reload (fs_swap) makes a new generation with new inode numbers instead of
 * changing one; the old one serves its open files and known inodes until
 * the kernel lets go of them. File data comes only through cache/; this
 * layer never talks to a backend.
 *
 * Threads: libfuse's multithreaded loop (or one thread with single_thread).
 * Shared state is the immutable generations (reference counted), relaxed
 * atomic counters, and the lazily built control file texts behind one
 * mutex per generation.
 */
#ifndef SHARDFS_FS_H
#define SHARDFS_FS_H

#include <stdbool.h>
#include <stdio.h>

#include "cache/cache.h"
#include "cache/xform.h"
#include "fs/view.h"
#include "plan/manifest.h"
#include "plan/shard.h"
#include "records/rindex.h"
#include "records/rplan.h"

struct fs_options {
	const char *mountpoint; /* absolute and canonical */
	const char *source;	/* shown as the device in /proc/mounts */
	bool foreground;	/* informational: the caller detaches */
	bool single_thread;	/* one request at a time */
	bool allow_other;	/* let other users read (needs user_allow_other
				 * in /etc/fuse.conf unless root) */
	bool debug;		/* libfuse traces every request to stderr */
	unsigned max_threads;	/* worker threads; 0 = 64 */
	/* Bytes of files the prefetcher may put into the kernel's page
	 * cache ahead of their readers ([prefetch] page_cache); 0: none. */
	uint64_t page_cache;
	/* The mount's transforms (cache/xform.h), borrowed for the mount's
	 * life: their counters go into .shardfs/stats. */
	struct xform *const *xforms;
	size_t n_xforms;
	/* The HTTP library's version for shardfs_build_info (NULL: ""):
	 * fs/ includes no curl header, mount/ asks backends/. */
	const char *libcurl;
};

/* A configured transform as the views show it (docs/DESIGN.md §3,
 * "Transform views"): MOUNT/transform-NAME/ mirrors the object views with
 * each file's name changed by the rule and its bytes the output of x. */
struct fs_transform {
	const char *name;
	const char *suffix;	/* added to a file's name ("" : none) */
	bool replace_extension; /* ... in place of its extension */
	struct xform *x;	/* attached to the mount's cache */
};

/* What the filesystem serves; all borrowed. fs_run()'s must outlive it;
 * fs_swap()'s until its release callback. */
struct fs_data {
	const struct manifest *manifest;
	const struct shard_spec *spec;
	const struct shard_plan *plan;
	/* A record view ([shard] unit = record): the index and plan its
	 * part files are read through (fs/recview.h); both NULL otherwise. */
	const struct rindex *rindex;
	const struct rplan *rplan;
	const struct view *view;
	struct cache *cache;
	/* The transforms, each a transform-NAME/ tree (none for a record
	 * view: the mount refuses that). */
	const struct fs_transform *transforms;
	size_t n_transforms;
};

/* A running mount, valid from hooks->ready until hooks->stopping returns. */
struct fs;

/* What the caller (mount/) does at the points of a mount's life; every hook
 * may be NULL. Hooks run in a thread of fs_run's, never in a FUSE request. */
struct fs_hooks {
	void *arg;
	/* The mount answers requests (its root was stat'ed through the
	 * kernel): report readiness, start what serves from it (metrics). */
	void (*ready)(struct fs *fs, void *arg);
	/* SIGHUP: build the new data and fs_swap() it in. Returns 0 or a
	 * negative errno (the old data stays; the hook logged why). */
	int (*reload)(struct fs *fs, void *arg);
	/* The mount is about to end (signal, unmount, abort): stop what
	 * ready started. */
	void (*stopping)(struct fs *fs, void *arg);
};

/* Makes SIGHUP a reload request for fs_run: one that arrives before the
 * mount's reload thread runs (while the manifest loads) is kept and
 * served then, instead of ending the process. Call early, before any
 * thread. */
void fs_signals_early(void);

/* Mounts at opt->mountpoint, serves until unmounted or until SIGINT or
 * SIGTERM, then unmounts. Returns 0 after a clean unmount, a negative
 * errno if the mount could not be set up, or -ECONNABORTED if the kernel
 * connection was aborted while serving (each logged). */
int fs_run(const struct fs_options *opt, const struct fs_data *data,
	   const struct fs_hooks *hooks);

/* Makes data the mount's new generation (a reload without unmount):
 * lookups through the root see the new tree at once, the kernel is told to
 * drop what it cached of the root (its entries and listing), and inodes and
 * open files of earlier generations keep reading their own tree until the
 * kernel lets go of them. data's pointers are borrowed until
 * release(owner) (may be NULL) is called: once, when the generation is
 * freed, from any thread (a FUSE worker, fs_swap's caller at the next
 * swap, or fs_run's at the end), never while a request still uses it.
 * data->cache must be the mount's cache. The caller must not be a FUSE
 * request handler of this mount (the invalidation could wait on it): call
 * it from fs_hooks' reload. Returns 0, or -ENOMEM, -EOVERFLOW (ids run
 * out after 2^32 - 1 reloads) or -ECANCELED (the mount is ending) with
 * nothing changed and release not called. */
int fs_swap(struct fs *fs, const struct fs_data *data,
	    void (*release)(void *owner), void *owner);

/* The current generation's number (0 at mount, +1 per fs_swap). */
uint32_t fs_generation(struct fs *fs);

/* Writes the text of .shardfs/stats (Prometheus text format). Thread-safe.
 * Returns 0 or -EIO if the stream failed. */
int fs_stats_write(struct fs *fs, FILE *f);

#endif
