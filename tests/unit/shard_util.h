/*
 * shard_util: what the shard suites (check_shard, check_shard_epoch)
 * share: a weight table, a build that must succeed, a rank printed as
 * "8 6 5*" (pads starred) so that a mismatch reads plainly, and the
 * property tests' random source.
 */
#ifndef SHARDFS_TESTS_SHARD_UTIL_H
#define SHARDFS_TESTS_SHARD_UTIL_H

#include <check.h>
#include <inttypes.h>
#include <stdio.h>

#include "plan/shard.h"

static inline uint64_t weight_array(const void *ctx, size_t i)
{
	return ((const uint64_t *)ctx)[i];
}

static inline struct shard_plan *build_ok(const struct shard_spec *spec,
					  size_t n, const uint64_t *weights)
{
	struct shard_plan *plan = NULL;
	int rc = shard_plan_build(spec, n, weights ? weight_array : NULL,
				  weights, &plan);

	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(plan);
	return plan;
}

static inline void rank_str(const struct shard_plan *plan, uint64_t r,
			    char *buf, size_t len)
{
	const uint32_t *items;
	size_t count, npad, k, used = 0;

	shard_plan_rank(plan, r, &items, &count, &npad);
	buf[0] = '\0';
	for (k = 0; k < count && used < len; k++)
		used += (size_t)snprintf(
			buf + used, len - used, "%s%" PRIu32 "%s", k ? " " : "",
			items[k], k >= count - npad ? "*" : "");
}

/* xorshift64*: the property tests' own fixed-seed source, independent of
 * shard.c. */
struct test_rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct test_rng *g)
{
	g->s ^= g->s >> 12;
	g->s ^= g->s << 25;
	g->s ^= g->s >> 27;
	return g->s * 0x2545F4914F6CDD1DULL;
}

static inline uint64_t rng_below(struct test_rng *g, uint64_t n)
{
	return rng_next(g) % n;
}

#endif
