/*
 * check_shard_epoch: plan/shard.h's epoch extensions (docs/DESIGN.md §5, "Epochs, local reshuffle and skip"):
 * reshuffle = local, skip K over skip_world ranks.
 *
 * The vectors are the reference's (tests/integration/shardspec.py
 * --selftest holds the same table); the properties are the spec's
 * promises: each epoch's plan covers the items once, local keeps a rank's
 * items, and a job stopped after c items per rank on W0 ranks resumes
 * with skip c*W0 on any W seeing every remaining item exactly once
 * (strided; drop loses only the documented tails). Random cases come from
 * a fixed-seed generator and every failure prints its case.
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

#define EP_CASES 2500
#define EP_MAX_N 120
#define EP_MAX_W 12

static const uint64_t vec_weights[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

/* ---- Vectors: N=10, seed 42, shuffle, weights 1..10 ---- */

struct epoch_vector {
	enum shard_reshuffle reshuffle;
	enum shard_layout layout;
	enum shard_balance balance;
	uint64_t world, skip, skip_world, epoch;
	const char *ranks[4];
};

#define L SHARD_RESHUFFLE_LOCAL
#define G SHARD_RESHUFFLE_GLOBAL
#define ST SHARD_LAYOUT_STRIDED
#define CO SHARD_LAYOUT_CONTIGUOUS
#define BY SHARD_LAYOUT_BYTES
#define NO SHARD_BALANCE_NONE
#define DR SHARD_BALANCE_DROP
#define PA SHARD_BALANCE_PAD

static const struct epoch_vector vectors[] = {
	{ L, ST, NO, 4, 0, 0, 0, { "8 6 5", "2 0 1", "4 7", "3 9" } },
	{ L, ST, NO, 4, 0, 0, 1, { "6 5 8", "2 0 1", "7 4", "9 3" } },
	{ L, ST, NO, 4, 0, 0, 2, { "8 6 5", "0 2 1", "4 7", "9 3" } },
	{ L, ST, DR, 4, 0, 0, 0, { "8 6", "2 0", "4 7", "3 9" } },
	{ L, ST, DR, 4, 0, 0, 1, { "6 8", "2 0", "7 4", "9 3" } },
	{ L, ST, DR, 4, 0, 0, 2, { "8 6", "2 0", "4 7", "9 3" } },
	{ L, ST, PA, 4, 0, 0, 0, { "8 6 5", "2 0 1", "4 7 8*", "3 9 2*" } },
	{ L, ST, PA, 4, 0, 0, 1, { "6 5 8", "2 0 1", "7 4 8*", "9 3 2*" } },
	{ L, ST, PA, 4, 0, 0, 2, { "8 6 5", "0 2 1", "4 7 8*", "9 3 2*" } },
	{ L, CO, NO, 4, 0, 0, 0, { "8 2 4", "3 6 0", "7 9", "5 1" } },
	{ L, CO, NO, 4, 0, 0, 1, { "2 4 8", "3 6 0", "9 7", "1 5" } },
	{ L, CO, NO, 4, 0, 0, 2, { "8 2 4", "6 3 0", "7 9", "1 5" } },
	{ L, CO, DR, 4, 0, 0, 0, { "8 2", "4 3", "6 0", "7 9" } },
	{ L, CO, DR, 4, 0, 0, 1, { "2 8", "4 3", "0 6", "9 7" } },
	{ L, CO, DR, 4, 0, 0, 2, { "8 2", "4 3", "6 0", "9 7" } },
	{ L, CO, PA, 4, 0, 0, 0, { "8 2 4", "3 6 0", "7 9 5", "1 8* 2*" } },
	{ L, CO, PA, 4, 0, 0, 1, { "2 4 8", "3 6 0", "7 5 9", "1 8* 2*" } },
	{ L, CO, PA, 4, 0, 0, 2, { "8 2 4", "6 3 0", "7 9 5", "1 8* 2*" } },
	{ L, BY, NO, 4, 0, 0, 0, { "8 2", "4 3 6", "0 7", "9 5 1" } },
	{ L, BY, NO, 4, 0, 0, 1, { "2 8", "4 3 6", "7 0", "5 1 9" } },
	{ L, BY, NO, 4, 0, 0, 2, { "8 2", "3 4 6", "0 7", "5 1 9" } },
	{ L, ST, NO, 2, 0, 0, 1, { "6 7 8 5 4", "0 2 3 1 9" } },
	{ L, ST, NO, 2, 0, 0, 2, { "4 6 8 5 7", "2 0 1 3 9" } },
	{ G, ST, NO, 4, 0, 0, 1, { "2 7 9", "8 0 4", "5 3", "1 6" } },
	{ G, ST, NO, 4, 0, 0, 2, { "2 9 8", "1 0 6", "3 5", "4 7" } },
	/* skip K over skip_world W0, then world W */
	{ G, ST, NO, 3, 4, 4, 0, { "6 9", "0 5", "7 1" } },
	{ G, ST, PA, 4, 4, 4, 0, { "6 5", "0 1", "7 6*", "9 0*" } },
	{ G, ST, DR, 3, 4, 4, 0, { "6", "0", "7" } },
	{ G, ST, NO, 3, 10, 4, 0, { "", "", "" } },
	{ G, ST, PA, 3, 0, 4, 0, { "8 3 7 1", "2 6 9 8*", "4 0 5 2*" } },
	{ G, CO, NO, 2, 3, 4, 0, { "3 6 0 7", "9 5 1" } },
	{ G, BY, NO, 3, 3, 4, 0, { "3 6 0", "7 9", "5 1" } },
	{ L, ST, NO, 3, 4, 4, 1, { "5 3", "0 8", "4 1" } },
	{ L, ST, PA, 3, 5, 4, 1, { "0 8", "4 1", "3 0*" } },
	{ L, CO, PA, 3, 5, 2, 1, { "9 0", "7 1", "5 9*" } },
};

START_TEST(test_vectors)
{
	const struct epoch_vector *v = &vectors[_i];
	struct shard_spec spec = {
		.world_size = v->world,
		.seed = 42,
		.epoch = v->epoch,
		.layout = v->layout,
		.balance = v->balance,
		.reshuffle = v->reshuffle,
		.skip = v->skip,
		.skip_world = v->skip_world,
	};
	struct shard_plan *plan = build_ok(&spec, 10, vec_weights);
	char got[128];
	uint64_t r;

	for (r = 0; r < v->world; r++) {
		rank_str(plan, r, got, sizeof(got));
		ck_assert_msg(strcmp(got, v->ranks[r]) == 0,
			      "vector %d rank %" PRIu64 ": got \"%s\", want "
			      "\"%s\"",
			      _i, r, got, v->ranks[r]);
	}
	shard_plan_free(plan);
}
END_TEST

START_TEST(test_derive_local)
{
	const uint64_t v[4] = { 3, 42, 1, 0 };

	ck_assert_uint_eq(shard_derive(v, 4), 0xddf781b6b175ecedULL);
}
END_TEST

/* The counts the spec gives for the drop vector: 4 skipped, 2 dropped on
 * W0 = 4 (the tail of S) and 1 more on W = 3. */
START_TEST(test_skip_counts)
{
	struct shard_spec spec = { .world_size = 3,
				   .seed = 42,
				   .balance = SHARD_BALANCE_DROP,
				   .skip = 4,
				   .skip_world = 4 };
	struct shard_plan *plan = build_ok(&spec, 10, NULL);

	ck_assert_uint_eq(plan->n_skipped, 4);
	ck_assert_uint_eq(plan->n_dropped, 3);
	ck_assert_uint_eq(plan->n_items, 10);
	shard_plan_free(plan);
	spec.skip = 100; /* beyond the end: everything skipped or dropped */
	plan = build_ok(&spec, 10, NULL);
	ck_assert_uint_eq(plan->n_skipped, 8);
	ck_assert_uint_eq(plan->n_dropped, 2);
	ck_assert_uint_eq(plan->rank_start[3], 0);
	shard_plan_free(plan);
}
END_TEST

START_TEST(test_spec_check_epoch)
{
	struct shard_spec spec = { .world_size = 4 };
	struct shard_plan *sentinel = (struct shard_plan *)&sentinel;
	struct shard_plan *plan = sentinel;
	const char *msg;

	spec.reshuffle = SHARD_RESHUFFLE_LOCAL;
	spec.skip = UINT64_MAX;
	spec.skip_world = UINT32_MAX;
	ck_assert_ptr_null(shard_spec_check(&spec));
	spec.skip_world = (uint64_t)UINT32_MAX + 1;
	msg = shard_spec_check(&spec);
	ck_assert_ptr_nonnull(msg);
	ck_assert_ptr_nonnull(strstr(msg, "skip_world"));
	ck_assert_int_eq(shard_plan_build(&spec, 3, NULL, NULL, &plan),
			 -EINVAL);
	spec.skip_world = 0;
	spec.reshuffle = (enum shard_reshuffle)2;
	msg = shard_spec_check(&spec);
	ck_assert_ptr_nonnull(msg);
	ck_assert_ptr_nonnull(strstr(msg, "reshuffle"));
	ck_assert_int_eq(shard_plan_build(&spec, 3, NULL, NULL, &plan),
			 -EINVAL);
	spec.reshuffle = (enum shard_reshuffle) - 1;
	ck_assert_ptr_nonnull(shard_spec_check(&spec));
	ck_assert_ptr_eq(plan, sentinel);

	ck_assert_str_eq(shard_reshuffle_name(SHARD_RESHUFFLE_GLOBAL),
			 "global");
	ck_assert_str_eq(shard_reshuffle_name(SHARD_RESHUFFLE_LOCAL), "local");
	ck_assert_ptr_null(shard_reshuffle_name((enum shard_reshuffle)2));
	ck_assert_str_eq(shard_reshuffle_names[1], "local");
	ck_assert_ptr_null(shard_reshuffle_names[2]);
}
END_TEST

/* W0's plan is checked before anything is allocated for it. */
START_TEST(test_skip_overflow)
{
	struct shard_spec spec = { .world_size = 1,
				   .balance = SHARD_BALANCE_PAD,
				   .order = SHARD_ORDER_NONE,
				   .skip = 1,
				   .skip_world = 2 };
	struct shard_plan *sentinel = (struct shard_plan *)&sentinel;
	struct shard_plan *plan = sentinel;

	ck_assert_int_eq(shard_plan_build(&spec, UINT32_MAX, NULL, NULL, &plan),
			 -EOVERFLOW);
	spec.reshuffle = SHARD_RESHUFFLE_LOCAL;
	ck_assert_int_eq(shard_plan_build(&spec, UINT32_MAX, NULL, NULL, &plan),
			 -EOVERFLOW);
	ck_assert_ptr_eq(plan, sentinel);
}
END_TEST

/* ---- Properties ---- */

struct ep_case {
	char desc[256];
	struct shard_spec spec;
	size_t n;
	uint64_t *weights;
};

#define PROP(c, cond)                                                          \
	do {                                                                   \
		if (!(cond))                                                   \
			ck_abort_msg("%s: failed: %s (line %d)", (c)->desc,    \
				     #cond, __LINE__);                         \
	} while (0)

static void ep_case_make(struct ep_case *c, struct test_rng *g, unsigned index)
{
	struct shard_spec *spec = &c->spec;
	size_t k;

	memset(c, 0, sizeof(*c));
	c->n = rng_below(g, 8) == 0 ? rng_below(g, 5)
				    : rng_below(g, EP_MAX_N + 1);
	spec->world_size = 1 + rng_below(g, EP_MAX_W);
	if (rng_below(g, 10) == 0)
		spec->world_size = c->n + 1 + rng_below(g, 3);
	spec->seed = rng_below(g, 3) == 0 ? rng_below(g, 50) : rng_next(g);
	spec->epoch = rng_below(g, 5) == 0 ? rng_next(g) : rng_below(g, 4);
	spec->order = (enum shard_order)(rng_below(g, 4) == 0);
	spec->layout = (enum shard_layout)rng_below(g, 3);
	spec->balance = spec->layout == SHARD_LAYOUT_BYTES
				? SHARD_BALANCE_NONE
				: (enum shard_balance)rng_below(g, 3);
	spec->reshuffle = (enum shard_reshuffle)rng_below(g, 2);
	c->weights = calloc(c->n + 1, sizeof(*c->weights));
	ck_assert_ptr_nonnull(c->weights);
	for (k = 0; k < c->n; k++)
		c->weights[k] = rng_below(g, 5) == 0 ? 0 : rng_below(g, 1000);
	snprintf(c->desc, sizeof(c->desc),
		 "case %u: N=%zu W=%" PRIu64 " seed=%" PRIu64 " epoch=%" PRIu64
		 " order=%s layout=%s balance=%s reshuffle=%s",
		 index, c->n, spec->world_size, spec->seed, spec->epoch,
		 shard_order_name(spec->order), shard_layout_name(spec->layout),
		 shard_balance_name(spec->balance),
		 shard_reshuffle_name(spec->reshuffle));
}

static struct shard_plan *ep_build(const struct ep_case *c,
				   const struct shard_spec *spec)
{
	struct shard_plan *plan = NULL;

	PROP(c, shard_plan_build(spec, c->n, weight_array, c->weights, &plan) ==
			0);
	return plan;
}

static size_t plan_len(const struct shard_plan *p)
{
	return p->rank_start[p->world_size];
}

static size_t plan_pads(const struct shard_plan *p)
{
	size_t r, pads = 0;

	for (r = 0; r < p->world_size; r++)
		pads += p->rank_pad[r];
	return pads;
}

/* Adds each non-pad item of p to seen (counts); pads must be items that
 * p also holds as non-pads. */
static void count_items(const struct ep_case *c, const struct shard_plan *p,
			unsigned *seen)
{
	uint64_t r;
	size_t k;

	for (r = 0; r < p->world_size; r++) {
		size_t a = p->rank_start[r], b = p->rank_start[r + 1];

		PROP(c, a <= b && p->rank_pad[r] <= b - a);
		for (k = a; k < b; k++) {
			PROP(c, p->items[k] < c->n);
			if (k < b - p->rank_pad[r])
				seen[p->items[k]]++;
		}
	}
}

/* Same item lists, pads and counts. */
static int same_plan(const struct shard_plan *a, const struct shard_plan *b)
{
	uint64_t r;

	if (a->world_size != b->world_size || plan_len(a) != plan_len(b) ||
	    a->n_dropped != b->n_dropped || a->n_skipped != b->n_skipped)
		return 0;
	for (r = 0; r < a->world_size; r++)
		if (a->rank_start[r] != b->rank_start[r] ||
		    a->rank_pad[r] != b->rank_pad[r])
			return 0;
	return memcmp(a->items, b->items, plan_len(a) * sizeof(*a->items)) == 0;
}

/* One epoch's plan: every item once (pads aside) or counted as dropped;
 * balance's count rules hold. */
static void check_cover(const struct ep_case *c, const struct shard_plan *p)
{
	unsigned *seen = calloc(c->n + 1, sizeof(*seen));
	size_t k, placed = 0, lo = SIZE_MAX, hi = 0;
	uint64_t r;

	ck_assert_ptr_nonnull(seen);
	count_items(c, p, seen);
	for (k = 0; k < c->n; k++) {
		PROP(c, seen[k] <= 1);
		placed += seen[k];
	}
	PROP(c, placed + p->n_dropped + p->n_skipped == c->n);
	for (r = 0; r < p->world_size; r++) {
		size_t cnt = p->rank_start[r + 1] - p->rank_start[r];

		lo = cnt < lo ? cnt : lo;
		hi = cnt > hi ? cnt : hi;
		for (k = p->rank_start[r + 1] - p->rank_pad[r];
		     k < p->rank_start[r + 1]; k++)
			PROP(c, seen[p->items[k]] == 1);
	}
	if (c->spec.layout != SHARD_LAYOUT_BYTES)
		PROP(c, c->spec.balance == SHARD_BALANCE_NONE ? hi - lo <= 1
							      : hi == lo);
	if (c->spec.balance != SHARD_BALANCE_PAD)
		PROP(c, plan_pads(p) == 0);
	else
		PROP(c, plan_pads(p) < p->world_size);
	free(seen);
}

/* local: epoch 0 is global's epoch 0; every epoch keeps each rank's
 * non-pad set and its pads (items and order) of epoch 0. */
static void check_local(const struct ep_case *c)
{
	struct shard_spec s0 = c->spec, sg = c->spec;
	struct shard_plan *p, *p0, *g0;
	unsigned *mark = calloc(c->n + 1, sizeof(*mark));
	uint64_t r;
	size_t k;

	ck_assert_ptr_nonnull(mark);
	s0.reshuffle = SHARD_RESHUFFLE_LOCAL;
	s0.epoch = 0;
	sg.reshuffle = SHARD_RESHUFFLE_GLOBAL;
	sg.epoch = 0;
	p0 = ep_build(c, &s0);
	g0 = ep_build(c, &sg);
	PROP(c, same_plan(p0, g0));
	s0.epoch = c->spec.epoch;
	p = ep_build(c, &s0);
	PROP(c, p->n_dropped == p0->n_dropped);
	for (r = 0; r < p->world_size; r++) {
		size_t a = p->rank_start[r], b = p->rank_start[r + 1];
		size_t body = b - a - p->rank_pad[r];

		PROP(c, a == p0->rank_start[r] &&
				p->rank_pad[r] == p0->rank_pad[r]);
		for (k = a; k < a + body; k++)
			mark[p0->items[k]] = (unsigned)r + 1;
		for (k = a; k < a + body; k++)
			PROP(c, mark[p->items[k]] == r + 1);
		for (k = a + body; k < b; k++)
			PROP(c, p->items[k] == p0->items[k]);
	}
	if (c->spec.order == SHARD_ORDER_NONE)
		PROP(c, same_plan(p, p0));
	shard_plan_free(p);
	shard_plan_free(p0);
	shard_plan_free(g0);
	free(mark);
}

/*
 * A job on W0 ranks consumed the first c items of each rank (c up to the
 * smallest count), then resumes with skip c*W0 on W ranks: consumed and
 * resumed non-pad items are disjoint and cover everything but W0's
 * dropped items and the resume's own drop of |T| mod W. Exact for strided
 * and, with W0 = 1, for every layout.
 */
static void check_resume(const struct ep_case *c, struct test_rng *g)
{
	struct shard_spec s0 = c->spec, s1 = c->spec;
	struct shard_plan *p0, *p1;
	unsigned *seen = calloc(c->n + 1, sizeof(*seen));
	size_t k, min_count = SIZE_MAX, cc, placed, consumed, t_len;
	uint64_t w0, r;

	ck_assert_ptr_nonnull(seen);
	w0 = c->spec.layout == SHARD_LAYOUT_STRIDED ? 1 + rng_below(g, EP_MAX_W)
						    : 1;
	s0.world_size = w0;
	p0 = ep_build(c, &s0);
	for (r = 0; r < w0; r++) {
		size_t cnt = p0->rank_start[r + 1] - p0->rank_start[r];

		min_count = cnt < min_count ? cnt : min_count;
	}
	for (cc = 0; cc <= min_count; cc++) {
		memset(seen, 0, (c->n + 1) * sizeof(*seen));
		consumed = 0;
		for (r = 0; r < w0; r++) {
			size_t a = p0->rank_start[r];
			size_t body =
				p0->rank_start[r + 1] - a - p0->rank_pad[r];

			for (k = 0; k < cc && k < body; k++) {
				seen[p0->items[a + k]]++;
				consumed++;
			}
		}
		s1.skip = cc * w0;
		s1.skip_world = w0;
		p1 = ep_build(c, &s1);
		PROP(c, p1->n_skipped == consumed);
		count_items(c, p1, seen);
		placed = 0;
		for (k = 0; k < c->n; k++) {
			PROP(c, seen[k] <= 1);
			placed += seen[k];
		}
		/* T: W0's non-pad positions from c*W0 on. */
		t_len = c->n - p0->n_dropped - consumed;
		if (c->spec.balance == SHARD_BALANCE_DROP)
			PROP(c, c->n - placed ==
					p0->n_dropped + t_len % s1.world_size);
		else
			PROP(c, placed == c->n);
		shard_plan_free(p1);
	}
	shard_plan_free(p0);
	free(seen);
}

/* global, balance none or pad: T = S[K..] whatever W0, and K = 0 on W0 = W
 * is v1 itself (every balance). */
static void check_global_skip(const struct ep_case *c, struct test_rng *g)
{
	struct shard_spec s = c->spec, t;
	struct shard_plan *a, *b, *v1;

	s.reshuffle = SHARD_RESHUFFLE_GLOBAL;
	v1 = ep_build(c, &s);
	t = s;
	t.skip_world = s.world_size;
	a = ep_build(c, &t);
	PROP(c, same_plan(a, v1));
	shard_plan_free(a);
	if (s.balance != SHARD_BALANCE_DROP) {
		t.skip = rng_below(g, c->n + 3);
		t.skip_world = 1 + rng_below(g, EP_MAX_W);
		a = ep_build(c, &t);
		t.skip_world = 1 + rng_below(g, EP_MAX_W);
		b = ep_build(c, &t);
		PROP(c, same_plan(a, b));
		PROP(c, a->n_skipped == (t.skip < c->n ? t.skip : c->n));
		shard_plan_free(a);
		shard_plan_free(b);
	}
	shard_plan_free(v1);
}

/* skip at or beyond W0's plan length: every rank empty. */
static void check_skip_end(const struct ep_case *c, struct test_rng *g)
{
	struct shard_spec s = c->spec;
	struct shard_plan *p0, *p;
	uint64_t r;

	s.skip_world = 1 + rng_below(g, EP_MAX_W);
	s.skip = 0;
	s.world_size = s.skip_world;
	p0 = ep_build(c, &s);
	s.world_size = c->spec.world_size;
	s.skip = plan_len(p0) + rng_below(g, 3);
	if (rng_below(g, 4) == 0)
		s.skip = UINT64_MAX - rng_below(g, 3);
	p = ep_build(c, &s);
	for (r = 0; r < p->world_size; r++)
		PROP(c, p->rank_start[r + 1] == 0);
	PROP(c, p->n_skipped == plan_len(p0) - plan_pads(p0));
	PROP(c, p->n_dropped == p0->n_dropped);
	shard_plan_free(p0);
	shard_plan_free(p);
}

START_TEST(test_properties)
{
	struct test_rng g = { 0xE90C4E14ULL };
	unsigned i;

	for (i = 0; i < EP_CASES; i++) {
		struct ep_case c;
		struct shard_spec s;
		struct shard_plan *p;

		ep_case_make(&c, &g, i);
		s = c.spec;
		p = ep_build(&c, &s);
		check_cover(&c, p);
		shard_plan_free(p);
		/* A random skip plan covers the same way. */
		s.skip = rng_below(&g, c.n + 4);
		s.skip_world = rng_below(&g, EP_MAX_W + 1);
		p = ep_build(&c, &s);
		check_cover(&c, p);
		shard_plan_free(p);
		check_local(&c);
		check_resume(&c, &g);
		check_global_skip(&c, &g);
		check_skip_end(&c, &g);
		free(c.weights);
	}
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "derive_local", test_derive_local },
		{ "skip_counts", test_skip_counts },
		{ "spec_check_epoch", test_spec_check_epoch },
		{ "skip_overflow", test_skip_overflow },
		{ "properties", test_properties },
	};
	Suite *s = unit_suite("shard_epoch", cases, ARRAY_LEN(cases));
	TCase *tc = tcase_create("vectors");

	tcase_add_loop_test(tc, test_vectors, 0, (int)ARRAY_LEN(vectors));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
