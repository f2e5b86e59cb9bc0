/*
 * check_transform: the transform runner (transform/transform.h) with real
 * processes in the real bwrap sandbox as the unprivileged user nobody:
 * Pillow resizes checked against the same script run directly (process
 * and worker mode), every way a transform fails, the sandbox's walls (no
 * network, read-only root, hidden paths, a cleared environment), worker
 * replacement, concurrency bounded by `workers` (processes counted), and
 * the identity. The scripts are in tests/unit/transform/. Needs root (to
 * switch to nobody), bubblewrap and python3-pil. Bounds on time are
 * generous: a test asserts what happened, never how fast.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "transform/spawn.h"
#include "transform/transform.h"
#include "util/sha256.h"
#include "tests/unit/unit.h"

static char tmp[256];
static char scripts[1024]; /* tests/unit/transform, absolute */

static const char *const test_env[] = { "PATH=/usr/bin:/bin", "LANG",
					"HOME=/tmp", "TMPDIR=/tmp", NULL };

static struct transform_spec spec_for(const char *const *argv,
				      enum transform_mode mode)
{
	struct transform_spec s = {
		.name = "test",
		.version = "1",
		.argv = argv,
		.mode = mode,
		.workers = 2,
		.timeout_ms = 30000,
		.env = test_env,
	};

	return s;
}

static char *script(const char *name)
{
	static char paths[8][PATH_MAX];
	static int next;
	char *p = paths[next++ % 8];

	snprintf(p, PATH_MAX, "%s/%s", scripts, name);
	return p;
}

static void *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_msg(f != NULL, "open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void sh(const char *cmd)
{
	int rc = system(cmd);

	ck_assert_msg(rc == 0, "'%s' failed: %d", cmd, rc);
}

/* Runs t on in, expecting a failure of kind what and errno err. */
static void expect_fail(struct transform *t, const void *in, size_t len,
			enum transform_fail what, int err,
			struct transform_failure *f)
{
	struct transform_output out = { (void *)0x1, 77 };
	int rc = transform_run(t, in, len, &out, f);

	ck_assert_msg(rc == err, "rc %d (want %d): %s: %s [%s]", rc, err,
		      transform_fail_name(f->what), f->message, f->stderr_tail);
	ck_assert_msg(f->what == what, "what %s (want %s): %s [%s]",
		      transform_fail_name(f->what), transform_fail_name(what),
		      f->message, f->stderr_tail);
	/* Nothing partial: the output is untouched. */
	ck_assert_ptr_eq(out.data, (void *)0x1);
	ck_assert_uint_eq(out.len, 77);
}

static void expect_out(struct transform *t, const void *in, size_t len,
		       const void *want, size_t want_len)
{
	struct transform_output out = { NULL, 0 };
	struct transform_failure f;
	int rc = transform_run(t, in, len, &out, &f);

	ck_assert_msg(rc == 0, "rc %d: %s: %s [%s]", rc,
		      transform_fail_name(f.what), f.message, f.stderr_tail);
	ck_assert_uint_eq(out.len, want_len);
	ck_assert(memcmp(out.data, want, want_len) == 0);
	free(out.data);
}

/* The Pillow resize through the runner equals the script run directly. */
static void pillow(enum transform_mode mode)
{
	const char *argv[] = { script("resize.py"), NULL };
	struct transform_spec s = spec_for(argv, mode);
	struct transform *t;
	char cmd[3 * PATH_MAX], jpg[PATH_MAX], ref[PATH_MAX];
	int i;

	ck_assert_int_eq(transform_open(&s, &t), 0);
	for (i = 0; i < 3; i++) {
		void *in, *want;
		size_t in_len, want_len;

		snprintf(jpg, sizeof(jpg), "%s/in%d.jpg", tmp, i);
		snprintf(ref, sizeof(ref), "%s/ref%d.png", tmp, i);
		snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %d %s",
			 script("gen_jpeg.py"), i + 1, jpg);
		sh(cmd);
		snprintf(cmd, sizeof(cmd),
			 "/usr/bin/python3 %s --process < %s > %s",
			 script("resize.py"), jpg, ref);
		sh(cmd);
		in = slurp(jpg, &in_len);
		want = slurp(ref, &want_len);
		ck_assert_uint_gt(want_len, 8);
		ck_assert(memcmp(want, "\x89PNG", 4) == 0);
		expect_out(t, in, in_len, want, want_len);
		free(in);
		free(want);
	}
	transform_close(t);
}

START_TEST(test_pillow_process)
{
	pillow(TRANSFORM_MODE_PROCESS);
}
END_TEST

START_TEST(test_pillow_worker)
{
	pillow(TRANSFORM_MODE_WORKER);
}
END_TEST

START_TEST(test_exit_status)
{
	const char *argv[] = { "/bin/sh", "-c",
			       "cat >/dev/null; echo 'resize: cannot decode "
			       "\033[31mframe' >&2; exit 3",
			       NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;

	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "abc", 3, TRANSFORM_FAIL_EXIT, -EIO, &f);
	ck_assert_int_eq(f.status, 3);
	ck_assert_ptr_nonnull(strstr(f.message, "status 3"));
	ck_assert_ptr_nonnull(strstr(f.stderr_tail, "resize: cannot decode"));
	/* Escaped for a log line: no ESC, no newline. */
	ck_assert_ptr_null(strchr(f.stderr_tail, '\033'));
	ck_assert_ptr_null(strchr(f.stderr_tail, '\n'));
	transform_close(t);
}
END_TEST

struct holder {
	struct transform *t;
	bool got;
	sem_t held, release;
};

/* Reserves t's only slot in another thread and keeps it until told. */
static void *holder_main(void *arg)
{
	struct holder *h = arg;

	h->got = transform_reserve(h->t);
	sem_post(&h->held);
	sem_wait(&h->release);
	transform_unreserve(h->t);
	return NULL;
}

/* transform_reserve(): a free slot now or none at once (never a wait);
 * the thread's next run uses it; unreserve gives back one no run used. */
START_TEST(test_reserve)
{
	const char *argv[] = { "/usr/bin/tr", "a-z", "A-Z", NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct holder h = { 0 };
	struct transform *t;
	pthread_t th;

	s.workers = 1;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	ck_assert(transform_reserve(t));
	ck_assert(transform_reserve(t));   /* this thread's already */
	expect_out(t, "abc", 3, "ABC", 3); /* with the reserved slot */
	ck_assert(transform_reserve(t));   /* the run gave it back */
	transform_unreserve(t);
	h.t = t;
	sem_init(&h.held, 0, 0);
	sem_init(&h.release, 0, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, holder_main, &h), 0);
	sem_wait(&h.held);
	ck_assert(h.got);
	ck_assert(!transform_reserve(t)); /* the one slot is taken: at once */
	sem_post(&h.release);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert(transform_reserve(t)); /* given back */
	transform_unreserve(t);
	expect_out(t, "xyz", 3, "XYZ", 3);
	sem_destroy(&h.held);
	sem_destroy(&h.release);
	transform_close(t);
}
END_TEST

START_TEST(test_timeout)
{
	const char *argv[] = { "/bin/sleep", "60", NULL };
	const char *wargv[] = { script("worker.py"), NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;
	uint64_t t0;

	s.timeout_ms = 1000;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	t0 = transform_now_ms();
	expect_fail(t, "x", 1, TRANSFORM_FAIL_TIMEOUT, -ETIMEDOUT, &f);
	ck_assert_uint_lt(transform_now_ms() - t0, 1000 + 5000);
	ck_assert_ptr_nonnull(strstr(f.message, "killed"));
	transform_close(t);

	s = spec_for(wargv, TRANSFORM_MODE_WORKER);
	s.timeout_ms = 3000;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "ab", 2, "ba", 2);
	t0 = transform_now_ms();
	expect_fail(t, "hang", 4, TRANSFORM_FAIL_TIMEOUT, -ETIMEDOUT, &f);
	ck_assert_uint_lt(transform_now_ms() - t0, 3000 + 5000);
	expect_out(t, "cd", 2, "dc", 2); /* a new worker */
	transform_close(t);
}
END_TEST

START_TEST(test_memory)
{
	const char *argv[] = { "/usr/bin/python3", "-c",
			       "import sys; sys.stdin.buffer.read(); "
			       "b = bytearray(1 << 30); print(len(b))",
			       NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;

	s.memory = 256ull << 20;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "x", 1, TRANSFORM_FAIL_MEMORY, -EIO, &f);
	ck_assert_ptr_nonnull(strstr(f.stderr_tail, "MemoryError"));
	transform_close(t);
	/* A worker: dies of it, the next object gets a new worker. */
	argv[0] = script("worker.py");
	argv[1] = NULL;
	s = spec_for(argv, TRANSFORM_MODE_WORKER);
	s.memory = 256ull << 20;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "ab", 2, "ba", 2);
	expect_fail(t, "alloc", 5, TRANSFORM_FAIL_MEMORY, -EIO, &f);
	ck_assert_int_eq(f.status, 1);
	expect_out(t, "cd", 2, "dc", 2);
	transform_close(t);
	/* A Python worker through serve(): an error reply that says
	 * MemoryError; the worker goes on. */
	argv[0] = script("echo_worker.py");
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "alloc", 5, TRANSFORM_FAIL_MEMORY, -EIO, &f);
	ck_assert_ptr_nonnull(strstr(f.message, "MemoryError"));
	expect_out(t, "ef", 2, "ef", 2);
	transform_close(t);
	/* The same with room for it works: the limit made it fail. */
	argv[0] = "/usr/bin/python3";
	argv[1] = "-c";
	s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	s.memory = 4ull << 30;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "x", 1, "1073741824\n", 11);
	transform_close(t);
}
END_TEST

START_TEST(test_output_max)
{
	const char *argv[] = { "/usr/bin/head", "-c", "3000000", "/dev/zero",
			       NULL };
	const char *wargv[] = { script("worker.py"), NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;

	s.output_max = 1 << 20;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, NULL, 0, TRANSFORM_FAIL_OUTPUT_MAX, -EFBIG, &f);
	transform_close(t);
	/* Exactly output_max is fine. */
	argv[2] = "1048576";
	ck_assert_int_eq(transform_open(&s, &t), 0);
	{
		struct transform_output out;

		ck_assert_int_eq(transform_run(t, NULL, 0, &out, &f), 0);
		ck_assert_uint_eq(out.len, 1 << 20);
		free(out.data);
	}
	transform_close(t);

	s = spec_for(wargv, TRANSFORM_MODE_WORKER);
	s.output_max = 1 << 20;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "big", 3, TRANSFORM_FAIL_OUTPUT_MAX, -EFBIG, &f);
	expect_out(t, "ok", 2, "ko", 2);
	transform_close(t);
}
END_TEST

START_TEST(test_empty)
{
	const char *argv[] = { "/bin/true", NULL };
	const char *wargv[] = { script("worker.py"), NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;

	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "abc", 3, TRANSFORM_FAIL_EMPTY, -EIO, &f);
	transform_close(t);
	s = spec_for(wargv, TRANSFORM_MODE_WORKER);
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "", 0, TRANSFORM_FAIL_EMPTY, -EIO, &f);
	expect_out(t, "ab", 2, "ba", 2);
	transform_close(t);
}
END_TEST

/* A listener on 127.0.0.1 that the transform tries to reach. */
START_TEST(test_network)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	char port[16];
	const char *argv[] = {
		"/usr/bin/python3", "-c",
		"import socket, sys\n"
		"socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5)\n"
		"sys.stdout.write('connected')\n",
		port, NULL
	};
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	snprintf(port, sizeof(port), "%u", ntohs(a.sin_port));

	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "x", 1, TRANSFORM_FAIL_EXIT, -EIO, &f);
	ck_assert_ptr_nonnull(strstr(f.stderr_tail, "Connection refused"));
	transform_close(t);
	/* Without the sandbox the same command connects: the wall was the
	 * sandbox's. */
	s.sandbox = TRANSFORM_SANDBOX_NONE;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "x", 1, "connected", 9);
	transform_close(t);
	close(fd);
}
END_TEST

START_TEST(test_readonly_root)
{
	char probe[PATH_MAX], cmd[2 * PATH_MAX];
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	const char *targv[] = { "/bin/sh", "-c",
				"echo private > /tmp/f && cat /tmp/f", NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;

	/* /var/tmp is writable by nobody outside the sandbox. */
	snprintf(probe, sizeof(probe), "/var/tmp/shardfs-xform-%d", getpid());
	snprintf(cmd, sizeof(cmd), "echo x > %s && echo wrote", probe);
	unlink(probe);
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "x", 1, TRANSFORM_FAIL_EXIT, -EIO, &f);
	ck_assert_ptr_nonnull(strstr(f.stderr_tail, "Read-only file system"));
	ck_assert_int_ne(access(probe, F_OK), 0);
	transform_close(t);
	s.sandbox = TRANSFORM_SANDBOX_NONE;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "x", 1, "wrote\n", 6);
	ck_assert_int_eq(unlink(probe), 0);
	transform_close(t);
	/* Its own /tmp is writable. */
	s = spec_for(targv, TRANSFORM_MODE_PROCESS);
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "x", 1, "private\n", 8);
	transform_close(t);
}
END_TEST

START_TEST(test_hidden)
{
	char dir[256], file[PATH_MAX], cmd[3 * PATH_MAX];
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	const char *hide[] = { dir, NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;

	snprintf(dir, sizeof(dir), "/var/tmp/shardfs-xform-hide-%d", getpid());
	snprintf(file, sizeof(file), "%s/secret", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && echo s3cret > %s", dir,
		 file);
	sh(cmd);
	snprintf(cmd, sizeof(cmd), "cat %s", file);
	chmod(dir, 0755);
	chmod(file, 0644);
	/* Readable to nobody without the sandbox... */
	s.sandbox = TRANSFORM_SANDBOX_NONE;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "x", 1, "s3cret\n", 7);
	transform_close(t);
	/* ...and hidden inside it. */
	s.sandbox = TRANSFORM_SANDBOX_BWRAP;
	s.hide = hide;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "x", 1, TRANSFORM_FAIL_EXIT, -EIO, &f);
	ck_assert_ptr_nonnull(strstr(f.stderr_tail, "No such file"));
	transform_close(t);
	/* A hidden file is /dev/null on a mount where devices cannot be
	 * opened (a user namespace's): EACCES. */
	hide[0] = file;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "x", 1, TRANSFORM_FAIL_EXIT, -EIO, &f);
	ck_assert_ptr_nonnull(strstr(f.stderr_tail, "Permission denied"));
	ck_assert_ptr_null(strstr(f.stderr_tail, "s3cret"));
	transform_close(t);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
}
END_TEST

START_TEST(test_env_user)
{
	const char *argv[] = { "/bin/sh", "-c", "id -u; id -G; env | sort",
			       NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_output out;
	struct transform_failure f;
	struct transform *t;
	char *o;
	int i;

	setenv("SHARDFS_TEST_SECRET", "AKIAxxxx", 1);
	for (i = 0; i < 2; i++) {
		s.sandbox =
			i ? TRANSFORM_SANDBOX_NONE : TRANSFORM_SANDBOX_BWRAP;
		ck_assert_int_eq(transform_open(&s, &t), 0);
		ck_assert_int_eq(transform_run(t, "x", 1, &out, &f), 0);
		o = strndup(out.data, out.len);
		ck_assert_msg(strncmp(o, "65534\n65534\n", 12) == 0, "%s", o);
		ck_assert_ptr_null(strstr(o, "SHARDFS_TEST_SECRET"));
		ck_assert_ptr_nonnull(strstr(o, "\nHOME=/tmp\n"));
		ck_assert_ptr_nonnull(
			strstr(o, "\nSHARDFS_TRANSFORM_MODE=process\n"));
		ck_assert_ptr_nonnull(strstr(o, "\nPATH=/usr/bin:/bin\n"));
		free(o);
		free(out.data);
		transform_close(t);
	}
	unsetenv("SHARDFS_TEST_SECRET");
}
END_TEST

START_TEST(test_kill_self)
{
	const char *argv[] = { "/bin/sh", "-c",
			       "head -c 100000 /dev/zero; kill -9 $$", NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;
	int i;

	for (i = 0; i < 2; i++) {
		s.sandbox =
			i ? TRANSFORM_SANDBOX_NONE : TRANSFORM_SANDBOX_BWRAP;
		ck_assert_int_eq(transform_open(&s, &t), 0);
		expect_fail(t, "x", 1, TRANSFORM_FAIL_SIGNAL, -EIO, &f);
		ck_assert_int_eq(f.signal, 9);
		transform_close(t);
	}
}
END_TEST

/* Processes whose command line is exactly argv0 arg1. */
static int count_cmdline(const char *argv0, const char *arg1)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d != NULL && (e = readdir(d)) != NULL) {
		char path[300], buf[256];
		size_t got, a = strlen(argv0) + 1;
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		got = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		if (got == a + strlen(arg1) + 1 && memcmp(buf, argv0, a) == 0 &&
		    memcmp(buf + a, arg1, strlen(arg1) + 1) == 0)
			n++;
	}
	if (d != NULL)
		closedir(d);
	return n;
}

/* What a command leaves running in its process group is killed when it
 * exits (sandbox none; in bwrap the PID namespace ends with it); one that
 * holds stdout open keeps the run to its timeout, then goes too. */
START_TEST(test_stragglers)
{
	char secs[16], cmd[128];
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform_failure f;
	struct transform *t;
	int i;

	snprintf(secs, sizeof(secs), "%d", 3000 + getpid() % 1000);
	snprintf(cmd, sizeof(cmd),
		 "(/bin/sleep %s >/dev/null 2>&1 </dev/null &); echo out",
		 secs);
	s.sandbox = TRANSFORM_SANDBOX_NONE;
	s.timeout_ms = 2000;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "x", 1, "out\n", 4);
	for (i = 0; i < 100 && count_cmdline("/bin/sleep", secs) > 0; i++)
		usleep(20000);
	ck_assert_int_eq(count_cmdline("/bin/sleep", secs), 0);
	transform_close(t);
	snprintf(cmd, sizeof(cmd), "(/bin/sleep %s &); echo out", secs);
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_fail(t, "x", 1, TRANSFORM_FAIL_TIMEOUT, -ETIMEDOUT, &f);
	for (i = 0; i < 100 && count_cmdline("/bin/sleep", secs) > 0; i++)
		usleep(20000);
	ck_assert_int_eq(count_cmdline("/bin/sleep", secs), 0);
	transform_close(t);
}
END_TEST

/* kill -9 of the daemon mid-run leaves no transform running, in either
 * sandbox (the daemon here: a forked child running the transform). */
START_TEST(test_daemon_killed)
{
	char secs[16];
	const char *argv[] = { "/bin/sleep", secs, NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	int i, j, st;

	snprintf(secs, sizeof(secs), "%d", 4000 + getpid() % 1000);
	for (i = 0; i < 2; i++) {
		pid_t daemon;

		s.sandbox =
			i ? TRANSFORM_SANDBOX_NONE : TRANSFORM_SANDBOX_BWRAP;
		daemon = fork();
		ck_assert_int_ge(daemon, 0);
		if (daemon == 0) {
			struct transform_output out;
			struct transform *t;

			if (transform_open(&s, &t) != 0)
				_exit(1);
			transform_run(t, "x", 1, &out, NULL);
			_exit(2);
		}
		for (j = 0; j < 500 && count_cmdline("/bin/sleep", secs) == 0;
		     j++)
			usleep(20000);
		ck_assert_int_eq(count_cmdline("/bin/sleep", secs), 1);
		kill(daemon, SIGKILL);
		ck_assert_int_eq(waitpid(daemon, &st, 0), daemon);
		for (j = 0; j < 250 && count_cmdline("/bin/sleep", secs) > 0;
		     j++)
			usleep(20000);
		ck_assert_msg(count_cmdline("/bin/sleep", secs) == 0,
			      "the transform outlived the daemon (sandbox %s)",
			      i ? "none" : "bwrap");
	}
}
END_TEST

START_TEST(test_worker_replaced)
{
	const char *argv[] = { script("worker.py"), NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_WORKER);
	struct transform_failure f;
	struct transform *t;

	s.workers = 1;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	/* Dies between objects: the next object goes to a new worker. */
	expect_out(t, "quit", 4, "tiuq", 4);
	expect_out(t, "abc", 3, "cba", 3);
	expect_out(t, "quit", 4, "tiuq", 4);
	expect_out(t, "de", 2, "ed", 2);
	/* Dies mid-object: that object fails, the next succeeds. */
	expect_fail(t, "die", 3, TRANSFORM_FAIL_EXIT, -EIO, &f);
	ck_assert_int_eq(f.status, 5);
	ck_assert_ptr_nonnull(strstr(f.stderr_tail, "dying mid-object"));
	expect_out(t, "fg", 2, "gf", 2);
	/* A malformed frame. */
	expect_fail(t, "bad", 3, TRANSFORM_FAIL_PROTOCOL, -EIO, &f);
	ck_assert_ptr_nonnull(strstr(f.message, "status 7"));
	expect_out(t, "hi", 2, "ih", 2);
	/* An error reply fails that object only. */
	expect_fail(t, "oops", 4, TRANSFORM_FAIL_ERROR, -EIO, &f);
	ck_assert_ptr_nonnull(strstr(f.message, "cannot handle oops"));
	expect_out(t, "jk", 2, "kj", 2);
	transform_close(t);
}
END_TEST

/* The most direct children this process had at once. */
struct counter {
	int stop; /* __atomic */
	int max;
};

static int count_children(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t me = getpid();
	int n = 0;

	while (d != NULL && (e = readdir(d)) != NULL) {
		char path[300], buf[512], *p;
		FILE *f;
		int ppid;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(buf, sizeof(buf), f) != NULL &&
		    (p = strrchr(buf, ')')) != NULL &&
		    sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == me)
			n++;
		fclose(f);
	}
	if (d != NULL)
		closedir(d);
	return n;
}

static void *count_loop(void *arg)
{
	struct counter *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		int n = count_children();

		if (n > c->max)
			c->max = n;
		usleep(2000);
	}
	return NULL;
}

struct runner {
	struct transform *t;
	int id;
	bool reverse;
	int failures;
};

static void *run_loop(void *arg)
{
	struct runner *r = arg;
	int i;

	for (i = 0; i < 4; i++) {
		char in[64], want[64];
		size_t n, k;
		struct transform_output out;
		struct transform_failure f;

		n = (size_t)snprintf(in, sizeof(in), "object-%d-%d", r->id, i);
		for (k = 0; k < n; k++)
			want[k] = r->reverse ? in[n - 1 - k]
					     : (in[k] >= 'a' && in[k] <= 'z'
							? (char)(in[k] - 32)
							: in[k]);
		if (transform_run(r->t, in, n, &out, &f) != 0) {
			r->failures++;
			continue;
		}
		if (out.len != n || memcmp(out.data, want, n) != 0)
			r->failures++;
		free(out.data);
	}
	return NULL;
}

static void concurrent(enum transform_mode mode)
{
	const char *wargv[] = { script("worker.py"), NULL };
	const char *pargv[] = { "/usr/bin/tr", "a-z", "A-Z", NULL };
	struct transform_spec s =
		spec_for(mode == TRANSFORM_MODE_WORKER ? wargv : pargv, mode);
	struct counter c = { 0, 0 };
	struct runner r[8];
	pthread_t th[8], ct;
	struct transform *t;
	int i;

	s.workers = 2;
	s.timeout_ms = 60000;
	ck_assert_int_eq(transform_open(&s, &t), 0);
	ck_assert_int_eq(pthread_create(&ct, NULL, count_loop, &c), 0);
	for (i = 0; i < 8; i++) {
		r[i] = (struct runner){ t, i, mode == TRANSFORM_MODE_WORKER,
					0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, run_loop, &r[i]),
				 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(r[i].failures, 0);
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	pthread_join(ct, NULL);
	ck_assert_int_ge(c.max, 1);
	ck_assert_int_le(c.max, 2);
	transform_close(t);
	/* Closed: no worker left behind. */
	ck_assert_int_eq(count_children(), 0);
}

START_TEST(test_concurrent_worker)
{
	concurrent(TRANSFORM_MODE_WORKER);
}
END_TEST

START_TEST(test_concurrent_process)
{
	concurrent(TRANSFORM_MODE_PROCESS);
}
END_TEST

static void identity_of(const struct transform_spec *s, uint8_t out[SHA256_LEN])
{
	struct transform *t;

	ck_assert_int_eq(transform_open(s, &t), 0);
	transform_identity(t, out);
	transform_close(t);
}

START_TEST(test_identity)
{
	char exe[PATH_MAX], cmd[3 * PATH_MAX];
	const char *argv[] = { exe, NULL };
	const char *argv2[] = { exe, "-n", NULL };
	const char *pyargv[] = { "/usr/bin/python3", exe, NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	uint8_t a[SHA256_LEN], b[SHA256_LEN], c[SHA256_LEN];
	FILE *f;

	snprintf(exe, sizeof(exe), "%s/probe.sh", tmp);
	snprintf(cmd, sizeof(cmd), "cp %s %s", script("id_probe.sh"), exe);
	sh(cmd);
	identity_of(&s, a);
	identity_of(&s, b);
	ck_assert(memcmp(a, b, SHA256_LEN) == 0); /* stable */
	s.version = "2";
	identity_of(&s, b);
	ck_assert(memcmp(a, b, SHA256_LEN) != 0);
	s.version = "1";
	s.name = "other";
	identity_of(&s, b);
	ck_assert(memcmp(a, b, SHA256_LEN) != 0);
	s.name = "test";
	s.argv = argv2;
	identity_of(&s, b);
	ck_assert(memcmp(a, b, SHA256_LEN) != 0);
	s.argv = pyargv;
	identity_of(&s, c);
	/* One byte of the executable (and of a script argument). */
	f = fopen(exe, "r+");
	ck_assert_ptr_nonnull(f);
	fseek(f, 3, SEEK_SET);
	fputc('X', f);
	fclose(f);
	s.argv = argv;
	identity_of(&s, b);
	ck_assert(memcmp(a, b, SHA256_LEN) != 0);
	s.argv = pyargv;
	identity_of(&s, b);
	ck_assert(memcmp(c, b, SHA256_LEN) != 0);
}
END_TEST

START_TEST(test_user)
{
	const char *argv[] = { "/bin/cat", NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform *t = NULL;

	s.user = "root";
	ck_assert_int_eq(transform_open(&s, &t), -EPERM);
	s.sandbox = TRANSFORM_SANDBOX_NONE;
	ck_assert_int_eq(transform_open(&s, &t), -EPERM);
	s.user = "shardfs-no-such-user";
	ck_assert_int_eq(transform_open(&s, &t), -ENOENT);
	ck_assert_ptr_null(t);
	s.user = "nobody";
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, "same", 4, "same", 4);
	transform_close(t);
}
END_TEST

START_TEST(test_bad_spec)
{
	const char *argv[] = { "shardfs-no-such-command", NULL };
	const char *empty[] = { NULL };
	const char *env[] = { "=x", NULL };
	const char *cat[] = { "/bin/cat", NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	struct transform *t = NULL;

	ck_assert_int_eq(transform_open(&s, &t), -ENOENT);
	s.argv = empty;
	ck_assert_int_eq(transform_open(&s, &t), -EINVAL);
	s.argv = cat;
	s.name = NULL;
	ck_assert_int_eq(transform_open(&s, &t), -EINVAL);
	s.name = "x";
	s.env = env;
	ck_assert_int_eq(transform_open(&s, &t), -EINVAL);
	s.env = test_env;
	s.bwrap = "/nonexistent/bwrap";
	ck_assert_int_eq(transform_open(&s, &t), -ENOENT);
	ck_assert_ptr_null(t);
}
END_TEST

/* A big object through a command that writes as it reads (cat): both
 * pipes full at once must not deadlock. */
START_TEST(test_big_stream)
{
	const char *argv[] = { "/bin/cat", NULL };
	struct transform_spec s = spec_for(argv, TRANSFORM_MODE_PROCESS);
	const char *wargv[] = { script("worker.py"), NULL };
	struct transform *t;
	size_t n = 8u << 20, i;
	char *in = malloc(n), *rev = malloc(n);

	for (i = 0; i < n; i++)
		in[i] = (char)(i * 7 + (i >> 13));
	for (i = 0; i < n; i++)
		rev[i] = in[n - 1 - i];
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, in, n, in, n);
	transform_close(t);
	s = spec_for(wargv, TRANSFORM_MODE_WORKER);
	ck_assert_int_eq(transform_open(&s, &t), 0);
	expect_out(t, in, n, rev, n);
	transform_close(t);
	free(in);
	free(rev);
}
END_TEST

/* Copies the regular files of directory from into to (made 0755), each
 * 0755. Returns 0, or -1 (said why). */
static int copy_dir(const char *from, const char *to)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (mkdir(to, 0755) != 0 || chmod(to, 0755) != 0) {
		perror(to);
		return -1;
	}
	d = opendir(from);
	if (d == NULL) {
		perror(from);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		char src[PATH_MAX], dst[PATH_MAX], buf[65536];
		struct stat st;
		int in, out;
		ssize_t n;

		if ((size_t)snprintf(src, sizeof(src), "%s/%s", from,
				     de->d_name) >= sizeof(src) ||
		    (size_t)snprintf(dst, sizeof(dst), "%s/%s", to,
				     de->d_name) >= sizeof(dst))
			continue;
		if (de->d_name[0] == '.' || stat(src, &st) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		in = open(src, O_RDONLY);
		out = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0755);
		if (in < 0 || out < 0)
			rc = -1;
		while (rc == 0 && (n = read(in, buf, sizeof(buf))) > 0)
			if (write(out, buf, (size_t)n) != n)
				rc = -1;
		if (in >= 0)
			close(in);
		if (out >= 0 && (fchmod(out, 0755) != 0 || close(out) != 0))
			rc = -1;
		if (rc < 0)
			perror(dst);
	}
	closedir(d);
	return rc;
}

/* The sandbox has a /tmp of its own, and nobody may not read the
 * repository's directories: the scripts, and the python/shardfs package
 * they import by their relative path, are copied into a directory under
 * /var/tmp (which the sandbox's read-only root shows), in the same
 * layout. to gets the scripts' directory; root the copy's root. */
static char copy_root[64] = "/var/tmp/check_transform.XXXXXX";

static int scripts_copy(const char *repo, char *to, size_t to_len)
{
	static const char *const dirs[] = { "tests", "tests/unit",
					    "tests/unit/transform", "python",
					    "python/shardfs" };
	char from[PATH_MAX], dst[PATH_MAX];

	if (mkdtemp(copy_root) == NULL || chmod(copy_root, 0755) != 0) {
		perror("check_transform: a directory under /var/tmp");
		return -1;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
		snprintf(from, sizeof(from), "%s/%s", repo, dirs[i]);
		snprintf(dst, sizeof(dst), "%s/%s", copy_root, dirs[i]);
		if (copy_dir(from, dst) < 0)
			return -1;
	}
	if ((size_t)snprintf(to, to_len, "%s/tests/unit/transform",
			     copy_root) >= to_len)
		return -1;
	return 0;
}

/* Removes what scripts_copy() made. */
static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 ? 0 : 0;
}

static void scripts_remove(void)
{
	nftw(copy_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	char real[PATH_MAX];
	int rc;
	const struct unit_case cases[] = {
		{ "pillow_process", test_pillow_process },
		{ "pillow_worker", test_pillow_worker },
		{ "exit_status", test_exit_status },
		{ "reserve", test_reserve },
		{ "timeout", test_timeout },
		{ "memory", test_memory },
		{ "output_max", test_output_max },
		{ "empty", test_empty },
		{ "network", test_network },
		{ "readonly_root", test_readonly_root },
		{ "hidden", test_hidden },
		{ "env_user", test_env_user },
		{ "kill_self", test_kill_self },
		{ "stragglers", test_stragglers },
		{ "daemon_killed", test_daemon_killed },
		{ "worker_replaced", test_worker_replaced },
		{ "concurrent_worker", test_concurrent_worker },
		{ "concurrent_process", test_concurrent_process },
		{ "identity", test_identity },
		{ "user", test_user },
		{ "bad_spec", test_bad_spec },
		{ "big_stream", test_big_stream },
	};

	if (realpath(".", real) == NULL || strlen(real) >= sizeof(scripts)) {
		perror("check_transform: the repository root (run from it)");
		return EXIT_FAILURE;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "check_transform: needs root (to run "
				"transforms as nobody)\n");
		return EXIT_FAILURE;
	}
	if (scripts_copy(real, scripts, sizeof(scripts)) < 0)
		return EXIT_FAILURE;
	rc = unit_run_in_tmpdir(
		unit_suite("transform", cases, sizeof(cases) / sizeof(*cases)),
		"/tmp/check_transform.XXXXXX", tmp, sizeof(tmp));
	scripts_remove();
	return rc;
}
