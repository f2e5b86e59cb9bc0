/*
 * hex: see hex.h.
 */
#include "util/hex.h"

#include <stdint.h>

void hex_encode(const void *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}
