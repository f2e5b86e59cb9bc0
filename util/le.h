/*
 * le: little-endian integers in byte buffers, the order of every binary
 * layout shardfs writes or reads (cache identities, the manifest digest's
 * input, TFRecord headers). Byte by byte, so any alignment and any host
 * order work.
 */
#ifndef SHARDFS_UTIL_LE_H
#define SHARDFS_UTIL_LE_H

#include <stdint.h>

/* Writes v to p[0..8), least significant byte first. */
static inline void le_put64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The 8 bytes at p, least significant first. */
static inline uint64_t le_get64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The 4 bytes at p, least significant first. */
static inline uint32_t le_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

#endif
