/*
 * str: see str.h.
 */
#include "util/str.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

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
