/*
 * crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, inverted in
 * and out), the checksum GCS reports for every object (x-goog-hash:
 * crc32c=, the JSON API's crc32c field). Not zlib's CRC-32 (util/crc32.h).
 * Uses the SSE4.2 crc32 instruction where the CPU has it, else a table.
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

#endif
