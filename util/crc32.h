/*
 * crc32: zlib's CRC-32 (the cache's block checksum, docs/DESIGN.md §8),
 * computed by ISA-L with the widest carry-less multiplication the CPU has:
 * the same values as zlib's crc32(), about 20 times faster.
 */
#ifndef SHARDFS_UTIL_CRC32_H
#define SHARDFS_UTIL_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* As zlib's crc32(crc, p, len): crc is 0 to start, or the result of the
 * bytes before. p may be unaligned. */
uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t len);

#endif
