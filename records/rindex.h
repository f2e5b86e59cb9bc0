/*
 * rindex: the record index, where every record of every record object of a
 * manifest lies in its object's decoded stream (docs/RECORDS.md §2).
 *
 * Built once (by `shardfs index` or at mount) and pinned like the manifest:
 * its file is a canonical text form, one byte form per index, whose last
 * line is the SHA-256 of every byte before it; that digest is the index's
 * identity (index_sha256). Every node that loads the same file plans the
 * same record views.
 *
 * Record ids are global: objects in manifest order, records in file order.
 * Memory: 12 bytes per record (offset and length) plus 40 bytes per
 * object. After rindex_finish() (or a successful load) the index is
 * immutable and may be read from any number of threads.
 */
#ifndef SHARDFS_RECORDS_RINDEX_H
#define SHARDFS_RECORDS_RINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plan/manifest.h"
#include "records/format.h"

#define RINDEX_HEADER "# shardfs-records v1"

struct rindex_object {
	uint32_t item; /* manifest index of the object */
	/* Bytes of its decoded stream (gzip: decompressed). */
	uint64_t decoded_size;
	uint64_t first; /* id of its first record */
	uint32_t count; /* its records */
	/* jsonl: its last record is served with a '\n' added. */
	bool nl_added;
};

struct rindex {
	enum rec_format format;
	char manifest_digest[65];      /* the manifest it was built from */
	struct rindex_object *objects; /* record objects, in manifest order */
	size_t n_objects;
	uint64_t n_records;
	/* Per record: offset in its object's decoded stream. */
	uint64_t *rec_off;
	/* Per record: length as stored (no added '\n'). */
	uint32_t *rec_len;
	/* Manifest objects that are not record files of the format. */
	uint64_t skipped_objects;
	char digest[65]; /* SHA-256 (hex) of the canonical bytes */
	/* The manifest the index refers to (keys, etags, sizes); borrowed:
	 * it must outlive the index. */
	const struct manifest *manifest;
	/* private: */
	size_t cap_objects;
	uint64_t cap_records;
	bool finished;
};

/*
 * Builder: rindex_new(), then rindex_add_object() once for every object of
 * m that rec_format_selects() picks for f, in manifest order, each with all
 * its records, then rindex_finish().
 *
 * rindex_new returns 0 and *out, -EINVAL (f out of range, m not finished)
 * or -ENOMEM. m is borrowed and must outlive the index.
 */
int rindex_new(enum rec_format f, const struct manifest *m,
	       struct rindex **out);

/*
 * Adds object item (a manifest index) with count records at off[i] of
 * length len[i] in its decoded stream. Returns 0 or
 *   -EINVAL  after finish; item out of range, not a record file of the
 *            format, or not after the previous one; records not ascending,
 *            overlapping, empty or past decoded_size; decoded_size not the
 *            object's size for an uncompressed format; nl_added for a
 *            non-jsonl format, with no records, or with a last record not
 *            ending at decoded_size (all logged, naming the key);
 *   -EOVERFLOW  the index would pass UINT64_MAX records;
 *   -ENOMEM.
 * On failure the index is unchanged.
 */
int rindex_add_object(struct rindex *ri, uint32_t item, uint64_t decoded_size,
		      bool nl_added, const uint64_t *off, const uint32_t *len,
		      uint32_t count);

/* Checks that every record object of the manifest was added (else -EINVAL,
 * logged naming the first missing key), computes the digest. Returns 0,
 * -EINVAL, -ENOMEM or -EIO. After it the index is immutable. */
int rindex_finish(struct rindex *ri);

/* Frees ri; NULL is a no-op. */
void rindex_free(struct rindex *ri);

/* Served length of record r (rec_len + 1 when it is the last of an
 * nl_added object); r < n_records. O(log n_objects). */
uint64_t rindex_served_len(const struct rindex *ri, uint64_t r);

/* The object holding record r (binary search over objects[].first), or
 * NULL when r >= n_records. */
const struct rindex_object *rindex_object_of(const struct rindex *ri,
					     uint64_t r);

/* Bytes of RAM the index holds (arrays and struct; not the manifest). */
size_t rindex_mem_bytes(const struct rindex *ri);

/* Writes the finished index in its file format (the bytes whose digest is
 * ri->digest, then the end line). Returns 0 or -EIO (also -EINVAL when not
 * finished). */
int rindex_write(const struct rindex *ri, FILE *f);

/*
 * Loads and checks the file against m and f: format, manifest digest,
 * every object's key, etag, size and order; expect_sha256 (NULL: any) must
 * equal the file's digest. Errors are -EINVAL with a message
 * "PATH:LINE: what" logged, or -ENOENT etc. from opening (logged); a digest
 * mismatch is -EINVAL "PATH: index_sha256 is X but the file's digest is Y".
 * -ENOMEM. On success *out is a finished index borrowing m.
 */
int rindex_load(const char *path, const struct manifest *m, enum rec_format f,
		const char *expect_sha256, struct rindex **out);

/* The same for a file held in memory; name is used in messages. */
int rindex_parse(const char *name, const char *text, size_t len,
		 const struct manifest *m, enum rec_format f,
		 const char *expect_sha256, struct rindex **out);

#endif
