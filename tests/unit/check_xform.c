/*
 * check_xform: a user's transform's outputs as derived objects
 * (cache/xform.h) over a real disk cache in a temp directory, the posix
 * backend over real files and real transform processes
 * (transform/transform.h): tr(1) in the bwrap sandbox as nobody, and a
 * shell script that fails while a flag file exists (sandbox none, so that
 * it sees the flag). Needs root (to run as nobody) and bubblewrap, as
 * check_transform does. The transform's runs are counted by xform's stats.
 * No assertion depends on time: a backoff is either a minute (no retry
 * can be due) or a millisecond (one is due after a 50 ms sleep).
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "cache/cache.h"
#include "cache/xform.h"
#include "transform/transform.h"
#include "tests/unit/cache_util.h"
#include "tests/unit/unit.h"

#define KIB (UINT64_C(1) << 10)
#define SRC_SIZE (700 * 1024 + 13) /* three chunks of 256 KiB, and a bit */

static const char *root;
static char pydir[PATH_MAX]; /* python/, absolute: shardfs.transform */
/* The mode fx_open() opens transforms in. */
static enum transform_mode fx_mode = TRANSFORM_MODE_PROCESS;
/* The stash bound fx_open() gives (0: xform's default). */
static unsigned fx_stash_max;
/* The cache's budget fx_open() gives (0: 64 MiB). */
static uint64_t fx_budget;
/* The verify percent fx_open() gives. */
static unsigned fx_verify;

static const char *const tr_argv[] = { "/usr/bin/tr", "a-z", "A-Z", NULL };
static const char *const test_env[] = { "PATH=/usr/bin:/bin", NULL };

struct fixture {
	char src[4096], dir[4096], flag[4200];
	struct backend *be;
	struct cache *c;
	struct transform *t;
	struct xform *x;
	struct backend_stat st;
	struct cache_object o; /* the source object */
	char key[64];
};

static uint8_t src_byte(uint64_t i)
{
	return (uint8_t) "abcdefghijklmnopqrstuvwxyz0123456789 \n"[(i * 7 +
								    i / 3) %
								   38];
}

static uint8_t out_byte(uint64_t i)
{
	uint8_t b = src_byte(i);

	return b >= 'a' && b <= 'z' ? (uint8_t)(b - 'a' + 'A') : b;
}

static void fx_init(struct fixture *fx, const char *name)
{
	uint8_t *data = malloc(SRC_SIZE);
	char path[4200];
	FILE *f;

	memset(fx, 0, sizeof(*fx));
	ck_assert_ptr_nonnull(data);
	/* The flag script runs as nobody: it must see into root. */
	ck_assert_int_eq(chmod(root, 0755), 0);
	snprintf(fx->src, sizeof(fx->src), "%s/%s-src", root, name);
	snprintf(fx->dir, sizeof(fx->dir), "%s/%s-cache", root, name);
	snprintf(fx->flag, sizeof(fx->flag), "%s/%s-fail", root, name);
	ck_assert_int_eq(mkdir(fx->src, 0755), 0);
	for (uint64_t i = 0; i < SRC_SIZE; i++)
		data[i] = src_byte(i);
	snprintf(fx->key, sizeof(fx->key), "a.txt");
	snprintf(path, sizeof(path), "%s/%s", fx->src, fx->key);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, SRC_SIZE, f), SRC_SIZE);
	ck_assert_int_eq(fclose(f), 0);
	free(data);
	ck_assert_int_eq(backend_open(fx->src, NULL, &fx->be), 0);
	ck_assert_int_eq(
		fx->be->ops->stat(fx->be, fx->key, strlen(fx->key), &fx->st),
		0);
	fx->o.key = fx->key;
	fx->o.key_len = strlen(fx->key);
	fx->o.etag = fx->st.etag;
	fx->o.etag_len = fx->st.etag_len;
	fx->o.size = fx->st.size;
}

/* Opens the cache and the transform (argv, version, sandbox) on it, with
 * a retry backoff of retry_ms. */
static void fx_open(struct fixture *fx, const char *const *argv,
		    const char *version, enum transform_sandbox sandbox,
		    unsigned retry_ms)
{
	struct cache_options co = {
		.dir = fx->dir,
		.backend_id = fx->src,
		.size_bytes = fx_budget ? fx_budget : 64 << 20,
		.chunk_size = 256 * KIB,
		.inline_max = 64 * KIB,
		.inline_max_set = true,
	};
	struct transform_spec ts = {
		.name = "upper",
		.version = version,
		.argv = argv,
		.mode = fx_mode,
		.workers = 2,
		.timeout_ms = 30000,
		.sandbox = sandbox,
		.env = test_env,
	};
	struct xform_options xo = { .name = "upper",
				    .retry = { retry_ms, retry_ms },
				    .stash_max = fx_stash_max,
				    .verify_percent = fx_verify };

	ck_assert_int_eq(cache_open(&co, fx->be, &fx->c), 0);
	ck_assert_int_eq(transform_open(&ts, &fx->t), 0);
	ck_assert_int_eq(xform_attach(fx->c, fx->t, &xo, &fx->x), 0);
}

/* The cache first: it holds x's producers. */
static void fx_close(struct fixture *fx)
{
	xform_stop(fx->x);
	cache_free(fx->c);
	xform_free(fx->x);
	transform_close(fx->t);
	fx->c = NULL;
	fx->x = NULL;
	fx->t = NULL;
}

static void fx_free(struct fixture *fx)
{
	fx_close(fx);
	backend_close(fx->be);
}

static struct xform_stats xstats(struct fixture *fx)
{
	struct xform_stats s;

	xform_stats_get(fx->x, &s);
	return s;
}

/* Reads the whole output of fx's object; returns the number of bytes
 * that are not the expected output (0: all good), or -1 on an error. */
static long read_output(struct fixture *fx)
{
	struct cache_object out;
	uint64_t size = 0;
	uint8_t *buf;
	ssize_t got;
	long bad = 0;

	if (xform_size(fx->x, &fx->o, &size) != 0 || size != SRC_SIZE)
		return -1;
	xform_object(fx->x, &fx->o, size, &out);
	buf = malloc(size);
	if (!buf)
		return -1;
	got = tc_read(fx->c, &out, 0, (size_t)size, buf);
	if (got != (ssize_t)size) {
		free(buf);
		return -1;
	}
	for (uint64_t i = 0; i < size; i++)
		bad += buf[i] != out_byte(i);
	free(buf);
	return bad;
}

struct reader {
	struct fixture *fx;
	long result;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->result = read_output(r->fx);
	return NULL;
}

/* 8 readers at once: one run, every byte the transform's output; argv
 * run in fx_mode. */
static void once_for_readers(const char *name, const char *const *argv)
{
	struct fixture fx;
	struct reader rd[8];
	pthread_t th[8];
	int i;

	fx_init(&fx, name);
	fx_open(&fx, argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	for (i = 0; i < 8; i++) {
		rd[i].fx = &fx;
		rd[i].result = -2;
		ck_assert_int_eq(
			pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(rd[i].result == 0, "reader %d: %ld", i,
			      rd[i].result);
	}
	ck_assert_uint_eq(xstats(&fx).runs, 1);
	ck_assert_uint_eq(xstats(&fx).failures, 0);
	ck_assert_uint_eq(xstats(&fx).bytes_in, SRC_SIZE);
	ck_assert_uint_eq(xstats(&fx).bytes_out, SRC_SIZE);
	/* Read again: from the disk cache. */
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 1);
	fx_free(&fx);
}

START_TEST(test_once_for_concurrent_readers)
{
	once_for_readers("once", tr_argv);
}
END_TEST

/* The same with a long-lived worker (the framed protocol, through
 * python/shardfs/transform.py). */
START_TEST(test_once_worker)
{
	char code[PATH_MAX + 256];
	const char *argv[] = { "/usr/bin/python3", "-c", code, NULL };

	snprintf(code, sizeof(code),
		 "import sys; sys.path.insert(0, '%s'); "
		 "from shardfs.transform import main; "
		 "main(lambda b: b.upper())",
		 pydir);
	fx_mode = TRANSFORM_MODE_WORKER;
	once_for_readers("worker", argv);
}
END_TEST

/* A script that fails (exit 3, a line on stderr) while fx->flag exists. */
static void flag_argv(struct fixture *fx, char *script, size_t len,
		      const char *argv[5])
{
	snprintf(script, len,
		 "if [ -e '%s' ]; then echo 'bad input' >&2; exit 3; fi; "
		 "exec tr a-z A-Z",
		 fx->flag);
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = script;
	argv[3] = NULL;
}

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fclose(f), 0);
}

/* A failure is -EIO for the read, counted; within the backoff the next
 * read fails at once without a run. */
START_TEST(test_failure_then_backoff)
{
	struct fixture fx;
	const char *argv[5];
	char script[4500];
	uint64_t size = 0;

	fx_init(&fx, "failwait");
	flag_argv(&fx, script, sizeof(script), argv);
	touch(fx.flag);
	fx_open(&fx, argv, "1", TRANSFORM_SANDBOX_NONE, 60000);
	ck_assert_int_eq(xform_size(fx.x, &fx.o, &size), -EIO);
	ck_assert_uint_eq(xstats(&fx).runs, 1);
	ck_assert_uint_eq(xstats(&fx).failures, 1);
	/* Fixed, but the backoff (a minute) has not passed. */
	ck_assert_int_eq(unlink(fx.flag), 0);
	ck_assert_int_eq(xform_size(fx.x, &fx.o, &size), -EIO);
	ck_assert_uint_eq(xstats(&fx).runs, 1);
	ck_assert_uint_eq(xstats(&fx).refused, 1);
	ck_assert_uint_eq(size, 0);
	fx_free(&fx);
}
END_TEST

/* After the backoff, the next read runs it again, and a good run serves
 * the output. */
START_TEST(test_failure_then_retry)
{
	struct fixture fx;
	const char *argv[5];
	char script[4500];
	uint64_t size = 0;

	fx_init(&fx, "failretry");
	flag_argv(&fx, script, sizeof(script), argv);
	touch(fx.flag);
	fx_open(&fx, argv, "1", TRANSFORM_SANDBOX_NONE, 1);
	ck_assert_int_eq(xform_size(fx.x, &fx.o, &size), -EIO);
	ck_assert_int_eq(unlink(fx.flag), 0);
	usleep(50000); /* the backoff is under a millisecond */
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 2);
	ck_assert_uint_eq(xstats(&fx).failures, 1);
	fx_free(&fx);
}
END_TEST

/* A transform killed by a signal after part of its output: -EIO, and no
 * part of that output is ever served: the next good run's bytes are. */
START_TEST(test_killed_mid_output)
{
	struct fixture fx;
	const char *argv[4];
	char script[4500];
	uint64_t size = 0;

	fx_init(&fx, "killed");
	snprintf(script, sizeof(script),
		 "if [ -e '%s' ]; then head -c 100000 | tr a-z A-Z; "
		 "kill -9 $$; fi; exec tr a-z A-Z",
		 fx.flag);
	argv[0] = "/bin/sh";
	argv[1] = "-c";
	argv[2] = script;
	argv[3] = NULL;
	touch(fx.flag);
	fx_open(&fx, argv, "1", TRANSFORM_SANDBOX_NONE, 1);
	ck_assert_int_eq(xform_size(fx.x, &fx.o, &size), -EIO);
	ck_assert_uint_eq(size, 0);
	ck_assert_uint_eq(xstats(&fx).failures, 1);
	ck_assert_uint_eq(xstats(&fx).bytes_out, 0);
	ck_assert_int_eq(unlink(fx.flag), 0);
	usleep(50000); /* the backoff is under a millisecond */
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 2);
	ck_assert_uint_eq(xstats(&fx).bytes_out, SRC_SIZE);
	fx_free(&fx);
}
END_TEST

/* The length's run stores the output too (under its node lock, so that
 * another process finding the length finds the output: cache/xform.h):
 * an output that memory (the stash, of 1 here) no longer holds by its
 * read is read from the disk, without another run, and its bytes are the
 * transform's. */
START_TEST(test_stash_dropped)
{
	struct fixture fx, fb;
	char path[8300];
	uint64_t size = 0;

	fx_init(&fx, "stash");
	/* b.txt: another object of the same source. */
	memset(&fb, 0, sizeof(fb));
	snprintf(path, sizeof(path), "cp '%s/a.txt' '%s/b.txt'", fx.src,
		 fx.src);
	ck_assert_int_eq(system(path), 0);
	fx_stash_max = 1;
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	fb = fx;
	snprintf(fb.key, sizeof(fb.key), "b.txt");
	ck_assert_int_eq(
		fx.be->ops->stat(fx.be, fb.key, strlen(fb.key), &fb.st), 0);
	fb.o.key = fb.key;
	fb.o.key_len = strlen(fb.key);
	fb.o.etag = fb.st.etag;
	fb.o.etag_len = fb.st.etag_len;
	fb.o.size = fb.st.size;
	ck_assert_int_eq(xform_size(fx.x, &fx.o, &size), 0);
	ck_assert_uint_eq(size, SRC_SIZE);
	/* b's output pushes a's out of memory. */
	ck_assert_int_eq(read_output(&fb), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 2);
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 2);
	ck_assert_uint_eq(xstats(&fx).failures, 0);
	fx_free(&fx);
}
END_TEST

static void print_bad(void *arg, const struct cache_bad_entry *b)
{
	(void)arg;
	fprintf(stderr, "bad entry %s: %s (key %s, chunk %llu)\n", b->hash_hex,
		b->reason, b->key, (unsigned long long)b->chunk);
}

/* Outputs are entries like any other: evicted down to the budget (a read
 * of an evicted one runs the transform again), every read still the
 * transform's bytes, and clean under cache_verify(). */
START_TEST(test_evicted_and_verified)
{
	struct fixture fx, fb;
	struct cache_stats cs;
	char path[8300];
	uint64_t checked = 0;

	fx_init(&fx, "evict");
	snprintf(path, sizeof(path), "cp '%s/a.txt' '%s/b.txt'", fx.src,
		 fx.src);
	ck_assert_int_eq(system(path), 0);
	/* Room for one of a's and b's outputs (700 KiB each), not both. */
	fx_budget = UINT64_C(1) << 20;
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	fb = fx;
	snprintf(fb.key, sizeof(fb.key), "b.txt");
	ck_assert_int_eq(
		fx.be->ops->stat(fx.be, fb.key, strlen(fb.key), &fb.st), 0);
	fb.o.key = fb.key;
	fb.o.key_len = strlen(fb.key);
	fb.o.etag = fb.st.etag;
	fb.o.etag_len = fb.st.etag_len;
	fb.o.size = fb.st.size;
	for (int round = 0; round < 3; round++) {
		ck_assert_int_eq(read_output(&fx), 0);
		ck_assert_int_eq(read_output(&fb), 0);
	}
	cache_stats_get(fx.c, &cs);
	ck_assert_uint_gt(cs.evictions, 0);
	ck_assert_uint_le(cs.live_bytes, fx_budget);
	/* What was evicted (outputs, lengths or source chunks) and when
	 * is the cache's business: runs are at least one per object. */
	ck_assert_uint_ge(xstats(&fx).runs, 2);
	ck_assert_uint_eq(xstats(&fx).failures, 0);
	ck_assert_int_eq(cache_verify(fx.c, print_bad, NULL, &checked), 0);
	ck_assert_uint_gt(checked, 0);
	fx_free(&fx);
}
END_TEST

/* The output survives the cache's close and reopen: no run after it. */
START_TEST(test_survives_reopen)
{
	struct fixture fx;

	fx_init(&fx, "reopen");
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 1);
	fx_close(&fx);
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 0);
	fx_free(&fx);
}
END_TEST

/* Another version is another output: the stored one is not served. */
START_TEST(test_version_change)
{
	struct fixture fx;

	fx_init(&fx, "version");
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 1);
	fx_close(&fx);
	fx_open(&fx, tr_argv, "2", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 1);
	fx_close(&fx);
	/* Both stay stored: version 1 again runs nothing. */
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).runs, 0);
	fx_free(&fx);
}
END_TEST

/* A transform that is not deterministic: the time in ns, always 20
 * bytes (so a second run passes the length check of the derived run). */
static const char *const clock_argv[] = { "/bin/sh", "-c",
					  "cat >/dev/null; date +%s%N", NULL };

/* Waits (bounded: 120 s, far past any run here) until x has done n
 * verify runs; returns its stats. */
static struct xform_stats verify_wait(struct fixture *fx, uint64_t n)
{
	struct xform_stats s = xstats(fx);

	for (int i = 0; i < 12000 && s.verify_runs < n; i++) {
		usleep(10000);
		s = xstats(fx);
	}
	return s;
}

/* Looks fx's object up (its size) and reads its output whole; returns
 * the size, or 0 on an error. */
static uint64_t lookup_and_read(struct fixture *fx)
{
	struct cache_object out;
	uint64_t size = 0;
	uint8_t *buf;
	ssize_t got;

	if (xform_size(fx->x, &fx->o, &size) != 0)
		return 0;
	xform_object(fx->x, &fx->o, size, &out);
	buf = malloc(size);
	if (!buf)
		return 0;
	got = tc_read(fx->c, &out, 0, (size_t)size, buf);
	free(buf);
	return got == (ssize_t)size ? size : 0;
}

/* verify = 100: a deterministic transform's stored output is re-run once
 * in the background, with no mismatch; the output just made is not. */
START_TEST(test_verify_deterministic)
{
	struct fixture fx;
	struct xform_stats s;

	fx_verify = 100;
	fx_init(&fx, "verify-det");
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	/* The first lookup produced it: nothing queued. */
	ck_assert_uint_eq(xstats(&fx).verify_queued, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).verify_queued, 1);
	s = verify_wait(&fx, 1);
	ck_assert_uint_eq(s.verify_runs, 1);
	ck_assert_uint_eq(s.verify_mismatches, 0);
	ck_assert_uint_eq(s.runs, 1);
	/* Once per object per process. */
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).verify_queued, 1);
	/* After a restart the stored output is checked again. */
	fx_close(&fx);
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	ck_assert_uint_eq(xstats(&fx).verify_queued, 1);
	s = verify_wait(&fx, 1);
	ck_assert_uint_eq(s.verify_runs, 1);
	ck_assert_uint_eq(s.verify_mismatches, 0);
	ck_assert_uint_eq(s.runs, 0);
	fx_free(&fx);
	fx_verify = 0;
}
END_TEST

/* verify = 100 catches a transform that is not deterministic; readers
 * keep getting the first output. */
START_TEST(test_verify_mismatch)
{
	struct fixture fx;
	struct xform_stats s;
	uint8_t first[SHA256_LEN], later[SHA256_LEN];
	uint64_t size = 0, size2 = 0;

	fx_verify = 100;
	fx_init(&fx, "verify-clock");
	fx_open(&fx, clock_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_uint_eq(lookup_and_read(&fx), 20);
	ck_assert_int_eq(xform_digest(fx.x, &fx.o, false, first, &size), 0);
	ck_assert_uint_eq(size, 20);
	ck_assert_uint_eq(lookup_and_read(&fx), 20);
	s = verify_wait(&fx, 1);
	ck_assert_uint_eq(s.verify_runs, 1);
	ck_assert_uint_eq(s.verify_mismatches, 1);
	ck_assert_uint_eq(s.runs, 1);
	ck_assert_uint_eq(lookup_and_read(&fx), 20);
	ck_assert_int_eq(xform_digest(fx.x, &fx.o, false, later, &size2), 0);
	ck_assert_mem_eq(first, later, SHA256_LEN);
	ck_assert_uint_eq(xstats(&fx).verify_queued, 1);
	fx_free(&fx);
	fx_verify = 0;
}
END_TEST

/* verify = 0 (the default) re-runs nothing. */
START_TEST(test_verify_off)
{
	struct fixture fx;

	fx_init(&fx, "verify-off");
	fx_open(&fx, clock_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_uint_eq(lookup_and_read(&fx), 20);
	ck_assert_uint_eq(lookup_and_read(&fx), 20);
	ck_assert_uint_eq(xstats(&fx).verify_queued, 0);
	fx_free(&fx);
}
END_TEST

/* xform_digest: nothing stored is -ENOENT without a run; with run it
 * produces the output, and its digest is the output's. */
START_TEST(test_digest)
{
	struct fixture fx;
	uint8_t d[SHA256_LEN], want[SHA256_LEN];
	uint64_t size = 0;
	uint8_t *expect = malloc(SRC_SIZE);

	ck_assert_ptr_nonnull(expect);
	for (uint64_t i = 0; i < SRC_SIZE; i++)
		expect[i] = out_byte(i);
	ck_assert_int_eq(sha256(expect, SRC_SIZE, want), 0);
	free(expect);
	fx_init(&fx, "digest");
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(xform_digest(fx.x, &fx.o, false, d, &size), -ENOENT);
	ck_assert_uint_eq(xstats(&fx).runs, 0);
	ck_assert_int_eq(xform_digest(fx.x, &fx.o, true, d, &size), 0);
	ck_assert_uint_eq(size, SRC_SIZE);
	ck_assert_mem_eq(d, want, SHA256_LEN);
	ck_assert_uint_eq(xstats(&fx).runs, 1);
	/* The process was reaped: its CPU time (bwrap's and tr's) counts. */
	ck_assert_uint_gt(xstats(&fx).cpu_ns, 0);
	fx_close(&fx);
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_BWRAP, 0);
	ck_assert_int_eq(xform_digest(fx.x, &fx.o, false, d, &size), 0);
	ck_assert_mem_eq(d, want, SHA256_LEN);
	ck_assert_uint_eq(xstats(&fx).runs, 0);
	fx_free(&fx);
}
END_TEST

/* Waits (bounded: 120 s, far past any run here) until x has made n runs
 * ahead; returns its stats. */
static struct xform_stats ahead_wait(struct fixture *fx, uint64_t n)
{
	struct xform_stats s = xstats(fx);

	for (int i = 0; i < 12000 && s.ahead_runs < n; i++) {
		usleep(10000);
		s = xstats(fx);
	}
	return s;
}

/* xform_ahead(): an ahead thread runs the object and stores its output;
 * the reader's lookup then finds it (no second run) and reads it right. */
START_TEST(test_ahead_run)
{
	struct fixture fx;
	struct xform_stats s;

	fx_init(&fx, "ahead");
	fx_open(&fx, tr_argv, "1", TRANSFORM_SANDBOX_NONE, 1000);
	ck_assert_uint_eq(xform_ahead_depth(fx.x), 4); /* 2 x workers */
	xform_ahead(fx.x, &fx.o);
	s = ahead_wait(&fx, 1);
	ck_assert_uint_eq(s.ahead_runs, 1);
	ck_assert_uint_eq(s.runs, 1);
	ck_assert_uint_eq(s.queued, 0);
	ck_assert_int_eq(read_output(&fx), 0);
	s = xstats(&fx);
	ck_assert_uint_eq(s.runs, 1); /* the lookup found it made */
	ck_assert_uint_eq(s.ahead_runs, 1);
	fx_free(&fx);
}
END_TEST

/* xform_stop() with a run ahead in progress and more queued: it waits
 * for the run (bounded by the transform's timeout), drops the queue
 * (no leak under ASan) and queues nothing after it. */
START_TEST(test_ahead_stop)
{
	static const char *const slow_argv[] = { "/bin/sh", "-c",
						 "sleep 1; exec tr a-z A-Z",
						 NULL };
	struct fixture fx;
	struct cache_object other;
	struct xform_stats s;

	fx_init(&fx, "aheadstop");
	fx_open(&fx, slow_argv, "1", TRANSFORM_SANDBOX_NONE, 1000);
	xform_ahead(fx.x, &fx.o);
	/* The same object under other etags: queued too (a missing
	 * source's run fails, logged: its error is the run's). */
	other = fx.o;
	other.etag = "1:2:3";
	other.etag_len = 5;
	xform_ahead(fx.x, &other);
	other.etag = "4:5:6";
	xform_ahead(fx.x, &other);
	xform_stop(fx.x);
	s = xstats(&fx);
	ck_assert_uint_eq(s.queued, 0);
	xform_ahead(fx.x, &fx.o); /* stopped: nothing queued, no thread */
	ck_assert_uint_eq(xstats(&fx).queued, 0);
	fx_free(&fx);
}
END_TEST

static Suite *xform_suite(void)
{
	const struct unit_case cases[] = {
		{ "once_for_concurrent_readers",
		  test_once_for_concurrent_readers },
		{ "once_worker", test_once_worker },
		{ "failure_then_backoff", test_failure_then_backoff },
		{ "failure_then_retry", test_failure_then_retry },
		{ "killed_mid_output", test_killed_mid_output },
		{ "stash_dropped", test_stash_dropped },
		{ "evicted_and_verified", test_evicted_and_verified },
		{ "survives_reopen", test_survives_reopen },
		{ "version_change", test_version_change },
		{ "verify_deterministic", test_verify_deterministic },
		{ "verify_mismatch", test_verify_mismatch },
		{ "verify_off", test_verify_off },
		{ "digest", test_digest },
		{ "ahead_run", test_ahead_run },
		{ "ahead_stop", test_ahead_stop },
	};

	return unit_suite("xform", cases, ARRAY_LEN(cases));
}

/* The sandbox has a /tmp of its own and nobody may not read every
 * directory of a checkout (.ci/run clones under /tmp): the worker tests'
 * python/shardfs package is copied (0755) under /var/tmp, which the
 * sandbox's read-only root shows, and pydir names the copy. */
static char py_root[64] = "/var/tmp/check_xform.XXXXXX";

static int pydir_copy(void)
{
	char src[PATH_MAX], cmd[2 * PATH_MAX + 64];

	if (realpath("python/shardfs", src) == NULL) {
		perror("python/shardfs (run from the repository root)");
		return -1;
	}
	if (mkdtemp(py_root) == NULL || chmod(py_root, 0755) != 0) {
		perror("check_xform: a directory under /var/tmp");
		return -1;
	}
	snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s/' && chmod -R a+rX '%s'",
		 src, py_root, py_root);
	if (system(cmd) != 0) {
		fprintf(stderr, "check_xform: %s failed\n", cmd);
		return -1;
	}
	snprintf(pydir, sizeof(pydir), "%s", py_root);
	return 0;
}

static void pydir_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", py_root);
	if (system(cmd) != 0)
		fprintf(stderr, "check_xform: %s failed\n", cmd);
}

int main(void)
{
	static char dir[64];
	int rc;

	root = dir; /* filled in before any test runs */
	if (geteuid() != 0) {
		fprintf(stderr, "check_xform: needs root (to run transforms "
				"as nobody)\n");
		return EXIT_FAILURE;
	}
	if (pydir_copy() != 0)
		return EXIT_FAILURE;
	rc = unit_main(xform_suite(), "/tmp/check_xform.XXXXXX", dir,
		       sizeof(dir), NULL);
	pydir_remove();
	return rc;
}
