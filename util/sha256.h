/*
 * sha256: SHA-256 for the layers above backends/ (the manifest digest, the
 * plan digest, cache entry names), so that only util/ and backends/
 * include OpenSSL's headers (docs/DESIGN.md §2). One-shot or incremental.
 */
#ifndef SHARDFS_UTIL_SHA256_H
#define SHARDFS_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32
#define SHA256_HEX_LEN (2 * SHA256_LEN)

/* out = SHA-256(p[0..n)). Returns 0, or -EIO if OpenSSL failed (out
 * untouched then). */
int sha256(const void *p, size_t n, uint8_t out[SHA256_LEN]);

/* The same as 64 lowercase hex digits and a NUL. Returns 0 or -EIO. */
int sha256_hex(const void *p, size_t n, char hex[SHA256_HEX_LEN + 1]);

/* An incremental digest: sha256_new(), sha256_update() any number of
 * times, sha256_final(), sha256_free(). */
struct sha256;

/* Returns a started digest, or NULL when out of memory (or OpenSSL could
 * not start one). */
struct sha256 *sha256_new(void);

/* Adds p[0..n). Returns 0 or -EIO. */
int sha256_update(struct sha256 *s, const void *p, size_t n);

/* Sets out to the digest of everything added. Returns 0 or -EIO; no
 * update may follow. */
int sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN]);

/* Frees s; NULL is a no-op. */
void sha256_free(struct sha256 *s);

#endif
