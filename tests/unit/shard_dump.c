/*
 * shard_dump: prints plan/shard.c's plans for the cases on stdin, so that
 * tests/unit/shard_xcheck.py can compare them with the independent
 * reference (tests/integration/shardspec.py). Not a Check suite: the
 * driver runs it once over all its cases.
 *
 * One case a line: N W SEED EPOCH ORDER LAYOUT BALANCE RESHUFFLE SKIP
 * SKIP_WORLD WEIGHTS (names as in the config; WEIGHTS "-" or N
 * comma-separated values). For each case it prints "plan SKIPPED
 * DROPPED", then one line per rank, its items separated by spaces, a pad
 * starred; or "error ERRNO" (negative).
 */
#include "plan/shard.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t dump_weight(const void *ctx, size_t i)
{
	return ((const uint64_t *)ctx)[i];
}

static int dump_enum(const char *const *names, const char *word)
{
	int i;

	for (i = 0; names[i] != NULL; i++)
		if (strcmp(names[i], word) == 0)
			return i;
	return -1;
}

static int dump_case(char *line)
{
	char order[16], layout[16], balance[16], reshuffle[16], *weights;
	struct shard_spec spec = { 0 };
	struct shard_plan *plan = NULL;
	uint64_t *w = NULL, r;
	size_t n, k;
	int used = 0, rc;

	weights = malloc(strlen(line) + 1);
	if (!weights)
		return -1;
	if (sscanf(line,
		   "%zu %" SCNu64 " %" SCNu64 " %" SCNu64
		   " %15s %15s %15s %15s %" SCNu64 " %" SCNu64 " %s%n",
		   &n, &spec.world_size, &spec.seed, &spec.epoch, order, layout,
		   balance, reshuffle, &spec.skip, &spec.skip_world, weights,
		   &used) != 11 ||
	    dump_enum(shard_order_names, order) < 0 ||
	    dump_enum(shard_layout_names, layout) < 0 ||
	    dump_enum(shard_balance_names, balance) < 0 ||
	    dump_enum(shard_reshuffle_names, reshuffle) < 0) {
		free(weights);
		return -1;
	}
	spec.order = (enum shard_order)dump_enum(shard_order_names, order);
	spec.layout = (enum shard_layout)dump_enum(shard_layout_names, layout);
	spec.balance =
		(enum shard_balance)dump_enum(shard_balance_names, balance);
	spec.reshuffle = (enum shard_reshuffle)dump_enum(shard_reshuffle_names,
							 reshuffle);
	if (strcmp(weights, "-") != 0) {
		char *p = weights, *end;

		w = calloc(n + 1, sizeof(*w));
		if (!w) {
			free(weights);
			return -1;
		}
		for (k = 0; k < n; k++) {
			w[k] = strtoull(p, &end, 10);
			p = *end == ',' ? end + 1 : end;
		}
	}
	free(weights);

	rc = shard_plan_build(&spec, n, w ? dump_weight : NULL, w, &plan);
	if (rc) {
		printf("error %d\n", rc);
		free(w);
		return 0;
	}
	printf("plan %zu %zu\n", plan->n_skipped, plan->n_dropped);
	for (r = 0; r < spec.world_size; r++) {
		const uint32_t *items;
		size_t count, npad;

		shard_plan_rank(plan, r, &items, &count, &npad);
		for (k = 0; k < count; k++)
			printf("%s%" PRIu32 "%s", k ? " " : "", items[k],
			       k >= count - npad ? "*" : "");
		putchar('\n');
	}
	shard_plan_free(plan);
	free(w);
	return 0;
}

int main(void)
{
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;

	while (getline(&line, &cap, stdin) > 0) {
		if (dump_case(line) != 0) {
			fprintf(stderr, "shard_dump: bad case: %s", line);
			rc = 2;
			break;
		}
	}
	free(line);
	return rc;
}
