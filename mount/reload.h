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

#include "cache/cache.h"
#include "fs/fs.h"
#include "mount/config.h"
#include "mount/overrides.h"

/* What a reload needs from the mount; everything borrowed for the life of
 * the mount. Only the reload thread uses it (reloads never overlap). */
struct mount_reload {
	const char *config_path;
	const struct overrides *ov;
	/* The config the mount started with: the values every key that
	 * needs a restart keeps. */
	const struct config *running;
	struct cache *cache;
};

/* Reloads: see the file comment. Returns 0 after the swap (the log says
 * "reloaded: generation N, ..."), or a negative errno with the old tree
 * still served (-EINVAL: the config; what dataset_load or fs_swap
 * returned), each logged. Call from fs_hooks' reload, never from a FUSE
 * request. */
int mount_reload(struct fs *fs, const struct mount_reload *rl);

/* mount_reload as an fs_hooks reload hook (arg: struct mount_reload). */
int mount_reload_hook(struct fs *fs, void *arg);

/* For each key that cannot change without a restart and differs between
 * running and next: logs a warning naming it and sets it in next back to
 * its running value. Returns how many, or -ENOMEM (next then partly
 * reset; free it). */
int mount_reload_keep_restart_keys(const struct config *running,
				   struct config *next);

#endif
