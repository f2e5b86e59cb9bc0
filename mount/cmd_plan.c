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

#include "fs/control.h"
#include "fs/fs.h"
#include "fs/recview.h"
#include "mount/commands.h"
#include "mount/config.h"
#include "mount/dataset.h"
#include "mount/overrides.h"
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

/* Prints the order of every selected rank, in rank order: one rank alone
 * exactly as .shardfs/rank-R.order, several each after "# rank R". */
static int plan_write_orders(const bool *sel, const struct fs_data *d,
			     uint64_t world)
{
	uint64_t r, count = 0;
	int rc;

	for (r = 0; r < world; r++)
		count += sel[r];
	for (r = 0; r < world; r++) {
		if (!sel[r])
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
	struct cmd_config cc = { 0 };
	struct dataset *ds = NULL;
	bool *sel = NULL;
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
		default: /* -r, -o, -h, errors */
			if (!cmd_config_option(c, &cc, usage_plan, &rc))
				goto out;
			break;
		}
	}
	rc = cmd_operands(argc, 1, usage_plan, "plan", "CONFIG");
	if (rc == 0)
		rc = cmd_load_config(argv[optind], &cc.ov, &cc.cfg);
	if (rc != 0)
		goto out;
	/* Without --rank it prints the plan, not the config's ranks'
	 * orders. */
	if (cc.n_rank_args > 0) {
		c = cmd_config_ranks("plan", &cc, &sel);
		if (c < 0) {
			rc = c == -ENOMEM ? EXIT_RUNTIME : EXIT_USAGE;
			goto out;
		}
	}
	cc.cfg->shard.spec.skip = skip;
	cc.cfg->shard.spec.skip_world = skip_world;
	rc = EXIT_RUNTIME;
	if (dataset_load(cc.cfg, false, &ds) < 0)
		goto out;
	{
		struct fs_data d = { .manifest = ds->manifest,
				     .spec = &cc.cfg->shard.spec,
				     .plan = ds->plan,
				     .rindex = ds->rindex,
				     .rplan = ds->rplan };

		if (sel != NULL) {
			c = plan_write_orders(sel, &d,
					      cc.cfg->shard.spec.world_size);
		} else {
			c = control_write_plan_of(stdout, &d);
		}
	}
	rc = c < 0 || fflush(stdout) != 0 ? EXIT_RUNTIME : EXIT_OK;
out:
	free(sel);
	dataset_free(ds);
	cmd_config_free(&cc);
	return rc;
}
