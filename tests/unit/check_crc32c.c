/*
 * Unit tests for util/crc32c: published CRC-32C vectors (the check value
 * of "123456789" and RFC 3720's iSCSI vectors), and the hardware and table
 * paths against a bit-at-a-time reference for every length to 300 at
 * every alignment, and continued across a split.
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

int main(void)
{
	const struct unit_case cases[] = {
		{ "vectors", test_vectors },
		{ "every_length_and_alignment",
		  test_every_length_and_alignment },
	};
	return unit_run(
		unit_suite("crc32c", cases, sizeof(cases) / sizeof(cases[0])));
}
