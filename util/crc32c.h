/*
 * crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, inverted in
 * and out), the checksum GCS reports for every object (x-goog-hash:
 * crc32c=, the JSON API's crc32c field). Not zlib's CRC-32 (util/crc32.h).
 * Computed by ISA-L (the CPU's widest path); a table for tests.
 */
#ifndef SHARDFS_UTIL_CRC32C_H
#define SHARDFS_UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc is 0 to start, or the result of the bytes before (as zlib's crc32()
 * continues). p may be unaligned. crc32c_update(0, "123456789", 9) is
 * 0xE3069283. */
uint32_t crc32c_update(uint32_t crc, const void *p, size_t len);

/* The table-driven version, whatever the CPU: for tests. */
uint32_t crc32c_update_sw(uint32_t crc, const void *p, size_t len);

/* The CRC-32C of A followed by B, from crc_a = crc32c_update(0, A, ...),
 * crc_b = crc32c_update(0, B, ...) and B's length, without the bytes: how
 * a whole object's CRC is had from its chunks' (the cache's whole-object
 * check). O(log len_b), a few microseconds. */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* For many combines with pieces of one length: op = crc32c_shift_op(len)
 * once, then crc32c_combine_op(crc_a, crc_b, op) is crc32c_combine(crc_a,
 * crc_b, len) in 32 steps. */
uint32_t crc32c_shift_op(uint64_t len);
uint32_t crc32c_combine_op(uint32_t crc_a, uint32_t crc_b, uint32_t op);

#endif
