/*
 * check_fetch_runs: runs of the fetch engine (cache/fetch.h, fetch_run())
 * and the record view reads built on them (fs/recview.h): several
 * consecutive small chunks of one object (cut at 64 KiB, as a record view
 * cuts its sources) fetched by ONE backend read, each chunk still a
 * flight of its own that readers join, stored on its own.
 *
 * The store is a posix backend wrapped by a recording backend that logs
 * every read (key, offset, length), can hold reads at a gate (of every
 * key or one) until the test opens it, and can fail them. No outcome
 * depends on time: a test that must know a reader waits polls a counter
 * until it moves; the record view tests count and compare the backend
 * reads, which do not depend on when the prefetches run.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "cache/cache.h"
#include "fs/fs.h"
#include "fs/recview.h"
#include "plan/manifest.h"
#include "records/rindex.h"
#include "records/rplan.h"
#include "tests/unit/cache_util.h"
#include "tests/unit/unit.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define UNIT CACHE_CRC_BLOCK /* the chunk size of every object here */

static char root[64];

/* ---- the recording backend ---- */

#define LOG_MAX 4096

struct rec_entry {
	char key[32];
	uint64_t off;
	size_t len;
};

struct rec {
	struct backend base; /* first: the cache sees a struct backend */
	struct backend *inner;
	pthread_mutex_t lock; /* protects everything below */
	pthread_cond_t cv;
	bool gated;	   /* reads wait while set */
	char gate_key[32]; /* if set, only reads of this key wait */
	unsigned held;	   /* reads waiting at the gate */
	int fail_err;	   /* if set, every read fails with it */
	bool short_reads;  /* reads return half the bytes asked for */
	struct rec_entry log[LOG_MAX];
	unsigned n_log;
};

static int rec_read(struct backend *be, const struct backend_read *rd,
		    size_t *nread)
{
	struct rec *r = (struct rec *)be;
	struct backend_read in = *rd; /* short_reads shortens it */
	int err;

	pthread_mutex_lock(&r->lock);
	if (r->n_log < LOG_MAX) {
		struct rec_entry *e = &r->log[r->n_log++];

		snprintf(e->key, sizeof(e->key), "%s", in.key);
		e->off = in.offset;
		e->len = in.len;
	}
	if (r->gate_key[0] == '\0' || strcmp(r->gate_key, in.key) == 0) {
		r->held++;
		pthread_cond_broadcast(&r->cv);
		while (r->gated)
			pthread_cond_wait(&r->cv, &r->lock);
		r->held--;
	}
	err = r->fail_err;
	if (r->short_reads)
		in.len /= 2;
	pthread_mutex_unlock(&r->lock);
	if (err != 0)
		return err;
	return r->inner->ops->read(r->inner, &in, nread);
}

static const struct backend_ops rec_ops = {
	.name = "recording",
	.read = rec_read,
};

static void rec_gate(struct rec *r, const char *key, bool gated)
{
	pthread_mutex_lock(&r->lock);
	snprintf(r->gate_key, sizeof(r->gate_key), "%s", key ? key : "");
	r->gated = gated;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->lock);
}

static unsigned rec_held(struct rec *r)
{
	unsigned n;

	pthread_mutex_lock(&r->lock);
	n = r->held;
	pthread_mutex_unlock(&r->lock);
	return n;
}

static void rec_wait_held(struct rec *r, unsigned n)
{
	pthread_mutex_lock(&r->lock);
	while (r->held < n)
		pthread_cond_wait(&r->cv, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

static unsigned rec_reads(struct rec *r)
{
	unsigned n;

	pthread_mutex_lock(&r->lock);
	n = r->n_log;
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* How many logged reads of key were of exactly [off, off + len). */
static unsigned rec_count(struct rec *r, const char *key, uint64_t off,
			  size_t len)
{
	unsigned i, n = 0;

	pthread_mutex_lock(&r->lock);
	for (i = 0; i < r->n_log; i++)
		n += strcmp(r->log[i].key, key) == 0 && r->log[i].off == off &&
		     r->log[i].len == len;
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* ---- fixture ---- */

#define OBJS 8

struct fixture {
	char src[4096], dir[4096];
	struct rec rec;
	struct cache *c;
	struct cache_object objs[OBJS];
	struct backend_stat st[OBJS];
	char keys[OBJS][32];
	unsigned n_objs;
};

static uint8_t byte_at(unsigned s, uint64_t i)
{
	uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)s * 0xBF58476D;

	z ^= z >> 29;
	return (uint8_t)(z * 0x94D049BB133111EBull >> 56);
}

/* Makes object number n_objs, named name, of size bytes, cut at UNIT. */
static void add_named(struct fixture *fx, const char *name, uint64_t size)
{
	unsigned k = fx->n_objs++;
	char path[4200];
	uint8_t *buf = malloc(size ? size : 1);
	uint64_t i;
	FILE *f;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < size; i++)
		buf[i] = byte_at(k, i);
	snprintf(fx->keys[k], sizeof(fx->keys[k]), "%s", name);
	snprintf(path, sizeof(path), "%s/%s", fx->src, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, size, f), size);
	ck_assert_int_eq(fclose(f), 0);
	free(buf);
	ck_assert_int_eq(fx->rec.inner->ops->stat(fx->rec.inner, name,
						  strlen(name), &fx->st[k]),
			 0);
	memset(&fx->objs[k], 0, sizeof(fx->objs[k]));
	fx->objs[k].key = fx->keys[k];
	fx->objs[k].key_len = strlen(fx->keys[k]);
	fx->objs[k].etag = fx->st[k].etag;
	fx->objs[k].etag_len = fx->st[k].etag_len;
	fx->objs[k].size = size;
	fx->objs[k].chunk_size = UNIT;
}

static void add_file(struct fixture *fx, uint64_t size)
{
	char name[16];

	snprintf(name, sizeof(name), "f%02u", fx->n_objs);
	add_named(fx, name, size);
}

static void fx_init(struct fixture *fx, const char *name)
{
	memset(fx, 0, sizeof(*fx));
	snprintf(fx->src, sizeof(fx->src), "%s/%s-src", root, name);
	snprintf(fx->dir, sizeof(fx->dir), "%s/%s-cache", root, name);
	ck_assert_int_eq(mkdir(fx->src, 0755), 0);
	ck_assert_int_eq(backend_open(fx->src, NULL, &fx->rec.inner), 0);
	fx->rec.base.ops = &rec_ops;
	pthread_mutex_init(&fx->rec.lock, NULL);
	pthread_cond_init(&fx->rec.cv, NULL);
}

/* A disk cache of 8 MiB chunks (objects here are cut smaller). */
static void fx_open(struct fixture *fx, unsigned connections, uint64_t memory)
{
	struct cache_options o = {
		.dir = fx->dir,
		.backend_id = fx->src,
		.size_bytes = UINT64_C(1) << 30,
	};
	struct cache_fetch_options fo = {
		.connections = connections,
		.memory = memory,
		.hedge_off = true,
	};

	ck_assert_int_eq(cache_open(&o, &fx->rec.base, &fx->c), 0);
	cache_set_fetch_options(fx->c, &fo);
}

static void fx_free(struct fixture *fx)
{
	cache_free(fx->c);
	backend_close(fx->rec.inner);
	pthread_mutex_destroy(&fx->rec.lock);
	pthread_cond_destroy(&fx->rec.cv);
}

static struct cache_stats stats(struct fixture *fx)
{
	struct cache_stats s;

	cache_stats_get(fx->c, &s);
	return s;
}

static void check_bytes(unsigned k, uint64_t off, const uint8_t *buf,
			size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != byte_at(k, off + i))
			ck_abort_msg("object %u: byte %llu differs", k,
				     (unsigned long long)(off + i));
}

/* Waits until no backend read runs (queued prefetches have run). */
static void wait_idle(struct fixture *fx)
{
	while (stats(fx).backend_inflight > 0)
		usleep(1000);
}

struct reader {
	struct fixture *fx;
	unsigned k;
	uint64_t off;
	size_t len;
	ssize_t got;
	uint8_t *buf;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->buf = malloc(r->len);
	r->got = r->buf == NULL ? -ENOMEM
				: tc_read(r->fx->c, &r->fx->objs[r->k], r->off,
					  r->len, r->buf);
	return NULL;
}

static void reader_check(struct reader *r)
{
	ck_assert_int_eq(r->got, (ssize_t)r->len);
	check_bytes(r->k, r->off, r->buf, r->len);
	free(r->buf);
	r->buf = NULL;
}

/* ---- runs ---- */

/* A record's extent queued ahead (cache_prefetch_range()) is ONE backend
 * read of the 64 KiB chunks around it, and a reader of a chunk in the
 * middle of it joins that read instead of issuing its own. Before: one
 * read per chunk (12 here). */
START_TEST(test_run_prefetch_join)
{
	struct fixture fx;
	struct reader r;
	pthread_t t;

	fx_init(&fx, "pfjoin");
	add_file(&fx, 4 * MIB);
	fx_open(&fx, 8, 64 * MIB);
	rec_gate(&fx.rec, NULL, true);
	/* [100 KiB, 800 KiB): chunks 1..12. */
	ck_assert_int_eq(
		cache_prefetch_range(fx.c, &fx.objs[0], 100 * KIB, 700 * KIB),
		0);
	rec_wait_held(&fx.rec, 1);
	r = (struct reader){ .fx = &fx, .k = 0, .off = 400 * KIB, .len = 1000 };
	ck_assert_int_eq(pthread_create(&t, NULL, reader_main, &r), 0);
	while (stats(&fx).singleflight_waits < 1)
		sched_yield();
	rec_gate(&fx.rec, NULL, false);
	pthread_join(t, NULL);
	reader_check(&r);
	wait_idle(&fx);
	ck_assert_uint_eq(rec_reads(&fx.rec), 1);
	ck_assert_uint_eq(rec_count(&fx.rec, "f00", UNIT, 12 * UNIT), 1);
	ck_assert_uint_eq(stats(&fx).prefetch_issued, 12);
	ck_assert_uint_eq(stats(&fx).prefetch_bytes, 12 * UNIT);
	/* Stored chunk by chunk: every byte of them a hit now. */
	r = (struct reader){ .fx = &fx, .k = 0, .off = UNIT, .len = 12 * UNIT };
	reader_main(&r);
	reader_check(&r);
	ck_assert_uint_eq(rec_reads(&fx.rec), 1);
	fx_free(&fx);
}
END_TEST

/* Two readers of one record at once cause one backend read: the second
 * joins the first's run. Before: each read the range itself (the
 * coalesced read was not single-flight). */
START_TEST(test_run_two_readers)
{
	struct fixture fx;
	struct reader r[2];
	pthread_t t[2];
	int i;

	fx_init(&fx, "tworeaders");
	add_file(&fx, 4 * MIB);
	fx_open(&fx, 8, 64 * MIB);
	rec_gate(&fx.rec, NULL, true);
	for (i = 0; i < 2; i++) {
		r[i] = (struct reader){ .fx = &fx,
					.k = 0,
					.off = 100 * KIB + 7 * (uint64_t)i,
					.len = 700 * KIB };
		ck_assert_int_eq(
			pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
		if (i == 0)
			rec_wait_held(&fx.rec, 1);
	}
	/* The second joined (each waits for the run: two waits), or read
	 * on its own (a second read held). */
	while (stats(&fx).singleflight_waits < 2 && rec_held(&fx.rec) < 2)
		sched_yield();
	rec_gate(&fx.rec, NULL, false);
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		reader_check(&r[i]);
	}
	ck_assert_uint_eq(rec_reads(&fx.rec), 1);
	ck_assert_uint_eq(rec_count(&fx.rec, "f00", UNIT, 12 * UNIT), 1);
	fx_free(&fx);
}
END_TEST

/* A range some of whose chunks are stored or in flight: the missing ones
 * come in one read per run of consecutive ones. */
START_TEST(test_run_gaps)
{
	struct fixture fx;
	struct reader r;
	uint64_t size, first;

	fx_init(&fx, "gaps");
	add_file(&fx, 4 * MIB - 1000);
	fx_open(&fx, 8, 64 * MIB);
	/* Chunks 4 and 9 stored. */
	r = (struct reader){ .fx = &fx, .k = 0, .off = 4 * UNIT + 5, .len = 9 };
	reader_main(&r);
	reader_check(&r);
	r = (struct reader){ .fx = &fx, .k = 0, .off = 9 * UNIT, .len = 99 };
	reader_main(&r);
	reader_check(&r);
	ck_assert_uint_eq(rec_reads(&fx.rec), 2);
	/* Chunks 2..12: runs 2..3, 5..8, 10..12. */
	r = (struct reader){
		.fx = &fx, .k = 0, .off = 2 * UNIT + 1, .len = 11 * UNIT - 2
	};
	reader_main(&r);
	reader_check(&r);
	ck_assert_uint_eq(rec_reads(&fx.rec), 5);
	ck_assert_uint_eq(rec_count(&fx.rec, "f00", 2 * UNIT, 2 * UNIT), 1);
	ck_assert_uint_eq(rec_count(&fx.rec, "f00", 5 * UNIT, 4 * UNIT), 1);
	ck_assert_uint_eq(rec_count(&fx.rec, "f00", 10 * UNIT, 3 * UNIT), 1);
	/* The object's short last chunk ends a run. */
	size = fx.objs[0].size;
	r = (struct reader){
		.fx = &fx, .k = 0, .off = size - 200 * KIB, .len = 200 * KIB
	};
	reader_main(&r);
	reader_check(&r);
	first = (size - 200 * KIB) / UNIT * UNIT;
	ck_assert_uint_eq(rec_count(&fx.rec, "f00", first, size - first), 1);
	ck_assert_uint_eq(rec_reads(&fx.rec), 6);
	fx_free(&fx);
}
END_TEST

/* A run whose read fails fails every reader of its chunks, with one
 * backend request; a re-read of any chunk of it within the failure
 * window fails at once, without a request; nothing is stored. A short
 * reply fails them the same way. */
START_TEST(test_run_fail)
{
	struct fixture fx;
	struct reader r[2];
	struct cache_info info;
	pthread_t t[2];
	uint8_t buf[4096];
	int i;

	fx_init(&fx, "runfail");
	add_file(&fx, 4 * MIB);
	add_file(&fx, 4 * MIB);
	fx_open(&fx, 8, 64 * MIB);
	fx.rec.fail_err = -EIO;
	rec_gate(&fx.rec, NULL, true);
	for (i = 0; i < 2; i++) {
		r[i] = (struct reader){ .fx = &fx,
					.k = 0,
					.off = 100 * KIB + 7 * (uint64_t)i,
					.len = 300 * KIB };
		ck_assert_int_eq(
			pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
		if (i == 0)
			rec_wait_held(&fx.rec, 1);
	}
	while (stats(&fx).singleflight_waits < 2 && rec_held(&fx.rec) < 2)
		sched_yield();
	rec_gate(&fx.rec, NULL, false);
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		free(r[i].buf);
	}
	/* One run (chunks 1..6) for both, failed. */
	ck_assert_int_eq(r[0].got, -EIO);
	ck_assert_int_eq(r[1].got, -EIO);
	wait_idle(&fx);
	ck_assert_uint_eq(rec_reads(&fx.rec), 1);
	ck_assert_uint_eq(rec_count(&fx.rec, "f00", UNIT, 6 * UNIT), 1);
	fx.rec.fail_err = 0;
	i = (int)rec_reads(&fx.rec);
	ck_assert_int_eq(tc_read(fx.c, &fx.objs[0], 3 * UNIT + 10, 100, buf),
			 -EIO);
	ck_assert_uint_eq(rec_reads(&fx.rec), (unsigned)i);
	ck_assert_int_eq(cache_info(fx.c, &info), 0);
	ck_assert_uint_eq(info.entries, 0);
	/* Short: every chunk of the run fails, nothing is stored. */
	fx.rec.short_reads = true;
	ck_assert_int_eq(tc_read(fx.c, &fx.objs[1], 10, 5 * UNIT, buf), -EIO);
	ck_assert_uint_eq(rec_reads(&fx.rec), (unsigned)i + 1);
	ck_assert_int_eq(cache_info(fx.c, &info), 0);
	ck_assert_uint_eq(info.entries, 0);
	fx.rec.short_reads = false;
	ck_assert_int_eq(tc_read(fx.c, &fx.objs[1], 10, sizeof(buf), buf),
			 sizeof(buf));
	check_bytes(1, 10, buf, sizeof(buf));
	fx_free(&fx);
}
END_TEST

/* Prefetch runs take at most 3/4 of the budget, counting their chunks'
 * buffers and the read's own: past it the ask is refused (-ENOBUFS), the
 * runs queued before it stay; the budget's high-water mark holds. */
START_TEST(test_run_memory)
{
	struct fixture fx;
	struct reader r;
	struct cache_stats s;

	fx_init(&fx, "runmem");
	add_file(&fx, 8 * MIB);
	fx_open(&fx, 8, 4 * MIB);
	rec_gate(&fx.rec, NULL, true);
	/* 1 MiB runs: 2 MiB each with their read's buffer; the second
	 * would pass 3 MiB. */
	ck_assert_int_eq(cache_prefetch_range(fx.c, &fx.objs[0], 0, MIB), 0);
	ck_assert_int_eq(cache_prefetch_range(fx.c, &fx.objs[0], 2 * MIB, MIB),
			 -ENOBUFS);
	s = stats(&fx);
	ck_assert_uint_eq(s.prefetch_issued, 16);
	ck_assert_uint_eq(s.prefetch_refused, 1);
	ck_assert_uint_le(s.memory_in_use_bytes, 3 * MIB);
	rec_gate(&fx.rec, NULL, false);
	wait_idle(&fx);
	r = (struct reader){ .fx = &fx, .k = 0, .off = 0, .len = 8 * MIB };
	reader_main(&r);
	reader_check(&r);
	ck_assert_uint_le(stats(&fx).memory_high_water_bytes, 4 * MIB);
	fx_free(&fx);
}
END_TEST

/* A reader short of memory cancels a queued prefetch run no one waits
 * for, whole (its chunks and its read's buffer), rather than reading
 * around it: the run's chunks are never read ahead, and a later read of
 * them is one run again. */
START_TEST(test_run_cancel)
{
	struct fixture fx;
	struct reader r;
	uint8_t *reply;

	fx_init(&fx, "runcancel");
	add_file(&fx, 32 * MIB);
	add_file(&fx, 4 * MIB);
	add_file(&fx, 8 * MIB);
	fx.objs[0].chunk_size = 0; /* 8 MiB chunks */
	fx.objs[2].chunk_size = 0;
	fx_open(&fx, 8, 48 * MIB);
	/* 32 MiB of prefetch reads held: PREFETCH_INFLIGHT_MIN, so the run
	 * queued next waits. */
	rec_gate(&fx.rec, "f00", true);
	ck_assert_int_eq(cache_prefetch_range(fx.c, &fx.objs[0], 0, 32 * MIB),
			 0);
	rec_wait_held(&fx.rec, 4);
	/* 2 MiB of f01 in one run: 4 MiB with its buffer, 36 MiB in all. */
	ck_assert_int_eq(cache_prefetch_range(fx.c, &fx.objs[1], 0, 2 * MIB),
			 0);
	ck_assert_uint_eq(stats(&fx).prefetch_issued, 4 + 32);
	/* A reply buffer, then a reader of an 8 MiB chunk of f02: 50 MiB. */
	reply = cache_buffer_alloc(fx.c, 6 * MIB);
	ck_assert_ptr_nonnull(reply);
	r = (struct reader){ .fx = &fx, .k = 2, .off = 5, .len = 5000 };
	reader_main(&r);
	reader_check(&r);
	ck_assert_uint_eq(stats(&fx).direct_reads, 0);
	ck_assert_uint_eq(rec_count(&fx.rec, "f02", 0, 8 * MIB), 1);
	cache_buffer_free(fx.c, reply, 6 * MIB);
	rec_gate(&fx.rec, NULL, false);
	wait_idle(&fx);
	ck_assert_uint_eq(rec_count(&fx.rec, "f01", 0, 2 * MIB), 0);
	r = (struct reader){ .fx = &fx, .k = 1, .off = 0, .len = 2 * MIB };
	reader_main(&r);
	reader_check(&r);
	ck_assert_uint_eq(rec_count(&fx.rec, "f01", 0, 2 * MIB), 1);
	fx_free(&fx);
}
END_TEST

/* ---- record views (fs/recview.h) ---- */

/* A record view over the fixture's objects: tfrecord, one rank. */
struct rview {
	struct manifest *m;
	struct rindex *ri;
	struct rplan *rp;
	struct shard_spec spec;
	struct fs_data d;
	struct recview_ahead *ahead;
};

/* Objects r0.tfrecord .. of records of the lengths lens[k] gives (from
 * offset 0, back to back), planned for world size 1 in parts; run_bytes
 * and window as rplan_build_runs(). */
static void rview_make(struct fixture *fx, struct rview *v, unsigned n_objs,
		       uint64_t (*len_of)(unsigned k, unsigned i), unsigned per,
		       uint64_t seed, unsigned parts, uint64_t run_bytes,
		       uint32_t window)
{
	uint64_t off[64];
	uint32_t len[64];
	unsigned k, i;

	memset(v, 0, sizeof(*v));
	v->m = manifest_new();
	ck_assert_ptr_nonnull(v->m);
	ck_assert_uint_le(per, 64);
	for (k = 0; k < n_objs; k++) {
		char name[32];
		uint64_t size = 0;

		for (i = 0; i < per; i++)
			size += len_of(k, i);
		snprintf(name, sizeof(name), "r%u.tfrecord", k);
		add_named(fx, name, size);
		ck_assert_int_eq(manifest_add(v->m, name, strlen(name), size,
					      fx->st[k].etag,
					      fx->st[k].etag_len, 0),
				 0);
	}
	ck_assert_int_eq(manifest_finish(v->m), 0);
	ck_assert_int_eq(rindex_new(REC_FORMAT_TFRECORD, v->m, &v->ri), 0);
	for (k = 0; k < n_objs; k++) {
		uint64_t pos = 0;

		for (i = 0; i < per; i++) {
			off[i] = pos;
			len[i] = (uint32_t)len_of(k, i);
			pos += len[i];
		}
		/* Manifest order is key order: r0, r1, ... */
		ck_assert_int_eq(
			rindex_add_object(v->ri, k, pos, false, off, len, per),
			0);
	}
	ck_assert_int_eq(rindex_finish(v->ri), 0);
	v->spec = (struct shard_spec){ .world_size = 1, .seed = seed };
	ck_assert_int_eq(rplan_build_runs(v->ri, &v->spec, parts, run_bytes,
					  window, &v->rp),
			 0);
	ck_assert_int_eq(recview_ahead_new(&v->ahead), 0);
	v->d = (struct fs_data){ .manifest = v->m,
				 .spec = &v->spec,
				 .rindex = v->ri,
				 .rplan = v->rp,
				 .cache = fx->c };
}

static void rview_free(struct rview *v)
{
	recview_ahead_free(v->ahead);
	rplan_free(v->rp);
	rindex_free(v->ri);
	manifest_free(v->m);
}

/* Reads every part of rank 0 in order, 128 KiB at a time as the kernel
 * asks, checking every byte against the objects. */
static void rview_read_all(struct rview *v)
{
	unsigned p, parts = rplan_parts(v->rp);
	uint8_t *buf = malloc(128 * KIB);
	struct rplan_seg seg;

	ck_assert_ptr_nonnull(buf);
	for (p = 0; p < parts; p++) {
		uint64_t size = rplan_part_size(v->rp, 0, p), off;

		for (off = 0; off < size; off += 128 * KIB) {
			size_t want = size - off < 128 * KIB
					      ? (size_t)(size - off)
					      : 128 * KIB;
			ssize_t got = recview_read(&v->d, v->ahead, 0, p, off,
						   want, buf);
			size_t done = 0;

			ck_assert_int_eq(got, (ssize_t)want);
			while (done < want) {
				const struct rindex_object *o;
				uint64_t at;

				ck_assert_uint_eq(
					rplan_map(v->rp, 0, p, off + done,
						  want - done, &seg, 1),
					1);
				ck_assert_int_eq(seg.kind, RPLAN_SEG_RECORD);
				o = rindex_object_of(v->ri, seg.rec);
				at = v->ri->rec_off[seg.rec] + seg.in_off;
				check_bytes(o->item, at, buf + done,
					    (size_t)seg.len);
				done += (size_t)seg.len;
			}
		}
	}
	free(buf);
}

/* Records of 70 to 300 KiB and some odd bytes. */
static uint64_t big_len(unsigned k, unsigned i)
{
	return 70 * KIB + ((uint64_t)(k * 8 + i) * 37 * KIB) % (230 * KIB) +
	       (k * 131 + i * 17) % 1000;
}

/* The logged read of key that holds byte at; -1 if none, -2 if several. */
static int rec_holder(struct rec *r, const char *key, uint64_t at)
{
	int i, found = -1;

	pthread_mutex_lock(&r->lock);
	for (i = 0; i < (int)r->n_log; i++)
		if (strcmp(r->log[i].key, key) == 0 && r->log[i].off <= at &&
		    at < r->log[i].off + r->log[i].len)
			found = found == -1 ? i : -2;
	pthread_mutex_unlock(&r->lock);
	return found;
}

/* A rank reads its parts one after the other, cold (records one by one,
 * shuffled): at most one backend read per record, each chunk read once,
 * every read whole 64 KiB chunks, and every record's chunks but its first
 * and last (which a neighbour in its object may have brought) in ONE
 * read; every byte exact. Before: one read per 64 KiB chunk. The same
 * reads again on a second pass over the parts, after the cache was
 * emptied. */
START_TEST(test_view_one_read_per_record)
{
	struct fixture fx;
	struct rview v;
	struct rplan_seg seg;
	uint8_t touched[OBJS][64] = { { 0 } };
	unsigned p, k, reads, records = 0;
	uint64_t bytes = 0, n;
	int i;

	fx_init(&fx, "viewrec");
	fx_open(&fx, 8, 256 * MIB);
	rview_make(&fx, &v, 3, big_len, 8, 7, 2, 0, 0);
	rview_read_all(&v);
	wait_idle(&fx);
	reads = rec_reads(&fx.rec);
	for (i = 0; i < (int)reads; i++) {
		const struct rec_entry *e = &fx.rec.log[i];

		ck_assert_uint_eq(e->off % UNIT, 0);
		for (k = 0; strcmp(fx.objs[k].key, e->key) != 0; k++)
			;
		ck_assert(e->len % UNIT == 0 ||
			  e->off + e->len == fx.objs[k].size);
	}
	for (p = 0; p < rplan_parts(v.rp); p++) {
		uint64_t off = 0, size = rplan_part_size(v.rp, 0, p);

		for (; off < size; off += seg.len) {
			const struct rindex_object *o;
			const char *key;
			uint64_t first, last;
			int one;

			ck_assert_uint_eq(
				rplan_map(v.rp, 0, p, off, size - off, &seg, 1),
				1);
			records++;
			o = rindex_object_of(v.ri, seg.rec);
			key = fx.objs[o->item].key;
			first = v.ri->rec_off[seg.rec] / UNIT;
			last = (v.ri->rec_off[seg.rec] +
				v.ri->rec_len[seg.rec] - 1) /
			       UNIT;
			one = rec_holder(&fx.rec, key, (first + 1) * UNIT);
			for (n = first; n <= last; n++) {
				i = rec_holder(&fx.rec, key, n * UNIT);
				ck_assert_int_ge(i, 0); /* read, and once */
				if (n > first && n < last)
					ck_assert_int_eq(i, one);
				if (!touched[o->item][n]) {
					touched[o->item][n] = 1;
					bytes +=
						n * UNIT + UNIT <
								fx.objs[o->item]
									.size
							? UNIT
							: fx.objs[o->item].size -
								  n * UNIT;
				}
			}
		}
	}
	ck_assert_uint_le(reads, records);
	ck_assert_uint_eq(stats(&fx).backend_bytes, bytes);
	/* Read again from the start (the next epoch) after the cache was
	 * emptied: the same reads again, although the parts were asked for
	 * to their ends before. */
	ck_assert_int_eq(cache_clear(fx.c), 0);
	rview_read_all(&v);
	wait_idle(&fx);
	ck_assert_uint_eq(rec_reads(&fx.rec), 2 * reads);
	ck_assert_uint_eq(stats(&fx).backend_bytes, 2 * bytes);
	for (i = 0; i < (int)reads; i++)
		ck_assert_uint_eq(rec_count(&fx.rec, fx.rec.log[i].key,
					    fx.rec.log[i].off,
					    fx.rec.log[i].len),
				  2);
	rview_free(&v);
	fx_free(&fx);
}
END_TEST

/* Small records of 3 to 9 KiB. */
static uint64_t small_len(unsigned k, unsigned i)
{
	return 3 * KIB + ((uint64_t)(k * 64 + i) * 2411) % (6 * KIB);
}

/* Records dealt in runs ([records] run_bytes): records next to each other
 * in their object come one after the other in the part, or shuffled
 * within a window of them ([records] window, 1024 by default), and a
 * rank's cold read brings each object's in one read (runs of 1 MiB hold a
 * whole object here; one part: a part's end ends an extent). Before: one
 * read per 64 KiB chunk. */
START_TEST(test_view_runs_merge)
{
	static const uint32_t windows[] = { 0, 1024 };
	struct fixture fx;
	struct rview v;
	unsigned k, w;

	for (w = 0; w < 2; w++) {
		fx_init(&fx, w ? "viewrunswin" : "viewruns");
		fx_open(&fx, 8, 256 * MIB);
		rview_make(&fx, &v, 3, small_len, 64, 5, 1, MIB, windows[w]);
		rview_read_all(&v);
		wait_idle(&fx);
		ck_assert_uint_eq(rec_reads(&fx.rec), 3);
		for (k = 0; k < 3; k++)
			ck_assert_uint_eq(rec_count(&fx.rec, fx.objs[k].key, 0,
						    fx.objs[k].size),
					  1);
		rview_free(&v);
		fx_free(&fx);
	}
}
END_TEST

static Suite *fetch_runs_suite(void)
{
	const struct unit_case cases[] = {
		{ "run_prefetch_join", test_run_prefetch_join },
		{ "run_two_readers", test_run_two_readers },
		{ "run_gaps", test_run_gaps },
		{ "run_fail", test_run_fail },
		{ "run_memory", test_run_memory },
		{ "run_cancel", test_run_cancel },
		{ "view_one_read_per_record", test_view_one_read_per_record },
		{ "view_runs_merge", test_view_runs_merge },
	};

	return unit_suite("fetch_runs", cases,
			  sizeof(cases) / sizeof(cases[0]));
}

int main(void)
{
	return unit_main(fetch_runs_suite(), "/tmp/check_fetch_runs.XXXXXX",
			 root, sizeof(root), NULL);
}
