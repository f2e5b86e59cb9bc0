/*
 * main: the shardfs command line (docs/DESIGN.md §7).
 *
 *   shardfs mount CONFIG [MOUNTPOINT] [-f] [-s] [-d] [-o OPTS]
 *   shardfs CONFIG MOUNTPOINT [-o OPTS]      (mount(8) and fstab form)
 *   shardfs manifest URL [-o FILE]
 *   shardfs plan CONFIG [--rank LIST] [-o OPTS]
 *   shardfs index CONFIG --output FILE [-o OPTS]
 *   shardfs warm CONFIG [--rank LIST] [-o OPTS]
 *   shardfs cache stat|verify|clear DIR
 *   shardfs unmount [--lazy] [--stale-only] CONFIG|MOUNTPOINT
 *   shardfs status MOUNTPOINT [--json] [--interval SECONDS]
 *   shardfs help [COMMAND] | --help | --version
 *
 * Exit codes: 0 ok, 1 runtime failure, 2 usage or config error.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "fs/control.h"
#include "fs/fs.h"
#include "fs/recview.h"
#include "fs/view.h"
#include "mount/commands.h"
#include "mount/config.h"
#include "mount/dataset.h"
#include "mount/overrides.h"
#include "util/log.h"
#include "util/ranks.h"
#include "util/str.h"

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

static const char usage_manifest[] =
	"usage: shardfs manifest URL [-o FILE] [S3/GCS options]\n"
	"\n"
	"Lists every object under URL (an absolute directory path, "
	"s3://bucket/prefix/,\n"
	"gs://bucket/prefix/ or nfs://server[:port]/path) and writes the "
	"canonical\n"
	"manifest to FILE (default: standard output). Prints the object "
	"count, bytes,\n"
	"skipped keys and the sha256 digest to pin in configs.\n"
	"\n"
	"S3/GCS options (as [source] in a config):\n"
	"  --endpoint URL        S3-compatible endpoint, e.g. "
	"http://127.0.0.1:9000\n"
	"                        (default: $AWS_ENDPOINT_URL, else AWS);\n"
	"                        for gs://, the JSON API endpoint (default:\n"
	"                        $STORAGE_EMULATOR_HOST, else Google)\n"
	"  --region R            S3 region (default: $AWS_REGION, else "
	"us-east-1)\n"
	"  --addressing A        S3: auto, path or virtual (default auto)\n"
	"  --anonymous           send unsigned requests (public buckets)\n"
	"Listing bounds (as [source] list_timeout_ms and list_memory, with "
	"their\n"
	"defaults):\n"
	"  --list-timeout-ms MS  give up a listing still going after MS\n"
	"  --list-memory SIZE    give up once the listed objects hold more "
	"than SIZE\n"
	"                        (e.g. 16G)\n";

static const char usage_plan[] =
	"usage: shardfs plan CONFIG [--rank LIST] [--skip K[-of-W]]\n"
	"                    [-o section.key=value,...]\n"
	"\n"
	"Prints the shard plan CONFIG gives, exactly as .shardfs/plan of a "
	"mount:\n"
	"parameters, manifest digest, per-rank item counts, pads and bytes, "
	"imbalance\n"
	"and skipped keys. With --rank R, prints rank R's keys in epoch order "
	"instead\n"
	"(exactly .shardfs/rank-R.order). With a list of several ranks "
	"(--rank 0-3,8,\n"
	"the grammar of [shard] ranks; --rank may be repeated), prints each "
	"rank's\n"
	"order in rank order, each after a line \"# rank R\".\n"
	"\n"
	"  --skip K[-of-W]   the plan of MOUNT/epoch-E/skip-K[-of-W]/ "
	"instead:\n"
	"                    the epoch's items from position K of its sequence "
	"on,\n"
	"                    positions counted on W ranks (default "
	"world_size);\n"
	"                    the epoch with -o shard.epoch=E\n";

/* Loads CONFIG with the overrides; prints the error and returns the exit
 * code on failure, or 0. */
int cmd_load_config(const char *path, const struct overrides *o,
		    struct config **cfg)
{
	char err[1024];
	int rc = config_load(path, o->v, o->n, cfg, err, sizeof(err));

	if (rc < 0) {
		fprintf(stderr, "shardfs: %s\n", err);
		return EXIT_USAGE;
	}
	return 0;
}

int cmd_rank_arg(const char *cmd, const char *arg, uint64_t world,
		 struct ranks_range **out, size_t *n_out)
{
	char why[256];
	size_t n = 0;
	int rc = ranks_parse(arg, out, &n, why, sizeof(why));

	if (rc == 0) {
		rc = ranks_check_world(*out, n, world, why, sizeof(why));
		if (rc < 0) {
			free(*out);
			*out = NULL;
		}
	}
	if (rc < 0) {
		if (rc != -ENOMEM)
			fprintf(stderr, "shardfs: %s: --rank %s: %s\n", cmd,
				arg, why);
		return rc;
	}
	*n_out = n;
	return 0;
}

int cmd_usage_error(const char *usage, const char *fmt, const char *arg)
{
	fprintf(stderr, "shardfs: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	return EXIT_USAGE;
}

static int summary(FILE *out, const struct manifest *m)
{
	uint64_t skipped = 0;
	int i;

	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		skipped += m->skipped[i];
	fprintf(out, "objects %zu\nbytes %llu\nskipped_keys %llu\nsha256 %s\n",
		m->count, (unsigned long long)m->total_bytes,
		(unsigned long long)skipped, m->digest);
	return 0;
}

static int write_manifest(FILE *f, const void *m)
{
	return manifest_write(m, f);
}

/* --addressing: the config's names ([source] addressing), exactly as
 * spelled there. Returns 0 or -EINVAL. */
static int manifest_addressing(const char *s, enum backend_addressing *out)
{
	const char *name;
	int a;

	for (a = 0; (name = config_addressing_name(a)) != NULL; a++) {
		if (strcmp(s, name) == 0) {
			*out = (enum backend_addressing)a;
			return 0;
		}
	}
	return -EINVAL;
}

static int cmd_manifest(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "endpoint", required_argument, NULL, 'E' },
		{ "region", required_argument, NULL, 'R' },
		{ "addressing", required_argument, NULL, 'A' },
		{ "anonymous", no_argument, NULL, 'N' },
		{ "list-timeout-ms", required_argument, NULL, 'T' },
		{ "list-memory", required_argument, NULL, 'M' },
		CMD_LONGOPTS_END,
	};
	struct backend_options opts = { .retries = -1 };
	const char *output = NULL;
	struct backend *be = NULL;
	struct manifest *m = NULL;
	unsigned long ms;
	char *end;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			/* manifest reads no config: an override here would
			 * silently become the output file's name. */
			if (strchr(optarg, '=') != NULL &&
			    strchr(optarg, '/') == NULL) {
				fprintf(stderr,
					"shardfs: manifest: -o %s: manifest "
					"takes no config overrides (-o names "
					"the output file here); use "
					"--endpoint, --region, --addressing "
					"or --anonymous\n",
					optarg);
				return EXIT_USAGE;
			}
			output = optarg;
			break;
		case 'E':
			opts.endpoint = optarg;
			break;
		case 'R':
			opts.region = optarg;
			break;
		case 'A':
			if (manifest_addressing(optarg, &opts.addressing) < 0)
				return cmd_usage_error(
					usage_manifest,
					"manifest: --addressing "
					"%s: expected auto, path or "
					"virtual",
					optarg);
			break;
		case 'N':
			opts.anonymous = 1;
			break;
		case 'T':
			errno = 0;
			ms = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg ||
			    optarg[0] == '-' || ms < 1000 || ms > UINT_MAX)
				return cmd_usage_error(
					usage_manifest,
					"manifest: --list-timeout-ms %s: "
					"expected 1000 to 4294967295",
					optarg);
			opts.list_timeout_ms = (unsigned)ms;
			break;
		case 'M':
			if (config_parse_size(optarg, &opts.list_memory) < 0 ||
			    opts.list_memory == 0)
				return cmd_usage_error(
					usage_manifest,
					"manifest: --list-memory %s: "
					"expected a size such as 512M or 16G",
					optarg);
			break;
		default:
			return cmd_option_other(c, usage_manifest);
		}
	}
	if (cmd_operands(argc, 1, usage_manifest, "manifest", "URL"))
		return EXIT_USAGE;
	rc = backend_open(argv[optind], &opts, &be);
	if (rc == -EPROTONOSUPPORT || rc == -EINVAL) {
		backend_close(be);
		return EXIT_USAGE;
	}
	if (rc == 0)
		rc = dataset_list_manifest(be, &m);
	if (rc == 0) {
		if (output != NULL && strcmp(output, "-") != 0) {
			rc = cmd_write_file(output, write_manifest, m);
			if (rc == 0)
				summary(stdout, m);
		} else {
			rc = manifest_write(m, stdout);
			if (fflush(stdout) != 0)
				rc = -EIO;
			if (rc == 0)
				summary(stderr, m);
		}
	}
	manifest_free(m);
	backend_close(be);
	return rc < 0 ? EXIT_RUNTIME : EXIT_OK;
}

/* The ranks of every --rank argument, appended list after list (so not
 * sorted as a whole: plan_selected() scans them). */
struct plan_ranks {
	struct ranks_range *r;
	size_t n;
};

static int plan_add_ranks(struct plan_ranks *pr, const char *arg,
			  uint64_t world)
{
	struct ranks_range *r = NULL, *all;
	size_t n = 0;
	int rc = cmd_rank_arg("plan", arg, world, &r, &n);

	if (rc < 0)
		return rc;
	all = realloc(pr->r, (pr->n + n) * sizeof(*all));
	if (all == NULL) {
		free(r);
		return -ENOMEM;
	}
	memcpy(all + pr->n, r, n * sizeof(*r));
	pr->r = all;
	pr->n += n;
	free(r);
	return 0;
}

static bool plan_selected(const struct plan_ranks *pr, uint64_t r)
{
	size_t i;

	for (i = 0; i < pr->n; i++)
		if (pr->r[i].lo <= r && r <= pr->r[i].hi)
			return true;
	return false;
}

/* Prints the order of every selected rank, in rank order: one rank alone
 * exactly as .shardfs/rank-R.order, several each after "# rank R". */
static int plan_write_orders(const struct plan_ranks *pr,
			     const struct fs_data *d, uint64_t world)
{
	uint64_t r, count = 0;
	int rc;

	for (r = 0; r < world; r++)
		count += plan_selected(pr, r);
	for (r = 0; r < world; r++) {
		if (!plan_selected(pr, r))
			continue;
		if (count > 1 &&
		    printf("# rank %llu\n", (unsigned long long)r) < 0)
			return -EIO;
		rc = d->rplan != NULL ? recview_write_order(stdout, d, r)
				      : control_write_order(stdout, d->manifest,
							    d->plan, r);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cmd_plan(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "skip", required_argument, NULL, 's' },
		CMD_LONGOPTS_END,
	};
	struct overrides ov = { 0 };
	struct config *cfg = NULL;
	struct dataset *ds = NULL;
	struct plan_ranks pr = { 0 };
	const char **rank_args = NULL;
	size_t n_rank_args = 0, i;
	uint64_t skip = 0, skip_world = 0;
	int c, rc = EXIT_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!str_skip_spec(optarg, &skip, &skip_world) ||
			    skip_world > CONFIG_WORLD_SIZE_MAX) {
				fprintf(stderr,
					"shardfs plan: --skip %s: expected K "
					"or "
					"K-of-W (decimal, 1 <= W <= "
					"1048576)\n",
					optarg);
				goto out;
			}
			break;
		case 'r':
			if (cmd_args_push(&rank_args, &n_rank_args, optarg) <
			    0) {
				rc = EXIT_RUNTIME;
				goto out;
			}
			break;
		default: /* -o, -h, errors */
			if (!cmd_option_common(c, &ov, usage_plan, &rc))
				goto out;
			break;
		}
	}
	rc = cmd_operands(argc, 1, usage_plan, "plan", "CONFIG");
	if (rc == 0)
		rc = cmd_load_config(argv[optind], &ov, &cfg);
	if (rc != 0)
		goto out;
	for (i = 0; i < n_rank_args; i++) {
		c = plan_add_ranks(&pr, rank_args[i],
				   cfg->shard.spec.world_size);
		if (c < 0) {
			rc = c == -ENOMEM ? EXIT_RUNTIME : EXIT_USAGE;
			goto out;
		}
	}
	cfg->shard.spec.skip = skip;
	cfg->shard.spec.skip_world = skip_world;
	rc = EXIT_RUNTIME;
	if (dataset_load(cfg, false, &ds) < 0)
		goto out;
	{
		struct fs_data d = { .manifest = ds->manifest,
				     .spec = &cfg->shard.spec,
				     .plan = ds->plan,
				     .rindex = ds->rindex,
				     .rplan = ds->rplan };

		if (n_rank_args > 0) {
			c = plan_write_orders(&pr, &d,
					      cfg->shard.spec.world_size);
		} else {
			c = control_write_plan_of(stdout, &d);
		}
	}
	rc = c < 0 || fflush(stdout) != 0 ? EXIT_RUNTIME : EXIT_OK;
out:
	free(pr.r);
	free(rank_args);
	dataset_free(ds);
	config_free(cfg);
	overrides_free(&ov);
	return rc;
}

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
