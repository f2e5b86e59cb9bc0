/*
 * hex: see hex.h.
 */
#include "util/hex.h"

#include <errno.h>
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

int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int hex_pair(const char *s)
{
	int hi = hex_digit((unsigned char)s[0]), lo;

	if (hi < 0)
		return -1;
	lo = hex_digit((unsigned char)s[1]);
	return lo < 0 ? -1 : hi << 4 | lo;
}

int hex_decode(const char *s, size_t n, void *out)
{
	uint8_t *b = out;
	size_t i;
	int v;

	for (i = 0; i < n; i++) {
		v = hex_pair(s + 2 * i);
		if (v < 0)
			return -EINVAL;
		b[i] = (uint8_t)v;
	}
	return 0;
}

void hex_percent(unsigned char c, char *out)
{
	static const char digits[] = "0123456789ABCDEF";

	out[0] = '%';
	out[1] = digits[c >> 4];
	out[2] = digits[c & 15];
}
