/*
 * gunzip: a streaming gzip decoder for record files (docs/RECORDS.md §1).
 *
 * A stream is one or more gzip members back to back (RFC 1952, what
 * `cat a.gz b.gz` gives): a member ends, the next starts at the next byte.
 * Strict: anything after a member that is not another member (trailing
 * zero bytes included) is an error, as is an empty input or one that stops
 * inside a member. zlib checks each member's CRC-32 and ISIZE. Input may
 * come in any split; the decoded bytes are the same. Pure: no I/O.
 */
#ifndef SHARDFS_RECORDS_GUNZIP_H
#define SHARDFS_RECORDS_GUNZIP_H

#include <stddef.h>
#include <stdint.h>

struct rec_gunzip;

/* Receives decoded bytes, in order; buf is valid only during the call.
 * Returns 0, or a negative errno that stops rec_gunzip_feed (which then
 * returns it). */
typedef int (*rec_gunzip_out_fn)(void *arg, const void *buf, size_t len);

/* A decoder at the start of a stream. Returns 0 or -ENOMEM. */
int rec_gunzip_new(struct rec_gunzip **out);

/* Decodes the next len compressed bytes, calling out for what they decode
 * to. Returns 0, out's error, -ENOMEM, or -EBADMSG (corrupt data:
 * rec_gunzip_error() says what, at which compressed offset). An error is
 * sticky: later calls return it again. */
int rec_gunzip_feed(struct rec_gunzip *g, const void *in, size_t len,
		    rec_gunzip_out_fn out, void *arg);

/* End of input. Returns 0, or -EBADMSG if the input stopped inside a
 * member or held no member at all (an empty input: "not gzip"), or the
 * sticky error of an earlier call. */
int rec_gunzip_finish(struct rec_gunzip *g);

/* What was wrong, e.g. "compressed offset 1234: gzip member cut short";
 * "" if nothing. Valid until the next call or rec_gunzip_free. */
const char *rec_gunzip_error(const struct rec_gunzip *g);

/* How far a stream has come. */
struct rec_gunzip_stats {
	uint64_t decoded;  /* bytes decoded so far, over all members */
	uint64_t consumed; /* compressed bytes consumed so far */
	uint64_t members;  /* members completed so far (trailer checked) */
};

/* Fills *out with g's counts so far. */
void rec_gunzip_stats_get(const struct rec_gunzip *g,
			  struct rec_gunzip_stats *out);

/* NULL is a no-op. */
void rec_gunzip_free(struct rec_gunzip *g);

#endif
