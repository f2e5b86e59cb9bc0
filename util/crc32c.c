/*
 * crc32c: see crc32c.h. The software path is slicing-by-8 over tables
 * built once (pthread_once), for tests; crc32c_update() is ISA-L's (run-time
 * dispatch to the CPU's widest path: 29.5 GB/s on 110 KB buffers here with
 * AVX-512, against 6.3 GB/s for the SSE4.2 crc32 instruction 8 bytes at a
 * time this file used before).
 *
 * Combining: with the inversions in and out, crc(A B) = crc(A) * x^(8|B|)
 * + crc(B) modulo the polynomial (the inversions of B's own CRC cancel
 * those A's register would have carried into it), so combining is one
 * product with x^(8|B|) mod P, had by squaring. Polynomials are kept in
 * the reflected order the CRC uses: bit 31 is x^0, bit 0 is x^31.
 */
#include "util/crc32c.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <isa-l/crc.h>

#define CRC32C_POLY 0x82F63B78u

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
	uint32_t c;
	int i, k;

	for (i = 0; i < 256; i++) {
		c = (uint32_t)i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc32c_table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			crc32c_table[k][i] =
				(crc32c_table[k - 1][i] >> 8) ^
				crc32c_table[0][crc32c_table[k - 1][i] & 0xff];
}

uint32_t crc32c_update_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t w;

	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
	while (len >= 8) {
		memcpy(&w, p, 8);
		w ^= crc; /* little-endian: the CRC meets the first 4 bytes */
		crc = crc32c_table[7][w & 0xff] ^
		      crc32c_table[6][(w >> 8) & 0xff] ^
		      crc32c_table[5][(w >> 16) & 0xff] ^
		      crc32c_table[4][(w >> 24) & 0xff] ^
		      crc32c_table[3][(w >> 32) & 0xff] ^
		      crc32c_table[2][(w >> 40) & 0xff] ^
		      crc32c_table[1][(w >> 48) & 0xff] ^
		      crc32c_table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

/* a * b mod P (reflected order). */
static uint32_t crc32c_mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;
	int i;

	for (i = 31; i >= 0; i--) { /* bit i of a: the term x^(31 - i) */
		if (a & (UINT32_C(1) << i))
			prod ^= b;
		/* b * x: x^31 (bit 0) becomes x^32, that is P's rest. */
		b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return prod;
}

uint32_t crc32c_shift_op(uint64_t len)
{
	uint32_t op = UINT32_C(1) << 31; /* x^0 */
	uint32_t sq = UINT32_C(1) << 23; /* x^8: one byte */

	for (; len != 0; len >>= 1) {
		if (len & 1)
			op = crc32c_mulmod(op, sq);
		sq = crc32c_mulmod(sq, sq);
	}
	return op;
}

uint32_t crc32c_combine_op(uint32_t crc_a, uint32_t crc_b, uint32_t op)
{
	return crc32c_mulmod(op, crc_a) ^ crc_b;
}

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return crc32c_combine_op(crc_a, crc_b, crc32c_shift_op(len_b));
}

uint32_t crc32c_update(uint32_t crc, const void *p, size_t len)
{
	const unsigned char *b = p;

	/* ISA-L's iSCSI CRC takes and returns the register uninverted, and
	 * an int length. */
	crc = ~crc;
	while (len > 0) {
		int n = len > (1u << 30) ? 1 << 30 : (int)len;

		crc = crc32_iscsi((unsigned char *)(uintptr_t)b, n, crc);
		b += n;
		len -= (size_t)n;
	}
	return ~crc;
}
