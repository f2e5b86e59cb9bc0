/*
 * str: see str.h.
 */
#include "util/str.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hex.h"

char *str_memdup(const void *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s != NULL) {
		if (n > 0)
			memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

char *str_skip_space(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	return (char *)s;
}

void str_rstrip(char *s)
{
	char *end = s + strlen(s);

	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
}

char *str_trim(char *s)
{
	s = str_skip_space(s);
	str_rstrip(s);
	return s;
}

void str_trim_span(const char **s, const char **e)
{
	while (*s < *e && isspace((unsigned char)**s))
		(*s)++;
	while (*e > *s && isspace((unsigned char)(*e)[-1]))
		(*e)--;
}

void str_unescape_octal(char *s)
{
	char *o = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

bool str_u64_canon(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 20 || (s[0] == '0' && len > 1))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned char)s[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

bool str_skip_spec(const char *s, uint64_t *skip, uint64_t *world)
{
	const char *of = strstr(s, "-of-");

	*world = 0;
	if (of == NULL)
		return str_u64_canon(s, strlen(s), skip);
	return str_u64_canon(s, (size_t)(of - s), skip) &&
	       str_u64_canon(of + 4, strlen(of + 4), world) && *world >= 1 &&
	       *world <= UINT32_MAX;
}

bool str_key_escapes(unsigned char c)
{
	return c < 0x20 || c == '%';
}

const char *str_escape_key(char *buf, size_t cap, const char *s, size_t len)
{
	size_t i, o = 0, total = 0;

	for (i = 0; i < len; i++)
		total += str_key_escapes((unsigned char)s[i]) ? 3 : 1;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		size_t need = str_key_escapes(c) ? 3 : 1;

		/* Cut short: leave room for "..." and the NUL. */
		if (total >= cap && o + need + 3 >= cap) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (need == 3) {
			hex_percent(c, buf + o);
			o += 3;
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o] = '\0';
	return buf;
}

char *str_escape_key_dup(const char *s, size_t len)
{
	size_t i, n = len + 1;
	char *buf;

	for (i = 0; i < len; i++)
		n += str_key_escapes((unsigned char)s[i]) ? 2 : 0;
	buf = malloc(n);
	return buf ? (char *)str_escape_key(buf, n, s, len) : NULL;
}

/* The length of the valid, printable UTF-8 character at p (at most n
 * bytes), or 0 if p starts with a byte str_printable() escapes. */
static size_t str_char_len(const unsigned char *p, size_t n)
{
	size_t k = 0, i;

	if (p[0] >= 0x20 && p[0] < 0x7f)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		k = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		k = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		k = 4;
	if (k == 0 || k > n)
		return 0;
	for (i = 1; i < k; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* C1 controls, overlongs, surrogates, past U+10FFFF. */
	if ((k == 2 && p[0] == 0xc2 && p[1] < 0xa0) ||
	    (k == 3 && p[0] == 0xe0 && p[1] < 0xa0) ||
	    (k == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
	    (k == 4 && p[0] == 0xf0 && p[1] < 0x90) ||
	    (k == 4 && p[0] == 0xf4 && p[1] >= 0x90))
		return 0;
	return k;
}

int str_path_push(char **path, size_t *len, size_t *cap, const char *name,
		  size_t root_len)
{
	size_t nlen = strlen(name), need = *len + nlen + 2;

	if (need > *cap) {
		/* Doubling: a deep walk grows the path a few times, not at
		 * every level. */
		size_t ncap = need * 2;
		char *p = realloc(*path, ncap);

		if (p == NULL)
			return -ENOMEM;
		*path = p;
		*cap = ncap;
	}
	if (*len > root_len)
		(*path)[(*len)++] = '/';
	memcpy(*path + *len, name, nlen + 1);
	*len += nlen;
	return 0;
}

size_t str_printable(char *out, size_t cap, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, o = 0;

	while (i < len) {
		size_t k = str_char_len(p + i, len - i);

		if (k == 0) {
			if (o + 3 >= cap)
				break;
			hex_percent(p[i], out + o);
			o += 3;
			i++;
			continue;
		}
		if (o + k >= cap)
			break;
		memcpy(out + o, p + i, k);
		o += k;
		i += k;
	}
	out[o] = '\0';
	return o;
}
