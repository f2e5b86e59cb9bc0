/*
 * rplan: the record views' plan (docs/RECORDS.md §2, "Record
 * sharding"): which records each rank serves, split into parts, and what
 * every byte of every part is.
 *
 * Items are the index's records in canonical order (objects in manifest
 * order, records in file order), weights their served lengths; the ranks
 * come from shard_plan_build() (spec "shardfs-shard v1", unchanged), pads
 * being duplicate records at the end of their rank. A rank's n records
 * (pads included) are split into P parts: with q = n div P, m = n mod P,
 * part p holds the rank's positions [q·p + min(p,m), q·(p+1) + min(p+1,m)).
 * A part's bytes are its records' served bytes back to back (a jsonl
 * record of an nl_added object with its '\n'); a tar part ends with two
 * 512-byte zero blocks, also when empty.
 *
 * Pure, no I/O. Memory: 4 bytes (record id) + 8 bytes (cumulative offset)
 * per plan position, plus 24 bytes per rank; building briefly needs 4 more
 * per record for the strided layout. Immutable after rplan_build(): any
 * number of threads may read it. The index is borrowed and must outlive
 * the plan.
 */
#ifndef SHARDFS_RECORDS_RPLAN_H
#define SHARDFS_RECORDS_RPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "plan/shard.h"
#include "records/rindex.h"

#define RPLAN_PARTS_MAX 99999u
#define RPLAN_TAR_TRAILER 1024u /* two 512-byte zero blocks */

struct rplan;

/* Plans ri (finished) with spec into parts files per rank (1 ..
 * RPLAN_PARTS_MAX). Returns 0 and *out, or -EINVAL (bad spec, parts out of
 * range, ri not finished), -EOVERFLOW (more than UINT32_MAX records or
 * plan positions; logged), -ENOMEM. */
int rplan_build(const struct rindex *ri, const struct shard_spec *spec,
		unsigned parts, struct rplan **out);

/* Runs: records dealt to ranks in runs of consecutive records of one
 * object instead of one by one (docs/RECORDS.md §2, "Runs"), so that a
 * rank reads long contiguous extents and fetches next to nothing of other
 * ranks' records however small the records are.
 *
 * Each object's records, in file order, are cut into runs: a run takes
 * records while its served bytes stay at most run_bytes (a record larger
 * than that is a run alone). Runs in canonical order are the items of spec
 * v1 (weights: their bytes): shuffle, layout, balance as for records
 * (pads: whole runs, their records all pads). A rank's records are its
 * runs' records in run order; then, with order = shuffle and window > 1,
 * its non-pad records are shuffled within consecutive windows of window
 * positions (the last may be shorter): Fisher-Yates with one splitmix64
 * generator per rank, state derive(2, seed, epoch, rank), continuing from
 * window to window. As rplan_build() otherwise; run_bytes 0 is
 * rplan_build(). */
int rplan_build_runs(const struct rindex *ri, const struct shard_spec *spec,
		     unsigned parts, uint64_t run_bytes, uint32_t window,
		     struct rplan **out);

/* Frees rp; NULL is a no-op. */
void rplan_free(struct rplan *rp);

unsigned rplan_parts(const struct rplan *rp);
/* rplan_build_runs()'s run_bytes (0: records one by one) and the window
 * its records were shuffled within (0: none). */
uint64_t rplan_run_bytes(const struct rplan *rp);
uint32_t rplan_window(const struct rplan *rp);
uint64_t rplan_world_size(const struct rplan *rp);

/* Records in no rank (balance = drop). */
size_t rplan_dropped(const struct rplan *rp);

/* Rank r's record ids in its order (pads last, count includes them);
 * borrowed from rp. r >= world_size gives NULL, 0, 0. */
void rplan_rank(const struct rplan *rp, uint64_t r, const uint32_t **recs,
		size_t *count, size_t *npad);

/* Exact bytes of part p of rank r (0 for r or p out of range). */
uint64_t rplan_part_size(const struct rplan *rp, uint64_t r, unsigned p);

/* The part's first record's position in the rank's list and its record
 * count (0, 0 out of range). */
void rplan_part_range(const struct rplan *rp, uint64_t r, unsigned p,
		      size_t *first, size_t *count);

/* What bytes [off, off+len) of part p of rank r are made of, in order: a
 * record's stored bytes, the '\n' added after a jsonl record, or zeros
 * (the tar trailer). */
enum rplan_seg_kind { RPLAN_SEG_RECORD, RPLAN_SEG_NEWLINE, RPLAN_SEG_ZERO };

struct rplan_seg {
	enum rplan_seg_kind kind;
	uint64_t rec;	 /* RECORD, NEWLINE: the record id */
	uint64_t in_off; /* RECORD: offset inside the record's stored bytes */
	uint64_t len;
};

/* Fills up to max segments covering [off, off+len) clipped to the part's
 * size, and returns how many (0 at or after the end, or len 0); a caller
 * wanting more asks again from where the last segment ended. One segment
 * never spans two records. O(log n) to find the start. */
size_t rplan_map(const struct rplan *rp, uint64_t r, unsigned p, uint64_t off,
		 uint64_t len, struct rplan_seg *segs, size_t max);

/* Part p's file name, "part-%05u-of-%05u.EXT" (p from 0, EXT from
 * rec_format_ext). Returns 0, or -EINVAL (p out of range) or -ENAMETOOLONG
 * (buf too small). */
int rplan_part_name(const struct rplan *rp, unsigned p, char *buf, size_t size);

/* Bytes of RAM the plan holds (not the index). */
size_t rplan_mem_bytes(const struct rplan *rp);

#endif
