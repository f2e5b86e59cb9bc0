/*
 * md5: MD5 for the layers above backends/, which check a cached object
 * against the MD5 an S3 store gives as a single-part ETag (cache/whole.c).
 * Not for anything that must resist an adversary: MD5 here only detects
 * bytes changed by accident. Like util/sha256.h, it keeps OpenSSL's
 * headers in util/ and backends/ (docs/DESIGN.md §2). Incremental only.
 */
#ifndef SHARDFS_UTIL_MD5_H
#define SHARDFS_UTIL_MD5_H

#include <stddef.h>
#include <stdint.h>

#define MD5_LEN 16

struct md5;

/* Returns a started digest, or NULL when out of memory (or OpenSSL could
 * not start one). */
struct md5 *md5_new(void);

/* Adds p[0..n). Returns 0 or -EIO. */
int md5_update(struct md5 *m, const void *p, size_t n);

/* Sets out to the digest of everything added. Returns 0 or -EIO; no
 * update may follow. */
int md5_final(struct md5 *m, uint8_t out[MD5_LEN]);

/* Frees m; NULL is a no-op. */
void md5_free(struct md5 *m);

#endif
