/*
 * frame_tar: the tar (WebDataset) half of records/frame.h, apart because
 * it is most of the code. Internal to records/: frame.c is its only user.
 * The rules are frame.h's and docs/RECORDS.md §1's.
 */
#ifndef SHARDFS_RECORDS_FRAME_TAR_H
#define SHARDFS_RECORDS_FRAME_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "records/frame.h"

struct rec_tar;

/* A scanner at the start of an archive, calling emit for each sample.
 * Messages go to err (cap bytes, owned by the caller, which outlives the
 * scanner). Returns 0 or -ENOMEM. */
int rec_tar_new(rec_emit_fn emit, void *arg, char *err, size_t cap,
		struct rec_tar **out);

/* The next len decoded bytes. Returns 0, emit's error (err untouched),
 * -ENOMEM or -EBADMSG (err says what). */
int rec_tar_feed(struct rec_tar *t, const unsigned char *p, size_t len);

/* End of the archive: checks the tail and emits the last sample. Returns
 * as rec_tar_feed. */
int rec_tar_finish(struct rec_tar *t);

uint64_t rec_tar_skipped(const struct rec_tar *t);

/* NULL is a no-op. */
void rec_tar_free(struct rec_tar *t);

#endif
