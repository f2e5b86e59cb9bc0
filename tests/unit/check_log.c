/*
 * check_log: log_limit(), which keeps repeats of one failure out of the
 * log for LOG_REPEAT_S seconds (the passing of that time is not tested:
 * no test waits on a clock), and log_errors_get().
 */
#include <check.h>
#include <pthread.h>

#include "tests/unit/unit.h"
#include "util/log.h"

START_TEST(test_first_logs_repeats_quiet)
{
	unsigned long quiet = 99;

	ck_assert(!log_limit("s3://b/first", &quiet));
	ck_assert_uint_eq(quiet, 0);
	ck_assert(log_limit("s3://b/first", NULL));
	ck_assert(log_limit("s3://b/first", &quiet));
	/* Another failure is not held back by the first. */
	ck_assert(!log_limit("s3://b/second", &quiet));
	ck_assert_uint_eq(quiet, 0);
}
END_TEST

static void *repeat(void *arg)
{
	long *logged = arg;
	int i;

	for (i = 0; i < 1000; i++)
		if (!log_limit("s3://b/threads", NULL))
			__atomic_add_fetch(logged, 1, __ATOMIC_RELAXED);
	return NULL;
}

START_TEST(test_threads_log_once)
{
	pthread_t t[4];
	long logged = 0;
	int i;

	for (i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, repeat, &logged),
				 0);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(logged, 1);
}
END_TEST

/* Errors and warnings are counted and the last error's text is kept for
 * `shardfs status`; info lines are not. */
START_TEST(test_errors_counted)
{
	struct log_errors e;

	log_errors_get(&e);
	ck_assert_uint_eq(e.errors, 0);
	ck_assert_str_eq(e.last, "");
	log_write(LOG_INFO, "just info");
	log_write(LOG_WARNING, "a warning %d", 1);
	log_write(LOG_ERR, "first error %d", 1);
	log_write(LOG_ERR, "second error %s", "here");
	log_errors_get(&e);
	ck_assert_uint_eq(e.errors, 2);
	ck_assert_uint_eq(e.warnings, 1);
	ck_assert_str_eq(e.last, "second error here");
	ck_assert_int_gt(e.last_time, 0);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "first_logs_repeats_quiet", test_first_logs_repeats_quiet },
		{ "threads_log_once", test_threads_log_once },
		{ "errors_counted", test_errors_counted },
	};
	return unit_run(
		unit_suite("log", cases, sizeof(cases) / sizeof(cases[0])));
}
