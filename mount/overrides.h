/*
 * overrides: the -o option lists of the command line.
 *
 * "-o shard.world_size=8,allow_other,nodev" mixes config overrides
 * (section.key=value, handed to config_load()), the FUSE options shardfs
 * honours (allow_other, debug) and the generic options mount(8), fstab and
 * systemd pass (ro, nodev, _netdev, x-*, ...), which mean nothing here and
 * are accepted and ignored. Anything else is an error. A piece that looks
 * like a rank range right after key=value continues that value, so
 * "-o shard.ranks=0,2,4-7" means what it says.
 */
#ifndef SHARDFS_OVERRIDES_H
#define SHARDFS_OVERRIDES_H

#include <stdbool.h>
#include <stddef.h>

/* Collected -o options; owns its strings. Zero-initialise before use. */
struct overrides {
	char **v; /* "section.key=value" strings, for config_load() */
	size_t n;
	bool allow_other;
	bool debug;
};

/* Adds one -o argument. Returns 0, -ENOMEM, or -EINVAL for an unknown
 * option (printed to stderr, naming it). */
int overrides_parse(struct overrides *o, const char *arg);

/* Frees what o owns; o may then be reused after zeroing. */
void overrides_free(struct overrides *o);

#endif
