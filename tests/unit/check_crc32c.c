/*
 * Unit tests for util/crc32c: published CRC-32C vectors (the check value
 * of "123456789" and RFC 3720's iSCSI vectors), and the hardware and table
 * paths against a bit-at-a-time reference for every length to 300 at
 * every alignment, and continued across a split; combining the CRCs of
 * two pieces (crc32c_combine, crc32c_shift_op) into the CRC of both, for
 * every split of a buffer, many equal pieces, empty pieces and lengths far
 * past any buffer (associativity).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "unit.h"

/* One bit at a time, straight from the definition. */
static uint32_t crc32c_ref(uint32_t crc, const uint8_t *p, size_t len)
{
	int k;

	crc = ~crc;
	while (len-- > 0) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return ~crc;
}

START_TEST(test_vectors)
{
	uint8_t b[48];
	int i;

	ck_assert_uint_eq(crc32c_update(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(crc32c_update_sw(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(crc32c_update(0, "", 0), 0);
	/* RFC 3720, B.4. */
	memset(b, 0, 32);
	ck_assert_uint_eq(crc32c_update(0, b, 32), 0x8A9136AAu);
	memset(b, 0xff, 32);
	ck_assert_uint_eq(crc32c_update(0, b, 32), 0x62A8AB43u);
	for (i = 0; i < 32; i++)
		b[i] = (uint8_t)i;
	ck_assert_uint_eq(crc32c_update(0, b, 32), 0x46DD794Eu);
	for (i = 0; i < 32; i++)
		b[i] = (uint8_t)(31 - i);
	ck_assert_uint_eq(crc32c_update(0, b, 32), 0x113FDB5Cu);
	/* RFC 3720's iSCSI SCSI Read (10) command PDU. */
	{
		static const uint8_t pdu[48] = {
			0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
			0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
			0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
			0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
			0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		};

		ck_assert_uint_eq(crc32c_update(0, pdu, 48), 0xD9963A56u);
	}
}
END_TEST

START_TEST(test_every_length_and_alignment)
{
	uint8_t *b = malloc(300 + 16);
	uint32_t x = 12345, want;
	size_t len, off, i;

	ck_assert_ptr_nonnull(b);
	for (i = 0; i < 316; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (uint8_t)(x >> 16);
	}
	for (off = 0; off < 16; off++)
		for (len = 0; len <= 300; len++) {
			want = crc32c_ref(0, b + off, len);
			ck_assert_uint_eq(crc32c_update(0, b + off, len), want);
			ck_assert_uint_eq(crc32c_update_sw(0, b + off, len),
					  want);
		}
	/* Continued: the CRC of a whole is that of its tail continued from
	 * its head's. */
	for (len = 0; len <= 300; len += 7) {
		want = crc32c_ref(0, b, 300);
		ck_assert_uint_eq(crc32c_update(crc32c_update(0, b, len),
						b + len, 300 - len),
				  want);
		ck_assert_uint_eq(crc32c_update_sw(crc32c_update_sw(0, b, len),
						   b + len, 300 - len),
				  want);
	}
	free(b);
}
END_TEST

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (uint8_t)(seed >> 16);
	}
}

START_TEST(test_combine_every_split)
{
	uint8_t b[1000];
	uint32_t whole, a, c;
	size_t split;

	fill(b, sizeof(b), 99);
	whole = crc32c_ref(0, b, sizeof(b));
	for (split = 0; split <= sizeof(b); split++) {
		a = crc32c_update(0, b, split);
		c = crc32c_update(0, b + split, sizeof(b) - split);
		ck_assert_uint_eq(crc32c_combine(a, c, sizeof(b) - split),
				  whole);
		ck_assert_uint_eq(
			crc32c_combine_op(a, c,
					  crc32c_shift_op(sizeof(b) - split)),
			whole);
	}
	/* An empty second piece changes nothing. */
	ck_assert_uint_eq(crc32c_combine(whole, 0, 0), whole);
	ck_assert_uint_eq(crc32c_combine(0, whole, sizeof(b)), whole);
}
END_TEST

START_TEST(test_combine_pieces)
{
	/* As the cache combines an object's chunks: one operator for every
	 * chunk of the chunk size, the last (shorter) one on its own. */
	enum { PIECE = 4096, PIECES = 37, LAST = 1234 };
	size_t n = (size_t)PIECE * PIECES + LAST, i;
	uint8_t *b = malloc(n);
	uint32_t op = crc32c_shift_op(PIECE), crc;

	ck_assert_ptr_nonnull(b);
	fill(b, n, 7);
	crc = crc32c_update(0, b, PIECE);
	for (i = 1; i < PIECES; i++)
		crc = crc32c_combine_op(
			crc, crc32c_update(0, b + i * PIECE, PIECE), op);
	crc = crc32c_combine(crc, crc32c_update(0, b + n - LAST, LAST), LAST);
	ck_assert_uint_eq(crc, crc32c_update_sw(0, b, n));
	/* The same bytes, any flipped bit: another CRC. */
	b[n / 2] ^= 0x10;
	ck_assert_uint_ne(crc, crc32c_update(0, b, n));
	free(b);
}
END_TEST

START_TEST(test_combine_long)
{
	/* Lengths no buffer here holds (a 100 GiB object): combining is
	 * associative, and a run of zero bytes is its own shift. */
	const uint64_t lens[] = { UINT64_C(1) << 20, UINT64_C(100) << 30,
				  (UINT64_C(1) << 40) + 12345,
				  UINT64_C(8) << 20 };
	uint32_t x = 0x12345678, y = 0x9abcdef0, z = 0x0f1e2d3c;
	uint8_t zeros[4096] = { 0 };
	uint32_t zc = crc32c_update(0, zeros, sizeof(zeros));
	size_t i, j;

	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++) {
			uint64_t lb = lens[i], lc = lens[j];

			ck_assert_uint_eq(
				crc32c_combine(crc32c_combine(x, y, lb), z, lc),
				crc32c_combine(x, crc32c_combine(y, z, lc),
					       lb + lc));
		}
	/* 1 MiB of zeros: 256 pieces of 4 KiB combined, or computed. */
	{
		uint8_t *big = calloc(1, 1 << 20);
		uint32_t crc = zc;

		ck_assert_ptr_nonnull(big);
		for (i = 1; i < 256; i++)
			crc = crc32c_combine(crc, zc, sizeof(zeros));
		ck_assert_uint_eq(crc, crc32c_update(0, big, 1 << 20));
		free(big);
	}
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "vectors", test_vectors },
		{ "every_length_and_alignment",
		  test_every_length_and_alignment },
		{ "combine_every_split", test_combine_every_split },
		{ "combine_pieces", test_combine_pieces },
		{ "combine_long", test_combine_long },
	};
	return unit_run(
		unit_suite("crc32c", cases, sizeof(cases) / sizeof(cases[0])));
}
