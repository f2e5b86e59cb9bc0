/*
 * check_util: the small shared helpers of util/ (hex.h, sha256.h, md5.h,
 * str.h, thread.h, dlist.h, backoff.h) through their headers.
 */
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/backoff.h"
#include "util/dlist.h"
#include "util/hex.h"
#include "util/md5.h"
#include "util/sha256.h"
#include "util/str.h"
#include "util/thread.h"
#include "tests/unit/unit.h"

START_TEST(test_hex_encode)
{
	const uint8_t b[] = { 0x00, 0x01, 0x7f, 0x80, 0xab, 0xff };
	char out[2 * sizeof(b) + 1];

	memset(out, 'x', sizeof(out));
	hex_encode(b, sizeof(b), out);
	ck_assert_str_eq(out, "00017f80abff");
	hex_encode(b, 0, out);
	ck_assert_str_eq(out, "");
}
END_TEST

/* Every byte value decodes in both cases; anything else is refused. */
START_TEST(test_hex_decode)
{
	static const char digits[] = "0123456789abcdef";
	uint8_t b[4];
	char s[3];
	int c;

	for (c = 0; c < 256; c++) {
		int want = (c >= '0' && c <= '9')   ? c - '0'
			   : (c >= 'a' && c <= 'f') ? c - 'a' + 10
			   : (c >= 'A' && c <= 'F') ? c - 'A' + 10
						    : -1;

		ck_assert_int_eq(hex_digit(c), want);
	}
	ck_assert_int_eq(hex_digit(-1), -1);
	for (c = 0; c < 256; c++) {
		s[0] = digits[c >> 4];
		s[1] = digits[c & 15];
		s[2] = '\0';
		ck_assert_int_eq(hex_pair(s), c);
		s[0] = (char)toupper((unsigned char)s[0]);
		s[1] = (char)toupper((unsigned char)s[1]);
		ck_assert_int_eq(hex_pair(s), c);
	}
	ck_assert_int_eq(hex_pair("g0"), -1);
	ck_assert_int_eq(hex_pair("0g"), -1);
	ck_assert_int_eq(hex_pair("0"), -1); /* the NUL is not a digit */
	ck_assert_int_eq(hex_pair(""), -1);
	ck_assert_int_eq(hex_decode("00Ff7a80", 4, b), 0);
	ck_assert_uint_eq(b[0], 0x00);
	ck_assert_uint_eq(b[1], 0xff);
	ck_assert_uint_eq(b[2], 0x7a);
	ck_assert_uint_eq(b[3], 0x80);
	ck_assert_int_eq(hex_decode("00f", 2, b), -EINVAL);
	ck_assert_int_eq(hex_decode("0x12", 2, b), -EINVAL);
	ck_assert_int_eq(hex_decode("", 0, b), 0);
}
END_TEST

START_TEST(test_hex_percent)
{
	char out[4] = "xxx";

	hex_percent(0x00, out);
	ck_assert_str_eq(out, "%00");
	hex_percent(' ', out);
	ck_assert_str_eq(out, "%20");
	hex_percent(0xab, out);
	ck_assert_str_eq(out, "%AB");
	hex_percent(0xff, out);
	ck_assert_str_eq(out, "%FF");
}
END_TEST

/* FIPS 180-2's vectors, one-shot and fed in pieces. */
START_TEST(test_sha256)
{
	static const char abc_hex[] = "ba7816bf8f01cfea414140de5dae2223"
				      "b00361a396177a9cb410ff61f20015ad";
	static const char two[] =
		"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	uint8_t md[SHA256_LEN], md2[SHA256_LEN];
	char hex[SHA256_HEX_LEN + 1];
	struct sha256 *s;
	size_t i;

	ck_assert_int_eq(sha256_hex("abc", 3, hex), 0);
	ck_assert_str_eq(hex, abc_hex);
	ck_assert_int_eq(sha256_hex("", 0, hex), 0);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb924"
			      "27ae41e4649b934ca495991b7852b855");
	ck_assert_int_eq(sha256(two, strlen(two), md), 0);
	hex_encode(md, sizeof(md), hex);
	ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039"
			      "a33ce45964ff2167f6ecedd419db06c1");

	s = sha256_new();
	ck_assert_ptr_nonnull(s);
	for (i = 0; i < strlen(two); i += 5)
		ck_assert_int_eq(sha256_update(s, two + i,
					       strlen(two) - i < 5
						       ? strlen(two) - i
						       : 5),
				 0);
	ck_assert_int_eq(sha256_final(s, md2), 0);
	sha256_free(s);
	ck_assert_mem_eq(md, md2, SHA256_LEN);
	sha256_free(NULL);
}
END_TEST

/* RFC 1321's test suite, in one piece and in pieces of 3 bytes. */
START_TEST(test_md5)
{
	static const char *const in[] = {
		"",
		"a",
		"abc",
		"message digest",
		"abcdefghijklmnopqrstuvwxyz",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz012345678"
		"9",
		"1234567890123456789012345678901234567890123456789012345678901"
		"2345678901234567890",
	};
	static const char *const out[] = {
		"d41d8cd98f00b204e9800998ecf8427e",
		"0cc175b9c0f1b6a831c399e269772661",
		"900150983cd24fb0d6963f7d28e17f72",
		"f96b697d7cb7938d525a2f31aaf161d0",
		"c3fcd3d76192e4007dfb496cca67e13b",
		"d174ab98d277d9f5a5611c2c9f419d9f",
		"57edf4a22be3c955ac49da2e2107b67a",
	};
	uint8_t md[MD5_LEN];
	char hex[2 * MD5_LEN + 1];
	size_t i, j, n;

	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		struct md5 *m = md5_new();

		ck_assert_ptr_nonnull(m);
		n = strlen(in[i]);
		for (j = 0; j < n; j += 3)
			ck_assert_int_eq(
				md5_update(m, in[i] + j, n - j < 3 ? n - j : 3),
				0);
		ck_assert_int_eq(md5_final(m, md), 0);
		md5_free(m);
		hex_encode(md, MD5_LEN, hex);
		ck_assert_str_eq(hex, out[i]);
	}
	md5_free(NULL);
}
END_TEST

START_TEST(test_str_memdup)
{
	char *s = str_memdup("abc\0def", 7);

	ck_assert_ptr_nonnull(s);
	ck_assert_mem_eq(s, "abc\0def", 7);
	ck_assert_int_eq(s[7], '\0');
	free(s);
	s = str_memdup(NULL, 0);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

START_TEST(test_str_trim)
{
	char a[] = " \t key = v \r\n";
	char b[] = "   ";
	char c[] = "x";
	const char *text = "\t a b \r", *s = text, *e = text + strlen(text);

	ck_assert_str_eq(str_trim(a), "key = v");
	ck_assert_str_eq(str_trim(b), "");
	ck_assert_str_eq(str_trim(c), "x");
	ck_assert_str_eq(str_skip_space("  y "), "y ");
	str_trim_span(&s, &e);
	ck_assert_int_eq((int)(e - s), 3);
	ck_assert_mem_eq(s, "a b", 3);
	s = e = text + 1;
	str_trim_span(&s, &e);
	ck_assert_ptr_eq(s, e);
}
END_TEST

START_TEST(test_str_canon)
{
	uint64_t v = 99, w = 99;

	ck_assert(str_u64_canon("0", 1, &v) && v == 0);
	ck_assert(str_u64_canon("18446744073709551615", 20, &v) &&
		  v == UINT64_MAX);
	ck_assert(!str_u64_canon("18446744073709551616", 20, &v));
	ck_assert(!str_u64_canon("07", 2, &v));
	ck_assert(!str_u64_canon("", 0, &v));
	ck_assert(!str_u64_canon("+7", 2, &v));
	ck_assert(!str_u64_canon("7x", 2, &v));
	ck_assert(str_u64_canon("7x", 1, &v) && v == 7);
	ck_assert(str_skip_spec("80", &v, &w) && v == 80 && w == 0);
	ck_assert(str_skip_spec("80-of-4", &v, &w) && v == 80 && w == 4);
	ck_assert(str_skip_spec("0-of-4294967295", &v, &w) && w == 4294967295u);
	ck_assert(!str_skip_spec("80-of-4294967296", &v, &w));
	ck_assert(!str_skip_spec("80-of-0", &v, &w));
	ck_assert(!str_skip_spec("80-of-", &v, &w));
	ck_assert(!str_skip_spec("-of-4", &v, &w));
	ck_assert(!str_skip_spec("80-of-4-of-4", &v, &w));
}
END_TEST

START_TEST(test_str_unescape_octal)
{
	char a[] = "/mnt/a\\040b\\011c\\134d";
	char b[] = "x\\04y\\400z\\";

	str_unescape_octal(a);
	ck_assert_str_eq(a, "/mnt/a b\tc\\d");
	str_unescape_octal(b); /* not escapes: kept */
	ck_assert_str_eq(b, "x\\04y\\400z\\");
}
END_TEST

static void *blocked_main(void *arg)
{
	sigset_t *mask = arg;

	pthread_sigmask(SIG_BLOCK, NULL, mask);
	return NULL;
}

/* The new thread has SIGHUP, SIGINT and SIGTERM blocked; the caller's
 * mask is as it was. */
START_TEST(test_thread_start_blocks)
{
	sigset_t before, after, in_thread;
	pthread_t t;

	pthread_sigmask(SIG_BLOCK, NULL, &before);
	ck_assert(!sigismember(&before, SIGTERM));
	ck_assert_int_eq(thread_start(&t, blocked_main, &in_thread), 0);
	pthread_join(t, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	ck_assert(sigismember(&in_thread, SIGHUP));
	ck_assert(sigismember(&in_thread, SIGINT));
	ck_assert(sigismember(&in_thread, SIGTERM));
	ck_assert(!sigismember(&in_thread, SIGPIPE));
	ck_assert(!sigismember(&after, SIGTERM));
	ck_assert(!sigismember(&after, SIGHUP));

	thread_block_signals(SIGPIPE, &before);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	ck_assert(sigismember(&after, SIGPIPE));
	ck_assert(sigismember(&after, SIGINT));
	pthread_sigmask(SIG_SETMASK, &before, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	ck_assert(!sigismember(&after, SIGPIPE));
}
END_TEST

/* A key escapes exactly as the manifest writes it; a long one is cut
 * before an escape, never inside, with "...". */
START_TEST(test_str_escape_key)
{
	static const char key[] = "a\tb%c\x1b[31m\ndone\x7f\xff";
	char buf[64], small[8], *dup;
	size_t i;

	ck_assert_str_eq(str_escape_key(buf, sizeof(buf), key, sizeof(key) - 1),
			 "a%09b%25c%1B[31m%0Adone\x7f\xff");
	dup = str_escape_key_dup(key, sizeof(key) - 1);
	ck_assert_str_eq(dup, buf);
	free(dup);
	/* Every cut of a key of escapes: terminated, no half escape. */
	for (i = 4; i <= sizeof(small); i++) {
		size_t n = strlen(str_escape_key(small, i, "\n\n\n\n", 4));

		ck_assert_uint_lt(n, i);
		ck_assert_msg(strcmp(small, "...") == 0 ||
				      strncmp(small, "%0A", 3) == 0,
			      "cap %zu: '%s'", i, small);
		ck_assert(n < 3 || small[n - 1] == '.' || small[n - 1] == 'A');
	}
	ck_assert_str_eq(str_escape_key(small, sizeof(small), "abcdefghij", 10),
			 "abcd...");
	ck_assert_str_eq(str_escape_key(small, sizeof(small), "abcdefg", 7),
			 "abcdefg");
	ck_assert(str_key_escapes('%') && str_key_escapes('\n') &&
		  str_key_escapes(0) && !str_key_escapes(' ') &&
		  !str_key_escapes(0x7f) && !str_key_escapes(0xc3));
}
END_TEST

/* Printable text: valid UTF-8 unchanged; controls, DEL, C1 and bytes that
 * are not UTF-8 as %XX; cut at a character. */
START_TEST(test_str_printable)
{
	char out[128];
	static const char in[] = "ok \xc3\xbcn\xc3\xaf \xe2\x82\xac "
				 "\x1b[31m\r\n\t\x7f \xc2\x9b \xff\xc3 "
				 "\xe0\x80\x80 \xed\xa0\x80 \xf4\x90\x80\x80";

	ck_assert_uint_eq(str_printable(out, sizeof(out), in, sizeof(in) - 1),
			  strlen(out));
	ck_assert_str_eq(out, "ok \xc3\xbcn\xc3\xaf \xe2\x82\xac "
			      "%1B[31m%0D%0A%09%7F %C2%9B %FF%C3 "
			      "%E0%80%80 %ED%A0%80 %F4%90%80%80");
	/* Cut: never half a character or half an escape. */
	ck_assert_uint_eq(str_printable(out, 5, "ab\xc3\xbc", 4), 4);
	ck_assert_str_eq(out, "ab\xc3\xbc");
	ck_assert_uint_eq(str_printable(out, 4, "ab\xc3\xbc", 4), 2);
	ck_assert_str_eq(out, "ab");
	ck_assert_uint_eq(str_printable(out, 5, "a\x1b", 2), 4);
	ck_assert_uint_eq(str_printable(out, 4, "a\x1b", 2), 1);
	ck_assert_str_eq(out, "a");
	ck_assert_uint_eq(str_printable(out, 1, "abc", 3), 0);
	ck_assert_str_eq(out, "");
}
END_TEST

struct node {
	struct node *prev, *next;
	int v;
};

static void expect_list(struct node *head, const char *want)
{
	char got[16];
	size_t n = 0;
	struct node *p, *prev = NULL;

	for (p = head; p != NULL; prev = p, p = p->next) {
		ck_assert_ptr_eq(p->prev, prev);
		got[n++] = (char)('0' + p->v);
	}
	got[n] = '\0';
	ck_assert_str_eq(got, want);
}

START_TEST(test_dlist)
{
	struct node n[4] = { { .v = 0 }, { .v = 1 }, { .v = 2 }, { .v = 3 } };
	struct node *head = NULL;
	int i;

	for (i = 0; i < 4; i++)
		DLIST_PUSH(head, &n[i]);
	expect_list(head, "3210");
	DLIST_UNLINK(head, &n[2]); /* middle */
	expect_list(head, "310");
	DLIST_UNLINK(head, &n[3]); /* first */
	expect_list(head, "10");
	DLIST_UNLINK(head, &n[0]); /* last */
	expect_list(head, "1");
	DLIST_UNLINK(head, &n[1]);
	ck_assert_ptr_null(head);
}
END_TEST

/* The curve: base * 2^(n-1) capped, jittered into [d/2, d). */
START_TEST(test_backoff_curve)
{
	static const struct backoff_policy p = { .base_ms = 100,
						 .cap_ms = 5000 };
	unsigned a, lo, hi, prev = 0;

	ck_assert_uint_eq(backoff_ms(&p, 1, 0.0), 50);
	ck_assert_uint_eq(backoff_ms(&p, 0, 0.0), 50);
	ck_assert_uint_eq(backoff_ms(&p, 2, 0.0), 100);
	ck_assert_uint_eq(backoff_ms(&p, 3, 0.0), 200);
	ck_assert_uint_eq(backoff_ms(&p, 6, 0.0), 1600);
	/* 100 * 2^6 = 6400 is past the cap. */
	ck_assert_uint_eq(backoff_ms(&p, 7, 0.0), 2500);
	ck_assert_uint_lt(backoff_ms(&p, 1, 0.999999), 100);
	ck_assert_uint_ge(backoff_ms(&p, 1, 0.999999), 99);
	for (a = 1; a < 200; a++) {
		lo = backoff_ms(&p, a, 0.0);
		hi = backoff_ms(&p, a, 0.999999);
		ck_assert_uint_ge(lo, prev); /* never shrinks */
		ck_assert_uint_le(lo, hi);
		ck_assert_uint_lt(hi, 5000);
		ck_assert_uint_ge(lo, 50);
		prev = lo;
	}
	ck_assert_uint_eq(backoff_ms(&p, 4000000000u, 0.0), 2500);
}
END_TEST

/* A policy whose cap is below its base delays by the cap. */
START_TEST(test_backoff_cap_below_base)
{
	static const struct backoff_policy p = { .base_ms = 800,
						 .cap_ms = 300 };

	ck_assert_uint_eq(backoff_ms(&p, 1, 0.0), 150);
	ck_assert_uint_lt(backoff_ms(&p, 9, 0.999999), 300);
}
END_TEST

/* Jitter is uniform-ish in [0, 1) and the delays it picks stay in
 * [d/2, d) and actually spread. */
START_TEST(test_backoff_jitter)
{
	static const struct backoff_policy p = { .base_ms = 50,
						 .cap_ms = 1000 };
	unsigned i, d, min = UINT32_MAX, max = 0, low_half = 0;
	double j;

	for (i = 0; i < 10000; i++) {
		j = backoff_jitter();
		ck_assert(j >= 0.0 && j < 1.0);
		if (j < 0.5)
			low_half++;
		d = backoff_delay_ms(&p, 3);
		ck_assert_uint_ge(d, 100);
		ck_assert_uint_lt(d, 200);
		if (d < min)
			min = d;
		if (d > max)
			max = d;
	}
	/* Not a timing: 10000 uniform draws landing all in one half, or
	 * all delays within 20 ms, would mean no jitter. */
	ck_assert_uint_gt(low_half, 4000);
	ck_assert_uint_lt(low_half, 6000);
	ck_assert_uint_lt(min, 120);
	ck_assert_uint_gt(max, 180);
}
END_TEST

static void *jitter_first(void *arg)
{
	*(double *)arg = backoff_jitter();
	return NULL;
}

/* Each thread has its own source: two threads started together do not
 * draw the same sequence. */
START_TEST(test_backoff_jitter_threads)
{
	double a[8];
	pthread_t t[8];
	unsigned i, k, same = 0;

	for (i = 0; i < 8; i++)
		ck_assert_int_eq(thread_start(&t[i], jitter_first, &a[i]), 0);
	for (i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 8; i++)
		for (k = i + 1; k < 8; k++)
			same += a[i] == a[k];
	ck_assert_uint_eq(same, 0);
}
END_TEST

/* A walk's path: separators only between names, never after the root,
 * growing as deep as it goes; the buffer starts empty. */
START_TEST(test_str_path_push)
{
	char *p = NULL, name[40];
	size_t len = 0, cap = 0, i;

	ck_assert_int_eq(str_path_push(&p, &len, &cap, "a", 0), 0);
	ck_assert_str_eq(p, "a");
	ck_assert_uint_eq(len, 1);
	ck_assert_int_eq(str_path_push(&p, &len, &cap, "bc", 0), 0);
	ck_assert_str_eq(p, "a/bc");
	ck_assert_uint_eq(len, 4);
	len = 1; /* back up to "a", as a walk leaving a directory does */
	p[len] = '\0';
	ck_assert_int_eq(str_path_push(&p, &len, &cap, "d", 0), 0);
	ck_assert_str_eq(p, "a/d");
	/* A root "/" takes no separator after it. */
	p[0] = '/';
	p[1] = '\0';
	len = 1;
	ck_assert_int_eq(str_path_push(&p, &len, &cap, "x", 1), 0);
	ck_assert_str_eq(p, "/x");
	ck_assert_int_eq(str_path_push(&p, &len, &cap, "y", 1), 0);
	ck_assert_str_eq(p, "/x/y");
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "level-%03zu", i);
		ck_assert_int_eq(str_path_push(&p, &len, &cap, name, 1), 0);
	}
	ck_assert_uint_eq(len, strlen(p));
	ck_assert_uint_eq(len, 4 + 100 * 10);
	ck_assert_uint_gt(cap, len);
	ck_assert_str_eq(p + len - 9, "level-099");
	free(p);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "str_path_push", test_str_path_push },
		{ "hex_decode", test_hex_decode },
		{ "hex_percent", test_hex_percent },
		{ "hex_encode", test_hex_encode },
		{ "sha256", test_sha256 },
		{ "md5", test_md5 },
		{ "str_memdup", test_str_memdup },
		{ "str_trim", test_str_trim },
		{ "str_unescape_octal", test_str_unescape_octal },
		{ "str_canon", test_str_canon },
		{ "str_escape_key", test_str_escape_key },
		{ "str_printable", test_str_printable },
		{ "thread_start_blocks", test_thread_start_blocks },
		{ "dlist", test_dlist },
		{ "backoff_curve", test_backoff_curve },
		{ "backoff_cap_below_base", test_backoff_cap_below_base },
		{ "backoff_jitter", test_backoff_jitter },
		{ "backoff_jitter_threads", test_backoff_jitter_threads },
	};

	return unit_run(
		unit_suite("util", cases, sizeof(cases) / sizeof(cases[0])));
}
