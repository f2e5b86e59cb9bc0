/*
 * check_manifest: the manifest (DESIGN.md §3 key-to-path rules, §4), tested
 * through plan/manifest.h.
 *
 * The digest is recomputed here with OpenSSL's one-shot SHA256() over the
 * bytes the spec names, and the canonical order with a plain memcmp sort, so
 * neither check shares code with manifest.c. Random round trips use a
 * fixed-seed generator local to the test, so a failure replays. Files live
 * in one mkdtemp directory that main() removes whatever the outcome.
 */
#include "plan/manifest.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "tests/unit/unit.h"
#include "util/log.h"

#define SENTINEL ((struct manifest *)&tmpdir)

static char tmpdir[64];

/* A key given by pointer and length, so it may hold NUL bytes. */
struct kv {
	const char *key;
	size_t len;
};

#define KV(s)                                                                  \
	{                                                                      \
		(s), sizeof(s) - 1                                             \
	}

/* xorshift64*: fixed seed, local to the test. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return rng_next(s) % n;
}

static int add_key(struct manifest *m, const char *key, size_t len,
		   uint64_t size)
{
	char etag[32];
	int n = snprintf(etag, sizeof(etag), "etag-%" PRIu64, size);

	return manifest_add(m, key, len, size, etag, (size_t)n,
			    (int64_t)size * 1000);
}

/* Builds a manifest from keys[0..n) (sizes 1, 2, ...) and finishes it. */
static int build(const struct kv *keys, size_t n, struct manifest **out)
{
	struct manifest *m = manifest_new();
	size_t i;
	int rc;

	ck_assert_ptr_nonnull(m);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(add_key(m, keys[i].key, keys[i].len, i + 1),
				 0);
	rc = manifest_finish(m);
	*out = m;
	return rc;
}

static struct manifest *build_ok(const struct kv *keys, size_t n)
{
	struct manifest *m;

	ck_assert_int_eq(build(keys, n, &m), 0);
	return m;
}

static int has_key(const struct manifest *m, const char *key, size_t len)
{
	return manifest_find(m, key, len) >= 0;
}

static void expect_keys(const struct manifest *m, const struct kv *want,
			size_t n)
{
	size_t i;

	ck_assert_uint_eq(m->count, n);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(m->entries[i].key_len, want[i].len);
		ck_assert_msg(memcmp(m->entries[i].key, want[i].key,
				     want[i].len) == 0,
			      "entry %zu is '%s', want '%s'", i,
			      m->entries[i].key, want[i].key);
		ck_assert_int_eq(m->entries[i].key[want[i].len], '\0');
	}
}

static uint64_t skipped_total(const struct manifest *m)
{
	uint64_t t = 0;
	int i;

	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		t += m->skipped[i];
	return t;
}

/* The spec's digest, written independently of manifest.c. */
static void put_le64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void expected_digest(const struct manifest *m, char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	unsigned char *buf, *p;
	size_t i, len = 0;

	for (i = 0; i < m->count; i++)
		len += 24 + m->entries[i].key_len + m->entries[i].etag_len;
	buf = malloc(len + 1);
	ck_assert_ptr_nonnull(buf);
	p = buf;
	for (i = 0; i < m->count; i++) {
		const struct manifest_entry *e = &m->entries[i];

		put_le64(p, e->key_len);
		memcpy(p + 8, e->key, e->key_len);
		p += 8 + e->key_len;
		put_le64(p, e->size);
		put_le64(p + 8, e->etag_len);
		memcpy(p + 16, e->etag, e->etag_len);
		p += 16 + e->etag_len;
	}
	SHA256(buf, len, md);
	free(buf);
	for (i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static int kv_cmp(const void *pa, const void *pb)
{
	const struct kv *a = pa, *b = pb;
	int c = memcmp(a->key, b->key, a->len < b->len ? a->len : b->len);

	if (c != 0)
		return c;
	return (a->len > b->len) - (a->len < b->len);
}

/* Everything manifest_write_escaped() writes, as a malloc'd string. */
static char *escape(const char *s, size_t len, size_t *out_len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(manifest_write_escaped(f, s, len), 0);
	ck_assert_int_eq(fclose(f), 0);
	*out_len = n;
	return buf;
}

static char *write_text(const struct manifest *m, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(manifest_write(m, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	*len = n;
	return buf;
}

static void expect_same(const struct manifest *a, const struct manifest *b)
{
	size_t i;

	ck_assert_uint_eq(a->count, b->count);
	ck_assert_uint_eq(a->total_bytes, b->total_bytes);
	for (i = 0; i < a->count; i++) {
		const struct manifest_entry *x = &a->entries[i];
		const struct manifest_entry *y = &b->entries[i];

		ck_assert_uint_eq(x->key_len, y->key_len);
		ck_assert_msg(memcmp(x->key, y->key, x->key_len) == 0,
			      "key %zu differs", i);
		ck_assert_uint_eq(x->etag_len, y->etag_len);
		ck_assert_msg(memcmp(x->etag, y->etag, x->etag_len) == 0,
			      "etag %zu differs", i);
		ck_assert_uint_eq(x->size, y->size);
		ck_assert_int_eq(x->mtime_ns, y->mtime_ns);
	}
	ck_assert_str_eq(a->digest, b->digest);
}

START_TEST(test_build_basic)
{
	struct manifest *m = manifest_new();
	char key[] = "b/x";
	char etag[] = "e1";

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(manifest_add(m, key, 3, 10, etag, 2, -5), 0);
	/* The manifest copies: changing the caller's buffers later is safe. */
	key[0] = 'c';
	etag[1] = '9';
	ck_assert_int_eq(manifest_add(m, "a", 1, 20, "", 0, 7), 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_uint_eq(m->count, 2);
	ck_assert_uint_eq(m->total_bytes, 30);
	ck_assert_str_eq(m->entries[0].key, "a");
	ck_assert_uint_eq(m->entries[0].key_len, 1);
	ck_assert_str_eq(m->entries[0].etag, "");
	ck_assert_uint_eq(m->entries[0].etag_len, 0);
	ck_assert_uint_eq(m->entries[0].size, 20);
	ck_assert_int_eq(m->entries[0].mtime_ns, 7);
	ck_assert_str_eq(m->entries[1].key, "b/x");
	ck_assert_str_eq(m->entries[1].etag, "e1");
	ck_assert_uint_eq(m->entries[1].size, 10);
	ck_assert_int_eq(m->entries[1].mtime_ns, -5);
	ck_assert_uint_eq(skipped_total(m), 0);
	ck_assert_uint_eq(strlen(m->digest), 64);

	/* Finished means immutable. */
	ck_assert_int_eq(manifest_add(m, "z", 1, 1, "", 0, 0), -EINVAL);
	ck_assert_int_eq(manifest_finish(m), -EINVAL);
	ck_assert_uint_eq(m->count, 2);
	manifest_free(m);
	manifest_free(NULL);
}
END_TEST

START_TEST(test_build_many_and_huge)
{
	struct manifest *m = manifest_new();
	size_t big_len = (3u << 20) + 1, i;
	char *big = malloc(big_len);
	char key[32];
	long idx;

	/* A key over the arena's chunk size, between small ones: every
	 * string must survive intact. */
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(big);
	for (i = 0; i + 4 <= big_len - 1; i += 4)
		memcpy(big + i, "abc/", 4);
	memset(big + i, 'f', big_len - i);
	for (i = 0; i < 5000; i++) {
		int n = snprintf(key, sizeof(key), "k%05zu", 4999 - i);

		ck_assert_int_eq(add_key(m, key, (size_t)n, i), 0);
		if (i == 2500)
			ck_assert_int_eq(manifest_add(m, big, big_len, 1, big,
						      big_len, 0),
					 0);
	}
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_uint_eq(m->count, 5001);
	ck_assert_uint_eq(m->entries[0].key_len, big_len);
	ck_assert_int_eq(memcmp(m->entries[0].key, big, big_len), 0);
	ck_assert_int_eq(memcmp(m->entries[0].etag, big, big_len), 0);
	for (i = 0; i < 5000; i++) {
		int n = snprintf(key, sizeof(key), "k%05zu", i);

		ck_assert_str_eq(m->entries[i + 1].key, key);
		ck_assert_uint_eq(m->entries[i + 1].size, 4999 - i);
		idx = manifest_find(m, key, (size_t)n);
		ck_assert_int_eq(idx, (long)i + 1);
	}
	free(big);
	manifest_free(m);
}
END_TEST

START_TEST(test_canonical_order)
{
	/* Inserted in no particular order; wanted in memcmp order with a
	 * proper prefix first and bytes >= 0x80 after ASCII. */
	static const struct kv in[] = {
		KV("b"),    KV("a\xff"),    KV("ab"),	     KV("\xff"),
		KV("a"),    KV("a\x80"),    KV("A"),	     KV("\x7f"),
		KV("a b"),  KV("\xff\xff"), KV("aa"),	     KV("a\x01"),
		KV("\x80"), KV("a\x7f"),    KV("Z"),	     KV("a-b"),
		KV("a.c"),  KV("\xc3\xa9"), KV("\xc3\xa8z"), KV("0"),
	};
	static const struct kv want[] = {
		KV("0"),	 KV("A"),	 KV("Z"),     KV("a"),
		KV("a\x01"),	 KV("a b"),	 KV("a-b"),   KV("a.c"),
		KV("aa"),	 KV("ab"),	 KV("a\x7f"), KV("a\x80"),
		KV("a\xff"),	 KV("b"),	 KV("\x7f"),  KV("\x80"),
		KV("\xc3\xa8z"), KV("\xc3\xa9"), KV("\xff"),  KV("\xff\xff"),
	};
	struct manifest *m = build_ok(in, ARRAY_LEN(in));
	struct kv sorted[ARRAY_LEN(in)];

	expect_keys(m, want, ARRAY_LEN(want));
	/* The same order from a plain memcmp sort. */
	memcpy(sorted, in, sizeof(in));
	qsort(sorted, ARRAY_LEN(sorted), sizeof(sorted[0]), kv_cmp);
	expect_keys(m, sorted, ARRAY_LEN(sorted));
	manifest_free(m);
}
END_TEST

START_TEST(test_order_long_common_prefix)
{
	/* Keys that agree for 250 bytes and differ only at the end, where a
	 * signed-char comparison would put 0x80 before 0x7f. */
	char keys[4][260];
	struct kv in[4], want[4];
	struct manifest *m;
	int i;

	memset(keys, 0, sizeof(keys));
	for (i = 0; i < 4; i++)
		memset(keys[i], 'p', 250);
	keys[0][250] = (char)0x80;
	keys[1][250] = (char)0x7f;
	keys[2][250] = (char)0xff;
	keys[2][251] = 'x';
	/* keys[3] is the bare 250-byte prefix. */
	for (i = 0; i < 4; i++) {
		in[i].key = keys[i];
		in[i].len = strlen(keys[i]);
	}
	want[0] = in[3];
	want[1] = in[1];
	want[2] = in[0];
	want[3] = in[2];
	m = build_ok(in, 4);
	expect_keys(m, want, 4);
	manifest_free(m);
}
END_TEST

START_TEST(test_nul_keys_not_duplicates)
{
	/* Keys equal up to a NUL are different keys (memcmp, not strcmp):
	 * no -EEXIST, and both are then skipped for their NUL. */
	static const struct kv in[] = {
		KV("a\0b"),
		KV("a\0c"),
		KV("a"),
	};
	static const struct kv want[] = { KV("a") };
	struct manifest *m = build_ok(in, ARRAY_LEN(in));

	expect_keys(m, want, 1);
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_NUL], 2);
	ck_assert_uint_eq(skipped_total(m), 2);
	manifest_free(m);

	/* And a real duplicate among them is found, wherever it was added. */
	m = manifest_new();
	ck_assert_int_eq(manifest_add(m, "a\0b", 3, 1, "", 0, 0), 0);
	ck_assert_int_eq(manifest_add(m, "a\0c", 3, 1, "", 0, 0), 0);
	ck_assert_int_eq(manifest_add(m, "a", 1, 1, "", 0, 0), 0);
	ck_assert_int_eq(manifest_add(m, "a\0b", 3, 1, "", 0, 0), 0);
	ck_assert_int_eq(manifest_finish(m), -EEXIST);
	manifest_free(m);
}
END_TEST

START_TEST(test_duplicates)
{
	struct manifest *m = manifest_new();

	ck_assert_int_eq(manifest_add(m, "x", 1, 1, "e1", 2, 0), 0);
	ck_assert_int_eq(manifest_add(m, "y", 1, 1, "e1", 2, 0), 0);
	ck_assert_int_eq(manifest_add(m, "x", 1, 2, "e2", 2, 5), 0);
	ck_assert_int_eq(manifest_finish(m), -EEXIST);
	manifest_free(m);

	/* A duplicate is an error even when the key would be skipped. */
	m = manifest_new();
	ck_assert_int_eq(manifest_add(m, "d/", 2, 0, "", 0, 0), 0);
	ck_assert_int_eq(manifest_add(m, "d/", 2, 0, "", 0, 0), 0);
	ck_assert_int_eq(manifest_finish(m), -EEXIST);
	manifest_free(m);

	/* A key and its prefix are not duplicates. */
	m = manifest_new();
	ck_assert_int_eq(manifest_add(m, "xy", 2, 1, "", 0, 0), 0);
	ck_assert_int_eq(manifest_add(m, "x", 1, 1, "", 0, 0), 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_uint_eq(m->count, 2);
	manifest_free(m);
}
END_TEST

START_TEST(test_skip_dir_marker)
{
	static const struct kv in[] = {
		KV("a/"), KV("b/c/"), KV("/"), KV("b/c/d"), KV("e"),
	};
	static const struct kv want[] = { KV("b/c/d"), KV("e") };
	struct manifest *m = build_ok(in, ARRAY_LEN(in));

	expect_keys(m, want, ARRAY_LEN(want));
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_DIR_MARKER], 3);
	ck_assert_uint_eq(skipped_total(m), 3);
	/* Skipped keys are not in the sums or the digest. */
	ck_assert_uint_eq(m->total_bytes, 4 + 5);
	ck_assert_int_eq(manifest_find(m, "a/", 2), -1);
	manifest_free(m);
}
END_TEST

START_TEST(test_skip_bad_component)
{
	static const struct kv in[] = {
		KV(""),	   KV("a//b"), KV("./a"), KV("a/."),	 KV("a/../b"),
		KV(".."),  KV("."),    KV("/a"),  KV("//a"),	 KV("x/./y"),
		KV("..."), KV(".a"),   KV("a.."), KV("b/.../c"), KV("..b/c"),
	};
	static const struct kv want[] = {
		KV("..."), KV("..b/c"), KV(".a"), KV("a.."), KV("b/.../c"),
	};
	struct manifest *m = build_ok(in, ARRAY_LEN(in));

	expect_keys(m, want, ARRAY_LEN(want));
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_BAD_COMPONENT], 10);
	ck_assert_uint_eq(skipped_total(m), 10);
	manifest_free(m);
}
END_TEST

START_TEST(test_skip_long_component)
{
	char k255[300], k256[300], nested255[300], nested256[300];
	struct kv in[4];
	struct manifest *m;

	memset(k255, 'a', 255);
	k255[255] = '\0';
	memset(k256, 'b', 256);
	k256[256] = '\0';
	/* "d/" + 255 bytes is kept, "d/" + 256 bytes is not. */
	memcpy(nested255, "d/", 2);
	memset(nested255 + 2, 'c', 255);
	nested255[257] = '\0';
	memset(nested256, 'e', 256);
	memcpy(nested256 + 256, "/f", 3);
	in[0] = (struct kv){ k255, 255 };
	in[1] = (struct kv){ k256, 256 };
	in[2] = (struct kv){ nested255, 257 };
	in[3] = (struct kv){ nested256, 258 };
	m = build_ok(in, 4);
	ck_assert_uint_eq(m->count, 2);
	ck_assert(has_key(m, k255, 255));
	ck_assert(has_key(m, nested255, 257));
	ck_assert(!has_key(m, k256, 256));
	ck_assert(!has_key(m, nested256, 258));
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_LONG_COMPONENT], 2);
	ck_assert_uint_eq(skipped_total(m), 2);
	manifest_free(m);
}
END_TEST

START_TEST(test_skip_nul)
{
	static const struct kv in[] = {
		KV("a\0"),
		KV("\0"),
		KV("d/\0/e"),
		KV("ok"),
	};
	static const struct kv want[] = { KV("ok") };
	struct manifest *m = build_ok(in, ARRAY_LEN(in));

	expect_keys(m, want, 1);
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_NUL], 3);
	ck_assert_uint_eq(skipped_total(m), 3);
	manifest_free(m);
}
END_TEST

START_TEST(test_skip_file_is_dir)
{
	/* "a-x" sorts between "a" and "a/b": the conflict must still be
	 * found. */
	static const struct kv in1[] = { KV("a/b"), KV("a-x"), KV("a") };
	static const struct kv want1[] = { KV("a-x"), KV("a/b") };
	/* Nested: only the deepest survives. */
	static const struct kv in2[] = { KV("a/b/c"), KV("a"), KV("a/b") };
	static const struct kv want2[] = { KV("a/b/c") };
	/* A directory marker alone does not make "a" a directory, and a
	 * conflict deeper down leaves siblings alone. */
	static const struct kv in3[] = {
		KV("a"),     KV("a/"),	 KV("x/y"),
		KV("x/y/z"), KV("x/y0"), KV("x/y.z"),
	};
	static const struct kv want3[] = {
		KV("a"),
		KV("x/y.z"),
		KV("x/y/z"),
		KV("x/y0"),
	};
	struct manifest *m;

	m = build_ok(in1, ARRAY_LEN(in1));
	expect_keys(m, want1, ARRAY_LEN(want1));
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_FILE_IS_DIR], 1);
	ck_assert_uint_eq(skipped_total(m), 1);
	manifest_free(m);

	m = build_ok(in2, ARRAY_LEN(in2));
	expect_keys(m, want2, ARRAY_LEN(want2));
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_FILE_IS_DIR], 2);
	ck_assert_uint_eq(skipped_total(m), 2);
	manifest_free(m);

	m = build_ok(in3, ARRAY_LEN(in3));
	expect_keys(m, want3, ARRAY_LEN(want3));
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_FILE_IS_DIR], 1);
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_DIR_MARKER], 1);
	ck_assert_uint_eq(skipped_total(m), 2);
	manifest_free(m);
}
END_TEST

START_TEST(test_skip_file_is_dir_high_bytes)
{
	/* A sibling whose next byte is >= 0x80 sorts after "a/...": the
	 * directory "a/" must still win over the file "a". */
	static const struct kv in[] = {
		KV("a"),
		KV("a/b"),
		KV("a\xc3\xa9"),
	};
	static const struct kv want[] = { KV("a/b"), KV("a\xc3\xa9") };
	struct manifest *m = build_ok(in, ARRAY_LEN(in));

	expect_keys(m, want, ARRAY_LEN(want));
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_FILE_IS_DIR], 1);
	manifest_free(m);
}
END_TEST

START_TEST(test_skip_names)
{
	int i, j;

	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++) {
		const char *a = manifest_skip_name(i);

		ck_assert_ptr_nonnull(a);
		ck_assert_uint_gt(strlen(a), 0);
		ck_assert_str_ne(a, "?");
		for (j = 0; j < i; j++)
			ck_assert_str_ne(a, manifest_skip_name(j));
	}
	ck_assert_str_eq(manifest_skip_name(MANIFEST_SKIP_NREASONS), "?");
}
END_TEST

START_TEST(test_digest_independent)
{
	struct manifest *m = manifest_new();
	char want[65];

	ck_assert_int_eq(
		manifest_add(m, "b/c", 3, 123456789012ULL, "\"abc\"", 5, 1), 0);
	ck_assert_int_eq(manifest_add(m, "a", 1, 0, "", 0, -1), 0);
	/* The largest size the total allows, all 8 bytes set. */
	ck_assert_int_eq(manifest_add(m, "\xc3\xa9t\xc3\xa9", 5,
				      INT64_MAX - 123456789012ULL,
				      "1700000000000000000:5:42", 24, 0),
			 0);
	ck_assert_int_eq(manifest_add(m, "skip/", 5, 9, "x", 1, 0), 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_uint_eq(m->count, 3);
	expected_digest(m, want);
	ck_assert_str_eq(m->digest, want);
	manifest_free(m);
}
END_TEST

START_TEST(test_digest_empty)
{
	struct manifest *m = manifest_new();

	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_uint_eq(m->count, 0);
	ck_assert_uint_eq(m->total_bytes, 0);
	/* SHA-256 of no bytes. */
	ck_assert_str_eq(m->digest, "e3b0c44298fc1c149afbf4c8996fb924"
				    "27ae41e4649b934ca495991b7852b855");
	manifest_free(m);

	/* Only skipped keys: still the empty digest. */
	m = manifest_new();
	ck_assert_int_eq(manifest_add(m, "d/", 2, 1, "e", 1, 0), 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_str_eq(m->digest, "e3b0c44298fc1c149afbf4c8996fb924"
				    "27ae41e4649b934ca495991b7852b855");
	manifest_free(m);
}
END_TEST

START_TEST(test_digest_insertion_order)
{
	enum { N = 300 };
	struct kv keys[N];
	char buf[N][24];
	char first[65], want[65];
	uint64_t rng = 0x1234;
	int round, i;

	for (i = 0; i < N; i++) {
		int n = snprintf(buf[i], sizeof(buf[i]), "d%d/f%d", i % 7, i);

		keys[i].key = buf[i];
		keys[i].len = (size_t)n;
	}
	first[0] = '\0';
	for (round = 0; round < 5; round++) {
		struct manifest *m = manifest_new();

		/* Same set, a new order each round (Fisher-Yates). */
		for (i = N - 1; i > 0; i--) {
			int j = (int)rng_below(&rng, (uint64_t)i + 1);
			struct kv t = keys[i];

			keys[i] = keys[j];
			keys[j] = t;
		}
		for (i = 0; i < N; i++) {
			/* Size and etag follow the key, not the position. */
			uint64_t size = strlen(keys[i].key) * 1000 +
					(uint64_t)(keys[i].key[1] - '0');

			ck_assert_int_eq(
				manifest_add(m, keys[i].key, keys[i].len, size,
					     keys[i].key, keys[i].len, round),
				0);
		}
		ck_assert_int_eq(manifest_finish(m), 0);
		expected_digest(m, want);
		ck_assert_str_eq(m->digest, want);
		if (round == 0)
			memcpy(first, m->digest, 65);
		else
			ck_assert_str_eq(m->digest, first);
		manifest_free(m);
	}
}
END_TEST

START_TEST(test_digest_fields)
{
	/* size and etag are in the digest, mtime is not. */
	struct manifest *m[4];
	int i;

	for (i = 0; i < 4; i++) {
		m[i] = manifest_new();
		ck_assert_int_eq(manifest_add(m[i], "k", 1, i == 1 ? 2 : 1,
					      i == 2 ? "f" : "e", 1,
					      i == 3 ? 99 : 0),
				 0);
		ck_assert_int_eq(manifest_finish(m[i]), 0);
	}
	ck_assert_str_ne(m[0]->digest, m[1]->digest);
	ck_assert_str_ne(m[0]->digest, m[2]->digest);
	ck_assert_str_eq(m[0]->digest, m[3]->digest);
	for (i = 0; i < 4; i++)
		manifest_free(m[i]);
}
END_TEST

START_TEST(test_escape)
{
	static const char in[] = "a%b\tc\nd\re\x01\x1f\x7f\x80\xff ~";
	static const char want[] = "a%25b%09c%0Ad%0De%01%1F\x7f\x80\xff ~";
	char all[256], *out, *p;
	size_t len, i;

	out = escape(in, sizeof(in) - 1, &len);
	ck_assert_uint_eq(len, sizeof(want) - 1);
	ck_assert_int_eq(memcmp(out, want, len), 0);
	free(out);

	out = escape("", 0, &len);
	ck_assert_uint_eq(len, 0);
	free(out);

	/* NUL is a byte like any other below 0x20. */
	out = escape("\0x", 2, &len);
	ck_assert_uint_eq(len, 4);
	ck_assert_int_eq(memcmp(out, "%00x", 4), 0);
	free(out);

	/* Every byte value: below 0x20 and '%' as uppercase %XX, the rest
	 * raw, in order. */
	for (i = 0; i < 256; i++)
		all[i] = (char)i;
	out = escape(all, 256, &len);
	ck_assert_uint_eq(len, 256 + 2 * 33);
	p = out;
	for (i = 0; i < 256; i++) {
		if (i < 0x20 || i == '%') {
			char hex[4];

			snprintf(hex, sizeof(hex), "%%%02X", (unsigned)i);
			ck_assert_msg(memcmp(p, hex, 3) == 0,
				      "byte 0x%02zx escaped wrong", i);
			p += 3;
		} else {
			ck_assert_msg((unsigned char)*p == i,
				      "byte 0x%02zx not raw", i);
			p++;
		}
	}
	ck_assert_ptr_eq(p, out + len);
	free(out);
}
END_TEST

START_TEST(test_unescape)
{
	char buf[64], all[256], *esc;
	size_t len, i;
	long n;

	strcpy(buf, "a%25b%09c%0Ad%0D");
	n = manifest_unescape(buf, strlen(buf));
	ck_assert_int_eq(n, 8);
	ck_assert_int_eq(memcmp(buf, "a%b\tc\nd\r", 8), 0);

	/* Lowercase hex is accepted. */
	strcpy(buf, "%0a%ff%Fe%c3%A9");
	n = manifest_unescape(buf, strlen(buf));
	ck_assert_int_eq(n, 5);
	ck_assert_int_eq(memcmp(buf, "\n\xff\xfe\xc3\xa9", 5), 0);

	/* %00 decodes to a NUL, and the length says so. */
	strcpy(buf, "x%00y");
	n = manifest_unescape(buf, 5);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(memcmp(buf, "x\0y", 3), 0);

	/* Nothing to decode. */
	strcpy(buf, "plain \x7f\x80");
	n = manifest_unescape(buf, strlen(buf));
	ck_assert_int_eq(n, 8);
	ck_assert_int_eq(memcmp(buf, "plain \x7f\x80", 8), 0);
	n = manifest_unescape(buf, 0);
	ck_assert_int_eq(n, 0);

	/* Malformed. */
	{
		static const char *const bad[] = {
			"%",	 "%4", "%zz", "%4g", "%g4",  "abc%",
			"abc%2", "%%", "%+1", "% 1", "x%-1",
		};

		for (i = 0; i < ARRAY_LEN(bad); i++) {
			strcpy(buf, bad[i]);
			ck_assert_msg(manifest_unescape(buf, strlen(buf)) ==
					      -EINVAL,
				      "'%s' accepted", bad[i]);
		}
	}
	/* A '%' just past len is not read. */
	strcpy(buf, "ab%41");
	ck_assert_int_eq(manifest_unescape(buf, 2), 2);
	strcpy(buf, "ab%41");
	ck_assert_int_eq(manifest_unescape(buf, 4), -EINVAL);

	/* Escape then unescape is the identity for every byte. */
	for (i = 0; i < 256; i++)
		all[i] = (char)(255 - i);
	esc = escape(all, 256, &len);
	n = manifest_unescape(esc, len);
	ck_assert_int_eq(n, 256);
	ck_assert_int_eq(memcmp(esc, all, 256), 0);
	free(esc);
}
END_TEST

/* A random component of 1..max bytes: any byte but '/' and NUL, and never
 * "." or "..". */
static size_t random_component(uint64_t *rng, char *out, size_t max)
{
	size_t len = 1 + rng_below(rng, max), i;

	for (i = 0; i < len; i++) {
		unsigned char c;

		do {
			/* Favour the bytes the escaping cares about. */
			switch (rng_below(rng, 4)) {
			case 0:
				c = (unsigned char)rng_below(rng, 0x21);
				break;
			case 1: {
				static const char special[] = "%\t\n\r\x7f.";

				c = (unsigned char)special[rng_below(
					rng, sizeof(special) - 1)];
				break;
			}
			default:
				c = (unsigned char)rng_below(rng, 256);
				break;
			}
		} while (c == '/' || c == '\0');
		out[i] = (char)c;
	}
	if ((len == 1 && out[0] == '.') ||
	    (len == 2 && out[0] == '.' && out[1] == '.'))
		out[0] = 'x';
	return len;
}

static void random_manifest(uint64_t *rng, size_t n, struct manifest **out)
{
	static const int64_t mtimes[] = {
		0, -1, INT64_MIN, INT64_MAX, -1000000000, 1700000000123456789,
	};
	/* Up to 2^52 each: a few thousand still sum under 2^63-1. */
	static const uint64_t sizes[] = { 0, 1, (1ULL << 52) - 1, 1ULL << 40 };
	struct manifest *m = manifest_new();
	char key[600], etag[80];
	size_t i;

	ck_assert_ptr_nonnull(m);
	for (i = 0; i < n; i++) {
		size_t klen = 0, elen, depth = 1 + rng_below(rng, 3), d, j;
		uint64_t size = (rng_next(rng) >> 12) >> rng_below(rng, 52);
		int64_t mtime = (int64_t)rng_next(rng);

		for (d = 0; d < depth; d++) {
			if (d > 0)
				key[klen++] = '/';
			klen += random_component(rng, key + klen, 40);
		}
		/* etags are arbitrary bytes, NUL included. */
		elen = rng_below(rng, sizeof(etag));
		for (j = 0; j < elen; j++)
			etag[j] = (char)rng_next(rng);
		if (rng_below(rng, 8) == 0)
			mtime = mtimes[rng_below(rng, ARRAY_LEN(mtimes))];
		if (rng_below(rng, 8) == 0)
			size = sizes[rng_below(rng, ARRAY_LEN(sizes))];
		ck_assert_int_eq(
			manifest_add(m, key, klen, size, etag, elen, mtime), 0);
	}
	ck_assert_int_eq(manifest_finish(m), 0);
	*out = m;
}

START_TEST(test_round_trip_random)
{
	uint64_t rng = 0x5eed0001;
	int round;

	for (round = 0; round < 20; round++) {
		struct manifest *a, *b = SENTINEL;
		size_t len, i, negative = 0;
		char want[65];
		char *text;

		random_manifest(&rng, 200 + rng_below(&rng, 200), &a);
		/* Random keys rarely collide with a directory; all survive. */
		ck_assert_uint_ge(a->count, 150);
		for (i = 0; i < a->count; i++)
			negative += a->entries[i].mtime_ns < 0;
		ck_assert_uint_gt(negative, 0);
		expected_digest(a, want);
		ck_assert_str_eq(a->digest, want);

		text = write_text(a, &len);
		ck_assert_int_eq(memcmp(text, MANIFEST_HEADER "\n",
					sizeof(MANIFEST_HEADER)),
				 0);
		/* One line per entry: no raw LF inside a field. */
		{
			size_t lines = 0;

			for (i = 0; i < len; i++)
				lines += text[i] == '\n';
			ck_assert_uint_eq(lines, a->count + 1);
			ck_assert_ptr_null(memchr(text, '\r', len));
			ck_assert_ptr_null(memchr(text, '\0', len));
		}
		ck_assert_int_eq(manifest_parse("random", text, len, &b), 0);
		ck_assert_ptr_ne(b, SENTINEL);
		expect_same(a, b);
		ck_assert_uint_eq(skipped_total(b), 0);
		free(text);
		manifest_free(a);
		manifest_free(b);
	}
}
END_TEST

START_TEST(test_round_trip_file)
{
	uint64_t rng = 0x5eed0002;
	struct manifest *a, *b = SENTINEL;
	char path[128];
	FILE *f;

	random_manifest(&rng, 300, &a);
	snprintf(path, sizeof(path), "%s/round.tsv", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(manifest_write(a, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(manifest_load(path, &b), 0);
	ck_assert_ptr_ne(b, SENTINEL);
	expect_same(a, b);
	manifest_free(a);
	manifest_free(b);
	unlink(path);
}
END_TEST

START_TEST(test_write_format)
{
	static const char want[] = MANIFEST_HEADER "\n"
						   "a%09b\t0\t%25e\t-1\n"
						   "c/d\t9223372036854775807\t"
						   "12:34:56\t"
						   "-9223372036854775808\n";
	struct manifest *m = manifest_new();
	char *text;
	size_t len;

	ck_assert_int_eq(
		manifest_add(m, "c/d", 3, INT64_MAX, "12:34:56", 8, INT64_MIN),
		0);
	ck_assert_int_eq(manifest_add(m, "a\tb", 3, 0, "%e", 2, -1), 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	text = write_text(m, &len);
	ck_assert_uint_eq(len, sizeof(want) - 1);
	ck_assert_int_eq(memcmp(text, want, len), 0);
	free(text);
	manifest_free(m);
}
END_TEST

START_TEST(test_write_error)
{
	struct manifest *m = manifest_new();
	char path[128];
	FILE *f;

	ck_assert_int_eq(manifest_add(m, "k", 1, 1, "e", 1, 0), 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	snprintf(path, sizeof(path), "%s/ro.tsv", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fclose(f), 0);
	/* A stream opened for reading cannot be written. */
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(manifest_write(m, f), -EIO);
	fclose(f);
	unlink(path);
	manifest_free(m);
}
END_TEST

static void parse_expect(const char *text, size_t len, int want)
{
	struct manifest *m = SENTINEL;
	int rc = manifest_parse("test", text, len, &m);

	ck_assert_msg(rc == want, "parse of '%.*s' gave %d, want %d", (int)len,
		      text, rc, want);
	if (want < 0)
		ck_assert_ptr_eq(m, SENTINEL);
	else
		manifest_free(m);
}

#define H MANIFEST_HEADER "\n"

START_TEST(test_parse_ok)
{
	static const char text[] = H "k%0A1\t42\tet%25ag\t-7\n"
				     "a/b\t9223372036854775758\t\t"
				     "9223372036854775807\n"
				     "c\t0\tx\t-9223372036854775808\n"
				     "d\t7\t\t0\n";
	struct manifest *m = SENTINEL;

	ck_assert_int_eq(manifest_parse("ok", text, sizeof(text) - 1, &m), 0);
	ck_assert_uint_eq(m->count, 4);
	ck_assert_str_eq(m->entries[0].key, "a/b");
	/* The largest total: 42 + 7 more make 2^63-1. */
	ck_assert_uint_eq(m->entries[0].size, INT64_MAX - 49);
	ck_assert_uint_eq(m->total_bytes, INT64_MAX);
	ck_assert_uint_eq(m->entries[0].etag_len, 0);
	ck_assert_int_eq(m->entries[0].mtime_ns, INT64_MAX);
	ck_assert_str_eq(m->entries[1].key, "c");
	ck_assert_int_eq(m->entries[1].mtime_ns, INT64_MIN);
	ck_assert_str_eq(m->entries[2].key, "d");
	ck_assert_uint_eq(m->entries[2].size, 7);
	ck_assert_int_eq(m->entries[2].mtime_ns, 0);
	ck_assert_uint_eq(m->entries[3].key_len, 3);
	ck_assert_int_eq(memcmp(m->entries[3].key, "k\n1", 3), 0);
	ck_assert_uint_eq(m->entries[3].size, 42);
	ck_assert_str_eq(m->entries[3].etag, "et%ag");
	ck_assert_int_eq(m->entries[3].mtime_ns, -7);
	manifest_free(m);

	/* Header only: an empty manifest. */
	m = SENTINEL;
	ck_assert_int_eq(manifest_parse("h", H, sizeof(H) - 1, &m), 0);
	ck_assert_uint_eq(m->count, 0);
	manifest_free(m);

	/* Keys that break the path rules are skipped on load too. */
	{
		static const char skip[] = H "d/\t1\te\t0\n"
					     "x%00y\t1\te\t0\n"
					     "a\t1\te\t0\n"
					     "a/b\t1\te\t0\n";

		m = SENTINEL;
		ck_assert_int_eq(
			manifest_parse("s", skip, sizeof(skip) - 1, &m), 0);
		ck_assert_uint_eq(m->count, 1);
		ck_assert_str_eq(m->entries[0].key, "a/b");
		ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_DIR_MARKER], 1);
		ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_NUL], 1);
		ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_FILE_IS_DIR], 1);
		manifest_free(m);
	}
}
END_TEST

START_TEST(test_parse_errors)
{
	static const char *const bad[] = {
		/* header */
		"",
		"k\t1\te\t0\n",
		"# shardfs-manifest v2\nk\t1\te\t0\n",
		"# shardfs-manifest v1 \n",
		"# shardfs-manifest v1\r\n",
		"#shardfs-manifest v1\n",
		"# shardfs-manifest v1",
		"\n" H,
		/* field count */
		H "k\t1\te\n",
		H "k\t1\te\t0\t\n",
		H "k\t1\te\t0\tx\n",
		H "k\n",
		H "\n",
		H "k\t1\te\t0\n\n",
		/* size */
		H "k\tx\te\t0\n",
		H "k\t\te\t0\n",
		H "k\t-1\te\t0\n",
		H "k\t+1\te\t0\n",
		H "k\t 1\te\t0\n",
		H "k\t1 \te\t0\n",
		H "k\t0x10\te\t0\n",
		H "k\t1.0\te\t0\n",
		H "k\t18446744073709551616\te\t0\n",
		H "k\t99999999999999999999\te\t0\n",
		/* mtime */
		H "k\t1\te\t\n",
		H "k\t1\te\t-\n",
		H "k\t1\te\tx\n",
		H "k\t1\te\t1.5\n",
		H "k\t1\te\t+1\n",
		H "k\t1\te\t--1\n",
		H "k\t1\te\t9223372036854775808\n",
		H "k\t1\te\t-9223372036854775809\n",
		/* CR */
		H "k\t1\te\t0\r\n",
		H "k\r\t1\te\t0\n",
		H "k\t1\te\r\t0\n",
		/* truncation */
		H "k\t1\te\t0",
		H "a\t1\te\t0\nk\t1\te\t0",
		/* escapes */
		H "k%\t1\te\t0\n",
		H "k%4\t1\te\t0\n",
		H "k%zz\t1\te\t0\n",
		H "k\t1\te%g0\t0\n",
	};
	size_t i;

	for (i = 0; i < ARRAY_LEN(bad); i++)
		parse_expect(bad[i], strlen(bad[i]), -EINVAL);
	/* Duplicate keys in a file. */
	parse_expect(H "k\t1\te\t0\nk\t2\tf\t0\n",
		     strlen(H "k\t1\te\t0\nk\t2\tf\t0\n"), -EEXIST);
	/* Duplicates once unescaped. */
	parse_expect(H "k%41\t1\te\t0\nkA\t2\tf\t0\n",
		     strlen(H "k%41\t1\te\t0\nkA\t2\tf\t0\n"), -EEXIST);
}
END_TEST

/* Runs manifest_parse with stderr going to a file and the level at
 * LOG_ERR; returns the code and what was logged (static buffer). */
static int parse_logged(const char *text, const char **logged)
{
	static char buf[4096];
	struct manifest *m = SENTINEL;
	char path[128];
	int fd, saved, rc;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stderr.txt", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	saved = dup(STDERR_FILENO);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
	log_set_level(LOG_ERR);
	rc = manifest_parse("big.tsv", text, strlen(text), &m);
	log_set_level(LOG_ERR - 1);
	ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	close(fd);
	*logged = buf;
	if (rc == 0)
		manifest_free(m);
	else
		ck_assert_ptr_eq(m, SENTINEL);
	return rc;
}

/* Sizes are off_t to the kernel: 2^63 and up was accepted (2^64-1 made the
 * total wrap and the file show as ?????????). Refused with the line named;
 * sizes that each fit but sum past 2^63-1 are refused too, so no total or
 * per-rank sum can wrap. */
START_TEST(test_size_limit)
{
	struct manifest *m;
	const char *logged;

	ck_assert_int_eq(parse_logged(H "a\t1\te\t0\n"
					"k\t9223372036854775808\te\t0\n",
				      &logged),
			 -EINVAL);
	ck_assert_msg(strstr(logged, "big.tsv:3: size 9223372036854775808 "
				     "is over 2^63-1") != NULL,
		      "logged: %s", logged);
	ck_assert_int_eq(
		parse_logged(H "k\t18446744073709551615\te\t0\n", &logged),
		-EINVAL);
	ck_assert_msg(strstr(logged, "big.tsv:2: size") != NULL, "logged: %s",
		      logged);
	ck_assert_int_eq(
		parse_logged(H "k\t9223372036854775807\te\t0\n", &logged), 0);
	ck_assert_int_eq(parse_logged(H "a\t9223372036854775807\te\t0\n"
					"b\t1\te\t0\n",
				      &logged),
			 -EFBIG);
	ck_assert_msg(strstr(logged, "total size") != NULL, "logged: %s",
		      logged);
	/* Three of 2^63-1 wrapped a uint64 total back below 2^63. */
	ck_assert_int_eq(parse_logged(H "a\t9223372036854775807\te\t0\n"
					"b\t9223372036854775807\te\t0\n"
					"c\t9223372036854775807\te\t0\n",
				      &logged),
			 -EFBIG);

	/* A backend listing goes through manifest_add. */
	m = manifest_new();
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(
		manifest_add(m, "k", 1, (uint64_t)INT64_MAX + 1, "", 0, 0),
		-EFBIG);
	ck_assert_int_eq(manifest_add(m, "k", 1, UINT64_MAX, "", 0, 0), -EFBIG);
	ck_assert_uint_eq(m->count, 0);
	ck_assert_int_eq(manifest_add(m, "k", 1, INT64_MAX, "", 0, 0), 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_uint_eq(m->total_bytes, INT64_MAX);
	manifest_free(m);
}
END_TEST

START_TEST(test_load_errors)
{
	struct manifest *m = SENTINEL;
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/missing.tsv", tmpdir);
	ck_assert_int_eq(manifest_load(path, &m), -ENOENT);
	ck_assert_ptr_eq(m, SENTINEL);

	/* An empty file, and a malformed one. */
	snprintf(path, sizeof(path), "%s/empty.tsv", tmpdir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(manifest_load(path, &m), -EINVAL);
	ck_assert_ptr_eq(m, SENTINEL);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(H "k\t1\n", f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(manifest_load(path, &m), -EINVAL);
	ck_assert_ptr_eq(m, SENTINEL);
	unlink(path);
}
END_TEST

START_TEST(test_find)
{
	static const struct kv in[] = {
		KV("b"),  KV("a/b"),   KV("a-b"),   KV("\xc3\xa9"),
		KV("ab"), KV("a/c/d"), KV("skip/"),
	};
	struct manifest *m = build_ok(in, ARRAY_LEN(in));
	size_t i;

	ck_assert_uint_eq(m->count, 6);
	for (i = 0; i < m->count; i++)
		ck_assert_int_eq(manifest_find(m, m->entries[i].key,
					       m->entries[i].key_len),
				 (long)i);
	ck_assert_int_eq(manifest_find(m, "a", 1), -1);
	ck_assert_int_eq(manifest_find(m, "", 0), -1);
	ck_assert_int_eq(manifest_find(m, "a/", 2), -1);
	ck_assert_int_eq(manifest_find(m, "a/bc", 4), -1);
	ck_assert_int_eq(manifest_find(m, "\xc3", 1), -1);
	ck_assert_int_eq(manifest_find(m, "\xff", 1), -1);
	ck_assert_int_eq(manifest_find(m, "skip/", 5), -1);
	/* The length counts, not a NUL. */
	ck_assert_int_eq(manifest_find(m, "a/bX", 3),
			 manifest_find(m, "a/b", 3));
	manifest_free(m);

	m = manifest_new();
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_int_eq(manifest_find(m, "a", 1), -1);
	manifest_free(m);
}
END_TEST

static Suite *manifest_suite(void)
{
	const struct unit_case cases[] = {
		{ "build_basic", test_build_basic },
		{ "build_many_and_huge", test_build_many_and_huge },
		{ "canonical_order", test_canonical_order },
		{ "order_long_common_prefix", test_order_long_common_prefix },
		{ "nul_keys_not_duplicates", test_nul_keys_not_duplicates },
		{ "duplicates", test_duplicates },
		{ "skip_dir_marker", test_skip_dir_marker },
		{ "skip_bad_component", test_skip_bad_component },
		{ "skip_long_component", test_skip_long_component },
		{ "skip_nul", test_skip_nul },
		{ "skip_file_is_dir", test_skip_file_is_dir },
		{ "skip_file_is_dir_high_bytes",
		  test_skip_file_is_dir_high_bytes },
		{ "skip_names", test_skip_names },
		{ "digest_independent", test_digest_independent },
		{ "digest_empty", test_digest_empty },
		{ "digest_insertion_order", test_digest_insertion_order },
		{ "digest_fields", test_digest_fields },
		{ "escape", test_escape },
		{ "unescape", test_unescape },
		{ "round_trip_random", test_round_trip_random },
		{ "round_trip_file", test_round_trip_file },
		{ "write_format", test_write_format },
		{ "write_error", test_write_error },
		{ "parse_ok", test_parse_ok },
		{ "parse_errors", test_parse_errors },
		{ "size_limit", test_size_limit },
		{ "load_errors", test_load_errors },
		{ "find", test_find },
	};
	return unit_suite("manifest", cases, ARRAY_LEN(cases));
}

int main(void)
{
	/* Skipped keys are logged as warnings; the tests count them. */
	log_set_level(LOG_ERR - 1);
	return unit_run_in_tmpdir(manifest_suite(),
				  "/tmp/check_manifest.XXXXXX", tmpdir,
				  sizeof(tmpdir));
}
