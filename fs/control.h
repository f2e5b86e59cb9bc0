/*
 * control: the text of the .shardfs/ control files and of `shardfs plan`.
 *
 * Each writer formats to a stdio stream (a file, stdout, or an
 * open_memstream buffer the FUSE layer serves), so the mount and the CLI
 * print exactly the same bytes. Formats (docs/DESIGN.md §3):
 *   plan         "name value" lines, then one "rank R items N pad P bytes B"
 *                line per rank; bytes count pad items too (a rank reads
 *                them), items includes pads.
 *   rank-R.order one escaped key per line, in epoch order; pads end in
 *                "\tpad".
 *   stats        Prometheus text exposition format.
 */
#ifndef SHARDFS_CONTROL_H
#define SHARDFS_CONTROL_H

#include <stdint.h>
#include <stdio.h>

#include "cache/cache.h"
#include "fs/manifest.h"
#include "fs/shard.h"

/* Live counters for the stats file, snapshotted by the caller. */
struct control_stats {
	uint64_t uptime_seconds;
	uint64_t open_files;
	uint64_t reads;
	uint64_t read_bytes;
	uint64_t read_errors;
	uint64_t backend_reads;
	uint64_t backend_bytes;
	uint64_t backend_errors;
	/* The cache's counters: the fetch engine's and the prefetcher's
	 * always, the shardfs_cache_* lines only when cache.enabled is
	 * set. */
	struct cache_stats cache;
};

/* Each returns 0 or -EIO if the stream failed. */
int control_write_plan(FILE *f, const struct manifest *m,
		       const struct shard_spec *spec,
		       const struct shard_plan *plan);
int control_write_order(FILE *f, const struct manifest *m,
			const struct shard_plan *plan, uint64_t rank);
int control_write_stats(FILE *f, const struct manifest *m,
			const struct shard_plan *plan,
			const struct control_stats *st);

#endif
