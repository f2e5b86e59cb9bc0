/*
 * rbuild: builds a record index (records/rindex.h) by reading every record
 * object of a manifest once, for `shardfs index` and for a mount that has
 * no pinned index. It drives a backend, so it lives in mount/.
 *
 * Objects are read whole, in 8 MiB ranged reads pinned to the manifest's
 * etag, by up to rbuild_options.threads threads at once; each stream goes
 * through the format's framing scanner (records/frame.h), which checks
 * every frame. Nothing is half-indexed: the first malformed object stops
 * the build, and the error names the object, the offset and what was
 * wrong.
 *
 * WebDataset tar: a sample's key must be unique in the dataset. Two
 * samples with one key (in two tars, or apart in one) can meet in a part
 * after the shuffle, and a WebDataset reader would then merge them into
 * one sample (or reject the part): the build fails naming the key and
 * both places, so the dataset's keys can be fixed (e.g. prefixed with
 * the tar's name) instead of serving merged samples.
 */
#ifndef SHARDFS_RBUILD_H
#define SHARDFS_RBUILD_H

#include <stdbool.h>

#include "backends/backend.h"
#include "plan/manifest.h"
#include "records/format.h"
#include "records/rindex.h"

struct rbuild_options {
	unsigned threads; /* objects read at once; 0: 8 */
	bool progress;	  /* a progress line on stderr (a terminal) */
};

/* Builds and finishes the index of m's objects of format f, read from be
 * (both borrowed). Returns 0 and sets *out (free with rindex_free), or
 * -EBADMSG (a malformed object or a duplicate tar key; logged), a
 * backend error (logged by the backend, then "KEY: cannot read"), or
 * -ENOMEM. */
int rbuild_run(struct backend *be, const struct manifest *m, enum rec_format f,
	       const struct rbuild_options *o, struct rindex **out);

#endif
