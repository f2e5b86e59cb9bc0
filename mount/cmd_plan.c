/*
 * cmd_plan: `shardfs plan CONFIG [--rank LIST] [--skip K[-of-W]]`
 * (docs/DESIGN.md §7): prints the shard plan a config gives, or ranks'
 * orders, exactly as a mount's .shardfs/plan and rank-R.order, without
 * mounting.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/control.h"
#include "fs/fs.h"
#include "fs/recview.h"
#include "mount/commands.h"
#include "mount/config.h"
#include "mount/dataset.h"
#include "mount/overrides.h"
#include "util/ranks.h"
#include "util/str.h"

const char usage_plan[] =
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

int cmd_plan(int argc, char **argv)
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
