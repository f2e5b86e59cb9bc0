/*
 * fuzz_records: the record framing (records/frame.c, frame_tar.c,
 * gunzip.c).
 *
 * The first byte chooses the format (mod REC_FORMAT_COUNT), the second
 * seeds how the rest, the object, is split into feeds. The object is
 * scanned whole and split: both must agree (result, error, records), and
 * every record must lie inside the decoded stream, each after the one
 * before; without gzip the decoded size is the object's.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "records/frame.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_RECS_MAX 4096

struct fuzz_run {
	int rc;
	struct rec_scan_result res;
	char err[600];
	size_t n; /* records emitted (all counted, the first MAX kept) */
	uint64_t off[FUZZ_RECS_MAX], len[FUZZ_RECS_MAX];
	uint64_t end; /* of the last record */
	bool tar;
};

static int fuzz_emit(void *arg, uint64_t off, uint64_t len, const char *key,
		     size_t key_len)
{
	struct fuzz_run *r = arg;

	FUZZ_CHECK(off >= r->end);
	FUZZ_CHECK(off + len >= off);
	/* A tar sample has a key; the others have none. */
	FUZZ_CHECK(r->tar ? key != NULL || key_len == 0 : key == NULL);
	FUZZ_CHECK(r->tar || key_len == 0);
	if (key_len > 0) {
		/* Read every byte of the key: ASan checks it is all there. */
		volatile unsigned char sum = 0;
		size_t i;

		for (i = 0; i < key_len; i++)
			sum ^= (unsigned char)key[i];
		(void)sum;
	}
	if (r->n < FUZZ_RECS_MAX) {
		r->off[r->n] = off;
		r->len[r->n] = len;
	}
	r->n++;
	r->end = off + len;
	return 0;
}

static void fuzz_scan(enum rec_format f, const uint8_t *p, size_t n,
		      uint32_t seed, struct fuzz_run *r)
{
	struct rec_scan *s;
	size_t at = 0;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->tar = rec_format_base(f) == REC_FORMAT_TAR;
	FUZZ_CHECK(rec_scan_new(f, fuzz_emit, r, &s) == 0);
	while (rc == 0 && at < n) {
		size_t k = n - at;

		if (seed != 0) {
			seed = seed * 1103515245u + 12345u;
			k = (seed >> 16) % (seed & 0x100 ? 700 : 4);
			k = k < n - at ? k : n - at;
		}
		rc = rec_scan_feed(s, p + at, k);
		at += k;
	}
	if (rc == 0)
		rc = rec_scan_finish(s, &r->res);
	else
		FUZZ_CHECK(rec_scan_finish(s, &r->res) == rc);
	r->rc = rc;
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG);
	FUZZ_CHECK((rc == 0) == (rec_scan_error(s)[0] == '\0'));
	strncpy(r->err, rec_scan_error(s), sizeof(r->err) - 1);
	rec_scan_free(s);
	if (rc == 0) {
		FUZZ_CHECK(r->res.records == r->n);
		FUZZ_CHECK(r->end <= r->res.decoded_size);
		if (!rec_format_gzip(f))
			FUZZ_CHECK(r->res.decoded_size == n);
		if (rec_format_base(f) != REC_FORMAT_JSONL)
			FUZZ_CHECK(!r->res.nl_added);
		if (!r->tar)
			FUZZ_CHECK(r->res.skipped == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fuzz_run whole, split;
	enum rec_format f;
	size_t i;

	if (size < 2)
		return 0;
	f = (enum rec_format)(data[0] % REC_FORMAT_COUNT);
	fuzz_scan(f, data + 2, size - 2, 0, &whole);
	fuzz_scan(f, data + 2, size - 2, data[1] | 0x10000u, &split);
	FUZZ_CHECK(whole.rc == split.rc);
	FUZZ_CHECK(strcmp(whole.err, split.err) == 0);
	FUZZ_CHECK(whole.n == split.n);
	for (i = 0; i < whole.n && i < FUZZ_RECS_MAX; i++) {
		FUZZ_CHECK(whole.off[i] == split.off[i]);
		FUZZ_CHECK(whole.len[i] == split.len[i]);
	}
	if (whole.rc == 0) {
		FUZZ_CHECK(whole.res.decoded_size == split.res.decoded_size);
		FUZZ_CHECK(whole.res.nl_added == split.res.nl_added);
		FUZZ_CHECK(whole.res.skipped == split.res.skipped);
	}
	return 0;
}
