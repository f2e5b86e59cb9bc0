/*
 * check_cache: the read path (cache/cache.h) over the posix backend, as a
 * pass-through cache made by cache_new().
 *
 * Objects are real files in one mkdtemp directory that main() removes
 * whatever the outcome; each test makes its own cache, so the counters it
 * checks start at zero.
 */
#include "cache/cache.h"
#include "tests/unit/cache_util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "tests/unit/unit.h"
#include "util/log.h"

static char tmpdir[64];

static const struct backend_options default_opts;

/* One test's source directory, backend and cache. */
struct fixture {
	char root[256];
	struct backend *be;
	struct cache *c;
};

static void fixture_open(struct fixture *fx, const char *name)
{
	snprintf(fx->root, sizeof(fx->root), "%s/%s", tmpdir, name);
	ck_assert_int_eq(mkdir(fx->root, 0755), 0);
	ck_assert_int_eq(backend_open(fx->root, &default_opts, &fx->be), 0);
	fx->c = NULL;
	ck_assert_int_eq(cache_new(fx->be, &fx->c), 0);
	ck_assert_ptr_nonnull(fx->c);
}

static void fixture_close(struct fixture *fx)
{
	cache_free(fx->c);
	backend_close(fx->be);
}

static void put_file(const struct fixture *fx, const char *key,
		     const void *data, size_t len, int64_t mtime_ns)
{
	char path[512];
	struct timespec ts[2];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fx->root, key);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ts[0].tv_sec = ts[1].tv_sec = mtime_ns / 1000000000;
	ts[0].tv_nsec = ts[1].tv_nsec = mtime_ns % 1000000000;
	ck_assert_int_eq(futimens(fd, ts), 0);
	ck_assert_int_eq(close(fd), 0);
}

/* The object as a manifest would pin it, etag from the backend's stat. */
struct pinned {
	struct backend_stat st;
	struct cache_object obj;
};

static void pin(const struct fixture *fx, const char *key, struct pinned *p)
{
	ck_assert_int_eq(fx->be->ops->stat(fx->be, key, strlen(key), &p->st),
			 0);
	memset(&p->obj, 0, sizeof(p->obj));
	p->obj.key = key;
	p->obj.key_len = strlen(key);
	p->obj.etag = p->st.etag;
	p->obj.etag_len = p->st.etag_len;
	p->obj.size = p->st.size;
}

static struct cache_stats stats_of(struct cache *c)
{
	struct cache_stats s;

	/* cache_stats_get() fills every field, not only those it counts. */
	memset(&s, 0xa5, sizeof(s));
	cache_stats_get(c, &s);
	return s;
}

static void expect_stats(struct cache *c, uint64_t reads, uint64_t bytes,
			 uint64_t errors)
{
	struct cache_stats s = stats_of(c);

	ck_assert_uint_eq(s.backend_reads, reads);
	ck_assert_uint_eq(s.backend_bytes, bytes);
	ck_assert_uint_eq(s.backend_errors, errors);
}

static void read_expect(struct cache *c, const struct cache_object *obj,
			uint64_t off, size_t len, const char *want,
			size_t want_len)
{
	char buf[4096];

	ck_assert_uint_le(len, sizeof(buf));
	memset(buf, '#', sizeof(buf));
	ck_assert_int_eq(tc_read(c, obj, off, len, buf), (ssize_t)want_len);
	ck_assert_int_eq(memcmp(buf, want, want_len), 0);
	/* Nothing written past what was returned. */
	if (want_len < sizeof(buf))
		ck_assert_int_eq(buf[want_len], '#');
}

static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";

/* A pass-through cache reads a small object whole (cache.h): every
 * backend read of obj is of all of its bytes, and there are at most
 * max_reads of them. */
static void expect_whole_reads(struct cache *c, const struct cache_object *obj,
			       uint64_t max_reads)
{
	struct cache_stats s = stats_of(c);

	ck_assert_uint_ge(s.backend_reads, 1);
	ck_assert_uint_le(s.backend_reads, max_reads);
	ck_assert_uint_eq(s.backend_bytes, s.backend_reads * obj->size);
	ck_assert_uint_eq(s.backend_errors, 0);
}

START_TEST(test_read_and_clamp)
{
	struct fixture fx;
	struct pinned p;
	struct cache_stats before, after;

	fixture_open(&fx, "clamp");
	put_file(&fx, "f", digits, 36, 1000000000);
	pin(&fx, "f", &p);
	ck_assert_uint_eq(p.obj.size, 36);

	read_expect(fx.c, &p.obj, 0, 36, digits, 36);
	read_expect(fx.c, &p.obj, 10, 5, "abcde", 5);
	read_expect(fx.c, &p.obj, 30, 100, "uvwxyz", 6);
	read_expect(fx.c, &p.obj, 0, 4096, digits, 36);
	expect_whole_reads(fx.c, &p.obj, 4);

	/* At and after the end: 0, and no request (a ranged GET there
	 * would be an error on S3). */
	before = stats_of(fx.c);
	read_expect(fx.c, &p.obj, 36, 10, "", 0);
	read_expect(fx.c, &p.obj, 37, 10, "", 0);
	read_expect(fx.c, &p.obj, UINT64_MAX, 10, "", 0);
	read_expect(fx.c, &p.obj, UINT64_MAX - 5, 4096, "", 0);
	after = stats_of(fx.c);
	ck_assert_uint_eq(after.backend_reads, before.backend_reads);
	fixture_close(&fx);
	cache_free(NULL);
}
END_TEST

START_TEST(test_clamp_to_object_size)
{
	/* The manifest's size bounds a read even when the store has more:
	 * the cache, not the backend, must stop at obj->size. */
	struct fixture fx;
	struct pinned p;

	fixture_open(&fx, "objsize");
	put_file(&fx, "f", digits, 36, 1000000000);
	pin(&fx, "f", &p);
	p.obj.size = 4;
	read_expect(fx.c, &p.obj, 0, 100, "0123", 4);
	read_expect(fx.c, &p.obj, 2, 100, "23", 2);
	read_expect(fx.c, &p.obj, 4, 100, "", 0);
	/* Whole: 4 bytes each time (the first read took all of its copy). */
	expect_stats(fx.c, 2, 8, 0);
	p.obj.size = 0;
	read_expect(fx.c, &p.obj, 0, 100, "", 0);
	expect_stats(fx.c, 2, 8, 0);
	fixture_close(&fx);
}
END_TEST

START_TEST(test_whole_small_object)
{
	/* Read in 1-byte pieces (as the kernel re-reads a file in 4 KiB
	 * pages after a failed read): one backend read of the whole object
	 * serves them all while its copy is retained. */
	struct fixture fx;
	struct pinned p;
	uint64_t i;

	fixture_open(&fx, "whole");
	put_file(&fx, "f", digits, 36, 1000000000);
	pin(&fx, "f", &p);
	for (i = 0; i < 36; i++)
		read_expect(fx.c, &p.obj, i, 1, digits + i, 1);
	/* 1 unless the idle engine dropped the copy (2 s unread) between
	 * two of these reads. */
	expect_whole_reads(fx.c, &p.obj, 36 / 2);
	fixture_close(&fx);
}
END_TEST

START_TEST(test_whole_size_limit)
{
	/* Up to CACHE_UNCACHED_WHOLE_MAX bytes an object is read whole;
	 * above, just the bytes asked for. */
	size_t big = (size_t)CACHE_UNCACHED_WHOLE_MAX + 1;
	char *data = malloc(big), buf[16];
	struct fixture fx;
	struct pinned p;
	struct cache_stats s;
	size_t i;

	ck_assert_ptr_nonnull(data);
	for (i = 0; i < big; i++)
		data[i] = digits[i % 36];
	fixture_open(&fx, "limit");
	put_file(&fx, "at", data, big - 1, 1000000000);
	put_file(&fx, "over", data, big, 1000000000);
	pin(&fx, "at", &p);
	ck_assert_int_eq(tc_read(fx.c, &p.obj, 100, 10, buf), 10);
	ck_assert_int_eq(memcmp(buf, data + 100, 10), 0);
	s = stats_of(fx.c);
	ck_assert_uint_eq(s.backend_reads, 1);
	ck_assert_uint_eq(s.backend_bytes, big - 1);
	pin(&fx, "over", &p);
	ck_assert_int_eq(tc_read(fx.c, &p.obj, 100, 10, buf), 10);
	ck_assert_int_eq(memcmp(buf, data + 100, 10), 0);
	s = stats_of(fx.c);
	ck_assert_uint_eq(s.backend_reads, 2);
	ck_assert_uint_eq(s.backend_bytes, big - 1 + 10);
	fixture_close(&fx);
	free(data);
}
END_TEST

START_TEST(test_stale)
{
	struct fixture fx;
	struct pinned p, now;
	char buf[64];

	fixture_open(&fx, "stale");
	put_file(&fx, "f", digits, 36, 1000000000);
	pin(&fx, "f", &p);
	/* All of it: the copy is read once and goes. */
	read_expect(fx.c, &p.obj, 0, 36, digits, 36);

	/* Rewritten in place, same size: the pinned etag no longer matches. */
	put_file(&fx, "f", "ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210", 36,
		 2000000000);
	memset(buf, '#', sizeof(buf));
	ck_assert_int_eq(tc_read(fx.c, &p.obj, 0, 10, buf), -ESTALE);
	ck_assert_int_eq(buf[0], '#');
	ck_assert_int_eq(tc_read(fx.c, &p.obj, 20, 64, buf), -ESTALE);
	ck_assert_int_eq(buf[0], '#');
	expect_stats(fx.c, 3, 36, 2);

	/* Pinned again, the new bytes come through. */
	pin(&fx, "f", &now);
	read_expect(fx.c, &now.obj, 0, 3, "ZYX", 3);
	expect_stats(fx.c, 4, 72, 2);
	fixture_close(&fx);
}
END_TEST

START_TEST(test_errors)
{
	struct fixture fx;
	struct pinned p;
	struct cache_object gone = {
		.key = "gone",
		.key_len = 4,
		.etag = "1:1:1",
		.etag_len = 5,
		.size = 1,
	};
	char path[512], buf[8];

	fixture_open(&fx, "errors");
	ck_assert_int_eq(tc_read(fx.c, &gone, 0, 1, buf), -ENOENT);
	expect_stats(fx.c, 1, 0, 1);

	/* Listed, then removed. */
	put_file(&fx, "f", digits, 36, 1000000000);
	pin(&fx, "f", &p);
	snprintf(path, sizeof(path), "%s/f", fx.root);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(tc_read(fx.c, &p.obj, 0, 8, buf), -ENOENT);
	expect_stats(fx.c, 2, 0, 2);
	fixture_close(&fx);
}
END_TEST

START_TEST(test_passthrough_stats)
{
	struct fixture fx;
	struct cache_stats s;

	fixture_open(&fx, "stats");
	s = stats_of(fx.c);
	ck_assert_uint_eq(s.backend_reads, 0);
	ck_assert_uint_eq(s.backend_bytes, 0);
	ck_assert_uint_eq(s.backend_errors, 0);
	/* No disk cache behind cache_new(). */
	ck_assert(!s.enabled);
	ck_assert_uint_eq(s.hits, 0);
	ck_assert_uint_eq(s.misses, 0);
	ck_assert_uint_eq(s.bytes_from_cache, 0);
	ck_assert_uint_eq(s.evictions, 0);
	ck_assert_uint_eq(s.crc_failures, 0);
	ck_assert_uint_eq(s.store_failures, 0);
	ck_assert_uint_eq(s.live_bytes, 0);
	ck_assert_uint_eq(s.budget_bytes, 0);
	fixture_close(&fx);
}
END_TEST

struct reader {
	struct cache *c;
	const struct cache_object *obj;
	int ok;
};

enum { THREADS = 4, READS = 250 };

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	char buf[16];
	int i;

	r->ok = 1;
	for (i = 0; i < READS; i++)
		if (tc_read(r->c, r->obj, (uint64_t)(i % 30), 7, buf) != 7 ||
		    memcmp(buf, digits + i % 30, 7) != 0)
			r->ok = 0;
	return NULL;
}

START_TEST(test_concurrent_counters)
{
	struct fixture fx;
	struct pinned p;
	struct reader r[THREADS];
	pthread_t t[THREADS];
	int i;

	fixture_open(&fx, "threads");
	put_file(&fx, "f", digits, 36, 1000000000);
	pin(&fx, "f", &p);
	for (i = 0; i < THREADS; i++) {
		r[i].c = fx.c;
		r[i].obj = &p.obj;
		ck_assert_int_eq(
			pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
	}
	for (i = 0; i < THREADS; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert(r[i].ok);
	}
	/* Every backend read was of the whole object, and single-flight
	 * with its retained copy served most reads (the bound leaves room
	 * for the idle engine dropping a copy now and then). */
	expect_whole_reads(fx.c, &p.obj, THREADS * READS / 2);
	fixture_close(&fx);
}
END_TEST

static Suite *cache_suite(void)
{
	const struct unit_case cases[] = {
		{ "read_and_clamp", test_read_and_clamp },
		{ "clamp_to_object_size", test_clamp_to_object_size },
		{ "whole_small_object", test_whole_small_object },
		{ "whole_size_limit", test_whole_size_limit },
		{ "stale", test_stale },
		{ "errors", test_errors },
		{ "passthrough_stats", test_passthrough_stats },
		{ "concurrent_counters", test_concurrent_counters },
	};
	return unit_suite("cache", cases, ARRAY_LEN(cases));
}

int main(void)
{
	/* The backend logs each failed read once; the tests cause some. */
	log_set_level(LOG_ERR - 1);
	return unit_run_in_tmpdir(cache_suite(), "/tmp/check_cache.XXXXXX",
				  tmpdir, sizeof(tmpdir));
}
