/*
 * Unit tests for records/frame and records/gunzip: the record framing of
 * TFRecord, JSONL and WebDataset tar, plain and gzip. Inputs are real
 * bytes: TFRecord frames written here from the published framing with a
 * bit-at-a-time CRC-32C (not the project's), gzip from zlib's deflate, tar
 * headers written here by hand, and archives made by Python's tarfile and
 * GNU tar (embedded gzipped, with the records Python's tarfile finds in
 * them). Every case runs fed all at once, one byte at a time and in random
 * splits, and must give the same records, result and error each time.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <zlib.h>

#include "records/frame.h"
#include "records/gunzip.h"
#include "util/crc32c.h"
#include "unit.h"

struct want_rec {
	uint64_t off, len;
	const char *key;
};

/* Python 3.11.7 tarfile.open(format=PAX_FORMAT): 20480 bytes, gzipped */
static const unsigned char py_pax_gz[] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xed, 0xda,
	0xdf, 0x4a, 0xc3, 0x30, 0x14, 0xc7, 0xf1, 0x5c, 0xfb, 0x14, 0x7d, 0x82,
	0x35, 0x49, 0x93, 0xe6, 0x4a, 0xf0, 0xcf, 0x8d, 0x17, 0x5e, 0xf8, 0x0a,
	0xdd, 0x3a, 0x14, 0x9d, 0xdb, 0x58, 0x3b, 0x18, 0x88, 0xef, 0x6e, 0x3a,
	0x41, 0x70, 0x15, 0x64, 0x4a, 0x92, 0x69, 0xbe, 0x9f, 0x9b, 0x8e, 0xdd,
	0x74, 0x70, 0xf8, 0x9d, 0x9c, 0x64, 0xe9, 0x54, 0xd9, 0x4c, 0x1e, 0xd7,
	0xf7, 0x22, 0x20, 0xe9, 0xd5, 0xc6, 0xec, 0x9f, 0xde, 0xe1, 0x53, 0x69,
	0x67, 0x84, 0x32, 0x56, 0x1b, 0xe7, 0xa4, 0xd9, 0x7f, 0xef, 0x74, 0x2d,
	0x45, 0x21, 0x45, 0x04, 0xdb, 0xae, 0x6f, 0x36, 0xfe, 0x95, 0x22, 0x4f,
	0x97, 0xc0, 0x1f, 0x25, 0xf0, 0x6b, 0xdd, 0xd0, 0xff, 0x67, 0x8b, 0x2e,
	0x61, 0xff, 0xf7, 0xf4, 0xa8, 0xff, 0x1b, 0x4b, 0xff, 0x8f, 0x41, 0x9d,
	0x91, 0x81, 0xec, 0xf3, 0xff, 0x3c, 0xef, 0xfd, 0x10, 0xd8, 0xad, 0x96,
	0x27, 0x92, 0x7f, 0x25, 0xab, 0x5a, 0x93, 0xff, 0x18, 0x5e, 0x5e, 0xc9,
	0x40, 0xe6, 0xf9, 0x9f, 0xa6, 0xde, 0xff, 0x0d, 0x9f, 0x47, 0xeb, 0xbf,
	0x21, 0xff, 0x31, 0x5c, 0x21, 0x6b, 0xfb, 0xfc, 0x27, 0x9f, 0xff, 0xc9,
	0x7f, 0xc2, 0xfe, 0xdf, 0x6d, 0xa7, 0xa5, 0x08, 0x5d, 0x7f, 0x67, 0xed,
	0x31, 0xf5, 0x57, 0xba, 0x12, 0x85, 0xa5, 0xfe, 0x31, 0xea, 0x3f, 0x4b,
	0xbc, 0xfe, 0x4b, 0x65, 0xc6, 0xe7, 0xbf, 0x96, 0xfd, 0x7f, 0x14, 0xd7,
	0x11, 0x30, 0x65, 0x9f, 0xae, 0x49, 0x39, 0x29, 0x2f, 0xee, 0x9a, 0xdd,
	0xcd, 0xbc, 0x69, 0xe7, 0x9b, 0x70, 0xf9, 0xff, 0x22, 0xf7, 0x1f, 0xf9,
	0xd7, 0xea, 0xf3, 0x5a, 0xe0, 0x77, 0x04, 0x5a, 0xd6, 0xa2, 0xd8, 0x91,
	0xff, 0xf0, 0xe7, 0x7f, 0x55, 0x5d, 0xac, 0x9b, 0xfe, 0xe1, 0xbc, 0x4d,
	0xe4, 0x7d, 0xf9, 0xe1, 0x14, 0x32, 0x91, 0x18, 0x25, 0xfe, 0x6e, 0xff,
	0xef, 0xec, 0xc1, 0xfc, 0x57, 0x29, 0x53, 0x31, 0xff, 0x47, 0x71, 0x0b,
	0xe0, 0xdf, 0x63, 0xfe, 0xa3, 0xff, 0x9f, 0xea, 0xfc, 0x37, 0x5b, 0x74,
	0xcc, 0x7f, 0xf9, 0xce, 0x7f, 0xc3, 0x08, 0x38, 0x9a, 0xff, 0x34, 0xf7,
	0xff, 0xa2, 0x70, 0x44, 0x20, 0x6b, 0x8b, 0xe5, 0x53, 0xe8, 0xe3, 0xdf,
	0xe3, 0xff, 0xff, 0xf1, 0xeb, 0xff, 0xb0, 0xff, 0xd3, 0xbb, 0xe0, 0x3f,
	0x2d, 0xfb, 0xfc, 0x2f, 0x57, 0xed, 0xaa, 0x0f, 0xfc, 0x8e, 0x1f, 0xdc,
	0xff, 0x93, 0xdc, 0xff, 0x8b, 0x54, 0xff, 0x96, 0x1e, 0x08, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0x5f, 0xf7, 0x06,
	0x87, 0x72, 0x6d, 0xf8, 0x00, 0x50, 0x00, 0x00,
};
static const struct want_rec py_pax_recs[] = {
	{ 0, 3584, "s1/a" },
	{ 3584, 1536, "s1/b" },
	{ 5632, 1024, "s1/c" },
	{ 6656, 4608,
	  "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
	  "dddddddddddddddddddddddddddddddddddddddddddddddddddd/c" },
	{ 11776, 1024, "nodot" },
};
#define PY_PAX_SIZE 20480
#define PY_PAX_SKIPPED 2

/* Python 3.11.7 tarfile.open(format=GNU_FORMAT): 20480 bytes, gzipped */
static const unsigned char py_gnu_gz[] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xed, 0xda,
	0x4d, 0x6e, 0x83, 0x30, 0x10, 0x86, 0x61, 0xaf, 0x7b, 0x0a, 0x4e, 0x00,
	0xb6, 0x31, 0x78, 0xdb, 0x9f, 0x2d, 0x97, 0x48, 0x42, 0x15, 0xb5, 0x49,
	0xa1, 0xaa, 0x89, 0x54, 0xa9, 0xea, 0xdd, 0x6b, 0xd8, 0x54, 0x0d, 0x95,
	0xaa, 0xb4, 0xb2, 0x81, 0xf2, 0x3e, 0x1b, 0xa2, 0x6c, 0xb2, 0x18, 0x7d,
	0xe3, 0x19, 0x07, 0xa7, 0xb2, 0x4d, 0xfa, 0xf8, 0xbc, 0x17, 0x01, 0x49,
	0xaf, 0x34, 0x66, 0x78, 0x7a, 0xe7, 0x4f, 0xa5, 0xad, 0x11, 0xca, 0x14,
	0xda, 0x58, 0x2b, 0xcd, 0xf0, 0xbd, 0xd5, 0x5a, 0x8a, 0x44, 0x8a, 0x08,
	0x4e, 0xae, 0xdb, 0xbc, 0x24, 0x89, 0x58, 0xa9, 0x1b, 0x60, 0xa1, 0x04,
	0xfe, 0xcc, 0xf5, 0xfd, 0x7f, 0x77, 0x74, 0x13, 0xf6, 0x7f, 0x4f, 0x8f,
	0xfa, 0xbf, 0x2c, 0xe8, 0xff, 0x31, 0xa8, 0x2b, 0x32, 0xb0, 0xfa, 0xfc,
	0x3f, 0xdd, 0x77, 0x7e, 0x08, 0x74, 0x6d, 0x33, 0x93, 0xfc, 0x2b, 0x99,
	0x6b, 0x4d, 0xfe, 0x63, 0x78, 0x7b, 0x27, 0x03, 0x2b, 0xcf, 0xff, 0x76,
	0xea, 0xfd, 0xaf, 0xff, 0x3c, 0x3a, 0xff, 0x0d, 0xf9, 0x8f, 0xe1, 0x16,
	0xab, 0x36, 0xe4, 0x7f, 0xf2, 0xf9, 0x9f, 0xfc, 0x4f, 0xd8, 0xff, 0xdd,
	0x69, 0x9b, 0x89, 0xd0, 0xf5, 0xb7, 0x45, 0x71, 0x49, 0xfd, 0x65, 0x99,
	0x8b, 0xa4, 0xa0, 0xfe, 0x31, 0xea, 0xbf, 0x9b, 0xf8, 0xfc, 0x97, 0xca,
	0x8c, 0xef, 0x7f, 0x15, 0xfb, 0x7f, 0x14, 0x77, 0x11, 0x30, 0x65, 0xcf,
	0x57, 0x9a, 0xa5, 0xd9, 0x75, 0xd5, 0x36, 0xfb, 0xea, 0xa1, 0x39, 0x04,
	0xcc, 0xff, 0x37, 0xb9, 0xff, 0xcc, 0xbf, 0xb5, 0x5f, 0xce, 0x02, 0x9f,
	0x7f, 0x5b, 0xfa, 0xfd, 0xbf, 0x22, 0xff, 0xc1, 0xd5, 0x13, 0x09, 0x7f,
	0xea, 0x60, 0x2e, 0xf5, 0xff, 0x69, 0xff, 0xb7, 0xc5, 0xd9, 0xfc, 0x97,
	0xab, 0xdc, 0x32, 0xff, 0x47, 0x51, 0x01, 0xf8, 0xf7, 0x98, 0xff, 0xe8,
	0xff, 0x33, 0x9b, 0xff, 0x02, 0xdf, 0x3a, 0x62, 0x21, 0xf3, 0x5f, 0xdf,
	0x01, 0x46, 0xf3, 0x5f, 0xc9, 0xfb, 0x7f, 0x51, 0x58, 0x22, 0xb0, 0x6a,
	0xc7, 0xe6, 0x10, 0x7c, 0x11, 0xbf, 0xf8, 0xff, 0x1f, 0xe5, 0x47, 0x02,
	0xbf, 0xff, 0xe9, 0xd7, 0x08, 0x77, 0x04, 0x2b, 0xcf, 0x7f, 0xd3, 0xd6,
	0x6d, 0x17, 0xf8, 0x37, 0x7e, 0xf1, 0xfe, 0x9f, 0xe4, 0xfd, 0xbf, 0x48,
	0xf5, 0xaf, 0xe9, 0x81, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x2c, 0xdd, 0x07, 0xba, 0x56, 0x14, 0x37, 0x00, 0x50,
	0x00, 0x00,
};
static const struct want_rec py_gnu_recs[] = {
	{ 0, 3584, "s1/a" },
	{ 3584, 1536, "s1/b" },
	{ 5632, 1024, "s1/c" },
	{ 6656, 4608,
	  "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
	  "dddddddddddddddddddddddddddddddddddddddddddddddddddd/c" },
	{ 11776, 1024, "nodot" },
};
#define PY_GNU_SIZE 20480
#define PY_GNU_SKIPPED 2

/* GNU tar 1.34 --format=posix (a pax header before every member), 20480 bytes, gzipped */
static const unsigned char gnu_posix_gz[] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xed, 0xd8,
	0xcd, 0x6a, 0xc2, 0x40, 0x18, 0x85, 0xe1, 0xac, 0xbd, 0x0a, 0xf1, 0x02,
	0x92, 0x6f, 0x26, 0xf3, 0x63, 0x0a, 0xdd, 0x77, 0xd9, 0x5b, 0x18, 0xab,
	0x94, 0x16, 0x6c, 0xad, 0x89, 0x10, 0x29, 0xbd, 0xf7, 0x8e, 0xa5, 0x0b,
	0x0d, 0xb5, 0x60, 0xcb, 0x44, 0x83, 0xef, 0xb3, 0x89, 0x1a, 0xc1, 0x68,
	0x38, 0x73, 0xfc, 0x26, 0x2f, 0xee, 0x43, 0x7b, 0xb7, 0x08, 0xf3, 0xc5,
	0xba, 0x2e, 0xda, 0x2c, 0x09, 0x89, 0x9c, 0x31, 0x5f, 0xc7, 0xa8, 0x7b,
	0x14, 0x55, 0xea, 0x4c, 0x19, 0x6b, 0x8c, 0x11, 0xd1, 0xbb, 0xd7, 0x95,
	0xc4, 0x67, 0xd9, 0x38, 0xd1, 0xe5, 0x1c, 0xda, 0xd4, 0x4d, 0x58, 0xc7,
	0x4b, 0xc9, 0xae, 0x53, 0x29, 0xe3, 0x65, 0xf3, 0xb4, 0x5c, 0xdc, 0x2a,
	0x2f, 0x46, 0x9c, 0x8f, 0xbf, 0x7f, 0xae, 0x74, 0x69, 0xac, 0xf3, 0xd3,
	0x6a, 0x14, 0xcf, 0x86, 0x5f, 0xcf, 0x3e, 0x7c, 0x9f, 0xad, 0xac, 0xb5,
	0x6e, 0xaa, 0xab, 0xdc, 0xeb, 0x2a, 0xde, 0xbd, 0xca, 0xeb, 0x51, 0x86,
	0x01, 0x68, 0x8b, 0xf4, 0x9f, 0xb1, 0xcb, 0xb8, 0xb7, 0xf6, 0x68, 0xfe,
	0x77, 0x8f, 0x0f, 0xf2, 0x1f, 0xdf, 0x2d, 0x31, 0xff, 0x76, 0x48, 0xf9,
	0xef, 0x7e, 0xb9, 0xc1, 0xdc, 0xff, 0xbd, 0xf5, 0xbf, 0x96, 0xfc, 0x79,
	0xf5, 0x78, 0x01, 0xeb, 0xbf, 0x32, 0x5a, 0x58, 0xff, 0x59, 0xff, 0x91,
	0x3e, 0xff, 0x89, 0x42, 0x7f, 0x42, 0xfe, 0xe3, 0x7a, 0xdf, 0xfd, 0xff,
	0x67, 0xb5, 0xcd, 0xc6, 0x32, 0xa4, 0xfc, 0x0f, 0x74, 0xfd, 0x8f, 0xb7,
	0x7e, 0x1e, 0x9a, 0x40, 0x10, 0xae, 0x36, 0xff, 0x9d, 0xfe, 0xaf, 0x5f,
	0x5f, 0x2e, 0xa0, 0xff, 0x9d, 0x52, 0xf4, 0x3f, 0xfd, 0x8f, 0x7e, 0xfa,
	0x3f, 0x41, 0xe8, 0xff, 0xd7, 0xff, 0x5e, 0x39, 0xfa, 0xbf, 0x0f, 0xef,
	0x93, 0x30, 0xb9, 0x51, 0x1f, 0x04, 0x81, 0xfe, 0xaf, 0x8b, 0xed, 0x79,
	0xf2, 0xff, 0xc3, 0xfe, 0x6f, 0x2c, 0x18, 0xfa, 0x9f, 0xfe, 0x47, 0xfa,
	0xfc, 0x6f, 0x93, 0xef, 0x00, 0xff, 0x61, 0xff, 0xd7, 0x5b, 0xf6, 0x7f,
	0x7b, 0xbb, 0xff, 0xfb, 0x13, 0xa0, 0xca, 0x9b, 0xb6, 0x39, 0xff, 0xfc,
	0xe7, 0x4b, 0xf6, 0x7f, 0x59, 0xff, 0xd1, 0x4b, 0xfe, 0x93, 0x84, 0xfe,
	0xa4, 0xf9, 0x4f, 0x75, 0xf3, 0x2f, 0xda, 0x33, 0xff, 0xf5, 0xe1, 0x8d,
	0x08, 0x5c, 0x7d, 0xfe, 0xf7, 0xfb, 0x7f, 0x33, 0xbb, 0x84, 0xf9, 0x4f,
	0x95, 0x8e, 0xfe, 0xa7, 0xff, 0xd1, 0x4f, 0xff, 0x6f, 0x66, 0x49, 0x67,
	0xc0, 0x93, 0xe7, 0x3f, 0x25, 0xd6, 0x58, 0xe6, 0x3f, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x8e,
	0xf9, 0x04, 0x5b, 0xc1, 0x46, 0xf0, 0x00, 0x50, 0x00, 0x00,
};
static const struct want_rec gnu_posix_recs[] = {
	{ 1536, 4096, "x/s0" },
	{ 7168, 2048, "x/y/s1" },
};
#define GNU_POSIX_SIZE 20480
#define GNU_POSIX_SKIPPED 3

/* --- byte buffers, a PRNG, the reference framings ------------------- */

struct buf {
	unsigned char *p;
	size_t n, cap;
};

static void buf_put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	if (n > 0)
		memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void buf_zero(struct buf *b, size_t n)
{
	unsigned char z[512] = { 0 };

	while (n > 0) {
		size_t k = n < sizeof(z) ? n : sizeof(z);

		buf_put(b, z, k);
		n -= k;
	}
}

static uint64_t rng_state;

static uint32_t rng(void)
{
	if (rng_state == 0) /* a test that did not seed it */
		rng_state = 88172645463325252ULL;
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

/* CRC-32C one bit at a time, from the definition. */
static uint32_t ref_crc32c(const void *d, size_t n)
{
	const unsigned char *p = d;
	uint32_t crc = 0xffffffffu;
	int k;

	while (n-- > 0) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return ~crc;
}

static uint32_t ref_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(struct buf *b, uint64_t v, int n)
{
	unsigned char x[8];
	int i;

	for (i = 0; i < n; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	buf_put(b, x, (size_t)n);
}

/* One TFRecord frame, as TensorFlow's record writer lays it out. */
static void tf_put(struct buf *b, const void *data, size_t len)
{
	unsigned char l[8];
	int i;

	for (i = 0; i < 8; i++)
		l[i] = (unsigned char)((uint64_t)len >> (8 * i));
	buf_put(b, l, 8);
	put_le(b, ref_mask(ref_crc32c(l, 8)), 4);
	buf_put(b, data, len);
	put_le(b, ref_mask(ref_crc32c(data, len)), 4);
}

/* One gzip member holding in[0..n), appended to b. */
static void gz_put(struct buf *b, const void *in, size_t n)
{
	z_stream z;
	unsigned char out[4096];
	int rc;

	memset(&z, 0, sizeof(z));
	ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8,
				      Z_DEFAULT_STRATEGY),
			 Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	do {
		z.next_out = out;
		z.avail_out = sizeof(out);
		rc = deflate(&z, Z_FINISH);
		ck_assert(rc == Z_OK || rc == Z_STREAM_END);
		buf_put(b, out, sizeof(out) - z.avail_out);
	} while (rc != Z_STREAM_END);
	deflateEnd(&z);
}

/* Inflates a gzipped fixture. */
static void gz_get(struct buf *b, const void *in, size_t n)
{
	z_stream z;
	unsigned char out[4096];
	int rc;

	memset(&z, 0, sizeof(z));
	ck_assert_int_eq(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	do {
		z.next_out = out;
		z.avail_out = sizeof(out);
		rc = inflate(&z, Z_NO_FLUSH);
		ck_assert(rc == Z_OK || rc == Z_STREAM_END);
		buf_put(b, out, sizeof(out) - z.avail_out);
	} while (rc != Z_STREAM_END);
	inflateEnd(&z);
}

/* --- tar written by hand (POSIX ustar) ------------------------------- */

enum { TH_BASE256 = 1, TH_SIGNED = 2, TH_BADSUM = 4, TH_V7 = 8 };

static void tar_hdr(struct buf *b, const char *name, char type, uint64_t size,
		    int flags)
{
	unsigned char h[512] = { 0 };
	unsigned long usum = 0;
	long ssum = 0;
	int i;

	memcpy(h, name, strlen(name) < 100 ? strlen(name) : 100);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	if (flags & TH_BASE256) {
		h[124] = 0x80;
		for (i = 0; i < 8; i++)
			h[135 - i] = (unsigned char)(size >> (8 * i));
	} else {
		snprintf((char *)h + 124, 12, "%011llo",
			 (unsigned long long)size);
	}
	memcpy(h + 136, "14531146400", 12);
	h[156] = (unsigned char)type;
	if (!(flags & TH_V7)) {
		memcpy(h + 257, "ustar", 6);
		memcpy(h + 263, "00", 2);
	}
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++) {
		usum += h[i];
		ssum += (signed char)h[i];
	}
	snprintf((char *)h + 148, 8, "%06lo",
		 flags & TH_SIGNED ? (unsigned long)ssum : usum);
	if (flags & TH_BADSUM)
		h[150] ^= 1;
	buf_put(b, h, 512);
}

static void tar_data(struct buf *b, const void *d, size_t n)
{
	buf_put(b, d, n);
	buf_zero(b, (512 - n % 512) % 512);
}

/* A regular file with n bytes of data. */
static void tar_file(struct buf *b, const char *name, size_t n)
{
	unsigned char *d = malloc(n + 1);
	size_t i;

	ck_assert_ptr_nonnull(d);
	for (i = 0; i < n; i++)
		d[i] = (unsigned char)('a' + i % 26);
	tar_hdr(b, name, '0', n, 0);
	tar_data(b, d, n);
	free(d);
}

/* Appends one pax record "LEN key=value\n" (LEN counts itself). */
static void pax_rec(struct buf *b, const char *key, const char *value)
{
	size_t len = strlen(key) + strlen(value) + 3, d = 1, t;
	char num[24];

	for (t = len; t >= 10; t /= 10)
		d++;
	snprintf(num, sizeof(num), "%zu", len + d);
	if (strlen(num) > d)
		snprintf(num, sizeof(num), "%zu", len + d + 1);
	buf_put(b, num, strlen(num));
	buf_put(b, " ", 1);
	buf_put(b, key, strlen(key));
	buf_put(b, "=", 1);
	buf_put(b, value, strlen(value));
	buf_put(b, "\n", 1);
}

/* A pax header of type (x or g) with a "path" record if path and a
 * "size" one if size >= 0. */
static void tar_pax(struct buf *b, char type, const char *path, long long size)
{
	struct buf r = { 0 };
	char v[32];

	if (path != NULL)
		pax_rec(&r, "path", path);
	if (size >= 0) {
		snprintf(v, sizeof(v), "%lld", size);
		pax_rec(&r, "size", v);
	}
	tar_hdr(b, "PaxHeaders/x", type, r.n, 0);
	tar_data(b, r.p, r.n);
	free(r.p);
}

static void tar_end(struct buf *b)
{
	buf_zero(b, 1024);
}

/* --- running the scanner in every split ----------------------------- */

struct rec_got {
	uint64_t off, len;
	char *key;
	size_t key_len;
};

struct outcome {
	int rc;
	char err[600];
	struct rec_scan_result res;
	struct rec_got *r;
	size_t n, cap;
	int stop_at; /* emit fails with -EINTR at this record (if > 0) */
};

static int collect(void *arg, uint64_t off, uint64_t len, const char *key,
		   size_t key_len)
{
	struct outcome *o = arg;

	/* In order, not overlapping. */
	if (o->n > 0)
		ck_assert_uint_ge(off, o->r[o->n - 1].off + o->r[o->n - 1].len);
	if (o->stop_at > 0 && o->n + 1 == (size_t)o->stop_at)
		return -EINTR;
	if (o->n == o->cap) {
		o->cap = o->cap * 2 + 16;
		o->r = realloc(o->r, o->cap * sizeof(*o->r));
		ck_assert_ptr_nonnull(o->r);
	}
	o->r[o->n].off = off;
	o->r[o->n].len = len;
	o->r[o->n].key_len = key_len;
	o->r[o->n].key = NULL;
	if (key != NULL) {
		o->r[o->n].key = malloc(key_len + 1);
		ck_assert_ptr_nonnull(o->r[o->n].key);
		memcpy(o->r[o->n].key, key, key_len);
		o->r[o->n].key[key_len] = '\0';
	}
	o->n++;
	return 0;
}

static void outcome_free(struct outcome *o)
{
	size_t i;

	for (i = 0; i < o->n; i++)
		free(o->r[i].key);
	free(o->r);
	memset(o, 0, sizeof(*o));
}

enum split { SPLIT_WHOLE, SPLIT_BYTES, SPLIT_RANDOM };

static void run(enum rec_format f, const void *data, size_t n, enum split mode,
		int stop_at, struct outcome *o)
{
	const unsigned char *p = data;
	struct rec_scan *s = NULL;
	size_t at = 0;
	int rc = 0;

	memset(o, 0, sizeof(*o));
	o->stop_at = stop_at;
	ck_assert_int_eq(rec_scan_new(f, collect, o, &s), 0);
	while (rc == 0 && at < n) {
		size_t k = n - at;

		if (mode == SPLIT_BYTES)
			k = 1;
		else if (mode == SPLIT_RANDOM)
			switch (rng() % 4) {
			case 0:
				k = 0; /* an empty feed changes nothing */
				break;
			case 1:
				k = rng() % 3;
				break;
			case 2:
				k = rng() % 600;
				break;
			default:
				k = rng() % 5000;
			}
		k = k < n - at ? k : n - at;
		rc = rec_scan_feed(s, p + at, k);
		at += k;
	}
	if (rc == 0)
		rc = rec_scan_finish(s, &o->res);
	else /* sticky */
		ck_assert_int_eq(rec_scan_finish(s, &o->res), rc);
	o->rc = rc;
	snprintf(o->err, sizeof(o->err), "%s", rec_scan_error(s));
	if (rc == 0)
		ck_assert_str_eq(o->err, "");
	else
		ck_assert_str_ne(o->err, "");
	rec_scan_free(s);
}

static void outcome_same(const struct outcome *a, const struct outcome *b)
{
	size_t i;

	ck_assert_int_eq(a->rc, b->rc);
	ck_assert_str_eq(a->err, b->err);
	ck_assert_uint_eq(a->n, b->n);
	for (i = 0; i < a->n; i++) {
		ck_assert_uint_eq(a->r[i].off, b->r[i].off);
		ck_assert_uint_eq(a->r[i].len, b->r[i].len);
		ck_assert_uint_eq(a->r[i].key_len, b->r[i].key_len);
		if (a->r[i].key != NULL)
			ck_assert_str_eq(a->r[i].key, b->r[i].key);
		else
			ck_assert_ptr_null(b->r[i].key);
	}
	if (a->rc == 0) {
		ck_assert_uint_eq(a->res.records, b->res.records);
		ck_assert_uint_eq(a->res.decoded_size, b->res.decoded_size);
		ck_assert_int_eq(a->res.nl_added, b->res.nl_added);
		ck_assert_uint_eq(a->res.skipped, b->res.skipped);
	}
}

/* Runs data whole, byte by byte and in 8 random splits; all must agree.
 * Leaves the whole run's outcome in *o. */
static void scan_all(enum rec_format f, const void *data, size_t n,
		     struct outcome *o)
{
	struct outcome other;
	int i;

	run(f, data, n, SPLIT_WHOLE, 0, o);
	if (o->rc == 0)
		ck_assert_uint_eq(o->res.records, o->n);
	run(f, data, n, SPLIT_BYTES, 0, &other);
	outcome_same(o, &other);
	outcome_free(&other);
	for (i = 0; i < 8; i++) {
		run(f, data, n, SPLIT_RANDOM, 0, &other);
		outcome_same(o, &other);
		outcome_free(&other);
	}
}

/* data must scan to exactly want[0..nwant) (keys if given). */
static void expect_ok(enum rec_format f, const void *data, size_t n,
		      const struct want_rec *want, size_t nwant,
		      struct outcome *o)
{
	size_t i;

	scan_all(f, data, n, o);
	if (o->rc != 0)
		ck_abort_msg("unexpected error %d: %s", o->rc, o->err);
	ck_assert_uint_eq(o->n, nwant);
	for (i = 0; i < nwant; i++) {
		ck_assert_uint_eq(o->r[i].off, want[i].off);
		ck_assert_uint_eq(o->r[i].len, want[i].len);
		if (want[i].key != NULL) {
			ck_assert_ptr_nonnull(o->r[i].key);
			ck_assert_str_eq(o->r[i].key, want[i].key);
		}
	}
}

/* data must fail with -EBADMSG, the message holding every string of
 * what (NULL-terminated). */
static void expect_bad(enum rec_format f, const void *data, size_t n,
		       const char *const *what)
{
	struct outcome o;

	scan_all(f, data, n, &o);
	ck_assert_msg(o.rc == -EBADMSG, "rc %d, want -EBADMSG", o.rc);
	for (; *what != NULL; what++)
		ck_assert_msg(strstr(o.err, *what) != NULL,
			      "error \"%s\" lacks \"%s\"", o.err, *what);
	outcome_free(&o);
}

#define BAD(f, d, n, ...)                                                      \
	do {                                                                   \
		const char *const w_[] = { __VA_ARGS__, NULL };                \
		expect_bad(f, d, n, w_);                                       \
	} while (0)

/* --- CRC ------------------------------------------------------------ */

START_TEST(test_crc_and_mask)
{
	static const unsigned char zero8[8] = { 0 };

	ck_assert_uint_eq(crc32c_update(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(ref_crc32c("123456789", 9), 0xE3069283u);
	/* ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8 */
	ck_assert_uint_eq(rec_tfrecord_mask(0xE3069283u), 0xC78AB0E5u);
	ck_assert_uint_eq(rec_tfrecord_mask(0), 0xa282ead8u);
	/* The length CRC of an empty record, as in every TFRecord file
	 * holding one: masked CRC-32C of 8 zero bytes. */
	ck_assert_uint_eq(rec_tfrecord_mask(crc32c_update(0, zero8, 8)),
			  ref_mask(ref_crc32c(zero8, 8)));
	ck_assert_uint_eq(ref_crc32c(zero8, 8), 0x8C28B28Au);
}
END_TEST

/* --- TFRecord ------------------------------------------------------- */

/* Frames of lengths lens[0..n) into b, their extents into want. */
static void tf_build(struct buf *b, const size_t *lens, size_t n,
		     struct want_rec *want)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		unsigned char *d = malloc(lens[i] + 1);

		for (j = 0; j < lens[i]; j++)
			d[j] = (unsigned char)rng();
		want[i].off = b->n;
		want[i].len = lens[i] + 16;
		want[i].key = NULL;
		tf_put(b, d, lens[i]);
		free(d);
	}
}

START_TEST(test_tfrecord_good)
{
	static const size_t lens[] = { 5, 0, 1, 300, 0, 70000, 12 };
	struct want_rec want[7];
	struct buf b = { 0 };
	struct outcome o;

	rng_state = 1;
	tf_build(&b, lens, 7, want);
	expect_ok(REC_FORMAT_TFRECORD, b.p, b.n, want, 7, &o);
	ck_assert_uint_eq(o.res.decoded_size, b.n);
	ck_assert(!o.res.nl_added);
	ck_assert_uint_eq(o.res.skipped, 0);
	outcome_free(&o);
	/* A lone empty record: 16 bytes. */
	b.n = 0;
	tf_build(&b, lens + 1, 1, want);
	ck_assert_uint_eq(b.n, 16);
	expect_ok(REC_FORMAT_TFRECORD, b.p, b.n, want, 1, &o);
	outcome_free(&o);
	/* Empty object: no records, valid. */
	expect_ok(REC_FORMAT_TFRECORD, "", 0, NULL, 0, &o);
	ck_assert_uint_eq(o.res.decoded_size, 0);
	outcome_free(&o);
	free(b.p);
}
END_TEST

START_TEST(test_tfrecord_bad)
{
	static const size_t lens[] = { 10, 20, 30 };
	struct want_rec want[3];
	struct buf b = { 0 }, c = { 0 };
	char at[64];
	size_t cut;

	rng_state = 2;
	tf_build(&b, lens, 3, want);
	/* A flipped byte in record 1's length CRC, then in its data CRC. */
	c.n = 0;
	buf_put(&c, b.p, b.n);
	c.p[want[1].off + 9] ^= 0x10;
	snprintf(at, sizeof(at),
		 "offset %llu: record 1: ", (unsigned long long)want[1].off);
	BAD(REC_FORMAT_TFRECORD, c.p, c.n, at, "length CRC mismatch",
	    "stored 0x", "computed 0x");
	c.n = 0;
	buf_put(&c, b.p, b.n);
	c.p[want[1].off + want[1].len - 1] ^= 0x01;
	BAD(REC_FORMAT_TFRECORD, c.p, c.n, at, "data CRC mismatch");
	/* A flipped data byte: the data CRC catches it. */
	c.n = 0;
	buf_put(&c, b.p, b.n);
	c.p[want[2].off + 12 + 29] ^= 0x80;
	snprintf(at, sizeof(at),
		 "offset %llu: record 2: ", (unsigned long long)want[2].off);
	BAD(REC_FORMAT_TFRECORD, c.p, c.n, at, "data CRC mismatch");
	/* The last record cut at every point inside it. */
	for (cut = 1; cut < want[2].len; cut++) {
		BAD(REC_FORMAT_TFRECORD, b.p, b.n - cut, at, "truncated");
	}
	BAD(REC_FORMAT_TFRECORD, b.p, b.n - 10, at,
	    "truncated: length 30 but 24 bytes left");
	BAD(REC_FORMAT_TFRECORD, b.p, b.n - 40, at,
	    "truncated: header cut short (6 of 12 bytes)");
	/* Trailing garbage: short, then long enough to be a header. */
	c.n = 0;
	buf_put(&c, b.p, b.n);
	buf_put(&c, "junk", 4);
	snprintf(at, sizeof(at), "offset %zu: record 3: truncated", b.n);
	BAD(REC_FORMAT_TFRECORD, c.p, c.n, at);
	buf_put(&c, "more junk here", 14);
	snprintf(at, sizeof(at), "offset %zu: record 3: length CRC", b.n);
	BAD(REC_FORMAT_TFRECORD, c.p, c.n, at);
	/* Trailing zero bytes are garbage too (their CRC is not 0). */
	c.n = 0;
	buf_put(&c, b.p, b.n);
	buf_zero(&c, 16);
	BAD(REC_FORMAT_TFRECORD, c.p, c.n, at);
	free(b.p);
	free(c.p);
}
END_TEST

START_TEST(test_tfrecord_too_large)
{
	unsigned char h[12];
	uint64_t len;
	int i;

	/* A correct length CRC over a length one past the bound. */
	for (len = (1ULL << 32) - 17; len <= (1ULL << 32) - 16; len++) {
		for (i = 0; i < 8; i++)
			h[i] = (unsigned char)(len >> (8 * i));
		for (i = 0; i < 4; i++)
			h[8 + i] = (unsigned char)(ref_mask(ref_crc32c(h, 8)) >>
						   (8 * i));
		if (len == REC_TFRECORD_LEN_MAX)
			BAD(REC_FORMAT_TFRECORD, h, 12, "offset 0: record 0: ",
			    "truncated: length 4294967279 but 0 bytes left");
		else
			BAD(REC_FORMAT_TFRECORD, h, 12, "offset 0: record 0: ",
			    "record length 4294967280 too large");
	}
}
END_TEST

/* --- gzip ----------------------------------------------------------- */

static int gz_collect(void *arg, const void *p, size_t n)
{
	buf_put(arg, p, n);
	return 0;
}

START_TEST(test_gunzip_members)
{
	struct buf plain = { 0 }, gz = { 0 }, out = { 0 };
	struct rec_gunzip *g;
	struct rec_gunzip_stats st;
	size_t i;

	for (i = 0; i < 300000; i++)
		buf_put(&plain, &(char){ (char)('a' + rng() % 3) }, 1);
	gz_put(&gz, plain.p, 100000);
	gz_put(&gz, plain.p + 100000, 0); /* an empty member */
	gz_put(&gz, plain.p + 100000, 200000);
	ck_assert_int_eq(rec_gunzip_new(&g), 0);
	for (i = 0; i < gz.n; i += 7)
		ck_assert_int_eq(rec_gunzip_feed(g, gz.p + i,
						 gz.n - i < 7 ? gz.n - i : 7,
						 gz_collect, &out),
				 0);
	ck_assert_int_eq(rec_gunzip_finish(g), 0);
	rec_gunzip_stats_get(g, &st);
	ck_assert_uint_eq(st.members, 3);
	ck_assert_uint_eq(st.decoded, plain.n);
	ck_assert_uint_eq(st.consumed, gz.n);
	ck_assert_uint_eq(out.n, plain.n);
	ck_assert(memcmp(out.p, plain.p, plain.n) == 0);
	ck_assert_str_eq(rec_gunzip_error(g), "");
	rec_gunzip_free(g);
	rec_gunzip_free(NULL);
	/* Empty input: not gzip. */
	ck_assert_int_eq(rec_gunzip_new(&g), 0);
	ck_assert_int_eq(rec_gunzip_finish(g), -EBADMSG);
	ck_assert_str_eq(rec_gunzip_error(g),
			 "compressed offset 0: not gzip (empty input)");
	rec_gunzip_free(g);
	free(plain.p);
	free(gz.p);
	free(out.p);
}
END_TEST

START_TEST(test_gzip_tfrecord)
{
	static const size_t lens[] = { 100, 0, 5000, 7, 1 };
	struct want_rec want[5];
	struct buf b = { 0 }, gz = { 0 }, c = { 0 };
	struct outcome o;
	char at[80];
	size_t i, member1;

	rng_state = 3;
	tf_build(&b, lens, 5, want);
	/* Single member. */
	gz_put(&gz, b.p, b.n);
	expect_ok(REC_FORMAT_TFRECORD_GZ, gz.p, gz.n, want, 5, &o);
	ck_assert_uint_eq(o.res.decoded_size, b.n);
	outcome_free(&o);
	/* Two members, split inside record 2's data: one stream. */
	gz.n = 0;
	gz_put(&gz, b.p, want[2].off + 40);
	member1 = gz.n;
	gz_put(&gz, b.p + want[2].off + 40, b.n - want[2].off - 40);
	expect_ok(REC_FORMAT_TFRECORD_GZ, gz.p, gz.n, want, 5, &o);
	ck_assert_uint_eq(o.res.decoded_size, b.n);
	outcome_free(&o);
	/* The second member cut short, anywhere. */
	for (i = 1; i < gz.n - member1; i += (gz.n - member1) / 7 + 1) {
		snprintf(at, sizeof(at),
			 "compressed offset %zu: gzip member 1 "
			 "(at compressed offset %zu) cut short",
			 gz.n - i, member1);
		BAD(REC_FORMAT_TFRECORD_GZ, gz.p, gz.n - i, at);
	}
	/* Its CRC-32 trailer wrong, its ISIZE wrong. */
	c.n = 0;
	buf_put(&c, gz.p, gz.n);
	c.p[c.n - 6] ^= 1;
	BAD(REC_FORMAT_TFRECORD_GZ, c.p, c.n, "gzip member 1", "corrupt",
	    "incorrect data check");
	c.p[c.n - 6] ^= 1;
	c.p[c.n - 2] ^= 1;
	BAD(REC_FORMAT_TFRECORD_GZ, c.p, c.n, "gzip member 1", "corrupt",
	    "incorrect length check");
	/* Corrupt deflate data: a block type that does not exist. */
	c.n = 0;
	buf_put(&c, gz.p, gz.n);
	c.p[10] |= 0x06;
	snprintf(at, sizeof(at),
		 "gzip member 0 (at compressed offset 0): corrupt");
	BAD(REC_FORMAT_TFRECORD_GZ, c.p, c.n, at);
	/* Garbage after a member: text, then zero bytes. */
	c.n = 0;
	buf_put(&c, gz.p, gz.n);
	buf_put(&c, "trailing", 8);
	snprintf(at, sizeof(at),
		 "compressed offset %zu: data after gzip "
		 "member 1 is not a gzip member",
		 gz.n);
	BAD(REC_FORMAT_TFRECORD_GZ, c.p, c.n, at);
	c.n = gz.n;
	buf_zero(&c, 512);
	BAD(REC_FORMAT_TFRECORD_GZ, c.p, c.n, at);
	c.n = gz.n;
	buf_put(&c, "\x1f", 1); /* half a magic: a member cut short */
	BAD(REC_FORMAT_TFRECORD_GZ, c.p, c.n, "gzip member 2", "cut short");
	/* Empty input, and not gzip at all. */
	BAD(REC_FORMAT_TFRECORD_GZ, "", 0,
	    "compressed offset 0: not gzip (empty input)");
	BAD(REC_FORMAT_TFRECORD_GZ, b.p, b.n, "compressed offset 0: not gzip");
	/* A framing error inside good gzip names the decoded offset. */
	c.n = 0;
	buf_put(&c, b.p, b.n);
	c.p[want[3].off + 12] ^= 1;
	gz.n = 0;
	gz_put(&gz, c.p, c.n);
	snprintf(at, sizeof(at), "offset %llu: record 3: data CRC mismatch",
		 (unsigned long long)want[3].off);
	BAD(REC_FORMAT_TFRECORD_GZ, gz.p, gz.n, at);
	free(b.p);
	free(c.p);
	free(gz.p);
}
END_TEST

/* --- JSONL ---------------------------------------------------------- */

START_TEST(test_jsonl)
{
	static const struct want_rec w1[] = { { 0, 8, NULL }, { 8, 7, NULL } };
	static const struct want_rec w3[] = {
		{ 0, 1, NULL }, { 1, 4, NULL }, { 5, 1, NULL }, { 6, 3, NULL }
	};
	static const struct want_rec w4[] = { { 0, 6, NULL }, { 6, 2, NULL } };
	struct buf gz = { 0 };
	struct outcome o;

	expect_ok(REC_FORMAT_JSONL, "{\"a\":1}\n[1, 2]\n", 15, w1, 2, &o);
	ck_assert(!o.res.nl_added);
	ck_assert_uint_eq(o.res.decoded_size, 15);
	outcome_free(&o);
	/* No final newline: the record leaves it out, nl_added says so. */
	expect_ok(REC_FORMAT_JSONL, "{\"a\":1}\n[1, 2]", 14,
		  (const struct want_rec[]){ { 0, 8, NULL }, { 8, 6, NULL } },
		  2, &o);
	ck_assert(o.res.nl_added);
	outcome_free(&o);
	/* Empty lines are records; invalid UTF-8 is just bytes. */
	expect_ok(REC_FORMAT_JSONL, "\n\xff\xfe\xc3\n\n\xc3(\n", 9, w3, 4, &o);
	ck_assert(!o.res.nl_added);
	outcome_free(&o);
	/* CRLF: the \r is data. */
	expect_ok(REC_FORMAT_JSONL, "{}\r\n\r\n\r\n", 8,
		  (const struct want_rec[]){
			  { 0, 4, NULL }, { 4, 2, NULL }, { 6, 2, NULL } },
		  3, &o);
	outcome_free(&o);
	/* One line without any newline; a NUL byte is data. */
	expect_ok(REC_FORMAT_JSONL, "ab\0cd\n\0x", 8, w4, 2, &o);
	ck_assert(o.res.nl_added);
	outcome_free(&o);
	expect_ok(REC_FORMAT_JSONL, "", 0, NULL, 0, &o);
	ck_assert(!o.res.nl_added);
	outcome_free(&o);
	/* jsonl.gz: two members splitting a line. */
	gz_put(&gz, "{\"a\":1}\n[1", 10);
	gz_put(&gz, ", 2]", 4);
	expect_ok(REC_FORMAT_JSONL_GZ, gz.p, gz.n,
		  (const struct want_rec[]){ { 0, 8, NULL }, { 8, 6, NULL } },
		  2, &o);
	ck_assert(o.res.nl_added);
	ck_assert_uint_eq(o.res.decoded_size, 14);
	outcome_free(&o);
	BAD(REC_FORMAT_JSONL_GZ, gz.p, gz.n - 3, "cut short");
	free(gz.p);
}
END_TEST

/* --- tar ------------------------------------------------------------ */

START_TEST(test_tar_samples)
{
	struct want_rec want[4];
	struct buf b = { 0 };
	struct outcome o;
	size_t n;

	want[0] = (struct want_rec){ 0, 0, "a/b/s1" };
	tar_file(&b, "a/b/s1.jpg", 700);
	tar_file(&b, "a/b/s1.cls", 3);
	tar_file(&b, "a/b/s1.x.y.json", 0);
	want[0].len = b.n;
	want[1] = (struct want_rec){ b.n, 0, "a/b/s2" };
	tar_file(&b, "a/b/s2.jpg", 512);
	want[1].len = b.n - want[1].off;
	/* Same last component, other directory: another sample. */
	want[2] = (struct want_rec){ b.n, 0, "a/c/s2" };
	tar_file(&b, "a/c/s2.jpg", 1);
	want[2].len = b.n - want[2].off;
	/* A name without a dot: the whole path is the key. */
	want[3] = (struct want_rec){ b.n, 0, "a.d/noext" };
	tar_file(&b, "a.d/noext", 10);
	want[3].len = b.n - want[3].off;
	n = b.n;
	tar_end(&b);
	buf_zero(&b, 10240 - b.n % 10240); /* tar's record padding */
	expect_ok(REC_FORMAT_TAR, b.p, b.n, want, 4, &o);
	ck_assert_uint_eq(o.res.decoded_size, b.n);
	ck_assert_uint_eq(o.res.skipped, 0);
	outcome_free(&o);
	/* Without the end blocks (ends at a header boundary), and with one
	 * lone zero block: the same samples. */
	expect_ok(REC_FORMAT_TAR, b.p, n, want, 4, &o);
	outcome_free(&o);
	expect_ok(REC_FORMAT_TAR, b.p, n + 512, want, 4, &o);
	outcome_free(&o);
	/* An empty object, and only zero blocks: no samples. */
	expect_ok(REC_FORMAT_TAR, "", 0, NULL, 0, &o);
	outcome_free(&o);
	expect_ok(REC_FORMAT_TAR, b.p + n, b.n - n, NULL, 0, &o);
	outcome_free(&o);
	free(b.p);
}
END_TEST

START_TEST(test_tar_not_samples)
{
	struct want_rec want[3];
	struct buf b = { 0 };
	struct outcome o;

	/* A directory between two members of one key splits them; a
	 * symlink and a v7 directory ('\0' and a trailing slash) too. */
	tar_hdr(&b, "top/", '5', 0, 0);
	want[0] = (struct want_rec){ b.n, 0, "top/k" };
	tar_file(&b, "top/k.jpg", 100);
	want[0].len = b.n - want[0].off;
	tar_hdr(&b, "top/sub/", '5', 0, 0);
	want[1] = (struct want_rec){ b.n, 0, "top/k" };
	tar_file(&b, "top/k.cls", 100);
	want[1].len = b.n - want[1].off;
	tar_hdr(&b, "top/link.jpg", '2', 0, 0);
	tar_hdr(&b, "top/v7dir/", '\0', 0, TH_V7);
	want[2] = (struct want_rec){ b.n, 0, "top/k" };
	tar_file(&b, "top/k.txt", 1);
	tar_hdr(&b, "top/k.lnk", '1', 0, 0);
	want[2].len = b.n - want[2].off - 512;
	tar_end(&b);
	expect_ok(REC_FORMAT_TAR, b.p, b.n, want, 3, &o);
	ck_assert_uint_eq(o.res.skipped, 5);
	outcome_free(&o);
	free(b.p);
}
END_TEST

START_TEST(test_tar_long_names)
{
	char longp[400], name[500];
	struct want_rec want[3];
	struct buf b = { 0 };
	struct outcome o;

	memset(longp, 'p', 300);
	longp[150] = '/';
	longp[300] = '\0';
	/* pax: a path record for each member; one sample starting at the
	 * first pax header. The header names are cut (as writers do). */
	want[0] = (struct want_rec){ 0, 0, NULL };
	snprintf(name, sizeof(name), "%s/key.jpg", longp);
	tar_pax(&b, 'x', name, -1);
	tar_hdr(&b, "cut-name.jpg", '0', 3, 0);
	tar_data(&b, "jpg", 3);
	snprintf(name, sizeof(name), "%s/key.cls", longp);
	tar_pax(&b, 'x', name, -1);
	tar_hdr(&b, "cut-name.cls", '0', 1, 0);
	tar_data(&b, "7", 1);
	want[0].len = b.n;
	snprintf(name, sizeof(name), "%s/key", longp);
	want[0].key = strdup(name);
	/* GNU 'L': the long name, NUL-terminated, then the member. */
	want[1] = (struct want_rec){ b.n, 0, NULL };
	snprintf(name, sizeof(name), "%s/gnu.a.jpg", longp);
	tar_hdr(&b, "././@LongLink", 'L', strlen(name) + 1, 0);
	tar_data(&b, name, strlen(name) + 1);
	tar_hdr(&b, "cut", '0', 600, 0);
	buf_zero(&b, 1024);
	want[1].len = b.n - want[1].off;
	snprintf(name, sizeof(name), "%s/gnu", longp);
	want[1].key = strdup(name);
	/* pax size overrides the header's (0 here), and base-256. */
	want[2] = (struct want_rec){ b.n, 0, "big" };
	tar_pax(&b, 'x', NULL, 600);
	tar_hdr(&b, "big.bin", '0', 0, 0);
	buf_zero(&b, 1024);
	tar_hdr(&b, "big.b256", '0', 700, TH_BASE256);
	buf_zero(&b, 1024);
	want[2].len = b.n - want[2].off;
	tar_end(&b);
	expect_ok(REC_FORMAT_TAR, b.p, b.n, want, 3, &o);
	outcome_free(&o);
	free((char *)want[0].key);
	free((char *)want[1].key);
	free(b.p);
}
END_TEST

START_TEST(test_tar_bad)
{
	struct buf b = { 0 }, c = { 0 };
	char at[80];

	tar_file(&b, "s1.jpg", 700); /* 0..1536 */
	tar_file(&b, "s1.cls", 3);   /* 1536..2560 */
	tar_end(&b);
	/* Checksum: a flipped bit in the second header, a flipped stored
	 * checksum; a signed sum (as old tars wrote) is accepted. */
	buf_put(&c, b.p, b.n);
	c.p[1536 + 3] ^= 0x01;
	BAD(REC_FORMAT_TAR, c.p, c.n,
	    "offset 1536: tar header checksum mismatch");
	c.n = 0;
	tar_hdr(&c, "x.jpg", '0', 0, TH_BADSUM);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 0: tar header checksum mismatch");
	c.n = 0;
	tar_hdr(&c, "\xc3\xa9t\xc3\xa9.jpg", '0', 0, TH_SIGNED);
	tar_end(&c);
	{
		struct outcome o;

		expect_ok(REC_FORMAT_TAR, c.p, c.n,
			  (const struct want_rec[]){
				  { 0, 512, "\xc3\xa9t\xc3\xa9" } },
			  1, &o);
		outcome_free(&o);
	}
	/* Truncated: in data, in padding, in a header. */
	BAD(REC_FORMAT_TAR, b.p, 600, "offset 0: truncated: member data",
	    "size 700");
	BAD(REC_FORMAT_TAR, b.p, 1300, "offset 0: truncated: member data");
	BAD(REC_FORMAT_TAR, b.p, 1536 + 100,
	    "offset 1536: truncated: tar header cut short (100 of 512");
	/* Data after the end of the archive (a member after the zero
	 * blocks, or after one), and a partial zero block there is fine. */
	c.n = 0;
	buf_put(&c, b.p, b.n);
	tar_file(&c, "late.jpg", 1);
	snprintf(at, sizeof(at), "offset %zu: data after end of archive", b.n);
	BAD(REC_FORMAT_TAR, c.p, c.n, at);
	c.n = 0;
	buf_put(&c, b.p, 2560 + 512);
	tar_file(&c, "late.jpg", 1);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 3072: data after end");
	c.n = 0;
	buf_put(&c, b.p, b.n);
	buf_zero(&c, 100);
	c.p[c.n - 1] = 'x';
	snprintf(at, sizeof(at), "offset %zu: data after end of archive", b.n);
	BAD(REC_FORMAT_TAR, c.p, c.n, at);
	/* Size not a number; a pax global header; an unknown type; a
	 * symlink with data; a prefix header with no member. */
	c.n = 0;
	buf_put(&c, b.p, b.n);
	memcpy(c.p + 1536 + 124, "0000000009x", 11);
	{
		/* Fix the checksum so only the size is wrong. */
		unsigned long sum = 0;
		int i;

		memset(c.p + 1536 + 148, ' ', 8);
		for (i = 0; i < 512; i++)
			sum += c.p[1536 + i];
		snprintf((char *)c.p + 1536 + 148, 8, "%06lo", sum);
	}
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 1536: tar size field is not");
	c.n = 0;
	tar_pax(&c, 'g', "global", -1);
	BAD(REC_FORMAT_TAR, c.p, c.n,
	    "offset 0: pax global header not supported");
	c.n = 0;
	tar_hdr(&c, "sparse", 'S', 0, 0);
	BAD(REC_FORMAT_TAR, c.p, c.n,
	    "offset 0: unsupported tar member type 'S'");
	c.n = 0;
	tar_hdr(&c, "l.jpg", '2', 5, 0);
	tar_data(&c, "xxxxx", 5);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 0: tar member of type '2'");
	c.n = 0;
	tar_file(&c, "a.jpg", 1);
	tar_pax(&c, 'x', "b.jpg", -1);
	BAD(REC_FORMAT_TAR, c.p, c.n,
	    "offset 1024: truncated: extended header without a member");
	tar_end(&c);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 1024: extended header without");
	/* A malformed pax record. */
	c.n = 0;
	tar_hdr(&c, "PaxHeaders/x", 'x', 12, 0);
	tar_data(&c, "99 path=a.b\n", 12);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 0: malformed pax record");
	/* An over-long extended header is refused before its data. */
	c.n = 0;
	tar_hdr(&c, "././@LongLink", 'L', REC_TAR_EXT_MAX + 1, 0);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 0: extended header too large");
	free(b.p);
	free(c.p);
}
END_TEST

/* Where readers differ, the scanner does as Python's tarfile (which
 * webdataset reads with) or refuses the archive. */
START_TEST(test_tar_reader_quirks)
{
	struct want_rec want[3];
	struct buf b = { 0 }, c = { 0 };
	struct outcome o;

	/* A '0' member whose name ends in '/' is a file to Python's tarfile
	 * (only a '\0' one is an old-style directory) and GNU tar skips its
	 * data too: a sample, data and all. */
	want[0] = (struct want_rec){ 0, 1024, "a/b.c/" };
	tar_hdr(&b, "a/b.c/", '0', 512, 0);
	buf_zero(&b, 512);
	/* A pax path's trailing slashes are dropped (Python does). */
	want[1] = (struct want_rec){ b.n, 0, "d/k" };
	tar_pax(&b, 'x', "d/k.jpg//", -1);
	tar_hdr(&b, "cut", '0', 3, 0);
	tar_data(&b, "abc", 3);
	want[1].len = b.n - want[1].off;
	/* A '\0' directory of size 0 is skipped. */
	tar_hdr(&b, "old/", '\0', 0, TH_V7);
	want[2] = (struct want_rec){ b.n, 1024, "z" };
	tar_file(&b, "z.txt", 1);
	tar_end(&b);
	expect_ok(REC_FORMAT_TAR, b.p, b.n, want, 3, &o);
	ck_assert_uint_eq(o.res.skipped, 1);
	outcome_free(&o);
	/* ... but with data readers disagree (Python skips none). */
	tar_hdr(&c, "old/", '\0', 5, TH_V7);
	tar_data(&c, "xxxxx", 5);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 0: tar member of type '0' with");
	/* Two names for one member: Python takes the first header's, GNU
	 * tar the pax path or the last: refused. */
	c.n = 0;
	tar_pax(&c, 'x', "one.jpg", -1);
	tar_pax(&c, 'x', "two.jpg", -1);
	tar_file(&c, "m.jpg", 1);
	BAD(REC_FORMAT_TAR, c.p, c.n,
	    "offset 1024: two pax headers for one member");
	c.n = 0;
	tar_hdr(&c, "././@LongLink", 'L', 8, 0);
	tar_data(&c, "one.jpg", 8);
	tar_pax(&c, 'x', "two.jpg", -1);
	tar_file(&c, "m.jpg", 1);
	BAD(REC_FORMAT_TAR, c.p, c.n,
	    "offset 0: both a pax path and a GNU long name");
	c.n = 0;
	tar_hdr(&c, "././@LongLink", 'L', 8, 0);
	tar_data(&c, "one.jpg", 8);
	tar_hdr(&c, "././@LongLink", 'L', 8, 0);
	tar_data(&c, "two.jpg", 8);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 1024: two GNU long names");
	/* GNU sparse files in pax form. */
	c.n = 0;
	{
		struct buf r = { 0 };

		pax_rec(&r, "GNU.sparse.size", "100000");
		tar_hdr(&c, "PaxHeaders/x", 'x', r.n, 0);
		tar_data(&c, r.p, r.n);
		free(r.p);
	}
	tar_file(&c, "s.bin", 1);
	BAD(REC_FORMAT_TAR, c.p, c.n, "offset 0: GNU sparse file");
	free(b.p);
	free(c.p);
}
END_TEST

static void fixture(const unsigned char *gz, size_t gz_len, size_t size,
		    const struct want_rec *want, size_t n, uint64_t skipped)
{
	struct buf b = { 0 };
	struct outcome o;

	gz_get(&b, gz, gz_len);
	ck_assert_uint_eq(b.n, size);
	expect_ok(REC_FORMAT_TAR, b.p, b.n, want, n, &o);
	ck_assert_uint_eq(o.res.skipped, skipped);
	ck_assert_uint_eq(o.res.decoded_size, size);
	outcome_free(&o);
	free(b.p);
}

START_TEST(test_tar_real_archives)
{
	fixture(py_pax_gz, sizeof(py_pax_gz), PY_PAX_SIZE, py_pax_recs,
		sizeof(py_pax_recs) / sizeof(py_pax_recs[0]), PY_PAX_SKIPPED);
	fixture(py_gnu_gz, sizeof(py_gnu_gz), PY_GNU_SIZE, py_gnu_recs,
		sizeof(py_gnu_recs) / sizeof(py_gnu_recs[0]), PY_GNU_SKIPPED);
	fixture(gnu_posix_gz, sizeof(gnu_posix_gz), GNU_POSIX_SIZE,
		gnu_posix_recs,
		sizeof(gnu_posix_recs) / sizeof(gnu_posix_recs[0]),
		GNU_POSIX_SKIPPED);
}
END_TEST

/* --- memory: no record is buffered ------------------------------------ */

static long maxrss_kib(void)
{
	struct rusage ru;

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

/* Feeds the object to s in 1 MiB pieces: head, then size bytes of fill
 * (pattern chunk repeated), then tail. */
static void feed_big(struct rec_scan *s, const void *head, size_t head_len,
		     const unsigned char *chunk, uint64_t size,
		     const void *tail, size_t tail_len)
{
	uint64_t left = size;

	ck_assert_int_eq(rec_scan_feed(s, head, head_len), 0);
	while (left > 0) {
		size_t k = left < (1 << 20) ? (size_t)left : (1 << 20);

		ck_assert_int_eq(rec_scan_feed(s, chunk, k), 0);
		left -= k;
	}
	ck_assert_int_eq(rec_scan_feed(s, tail, tail_len), 0);
}

START_TEST(test_big_records_stream)
{
	const uint64_t big = 256ULL << 20;
	unsigned char *chunk = malloc(1 << 20), h[12], foot[4];
	struct rec_scan *s;
	struct outcome o;
	struct buf b = { 0 };
	uint32_t crc = 0;
	uint64_t i;
	long before;
	int k;

	ck_assert_ptr_nonnull(chunk);
	for (i = 0; i < (1 << 20); i++)
		chunk[i] = (unsigned char)(i * 7 + (i >> 9));
	before = maxrss_kib();
	/* One 256 MiB TFRecord record. */
	for (k = 0; k < 8; k++)
		h[k] = (unsigned char)(big >> (8 * k));
	for (k = 0; k < 4; k++)
		h[8 + k] =
			(unsigned char)(ref_mask(ref_crc32c(h, 8)) >> (8 * k));
	for (i = 0; i < big; i += 1 << 20)
		crc = crc32c_update(crc, chunk, 1 << 20);
	for (k = 0; k < 4; k++)
		foot[k] = (unsigned char)(rec_tfrecord_mask(crc) >> (8 * k));
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(rec_scan_new(REC_FORMAT_TFRECORD, collect, &o, &s), 0);
	feed_big(s, h, 12, chunk, big, foot, 4);
	ck_assert_int_eq(rec_scan_finish(s, &o.res), 0);
	rec_scan_free(s);
	ck_assert_uint_eq(o.n, 1);
	ck_assert_uint_eq(o.r[0].len, big + 16);
	outcome_free(&o);
	/* One 256 MiB tar member. */
	tar_hdr(&b, "huge.bin", '0', big, 0);
	ck_assert_int_eq(rec_scan_new(REC_FORMAT_TAR, collect, &o, &s), 0);
	feed_big(s, b.p, b.n, chunk, big, "", 0);
	b.n = 0;
	tar_end(&b);
	ck_assert_int_eq(rec_scan_feed(s, b.p, b.n), 0);
	ck_assert_int_eq(rec_scan_finish(s, &o.res), 0);
	rec_scan_free(s);
	ck_assert_uint_eq(o.n, 1);
	ck_assert_uint_eq(o.r[0].len, big + 512);
	ck_assert_str_eq(o.r[0].key, "huge");
	outcome_free(&o);
	/* Nothing grew with the record: far less than one record's size. */
	ck_assert_int_lt(maxrss_kib() - before, 32 * 1024);
	free(b.p);
	free(chunk);
}
END_TEST

/* --- the callback stops the scan ------------------------------------- */

START_TEST(test_emit_stops)
{
	struct outcome o, p;

	run(REC_FORMAT_JSONL, "a\nb\nc\n", 6, SPLIT_WHOLE, 2, &o);
	ck_assert_int_eq(o.rc, -EINTR);
	ck_assert_uint_eq(o.n, 1);
	ck_assert(strstr(o.err, "offset 2: stopped by the record callback") !=
		  NULL);
	run(REC_FORMAT_JSONL, "a\nb\nc\n", 6, SPLIT_BYTES, 2, &p);
	outcome_same(&o, &p);
	outcome_free(&o);
	outcome_free(&p);
	{
		struct rec_scan *s;

		ck_assert_int_eq(
			rec_scan_new(REC_FORMAT_COUNT, collect, &o, &s),
			-EINVAL);
		rec_scan_free(NULL);
	}
}
END_TEST

/* --- split invariance over random inputs ------------------------------ */

/* A random, mostly well-formed object of format f, then sometimes
 * damaged: a flipped byte, a cut, garbage appended. */
static void random_object(enum rec_format f, struct buf *b)
{
	enum rec_format base = rec_format_base(f);
	struct buf plain = { 0 };
	size_t i, n = rng() % 6;
	char name[64];

	b->n = 0;
	for (i = 0; i < n; i++) {
		size_t len = rng() % 3 == 0 ? rng() % 3000 : rng() % 40, j;
		unsigned char *d = malloc(len + 1);

		for (j = 0; j < len; j++)
			d[j] = rng() % 5 == 0 ? '\n' : (unsigned char)rng();
		if (base == REC_FORMAT_TFRECORD) {
			tf_put(&plain, d, len);
		} else if (base == REC_FORMAT_JSONL) {
			buf_put(&plain, d, len);
		} else {
			snprintf(name, sizeof(name), "d%u/k%u.%s", rng() % 2,
				 rng() % 3, rng() % 2 ? "jpg" : "cls");
			if (rng() % 6 == 0)
				tar_hdr(&plain, "dir/", '5', 0, 0);
			if (rng() % 5 == 0)
				tar_pax(&plain, 'x', name, -1);
			tar_hdr(&plain, name, '0', len,
				rng() % 4 == 0 ? TH_BASE256 : 0);
			tar_data(&plain, d, len);
		}
		free(d);
	}
	if (base == REC_FORMAT_TAR && rng() % 2)
		tar_end(&plain);
	if (rec_format_gzip(f)) {
		size_t cut = plain.n ? rng() % plain.n : 0;

		gz_put(b, plain.p, cut);
		if (rng() % 3)
			gz_put(b, plain.p + cut, plain.n - cut);
	} else {
		buf_put(b, plain.p, plain.n);
	}
	switch (rng() % 5) {
	case 0:
		if (b->n > 0)
			b->p[rng() % b->n] ^= (unsigned char)(1u << rng() % 8);
		break;
	case 1:
		if (b->n > 0)
			b->n -= rng() % b->n;
		break;
	case 2:
		for (i = rng() % 20; i > 0; i--)
			buf_put(b, &(char){ (char)(rng() % 3 ? 0 : rng()) }, 1);
		break;
	default:
		break;
	}
	free(plain.p);
}

START_TEST(test_split_invariance)
{
	struct buf b = { 0 };
	struct outcome o;
	int f, i;

	rng_state = 0x9e3779b97f4a7c15ULL;
	for (f = 0; f < REC_FORMAT_COUNT; f++)
		for (i = 0; i < 40; i++) {
			random_object((enum rec_format)f, &b);
			scan_all((enum rec_format)f, b.p, b.n, &o);
			if (o.rc != 0)
				ck_assert_int_eq(o.rc, -EBADMSG);
			outcome_free(&o);
		}
	/* Pure noise, each format. */
	for (i = 0; i < 60; i++) {
		size_t n = rng() % 1500, j;

		b.n = 0;
		for (j = 0; j < n; j++)
			buf_put(&b, &(char){ (char)rng() }, 1);
		if (i % 3 == 0 && n > 2) {
			b.p[0] = 0x1f;
			b.p[1] = 0x8b;
			b.p[2] = 8;
		}
		scan_all((enum rec_format)(i % REC_FORMAT_COUNT), b.p, b.n, &o);
		outcome_free(&o);
	}
	free(b.p);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "crc_and_mask", test_crc_and_mask },
		{ "tfrecord_good", test_tfrecord_good },
		{ "tfrecord_bad", test_tfrecord_bad },
		{ "tfrecord_too_large", test_tfrecord_too_large },
		{ "gunzip_members", test_gunzip_members },
		{ "gzip_tfrecord", test_gzip_tfrecord },
		{ "jsonl", test_jsonl },
		{ "tar_samples", test_tar_samples },
		{ "tar_not_samples", test_tar_not_samples },
		{ "tar_long_names", test_tar_long_names },
		{ "tar_bad", test_tar_bad },
		{ "tar_reader_quirks", test_tar_reader_quirks },
		{ "tar_real_archives", test_tar_real_archives },
		{ "emit_stops", test_emit_stops },
		{ "big_records_stream", test_big_records_stream },
		{ "split_invariance", test_split_invariance },
	};
	return unit_run(unit_suite("records_frame", cases,
				   sizeof(cases) / sizeof(cases[0])));
}
