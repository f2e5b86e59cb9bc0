/*
 * fnv: FNV-1a, a 64-bit hash of bytes for small in-memory tables (log
 * repeats, failure holds, listing loops). Not for anything that must
 * resist an adversary or be stable across versions.
 */
#ifndef SHARDFS_FNV_H
#define SHARDFS_FNV_H

#include <stddef.h>
#include <stdint.h>

#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)

/* Continues hash h (start with FNV_OFFSET) over len bytes at p. */
static inline uint64_t fnv_add(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	return h;
}

/* The hash of len bytes at p, never 0 (tables use 0 for a free slot). */
static inline uint64_t fnv_hash(const void *p, size_t len)
{
	uint64_t h = fnv_add(FNV_OFFSET, p, len);

	return h ? h : 1;
}

#endif
