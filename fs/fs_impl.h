/*
 * fs_impl: what the FUSE handlers (fuse_ops.c) and the session that runs
 * them (session.c) share. Not for use outside fs/.
 */
#ifndef SHARDFS_FS_IMPL_H
#define SHARDFS_FS_IMPL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "fs/fs.h"

#define FS_TIMEOUT (24.0 * 3600) /* the view cannot change while mounted */
#define FS_IO_SIZE (1u << 20)	 /* read request size asked of the kernel */
/* Worker threads (made on demand). Well above the kernel's limit on
 * background requests (max_background, 12), which is what bounds the
 * reads in flight: however many of those wait on a slow store, lookups,
 * opens and the .shardfs/ control files still find a thread. */
#define FS_THREADS_DEFAULT 64
#define FS_BLKSIZE (1u << 20) /* st_blksize: readers buffer this much */

struct ctrl_text {
	char *buf;
	size_t len;
};

/* What an open control file reads from (fi->fh). An open object's fi->fh
 * is its struct cache_file. */
struct ctrl_handle {
	const struct ctrl_text *text;
	struct ctrl_text snapshot; /* stats: owned by the handle */
};

struct fs {
	struct fs_data d;
	uid_t uid;
	gid_t gid;
	struct timespec mount_time; /* realtime: directory times */
	struct timespec start_mono; /* monotonic: uptime */

	/* Relaxed atomics: statistics only. */
	uint64_t open_files;
	uint64_t reads;
	uint64_t read_bytes;
	uint64_t read_errors;

	/* Where each manifest item sits in its rank's order (the
	 * prefetcher's hint), UINT32_MAX for items no rank reads; built at
	 * mount, immutable. */
	uint32_t *item_rank;
	uint32_t *item_pos;

	/* Immutable control texts, built on first use. Slots: 0 manifest,
	 * 1 plan, 2 + r rank r's order. */
	pthread_mutex_t ctrl_lock; /* protects ctrl[] */
	struct ctrl_text **ctrl;
	size_t n_ctrl;

	struct fuse_session *se; /* set before the loop starts */
};

extern const struct fuse_lowlevel_ops fs_ops;

/* Sets up fs's state over data (borrowed; it must outlive fs): control
 * text slots, the item order tables, the cache's order callback. Returns
 * 0 or -ENOMEM; fs_state_destroy() undoes either way. */
int fs_state_init(struct fs *fs, const struct fs_data *data);
void fs_state_destroy(struct fs *fs);

#endif
