/*
 * check_log: log_limit(), which keeps repeats of one failure out of the
 * log for LOG_REPEAT_S seconds (the passing of that time is not tested:
 * no test waits on a clock), log_errors_get(), the journal stream
 * detection and the file sink.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* A temp file as stderr; returns the saved stderr. */
static int stderr_to(const char *path)
{
	int saved = dup(STDERR_FILENO);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
	close(fd);
	return saved;
}

static void stderr_back(int saved)
{
	dup2(saved, STDERR_FILENO);
	close(saved);
}

static char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "re");
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* systemd.exec(5): only a JOURNAL_STREAM naming stderr's device and inode
 * means stderr is the journal; an inherited one for another file does not. */
START_TEST(test_journal_stream_detection)
{
	char path[] = "/tmp/check_log.XXXXXX", env[64];
	struct stat st;
	int fd = mkstemp(path), saved;

	ck_assert_int_ge(fd, 0);
	close(fd);
	saved = stderr_to(path);
	ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);

	setenv("JOURNAL_STREAM", "1:2", 1);
	log_init("shardfs");
	ck_assert(!log_stderr_is_journal());
	log_write(LOG_WARNING, "plain %d", 1);

	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	log_init("shardfs");
	ck_assert(log_stderr_is_journal());
	log_write(LOG_WARNING, "journal %d", 2);

	setenv("JOURNAL_STREAM", "garbage", 1);
	log_init("shardfs");
	ck_assert(!log_stderr_is_journal());
	unsetenv("JOURNAL_STREAM");
	log_init("shardfs");
	stderr_back(saved);
	ck_assert_str_eq(slurp(path),
			 "shardfs: warning: plain 1\n<4>journal 2\n");
	unlink(path);
}
END_TEST

/* The file sink: appended, 0640 before the umask, a time and the pid. */
START_TEST(test_file_sink)
{
	char path[] = "/tmp/check_log.XXXXXX", want[64];
	struct log_errors e;
	struct stat st;
	int fd = mkstemp(path);
	mode_t old = umask(022);
	const char *text;

	ck_assert_int_ge(fd, 0);
	close(fd);
	unlink(path);
	ck_assert_int_eq(log_file_open(path), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0640);
	umask(old);
	log_set_sink(LOG_SINK_FILE);
	log_write(LOG_ERR, "to the file %d", 7);
	log_set_sink(LOG_SINK_STDERR);
	text = slurp(path);
	snprintf(want, sizeof(want), " shardfs[%d]: error: to the file 7\n",
		 (int)getpid());
	ck_assert_ptr_nonnull(strstr(text, want));
	ck_assert_int_eq(text[4], '-');
	ck_assert_int_eq(text[19], 'Z');
	log_errors_get(&e);
	ck_assert_str_eq(e.last, "to the file 7");
	ck_assert_int_eq(log_file_open("/nonexistent/dir/x.log"), -ENOENT);
	unlink(path);
}
END_TEST

/* Whatever a caller passes, a line is one line of printable text: a
 * newline in an object key forged a second "shardfs: error:" line, an ESC
 * sequence reached the log and `shardfs status` (the last error). */
START_TEST(test_controls_neutralised)
{
	char path[] = "/tmp/check_log.XXXXXX", kb[LOG_KEY_MAX];
	static const char key[] = "evil\nshardfs: error: forged\x1b[31mred";
	struct log_errors e;
	const char *text;
	int fd = mkstemp(path), saved;

	ck_assert_int_ge(fd, 0);
	close(fd);
	saved = stderr_to(path);
	unsetenv("JOURNAL_STREAM");
	log_init("shardfs");
	/* A caller that escaped the key (log_key()), one that did not, and
	 * C1, DEL and bytes that are not UTF-8; trailing newlines go. */
	log_write(LOG_ERR, "source /d/%s: changed",
		  log_key(kb, key, sizeof(key) - 1));
	log_write(LOG_ERR, "raw /d/%s: changed", key);
	log_write(LOG_WARNING,
		  "c1 \xc2\x9b[2J del \x7f bad \xff ok \xc3\xbc\n");
	stderr_back(saved);
	text = slurp(path);
	ck_assert_str_eq(text,
			 "shardfs: error: source /d/evil%0Ashardfs: error: "
			 "forged%1B[31mred: changed\n"
			 "shardfs: error: raw /d/evil%0Ashardfs: error: "
			 "forged%1B[31mred: changed\n"
			 "shardfs: warning: c1 %C2%9B[2J del %7F bad %FF ok "
			 "\xc3\xbc\n");
	log_errors_get(&e);
	ck_assert_str_eq(e.last, "raw /d/evil%0Ashardfs: error: "
				 "forged%1B[31mred: changed");
	/* Very long keys are cut, not the line's end. */
	{
		char big[3000];

		memset(big, '\n', sizeof(big));
		log_key(kb, big, sizeof(big));
		ck_assert_uint_lt(strlen(kb), LOG_KEY_MAX);
		ck_assert_str_eq(kb + strlen(kb) - 3, "...");
	}
	unlink(path);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "first_logs_repeats_quiet", test_first_logs_repeats_quiet },
		{ "threads_log_once", test_threads_log_once },
		{ "errors_counted", test_errors_counted },
		{ "journal_stream_detection", test_journal_stream_detection },
		{ "file_sink", test_file_sink },
		{ "controls_neutralised", test_controls_neutralised },
	};
	return unit_run(
		unit_suite("log", cases, sizeof(cases) / sizeof(cases[0])));
}
