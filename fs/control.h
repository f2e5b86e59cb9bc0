/*
 * control: the text of the .shardfs/ control files and of `shardfs plan`.
 *
 * Each writer formats to a stdio stream (a file, stdout, or an
 * open_memstream buffer the FUSE layer serves), so the mount and the CLI
 * print exactly the same bytes. Formats (docs/DESIGN.md §3):
 *   plan         "name value" lines, then one "rank R items N pad P bytes B"
 *                line per rank; bytes count pad items too (a rank reads
 *                them), items includes pads. A record view's: the same
 *                parameter lines, then recview_write_plan()'s (its own
 *                aggregates and "rank R records N pad P bytes B" lines),
 *                nothing of its empty object plan.
 *   rank-R.order one escaped key per line, in epoch order; pads end in
 *                "\tpad".
 *   stats        Prometheus text exposition format (version 0.0.4): every
 *                family has one # HELP and one # TYPE line before its
 *                samples, counters end in _total, label values are
 *                escaped (\\, \", \n) and HELP texts too (\\, \n).
 *                Besides the live counters: shardfs_build_info, the plan
 *                (shardfs_plan_info with the plan and manifest digests),
 *                the ranks served with their objects and bytes, and the
 *                log's error and warning counts, last error and target
 *                (shardfs_log_target_info: target, path, fallback).
 *   log          the last warnings and errors (util/log.h, at most
 *                LOG_RECENT_MAX), oldest first, one per line:
 *                "2026-01-02T03:04:05Z error: message" (UTC; messages are
 *                printable text, util/log.h). Written at each open, as
 *                stats is.
 *
 * The plan digest is the SHA-256 of the plan text, so it is exactly
 * `shardfs plan CONFIG | sha256sum`: two nodes that print the same digest
 * serve the same plan (the text names the spec version, the manifest
 * digest and every spec parameter, of which the plan is a pure function;
 * a record view's also the index digest, parts, runs and window:
 * control_plan_digest_of()).
 */
#ifndef SHARDFS_CONTROL_H
#define SHARDFS_CONTROL_H

#include <stdint.h>
#include <stdio.h>

#include "cache/cache.h"
#include "cache/xform.h"
#include "fs/view.h"
#include "plan/manifest.h"
#include "plan/shard.h"
#include "util/log.h"

/* FUSE requests counted by opcode (shardfs_fuse_requests_total{op}):
 * what a reader's file costs in round trips to the daemon. */
enum {
	FS_OP_LOOKUP,
	FS_OP_GETATTR,
	FS_OP_OPEN,
	FS_OP_READ,
	FS_OP_RELEASE,
	FS_OP_OPENDIR,
	FS_OP_READDIR,
	FS_OP_FORGET,
	FS_OP_OTHER,
	FS_OP_COUNT
};

/* Live counters for the stats file, snapshotted by the caller. */
struct control_stats {
	/* shardfs_build_info's libcurl label (NULL: ""). */
	const char *libcurl;
	uint64_t uptime_seconds;
	uint64_t generation;   /* fs_generation(): reloads so far */
	uint64_t epoch_trees;  /* fs_epoch_count() */
	uint64_t epoch_builds; /* trees planned so far */
	uint64_t reads;
	uint64_t read_bytes;
	uint64_t read_errors;
	uint64_t ops[FS_OP_COUNT]; /* readers' requests by opcode */
	uint64_t self_lookups;	   /* lookups the pusher made itself */
	uint64_t stale_reads;	   /* reads of files a reload changed */
	uint64_t backend_reads;
	uint64_t backend_bytes;
	uint64_t backend_errors;
	/* The cache's counters: the fetch engine's and the prefetcher's
	 * always, the shardfs_cache_* lines only when cache.enabled is
	 * set. */
	struct cache_stats cache;
	/* The log's error and warning counters and last error. */
	struct log_errors log;
	/* The plan digest to show (control_plan_digest_of(), which knows a
	 * record view's plan); "": control_plan_digest() of the object
	 * plan. */
	char plan_digest[65];
};

/* Each returns 0 or -EIO if the stream failed. */
int control_write_plan(FILE *f, const struct manifest *m,
		       const struct shard_spec *spec,
		       const struct shard_plan *plan);
struct fs_data;
/* The plan text of a mount serving d (.shardfs/plan, `shardfs plan`):
 * control_write_plan()'s for an object view, the record view's as above
 * when d->rplan is set. Returns 0 or -EIO. */
int control_write_plan_of(FILE *f, const struct fs_data *d);
int control_write_order(FILE *f, const struct manifest *m,
			const struct shard_plan *plan, uint64_t rank);
/* The stats text of a mount serving view (the ranks it shows) of plan,
 * built from m by spec; all borrowed. Thread-safe. */
int control_write_stats(FILE *f, const struct manifest *m,
			const struct shard_spec *spec,
			const struct shard_plan *plan, const struct view *view,
			const struct control_stats *st);

/* One transform's counters for the stats (cache/xform.h). */
struct control_xform_stats {
	const char *name;
	struct xform_stats s;
};

/* The shardfs_transform_* families, a sample per transform labelled
 * transform="NAME" (nothing when n is 0). Returns 0 or -EIO. */
int control_write_xform_stats(FILE *f, const struct control_xform_stats *x,
			      size_t n);

/* The log file's text from n entries (oldest first). Returns 0 or -EIO. */
int control_write_log(FILE *f, const struct log_entry *e, size_t n);

/* The plan digest of a mount serving d: the SHA-256 of
 * control_write_plan_of()'s text, so of .shardfs/plan and `shardfs plan`
 * for record views too (an object view's is control_plan_digest()'s).
 * Returns 0, -ENOMEM or -EIO. */
int control_plan_digest_of(const struct fs_data *d, char hex[65]);

/* Sets hex (65 bytes) to the plan digest: the lowercase hex SHA-256 of
 * control_write_plan's text. The last result is kept (keyed by what the
 * plan text is a function of), so a mount's stats do not rewrite the plan
 * on every read. Thread-safe. Returns 0, -ENOMEM or -EIO. */
int control_plan_digest(const struct manifest *m, const struct shard_spec *spec,
			const struct shard_plan *plan, char hex[65]);

#endif
