/*
 * commands: the subcommands of the CLI (docs/DESIGN.md §7) and the
 * one place that turns a config's [cache] section into an open cache, so
 * that a mount and `shardfs warm` of one config share entries.
 *
 *   shardfs mount CONFIG [MOUNTPOINT] [-f] [-o OPTS]
 *   shardfs warm CONFIG [--rank R[,R-R...]]... [--transform NAME] [-j N] [-q]
 *                [-o OPTS]
 *   shardfs digests CONFIG --transform NAME [--rank LIST]... [--run]
 *                   [--check FILE] [-o OPTS]
 *   shardfs cache stat|verify|clear DIR
 *   shardfs unmount [--lazy] [--stale-only] CONFIG|MOUNTPOINT
 *   shardfs status MOUNTPOINT [--json] [--interval SECONDS]
 *   shardfs index CONFIG --output FILE [-j N] [-q] [-o OPTS]
 *   shardfs manifest URL [-o FILE] [--endpoint URL] ...
 *   shardfs plan CONFIG [--rank LIST] [--skip K[-of-W]] [-o OPTS]
 *
 * Each cmd_* takes argv with argv[0] = the subcommand's name and returns
 * the process exit code: 0 ok, 1 runtime failure, 2 usage or config error.
 */
#ifndef SHARDFS_COMMANDS_H
#define SHARDFS_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backends/backend.h"
#include "cache/cache.h"
#include "mount/config.h"
#include "mount/overrides.h"
#include "util/exit.h"

/* Opens the read path for cfg over be (borrowed): the disk cache in
 * [cache] dir when cache.enabled, else a pass-through. If the disk cache
 * cannot be opened (no space, no permission), logs a warning and returns a
 * pass-through, so a mount never fails because of its cache. The backend
 * id is the source URL without trailing '/' plus the endpoint, if any.
 * Either way the cache fetches and prefetches within [prefetch].
 * Returns 0 and sets *out, or -ENOMEM. */
int mount_cache_open(const struct config *cfg, struct backend *be,
		     struct cache **out);

/* Loads CONFIG with the -o overrides; prints the error and returns
 * EXIT_USAGE on failure, else 0. */
int cmd_load_config(const char *path, const struct overrides *o,
		    struct config **cfg);

/* Prints "shardfs: " fmt (with arg) and usage to stderr; returns
 * EXIT_USAGE. */
int cmd_usage_error(const char *usage, const char *fmt, const char *arg);

/* The last rows of every command's long options: --help (-h, which
 * cmd_option_other() answers) and the terminator. */
/* clang-format off */
#define CMD_LONGOPTS_END \
	{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
/* clang-format on */

/* The end of an option switch: for 'h', prints usage to stdout and
 * returns EXIT_OK; for any other option (getopt has said what is wrong
 * with it), prints usage to stderr and returns EXIT_USAGE. */
int cmd_option_other(int c, const char *usage);

/* What a subcommand that reads CONFIG (warm, digests, index, plan) holds
 * from its options to its end: the -o overrides, the --rank arguments
 * (borrowed from argv) and the config, once cmd_load_config(path,
 * &cc->ov, &cc->cfg) has loaded it. Zeroed: nothing held. */
struct cmd_config {
	struct overrides ov;
	const char **rank_args;
	size_t n_rank_args;
	struct config *cfg;
};

/* The default case of a config command's getopt loop: -r (--rank) is kept
 * in cc->rank_args, -o KEY=VALUE added to cc->ov, and it returns true (go
 * on); else (a bad -o, -h, an option getopt refused, or out of memory)
 * returns false with the exit status in *rc. */
bool cmd_config_option(int c, struct cmd_config *cc, const char *usage,
		       int *rc);

/* The ranks subcommand cmd works on, one flag per rank of cc->cfg's world
 * size: those of cc's --rank arguments (util/ranks.h's grammar, as [shard]
 * ranks; each rank below the world size), or, with none, the ranks the
 * config selects (config_rank_selected()). Returns 0 and sets *sel (free()
 * it); or prints "shardfs: CMD: --rank ARG: reason" and returns -EINVAL or
 * -ERANGE; or -ENOMEM. */
int cmd_config_ranks(const char *cmd, const struct cmd_config *cc, bool **sel);

/* --transform NAME of subcommand cmd: 0 if cc->cfg (loaded from path) has
 * [transform NAME]; else prints "shardfs: CMD: --transform NAME: PATH has
 * no [transform NAME]" and returns -ENOENT. */
int cmd_config_transform(const char *cmd, const struct cmd_config *cc,
			 const char *path, const char *name);

/* Frees what cc holds (not cc itself) and zeroes it. */
void cmd_config_free(struct cmd_config *cc);

/* Checks that want operands follow the options (argv[optind..argc)).
 * Returns 0, or prints "shardfs: CMD: WHAT missing" or "shardfs: CMD: too
 * many arguments" and usage to stderr and returns EXIT_USAGE. */
int cmd_operands(int argc, int want, const char *usage, const char *cmd,
		 const char *what);

/* Writes a file that readers see whole or not at all: write(f, obj) into
 * PATH.tmp.PID, fsync, then a rename over path. Returns 0 or a negative
 * errno (logged, the temporary file removed). */
int cmd_write_file(const char *path, int (*write)(FILE *f, const void *obj),
		   const void *obj);

/* Writes b bytes for people into buf: "512 B", "12.3 MiB" (KiB to PiB,
 * powers of 1024). */
void cmd_human_bytes(char *buf, size_t cap, double b);

/* helper_form: argv is mount(8)'s "shardfs CONFIG MOUNTPOINT -o OPTS". */
int cmd_mount(int argc, char **argv, bool helper_form);
int cmd_warm(int argc, char **argv);
int cmd_digests(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_unmount(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_manifest(int argc, char **argv);
int cmd_plan(int argc, char **argv);

extern const char usage_mount[];
extern const char usage_warm[];
extern const char usage_digests[];
extern const char usage_cache[];
extern const char usage_unmount[];
extern const char usage_status[];
extern const char usage_index[];
extern const char usage_manifest[];
extern const char usage_plan[];

#endif
