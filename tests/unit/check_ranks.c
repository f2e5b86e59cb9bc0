/*
 * Unit tests for util/ranks: the rank-list grammar shared by [shard] ranks,
 * `shardfs plan --rank` and `shardfs warm --rank`: good lists (spaces,
 * overlaps and adjacent ranges merged), every error with its exact words,
 * the world_size check, lookup and counting.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/ranks.h"
#include "tests/unit/unit.h"

#define LIST_WHY "not a list of ranks and ranges such as 0,2,8-15"

START_TEST(test_good)
{
	static const struct {
		const char *text;
		size_t n;
		struct ranks_range want[4];
	} cases[] = {
		{ "0", 1, { { 0, 0 } } },
		{ "0-3,8", 2, { { 0, 3 }, { 8, 8 } } },
		{ " 0 - 3 , 8 ", 2, { { 0, 3 }, { 8, 8 } } },
		{ "\t5\t", 1, { { 5, 5 } } },
		{ "3,1,2", 1, { { 1, 3 } } },
		{ "0-4,2-8, 10 - 12 ,9", 1, { { 0, 12 } } },
		{ "7,7,7", 1, { { 7, 7 } } },
		{ "8-15,0,2", 3, { { 0, 0 }, { 2, 2 }, { 8, 15 } } },
		{ "20-30,0-0,25-26,31", 2, { { 0, 0 }, { 20, 31 } } },
		{ "18446744073709551615", 1, { { UINT64_MAX, UINT64_MAX } } },
		{ "0-18446744073709551615,5", 1, { { 0, UINT64_MAX } } },
		{ "007", 1, { { 7, 7 } } },
	};
	struct ranks_range *r;
	char why[128];
	size_t i, j, n;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = NULL;
		n = 99;
		ck_assert_msg(ranks_parse(cases[i].text, &r, &n, why,
					  sizeof(why)) == 0,
			      "%s", cases[i].text);
		ck_assert_msg(n == cases[i].n, "%s: %zu ranges", cases[i].text,
			      n);
		for (j = 0; j < n; j++) {
			ck_assert_uint_eq(r[j].lo, cases[i].want[j].lo);
			ck_assert_uint_eq(r[j].hi, cases[i].want[j].hi);
		}
		free(r);
	}
}
END_TEST

/* The formatter writes the grammar back: parse(format(x)) == x. */
START_TEST(test_format)
{
	struct ranks_range *r = NULL, *r2 = NULL;
	char buf[64], small[8], why[128];
	size_t n = 0, n2 = 0;

	ck_assert_int_eq(ranks_parse("8-15,0,2,3", &r, &n, why, sizeof(why)),
			 0);
	ranks_format(r, n, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0,2-3,8-15");
	ck_assert_int_eq(ranks_parse(buf, &r2, &n2, why, sizeof(why)), 0);
	ck_assert_uint_eq(n2, n);
	ranks_format(r, n, small, sizeof(small));
	ck_assert_str_eq(small, "0,2-...");
	ranks_format(r, 0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	free(r);
	free(r2);
}
END_TEST

START_TEST(test_errors)
{
	static const struct {
		const char *text, *why;
	} cases[] = {
		{ "", "empty rank list" },
		{ "   ", "empty rank list" },
		{ "1,", LIST_WHY },
		{ "1, ", LIST_WHY },
		{ ",1", LIST_WHY },
		{ "1,,2", LIST_WHY },
		{ "a", LIST_WHY },
		{ "-1", LIST_WHY },
		{ "+1", LIST_WHY },
		{ "1-", LIST_WHY },
		{ "1-a", LIST_WHY },
		{ "1--2", LIST_WHY },
		{ "1-2-3", LIST_WHY },
		{ "1 2", LIST_WHY },
		{ "0x1", LIST_WHY },
		{ "1;2", LIST_WHY },
		{ "1.5", LIST_WHY },
		{ "15-8", "range 15-8 ends before it starts" },
		{ "0,9-3", "range 9-3 ends before it starts" },
		{ "18446744073709551616",
		  "rank out of range (more than 64 bits)" },
		{ "0-99999999999999999999", "rank out of range (more than 64 "
					    "bits)" },
	};
	struct ranks_range *r = (struct ranks_range *)&cases;
	char why[128];
	size_t i, n = 99;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_msg(ranks_parse(cases[i].text, &r, &n, why,
					  sizeof(why)) == -EINVAL,
			      "'%s'", cases[i].text);
		ck_assert_msg(!strcmp(why, cases[i].why), "'%s': %s",
			      cases[i].text, why);
		ck_assert_ptr_eq(r, (struct ranks_range *)&cases);
		ck_assert_uint_eq(n, 99);
	}
	/* No room for a reason is fine. */
	ck_assert_int_eq(ranks_parse("x", &r, &n, NULL, 0), -EINVAL);
	ck_assert_int_eq(ranks_parse(NULL, &r, &n, NULL, 0), -EINVAL);
}
END_TEST

START_TEST(test_world)
{
	struct ranks_range *r;
	char why[128];
	size_t n;

	ck_assert_int_eq(ranks_parse("0-3,8", &r, &n, why, sizeof(why)), 0);
	ck_assert_int_eq(ranks_check_world(r, n, 9, why, sizeof(why)), 0);
	ck_assert_int_eq(ranks_check_world(r, n, 8, why, sizeof(why)), -ERANGE);
	ck_assert_str_eq(why, "rank 8 is not below world_size 8");
	ck_assert_int_eq(ranks_check_world(r, 0, 1, why, sizeof(why)), 0);

	ck_assert(ranks_contains(r, n, 0));
	ck_assert(ranks_contains(r, n, 3));
	ck_assert(!ranks_contains(r, n, 4));
	ck_assert(!ranks_contains(r, n, 7));
	ck_assert(ranks_contains(r, n, 8));
	ck_assert(!ranks_contains(r, n, 9));
	ck_assert(!ranks_contains(r, n, UINT64_MAX));
	ck_assert(!ranks_contains(r, 0, 0));
	ck_assert_uint_eq(ranks_count(r, n), 5);
	free(r);

	ck_assert_int_eq(
		ranks_parse("0-18446744073709551615", &r, &n, why, sizeof(why)),
		0);
	ck_assert_uint_eq(ranks_count(r, n), UINT64_MAX);
	ck_assert(ranks_contains(r, n, UINT64_MAX));
	free(r);
}
END_TEST

static Suite *ranks_suite(void)
{
	Suite *s = suite_create("ranks");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_format);
	tcase_add_test(tc, test_world);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(ranks_suite());
}
