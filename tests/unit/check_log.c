/*
 * check_log: log_limit(), which keeps repeats of one failure out of the
 * log for LOG_REPEAT_S seconds (the passing of that time is not tested:
 * no test waits on a clock), log_errors_get(), the journal stream
 * detection, the file sink and its rotation, the function sink, the
 * ring of recent warnings and errors, and printable lines.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

/* The last LOG_RECENT_MAX warnings and errors, oldest first; infos are
 * not kept; a long message is cut at a character. */
START_TEST(test_recent_ring)
{
	struct log_entry e[LOG_RECENT_MAX + 4];
	char big[1000];
	size_t n, i;

	log_set_level(LOG_DEBUG);
	ck_assert_uint_eq(log_recent_get(e, LOG_RECENT_MAX), 0);
	log_write(LOG_INFO, "not kept");
	log_write(LOG_WARNING, "w%d", 0);
	log_write(LOG_ERR, "e%d", 1);
	n = log_recent_get(e, LOG_RECENT_MAX);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(e[0].msg, "w0");
	ck_assert_int_eq(e[0].level, LOG_WARNING);
	ck_assert_str_eq(e[1].msg, "e1");
	ck_assert_int_eq(e[1].level, LOG_ERR);
	ck_assert_int_gt(e[1].time, 0);
	for (i = 2; i < LOG_RECENT_MAX + 3; i++)
		log_write(LOG_ERR, "e%zu", i);
	n = log_recent_get(e, LOG_RECENT_MAX + 4);
	ck_assert_uint_eq(n, LOG_RECENT_MAX);
	/* The oldest went: e3 .. e18, in order. */
	for (i = 0; i < n; i++) {
		char want[16];

		snprintf(want, sizeof(want), "e%zu", i + 3);
		ck_assert_str_eq(e[i].msg, want);
	}
	ck_assert_uint_eq(log_recent_get(e, 2), 2);
	ck_assert_str_eq(e[1].msg, "e18");
	/* 2-byte characters: the cut never splits one. */
	for (i = 0; i + 1 < sizeof(big); i += 2) {
		big[i] = (char)0xc3;
		big[i + 1] = (char)0xbc;
	}
	big[sizeof(big) - 1] = '\0';
	log_write(LOG_WARNING, "x%s", big);
	n = log_recent_get(e, LOG_RECENT_MAX);
	ck_assert_uint_lt(strlen(e[n - 1].msg), sizeof(e[n - 1].msg));
	ck_assert_uint_eq(strlen(e[n - 1].msg) % 2, 1); /* "x" + pairs */
}
END_TEST

static size_t lines_in(const char *path)
{
	FILE *f = fopen(path, "re");
	size_t n = 0;
	int c;

	if (f == NULL)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static off_t size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Rotation: PATH at max_size becomes PATH.1, PATH.1 PATH.2, keep files
 * kept; no line lost or split while they fit; another process's PATH
 * (already rotated) is just reopened. */
START_TEST(test_file_rotation)
{
	char dir[] = "/tmp/check_log.XXXXXX", path[256], p1[280], p2[280],
	     p3[280];
	size_t i, total;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/x.log", dir);
	snprintf(p1, sizeof(p1), "%s.1", path);
	snprintf(p2, sizeof(p2), "%s.2", path);
	snprintf(p3, sizeof(p3), "%s.3", path);
	log_set_level(LOG_DEBUG);
	ck_assert_int_eq(log_file_open(path), 0);
	log_file_limits(1000, 2);
	log_set_sink(LOG_SINK_FILE);
	/* ~100-byte lines: 10 a file; 25 lines fit in PATH, .1 and .2. */
	for (i = 0; i < 25; i++)
		log_write(LOG_INFO, "line %02zu %060d", i, 0);
	total = lines_in(path) + lines_in(p1) + lines_in(p2);
	ck_assert_uint_eq(total, 25);
	ck_assert_int_ge(size_of(p1), 1000);
	ck_assert_int_lt(size_of(p1), 1200);
	ck_assert_int_ge(size_of(p2), 1000);
	ck_assert_int_lt(size_of(path), 1000);
	ck_assert_int_eq(size_of(p3), -1);
	/* More: the oldest lines go, never more than keep files. */
	for (i = 0; i < 40; i++)
		log_write(LOG_INFO, "more %02zu %060d", i, 0);
	ck_assert_int_eq(size_of(p3), -1);
	ck_assert_ptr_nonnull(strstr(slurp(path), "more 39"));
	/* Another process rotated PATH: this one reopens it, renames
	 * nothing. */
	ck_assert_int_eq(rename(path, p3), 0);
	for (i = 0; i < 12; i++)
		log_write(LOG_INFO, "after %02zu %060d", i, 0);
	ck_assert_int_ge(size_of(path), 0);
	ck_assert_ptr_nonnull(strstr(slurp(path), "after 11"));
	/* keep 0: the file is emptied instead. */
	log_file_limits(1000, 0);
	for (i = 0; i < 30; i++)
		log_write(LOG_INFO, "zero %02zu %060d", i, 0);
	ck_assert_int_lt(size_of(path), 1000);
	/* A busy lock (another process rotating) is not waited for: the
	 * file grows past the limit and rotates once it is free. */
	{
		int fd = open(path, O_RDONLY | O_CLOEXEC), before;

		log_file_limits(1000, 1);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(flock(fd, LOCK_EX), 0);
		for (i = 0; i < 20; i++)
			log_write(LOG_INFO, "held %02zu %060d", i, 0);
		before = (int)size_of(path);
		ck_assert_int_gt(before, 1000);
		flock(fd, LOCK_UN);
		close(fd);
		log_write(LOG_INFO, "free %060d", 0);
		ck_assert_int_lt(size_of(path), before);
	}
	log_set_sink(LOG_SINK_STDERR);
	log_file_limits(0, 0);
	unlink(path);
	unlink(p1);
	unlink(p2);
	unlink(p3);
	rmdir(dir);
}
END_TEST

static char func_got[256];
static int func_level;

static void func_sink(int level, const char *msg, size_t len)
{
	func_level = level;
	snprintf(func_got, sizeof(func_got), "%.*s", (int)len, msg);
}

/* The function sink gets the level and the printable message; the target
 * is what log_errors_get() reports. */
START_TEST(test_func_sink_and_target)
{
	struct log_errors e;

	log_set_sink(LOG_SINK_FUNC); /* none set yet: ignored */
	log_set_func(func_sink);
	log_set_sink(LOG_SINK_FUNC);
	log_write(LOG_WARNING, "to the %s\n", "journal\x1b");
	log_set_sink(LOG_SINK_STDERR);
	ck_assert_int_eq(func_level, LOG_WARNING);
	ck_assert_str_eq(func_got, "to the journal%1B");
	log_errors_get(&e);
	ck_assert_str_eq(e.target, "");
	log_set_target("file", "/var/log/shardfs/x.log", "no syslog");
	log_errors_get(&e);
	ck_assert_str_eq(e.target, "file");
	ck_assert_str_eq(e.path, "/var/log/shardfs/x.log");
	ck_assert_str_eq(e.note, "no syslog");
	ck_assert_str_eq(log_level_name(LOG_ERR), "error");
	ck_assert_str_eq(log_level_name(LOG_NOTICE), "notice");
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
		{ "recent_ring", test_recent_ring },
		{ "file_rotation", test_file_rotation },
		{ "func_sink_and_target", test_func_sink_and_target },
	};
	return unit_run(
		unit_suite("log", cases, sizeof(cases) / sizeof(cases[0])));
}
