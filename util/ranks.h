/*
 * ranks: the one rank-list grammar of shardfs, shared by [shard] ranks in a
 * config, `shardfs plan --rank` and `shardfs warm --rank`, so that all three
 * accept the same lists and reject them with the same words.
 *
 *   list  = item *( "," item )
 *   item  = rank [ "-" rank ]        inclusive range, lo <= hi
 *   rank  = 1*DIGIT                  decimal, at most 2^64 - 1
 *
 * White space around ranks, '-' and ',' is ignored ("0-3, 8" = "0-3,8").
 * Ranks may repeat and ranges overlap; the result is sorted with
 * overlapping and adjacent ranges merged ("3,1,2" is 1-3). An empty list,
 * an empty item ("1,,2", "1,"), a sign, hex, or any other character is an
 * error. Pure: no I/O, no globals.
 */
#ifndef SHARDFS_RANKS_H
#define SHARDFS_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An inclusive range of ranks. */
struct ranks_range {
	uint64_t lo, hi;
};

/* Parses s. Returns 0 and sets *out (free() it; at least one range) and
 * *n_out, or -EINVAL with the reason in why (never longer than whylen,
 * always terminated; whylen may be 0):
 *   "empty rank list"
 *   "range 15-8 ends before it starts"
 *   "rank out of range (more than 64 bits)"
 *   "not a list of ranks and ranges such as 0,2,8-15"
 * or -ENOMEM. On failure *out and *n_out are untouched. */
int ranks_parse(const char *s, struct ranks_range **out, size_t *n_out,
		char *why, size_t whylen);

/* 0 if every rank of r[0..n) is below world_size, else -ERANGE with
 * "rank H is not below world_size W" (H the highest rank) in why. */
int ranks_check_world(const struct ranks_range *r, size_t n,
		      uint64_t world_size, char *why, size_t whylen);

/* True if rank is in r[0..n) (sorted and merged, as ranks_parse makes
 * them). O(log n). */
bool ranks_contains(const struct ranks_range *r, size_t n, uint64_t rank);

/* The number of ranks in r[0..n), saturating at UINT64_MAX. */
uint64_t ranks_count(const struct ranks_range *r, size_t n);

/* Writes r[0..n) in the grammar ("0-3,8"; "" for n == 0) to buf, which
 * is always terminated; a list longer than cap ends in "...". */
void ranks_format(const struct ranks_range *r, size_t n, char *buf, size_t cap);

#endif
