/*
 * frame: the record framing of a record file (docs/RECORDS.md §1), as
 * a streaming scanner: fed an object's bytes as stored, in any split, it
 * emits each record's extent in the DECODED stream and checks every frame
 * (TFRecord's two CRCs and lengths, truncated tails, tar header checksums,
 * bad gzip). A compressed format (rec_format_gzip()) is decoded on the way
 * through records/gunzip.h. Pure: no I/O, no globals.
 *
 * Memory is small and bounded whatever the record sizes: data is never
 * buffered (TFRecord's CRC runs over it as it arrives); only a tar header,
 * a pax extended header or GNU long name (REC_TAR_EXT_MAX) and the key of
 * the sample in progress are kept.
 *
 * Records and gzip members are numbered from 0 in messages.
 */
#ifndef SHARDFS_RECORDS_FRAME_H
#define SHARDFS_RECORDS_FRAME_H

/* The framing rules' version: raised whenever a change would cut some
 * object into other records (an index built under older rules is then
 * not reused from the cache directory). 1: the rules of docs/RECORDS.md
 * §1 as first written. */
#define REC_FRAME_VERSION 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "records/format.h"

/* The largest TFRecord data length: a whole frame (16 framing bytes)
 * must fit in a uint32. */
#define REC_TFRECORD_LEN_MAX (UINT32_MAX - 16ULL)

/* The largest pax extended header or GNU long name/link data kept. */
#define REC_TAR_EXT_MAX (1024 * 1024)

struct rec_scan;

/* One record, in the DECODED stream's byte offsets: [off, off + len). For
 * tar one record is one sample and key/key_len its key (the path up to
 * the first dot of its last component; not NUL-terminated), valid only
 * during the call; else NULL/0. Records come in increasing offset order,
 * each starting at or after the previous one's end. Return 0 to go on, or
 * a negative errno to stop the scan (feed/finish return it). */
typedef int (*rec_emit_fn)(void *arg, uint64_t off, uint64_t len,
			   const char *key, size_t key_len);

/* A scanner for objects of format f at their start. Returns 0, -EINVAL
 * (f out of range) or -ENOMEM. */
int rec_scan_new(enum rec_format f, rec_emit_fn emit, void *arg,
		 struct rec_scan **out);

/* Feeds the next len bytes of the object as stored. Any split gives the
 * same records and the same error. Returns 0, emit's error, -ENOMEM or
 * -EBADMSG (rec_scan_error() says what). An error is sticky: later calls
 * return it again. */
int rec_scan_feed(struct rec_scan *s, const void *buf, size_t len);

struct rec_scan_result {
	uint64_t records;      /* emitted */
	uint64_t decoded_size; /* bytes of the decoded stream (= object size
				  when not gzip) */
	bool nl_added;	       /* jsonl: the last line had no '\n'; its
				  record's len EXCLUDES the missing '\n' and a
				  view serves it with one added */
	uint64_t skipped;      /* tar: members that belong to no sample
				  (directories, links, ...), counted */
};

/* End of the object: checks the tail (a truncated record, a gzip member
 * cut short: -EBADMSG), emits the last record if one is pending, and on
 * success fills *res (res may be NULL). Returns as rec_scan_feed. */
int rec_scan_finish(struct rec_scan *s, struct rec_scan_result *res);

/* What was wrong: the DECODED offset of the bad frame and what, e.g.
 * "offset 4096: record 3: data CRC mismatch (stored 0x..., computed
 * 0x...)"; for a gzip error rec_gunzip_error()'s text (a compressed
 * offset). "" if nothing. Valid until the next call or rec_scan_free. */
const char *rec_scan_error(const struct rec_scan *s);

/* NULL is a no-op. */
void rec_scan_free(struct rec_scan *s);

/* Masked CRC-32C as TFRecord stores it: ((crc >> 15) | (crc << 17)) +
 * 0xa282ead8, mod 2^32. */
uint32_t rec_tfrecord_mask(uint32_t crc);

#endif
