/*
 * overrides: the -o option lists of the command line.
 *
 * "-o shard.world_size=8,allow_other,nodev" mixes config overrides
 * (section.key=value, handed to config_load()), the options shardfs
 * honours (allow_other, nonempty, debug) and the generic options mount(8),
 * fstab and systemd pass (ro, rw, nodev, _netdev, nofail, x-*, ...), which
 * mean nothing here and are accepted and ignored: mount(8) passes "rw"
 * unless the fstab line says "ro", and the mount is read-only either way.
 * Anything else is an error naming it, or with sloppy (mount(8)'s -s) a
 * warning. A piece that looks
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
	bool nonempty; /* mount over a non-empty directory */
	bool debug;
	bool sloppy; /* set by the caller: unknown options only warn */
};

/* Adds one -o argument. Returns 0, -ENOMEM, or -EINVAL for an unknown
 * option (printed to stderr, naming it; with o->sloppy a warning is
 * printed instead and the option ignored). */
int overrides_parse(struct overrides *o, const char *arg);

/* Frees what o owns; o may then be reused after zeroing. */
void overrides_free(struct overrides *o);

#endif
