/*
 * config_value: what one key of a config is (struct config_key_info) and
 * the parsers of one value that both key tables use, mount/config.c's
 * keys[] and mount/config_transform.c's tkeys[]. Below both, so that
 * neither table calls into the other's file for a number or a boolean.
 */
#include "mount/config_value.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* No sign, space or other base: strtoull alone would take "-1", " 1" and
 * "010" (as octal with base 0). */
int config_parse_u64(const char *s, bool hex, uint64_t *out)
{
	int base = 10;
	unsigned long long v;
	char *end;

	if (hex && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		if (!isxdigit((unsigned char)s[2]))
			return -EINVAL;
		base = 16;
	} else if (!isdigit((unsigned char)s[0])) {
		return -EINVAL;
	}
	errno = 0;
	v = strtoull(s, &end, base);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	*out = v;
	return 0;
}

int config_parse_bytes(const char *s, uint64_t *out)
{
	unsigned shift = 0;
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		break;
	case 'M':
	case 'm':
		shift = 20;
		break;
	case 'G':
	case 'g':
		shift = 30;
		break;
	case 'T':
	case 't':
		shift = 40;
		break;
	}
	if (shift)
		end++;
	if (!strcmp(end, "B") || (shift && !strcmp(end, "iB")))
		end += strlen(end);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v > UINT64_MAX >> shift)
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	uint64_t v;

	if (!s || !out || config_parse_bytes(s, &v))
		return -EINVAL;
	*out = v;
	return 0;
}

bool config_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return true;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return true;
		}
	}
	return false;
}

int config_bool_field(const char *value, bool *field, char *why, size_t whylen)
{
	if (!config_parse_bool(value, field)) {
		snprintf(why, whylen,
			 "not a boolean (true/false, yes/no, on/off, 1/0)");
		return -EINVAL;
	}
	return 0;
}
