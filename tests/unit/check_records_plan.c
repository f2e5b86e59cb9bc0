/*
 * check_records_plan: the record index (records/rindex.h: builder, file,
 * digest, loader) and the record plan (records/rplan.h: ranks, parts,
 * byte layout), on real files in a temp dir.
 *
 * The loader's every refusal is checked with its message; every byte of a
 * small index file is flipped once and must make the load fail. The plan
 * is checked against a naive construction of each part's bytes over
 * random indexes, and against the vectors of docs/RECORDS.md §2, which
 * tests/integration/shardspec.py computes independently (and which this
 * suite also runs on the same file when python3 is there).
 */
#include "records/rindex.h"
#include "records/rplan.h"

#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plan/manifest.h"
#include "tests/unit/unit.h"
#include "util/log.h"
#include "util/sha256.h"

static char tmpdir[64];

/* --- helpers ------------------------------------------------------------ */

struct obj_def {
	const char *key;
	uint64_t size;
	const char *etag;
};

static struct manifest *make_manifest(const struct obj_def *d, size_t n)
{
	struct manifest *m = manifest_new();
	size_t i;

	ck_assert_ptr_nonnull(m);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(manifest_add(m, d[i].key, strlen(d[i].key),
					      d[i].size, d[i].etag,
					      strlen(d[i].etag), 0),
				 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	return m;
}

static char *path_in_tmp(const char *name)
{
	static char buf[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", tmpdir, name);
	return buf[k];
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void write_all(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

static void write_index(const struct rindex *ri, const char *path)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(rindex_write(ri, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

/* Log lines go to a file the test reads back. */
static const char *log_path(void)
{
	return path_in_tmp("log");
}

static void log_capture(void)
{
	ck_assert_int_eq(log_file_open(log_path()), 0);
	log_set_sink(LOG_SINK_FILE);
	ck_assert_int_eq(truncate(log_path(), 0), 0);
}

static char *log_take(void)
{
	size_t n;
	char *s = read_all(log_path(), &n);

	ck_assert_int_eq(truncate(log_path(), 0), 0);
	return s;
}

/* The small index of the round trip: objects a (3 records, newline added
 * to the last), b (a key needing escapes; a gap), c (not jsonl: skipped),
 * d (no records). */
static const struct obj_def small_objs[] = {
	{ "a.jsonl", 60, "e1" },
	{ "b\tx%.jsonl", 7, "e 2" },
	{ "c.txt", 5, "e3" },
	{ "d.jsonl", 0, "e4" },
};

static struct rindex *small_index(const struct manifest *m)
{
	static const uint64_t a_off[] = { 0, 10, 30 }, b_off[] = { 0, 4 };
	static const uint32_t a_len[] = { 10, 20, 30 }, b_len[] = { 3, 3 };
	struct rindex *ri;

	ck_assert_int_eq(rindex_new(REC_FORMAT_JSONL, m, &ri), 0);
	ck_assert_int_eq(rindex_add_object(ri, 0, 60, true, a_off, a_len, 3),
			 0);
	ck_assert_int_eq(rindex_add_object(ri, 1, 7, false, b_off, b_len, 2),
			 0);
	ck_assert_int_eq(rindex_add_object(ri, 3, 0, false, NULL, NULL, 0), 0);
	ck_assert_int_eq(rindex_finish(ri), 0);
	return ri;
}

/* The canonical body of small_index (every line before "end"). */
static char *small_body(const struct manifest *m)
{
	char *s;

	ck_assert_int_ge(asprintf(&s,
				  "# shardfs-records v1\n"
				  "format jsonl\n"
				  "manifest %s\n"
				  "objects 3 records 5 skipped 1\n"
				  "o a.jsonl\te1\t60\t60\t3\tn\n"
				  "10\n"
				  "20\n"
				  "30\n"
				  "o b%%09x%%25.jsonl\te 2\t7\t7\t2\t-\n"
				  "3\n"
				  "@4 3\n"
				  "o d.jsonl\te4\t0\t0\t0\t-\n",
				  m->digest),
			 0);
	return s;
}

/* body plus its end line, as a file. */
static char *with_end(const char *body, size_t *len)
{
	char hex[SHA256_HEX_LEN + 1], *s;
	int n;

	ck_assert_int_eq(sha256_hex(body, strlen(body), hex), 0);
	n = asprintf(&s, "%send %s\n", body, hex);
	ck_assert_int_ge(n, 0);
	*len = (size_t)n;
	return s;
}

/* A copy of s with the first occurrence of from replaced by to. */
static char *replace(const char *s, const char *from, const char *to)
{
	const char *p = strstr(s, from);
	char *out;

	ck_assert_msg(p != NULL, "'%s' not in the body", from);
	ck_assert_int_ge(asprintf(&out, "%.*s%s%s", (int)(p - s), s, to,
				  p + strlen(from)),
			 0);
	return out;
}

static void assert_equal_index(const struct rindex *a, const struct rindex *b)
{
	size_t i;

	ck_assert_int_eq(a->format, b->format);
	ck_assert_str_eq(a->manifest_digest, b->manifest_digest);
	ck_assert_str_eq(a->digest, b->digest);
	ck_assert_uint_eq(a->n_objects, b->n_objects);
	ck_assert_uint_eq(a->n_records, b->n_records);
	ck_assert_uint_eq(a->skipped_objects, b->skipped_objects);
	for (i = 0; i < a->n_objects; i++) {
		ck_assert_uint_eq(a->objects[i].item, b->objects[i].item);
		ck_assert_uint_eq(a->objects[i].decoded_size,
				  b->objects[i].decoded_size);
		ck_assert_uint_eq(a->objects[i].first, b->objects[i].first);
		ck_assert_uint_eq(a->objects[i].count, b->objects[i].count);
		ck_assert_int_eq(a->objects[i].nl_added,
				 b->objects[i].nl_added);
	}
	if (a->n_records) {
		ck_assert_mem_eq(a->rec_off, b->rec_off,
				 a->n_records * sizeof(*a->rec_off));
		ck_assert_mem_eq(a->rec_len, b->rec_len,
				 a->n_records * sizeof(*a->rec_len));
	}
}

/* --- index: round trip and digest --------------------------------------- */

START_TEST(test_roundtrip)
{
	static const struct obj_def objs[4] = {
		{ "a.jsonl", 60, "e1" },
		{ "b\tx%.jsonl", 7, "e 2" },
		{ "c.txt", 5, "e3" },
		{ "d.jsonl", 0, "e4" },
	};
	struct manifest *m = make_manifest(objs, 4);
	struct rindex *ri = small_index(m), *back = NULL;
	char *body = small_body(m), *want, *got, *got2;
	char hex[SHA256_HEX_LEN + 1];
	size_t wlen, glen, g2len;

	write_index(ri, path_in_tmp("small.idx"));
	got = read_all(path_in_tmp("small.idx"), &glen);
	want = with_end(body, &wlen);
	/* The exact canonical bytes, and the digest is theirs before "end". */
	ck_assert_str_eq(got, want);
	ck_assert_int_eq(sha256_hex(body, strlen(body), hex), 0);
	ck_assert_str_eq(ri->digest, hex);
	/* The documented example (docs/RECORDS.md §2), its digests
	 * computed independently (Python's hashlib over the spec's bytes). */
	ck_assert_str_eq(m->digest, "39239d46e85b105bd0e80293e18e4cd8"
				    "3cc39518758be02bbeda3761caf887a2");
	ck_assert_str_eq(ri->digest, "5166104d7ce697ee2132a5721ec64a2b"
				     "b4cfdb64735eed3176e9fa3342a00699");

	ck_assert_int_eq(rindex_load(path_in_tmp("small.idx"), m,
				     REC_FORMAT_JSONL, ri->digest, &back),
			 0);
	assert_equal_index(ri, back);
	ck_assert_uint_eq(back->n_records, 5);
	ck_assert_uint_eq(back->skipped_objects, 1);
	/* Writing what was loaded gives the same bytes again. */
	write_index(back, path_in_tmp("small2.idx"));
	got2 = read_all(path_in_tmp("small2.idx"), &g2len);
	ck_assert_str_eq(got, got2);

	/* Served lengths and objects. */
	ck_assert_uint_eq(rindex_served_len(back, 0), 10);
	ck_assert_uint_eq(rindex_served_len(back, 2), 31);
	ck_assert_uint_eq(rindex_served_len(back, 3), 3);
	ck_assert_uint_eq(rindex_object_of(back, 2)->item, 0);
	ck_assert_uint_eq(rindex_object_of(back, 3)->item, 1);
	ck_assert_uint_eq(rindex_object_of(back, 4)->item, 1);
	ck_assert_ptr_null(rindex_object_of(back, 5));

	rindex_free(back);
	rindex_free(ri);
	free(body);
	free(want);
	free(got);
	free(got2);
	manifest_free(m);
}
END_TEST

/* --- index: every refusal, with its message ------------------------------ */

/* Loads text (given its end line unless raw) as jsonl; expects -EINVAL
 * and a logged message containing want1 and want2 (NULL: any). */
static void expect_refusal(const char *body, bool raw, const char *sha,
			   const struct manifest *m, const char *want1,
			   const char *want2)
{
	struct rindex *ri = NULL;
	char *text, *msg;
	size_t len;

	if (raw) {
		text = strdup(body);
		len = strlen(body);
	} else {
		text = with_end(body, &len);
	}
	write_all(path_in_tmp("bad.idx"), text, len);
	ck_assert_int_eq(rindex_load(path_in_tmp("bad.idx"), m,
				     REC_FORMAT_JSONL, sha, &ri),
			 -EINVAL);
	ck_assert_ptr_null(ri);
	msg = log_take();
	ck_assert_msg(strstr(msg, path_in_tmp("bad.idx")) != NULL,
		      "message does not name the file: %s", msg);
	ck_assert_msg(!want1 || strstr(msg, want1), "no '%s' in: %s", want1,
		      msg);
	ck_assert_msg(!want2 || strstr(msg, want2), "no '%s' in: %s", want2,
		      msg);
	free(msg);
	free(text);
}

START_TEST(test_refusals)
{
	struct manifest *m = make_manifest(small_objs, 4), *other;
	struct obj_def objs2[4];
	char *body = small_body(m), *b, *b2, *text, *digest_hex;
	struct rindex *ri = NULL;
	size_t len;
	static const struct {
		const char *from, *to, *want1, *want2;
	} cases[] = {
		{ "# shardfs-records v1", "# shardfs-records v2",
		  ":1: first line", NULL },
		{ "format jsonl", "format tar",
		  ":2: index is for tar, the config says jsonl", NULL },
		{ "format jsonl", "format csv", "unknown format 'csv'", NULL },
		{ "objects 3 records 5", "objects 03 records 5",
		  ":4: expected 'objects", NULL },
		{ "skipped 1", "skipped 2", "the manifest has 4 objects",
		  NULL },
		/* Counts that add up to the manifest's but not to the
		 * object lines (with the digest recomputed, even pinned). */
		{ "objects 3 records 5 skipped 1",
		  "objects 4 records 5 skipped 0",
		  ":4: the objects line says 4 objects",
		  "the index has 3 object lines" },
		{ "records 5 ", "records 6 ",
		  "5 records, the objects line says 6", NULL },
		{ "o a.jsonl\te1\t60\t60\t3\tn\n10\n",
		  "o a.jsonl\te1\t60\t60\t3\tn\n010\n",
		  ":6: record length is not a canonical number", NULL },
		{ "10\n20\n30\n", "10\n@10 20\n30\n", ":7: '@10'",
		  "not canonical" },
		{ "10\n20\n30\n", "10\n@5 20\n30\n", ":7: object a.jsonl",
		  "overlaps" },
		{ "10\n20\n30\n", "10\n20\n31\n", ":8: object a.jsonl",
		  "past the object's decoded size" },
		{ "10\n20\n30\n", "10\n20\n",
		  "object a.jsonl has 2 record lines", "count says 3" },
		{ "10\n20\n30\n", "10\n20\n29\n", "object a.jsonl",
		  "last record does not end the stream" },
		{ "10\n20\n30\n", "10\n20\n0\n", "object a.jsonl",
		  "empty record" },
		{ "\t60\t60\t3\tn", "\t60\t60\t3\tx", "flags must be - or n",
		  NULL },
		{ "o a.jsonl\te1", "o a.jsonl\te9", "object a.jsonl: etag e9",
		  "differs from the manifest's" },
		{ "o a.jsonl\te1\t60\t60", "o a.jsonl\te1\t61\t61",
		  "object a.jsonl: size 61, the manifest says 60", NULL },
		{ "o a.jsonl\te1\t60\t60", "o a.jsonl\te1\t60\t61",
		  "decoded size 61 is not its size", NULL },
		{ "o a.jsonl", "o z.jsonl",
		  "object z.jsonl is not a record object", NULL },
		{ "o a.jsonl", "o c.txt", "object c.txt is not a record object",
		  NULL },
		{ "o a.jsonl", "o %61.jsonl",
		  ":5: key is not canonically escaped", NULL },
		{ "o b%09x%25.jsonl", "o b\tx%25.jsonl", ":9: expected 6",
		  NULL },
		{ "objects 3 records 5 skipped 1\no a.jsonl\te1\t60\t60\t3\tn\n"
		  "10\n20\n30\n",
		  "objects 3 records 2 skipped 1\n",
		  "record object of the manifest is missing",
		  "object a.jsonl" },
		{ "o d.jsonl\te4\t0\t0\t0\t-\n", "",
		  "object d.jsonl: record object of the manifest is missing",
		  NULL },
		{ "objects 3 records 5 skipped 1\no a.jsonl\te1\t60\t60\t3\tn\n"
		  "10\n20\n30\n",
		  "objects 3 records 5 skipped 1\no b%09x%25.jsonl\te "
		  "2\t7\t7\t2"
		  "\t-\n3\n@4 3\no a.jsonl\te1\t60\t60\t3\tn\n10\n20\n30\n",
		  "object a.jsonl: record object of the manifest is missing",
		  NULL },
		{ "o d.jsonl\te4\t0\t0\t0\t-\n",
		  "o d.jsonl\te4\t0\t0\t0\t-\no d.jsonl\te4\t0\t0\t0\t-\n",
		  "more object lines than the objects line says", NULL },
		{ "\n30\n", "\n30\n7\n", ":9: expected an object line", NULL },
		{ "o d.jsonl\te4\t0\t0\t0\t-\n",
		  "o a.jsonl\te1\t60\t60\t0\t-\n",
		  ":12: object a.jsonl is out of order", NULL },
		{ "10\n20\n30\n", "10\n20\n4294967296\n", "over 2^32-1", NULL },
	};
	size_t i;

	log_capture();
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		b = replace(body, cases[i].from, cases[i].to);
		expect_refusal(b, false, NULL, m, cases[i].want1,
			       cases[i].want2);
		free(b);
	}

	/* Another manifest (same keys, another etag): both digests named. */
	memcpy(objs2, small_objs, sizeof(objs2));
	objs2[2].etag = "changed";
	other = make_manifest(objs2, 4);
	expect_refusal(body, false, NULL, other, m->digest, other->digest);
	manifest_free(other);

	/* The end line: wrong digest, missing, truncated, data after it. */
	text = with_end(body, &len);
	digest_hex = strdup(text + len - 65);
	digest_hex[64] = '\0';
	b = replace(text, digest_hex,
		    "0000000000000000000000000000000000000000000000000000000000"
		    "000000");
	expect_refusal(b, true, NULL, m, ":13: the end line says 0000",
		       digest_hex);
	free(b);
	expect_refusal(body, true, NULL, m, "last line is not 'end", NULL);
	b = strndup(text, len - 1);
	expect_refusal(b, true, NULL, m, "truncated file?", NULL);
	free(b);
	b = strndup(text, len / 2);
	expect_refusal(b, true, NULL, m, "last line is not 'end", NULL);
	free(b);
	ck_assert_int_ge(asprintf(&b2, "%sfoo\n", text), 0);
	expect_refusal(b2, true, NULL, m, "last line is not 'end", NULL);
	free(b2);
	expect_refusal("", true, NULL, m, ":1: last line", NULL);

	/* index_sha256: the pinned and the actual digest both named. */
	expect_refusal(body, false,
		       "1111111111111111111111111111111111111111111111111111111"
		       "111111111",
		       m,
		       "bad.idx: index_sha256 is 1111111111111111111111111111"
		       "111111111111111111111111111111111111 but the file's "
		       "digest is ",
		       digest_hex);

	/* A wrong objects count is refused even when the config pins the
	 * edited file's own digest. */
	b = replace(body, "objects 3 records 5 skipped 1",
		    "objects 4 records 5 skipped 0");
	b2 = with_end(b, &len);
	b2[len - 1] = '\0'; /* the end line's digest, alone */
	expect_refusal(b, false, b2 + len - 65, m,
		       ":4: the objects line says 4 objects", NULL);
	free(b2);
	free(b);

	/* The same file with the right pin loads. */
	write_all(path_in_tmp("good.idx"), text, len);
	ck_assert_int_eq(rindex_load(path_in_tmp("good.idx"), m,
				     REC_FORMAT_JSONL, digest_hex, &ri),
			 0);
	rindex_free(ri);
	ri = NULL;
	/* Missing file: -ENOENT, logged. */
	ck_assert_int_eq(rindex_load(path_in_tmp("none.idx"), m,
				     REC_FORMAT_JSONL, NULL, &ri),
			 -ENOENT);
	free(log_take());

	free(digest_hex);
	free(text);
	free(body);
	manifest_free(m);
}
END_TEST

/* Every byte of a written index flipped, one at a time: never loads. */
START_TEST(test_flip_every_byte)
{
	struct manifest *m = make_manifest(small_objs, 4);
	struct rindex *ri = small_index(m), *back;
	char *text;
	size_t len, i;
	unsigned k;
	static const unsigned char flips[] = { 0x01, 0x20, 0x80 };

	log_capture();
	write_index(ri, path_in_tmp("flip.idx"));
	text = read_all(path_in_tmp("flip.idx"), &len);
	for (i = 0; i < len; i++) {
		for (k = 0; k < sizeof(flips); k++) {
			text[i] ^= (char)flips[k];
			back = NULL;
			ck_assert_msg(rindex_parse("flip", text, len, m,
						   REC_FORMAT_JSONL, NULL,
						   &back) < 0,
				      "byte %zu ^ 0x%02x loaded", i, flips[k]);
			ck_assert_ptr_null(back);
			text[i] ^= (char)flips[k];
		}
	}
	/* Unflipped, it loads. */
	ck_assert_int_eq(rindex_parse("flip", text, len, m, REC_FORMAT_JSONL,
				      NULL, &back),
			 0);
	assert_equal_index(ri, back);
	rindex_free(back);
	free(text);
	free(log_take());
	rindex_free(ri);
	manifest_free(m);
}
END_TEST

/* Every byte of the body changed, one at a time, with the end line's
 * digest recomputed (a hand-edited index): whatever still loads is the
 * one canonical form of what it holds, so it writes back to exactly the
 * bytes it was loaded from. A count that disagrees with the lines, a
 * leading zero or a doubled space loaded before. */
START_TEST(test_edits_canonical)
{
	struct manifest *m = make_manifest(small_objs, 4);
	char *body = small_body(m), *text, *out;
	size_t blen = strlen(body), len, olen, i, loaded = 0;
	struct rindex *back;
	unsigned k;
	FILE *f;
	static const unsigned char flips[] = { 0x01, 0x02, 0x04, 0x07,
					       0x10, 0x20, 0x80 };

	log_capture();
	for (i = 0; i < blen; i++) {
		for (k = 0; k < sizeof(flips); k++) {
			body[i] ^= (char)flips[k];
			text = with_end(body, &len);
			back = NULL;
			if (rindex_parse("edit", text, len, m, REC_FORMAT_JSONL,
					 NULL, &back) == 0) {
				loaded++;
				out = NULL;
				olen = 0;
				f = open_memstream(&out, &olen);
				ck_assert_ptr_nonnull(f);
				ck_assert_int_eq(rindex_write(back, f), 0);
				ck_assert_int_eq(fclose(f), 0);
				ck_assert_msg(olen == len && memcmp(out, text,
								    len) == 0,
					      "byte %zu ^ 0x%02x loaded but is "
					      "not canonical:\n%s",
					      i, flips[k], text);
				free(out);
				rindex_free(back);
			}
			free(text);
			body[i] ^= (char)flips[k];
		}
	}
	/* Some edits are other canonical indexes (another record split):
	 * the property was checked on those. */
	ck_assert_uint_gt(loaded, 0);

	/* Every other triple of counts on the objects line: none loads. */
	for (i = 0; i < 7 * 7 * 7; i++) {
		char line[64], *edited;
		unsigned o = (unsigned)(i / 49), r = (unsigned)(i / 7 % 7),
			 sk = (unsigned)(i % 7);

		if (o == 3 && r == 5 && sk == 1)
			continue;
		snprintf(line, sizeof(line), "objects %u records %u skipped %u",
			 o, r, sk);
		edited = replace(body, "objects 3 records 5 skipped 1", line);
		text = with_end(edited, &len);
		back = NULL;
		ck_assert_msg(rindex_parse("edit", text, len, m,
					   REC_FORMAT_JSONL, NULL, &back) < 0,
			      "'%s' loaded", line);
		free(text);
		free(edited);
	}
	free(log_take());
	free(body);
	manifest_free(m);
}
END_TEST

START_TEST(test_builder_refusals)
{
	struct manifest *m = make_manifest(small_objs, 4);
	static const struct obj_def tobjs[] = { { "x.tfrecord", 100, "e" } };
	struct manifest *tm = make_manifest(tobjs, 1);
	const uint64_t off[] = { 0, 10, 5 };
	const uint32_t len[] = { 10, 20, 30 };
	struct rindex *ri;
	char *msg;

	log_capture();
	ck_assert_int_eq(rindex_new(REC_FORMAT_JSONL, m, &ri), 0);
	/* Out of order, not a record object, or skipping one. */
	ck_assert_int_eq(rindex_add_object(ri, 1, 7, false, off, len, 0),
			 -EINVAL);
	ck_assert_int_eq(rindex_add_object(ri, 2, 5, false, off, len, 0),
			 -EINVAL);
	/* Overlap, past the end, n flag not ending the stream. */
	ck_assert_int_eq(rindex_add_object(ri, 0, 60, false, off, len, 3),
			 -EINVAL);
	ck_assert_int_eq(rindex_add_object(ri, 0, 60, false, off, len, 2), 0);
	ck_assert_int_eq(rindex_finish(ri), -EINVAL);
	msg = log_take();
	ck_assert_msg(strstr(msg, "overlaps"), "%s", msg);
	ck_assert_msg(strstr(msg, "object 1 (b%09x%25.jsonl) added, the next "
				  "record object of the manifest is 0"),
		      "%s", msg);
	ck_assert_msg(strstr(msg, "record object b%09x%25.jsonl of the "
				  "manifest was not indexed"),
		      "%s", msg);
	free(msg);
	rindex_free(ri);

	/* tfrecord: the n flag and a decoded size other than the size. */
	ck_assert_int_eq(rindex_new(REC_FORMAT_TFRECORD, tm, &ri), 0);
	ck_assert_int_eq(rindex_add_object(ri, 0, 100, true, off, len, 2),
			 -EINVAL);
	ck_assert_int_eq(rindex_add_object(ri, 0, 99, false, off, len, 2),
			 -EINVAL);
	ck_assert_int_eq(rindex_add_object(ri, 0, 100, false, off, len, 2), 0);
	ck_assert_int_eq(rindex_finish(ri), 0);
	ck_assert_int_eq(rindex_add_object(ri, 0, 100, false, off, len, 2),
			 -EINVAL);
	msg = log_take();
	ck_assert_msg(strstr(msg, "x.tfrecord: flag n"), "%s", msg);
	ck_assert_msg(strstr(msg, "decoded size differs"), "%s", msg);
	free(msg);
	rindex_free(ri);
	manifest_free(tm);
	manifest_free(m);
}
END_TEST

/* --- plan: random indexes against a naive byte layout -------------------- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t n)
{
	return n ? rng() % n : 0;
}

static uint64_t weight_served(const void *ctx, size_t i)
{
	return rindex_served_len(ctx, i);
}

/* Part p of rank r built naively: records' served bytes, then the tar
 * trailer; streams[o] is object o's decoded bytes. */
static unsigned char *naive_part(const struct rindex *ri,
				 const struct rplan *rp,
				 unsigned char **streams, uint64_t r,
				 unsigned p, size_t *size)
{
	const uint32_t *recs;
	size_t count, npad, first, n, i, o = 0, cap = 1024;
	unsigned char *buf;

	rplan_rank(rp, r, &recs, &count, &npad);
	rplan_part_range(rp, r, p, &first, &n);
	for (i = first; i < first + n; i++)
		cap += rindex_served_len(ri, recs[i]);
	buf = calloc(1, cap);
	ck_assert_ptr_nonnull(buf);
	for (i = first; i < first + n; i++) {
		const struct rindex_object *ob = rindex_object_of(ri, recs[i]);
		size_t oi = (size_t)(ob - ri->objects);

		memcpy(buf + o, streams[oi] + ri->rec_off[recs[i]],
		       ri->rec_len[recs[i]]);
		o += ri->rec_len[recs[i]];
		if (rindex_served_len(ri, recs[i]) > ri->rec_len[recs[i]])
			buf[o++] = '\n';
	}
	if (rec_format_base(ri->format) == REC_FORMAT_TAR)
		o += 1024; /* zeros from calloc */
	*size = o;
	return buf;
}

/* Reassembles [off, off+len) of a part from rplan_map, max segments per
 * call, into out; returns the bytes produced. */
static size_t map_bytes(const struct rindex *ri, const struct rplan *rp,
			unsigned char **streams, uint64_t r, unsigned p,
			uint64_t off, uint64_t len, size_t max,
			unsigned char *out)
{
	struct rplan_seg segs[8];
	size_t got = 0, n, i;

	while (got < len) {
		n = rplan_map(rp, r, p, off + got, len - got, segs, max);
		if (n == 0)
			break;
		ck_assert_uint_le(n, max);
		for (i = 0; i < n; i++) {
			const struct rplan_seg *s = &segs[i];

			ck_assert_uint_gt(s->len, 0);
			if (s->kind == RPLAN_SEG_RECORD) {
				const struct rindex_object *ob =
					rindex_object_of(ri, s->rec);

				ck_assert_uint_le(s->in_off + s->len,
						  ri->rec_len[s->rec]);
				memcpy(out + got,
				       streams[ob - ri->objects] +
					       ri->rec_off[s->rec] + s->in_off,
				       s->len);
			} else if (s->kind == RPLAN_SEG_NEWLINE) {
				ck_assert_uint_eq(s->len, 1);
				ck_assert_uint_gt(rindex_served_len(ri, s->rec),
						  ri->rec_len[s->rec]);
				out[got] = '\n';
			} else {
				memset(out + got, 0, s->len);
			}
			got += s->len;
		}
	}
	ck_assert_uint_le(got, len);
	return got;
}

/* A random index over a fresh manifest; streams get each object's bytes. */
static struct rindex *random_index(struct manifest **mp,
				   unsigned char ***streams_out)
{
	static const enum rec_format fmts[] = { REC_FORMAT_TFRECORD,
						REC_FORMAT_JSONL,
						REC_FORMAT_JSONL_GZ,
						REC_FORMAT_TAR };
	enum rec_format f = fmts[rng_below(4)];
	size_t nobj = 1 + rng_below(6), i, j;
	uint64_t *offs[8], decoded[8];
	uint32_t *lens[8], counts[8];
	bool nl[8];
	struct obj_def defs[9];
	char keys[9][32];
	unsigned char **streams = calloc(nobj, sizeof(*streams));
	struct rindex *ri;

	for (i = 0; i < nobj; i++) {
		uint64_t end = 0;

		counts[i] = (uint32_t)rng_below(12);
		offs[i] = calloc(counts[i] + 1, sizeof(uint64_t));
		lens[i] = calloc(counts[i] + 1, sizeof(uint32_t));
		for (j = 0; j < counts[i]; j++) {
			offs[i][j] =
				end + (rng_below(3) == 0 ? rng_below(5) : 0);
			lens[i][j] = (uint32_t)(1 + rng_below(40));
			end = offs[i][j] + lens[i][j];
		}
		nl[i] = rec_format_base(f) == REC_FORMAT_JSONL && counts[i] &&
			rng_below(2);
		decoded[i] = nl[i] ? end : end + rng_below(4);
		snprintf(keys[i], sizeof(keys[i]), "o%02zu.%s", i,
			 rec_format_name(f));
		defs[i] =
			(struct obj_def){ keys[i],
					  rec_format_gzip(f) ? 1 + rng_below(99)
							     : decoded[i],
					  "etag" };
		streams[i] = malloc(decoded[i] + 1);
		for (j = 0; j < decoded[i]; j++)
			streams[i][j] = (unsigned char)rng();
	}
	/* One object that is not a record file. */
	snprintf(keys[nobj], sizeof(keys[nobj]), "zz.txt");
	defs[nobj] = (struct obj_def){ keys[nobj], 3, "e" };
	*mp = make_manifest(defs, nobj + 1);
	ck_assert_int_eq(rindex_new(f, *mp, &ri), 0);
	for (i = 0; i < nobj; i++) {
		ck_assert_int_eq(rindex_add_object(ri, (uint32_t)i, decoded[i],
						   nl[i], offs[i], lens[i],
						   counts[i]),
				 0);
		free(offs[i]);
		free(lens[i]);
	}
	ck_assert_int_eq(rindex_finish(ri), 0);
	*streams_out = streams;
	return ri;
}

START_TEST(test_plan_random)
{
	unsigned c;

	rng_state = 20261124;
	for (c = 0; c < 400; c++) {
		struct manifest *m;
		unsigned char **streams, *buf, *naive;
		struct rindex *ri = random_index(&m, &streams), *back = NULL;
		struct shard_spec spec = { 0 };
		struct shard_plan *sp;
		struct rplan *rp;
		size_t *seen, dropped = 0, i, pos;
		uint64_t r;
		unsigned parts = 1 + (unsigned)rng_below(4), p;
		char *text;
		size_t tlen;
		FILE *f = open_memstream(&text, &tlen);

		/* Through the file each time: what is planned is what loads. */
		ck_assert_int_eq(rindex_write(ri, f), 0);
		fclose(f);
		ck_assert_int_eq(rindex_parse("mem", text, tlen, m, ri->format,
					      ri->digest, &back),
				 0);
		assert_equal_index(ri, back);
		free(text);

		spec.world_size = 1 + rng_below(5);
		spec.seed = rng();
		spec.epoch = rng_below(3);
		spec.order = (enum shard_order)rng_below(2);
		spec.layout = (enum shard_layout)rng_below(3);
		spec.balance = spec.layout == SHARD_LAYOUT_BYTES
				       ? SHARD_BALANCE_NONE
				       : (enum shard_balance)rng_below(3);
		ck_assert_int_eq(rplan_build(back, &spec, parts, &rp), 0);
		ck_assert_int_eq(shard_plan_build(&spec, back->n_records,
						  weight_served, back, &sp),
				 0);
		ck_assert_uint_eq(rplan_parts(rp), parts);
		seen = calloc(back->n_records + 1, sizeof(*seen));
		for (r = 0; r < spec.world_size; r++) {
			const uint32_t *recs, *want;
			size_t count, npad, wcount, wpad;

			rplan_rank(rp, r, &recs, &count, &npad);
			shard_plan_rank(sp, r, &want, &wcount, &wpad);
			ck_assert_uint_eq(count, wcount);
			ck_assert_uint_eq(npad, wpad);
			if (count)
				ck_assert_mem_eq(recs, want,
						 count * sizeof(*recs));
			for (i = 0; i + npad < count; i++)
				seen[recs[i]]++;
			/* Parts: consecutive runs covering the rank, sizes
			 * differing by at most one, larger first. */
			pos = 0;
			for (p = 0; p < parts; p++) {
				size_t first, n, psize, got;
				uint64_t served = 0, k;

				rplan_part_range(rp, r, p, &first, &n);
				ck_assert_uint_eq(first, pos);
				ck_assert(n == count / parts ||
					  n == count / parts + 1);
				ck_assert(n ==
					  count / parts + (p < count % parts));
				pos += n;
				for (i = first; i < first + n; i++)
					served += rindex_served_len(back,
								    recs[i]);
				naive = naive_part(back, rp, streams, r, p,
						   &psize);
				ck_assert_uint_eq(
					psize,
					served + (back->format == REC_FORMAT_TAR
							  ? 1024
							  : 0));
				ck_assert_uint_eq(rplan_part_size(rp, r, p),
						  psize);
				buf = malloc(psize + 64);
				/* Whole part, one segment per call. */
				got = map_bytes(back, rp, streams, r, p, 0,
						psize + 50, 1, buf);
				ck_assert_uint_eq(got, psize);
				if (psize)
					ck_assert_mem_eq(buf, naive, psize);
				/* Random windows, random segment budgets. */
				for (k = 0; k < 20; k++) {
					uint64_t off = rng_below(psize + 3);
					uint64_t len = rng_below(psize + 3);
					uint64_t want_len =
						off >= psize ? 0
						: len < psize - off
							? len
							: psize - off;

					got = map_bytes(back, rp, streams, r, p,
							off, len,
							1 + rng_below(8), buf);
					ck_assert_uint_eq(got, want_len);
					if (got)
						ck_assert_mem_eq(
							buf, naive + off, got);
				}
				free(buf);
				free(naive);
			}
			ck_assert_uint_eq(pos, count);
			ck_assert_uint_eq(rplan_part_size(rp, r, parts), 0);
		}
		ck_assert_uint_eq(rplan_part_size(rp, spec.world_size, 0), 0);
		for (i = 0; i < back->n_records; i++) {
			ck_assert_uint_le(seen[i], 1);
			dropped += seen[i] == 0;
		}
		ck_assert_uint_eq(dropped, rplan_dropped(rp));
		if (spec.balance != SHARD_BALANCE_DROP)
			ck_assert_uint_eq(dropped, 0);

		free(seen);
		shard_plan_free(sp);
		rplan_free(rp);
		rindex_free(back);
		for (i = 0; i < ri->n_objects; i++)
			free(streams[i]);
		free(streams);
		rindex_free(ri);
		manifest_free(m);
	}
}
END_TEST

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Runs (rplan_build_runs): without a window shuffle each rank's records
 * are whole runs (consecutive records of one object, at most run_bytes
 * unless one record alone), ranks are disjoint and cover every record but
 * the dropped; a window shuffle only permutes within each window; and
 * run_bytes 0 is rplan_build(). The order itself is checked against
 * shardspec.py's reference by test_records.sh. */
START_TEST(test_plan_runs)
{
	unsigned c;

	rng_state = 4242;
	for (c = 0; c < 300; c++) {
		struct manifest *m;
		unsigned char **streams;
		struct rindex *ri = random_index(&m, &streams);
		struct shard_spec spec = { 0 };
		struct rplan *plain, *win, *zero, *ref;
		uint64_t run = 1 + rng_below(120), r;
		uint32_t window = 2 + (uint32_t)rng_below(6);
		size_t *seen = calloc(ri->n_records + 1, sizeof(*seen));
		bool *starts = calloc(ri->n_records + 1, sizeof(*starts));
		size_t covered = 0, i;

		spec.world_size = 1 + rng_below(4);
		spec.seed = rng();
		spec.order = SHARD_ORDER_SHUFFLE;
		spec.layout = (enum shard_layout)rng_below(3);
		spec.balance = spec.layout == SHARD_LAYOUT_BYTES
				       ? SHARD_BALANCE_NONE
				       : (enum shard_balance)rng_below(3);
		ck_assert_int_eq(rplan_build_runs(ri, &spec, 2, run, 1, &plain),
				 0);
		ck_assert_int_eq(
			rplan_build_runs(ri, &spec, 2, run, window, &win), 0);
		ck_assert_uint_eq(rplan_window(win), window);
		ck_assert_uint_eq(rplan_run_bytes(win), run);
		for (r = 0; r < spec.world_size; r++) {
			const uint32_t *a, *b;
			size_t na, nb, pa, pb, k;

			rplan_rank(plain, r, &a, &na, &pa);
			rplan_rank(win, r, &b, &nb, &pb);
			ck_assert_uint_eq(na, nb);
			ck_assert_uint_eq(pa, pb);
			for (k = 0; k < na - pa; k++)
				seen[a[k]]++;
			/* The window shuffle permutes within windows only. */
			for (k = 0; k < na - pa; k += window) {
				size_t len = na - pa - k < window ? na - pa - k
								  : window;
				uint32_t *x = malloc(len * 4),
					 *y = malloc(len * 4);

				memcpy(x, a + k, len * 4);
				memcpy(y, b + k, len * 4);
				qsort(x, len, 4, u32_cmp);
				qsort(y, len, 4, u32_cmp);
				ck_assert(memcmp(x, y, len * 4) == 0);
				free(x);
				free(y);
			}
			ck_assert(memcmp(a + na - pa, b + nb - pb, pa * 4) ==
				  0);
		}
		/* Runs as the spec cuts them (greedy from each object's
		 * first record): a record that does not start a run follows
		 * its predecessor in every rank's list. */
		for (i = 0; i < ri->n_objects; i++) {
			const struct rindex_object *o = &ri->objects[i];
			uint64_t bytes = 0, x;

			for (x = o->first; x < o->first + o->count; x++) {
				uint64_t len = rindex_served_len(ri, x);

				starts[x] = x == o->first || bytes + len > run;
				bytes = starts[x] ? len : bytes + len;
			}
		}
		for (r = 0; r < spec.world_size; r++) {
			const uint32_t *a;
			size_t n, np, k;

			rplan_rank(plain, r, &a, &n, &np);
			for (k = 0; k < n; k++)
				ck_assert(starts[a[k]] ||
					  (k > 0 && a[k - 1] == a[k] - 1));
		}
		for (i = 0; i < ri->n_records; i++) {
			ck_assert_uint_le(seen[i], 1);
			covered += seen[i];
		}
		ck_assert_uint_eq(covered + rplan_dropped(plain),
				  ri->n_records);
		ck_assert_int_eq(rplan_build_runs(ri, &spec, 2, 0, 4, &zero),
				 0);
		ck_assert_int_eq(rplan_build(ri, &spec, 2, &ref), 0);
		for (r = 0; r < spec.world_size; r++) {
			const uint32_t *a, *b;
			size_t na, nb, pa, pb;

			rplan_rank(zero, r, &a, &na, &pa);
			rplan_rank(ref, r, &b, &nb, &pb);
			ck_assert_uint_eq(na, nb);
			ck_assert(na == 0 || memcmp(a, b, na * 4) == 0);
		}
		rplan_free(plain);
		rplan_free(win);
		rplan_free(zero);
		rplan_free(ref);
		free(seen);
		free(starts);
		for (i = 0; i < ri->n_objects; i++)
			free(streams[i]);
		free(streams);
		rindex_free(ri);
		manifest_free(m);
	}
}
END_TEST

START_TEST(test_plan_limits)
{
	struct manifest *m = make_manifest(small_objs, 4);
	struct rindex *ri = small_index(m), fake;
	struct shard_spec spec = { .world_size = 2,
				   .balance = SHARD_BALANCE_PAD };
	struct rplan *rp = NULL;
	char name[64], *msg;

	log_capture();
	ck_assert_int_eq(rplan_build(ri, &spec, 0, &rp), -EINVAL);
	ck_assert_int_eq(rplan_build(ri, &spec, 100000, &rp), -EINVAL);
	ck_assert_int_eq(rplan_build(ri, &spec, 99999, &rp), 0);
	ck_assert_int_eq(rplan_part_name(rp, 0, name, sizeof(name)), 0);
	ck_assert_str_eq(name, "part-00000-of-99999.jsonl");
	ck_assert_int_eq(rplan_part_name(rp, 99998, name, sizeof(name)), 0);
	ck_assert_str_eq(name, "part-99998-of-99999.jsonl");
	ck_assert_int_eq(rplan_part_name(rp, 99999, name, sizeof(name)),
			 -EINVAL);
	ck_assert_int_eq(rplan_part_name(rp, 1, name, 10), -ENAMETOOLONG);
	rplan_free(rp);

	/* Over 2^32-1 records, or positions with pads: refused, said. */
	fake = *ri;
	fake.n_records = (uint64_t)UINT32_MAX + 1;
	ck_assert_int_eq(rplan_build(&fake, &spec, 1, &rp), -EOVERFLOW);
	fake.n_records = UINT32_MAX;
	ck_assert_int_eq(rplan_build(&fake, &spec, 1, &rp), -EOVERFLOW);
	msg = log_take();
	ck_assert_msg(strstr(msg, "record index has 4294967296 records; "
				  "record views take at most 4294967295"),
		      "%s", msg);
	ck_assert_msg(strstr(msg, "4294967295 records with world_size 2 give "
				  "more than 2^32-1 positions"),
		      "%s", msg);
	free(msg);
	rindex_free(ri);
	manifest_free(m);
}
END_TEST

/* --- the vectors of docs/RECORDS.md §2 -------------------------------- */

/* Objects a (3 records; in jsonl the last is served with a '\n' added) and
 * b (4 records), as shardspec.py's vector_objects(). */
static struct rindex *vector_index(enum rec_format f, struct manifest **mp)
{
	static const uint64_t a_off[] = { 0, 10, 30 },
			      b_off[] = { 0, 40, 90, 150 };
	static const uint32_t a_len[] = { 10, 20, 30 },
			      b_len[] = { 40, 50, 60, 70 };
	char ka[16], kb[16];
	struct obj_def defs[2] = { { ka, 60, "ea" }, { kb, 220, "eb" } };
	struct rindex *ri;

	snprintf(ka, sizeof(ka), "a.%s", rec_format_name(f));
	snprintf(kb, sizeof(kb), "b.%s", rec_format_name(f));
	*mp = make_manifest(defs, 2);
	ck_assert_int_eq(rindex_new(f, *mp, &ri), 0);
	ck_assert_int_eq(rindex_add_object(ri, 0, 60, f == REC_FORMAT_JSONL,
					   a_off, a_len, 3),
			 0);
	ck_assert_int_eq(rindex_add_object(ri, 1, 220, false, b_off, b_len, 4),
			 0);
	ck_assert_int_eq(rindex_finish(ri), 0);
	return ri;
}

/* The plan as text: per part "SIZE:o.r,o.r*" (* = pad), parts by " | ",
 * ranks by " || ". */
static void plan_text(const struct rindex *ri, const struct rplan *rp,
		      char *out, size_t cap)
{
	size_t o = 0, first, n, i, count, npad;
	const uint32_t *recs;
	uint64_t r;
	unsigned p;

	out[0] = '\0';
	for (r = 0; r < rplan_world_size(rp); r++) {
		rplan_rank(rp, r, &recs, &count, &npad);
		for (p = 0; p < rplan_parts(rp); p++) {
			rplan_part_range(rp, r, p, &first, &n);
			o += (size_t)snprintf(
				out + o, cap - o, "%s%llu:",
				r == 0 && p == 0 ? ""
				: p == 0	 ? " || "
						 : " | ",
				(unsigned long long)rplan_part_size(rp, r, p));
			for (i = first; i < first + n; i++) {
				const struct rindex_object *ob =
					rindex_object_of(ri, recs[i]);

				o += (size_t)snprintf(
					out + o, cap - o, "%s%u.%llu%s",
					i == first ? "" : ",", ob->item,
					(unsigned long long)(recs[i] -
							     ob->first),
					i >= count - npad ? "*" : "");
			}
		}
	}
}

/* The plan as shardspec.py records prints it. */
static void plan_reference_text(const struct rindex *ri, const struct rplan *rp,
				FILE *f)
{
	size_t first, n, i, count, npad;
	const uint32_t *recs;
	char name[64];
	uint64_t r;
	unsigned p;

	for (r = 0; r < rplan_world_size(rp); r++) {
		rplan_rank(rp, r, &recs, &count, &npad);
		for (p = 0; p < rplan_parts(rp); p++) {
			const struct manifest_entry *e;

			ck_assert_int_eq(
				rplan_part_name(rp, p, name, sizeof(name)), 0);
			fprintf(f, "rank %llu part %u size %llu %s\n",
				(unsigned long long)r, p,
				(unsigned long long)rplan_part_size(rp, r, p),
				name);
			rplan_part_range(rp, r, p, &first, &n);
			for (i = first; i < first + n; i++) {
				const struct rindex_object *ob =
					rindex_object_of(ri, recs[i]);

				e = &ri->manifest->entries[ob->item];
				manifest_write_escaped(f, e->key, e->key_len);
				fprintf(f, "\t%llu%s\n",
					(unsigned long long)(recs[i] -
							     ob->first),
					i >= count - npad ? "\tpad" : "");
			}
		}
	}
}

/* Runs shardspec.py records on the index file and compares its output
 * with the plan's; skipped (said so) without python3 or the script. */
static void cross_check_python(const struct rindex *ri, const struct rplan *rp,
			       uint64_t world)
{
	const char *script = "tests/integration/shardspec.py";
	char *cmd, *want, *got;
	size_t wlen, glen;
	FILE *f;

	if (access(script, R_OK) != 0 ||
	    access("/usr/bin/python3", X_OK) != 0) {
		printf("check_records_plan: %s or python3 missing, "
		       "cross-check skipped\n",
		       script);
		return;
	}
	write_index(ri, path_in_tmp("vec.idx"));
	f = open_memstream(&want, &wlen);
	plan_reference_text(ri, rp, f);
	fclose(f);
	ck_assert_int_ge(
		asprintf(&cmd,
			 "/usr/bin/python3 %s records --index %s "
			 "--world-size %llu --seed 42 --order shuffle "
			 "--layout strided --balance pad --parts 2 > %s",
			 script, path_in_tmp("vec.idx"),
			 (unsigned long long)world, path_in_tmp("vec.out")),
		0);
	ck_assert_int_eq(system(cmd), 0);
	got = read_all(path_in_tmp("vec.out"), &glen);
	ck_assert_str_eq(got, want);
	free(got);
	free(want);
	free(cmd);
}

START_TEST(test_vectors)
{
	static const struct {
		enum rec_format f;
		uint64_t world;
		const char *want;
	} v[] = {
		{ REC_FORMAT_JSONL, 2,
		  "130:1.3,1.2 | 30:0.0,0.1 || 81:0.2,1.1 | 110:1.0,1.3*" },
		{ REC_FORMAT_JSONL, 3,
		  "120:1.3,1.1 | 20:0.1 || 41:0.2,0.0 | 70:1.3* || "
		  "100:1.2,1.0 | 31:0.2*" },
		{ REC_FORMAT_TAR, 2,
		  "1154:1.3,1.2 | 1054:0.0,0.1 || 1104:0.2,1.1 | "
		  "1134:1.0,1.3*" },
	};
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct shard_spec spec = { .world_size = v[i].world,
					   .seed = 42,
					   .order = SHARD_ORDER_SHUFFLE,
					   .layout = SHARD_LAYOUT_STRIDED,
					   .balance = SHARD_BALANCE_PAD };
		struct manifest *m;
		struct rindex *ri = vector_index(v[i].f, &m);
		struct rplan *rp;
		char text[512];

		ck_assert_int_eq(rplan_build(ri, &spec, 2, &rp), 0);
		plan_text(ri, rp, text, sizeof(text));
		ck_assert_str_eq(text, v[i].want);
		cross_check_python(ri, rp, v[i].world);
		rplan_free(rp);
		rindex_free(ri);
		manifest_free(m);
	}
}
END_TEST

/* --- scale: 1M records, RAM per record and time (figures printed) -------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

START_TEST(test_scale_1m)
{
	enum { OBJS = 100, PER = 10000 };
	const uint64_t n = (uint64_t)OBJS * PER;
	struct obj_def defs[OBJS];
	char keys[OBJS][32];
	uint32_t *len = malloc(PER * sizeof(*len) * OBJS);
	uint64_t *off = malloc(PER * sizeof(*off));
	struct manifest *m;
	struct rindex *ri, *back;
	struct rplan *rp;
	struct shard_spec spec = { .world_size = 8,
				   .seed = 7,
				   .order = SHARD_ORDER_SHUFFLE,
				   .layout = SHARD_LAYOUT_STRIDED,
				   .balance = SHARD_BALANCE_PAD };
	size_t i, j, before, after, counted, fsize;
	double t0, t_build, t_write, t_load, t_plan;

	rng_state = 1;
	for (i = 0; i < OBJS; i++) {
		uint64_t size = 0;

		for (j = 0; j < PER; j++) {
			len[i * PER + j] = (uint32_t)(16 + rng_below(2000));
			size += len[i * PER + j];
		}
		snprintf(keys[i], sizeof(keys[i]), "train-%05zu.tfrecord", i);
		defs[i] = (struct obj_def){ keys[i], size, "etag-1234567890" };
	}
	m = make_manifest(defs, OBJS);

	t0 = now_s();
	ck_assert_int_eq(rindex_new(REC_FORMAT_TFRECORD, m, &ri), 0);
	for (i = 0; i < OBJS; i++) {
		uint64_t o = 0;

		for (j = 0; j < PER; j++) {
			off[j] = o;
			o += len[i * PER + j];
		}
		ck_assert_int_eq(rindex_add_object(ri, (uint32_t)i, o, false,
						   off, len + i * PER, PER),
				 0);
	}
	ck_assert_int_eq(rindex_finish(ri), 0);
	t_build = now_s() - t0;
	t0 = now_s();
	write_index(ri, path_in_tmp("big.idx"));
	t_write = now_s() - t0;
	free(read_all(path_in_tmp("big.idx"), &fsize));

	before = heap_in_use();
	t0 = now_s();
	ck_assert_int_eq(rindex_load(path_in_tmp("big.idx"), m,
				     REC_FORMAT_TFRECORD, ri->digest, &back),
			 0);
	t_load = now_s() - t0;
	t0 = now_s();
	ck_assert_int_eq(rplan_build(back, &spec, 4, &rp), 0);
	t_plan = now_s() - t0;
	after = heap_in_use();
	assert_equal_index(ri, back);

	counted = rindex_mem_bytes(back) + rplan_mem_bytes(rp);
	printf("check_records_plan: %llu records, index file %zu bytes; "
	       "build+digest %.0f ms, write %.0f ms, load %.0f ms, "
	       "plan (W=8 shuffle strided pad, 4 parts) %.0f ms; RAM "
	       "%.1f B/record counted, %.1f B/record by mallinfo2\n",
	       (unsigned long long)n, fsize, t_build * 1e3, t_write * 1e3,
	       t_load * 1e3, t_plan * 1e3, (double)counted / (double)n,
	       (double)(after - before) / (double)n);
	ck_assert_uint_le(counted, 40 * n);
	/* mallinfo2 sees nothing under a sanitizer's allocator. */
	if (after > before)
		ck_assert_uint_le(after - before, 40 * n);

	rplan_free(rp);
	rindex_free(back);
	rindex_free(ri);
	manifest_free(m);
	free(off);
	free(len);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "roundtrip", test_roundtrip },
		{ "refusals", test_refusals },
		{ "flip_every_byte", test_flip_every_byte },
		{ "edits_canonical", test_edits_canonical },
		{ "builder_refusals", test_builder_refusals },
		{ "plan_random", test_plan_random },
		{ "plan_runs", test_plan_runs },
		{ "plan_limits", test_plan_limits },
		{ "vectors", test_vectors },
		{ "scale_1m", test_scale_1m },
	};

	return unit_run_in_tmpdir(unit_suite("records_plan", cases,
					     sizeof(cases) / sizeof(cases[0])),
				  "/tmp/check_records_plan.XXXXXX", tmpdir,
				  sizeof(tmpdir));
}
