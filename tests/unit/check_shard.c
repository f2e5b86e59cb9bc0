/*
 * check_shard: the sharding spec "shardfs-shard v1" (DESIGN.md §5), tested
 * through plan/shard.h.
 *
 * The spec's test vectors pin the arithmetic; the property tests then run
 * thousands of random plans against every invariant and against a naive
 * re-implementation written from the spec text (one rank per position, no
 * shortcuts), so a misreading in shard.c would have to be made twice to
 * pass. Random cases come from a fixed-seed generator local to the test,
 * and every failure prints the case's parameters, so it can be replayed.
 */
#include "plan/shard.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/unit/shard_util.h"
#include "tests/unit/unit.h"

#define PROP_CASES 3000
#define PROP_MAX_N 300
#define PROP_MAX_W 20

typedef unsigned __int128 u128;

static struct shard_spec spec_make(uint64_t world_size, uint64_t seed,
				   uint64_t epoch, enum shard_order order,
				   enum shard_layout layout,
				   enum shard_balance balance)
{
	struct shard_spec spec = {
		.world_size = world_size,
		.seed = seed,
		.epoch = epoch,
		.order = order,
		.layout = layout,
		.balance = balance,
	};
	return spec;
}

static void expect_ranks(const struct shard_plan *plan, const char *const *want,
			 size_t n_ranks)
{
	char got[256];
	size_t r;

	ck_assert_uint_eq(plan->world_size, n_ranks);
	for (r = 0; r < n_ranks; r++) {
		rank_str(plan, r, got, sizeof(got));
		ck_assert_msg(strcmp(got, want[r]) == 0,
			      "rank %zu: got [%s], want [%s]", r, got, want[r]);
	}
}

/* ---- Test vectors (DESIGN.md §5) ---- */

START_TEST(test_splitmix64_vectors)
{
	static const uint64_t from0[] = { 0xe220a8397b1dcdafULL,
					  0x6e789e6aa1b965f4ULL,
					  0x06c45d188009454fULL };
	static const uint64_t from1234567[] = { 0x599ed017fb08fc85ULL,
						0x2c73f08458540fa5ULL,
						0x883ebce5a3f27c77ULL };
	uint64_t state = 0;
	size_t i;

	for (i = 0; i < ARRAY_LEN(from0); i++)
		ck_assert_uint_eq(shard_splitmix64_next(&state), from0[i]);
	state = 1234567;
	for (i = 0; i < ARRAY_LEN(from1234567); i++)
		ck_assert_uint_eq(shard_splitmix64_next(&state),
				  from1234567[i]);
	/* next() is mix64 of the advanced state. */
	ck_assert_uint_eq(shard_mix64(0x9E3779B97F4A7C15ULL), from0[0]);
}
END_TEST

START_TEST(test_derive_vector)
{
	static const uint64_t v[] = { 1, 42, 0 };

	ck_assert_uint_eq(shard_derive(v, 3), 0x5c85f74146959618ULL);
	ck_assert_uint_eq(shard_derive(v, 0), 0x5348415244563031ULL);
}
END_TEST

START_TEST(test_shuffle_vectors)
{
	static const char *const epoch0[] = { "8 2 4 3 6 0 7 9 5 1" };
	static const char *const epoch1[] = { "2 8 5 1 7 0 3 6 9 4" };
	static const char *const ident[] = { "0 1 2 3 4 5 6 7 8 9" };
	struct shard_spec spec;
	struct shard_plan *plan;

	/* One rank holds S itself, whatever the layout. */
	spec = spec_make(1, 42, 0, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			 SHARD_BALANCE_NONE);
	plan = build_ok(&spec, 10, NULL);
	expect_ranks(plan, epoch0, 1);
	shard_plan_free(plan);

	spec.layout = SHARD_LAYOUT_CONTIGUOUS;
	spec.epoch = 1;
	plan = build_ok(&spec, 10, NULL);
	expect_ranks(plan, epoch1, 1);
	shard_plan_free(plan);

	spec.order = SHARD_ORDER_NONE;
	plan = build_ok(&spec, 10, NULL);
	expect_ranks(plan, ident, 1);
	shard_plan_free(plan);
}
END_TEST

START_TEST(test_strided_pad_vector)
{
	static const char *const want[] = { "8 6 5", "2 0 1", "4 7 8*",
					    "3 9 2*" };
	struct shard_spec spec =
		spec_make(4, 42, 0, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			  SHARD_BALANCE_PAD);
	struct shard_plan *plan = build_ok(&spec, 10, NULL);

	expect_ranks(plan, want, 4);
	ck_assert_uint_eq(plan->n_items, 10);
	ck_assert_uint_eq(plan->n_dropped, 0);
	shard_plan_free(plan);
}
END_TEST

START_TEST(test_contiguous_none_vector)
{
	static const char *const want[] = { "8 2 4", "3 6 0", "7 9", "5 1" };
	struct shard_spec spec =
		spec_make(4, 42, 0, SHARD_ORDER_SHUFFLE,
			  SHARD_LAYOUT_CONTIGUOUS, SHARD_BALANCE_NONE);
	struct shard_plan *plan = build_ok(&spec, 10, NULL);

	expect_ranks(plan, want, 4);
	shard_plan_free(plan);
}
END_TEST

START_TEST(test_bytes_vector)
{
	static const uint64_t weights[] = { 5, 1, 1, 1, 1, 5 };
	static const char *const want[] = { "0", "1 2 3 4", "5" };
	struct shard_spec spec =
		spec_make(3, 42, 0, SHARD_ORDER_NONE, SHARD_LAYOUT_BYTES,
			  SHARD_BALANCE_NONE);
	struct shard_plan *plan = build_ok(&spec, ARRAY_LEN(weights), weights);

	expect_ranks(plan, want, 3);
	shard_plan_free(plan);
}
END_TEST

/* ---- Spec validation ---- */

static void expect_invalid(const struct shard_spec *spec, const char *needle)
{
	struct shard_plan *sentinel = (struct shard_plan *)&sentinel;
	struct shard_plan *plan = sentinel;
	static const uint64_t weights[] = { 1, 2, 3 };
	const char *msg = shard_spec_check(spec);

	ck_assert_ptr_nonnull(msg);
	ck_assert_msg(strstr(msg, needle), "message \"%s\" lacks \"%s\"", msg,
		      needle);
	ck_assert_int_eq(
		shard_plan_build(spec, 3, weight_array, weights, &plan),
		-EINVAL);
	ck_assert_ptr_eq(plan, sentinel);
}

START_TEST(test_spec_check)
{
	struct shard_spec spec =
		spec_make(8, 1, 2, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			  SHARD_BALANCE_NONE);
	struct shard_spec bad;

	ck_assert_ptr_null(shard_spec_check(&spec));
	spec.layout = SHARD_LAYOUT_BYTES;
	ck_assert_ptr_null(shard_spec_check(&spec));
	spec.layout = SHARD_LAYOUT_CONTIGUOUS;
	spec.balance = SHARD_BALANCE_PAD;
	ck_assert_ptr_null(shard_spec_check(&spec));

	bad = spec;
	bad.world_size = 0;
	expect_invalid(&bad, "world_size");
	bad = spec;
	bad.order = (enum shard_order)2;
	expect_invalid(&bad, "order");
	bad = spec;
	bad.order = (enum shard_order) - 1;
	expect_invalid(&bad, "order");
	bad = spec;
	bad.layout = (enum shard_layout)3;
	expect_invalid(&bad, "layout");
	bad = spec;
	bad.balance = (enum shard_balance)3;
	expect_invalid(&bad, "balance");
	bad = spec;
	bad.layout = SHARD_LAYOUT_BYTES;
	bad.balance = SHARD_BALANCE_DROP;
	expect_invalid(&bad, "bytes");
	bad.balance = SHARD_BALANCE_PAD;
	expect_invalid(&bad, "bytes");

	ck_assert_ptr_nonnull(shard_spec_check(NULL));
}
END_TEST

START_TEST(test_build_bad_arguments)
{
	struct shard_spec spec =
		spec_make(2, 0, 0, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_BYTES,
			  SHARD_BALANCE_NONE);
	struct shard_plan *sentinel = (struct shard_plan *)&sentinel;
	struct shard_plan *plan = sentinel;

	/* bytes needs weights, even for an empty manifest. */
	ck_assert_int_eq(shard_plan_build(&spec, 4, NULL, NULL, &plan),
			 -EINVAL);
	ck_assert_int_eq(shard_plan_build(&spec, 0, NULL, NULL, &plan),
			 -EINVAL);
	ck_assert_int_eq(shard_plan_build(NULL, 4, NULL, NULL, &plan), -EINVAL);
	ck_assert_ptr_eq(plan, sentinel);
	spec.layout = SHARD_LAYOUT_STRIDED;
	ck_assert_int_eq(shard_plan_build(&spec, 4, NULL, NULL, NULL), -EINVAL);
	shard_plan_free(NULL);
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(shard_order_name(SHARD_ORDER_SHUFFLE), "shuffle");
	ck_assert_str_eq(shard_order_name(SHARD_ORDER_NONE), "none");
	ck_assert_str_eq(shard_layout_name(SHARD_LAYOUT_STRIDED), "strided");
	ck_assert_str_eq(shard_layout_name(SHARD_LAYOUT_CONTIGUOUS),
			 "contiguous");
	ck_assert_str_eq(shard_layout_name(SHARD_LAYOUT_BYTES), "bytes");
	ck_assert_str_eq(shard_balance_name(SHARD_BALANCE_NONE), "none");
	ck_assert_str_eq(shard_balance_name(SHARD_BALANCE_DROP), "drop");
	ck_assert_str_eq(shard_balance_name(SHARD_BALANCE_PAD), "pad");
	ck_assert_ptr_null(shard_order_name((enum shard_order)7));
	ck_assert_ptr_null(shard_layout_name((enum shard_layout)7));
	ck_assert_ptr_null(shard_balance_name((enum shard_balance)7));
	ck_assert_str_eq(SHARD_SPEC_VERSION, "shardfs-shard v1");
}
END_TEST

/* ---- Overflow: rejected before anything is allocated ---- */

START_TEST(test_overflow)
{
	struct shard_spec spec =
		spec_make(2, 0, 0, SHARD_ORDER_NONE, SHARD_LAYOUT_STRIDED,
			  SHARD_BALANCE_NONE);
	struct shard_plan *sentinel = (struct shard_plan *)&sentinel;
	struct shard_plan *plan = sentinel;

	ck_assert_int_eq(shard_plan_build(&spec, (size_t)UINT32_MAX + 1, NULL,
					  NULL, &plan),
			 -EOVERFLOW);
	/* Pads would push R' = 2^32 past uint32. */
	spec.balance = SHARD_BALANCE_PAD;
	ck_assert_int_eq(shard_plan_build(&spec, UINT32_MAX, NULL, NULL, &plan),
			 -EOVERFLOW);
	spec.balance = SHARD_BALANCE_NONE;
	spec.world_size = (uint64_t)UINT32_MAX + 1;
	ck_assert_int_eq(shard_plan_build(&spec, 10, NULL, NULL, &plan),
			 -EOVERFLOW);
	spec.world_size = UINT64_MAX;
	ck_assert_int_eq(shard_plan_build(&spec, 10, NULL, NULL, &plan),
			 -EOVERFLOW);
	ck_assert_ptr_eq(plan, sentinel);
}
END_TEST

/* ---- Edge cases ---- */

START_TEST(test_empty_manifest)
{
	static const uint64_t no_weights[1] = { 0 };
	unsigned layout, balance;
	uint64_t r;

	for (layout = 0; layout <= SHARD_LAYOUT_BYTES; layout++) {
		for (balance = 0; balance <= SHARD_BALANCE_PAD; balance++) {
			struct shard_spec spec =
				spec_make(5, 7, 0, SHARD_ORDER_SHUFFLE,
					  (enum shard_layout)layout,
					  (enum shard_balance)balance);
			struct shard_plan *plan;

			if (shard_spec_check(&spec))
				continue;
			plan = build_ok(&spec, 0, no_weights);
			ck_assert_uint_eq(plan->n_items, 0);
			ck_assert_uint_eq(plan->n_dropped, 0);
			for (r = 0; r < 5; r++) {
				const uint32_t *items;
				size_t count, npad;

				shard_plan_rank(plan, r, &items, &count, &npad);
				ck_assert_uint_eq(count, 0);
				ck_assert_uint_eq(npad, 0);
			}
			shard_plan_free(plan);
		}
	}
}
END_TEST

START_TEST(test_single_rank)
{
	static const char *const want[] = { "8 2 4 3 6 0 7 9 5 1" };
	unsigned layout, balance;

	/* With W = 1 nothing is dropped or padded, in any layout. */
	for (layout = 0; layout < SHARD_LAYOUT_BYTES; layout++) {
		for (balance = 0; balance <= SHARD_BALANCE_PAD; balance++) {
			struct shard_spec spec =
				spec_make(1, 42, 0, SHARD_ORDER_SHUFFLE,
					  (enum shard_layout)layout,
					  (enum shard_balance)balance);
			struct shard_plan *plan = build_ok(&spec, 10, NULL);

			expect_ranks(plan, want, 1);
			ck_assert_uint_eq(plan->n_dropped, 0);
			shard_plan_free(plan);
		}
	}
}
END_TEST

START_TEST(test_more_ranks_than_items)
{
	/* S = [2, 0, 1] for N=3, seed 6 (tests/integration/shardspec.py). */
	static const char *const none[] = { "2", "0", "1", "", "", "" };
	static const char *const drop[] = { "", "", "", "", "", "" };
	static const char *const pad[] = { "2", "0", "1", "2*", "0*", "1*" };
	struct shard_spec spec =
		spec_make(6, 6, 0, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			  SHARD_BALANCE_NONE);
	struct shard_plan *plan;

	plan = build_ok(&spec, 3, NULL);
	expect_ranks(plan, none, 6);
	shard_plan_free(plan);

	spec.balance = SHARD_BALANCE_DROP;
	plan = build_ok(&spec, 3, NULL);
	expect_ranks(plan, drop, 6);
	ck_assert_uint_eq(plan->n_dropped, 3);
	shard_plan_free(plan);

	spec.balance = SHARD_BALANCE_PAD;
	plan = build_ok(&spec, 3, NULL);
	expect_ranks(plan, pad, 6);
	shard_plan_free(plan);

	spec.layout = SHARD_LAYOUT_CONTIGUOUS;
	plan = build_ok(&spec, 3, NULL);
	expect_ranks(plan, pad, 6);
	shard_plan_free(plan);

	spec.balance = SHARD_BALANCE_NONE;
	plan = build_ok(&spec, 3, NULL);
	expect_ranks(plan, none, 6);
	shard_plan_free(plan);
}
END_TEST

START_TEST(test_rank_out_of_range)
{
	struct shard_spec spec =
		spec_make(3, 0, 0, SHARD_ORDER_NONE, SHARD_LAYOUT_STRIDED,
			  SHARD_BALANCE_NONE);
	struct shard_plan *plan = build_ok(&spec, 10, NULL);
	const uint32_t *items = (const uint32_t *)&spec;
	size_t count = 99, npad = 99;

	shard_plan_rank(plan, 3, &items, &count, &npad);
	ck_assert_ptr_null(items);
	ck_assert_uint_eq(count, 0);
	ck_assert_uint_eq(npad, 0);
	shard_plan_rank(plan, UINT64_MAX, &items, &count, &npad);
	ck_assert_uint_eq(count, 0);
	shard_plan_free(plan);
}
END_TEST

START_TEST(test_bytes_zero_and_huge_weights)
{
	/* T = 0: the spec sends everything to rank 0. */
	static const uint64_t zeros[] = { 0, 0, 0, 0 };
	static const char *const all_first[] = { "0 1 2 3", "", "" };
	/*
	 * T = 2^66 - 4 does not fit in uint64: exact sums put the midpoint
	 * of each item in its quarter (1/8, 3/8, 5/8, 7/8 of T) and split
	 * 2/2, where wrapped sums would give a meaningless split.
	 */
	static const uint64_t huge[] = { UINT64_MAX, UINT64_MAX, UINT64_MAX,
					 UINT64_MAX };
	static const char *const halves[] = { "0 1", "2 3" };
	/* A zero-weight tail sits at c = T, and is clamped to rank W-1. */
	static const uint64_t tail[] = { 4, 4, 0 };
	static const char *const tail_want[] = { "0", "1 2" };
	struct shard_spec spec =
		spec_make(3, 0, 0, SHARD_ORDER_NONE, SHARD_LAYOUT_BYTES,
			  SHARD_BALANCE_NONE);
	struct shard_plan *plan;

	plan = build_ok(&spec, ARRAY_LEN(zeros), zeros);
	expect_ranks(plan, all_first, 3);
	shard_plan_free(plan);

	spec.world_size = 2;
	plan = build_ok(&spec, ARRAY_LEN(huge), huge);
	expect_ranks(plan, halves, 2);
	shard_plan_free(plan);

	plan = build_ok(&spec, ARRAY_LEN(tail), tail);
	expect_ranks(plan, tail_want, 2);
	shard_plan_free(plan);
}
END_TEST

START_TEST(test_bounded)
{
	static const uint64_t bounds[] = { 1,	      2,       3,
					   10,	      1000003, (1ULL << 63) + 1,
					   UINT64_MAX };
	static const struct {
		uint64_t n, xor_of_draws, final_state;
	} rejecting[] = {
		{ (1ULL << 63) + 1, 0x14b6889f1d60e54dULL,
		  0xc6b3d38b71a84cf1ULL },
		{ 3ULL << 62, 0x5995fc9cebc12572ULL, 0x24ee232dbafdac08ULL },
	};
	uint64_t state = 99;
	size_t i, k;

	for (i = 0; i < ARRAY_LEN(bounds); i++)
		for (k = 0; k < 2000; k++)
			ck_assert_uint_lt(shard_bounded(&state, bounds[i]),
					  bounds[i]);
	/*
	 * Near 2^63 about half the draws are rejected, which small bounds
	 * never exercise: the xor of 1000 results and the final state come
	 * from tests/integration/shardspec.py.
	 */
	for (i = 0; i < ARRAY_LEN(rejecting); i++) {
		uint64_t acc = 0;

		state = 99;
		for (k = 0; k < 1000; k++)
			acc ^= shard_bounded(&state, rejecting[i].n);
		ck_assert_uint_eq(acc, rejecting[i].xor_of_draws);
		ck_assert_uint_eq(state, rejecting[i].final_state);
	}
	/* n = 1 never rejects: one draw, result 0. */
	state = 0;
	ck_assert_uint_eq(shard_bounded(&state, 1), 0);
	ck_assert_uint_eq(state, 0x9E3779B97F4A7C15ULL);
}
END_TEST

/* ---- Property tests ---- */

/* The spec's primitives, transcribed line by line from DESIGN.md §5. */
static uint64_t ref_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t ref_next(uint64_t *x)
{
	*x = *x + 0x9E3779B97F4A7C15ULL;
	return ref_mix64(*x);
}

static uint64_t ref_bounded(uint64_t *g, uint64_t n)
{
	uint64_t x = ref_next(g);
	u128 m = (u128)x * n;
	uint64_t l = (uint64_t)m;

	if (l < n) {
		uint64_t t = (0 - n) % n;

		while (l < t) {
			x = ref_next(g);
			m = (u128)x * n;
			l = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

static void ref_order(uint32_t *s, size_t n, const struct shard_spec *spec)
{
	uint64_t h = 0x5348415244563031ULL;
	uint64_t v[3] = { 1, spec->seed, spec->epoch };
	size_t i, k;

	for (k = 0; k < n; k++)
		s[k] = (uint32_t)k;
	if (spec->order == SHARD_ORDER_NONE)
		return;
	for (k = 0; k < 3; k++)
		h = ref_mix64((h ^ v[k]) + 0x9E3779B97F4A7C15ULL);
	for (i = n - 1; n > 1 && i >= 1; i--) {
		size_t j = (size_t)ref_bounded(&h, i + 1);
		uint32_t t = s[i];

		s[i] = s[j];
		s[j] = t;
	}
}

struct prop_case {
	char desc[320];
	struct shard_spec spec;
	size_t n;
	uint64_t *weights; /* NULL for layouts that ignore weights */
};

#define PROP(c, cond)                                                          \
	do {                                                                   \
		if (!(cond))                                                   \
			ck_abort_msg("%s: failed: %s (line %d)", (c)->desc,    \
				     #cond, __LINE__);                         \
	} while (0)

static void prop_case_make(struct prop_case *c, struct test_rng *g,
			   unsigned index)
{
	struct shard_spec *spec = &c->spec;
	uint64_t max_weight = 0;
	size_t k;

	/* v1 only: reshuffle, skip and skip_world zero. */
	memset(spec, 0, sizeof(*spec));
	/* Small N and W > N are where the off-by-ones live. */
	c->n = rng_below(g, 8) == 0 ? rng_below(g, 6)
				    : rng_below(g, PROP_MAX_N + 1);
	spec->world_size = 1 + rng_below(g, PROP_MAX_W);
	if (rng_below(g, 10) == 0)
		spec->world_size = c->n + 1 + rng_below(g, 5);
	spec->seed = rng_below(g, 4) == 0 ? rng_below(g, 100) : rng_next(g);
	spec->epoch = rng_below(g, 4) == 0 ? rng_next(g) : rng_below(g, 10);
	spec->order = (enum shard_order)rng_below(g, 2);
	spec->layout = (enum shard_layout)rng_below(g, 3);
	spec->balance = spec->layout == SHARD_LAYOUT_BYTES
				? SHARD_BALANCE_NONE
				: (enum shard_balance)rng_below(g, 3);

	c->weights = NULL;
	if (spec->layout == SHARD_LAYOUT_BYTES || rng_below(g, 2)) {
		/* Some all-zero manifests, else zeros, a few huge, the rest
		 * small, so the total sometimes passes 2^64. */
		int all_zero = rng_below(g, 20) == 0;

		c->weights = calloc(c->n + 1, sizeof(*c->weights));
		ck_assert_ptr_nonnull(c->weights);
		for (k = 0; k < c->n && !all_zero; k++) {
			uint64_t pick = rng_below(g, 100);

			if (pick < 20)
				c->weights[k] = 0;
			else if (pick < 23)
				c->weights[k] = UINT64_MAX -
						rng_below(g, 3) * rng_next(g);
			else
				c->weights[k] = 1 + rng_below(g, 1000);
			if (c->weights[k] > max_weight)
				max_weight = c->weights[k];
		}
	}
	snprintf(
		c->desc, sizeof(c->desc),
		"case %u: N=%zu W=%" PRIu64 " seed=%" PRIu64 " epoch=%" PRIu64
		" order=%s layout=%s balance=%s weights=%s max_weight=%" PRIu64,
		index, c->n, spec->world_size, spec->seed, spec->epoch,
		shard_order_name(spec->order), shard_layout_name(spec->layout),
		shard_balance_name(spec->balance),
		c->weights ? "given" : "NULL", max_weight);
}

/*
 * The plan as the spec text describes it: S' as (item, pad) positions and
 * the rank of each position, computed one position at a time.
 */
struct ref_plan {
	size_t len; /* R' */
	uint32_t *item;
	unsigned char *pad;
	uint64_t *rank;
};

static void ref_plan_make(struct ref_plan *ref, const struct prop_case *c,
			  const uint32_t *s)
{
	uint64_t w = c->spec.world_size;
	size_t n = c->n, p;

	ref->len = n;
	if (c->spec.balance == SHARD_BALANCE_DROP)
		ref->len = n - n % w;
	else if (c->spec.balance == SHARD_BALANCE_PAD && n % w)
		ref->len = n + (w - n % w);
	ref->item = calloc(ref->len + 1, sizeof(*ref->item));
	ref->pad = calloc(ref->len + 1, sizeof(*ref->pad));
	ref->rank = calloc(ref->len + 1, sizeof(*ref->rank));
	ck_assert(ref->item && ref->pad && ref->rank);
	for (p = 0; p < ref->len; p++) {
		ref->item[p] = p < n ? s[p] : s[(p - n) % n];
		ref->pad[p] = p >= n;
	}

	if (c->spec.layout == SHARD_LAYOUT_STRIDED) {
		for (p = 0; p < ref->len; p++)
			ref->rank[p] = p % w;
	} else if (c->spec.layout == SHARD_LAYOUT_CONTIGUOUS) {
		uint64_t q = ref->len / w, m = ref->len % w, r;

		for (p = 0; p < ref->len; p++)
			for (r = 0; r < w; r++)
				if (q * r + (r < m ? r : m) <= p &&
				    p < q * (r + 1) + (r + 1 < m ? r + 1 : m))
					ref->rank[p] = r;
	} else {
		/* N <= 300 keeps (2c + w)W below 2^80: plain u128 is exact. */
		u128 total = 0, cum = 0;

		for (p = 0; p < n; p++)
			total += c->weights[s[p]];
		for (p = 0; p < n; p++) {
			uint64_t wt = c->weights[s[p]];
			u128 r = total ? (2 * cum + wt) * w / (2 * total) : 0;

			ref->rank[p] = r < w - 1 ? (uint64_t)r : w - 1;
			cum += wt;
		}
	}
}

static void ref_plan_free(struct ref_plan *ref)
{
	free(ref->item);
	free(ref->pad);
	free(ref->rank);
}

static void check_same_plan(const struct prop_case *c,
			    const struct shard_plan *a,
			    const struct shard_plan *b)
{
	uint64_t w = c->spec.world_size;
	size_t len = a->rank_start[w];

	PROP(c, b->world_size == a->world_size);
	PROP(c, b->n_items == a->n_items);
	PROP(c, b->n_dropped == a->n_dropped);
	PROP(c, memcmp(a->rank_start, b->rank_start,
		       (w + 1) * sizeof(*a->rank_start)) == 0);
	PROP(c,
	     memcmp(a->rank_pad, b->rank_pad, w * sizeof(*a->rank_pad)) == 0);
	PROP(c, memcmp(a->items, b->items, len * sizeof(*a->items)) == 0);
}

static void check_against_ref(const struct prop_case *c,
			      const struct shard_plan *plan,
			      const struct ref_plan *ref)
{
	uint64_t r;

	for (r = 0; r < c->spec.world_size; r++) {
		const uint32_t *items;
		size_t count, npad, k = 0, p;

		shard_plan_rank(plan, r, &items, &count, &npad);
		for (p = 0; p < ref->len; p++) {
			if (ref->rank[p] != r)
				continue;
			PROP(c, k < count);
			PROP(c, items[k] == ref->item[p]);
			PROP(c, (k >= count - npad) == ref->pad[p]);
			k++;
		}
		PROP(c, k == count);
	}
}

static void check_invariants(const struct prop_case *c,
			     const struct shard_plan *plan, const uint32_t *s)
{
	const struct shard_spec *spec = &c->spec;
	uint64_t w = spec->world_size, r;
	size_t n = c->n, k, total_pad = 0, kept;
	size_t min_count = SIZE_MAX, max_count = 0;
	uint32_t *pos = calloc(n + 1, sizeof(*pos));
	unsigned *seen = calloc(n + 1, sizeof(*seen));
	u128 total_weight = 0;
	uint64_t max_weight = 0;

	ck_assert(pos && seen);
	for (k = 0; k < n; k++)
		pos[s[k]] = (uint32_t)k;
	if (c->weights) {
		for (k = 0; k < n; k++) {
			total_weight += c->weights[k];
			if (c->weights[k] > max_weight)
				max_weight = c->weights[k];
		}
	}

	PROP(c, plan->world_size == w);
	PROP(c, plan->n_items == n);
	PROP(c, plan->n_dropped ==
			(spec->balance == SHARD_BALANCE_DROP ? n % w : 0));
	PROP(c, plan->rank_start[0] == 0);

	for (r = 0; r < w; r++) {
		const uint32_t *items;
		size_t count, npad;
		u128 bytes = 0;
		int64_t last_pos = -1;

		shard_plan_rank(plan, r, &items, &count, &npad);
		PROP(c, plan->rank_start[r + 1] >= plan->rank_start[r]);
		PROP(c, count == plan->rank_start[r + 1] - plan->rank_start[r]);
		PROP(c, npad <= count);
		/* Pads only with balance = pad, and fewer than W of them. */
		PROP(c, npad == 0 || spec->balance == SHARD_BALANCE_PAD);
		total_pad += npad;
		for (k = 0; k < count; k++) {
			PROP(c, items[k] < n);
			if (k >= count - npad)
				continue;
			seen[items[k]]++;
			/* Within a rank, the order of S. */
			PROP(c, (int64_t)pos[items[k]] > last_pos);
			last_pos = pos[items[k]];
			if (c->weights)
				bytes += c->weights[items[k]];
		}
		if (count < min_count)
			min_count = count;
		if (count > max_count)
			max_count = count;
		/* Each rank within one max item of T/W. */
		if (spec->layout == SHARD_LAYOUT_BYTES) {
			u128 scaled = bytes * w;
			u128 diff = scaled > total_weight
					    ? scaled - total_weight
					    : total_weight - scaled;

			PROP(c, diff <= (u128)max_weight * w);
		}
	}

	/* Disjoint, covering; drop loses exactly the tail of S. */
	kept = n - plan->n_dropped;
	for (k = 0; k < n; k++)
		PROP(c, seen[s[k]] == (k < kept ? 1u : 0u));
	PROP(c, total_pad == plan->rank_start[w] - kept);
	if (spec->balance == SHARD_BALANCE_PAD)
		PROP(c, total_pad < w);
	else
		PROP(c, plan->rank_start[w] == kept);

	if (spec->layout != SHARD_LAYOUT_BYTES) {
		if (spec->balance == SHARD_BALANCE_NONE)
			PROP(c, max_count - min_count <= 1);
		else
			PROP(c, max_count == min_count);
	}
	free(pos);
	free(seen);
}

static void check_case(const struct prop_case *c)
{
	shard_weight_fn fn = c->weights ? weight_array : NULL;
	struct shard_plan *plan = NULL, *again = NULL;
	struct ref_plan ref;
	uint32_t *s = calloc(c->n + 1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	PROP(c, shard_plan_build(&c->spec, c->n, fn, c->weights, &plan) == 0);
	PROP(c, shard_plan_build(&c->spec, c->n, fn, c->weights, &again) == 0);
	check_same_plan(c, plan, again);

	ref_order(s, c->n, &c->spec);
	check_invariants(c, plan, s);
	ref_plan_make(&ref, c, s);
	check_against_ref(c, plan, &ref);

	ref_plan_free(&ref);
	shard_plan_free(again);
	shard_plan_free(plan);
	free(s);
}

START_TEST(test_properties)
{
	struct test_rng g = { 0x5EED5EED12345678ULL };
	unsigned i;

	for (i = 0; i < PROP_CASES; i++) {
		struct prop_case c;

		prop_case_make(&c, &g, i);
		check_case(&c);
		free(c.weights);
	}
}
END_TEST

/* Every (order, layout, balance) at once, so none is left to chance. */
START_TEST(test_properties_all_combinations)
{
	struct test_rng g = { 0xC0FFEE0DDF00DULL };
	unsigned order, layout, balance, i = 0;

	for (order = 0; order <= SHARD_ORDER_NONE; order++)
		for (layout = 0; layout <= SHARD_LAYOUT_BYTES; layout++)
			for (balance = 0; balance <= SHARD_BALANCE_PAD;
			     balance++) {
				struct prop_case c;
				size_t k;

				if (layout == SHARD_LAYOUT_BYTES && balance)
					continue;
				prop_case_make(&c, &g, i++);
				free(c.weights);
				c.n = 97;
				c.spec.world_size = 7;
				c.spec.order = (enum shard_order)order;
				c.spec.layout = (enum shard_layout)layout;
				c.spec.balance = (enum shard_balance)balance;
				c.weights = calloc(c.n, sizeof(*c.weights));
				ck_assert_ptr_nonnull(c.weights);
				for (k = 0; k < c.n; k++)
					c.weights[k] = rng_below(&g, 50);
				snprintf(c.desc, sizeof(c.desc),
					 "N=97 W=7 seed=%" PRIu64
					 " order=%s layout=%s balance=%s",
					 c.spec.seed, shard_order_name(order),
					 shard_layout_name(layout),
					 shard_balance_name(balance));
				check_case(&c);
				free(c.weights);
			}
}
END_TEST

static Suite *shard_suite(void)
{
	Suite *s = suite_create("shard");
	struct {
		const char *name;
		const TTest *test;
	} cases[] = {
		{ "splitmix64", test_splitmix64_vectors },
		{ "derive", test_derive_vector },
		{ "shuffle", test_shuffle_vectors },
		{ "strided_pad", test_strided_pad_vector },
		{ "contiguous_none", test_contiguous_none_vector },
		{ "bytes", test_bytes_vector },
		{ "spec_check", test_spec_check },
		{ "bad_arguments", test_build_bad_arguments },
		{ "names", test_names },
		{ "overflow", test_overflow },
		{ "empty_manifest", test_empty_manifest },
		{ "single_rank", test_single_rank },
		{ "more_ranks_than_items", test_more_ranks_than_items },
		{ "rank_out_of_range", test_rank_out_of_range },
		{ "bytes_weights", test_bytes_zero_and_huge_weights },
		{ "bounded", test_bounded },
		{ "properties", test_properties },
		{ "properties_combinations", test_properties_all_combinations },
	};
	size_t i;

	for (i = 0; i < ARRAY_LEN(cases); i++) {
		TCase *tc = tcase_create(cases[i].name);

		/* Room for sanitizer builds; the suite takes well under 1 s. */
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	return unit_run(shard_suite());
}
