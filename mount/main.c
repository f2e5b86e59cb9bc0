/*
 * main: the shardfs command line (docs/DESIGN.md §7).
 *
 *   shardfs mount CONFIG [MOUNTPOINT] [-f] [-s] [-d] [-o OPTS]
 *   shardfs CONFIG MOUNTPOINT [-o OPTS]      (mount(8) and fstab form)
 *   shardfs manifest URL [-o FILE]
 *   shardfs plan CONFIG [--rank LIST] [-o OPTS]
 *   shardfs index CONFIG --output FILE [-o OPTS]
 *   shardfs warm CONFIG [--rank LIST] [-o OPTS]
 *   shardfs digests CONFIG --transform NAME [--check FILE]
 *   shardfs cache stat|verify|clear DIR
 *   shardfs unmount [--lazy] [--stale-only] CONFIG|MOUNTPOINT
 *   shardfs status MOUNTPOINT [--json] [--interval SECONDS]
 *   shardfs help [COMMAND] | --help | --version
 *
 * Exit codes: 0 ok, 1 runtime failure, 2 usage or config error.
 *
 * This file holds main() and the dispatch to the subcommands only; each
 * subcommand lives in its cmd_*.c, the helpers they share in cmdline.c.
 */
#include <stdio.h>
#include <string.h>

#include "mount/commands.h"
#include "plan/shard.h"
#include "util/log.h"

static const char usage_main[] =
	"usage: shardfs COMMAND [ARGS]\n"
	"\n"
	"Mounts per-rank read-only views of a dataset for distributed "
	"training.\n"
	"\n"
	"commands:\n"
	"  mount CONFIG [MOUNTPOINT]  mount the rank views described by "
	"CONFIG\n"
	"  manifest URL [-o FILE]     list a source and write its manifest\n"
	"  plan CONFIG [--rank LIST]  print the shard plan without mounting\n"
	"  index CONFIG --output FILE  build the record index a record view "
	"pins\n"
	"  warm CONFIG [--rank LIST]  fill the cache with the ranks' files\n"
	"  digests CONFIG --transform NAME  list a transform's stored outputs' "
	"SHA-256\n"
	"  cache stat|verify|clear DIR  inspect, check or empty a cache\n"
	"  unmount CONFIG|MOUNTPOINT  unmount; --stale-only: only a dead "
	"mount\n"
	"  status MOUNTPOINT [--json]  show a mount's plan, ranks, rates and "
	"errors\n"
	"  help [COMMAND]             show help for a command\n"
	"\n"
	"  shardfs CONFIG MOUNTPOINT [-o OPTS] is the form mount(8) and "
	"/etc/fstab use.\n"
	"\n"
	"options: -h, --help    this help\n"
	"         -V, --version print the version\n"
	"\n"
	"exit codes: 0 ok, 1 runtime failure, 2 usage or config error\n";

static int cmd_mount_plain(int argc, char **argv)
{
	return cmd_mount(argc, argv, false);
}

/* The subcommands, for dispatch and for help. */
static const struct command {
	const char *name;
	const char *usage;
	int (*run)(int argc, char **argv);
} commands[] = {
	{ "mount", usage_mount, cmd_mount_plain },
	{ "manifest", usage_manifest, cmd_manifest },
	{ "plan", usage_plan, cmd_plan },
	{ "index", usage_index, cmd_index },
	{ "warm", usage_warm, cmd_warm },
	{ "digests", usage_digests, cmd_digests },
	{ "cache", usage_cache, cmd_cache },
	{ "unmount", usage_unmount, cmd_unmount },
	{ "status", usage_status, cmd_status },
};

static const struct command *command_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(name, commands[i].name) == 0)
			return &commands[i];
	return NULL;
}

static int cmd_help(int argc, char **argv)
{
	const struct command *c;

	if (argc <= 1) {
		fputs(usage_main, stdout);
		return EXIT_OK;
	}
	c = command_find(argv[1]);
	if (c == NULL)
		return cmd_usage_error(usage_main, "help: unknown command '%s'",
				       argv[1]);
	fputs(c->usage, stdout);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	const struct command *c;
	const char *cmd;

	log_init("shardfs");
	if (argc < 2) {
		fputs(usage_main, stderr);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0)
		return cmd_help(1, argv);
	if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
		printf("shardfs %s (%s)\n", SHARDFS_VERSION,
		       SHARD_SPEC_VERSION);
		return EXIT_OK;
	}
	if (strcmp(cmd, "help") == 0)
		return cmd_help(argc - 1, argv + 1);
	c = command_find(cmd);
	if (c != NULL)
		return c->run(argc - 1, argv + 1);
	/* mount(8) runs "shardfs CONFIG MOUNTPOINT -o OPTS". */
	if (cmd[0] != '-' && strchr(cmd, '/') != NULL)
		return cmd_mount(argc, argv, true);
	return cmd_usage_error(usage_main, "unknown command '%s'", cmd);
}
