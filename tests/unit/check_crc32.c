/*
 * Unit tests for util/crc32: the same values as zlib's crc32() for every
 * length from 0 to 4,200 bytes, at every alignment 0..15, continued from
 * a previous value, and for long random buffers; so the folded path and
 * the tail path agree with zlib wherever they split the input.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

#include "util/crc32.h"
#include "unit.h"

#define BUF (1u << 20)

static uint8_t *random_bytes(size_t n, unsigned seed)
{
	uint8_t *b = malloc(n);
	uint32_t x = seed * 2654435761u + 1;
	size_t i;

	ck_assert_ptr_nonnull(b);
	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (uint8_t)x;
	}
	return b;
}

START_TEST(test_every_length_and_alignment)
{
	uint8_t *b = random_bytes(4200 + 16, 1);
	size_t len, off;

	for (off = 0; off < 16; off++)
		for (len = 0; len <= 4200; len++)
			ck_assert_uint_eq(
				crc32_update(0, b + off, len),
				(uint32_t)crc32(0, b + off, (uInt)len));
	free(b);
}
END_TEST

START_TEST(test_continued)
{
	uint8_t *b = random_bytes(BUF, 2);
	size_t cut;

	/* CRC of a whole = CRC of its second part continued from the first,
	 * and both equal zlib's. */
	for (cut = 0; cut < BUF; cut += 77777) {
		uint32_t a = crc32_update(0, b, cut);

		ck_assert_uint_eq(crc32_update(a, b + cut, BUF - cut),
				  (uint32_t)crc32(0, b, BUF));
	}
	ck_assert_uint_eq(crc32_update(0xdeadbeef, b, BUF),
			  (uint32_t)crc32(0xdeadbeef, b, BUF));
	free(b);
}
END_TEST

START_TEST(test_random_lengths)
{
	uint8_t *b = random_bytes(BUF + 16, 3);
	uint32_t x = 7;
	int i;

	for (i = 0; i < 2000; i++) {
		size_t len, off;

		x = x * 1103515245u + 12345u;
		len = x % BUF;
		off = (x >> 20) % 16;
		ck_assert_uint_eq(
			crc32_update(i, b + off, len),
			(uint32_t)crc32((uLong)i, b + off, (uInt)len));
	}
	free(b);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "every_length_and_alignment",
		  test_every_length_and_alignment },
		{ "continued", test_continued },
		{ "random_lengths", test_random_lengths },
	};
	return unit_run(
		unit_suite("crc32", cases, sizeof(cases) / sizeof(cases[0])));
}
