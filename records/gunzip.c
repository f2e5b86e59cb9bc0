/*
 * gunzip: see gunzip.h. One zlib inflate stream in gzip-only mode
 * (windowBits 16 + MAX_WBITS: no zlib or raw fallback), reset at each
 * member's end; zlib checks the header, the deflate data and the trailer's
 * CRC-32 and ISIZE. Output goes through a fixed buffer, so memory is
 * zlib's window plus REC_GUNZIP_BUF whatever the member sizes.
 */
#include "records/gunzip.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define REC_GUNZIP_BUF (64 * 1024)

struct rec_gunzip {
	z_stream z;
	bool in_member;	       /* bytes of a member fed, its end not seen */
	uint64_t consumed;     /* compressed bytes consumed */
	uint64_t member_start; /* compressed offset of the current member */
	uint64_t members;      /* members completed */
	uint64_t decoded;
	int rc; /* sticky error, 0 if none */
	char err[200];
	unsigned char buf[REC_GUNZIP_BUF];
};

static int gz_fail(struct rec_gunzip *g, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int gz_fail(struct rec_gunzip *g, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->err, sizeof(g->err), fmt, ap);
	va_end(ap);
	g->rc = rc;
	return rc;
}

int rec_gunzip_new(struct rec_gunzip **out)
{
	struct rec_gunzip *g = calloc(1, sizeof(*g));

	if (g == NULL)
		return -ENOMEM;
	if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) {
		free(g);
		return -ENOMEM;
	}
	*out = g;
	return 0;
}

/* A Z_DATA_ERROR in words. A header zlib does not take as gzip is "not
 * gzip" at the start of the stream, and trailing garbage after a member. */
static int gz_data_error(struct rec_gunzip *g)
{
	const char *msg = g->z.msg != NULL ? g->z.msg : "corrupt data";
	unsigned long long at = (unsigned long long)g->member_start;

	if (strcmp(msg, "incorrect header check") == 0) {
		if (g->members == 0)
			return gz_fail(g, -EBADMSG,
				       "compressed offset %llu: not gzip "
				       "(no gzip magic)",
				       at);
		return gz_fail(g, -EBADMSG,
			       "compressed offset %llu: data after gzip member "
			       "%llu is not a gzip member",
			       at, (unsigned long long)g->members - 1);
	}
	/* Named by the member's start: where zlib notices the damage
	 * depends on how the input was split. */
	return gz_fail(g, -EBADMSG,
		       "gzip member %llu (at compressed offset %llu): "
		       "corrupt: %s",
		       (unsigned long long)g->members,
		       (unsigned long long)g->member_start, msg);
}

int rec_gunzip_feed(struct rec_gunzip *g, const void *in, size_t len,
		    rec_gunzip_out_fn out, void *arg)
{
	const unsigned char *p = in;
	int zrc, rc;

	if (g->rc != 0)
		return g->rc;
	for (;;) {
		uInt give = len > UINT_MAX ? UINT_MAX : (uInt)len;
		size_t used, made;

		if (!g->in_member) {
			if (len == 0)
				return 0;
			g->in_member = true;
			g->member_start = g->consumed;
		}
		g->z.next_in = (Bytef *)p;
		g->z.avail_in = give;
		g->z.next_out = g->buf;
		g->z.avail_out = sizeof(g->buf);
		zrc = inflate(&g->z, Z_NO_FLUSH);
		used = give - g->z.avail_in;
		made = sizeof(g->buf) - g->z.avail_out;
		p += used;
		len -= used;
		g->consumed += used;
		if (made > 0) {
			g->decoded += made;
			rc = out(arg, g->buf, made);
			if (rc < 0)
				return gz_fail(g, rc,
					       "stopped by the reader (%d)",
					       rc);
		}
		switch (zrc) {
		case Z_STREAM_END:
			g->members++;
			g->in_member = false;
			if (inflateReset(&g->z) != Z_OK)
				return gz_fail(g, -EBADMSG,
					       "inflateReset failed");
			continue;
		case Z_OK:
			/* More input to give, or output zlib still holds. */
			if (len > 0 || g->z.avail_out == 0)
				continue;
			return 0;
		case Z_BUF_ERROR: /* no progress possible: needs input */
			if (len == 0)
				return 0;
			if (used > 0 || made > 0)
				continue;
			return gz_fail(
				g, -EBADMSG,
				"compressed offset %llu: gzip: no progress",
				(unsigned long long)g->consumed);
		case Z_DATA_ERROR:
			return gz_data_error(g);
		case Z_MEM_ERROR:
			return gz_fail(g, -ENOMEM, "out of memory");
		default: /* Z_NEED_DICT, Z_STREAM_ERROR: not in gzip */
			return gz_fail(g, -EBADMSG,
				       "compressed offset %llu: gzip: %s",
				       (unsigned long long)g->consumed,
				       g->z.msg != NULL ? g->z.msg : "error");
		}
	}
}

int rec_gunzip_finish(struct rec_gunzip *g)
{
	if (g->rc != 0)
		return g->rc;
	if (g->in_member)
		return gz_fail(g, -EBADMSG,
			       "compressed offset %llu: gzip member %llu "
			       "(at compressed offset %llu) cut short",
			       (unsigned long long)g->consumed,
			       (unsigned long long)g->members,
			       (unsigned long long)g->member_start);
	if (g->members == 0)
		return gz_fail(g, -EBADMSG,
			       "compressed offset 0: not gzip (empty input)");
	return 0;
}

const char *rec_gunzip_error(const struct rec_gunzip *g)
{
	return g->err;
}

void rec_gunzip_stats_get(const struct rec_gunzip *g,
			  struct rec_gunzip_stats *out)
{
	out->decoded = g->decoded;
	out->consumed = g->consumed;
	out->members = g->members;
}

void rec_gunzip_free(struct rec_gunzip *g)
{
	if (g == NULL)
		return;
	inflateEnd(&g->z);
	free(g);
}
