/*
 * frame: see frame.h. The scanner is a small state machine per format,
 * fed the decoded bytes (straight, or from rec_gunzip's callback). TFRecord
 * and JSONL are here; tar is in frame_tar.c. Every error is sticky, with
 * its message in s->err: the framer's (decoded offset), gunzip's
 * (compressed offset), or the emit callback's stop.
 */
#include "records/frame.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records/frame_tar.h"
#include "records/gunzip.h"
#include "util/crc32c.h"
#include "util/le.h"

#define TF_HEADER_LEN 12 /* LE64 length, masked CRC of it */
#define TF_FOOTER_LEN 4	 /* masked CRC of the data */

enum tf_state { TF_HEADER, TF_DATA, TF_FOOTER };

struct rec_scan {
	enum rec_format base;
	rec_emit_fn emit;
	void *arg;
	struct rec_gunzip *gz; /* gzip formats, else NULL */
	struct rec_tar *tar;   /* tar, else NULL */
	uint64_t off;	       /* decoded bytes framed */
	uint64_t records;
	bool nl_added;
	bool finished;
	int rc; /* sticky error, 0 if none */
	char err[512];
	/* TFRecord */
	enum tf_state tf_state;
	unsigned char tf_buf[TF_HEADER_LEN];
	size_t tf_have;	   /* bytes of the header or footer in tf_buf */
	uint64_t tf_start; /* offset of the frame being read */
	uint64_t tf_len;   /* its data length */
	uint64_t tf_left;  /* data bytes still to come */
	uint32_t tf_crc;   /* CRC-32C of the data so far */
	/* JSONL */
	uint64_t line_start;
};

static int scan_fail(struct rec_scan *s, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int scan_fail(struct rec_scan *s, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(s->err, sizeof(s->err),
		     "offset %llu: ", (unsigned long long)off);
	va_start(ap, fmt);
	vsnprintf(s->err + n, sizeof(s->err) - (size_t)n, fmt, ap);
	va_end(ap);
	s->rc = -EBADMSG;
	return s->rc;
}

uint32_t rec_tfrecord_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* Every record goes out through here: a stop by the callback is recorded
 * as the scan's error, told apart from a framing error. */
static int scan_emit(void *arg, uint64_t off, uint64_t len, const char *key,
		     size_t key_len)
{
	struct rec_scan *s = arg;
	int rc = s->emit(s->arg, off, len, key, key_len);

	if (rc < 0) {
		snprintf(s->err, sizeof(s->err),
			 "offset %llu: stopped by the record callback (%d)",
			 (unsigned long long)off, rc);
		s->rc = rc;
		return rc;
	}
	s->records++;
	return 0;
}

int rec_scan_new(enum rec_format f, rec_emit_fn emit, void *arg,
		 struct rec_scan **out)
{
	struct rec_scan *s;
	int rc;

	if ((unsigned)f >= REC_FORMAT_COUNT || emit == NULL)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->base = rec_format_base(f);
	s->emit = emit;
	s->arg = arg;
	rc = rec_format_gzip(f) ? rec_gunzip_new(&s->gz) : 0;
	if (rc == 0 && s->base == REC_FORMAT_TAR)
		rc = rec_tar_new(scan_emit, s, s->err, sizeof(s->err), &s->tar);
	if (rc < 0) {
		rec_scan_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void rec_scan_free(struct rec_scan *s)
{
	if (s == NULL)
		return;
	rec_gunzip_free(s->gz);
	rec_tar_free(s->tar);
	free(s);
}

/* A TFRecord's masked CRC-32C of its what ("length" or "data"), stored, held
 * against crc, the one computed over it: 0, or the scan's error. */
static int tf_crc_check(struct rec_scan *s, const char *what, uint32_t stored,
			uint32_t crc)
{
	uint32_t computed = rec_tfrecord_mask(crc);

	if (stored == computed)
		return 0;
	return scan_fail(s, s->tf_start,
			 "record %llu: %s CRC mismatch (stored 0x%08x, "
			 "computed 0x%08x)",
			 (unsigned long long)s->records, what, stored,
			 computed);
}

/* The 12 header bytes are in: check the length's CRC and bound. */
static int tf_header(struct rec_scan *s)
{
	int rc = tf_crc_check(s, "length", le_get32(s->tf_buf + 8),
			      crc32c_update(0, s->tf_buf, 8));

	if (rc < 0)
		return rc;
	s->tf_len = le_get64(s->tf_buf);
	if (s->tf_len > REC_TFRECORD_LEN_MAX)
		return scan_fail(s, s->tf_start,
				 "record %llu: record length %llu too large "
				 "(at most %llu)",
				 (unsigned long long)s->records,
				 (unsigned long long)s->tf_len,
				 (unsigned long long)REC_TFRECORD_LEN_MAX);
	s->tf_left = s->tf_len;
	s->tf_crc = 0;
	s->tf_have = 0;
	s->tf_state = s->tf_len > 0 ? TF_DATA : TF_FOOTER;
	return 0;
}

/* The 4 footer bytes are in: check the data's CRC, emit the frame. */
static int tf_footer(struct rec_scan *s)
{
	int rc = tf_crc_check(s, "data", le_get32(s->tf_buf), s->tf_crc);

	if (rc < 0)
		return rc;
	s->tf_state = TF_HEADER;
	s->tf_have = 0;
	return scan_emit(s, s->tf_start,
			 TF_HEADER_LEN + s->tf_len + TF_FOOTER_LEN, NULL, 0);
}

static int tf_feed(struct rec_scan *s, const unsigned char *p, size_t len)
{
	size_t k;
	int rc;

	while (len > 0) {
		rc = 0;
		switch (s->tf_state) {
		case TF_HEADER:
		case TF_FOOTER: {
			size_t want = s->tf_state == TF_HEADER ? TF_HEADER_LEN
							       : TF_FOOTER_LEN;

			if (s->tf_state == TF_HEADER && s->tf_have == 0)
				s->tf_start = s->off;
			k = want - s->tf_have;
			k = k < len ? k : len;
			memcpy(s->tf_buf + s->tf_have, p, k);
			s->tf_have += k;
			s->off += k;
			if (s->tf_have == want)
				rc = s->tf_state == TF_HEADER ? tf_header(s)
							      : tf_footer(s);
			break;
		}
		default: /* TF_DATA */
			k = len < s->tf_left ? len : (size_t)s->tf_left;
			s->tf_crc = crc32c_update(s->tf_crc, p, k);
			s->tf_left -= k;
			s->off += k;
			if (s->tf_left == 0)
				s->tf_state = TF_FOOTER;
			break;
		}
		if (rc < 0)
			return rc;
		p += k;
		len -= k;
	}
	return 0;
}

static int tf_finish(struct rec_scan *s)
{
	if (s->tf_state == TF_HEADER && s->tf_have == 0)
		return 0;
	if (s->tf_state == TF_HEADER)
		return scan_fail(s, s->tf_start,
				 "record %llu: truncated: header cut short "
				 "(%zu of %d bytes)",
				 (unsigned long long)s->records, s->tf_have,
				 TF_HEADER_LEN);
	return scan_fail(
		s, s->tf_start,
		"record %llu: truncated: length %llu but %llu bytes "
		"left (the data and its 4-byte CRC need %llu)",
		(unsigned long long)s->records, (unsigned long long)s->tf_len,
		(unsigned long long)(s->off - s->tf_start - TF_HEADER_LEN),
		(unsigned long long)s->tf_len + TF_FOOTER_LEN);
}

static int jsonl_feed(struct rec_scan *s, const unsigned char *p, size_t len)
{
	const unsigned char *nl;
	int rc;

	while ((nl = memchr(p, '\n', len)) != NULL) {
		size_t k = (size_t)(nl - p) + 1;

		s->off += k;
		rc = scan_emit(s, s->line_start, s->off - s->line_start, NULL,
			       0);
		if (rc < 0)
			return rc;
		s->line_start = s->off;
		p += k;
		len -= k;
	}
	s->off += len;
	return 0;
}

static int jsonl_finish(struct rec_scan *s)
{
	if (s->off == s->line_start)
		return 0;
	s->nl_added = true;
	return scan_emit(s, s->line_start, s->off - s->line_start, NULL, 0);
}

/* The decoded bytes, whoever decoded them. */
static int scan_decoded(void *arg, const void *buf, size_t len)
{
	struct rec_scan *s = arg;
	int rc;

	switch (s->base) {
	case REC_FORMAT_TFRECORD:
		return tf_feed(s, buf, len);
	case REC_FORMAT_JSONL:
		return jsonl_feed(s, buf, len);
	default: /* REC_FORMAT_TAR */
		rc = rec_tar_feed(s->tar, buf, len);
		s->off += len; /* counted whole: an error stops the scan */
		if (rc < 0 && s->rc == 0)
			s->rc = rc;
		return rc;
	}
}

int rec_scan_feed(struct rec_scan *s, const void *buf, size_t len)
{
	int rc;

	if (s->rc != 0)
		return s->rc;
	if (s->finished)
		return scan_fail(s, s->off, "data fed after the end");
	if (len == 0)
		return 0;
	if (s->gz == NULL)
		return scan_decoded(s, buf, len);
	rc = rec_gunzip_feed(s->gz, buf, len, scan_decoded, s);
	if (rc < 0 && s->rc == 0) {
		/* gunzip's own error, not the framer's */
		snprintf(s->err, sizeof(s->err), "%s", rec_gunzip_error(s->gz));
		s->rc = rc;
	}
	return rc;
}

int rec_scan_finish(struct rec_scan *s, struct rec_scan_result *res)
{
	int rc = 0;

	if (s->rc != 0)
		return s->rc;
	if (s->finished)
		return scan_fail(s, s->off, "finished twice");
	s->finished = true;
	if (s->gz != NULL) {
		rc = rec_gunzip_finish(s->gz);
		if (rc < 0) {
			snprintf(s->err, sizeof(s->err), "%s",
				 rec_gunzip_error(s->gz));
			s->rc = rc;
			return rc;
		}
	}
	switch (s->base) {
	case REC_FORMAT_TFRECORD:
		rc = tf_finish(s);
		break;
	case REC_FORMAT_JSONL:
		rc = jsonl_finish(s);
		break;
	default:
		rc = rec_tar_finish(s->tar);
		if (rc < 0 && s->rc == 0)
			s->rc = rc;
		break;
	}
	if (rc < 0)
		return rc;
	if (res != NULL) {
		res->records = s->records;
		res->decoded_size = s->off;
		res->nl_added = s->nl_added;
		res->skipped = s->tar != NULL ? rec_tar_skipped(s->tar) : 0;
	}
	return 0;
}

const char *rec_scan_error(const struct rec_scan *s)
{
	return s->err;
}
