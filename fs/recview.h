/*
 * recview: the bytes of a record view's part files (docs/DESIGN.md §3,
 * "Record views"). A part is a list of segments (records/rplan.h): a
 * record's stored bytes, the '\n' a JSONL record without one gets, or the
 * zero blocks that end a tar part. Record bytes come through the cache
 * like any object's, never from a backend directly:
 *
 *   - an uncompressed source is read in chunks of RECVIEW_CHUNK bytes
 *     (its own chunk identity), so a rank whose records are scattered
 *     over an object fetches the blocks around its records, not whole
 *     8 MiB chunks;
 *   - a gzip source is read as its derived object (transform "gunzip",
 *     decoded size from the record index): the first read of it on a node
 *     decompresses the whole object once into the disk cache, and every
 *     later read, also after a restart, is served from there.
 *
 * A part is read in its order: before each read, the records of the
 * part from it on (cache_prefetch_ahead() bytes past it, and on into the
 * next part of the rank) are queued with the cache, each record, or run
 * of records next to each other in their object (sorted by object and
 * offset, so records a window shuffled still come together), as one
 * extent (cache_prefetch_range(): one backend read of the chunks around
 * it, which the reads of its records then join); the reader's own records
 * are asked for again, whole, so that none is fetched in pieces by its
 * reads (asking twice fetches nothing twice). A struct recview_ahead (one per
 * generation) remembers how far each part being read was asked for, so a
 * read asks only for what its window newly reaches, in steps; it is a
 * hint: a part it forgot, or a reader that went back, asks again from
 * where it reads (index lookups of what is there, never a byte twice).
 *
 * Any number of threads may read at once.
 */
#ifndef SHARDFS_RECVIEW_H
#define SHARDFS_RECVIEW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cache/cache.h"
#include "fs/fs.h"

/* Chunk size of uncompressed record sources: one CRC block, the least a
 * cache entry holds, so a read costs at most one block of neighbours'
 * bytes at each end. */
#define RECVIEW_CHUNK CACHE_CRC_BLOCK

/* Registers the "gunzip" transform with c (a gzip source's decoded
 * stream, records/gunzip.h). Call once before the first read. Returns 0
 * or a negative errno. */
int recview_register(struct cache *c);

/* Exact size of part p of rank r. */
uint64_t recview_part_size(const struct fs_data *d, uint32_t r, uint32_t p);

/* What the parts being read were asked for ahead (see above). Returns 0
 * and *out, or -ENOMEM. Thread-safe; free with recview_ahead_free() (NULL
 * is a no-op) once no read uses it. */
struct recview_ahead;
int recview_ahead_new(struct recview_ahead **out);
void recview_ahead_free(struct recview_ahead *a);

/* Reads up to len bytes of part p of rank r at off into buf, first asking
 * for the records ahead of it (a NULL: nothing is read ahead). Returns
 * exactly min(len, size - off) (0 at or past the end), or a negative
 * errno from the cache (logged there), or -EIO when the cache returned
 * fewer bytes than the index says the record has (logged). */
ssize_t recview_read(const struct fs_data *d, struct recview_ahead *a,
		     uint32_t r, uint32_t p, uint64_t off, size_t len,
		     void *buf);

/* The record view's lines of .shardfs/plan (after the plan's parameter
 * lines, control_write_plan_of()): format, index digest, record and part
 * counts, dropped records, imbalance_bytes (the largest rank's bytes over
 * the mean) and imbalance_records (largest minus smallest count), each
 * rank's records, pads and bytes. Returns 0 or -EIO. */
int recview_write_plan(FILE *f, const struct fs_data *d);

/* .shardfs/rank-R.order of a record view: "KEY<TAB>RECORD" per record in
 * the rank's order (RECORD: its index within its object), pads marked
 * "<TAB>pad". Returns 0 or -EIO. */
int recview_write_order(FILE *f, const struct fs_data *d, uint64_t rank);

#endif
