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
#include "cache/xform.h"
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

/* Stops the transforms' background verifies (xform_stop()): call before
 * cache_free() of their cache. NULL is a no-op. */
void mount_transforms_stop(struct mount_transforms *m);

/* The number of transforms opened, and the i-th (< that number), in the
 * config's order; borrowed from m. NULL m: none. */
size_t mount_transforms_count(const struct mount_transforms *m);
struct xform *mount_transforms_at(const struct mount_transforms *m, size_t i);

/* The array of the transforms (borrowed from m) and its length in *n;
 * NULL and 0 for a NULL m. */
struct xform *const *mount_transforms_list(const struct mount_transforms *m,
					   size_t *n);

/* The transform named name, or NULL. */
struct xform *mount_transforms_find(const struct mount_transforms *m,
				    const char *name);

/* The opened transforms as the views show them, in the config's order:
 * *n entries (0 for m NULL), valid until mount_transforms_free(m). */
const struct fs_transform *
mount_transforms_views(const struct mount_transforms *m, size_t *n);

/* Frees m: after cache_free() of the cache they were opened on (it holds
 * their producers). NULL is a no-op. */
void mount_transforms_free(struct mount_transforms *m);

#endif
