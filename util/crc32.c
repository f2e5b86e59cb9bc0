/*
 * crc32: the CRC-32 of zlib (reflected polynomial 0xEDB88320, inverted in
 * and out), folded with carry-less multiplication where the CPU has it.
 *
 * The folding follows Intel's "Fast CRC Computation for Generic Polynomials
 * Using PCLMULQDQ" (2009): four 128-bit lanes are folded forward 64 bytes
 * at a time, then into one lane, then 16 bytes at a time, then reduced to
 * 32 bits with a Barrett reduction. The constants are x^k mod P(x) for the
 * fold distances, bit-reflected. The tail shorter than 16 bytes, inputs
 * under 64 bytes and CPUs without PCLMULQDQ/SSE4.1 use zlib.
 */
#include "util/crc32.h"

#include <stdbool.h>
#include <zlib.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* Powers of x modulo P(x), bit-reflected, for folding 512 bits (K1, K2),
 * 128 bits (K3, K4) and 64 bits (K5) forward; P and mu for the Barrett
 * reduction. check_crc32 holds them to zlib's values. */
#define K1 0x154442bd4ULL
#define K2 0x1c6e41596ULL
#define K3 0x1751997d0ULL
#define K4 0x0ccaa009eULL
#define K5 0x163cd6124ULL
#define P_X 0x1db710641ULL /* P(x), 33 bits */
#define MU 0x1f7011641ULL  /* floor(x^64 / P(x)) */

__attribute__((target("pclmul,sse4.1"))) static uint32_t
fold(uint32_t crc, const uint8_t *p, size_t len)
{
	const __m128i k12 = _mm_set_epi64x((long long)K2, (long long)K1);
	const __m128i k34 = _mm_set_epi64x((long long)K4, (long long)K3);
	const __m128i k5 = _mm_set_epi64x(0, (long long)K5);
	const __m128i pmu = _mm_set_epi64x((long long)MU, (long long)P_X);
	const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i x1, x2, x3, x4, t;

	x1 = _mm_loadu_si128((const __m128i *)p);
	x2 = _mm_loadu_si128((const __m128i *)(p + 16));
	x3 = _mm_loadu_si128((const __m128i *)(p + 32));
	x4 = _mm_loadu_si128((const __m128i *)(p + 48));
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
	p += 64;
	len -= 64;
	while (len >= 64) {
#define FOLD4(x, off)                                                          \
	t = _mm_clmulepi64_si128(x, k12, 0x11);                                \
	x = _mm_clmulepi64_si128(x, k12, 0x00);                                \
	x = _mm_xor_si128(x, t);                                               \
	x = _mm_xor_si128(x, _mm_loadu_si128((const __m128i *)(p + (off))))
		FOLD4(x1, 0);
		FOLD4(x2, 16);
		FOLD4(x3, 32);
		FOLD4(x4, 48);
#undef FOLD4
		p += 64;
		len -= 64;
	}
#define FOLD1(x, y)                                                            \
	t = _mm_clmulepi64_si128(x, k34, 0x11);                                \
	x = _mm_clmulepi64_si128(x, k34, 0x00);                                \
	x = _mm_xor_si128(x, t);                                               \
	x = _mm_xor_si128(x, y)
	FOLD1(x1, x2);
	FOLD1(x1, x3);
	FOLD1(x1, x4);
	while (len >= 16) {
		FOLD1(x1, _mm_loadu_si128((const __m128i *)p));
		p += 16;
		len -= 16;
	}
#undef FOLD1
	/* 128 -> 64 bits, appending 32 zero bits. */
	t = _mm_clmulepi64_si128(x1, k34, 0x10);
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
	/* 64 -> 32 bits. */
	t = _mm_srli_si128(x1, 4);
	x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
	x1 = _mm_xor_si128(x1, t);
	/* Barrett reduction. */
	t = x1;
	x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), pmu, 0x10);
	x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), pmu, 0x00);
	x1 = _mm_xor_si128(x1, t);
	return (uint32_t)_mm_extract_epi32(x1, 1);
}

static bool have_clmul(void)
{
	static int have = -1; /* races are harmless: every thread agrees */
	int h = __atomic_load_n(&have, __ATOMIC_RELAXED);

	if (h < 0) {
		__builtin_cpu_init();
		h = __builtin_cpu_supports("pclmul") &&
		    __builtin_cpu_supports("sse4.1");
		__atomic_store_n(&have, h, __ATOMIC_RELAXED);
	}
	return h;
}
#endif

uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t len)
{
#if defined(__x86_64__)
	if (len >= 64 && have_clmul()) {
		size_t body = len & ~(size_t)15;
		uint32_t r = fold(~crc, p, body);

		crc = ~r;
		p += body;
		len -= body;
	}
#endif
	while (len > 0) { /* zlib takes at most UINT_MAX at a time */
		unsigned n = len > (1u << 30) ? 1u << 30 : (unsigned)len;

		crc = (uint32_t)crc32(crc, p, n);
		p += n;
		len -= n;
	}
	return crc;
}
