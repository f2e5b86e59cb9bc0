/*
 * dataset: everything a mount or `shardfs plan` computes from a config
 * before serving: the backend, the manifest (pinned file or a fresh
 * listing, checked against manifest_sha256) and the shard plan; for a
 * record view ([shard] unit = record) also the record index (pinned, kept
 * in the cache directory by an earlier mount, or built now) and the
 * record plan.
 */
#ifndef SHARDFS_DATASET_H
#define SHARDFS_DATASET_H

#include <stdbool.h>

#include "backends/backend.h"
#include "mount/config.h"
#include "plan/manifest.h"
#include "plan/shard.h"
#include "records/rindex.h"
#include "records/rplan.h"

struct dataset {
	struct backend *backend; /* NULL unless asked for */
	struct manifest *manifest;
	struct shard_plan *plan; /* of objects; empty for a record view */
	/* [shard] unit = record: the record index and its plan; else
	 * NULL. */
	struct rindex *rindex;
	struct rplan *rplan;
};

/* Loads the dataset of cfg (borrowed). With need_backend the source is
 * opened even when a pinned manifest makes listing unnecessary. Every
 * failure is logged with what was wrong. Returns 0 and sets *out (free with
 * dataset_free), -ENODATA when the manifest has no entry (nothing listed,
 * everything skipped, or an empty pinned manifest) and [source]
 * allow_empty is false, -EBADMSG when the manifest digest does not match
 * the pin, or the error of the failing step. */
int dataset_load(const struct config *cfg, bool need_backend,
		 struct dataset **out);

/* The first half of dataset_load(): the backend (with need_backend, or
 * to list) and the checked manifest; no plan, no record index. Errors as
 * dataset_load(). */
int dataset_load_manifest(const struct config *cfg, bool need_backend,
			  struct dataset **out);

/* Lists every object of be into a finished manifest; symlinks a posix
 * backend refused count as MANIFEST_SKIP_LINK_OUTSIDE. Here, not in fs/,
 * because it drives a backend (fs/ includes nothing from backends/).
 * Returns 0 and sets *out, or the backend's error, or manifest_finish()'s. */
int dataset_list_manifest(struct backend *be, struct manifest **out);

/* Frees ds; NULL is a no-op. */
void dataset_free(struct dataset *ds);

#endif
