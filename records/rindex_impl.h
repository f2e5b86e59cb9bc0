/*
 * rindex_impl: what rindex.c (builder, writer) and rindex_load.c (loader)
 * share, so both accept exactly the same indexes. Private to records/.
 */
#ifndef SHARDFS_RECORDS_RINDEX_IMPL_H
#define SHARDFS_RECORDS_RINDEX_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan/manifest.h"
#include "records/format.h"

/* Manifest index of the first record object of m (for f) at or after i,
 * or m->count. */
size_t rindex_next_selected(const struct manifest *m, enum rec_format f,
			    size_t i);

/* Checks one object's records (ascending, not overlapping, not empty,
 * inside decoded bytes; the n flag only for jsonl, with records, the last
 * ending the stream): NULL if valid, else a static message. */
const char *rindex_check_records(enum rec_format f, uint64_t decoded,
				 bool nl_added, const uint64_t *off,
				 const uint32_t *len, uint32_t count);

/* Whether the file escapes byte c (as manifest_write_escaped does). */
bool rindex_needs_escape(unsigned char c);

#endif
