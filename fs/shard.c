/*
 * shard: the sharding plan, spec "shardfs-shard v1" (DESIGN.md §5).
 *
 * Design: every layout gives each rank a run of S' (S after balance) that
 * is either consecutive (contiguous, bytes) or one residue class mod W
 * (strided). So the plan is S' itself with rank boundaries, except that
 * strided needs one transposition out of a scratch copy of S. Strided and
 * contiguous share their boundaries: both give rank r q + (r < m) positions
 * (q = R' div W, m = R' mod W), in the same order.
 *
 * Invariants: items[] holds R' <= UINT32_MAX indices below N; pads are the
 * positions [R, R') of S', which are the last positions of their ranks in
 * both layouts that allow pad; bytes is monotone along S, so its ranks are
 * consecutive runs too.
 *
 * The bytes layout sums weights exactly (128-bit) instead of wrapping at
 * 2^64: a wrapped total would hand out meaningless shares, and for every
 * total below 2^64 the result is the spec's, bit for bit.
 */
#include "fs/shard.h"

#include <errno.h>
#include <stdlib.h>

#define SHARD_GAMMA 0x9E3779B97F4A7C15ULL
#define SHARD_DERIVE_INIT 0x5348415244563031ULL /* "SHARDV01" */
#define SHARD_STREAM_SHUFFLE 1

typedef unsigned __int128 shard_u128;

uint64_t shard_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

uint64_t shard_splitmix64_next(uint64_t *state)
{
	*state += SHARD_GAMMA;
	return shard_mix64(*state);
}

uint64_t shard_derive(const uint64_t *v, size_t n)
{
	uint64_t h = SHARD_DERIVE_INIT;
	size_t i;

	for (i = 0; i < n; i++)
		h = shard_mix64((h ^ v[i]) + SHARD_GAMMA);
	return h;
}

uint64_t shard_bounded(uint64_t *state, uint64_t n)
{
	shard_u128 m = (shard_u128)shard_splitmix64_next(state) * n;
	uint64_t low = (uint64_t)m;

	/* The modulo is the slow part, and is needed only near a boundary. */
	if (low < n) {
		uint64_t threshold = (0 - n) % n;

		while (low < threshold) {
			m = (shard_u128)shard_splitmix64_next(state) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

const char *const shard_order_names[] = { "shuffle", "none", NULL };
const char *const shard_layout_names[] = { "strided", "contiguous", "bytes",
					   NULL };
const char *const shard_balance_names[] = { "none", "drop", "pad", NULL };
const char *const shard_reshuffle_names[] = { "global", "local", NULL };

/* names[v] for v within the NULL-terminated names, else NULL. */
static const char *shard_name(const char *const *names, unsigned v)
{
	unsigned i;

	for (i = 0; names[i] != NULL; i++)
		if (i == v)
			return names[i];
	return NULL;
}

const char *shard_order_name(enum shard_order o)
{
	return shard_name(shard_order_names, (unsigned)o);
}

const char *shard_layout_name(enum shard_layout l)
{
	return shard_name(shard_layout_names, (unsigned)l);
}

const char *shard_balance_name(enum shard_balance b)
{
	return shard_name(shard_balance_names, (unsigned)b);
}

const char *shard_reshuffle_name(enum shard_reshuffle r)
{
	return shard_name(shard_reshuffle_names, (unsigned)r);
}

const char *shard_spec_check(const struct shard_spec *spec)
{
	if (!spec)
		return "spec is NULL";
	if (spec->world_size < 1)
		return "world_size must be at least 1";
	/* Via unsigned so that a negative value read from a file fails too. */
	if ((unsigned)spec->order > SHARD_ORDER_NONE)
		return "order must be shuffle or none";
	if ((unsigned)spec->layout > SHARD_LAYOUT_BYTES)
		return "layout must be strided, contiguous or bytes";
	if ((unsigned)spec->balance > SHARD_BALANCE_PAD)
		return "balance must be none, drop or pad";
	if (spec->layout == SHARD_LAYOUT_BYTES &&
	    spec->balance != SHARD_BALANCE_NONE)
		return "layout bytes requires balance none";
	return NULL;
}

/* S for order = shuffle; s holds [0..n-1] on entry. */
static void shard_fisher_yates(uint32_t *s, size_t n, uint64_t seed,
			       uint64_t epoch)
{
	const uint64_t v[3] = { SHARD_STREAM_SHUFFLE, seed, epoch };
	uint64_t state = shard_derive(v, 3);
	size_t i;

	for (i = n; i-- > 1;) {
		size_t j = (size_t)shard_bounded(&state, (uint64_t)i + 1);
		uint32_t t = s[i];

		s[i] = s[j];
		s[j] = t;
	}
}

/*
 * Rank boundaries for the bytes layout over S = items[0..n).
 *
 * An item goes to rank >= K iff floor((2c + w)W / 2T) >= K, i.e. iff
 * cW + floor(wW / 2) >= TK (halving is exact here because TK is an
 * integer). With T < 2^96 (N, W <= UINT32_MAX) both sides stay below
 * T·W < 2^128, so unlike the spec's formula nothing can overflow, and the
 * walk needs no division: ranks only grow along S, so one threshold TK
 * moves forward.
 */
static void shard_bytes_bounds(struct shard_plan *plan, const uint32_t *items,
			       size_t n, shard_weight_fn weight,
			       const void *weight_ctx)
{
	uint64_t world = plan->world_size;
	shard_u128 total = 0, c_w = 0, threshold;
	uint64_t r = 0;
	size_t k;

	for (k = 0; k < n; k++)
		total += weight(weight_ctx, items[k]);

	plan->rank_start[0] = 0;
	if (total > 0) {
		threshold = total;
		for (k = 0; k < n; k++) {
			shard_u128 w_w =
				(shard_u128)weight(weight_ctx, items[k]) *
				world;
			shard_u128 lhs = c_w + (w_w >> 1);

			while (r + 1 < world && lhs >= threshold) {
				plan->rank_start[++r] = k;
				threshold += total;
			}
			c_w += w_w;
		}
	}
	/* Ranks after the last item's start empty at n; with T = 0 that is
	 * every rank but 0, which is what the spec asks for. */
	while (r < world)
		plan->rank_start[++r] = n;
}

int shard_plan_build(const struct shard_spec *spec, size_t n,
		     shard_weight_fn weight, const void *weight_ctx,
		     struct shard_plan **out)
{
	struct shard_plan *plan;
	uint32_t *s_scratch = NULL;
	const uint32_t *s;
	uint64_t world, kept, total, q, m, r;
	size_t k;
	int transpose;

	if (!out || shard_spec_check(spec))
		return -EINVAL;
	if (spec->layout == SHARD_LAYOUT_BYTES && !weight)
		return -EINVAL;
	world = spec->world_size;
	if (n > UINT32_MAX || world > UINT32_MAX)
		return -EOVERFLOW;

	/* kept: items of S in S' (R minus the dropped tail); total: R'. */
	kept = total = n;
	if (spec->balance == SHARD_BALANCE_DROP)
		kept = total = n / world * world;
	else if (spec->balance == SHARD_BALANCE_PAD)
		total = (n + world - 1) / world * world;
	if (total > UINT32_MAX)
		return -EOVERFLOW;
	/* Only a 32-bit size_t can get here; calloc would wrap world + 1. */
	if (world >= SIZE_MAX / sizeof(size_t))
		return -ENOMEM;

	plan = calloc(1, sizeof(*plan));
	if (!plan)
		goto err;
	plan->world_size = world;
	plan->n_items = n;
	plan->n_dropped = n - kept;
	plan->rank_start = calloc(world + 1, sizeof(*plan->rank_start));
	if (!plan->rank_start)
		goto err_plan;
	plan->rank_pad = calloc(world, sizeof(*plan->rank_pad));
	if (!plan->rank_pad)
		goto err_start;
	/*
	 * S is built in place before drop trims it, so room for N; one spare
	 * slot so that an empty plan still has a valid pointer.
	 */
	plan->items = malloc(((size_t)(total > n ? total : n) + 1) *
			     sizeof(*plan->items));
	if (!plan->items)
		goto err_pad;

	/*
	 * S goes straight into items when the plan is S' itself; strided
	 * reads it from a scratch copy instead (W = 1 strided is contiguous).
	 */
	transpose = spec->layout == SHARD_LAYOUT_STRIDED && world > 1;
	if (transpose) {
		s_scratch = malloc(((size_t)n + 1) * sizeof(*s_scratch));
		if (!s_scratch)
			goto err_items;
	}
	{
		uint32_t *s_fill = transpose ? s_scratch : plan->items;

		for (k = 0; k < n; k++)
			s_fill[k] = (uint32_t)k;
		if (spec->order == SHARD_ORDER_SHUFFLE)
			shard_fisher_yates(s_fill, n, spec->seed, spec->epoch);
		s = s_fill;
	}

	if (spec->layout == SHARD_LAYOUT_BYTES) {
		shard_bytes_bounds(plan, s, n, weight, weight_ctx);
		*out = plan;
		return 0;
	}

	q = total / world;
	m = total % world;
	for (r = 0; r <= world; r++)
		plan->rank_start[r] = q * r + (r < m ? r : m);

	if (transpose) {
		/* Rank r's j-th item is S'[r + jW]; pads wrap around S. */
		uint32_t *dst = plan->items;

		for (r = 0; r < world; r++) {
			uint64_t p;

			for (p = r; p < total; p += world)
				*dst++ = p < n ? s[p] : s[(p - n) % n];
		}
		free(s_scratch);
	} else {
		for (k = n; k < total; k++)
			plan->items[k] = plan->items[(k - n) % n];
	}

	/*
	 * Pads are positions [n, total) of S', the tail of their ranks. Pad
	 * makes total a multiple of W and adds fewer than W positions, so in
	 * strided they fill the last row from column n mod W on.
	 */
	if (total > n) {
		for (r = 0; r < world; r++) {
			size_t start = plan->rank_start[r];
			size_t end = plan->rank_start[r + 1];

			if (transpose)
				plan->rank_pad[r] = r >= n % world ? 1 : 0;
			else if (end > n)
				plan->rank_pad[r] =
					end - (start > n ? start : n);
		}
	}

	*out = plan;
	return 0;

err_items:
	free(plan->items);
err_pad:
	free(plan->rank_pad);
err_start:
	free(plan->rank_start);
err_plan:
	free(plan);
err:
	return -ENOMEM;
}

void shard_plan_free(struct shard_plan *plan)
{
	if (!plan)
		return;
	free(plan->items);
	free(plan->rank_pad);
	free(plan->rank_start);
	free(plan);
}

void shard_plan_rank(const struct shard_plan *plan, uint64_t r,
		     const uint32_t **items, size_t *count, size_t *npad)
{
	if (r >= plan->world_size) {
		*items = NULL;
		*count = 0;
		*npad = 0;
		return;
	}
	*items = plan->items + plan->rank_start[r];
	*count = plan->rank_start[r + 1] - plan->rank_start[r];
	*npad = plan->rank_pad[r];
}
