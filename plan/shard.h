/*
 * shard: the sharding plan, spec "shardfs-shard v1" (docs/DESIGN.md §5).
 *
 * Pure: no I/O, no globals, no clock. Every node that feeds the same
 * manifest (N items in canonical order, item i weighing weights(i)) and the
 * same spec computes the same plan, bit for bit. All arithmetic is uint64,
 * wrapping, exactly as the spec writes it, except that the bytes layout
 * sums weights exactly (128-bit) rather than modulo 2^64: the same plan
 * whenever the total weight fits in uint64, and still balanced beyond.
 *
 * Memory: a plan holds R' uint32 item indices (R' = N, N minus the dropped
 * tail, or N plus pads) plus, for the strided layout, one N scratch array
 * while building: at most 8 bytes per item, plus 16 bytes per rank.
 * reshuffle = local permutes the epoch-0 plan in place: nothing more. A
 * skip plan (skip > 0 or skip_world set) first builds the plan on W0 =
 * skip_world ranks, then the sequence T (at most N items) out of it, then
 * the final plan from T: the peak is still 8 bytes per item (W0's plan and
 * T, or T and the final plan), plus 16 bytes per rank of W0 and of W;
 * time O(N + W0 + W).
 */
#ifndef SHARDFS_SHARD_H
#define SHARDFS_SHARD_H

#include <stddef.h>
#include <stdint.h>

#define SHARD_SPEC_VERSION "shardfs-shard v1"

enum shard_order {
	SHARD_ORDER_SHUFFLE = 0, /* default */
	SHARD_ORDER_NONE,
};

enum shard_layout {
	SHARD_LAYOUT_STRIDED = 0, /* default */
	SHARD_LAYOUT_CONTIGUOUS,
	SHARD_LAYOUT_BYTES, /* only with SHARD_BALANCE_NONE */
};

enum shard_balance {
	SHARD_BALANCE_NONE = 0, /* default */
	SHARD_BALANCE_DROP,
	SHARD_BALANCE_PAD,
};

enum shard_reshuffle {
	SHARD_RESHUFFLE_GLOBAL = 0, /* default: a new permutation of all items
				     * each epoch */
	SHARD_RESHUFFLE_LOCAL,	    /* epoch 0's assignment of items to ranks,
				     * reshuffled within each rank */
};

/* Zero-initialized new fields (reshuffle, skip, skip_world) give v1's plan,
 * bit for bit. */
struct shard_spec {
	uint64_t world_size; /* >= 1 */
	uint64_t seed;
	uint64_t epoch;
	enum shard_order order;
	enum shard_layout layout;
	enum shard_balance balance;
	enum shard_reshuffle reshuffle;
	/* K: positions of the epoch's sequence already consumed (0: none) */
	uint64_t skip;
	/* the world size K was counted on, <= UINT32_MAX; 0 = world_size */
	uint64_t skip_world;
};

/* Spec primitives, exported so the test vectors can check them. */
uint64_t shard_mix64(uint64_t z);
/* Advances *state by GAMMA and returns mix64 of the new state. */
uint64_t shard_splitmix64_next(uint64_t *state);
/* derive(v[0], ..., v[n-1]). */
uint64_t shard_derive(const uint64_t *v, size_t n);
/* Lemire's unbiased bounded draw in [0, n) from the splitmix64 *state;
 * n >= 1 (n = 0 returns 0). */
uint64_t shard_bounded(uint64_t *state, uint64_t n);

/* Names for the enums, as written in the config and the plan file: the
 * name of value v is names[v]; NULL-terminated. */
extern const char *const shard_order_names[];
extern const char *const shard_layout_names[];
extern const char *const shard_balance_names[];
extern const char *const shard_reshuffle_names[];

/* The same by value; NULL for a value out of range (shard_spec_check
 * rejects those). */
const char *shard_order_name(enum shard_order o);
const char *shard_layout_name(enum shard_layout l);
const char *shard_balance_name(enum shard_balance b);
const char *shard_reshuffle_name(enum shard_reshuffle r);

/* Returns NULL if spec is valid, else a static message naming the problem
 * (e.g. "world_size must be at least 1"). */
const char *shard_spec_check(const struct shard_spec *spec);

/* Weight of item i (its size in bytes); only the bytes layout calls it,
 * twice per item, and both calls must return the same value. */
typedef uint64_t (*shard_weight_fn)(const void *ctx, size_t i);

struct shard_plan {
	uint64_t world_size;
	size_t n_items; /* N, the manifest's item count */
	/* Manifest indices, rank 0's first, each rank's in epoch order
	 * (the order of S; of T for a skip plan). Rank r owns
	 * items[rank_start[r] .. rank_start[r+1]); the last rank_pad[r] of
	 * those are pad items. */
	uint32_t *items;
	size_t *rank_start; /* world_size + 1 entries */
	size_t *rank_pad;   /* world_size entries */
	/* Items in no rank, not skipped: balance = drop's (on W0 and on W
	 * for a skip plan). */
	size_t n_dropped;
	/* A skip plan's items before position K of the sequence (pads not
	 * counted); else 0. n_items = n_skipped + n_dropped + the plan's
	 * non-pad positions. */
	size_t n_skipped;
};

/* Computes the plan for all ranks in O(N + W) time (a skip plan: O(N + W +
 * W0)). weight is called only for the bytes layout and may be NULL
 * otherwise.
 * Returns 0 and sets *out (free with shard_plan_free), or
 *   -EINVAL     spec or out NULL, spec invalid (see shard_spec_check), or
 *               layout bytes with weight NULL;
 *   -EOVERFLOW  N, world_size or R' (the plan's length, pads included;
 *               for a skip plan also that of W0's plan) exceeds
 *               UINT32_MAX;
 *   -ENOMEM.
 * On failure *out is untouched and nothing is leaked. */
int shard_plan_build(const struct shard_spec *spec, size_t n,
		     shard_weight_fn weight, const void *weight_ctx,
		     struct shard_plan **out);

/* Frees a plan; NULL is a no-op. */
void shard_plan_free(struct shard_plan *plan);

/* Rank r's items: sets *items (borrowed from plan, valid until
 * shard_plan_free), *count (including pads) and *npad, the pads being the
 * last *npad of the items. r >= world_size gives NULL, 0, 0. */
void shard_plan_rank(const struct shard_plan *plan, uint64_t r,
		     const uint32_t **items, size_t *count, size_t *npad);

#endif
