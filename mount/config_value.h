/*
 * config_value: what one key of a config is, and the parsers of one value
 * (a number, a byte size, a boolean) that both key tables share:
 * mount/config.c's and mount/config_transform.c's. Uses nothing of mount/.
 */
#ifndef SHARDFS_CONFIG_VALUE_H
#define SHARDFS_CONFIG_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One key of a key table, for shardfs.conf(5)'s drift check and reloads:
 * its section, name, default as a user writes it (NULL: none; url is
 * required, ranks selects all) and whether a reload keeps the running
 * value (restart: true) or applies the new one. Strings are static. */
struct config_key_info {
	const char *section;
	const char *name;
	const char *default_text;
	bool restart;
};

/* Decimal, or hex after "0x" when hex is set. Returns 0 and sets *out,
 * -EINVAL (not a number) or -ERANGE (over 64 bits). */
int config_parse_u64(const char *s, bool hex, uint64_t *out);

/* Parses a byte size: decimal digits with an optional K, M, G or T suffix
 * (either case; powers of 1024) and then an optional "B", or "iB" after a
 * suffix: "512", "10B", "64k", "512M", "10GiB", "1TB". No sign, space or
 * fraction. Returns 0 and sets *out, or -EINVAL (also when the result does
 * not fit in 64 bits; *out untouched). */
int config_parse_size(const char *s, uint64_t *out);

/* config_parse_size() for a key table, telling overflow (-ERANGE) from
 * syntax (-EINVAL) so that the message can say which. s is not NULL. */
int config_parse_bytes(const char *s, uint64_t *out);

/* Parses a boolean: true/false, yes/no, on/off, 1/0, any case. Returns
 * true and sets *out, or false (*out untouched). */
bool config_parse_bool(const char *s, bool *out);

/* A key table's boolean value into *field: 0, or -EINVAL with the reason
 * every key table gives in why. */
int config_bool_field(const char *value, bool *field, char *why, size_t whylen);

#endif
