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
 *
 * Epochs (DESIGN.md §5, "Epochs, local reshuffle and skip"): reshuffle =
 * local shuffles each rank's non-pad prefix of epoch 0's plan in place; a
 * skip plan reads T off the W0 plan's sequence and deals it through the
 * same shard_deal() as S, so balance and layout have one implementation.
 */
#include "plan/shard.h"

#include <errno.h>
#include <stdlib.h>

#define SHARD_GAMMA 0x9E3779B97F4A7C15ULL
#define SHARD_DERIVE_INIT 0x5348415244563031ULL /* "SHARDV01" */
/* derive()'s first value: the stream each generator belongs to (2 is the
 * record views' run window shuffle, records/rplan.c). */
#define SHARD_STREAM_SHUFFLE 1
#define SHARD_STREAM_LOCAL 3

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
	if ((unsigned)spec->reshuffle > SHARD_RESHUFFLE_LOCAL)
		return "reshuffle must be global or local";
	if (spec->skip_world > UINT32_MAX)
		return "skip_world must be at most 4294967295 (2^32-1)";
	return NULL;
}

/* fisher_yates(s[0..n), splitmix64 *state). */
static void shard_fisher_yates_state(uint32_t *s, size_t n, uint64_t *state)
{
	size_t i;

	for (i = n; i-- > 1;) {
		size_t j = (size_t)shard_bounded(state, (uint64_t)i + 1);
		uint32_t t = s[i];

		s[i] = s[j];
		s[j] = t;
	}
}

/* S for order = shuffle; s holds [0..n-1] on entry. */
static void shard_fisher_yates(uint32_t *s, size_t n, uint64_t seed,
			       uint64_t epoch)
{
	const uint64_t v[3] = { SHARD_STREAM_SHUFFLE, seed, epoch };
	uint64_t state = shard_derive(v, 3);

	shard_fisher_yates_state(s, n, &state);
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

/* R' for S of length len: the plan's length after balance. */
static uint64_t shard_dealt_len(uint64_t len, uint64_t world,
				enum shard_balance balance)
{
	if (balance == SHARD_BALANCE_DROP)
		return len / world * world;
	if (balance == SHARD_BALANCE_PAD)
		return (len + world - 1) / world * world;
	return len;
}

/* An empty plan for world ranks over n manifest items (world <=
 * UINT32_MAX), without items. */
static struct shard_plan *shard_plan_new(uint64_t world, size_t n)
{
	struct shard_plan *plan;

	/* Only a 32-bit size_t can fail this; calloc would wrap world + 1. */
	if (world >= SIZE_MAX / sizeof(size_t))
		return NULL;
	plan = calloc(1, sizeof(*plan));
	if (!plan)
		return NULL;
	plan->world_size = world;
	plan->n_items = n;
	plan->rank_start = calloc(world + 1, sizeof(*plan->rank_start));
	plan->rank_pad = calloc(world, sizeof(*plan->rank_pad));
	if (!plan->rank_start || !plan->rank_pad) {
		shard_plan_free(plan);
		return NULL;
	}
	return plan;
}

/*
 * Applies balance and layout to S = s[0..len) for plan's ranks and makes
 * the result plan's items. Takes s over, freed on failure too: when S' is
 * the plan itself (every layout but strided on W > 1), s becomes the
 * items, so it must have room for shard_dealt_len() + 1 entries; strided
 * reads it into a new array instead and frees it.
 */
static int shard_deal(struct shard_plan *plan, enum shard_layout layout,
		      enum shard_balance balance, uint32_t *s, size_t len,
		      shard_weight_fn weight, const void *weight_ctx)
{
	uint64_t world = plan->world_size;
	uint64_t total = shard_dealt_len(len, world, balance);
	uint64_t kept = balance == SHARD_BALANCE_DROP ? total : len;
	uint64_t q = total / world, m = total % world, r;
	int transpose = layout == SHARD_LAYOUT_STRIDED && world > 1;
	size_t k;

	plan->n_dropped = plan->n_items - plan->n_skipped - (size_t)kept;
	if (layout == SHARD_LAYOUT_BYTES) {
		plan->items = s;
		shard_bytes_bounds(plan, s, len, weight, weight_ctx);
		return 0;
	}

	for (r = 0; r <= world; r++)
		plan->rank_start[r] = q * r + (r < m ? r : m);

	if (transpose) {
		/* Rank r's j-th item is S'[r + jW]; pads wrap around S. */
		uint32_t *dst = malloc(((size_t)total + 1) * sizeof(*dst));

		if (!dst) {
			free(s);
			return -ENOMEM;
		}
		plan->items = dst;
		for (r = 0; r < world; r++) {
			uint64_t p;

			for (p = r; p < total; p += world)
				*dst++ = p < len ? s[p] : s[(p - len) % len];
		}
		free(s);
	} else {
		plan->items = s;
		for (k = len; k < total; k++)
			s[k] = s[(k - len) % len];
	}

	/*
	 * Pads are positions [len, total) of S', the tail of their ranks. Pad
	 * makes total a multiple of W and adds fewer than W positions, so in
	 * strided they fill the last row from column len mod W on.
	 */
	if (total > len) {
		for (r = 0; r < world; r++) {
			size_t start = plan->rank_start[r];
			size_t end = plan->rank_start[r + 1];

			if (transpose)
				plan->rank_pad[r] = r >= len % world ? 1 : 0;
			else if (end > len)
				plan->rank_pad[r] =
					end - (start > len ? start : len);
		}
	}
	return 0;
}

/* The v1 plan of spec on n items (reshuffle, skip and skip_world aside);
 * spec checked, n and world_size <= UINT32_MAX. */
static int shard_plan_v1(const struct shard_spec *spec, size_t n,
			 shard_weight_fn weight, const void *weight_ctx,
			 struct shard_plan **out)
{
	uint64_t world = spec->world_size;
	uint64_t total = shard_dealt_len(n, world, spec->balance);
	struct shard_plan *plan;
	uint32_t *s;
	size_t k;
	int rc;

	if (total > UINT32_MAX)
		return -EOVERFLOW;
	plan = shard_plan_new(world, n);
	if (!plan)
		return -ENOMEM;
	/*
	 * S is built in place before drop trims it, so room for N (strided
	 * needs no more: it deals into a new array); one spare slot so that
	 * an empty plan still has a valid pointer.
	 */
	if (spec->layout == SHARD_LAYOUT_STRIDED && world > 1)
		total = n;
	s = malloc(((size_t)(total > n ? total : n) + 1) * sizeof(*s));
	if (!s) {
		shard_plan_free(plan);
		return -ENOMEM;
	}
	for (k = 0; k < n; k++)
		s[k] = (uint32_t)k;
	if (spec->order == SHARD_ORDER_SHUFFLE)
		shard_fisher_yates(s, n, spec->seed, spec->epoch);
	rc = shard_deal(plan, spec->layout, spec->balance, s, n, weight,
			weight_ctx);
	if (rc) {
		shard_plan_free(plan);
		return rc;
	}
	*out = plan;
	return 0;
}

/*
 * The plan without skip: v1 for reshuffle = global; for local, epoch 0's
 * v1 plan with each rank's non-pad prefix shuffled by its own generator,
 * derive(3, seed, epoch, r). In place: ranks keep their items.
 */
static int shard_plan_base(const struct shard_spec *spec, size_t n,
			   shard_weight_fn weight, const void *weight_ctx,
			   struct shard_plan **out)
{
	struct shard_spec v1 = *spec;
	struct shard_plan *plan;
	uint64_t r;
	int rc;

	if (spec->reshuffle == SHARD_RESHUFFLE_GLOBAL)
		return shard_plan_v1(spec, n, weight, weight_ctx, out);
	v1.epoch = 0;
	rc = shard_plan_v1(&v1, n, weight, weight_ctx, &plan);
	if (rc)
		return rc;
	if (spec->epoch != 0 && spec->order == SHARD_ORDER_SHUFFLE) {
		for (r = 0; r < plan->world_size; r++) {
			const uint64_t v[4] = { SHARD_STREAM_LOCAL, spec->seed,
						spec->epoch, r };
			uint64_t state = shard_derive(v, 4);
			uint32_t *a = plan->items + plan->rank_start[r];
			size_t len = plan->rank_start[r + 1] -
				     plan->rank_start[r] - plan->rank_pad[r];

			shard_fisher_yates_state(a, len, &state);
		}
	}
	*out = plan;
	return 0;
}

/*
 * T: the non-pad items of the sequence Q of base from position skip on,
 * into a new array. Q is the positions row by row (strided: Q[iW + r] =
 * L_r[i]) or rank by rank (the others: the items array as it stands).
 */
static uint32_t *shard_tail(const struct shard_plan *base, int strided,
			    uint64_t skip, size_t *len)
{
	uint64_t world = base->world_size, total = base->rank_start[world];
	uint32_t *t;
	size_t n = 0, k;

	t = malloc(((size_t)(skip < total ? total - skip : 0) + 1) *
		   sizeof(*t));
	if (!t)
		return NULL;
	if (strided && skip < total) {
		uint64_t i = skip / world, r = skip % world;

		/* Every row is full but the last, which holds ranks [0, m). */
		for (; i * world + r < total; r = 0, i++) {
			for (; r < world; r++) {
				size_t a = base->rank_start[r];
				size_t cnt = base->rank_start[r + 1] - a;

				if (i >= cnt)
					break;
				if (i < cnt - base->rank_pad[r])
					t[n++] = base->items[a + i];
			}
		}
	} else if (skip < total) {
		uint64_t r = 0;

		for (k = (size_t)skip; k < total; k++) {
			while (base->rank_start[r + 1] <= k)
				r++;
			if (k < base->rank_start[r + 1] - base->rank_pad[r])
				t[n++] = base->items[k];
		}
	}
	*len = n;
	return t;
}

/*
 * A skip plan: Q from the base plan on W0 ranks, T its non-pad items from
 * position K on, then balance and layout on W ranks with T as S.
 */
static int shard_plan_skip(const struct shard_spec *spec, size_t n,
			   shard_weight_fn weight, const void *weight_ctx,
			   struct shard_plan **out)
{
	struct shard_spec on_w0 = *spec;
	struct shard_plan *base, *plan;
	uint64_t world = spec->world_size, dealt, nonpad, r;
	uint32_t *t;
	size_t len;
	int rc;

	on_w0.world_size = spec->skip_world ? spec->skip_world : world;
	on_w0.skip = on_w0.skip_world = 0;
	rc = shard_plan_base(&on_w0, n, weight, weight_ctx, &base);
	if (rc)
		return rc;
	nonpad = base->rank_start[base->world_size];
	for (r = 0; r < base->world_size; r++)
		nonpad -= base->rank_pad[r];
	t = shard_tail(base, spec->layout == SHARD_LAYOUT_STRIDED, spec->skip,
		       &len);
	shard_plan_free(base);
	if (!t)
		return -ENOMEM;
	dealt = shard_dealt_len(len, world, spec->balance);
	if (dealt > UINT32_MAX) {
		free(t);
		return -EOVERFLOW;
	}
	/* Pads go in place but for strided on W > 1 (see shard_deal()). */
	if (dealt > len &&
	    !(spec->layout == SHARD_LAYOUT_STRIDED && world > 1)) {
		uint32_t *grown = realloc(t, ((size_t)dealt + 1) * sizeof(*t));

		if (!grown) {
			free(t);
			return -ENOMEM;
		}
		t = grown;
	}
	plan = shard_plan_new(world, n);
	if (!plan) {
		free(t);
		return -ENOMEM;
	}
	plan->n_skipped = (size_t)nonpad - len;
	rc = shard_deal(plan, spec->layout, spec->balance, t, len, weight,
			weight_ctx);
	if (rc) {
		shard_plan_free(plan);
		return rc;
	}
	*out = plan;
	return 0;
}

int shard_plan_build(const struct shard_spec *spec, size_t n,
		     shard_weight_fn weight, const void *weight_ctx,
		     struct shard_plan **out)
{
	if (!out || shard_spec_check(spec))
		return -EINVAL;
	if (spec->layout == SHARD_LAYOUT_BYTES && !weight)
		return -EINVAL;
	if (n > UINT32_MAX || spec->world_size > UINT32_MAX)
		return -EOVERFLOW;
	if (spec->skip == 0 && spec->skip_world == 0)
		return shard_plan_base(spec, n, weight, weight_ctx, out);
	return shard_plan_skip(spec, n, weight, weight_ctx, out);
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
