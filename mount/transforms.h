/*
 * transforms: a mount's [transform NAME] sections opened (issue 27): each
 * one's runner (transform/transform.h) checked and prepared at mount,
 * and attached to the mount's disk cache (cache/xform.h), so that a
 * config whose transform cannot run fails the mount, naming it, instead
 * of every later read; and the list of them the views show as
 * MOUNT/transform-NAME/ (fs/fs.h, struct fs_transform).
 */
#ifndef SHARDFS_MOUNT_TRANSFORMS_H
#define SHARDFS_MOUNT_TRANSFORMS_H

#include "cache/cache.h"
#include "fs/fs.h"
#include "mount/config.h"

struct mount_transforms;

/* Opens every transform of cfg on cache, in the config's order. Logs each
 * one (its command, mode and identity) and the sandbox = none opt-out as
 * a warning. Returns 0 and *out (NULL when cfg has none), or a negative
 * errno, logged naming the transform: -EINVAL (a disk cache is needed and
 * none is open), transform_open()'s errors, -ENOMEM; then *out (possibly
 * NULL) holds those opened before the failure, attached to cache: free
 * it the same way. */
int mount_transforms_open(const struct config *cfg, struct cache *cache,
			  struct mount_transforms **out);

/* The opened transforms as the views show them, in the config's order:
 * *n entries (0 for m NULL), valid until mount_transforms_free(m). */
const struct fs_transform *
mount_transforms_views(const struct mount_transforms *m, size_t *n);

/* Frees m: after cache_free() of the cache they were opened on (it holds
 * their producers). NULL is a no-op. */
void mount_transforms_free(struct mount_transforms *m);

#endif
