/*
 * reload: what SIGHUP does to a running mount (docs/OPERATIONS-reload.md).
 *
 * Re-reads the mount's config file with the same -o overrides, loads the
 * manifest (the pinned file, or a fresh listing of the source) and the
 * plan, builds the tree for the selected ranks and swaps it in with
 * fs_swap(): new opens see the new tree, open files keep reading theirs.
 * Only [shard] and [source] manifest / manifest_sha256 (and allow_empty,
 * which only judges a listing) take effect live; every other key that
 * changed is logged as a warning, "KEY changed: needs a restart; keeping
 * VALUE", and the reload goes on with the value the mount started with
 * (the backend, the cache, the mount and the logs are set up once; a
 * listing or manifest URL is read from the running source). A config
 * that does not parse, a manifest that does not load or does not match
 * its pin, or a plan that cannot be computed fails the reload: the error
 * is logged and the old tree stays.
 */
#ifndef SHARDFS_RELOAD_H
#define SHARDFS_RELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "fs/fs.h"
#include "mount/config.h"
#include "mount/dataset.h"
#include "mount/overrides.h"

/* What a generation serves, in numbers and text (for STATUS= lines): a
 * copy, so readers never touch a generation a later reload frees. */
struct mount_served {
	size_t objects; /* in the manifest */
	uint64_t bytes; /* of the manifest */
	uint64_t world_size;
	char ranks[64]; /* the selected ranks, "0-3,8" */
};

/* Fills *out from a config and the dataset loaded from it. */
void mount_served_fill(const struct config *cfg, const struct dataset *ds,
		       struct mount_served *out);

/* What a reload needs from the mount; everything borrowed for the life of
 * the mount. Only the reload thread uses it (reloads never overlap). */
struct mount_reload {
	const char *config_path;
	const struct overrides *ov;
	/* The config the mount started with: the values every key that
	 * needs a restart keeps. */
	const struct config *running;
	struct cache *cache;
	/* The mount's transforms (opened once: a reload keeps them). */
	const struct fs_transform *transforms;
	size_t n_transforms;
	struct mount_served served; /* set by each successful reload */
};

/* Reloads: see the file comment. Returns 0 after the swap (the log says
 * "reloaded: generation N, ..."), or a negative errno with the old tree
 * still served (-EINVAL: the config; what dataset_load or fs_swap
 * returned), each logged. Call from fs_hooks' reload, never from a FUSE
 * request. */
int mount_reload(struct fs *fs, struct mount_reload *rl);

/* For each key that cannot change without a restart and differs between
 * running and next: logs a warning naming it and sets it in next back to
 * its running value. Returns how many, or -ENOMEM (next then partly
 * reset; free it). */
int mount_reload_keep_restart_keys(const struct config *running,
				   struct config *next);

#endif
