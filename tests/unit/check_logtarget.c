/*
 * check_logtarget: where a mount logs once it serves (mount/logtarget.h):
 * the fallback file's name, the check that a log socket accepts (against
 * real Unix sockets in a temp directory), and logtarget_prepare() for each
 * [log] target, with its fallback directories made unwritable for real
 * (a path under a regular file). Whether this host has a journal or a
 * /dev/log is what logtarget_socket_accepts() says; the tests expect
 * whatever follows from that.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "mount/config.h"
#include "mount/logtarget.h"
#include "tests/unit/unit.h"
#include "util/log.h"

static char tmpdir[64];

static const char *in_tmp(const char *name)
{
	static char path[4][256];
	static int slot;
	char *p = path[slot++ % 4];

	snprintf(p, sizeof(path[0]), "%s/%s", tmpdir, name);
	return p;
}

START_TEST(test_file_name)
{
	char buf[64];

	logtarget_file_name("/mnt/imagenet", buf, sizeof(buf));
	ck_assert_str_eq(buf, "mnt-imagenet.log");
	logtarget_file_name("/mnt/image net/ü/", buf, sizeof(buf));
	ck_assert_str_eq(buf, "mnt-image_net-__.log");
	logtarget_file_name("/", buf, sizeof(buf));
	ck_assert_str_eq(buf, "root.log");
	logtarget_file_name("/a/very/long/mount/point/that/does/not/fit", buf,
			    16);
	ck_assert_uint_lt(strlen(buf), 16);
	ck_assert_str_eq(buf + strlen(buf) - 4, ".log");
}
END_TEST

/* A socket bound at path (SOCK_DGRAM or SOCK_STREAM listening); returns
 * its descriptor. */
static int bound(const char *path, int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (type == SOCK_STREAM)
		ck_assert_int_eq(listen(fd, 4), 0);
	return fd;
}

START_TEST(test_socket_accepts)
{
	const char *dg = in_tmp("dgram.sock"), *st = in_tmp("stream.sock");
	int a = bound(dg, SOCK_DGRAM), b = bound(st, SOCK_STREAM);

	ck_assert_int_eq(logtarget_socket_accepts(dg), 0);
	/* A stream-only /dev/log (some syslog daemons): EPROTOTYPE, then
	 * a stream connect. */
	ck_assert_int_eq(logtarget_socket_accepts(st), 0);
	close(a);
	close(b);
	/* Nobody bound any more: refused, not a hang. */
	ck_assert_int_eq(logtarget_socket_accepts(dg), -ECONNREFUSED);
	ck_assert_int_eq(logtarget_socket_accepts(in_tmp("none.sock")),
			 -ENOENT);
	/* A regular file is no socket. */
	close(open(in_tmp("plain"), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	ck_assert_int_eq(logtarget_socket_accepts(in_tmp("plain")),
			 -ECONNREFUSED);
}
END_TEST

static struct config *config_of(const char *log_lines)
{
	char err[512], text[2048];
	struct config *cfg = NULL;
	FILE *f = fopen(in_tmp("c.conf"), "we");

	ck_assert_ptr_nonnull(f);
	snprintf(text, sizeof(text),
		 "[source]\nurl = /data\n[cache]\ndir = %s\n[log]\n%s",
		 in_tmp("cache"), log_lines);
	fputs(text, f);
	fclose(f);
	ck_assert_msg(config_load(in_tmp("c.conf"), NULL, 0, &cfg, err,
				  sizeof(err)) == 0,
		      "%s", err);
	return cfg;
}

static struct logtarget t;

START_TEST(test_prepare)
{
	char lines[1024];
	struct config *cfg;
	bool journal = logtarget_socket_accepts(LOGTARGET_JOURNAL_SOCKET) == 0;
	bool syslog_ok = logtarget_socket_accepts(LOGTARGET_SYSLOG_SOCKET) == 0;

	/* auto, foreground: stderr as it is. */
	cfg = config_of("");
	ck_assert_int_eq(logtarget_prepare(cfg, "/mnt/x", true, &t), 0);
	ck_assert_int_eq(t.kind, LOGTARGET_STDERR);
	ck_assert(!t.keep_stderr);
	config_free(cfg);

	/* auto, background: the journal, syslog, else the fallback file
	 * in [log] dir. */
	snprintf(lines, sizeof(lines), "dir = %s\n", in_tmp("logs"));
	cfg = config_of(lines);
	ck_assert_int_eq(logtarget_prepare(cfg, "/mnt/x", false, &t), 0);
	if (journal) {
		ck_assert_int_eq(t.kind, LOGTARGET_JOURNAL);
	} else if (syslog_ok) {
		ck_assert_int_eq(t.kind, LOGTARGET_SYSLOG);
	} else {
		ck_assert_int_eq(t.kind, LOGTARGET_FILE);
		ck_assert_str_eq(t.path, in_tmp("logs/mnt-x.log"));
		ck_assert_ptr_nonnull(strstr(t.note, "no journal ("));
		ck_assert_ptr_nonnull(strstr(t.note, "no syslog (/dev/log"));
		ck_assert_int_eq(access(t.path, F_OK), 0);
	}
	config_free(cfg);

	/* file without a file named: the fallback file; [log] dir not
	 * writable (under a regular file): [cache] dir/log. */
	close(open(in_tmp("notadir"), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	snprintf(lines, sizeof(lines), "target = file\ndir = %s/sub\n",
		 in_tmp("notadir"));
	cfg = config_of(lines);
	ck_assert_int_eq(logtarget_prepare(cfg, "/mnt/x", false, &t), 0);
	ck_assert_int_eq(t.kind, LOGTARGET_FILE);
	ck_assert_str_eq(t.path, in_tmp("cache/log/mnt-x.log"));
	ck_assert_ptr_nonnull(strstr(t.note, "notadir/sub/mnt-x.log: Not a "
					     "directory"));
	config_free(cfg);

	/* Neither writable: memory only, said. */
	snprintf(lines, sizeof(lines), "target = file\ndir = %s/sub\n",
		 in_tmp("notadir"));
	cfg = config_of(lines);
	free(cfg->cache.dir);
	cfg->cache.dir = strdup(in_tmp("notadir/cache"));
	ck_assert_int_eq(logtarget_prepare(cfg, "/mnt/x", false, &t), 0);
	ck_assert_int_eq(t.kind, LOGTARGET_NONE);
	ck_assert_ptr_nonnull(strstr(t.note, "notadir/cache/log"));
	config_free(cfg);

	/* An explicit file: used, foreground or not; one that cannot be
	 * opened fails the mount. */
	snprintf(lines, sizeof(lines), "file = %s\n", in_tmp("named.log"));
	cfg = config_of(lines);
	ck_assert_int_eq(logtarget_prepare(cfg, "/mnt/x", true, &t), 0);
	ck_assert_int_eq(t.kind, LOGTARGET_FILE);
	ck_assert_str_eq(t.path, in_tmp("named.log"));
	config_free(cfg);
	snprintf(lines, sizeof(lines), "file = %s/x.log\n", in_tmp("notadir"));
	cfg = config_of(lines);
	ck_assert_int_eq(logtarget_prepare(cfg, "/mnt/x", false, &t), -ENOTDIR);
	config_free(cfg);

	/* stderr: kept, also once detached. */
	cfg = config_of("target = stderr\n");
	ck_assert_int_eq(logtarget_prepare(cfg, "/mnt/x", false, &t), 0);
	ck_assert_int_eq(t.kind, LOGTARGET_STDERR);
	ck_assert(t.keep_stderr);
	config_free(cfg);

	/* syslog asked for: used if /dev/log accepts, else the fallback
	 * file with a note saying why. */
	snprintf(lines, sizeof(lines), "target = syslog\ndir = %s\n",
		 in_tmp("logs"));
	cfg = config_of(lines);
	ck_assert_int_eq(logtarget_prepare(cfg, "/mnt/y", true, &t), 0);
	if (syslog_ok) {
		ck_assert_int_eq(t.kind, LOGTARGET_SYSLOG);
	} else {
		ck_assert_int_eq(t.kind, LOGTARGET_FILE);
		ck_assert_str_eq(t.path, in_tmp("logs/mnt-y.log"));
		ck_assert_ptr_null(strstr(t.note, "journal"));
		ck_assert_ptr_nonnull(strstr(t.note, "no syslog"));
	}
	config_free(cfg);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "file_name", test_file_name },
		{ "socket_accepts", test_socket_accepts },
		{ "prepare", test_prepare },
	};

	log_set_level(LOG_ERR - 1);
	return unit_run_in_tmpdir(unit_suite("logtarget", cases,
					     sizeof(cases) / sizeof(cases[0])),
				  "/tmp/check_logtarget.XXXXXX", tmpdir,
				  sizeof(tmpdir));
}
