/*
 * format: the record file formats a record view shards (docs/DESIGN.md §5,
 * "Records"): which objects of a manifest are record files, and what the
 * parts served for them are called.
 *
 *   name         objects (by key suffix)          parts
 *   tfrecord     .tfrecord .tfrecords             part-P-of-Q.tfrecord
 *   tfrecord.gz  .tfrecord.gz .tfrecords.gz       part-P-of-Q.tfrecord
 *   jsonl        .jsonl                           part-P-of-Q.jsonl
 *   jsonl.gz     .jsonl.gz                        part-P-of-Q.jsonl
 *   tar          .tar                             part-P-of-Q.tar
 *
 * A compressed source is served decompressed: a part holds records as
 * stored inside the gzip stream, never re-encoded. Pure; no I/O.
 */
#ifndef SHARDFS_RECORDS_FORMAT_H
#define SHARDFS_RECORDS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

enum rec_format {
	REC_FORMAT_TFRECORD = 0,
	REC_FORMAT_TFRECORD_GZ,
	REC_FORMAT_JSONL,
	REC_FORMAT_JSONL_GZ,
	REC_FORMAT_TAR,
	REC_FORMAT_COUNT
};

/* The names above by value, NULL-terminated (the config's enum table). */
extern const char *const rec_format_names[];

/* Name of f, or NULL out of range. */
const char *rec_format_name(enum rec_format f);

/* Whether f's objects are gzip streams (one or more members). */
bool rec_format_gzip(enum rec_format f);

/* The framing inside the stream: tfrecord.gz -> tfrecord, jsonl.gz ->
 * jsonl, the others themselves. */
enum rec_format rec_format_base(enum rec_format f);

/* The extension of f's part files, without the dot. */
const char *rec_format_ext(enum rec_format f);

/* Whether the object key[0..key_len) is a record file of format f (by
 * suffix, as in the table above; case-sensitive). */
bool rec_format_selects(enum rec_format f, const char *key, size_t key_len);

#endif
