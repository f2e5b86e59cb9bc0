/*
 * check_cache_derived: objects cut at their own chunk size, and derived
 * (transformed) objects (cache/cache.h: struct cache_object's chunk_size
 * and transform, cache_set_transform(), tc_read_raw()), over a real
 * disk cache in a temp directory and the posix backend over real files.
 *
 * The transform is a real gunzip (zlib) registered by the test, over a
 * gzip file the test writes. It counts its runs; a few variants fail on
 * purpose (an error after some output, a hang until released). Two
 * forked processes on one cache directory show the node's one run
 * (cache/derived_node.c), and its end when the runner is killed.
 *
 * Over 700 lines: every case shares one fixture (a disk cache over a
 * posix source, the registered gunzip and its run counters); splitting
 * the suite would repeat them.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "backends/backend.h"
#include "cache/cache.h"
#include "tests/unit/cache_util.h"
#include "tests/unit/unit.h"

#define MIB (UINT64_C(1) << 20)
#define KIB (UINT64_C(1) << 10)

static const char *root;

struct fixture {
	char src[4096], dir[4096];
	struct backend *be;
	struct cache *c;
};

static void fx_init(struct fixture *fx, const char *name)
{
	memset(fx, 0, sizeof(*fx));
	snprintf(fx->src, sizeof(fx->src), "%s/%s-src", root, name);
	snprintf(fx->dir, sizeof(fx->dir), "%s/%s-cache", root, name);
	ck_assert_int_eq(mkdir(fx->src, 0755), 0);
	ck_assert_int_eq(backend_open(fx->src, NULL, &fx->be), 0);
}

static void fx_open(struct fixture *fx, uint64_t budget, uint64_t chunk)
{
	struct cache_options o = {
		.dir = fx->dir,
		.backend_id = fx->src,
		.size_bytes = budget,
		.chunk_size = chunk,
		.inline_max = 64 * KIB,
		.inline_max_set = true,
	};

	ck_assert_int_eq(cache_open(&o, fx->be, &fx->c), 0);
}

static void fx_close(struct fixture *fx)
{
	cache_free(fx->c);
	fx->c = NULL;
}

static void fx_free(struct fixture *fx)
{
	cache_free(fx->c);
	backend_close(fx->be);
}

/* Deterministic bytes: seed s, position i; runs of a repeated byte make
 * them compressible, as real data is. */
static uint8_t byte_at(unsigned s, uint64_t i)
{
	uint64_t z =
		(i / 7 + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)s * 0xBF58476D;

	z ^= z >> 29;
	return (uint8_t)(z * 0x94D049BB133111EBull >> 56);
}

static uint8_t *make_bytes(unsigned seed, uint64_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	uint64_t i;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < size; i++)
		buf[i] = byte_at(seed, i);
	return buf;
}

static void write_file(struct fixture *fx, const char *name, const void *data,
		       size_t len)
{
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", fx->src, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

/* Writes name holding the gzip of size bytes of seed. */
static void make_gz(struct fixture *fx, const char *name, unsigned seed,
		    uint64_t size)
{
	uint8_t *plain = make_bytes(seed, size);
	uLong cap = compressBound((uLong)size) + 64;
	uint8_t *gz = malloc(cap);
	z_stream zs;

	ck_assert_ptr_nonnull(gz);
	memset(&zs, 0, sizeof(zs));
	ck_assert_int_eq(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8,
				      Z_DEFAULT_STRATEGY),
			 Z_OK);
	zs.next_in = plain;
	zs.avail_in = (uInt)size;
	zs.next_out = gz;
	zs.avail_out = (uInt)cap;
	ck_assert_int_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
	write_file(fx, name, gz, zs.total_out);
	deflateEnd(&zs);
	free(gz);
	free(plain);
}

/* An object as a manifest (and a record index) pins it. */
struct obj {
	struct cache_object o;
	struct backend_stat st;
	char key[256];
};

static void obj_get(struct fixture *fx, const char *name, struct obj *ob)
{
	memset(ob, 0, sizeof(*ob));
	snprintf(ob->key, sizeof(ob->key), "%s", name);
	ck_assert_int_eq(
		fx->be->ops->stat(fx->be, ob->key, strlen(ob->key), &ob->st),
		0);
	ob->o.key = ob->key;
	ob->o.key_len = strlen(ob->key);
	ob->o.etag = ob->st.etag;
	ob->o.etag_len = ob->st.etag_len;
	ob->o.size = ob->st.size;
}

/* The gunzip view of ob: derived size from the "record index". */
static void obj_gunzip(const struct obj *raw, uint64_t derived_size,
		       struct obj *out)
{
	*out = *raw;
	out->o.key = out->key;
	out->o.etag = out->st.etag;
	out->o.transform = "gunzip";
	out->o.source_size = raw->o.size;
	out->o.size = derived_size;
}

/* The producer: zlib over tc_read_raw(). */
struct gunzip {
	int runs;	     /* atomic */
	uint64_t fail_after; /* fail with fail_rc past this many bytes */
	int fail_rc;	     /* 0: never */
	sem_t *started;	     /* posted when a run starts (may be NULL) */
	sem_t *go;	     /* waited for before any output (may be NULL) */
};

static int gunzip_run(void *ctx, struct cache *c,
		      const struct cache_object *raw, cache_sink_fn sink,
		      void *sink_arg)
{
	struct gunzip *g = ctx;
	size_t in_cap = 256 * KIB, out_cap = 100 * KIB + 17;
	uint8_t *in = malloc(in_cap), *out = malloc(out_cap);
	uint64_t off = 0, produced = 0;
	int rc = 0, zr = Z_OK;
	z_stream zs;

	__atomic_add_fetch(&g->runs, 1, __ATOMIC_SEQ_CST);
	if (g->started != NULL)
		sem_post(g->started);
	if (g->go != NULL)
		sem_wait(g->go);
	memset(&zs, 0, sizeof(zs));
	if (in == NULL || out == NULL || inflateInit2(&zs, 15 + 32) != Z_OK) {
		free(in);
		free(out);
		return -ENOMEM;
	}
	while (rc == 0 && zr != Z_STREAM_END) {
		size_t n;

		if (zs.avail_in == 0) {
			ssize_t got = tc_read_raw(c, raw, off, in_cap, in);

			if (got <= 0) {
				rc = got < 0 ? (int)got : -EPIPE;
				break;
			}
			off += (uint64_t)got;
			zs.next_in = in;
			zs.avail_in = (uInt)got;
		}
		zs.next_out = out;
		zs.avail_out = (uInt)out_cap;
		zr = inflate(&zs, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			rc = -EBADMSG;
			break;
		}
		n = out_cap - zs.avail_out;
		if (g->fail_rc != 0 && produced + n > g->fail_after) {
			rc = g->fail_rc;
			break;
		}
		if (n > 0)
			rc = sink(sink_arg, out, n);
		produced += n;
	}
	inflateEnd(&zs);
	free(in);
	free(out);
	return rc;
}

static int runs_of(struct gunzip *g)
{
	return __atomic_load_n(&g->runs, __ATOMIC_SEQ_CST);
}

static struct cache_stats stats(struct fixture *fx)
{
	struct cache_stats s;

	cache_stats_get(fx->c, &s);
	return s;
}

static uint64_t entries(struct fixture *fx)
{
	struct cache_info in;

	stats(fx); /* waits for the queued rows */
	ck_assert_int_eq(cache_info(fx->c, &in), 0);
	return in.entries;
}

static void print_bad(void *arg, const struct cache_bad_entry *b)
{
	(void)arg;
	fprintf(stderr, "bad entry %s: %s (key %s, chunk %llu)\n", b->hash_hex,
		b->reason, b->key, (unsigned long long)b->chunk);
}

static void verify_clean(struct fixture *fx)
{
	uint64_t checked;

	ck_assert_int_eq(cache_verify(fx->c, print_bad, NULL, &checked), 0);
}

/* Flips a byte in the first blob file of the cache: a damaged entry. */
static void damage_a_blob(struct fixture *fx)
{
	char cmd[4400], path[4400];
	uint8_t b;
	FILE *p;
	int fd;

	snprintf(cmd, sizeof(cmd),
		 "find '%s/blobs' -mindepth 2 -type f ! -path '*/blobs/tmp/*' "
		 "| head -1",
		 fx->dir);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(path, sizeof(path), p));
	pclose(p);
	path[strcspn(path, "\n")] = '\0';
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, 1000), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, 1000), 1);
	close(fd);
}

struct bad_seen {
	int n;
	char key[64];
};

static void note_bad(void *arg, const struct cache_bad_entry *b)
{
	struct bad_seen *s = arg;

	s->n++;
	snprintf(s->key, sizeof(s->key), "%s", b->key);
}

/* Reads [off, off + len) of ob and checks it against seed. */
static void read_check(struct cache *c, const struct cache_object *o,
		       unsigned seed, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len ? len : 1);
	size_t want = off >= o->size	    ? 0
		      : o->size - off < len ? (size_t)(o->size - off)
					    : len;
	ssize_t got;
	size_t i;

	ck_assert_ptr_nonnull(buf);
	got = tc_read(c, o, off, len, buf);
	ck_assert_int_eq(got, (ssize_t)want);
	for (i = 0; i < want; i++)
		if (buf[i] != byte_at(seed, off + i))
			ck_abort_msg("%s: byte %llu differs", o->key,
				     (unsigned long long)(off + i));
	free(buf);
}

/* ---- A: an object's own chunk size ---- */

START_TEST(test_small_chunks_fetch_little)
{
	uint64_t size = 16 * MIB, before;
	struct fixture fx;
	struct obj big, small;
	struct cache_stats s;
	uint8_t *data = make_bytes(3, size);

	fx_init(&fx, "small");
	write_file(&fx, "big", data, size);
	free(data);
	obj_get(&fx, "big", &big);
	fx_open(&fx, 256 * MIB, 0); /* the default: 8 MiB chunks */
	small = big;
	small.o.key = small.key;
	small.o.etag = small.st.etag;
	small.o.chunk_size = CACHE_CRC_BLOCK;

	/* 100 bytes of a record at 5 MiB: one 64 KiB block, not 8 MiB. */
	read_check(fx.c, &small.o, 3, 5 * MIB, 100);
	s = stats(&fx);
	fprintf(stderr,
		"small chunks: 100 bytes at 5 MiB fetched %llu bytes "
		"in %llu reads\n",
		(unsigned long long)s.backend_bytes,
		(unsigned long long)s.backend_reads);
	ck_assert_uint_le(s.backend_bytes, 128 * KIB);
	/* Across a block boundary: two blocks. */
	read_check(fx.c, &small.o, 3, 7 * MIB - 50, 100);
	ck_assert_uint_le(stats(&fx).backend_bytes, 128 * KIB + 128 * KIB);
	before = stats(&fx).backend_bytes;
	read_check(fx.c, &small.o, 3, 5 * MIB, 100); /* a hit now */
	ck_assert_uint_eq(stats(&fx).backend_bytes, before);

	/* The same object at the cache's chunk size: the same bytes, its
	 * own entries (a whole 8 MiB chunk fetched). */
	read_check(fx.c, &big.o, 3, 5 * MIB, 100);
	fprintf(stderr,
		"cache chunks (as before this change): the same 100 bytes "
		"fetched %llu bytes\n",
		(unsigned long long)(stats(&fx).backend_bytes - before));
	ck_assert_uint_eq(stats(&fx).backend_bytes, before + 8 * MIB);
	read_check(fx.c, &small.o, 3, 5 * MIB + 1000, 5000);
	read_check(fx.c, &big.o, 3, 5 * MIB + 1000, 5000);
	ck_assert_uint_eq(stats(&fx).backend_bytes, before + 8 * MIB);
	verify_clean(&fx);

	/* Survives a restart, each size its own (the 8 MiB chunk, retained
	 * in the engine until read whole, is stored when the engine lets it
	 * go: at the latest at cache_free()). */
	fx_close(&fx);
	fx_open(&fx, 256 * MIB, 0);
	ck_assert_uint_eq(entries(&fx), 3 + 1);
	read_check(fx.c, &small.o, 3, 7 * MIB - 50, 100);
	read_check(fx.c, &big.o, 3, 0, 4096);
	ck_assert_uint_eq(stats(&fx).backend_bytes, 0);
	fx_free(&fx);
}
END_TEST

START_TEST(test_small_chunks_many)
{
	uint64_t size = 3 * MIB + 12345;
	struct fixture fx;
	struct obj ob;
	uint8_t *data = make_bytes(4, size);
	struct tc_file *f;
	uint8_t buf[4096];

	fx_init(&fx, "many");
	write_file(&fx, "f", data, size);
	free(data);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 256 * MIB, MIB);
	ob.o.chunk_size = 2 * CACHE_CRC_BLOCK;
	/* The whole object, across 25 chunks, and its short tail. */
	read_check(fx.c, &ob.o, 4, 0, (size_t)size);
	ck_assert_uint_eq(stats(&fx).backend_bytes, size);
	read_check(fx.c, &ob.o, 4, size - 100, 4096);
	ck_assert_uint_eq(entries(&fx), (size + 128 * KIB - 1) / (128 * KIB));
	/* Through an open file. */
	ck_assert_int_eq(tc_file_open(fx.c, &ob.o, &f), 0);
	ck_assert_int_eq(tc_file_read(f, 200000, sizeof(buf), buf),
			 sizeof(buf));
	ck_assert_uint_eq(buf[0], byte_at(4, 200000));
	ck_assert_int_eq(tc_file_ready(f, 131072 + 10, 100, buf), 100);
	ck_assert_uint_eq(buf[99], byte_at(4, 131072 + 109));
	tc_file_close(f);
	ck_assert_uint_eq(stats(&fx).backend_bytes, size);
	verify_clean(&fx);
	fx_free(&fx);
}
END_TEST

START_TEST(test_small_chunks_coalesced)
{
	uint64_t size = 2 * MIB;
	struct fixture fx;
	struct obj ob;
	struct cache_stats s;
	uint8_t *data = make_bytes(6, size);

	fx_init(&fx, "coalesce");
	write_file(&fx, "f", data, size);
	free(data);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 256 * MIB, MIB);
	ob.o.chunk_size = CACHE_CRC_BLOCK;
	/* 300 KiB from 10 KiB: blocks 0..4, all missing: one read. */
	read_check(fx.c, &ob.o, 6, 10 * KIB, 300 * KIB);
	s = stats(&fx);
	ck_assert_uint_eq(s.backend_reads, 1);
	ck_assert_uint_eq(s.backend_bytes, 5 * CACHE_CRC_BLOCK);
	ck_assert_uint_eq(entries(&fx), 5);
	/* Stored as five chunks: each one a hit now. */
	read_check(fx.c, &ob.o, 6, 3 * CACHE_CRC_BLOCK + 5, 1000);
	read_check(fx.c, &ob.o, 6, 0, 5 * CACHE_CRC_BLOCK);
	ck_assert_uint_eq(stats(&fx).backend_reads, 1);
	/* Blocks 4..6, one of them stored: the two missing ones, next to
	 * each other, in one read. */
	read_check(fx.c, &ob.o, 6, 4 * CACHE_CRC_BLOCK + 7,
		   2 * CACHE_CRC_BLOCK + 9);
	s = stats(&fx);
	ck_assert_uint_eq(s.backend_reads, 2);
	ck_assert_uint_eq(s.backend_bytes, 7 * CACHE_CRC_BLOCK);
	verify_clean(&fx);
	fx_free(&fx);
}
END_TEST

/* cache_prefetch_range() queues exactly the chunks of the range that are
 * missing: they are then stored (bounded wait) and a read of the range is
 * served without a backend read. */
START_TEST(test_prefetch_range)
{
	uint64_t size = 2 * MIB;
	struct fixture fx;
	struct obj ob;
	struct cache_stats s;
	uint8_t *data = make_bytes(8, size);
	int i;

	fx_init(&fx, "pfrange");
	write_file(&fx, "f", data, size);
	free(data);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 256 * MIB, MIB);
	ob.o.chunk_size = CACHE_CRC_BLOCK;
	/* Blocks 2..5 of [2 blocks + 100, 6 blocks - 1). */
	ck_assert_int_eq(cache_prefetch_range(fx.c, &ob.o,
					      2 * CACHE_CRC_BLOCK + 100,
					      4 * CACHE_CRC_BLOCK - 101),
			 0);
	for (i = 0; i < 1000 && entries(&fx) < 4; i++)
		usleep(10 * 1000); /* bounded: 10 s */
	ck_assert_uint_eq(entries(&fx), 4);
	s = stats(&fx);
	ck_assert_uint_eq(s.prefetch_issued, 4);
	ck_assert_uint_eq(s.backend_bytes, 4 * CACHE_CRC_BLOCK);
	read_check(fx.c, &ob.o, 8, 2 * CACHE_CRC_BLOCK, 4 * CACHE_CRC_BLOCK);
	ck_assert_uint_eq(stats(&fx).backend_reads, s.backend_reads);
	/* Asked again: nothing is queued twice. */
	ck_assert_int_eq(cache_prefetch_range(fx.c, &ob.o, 2 * CACHE_CRC_BLOCK,
					      4 * CACHE_CRC_BLOCK),
			 0);
	ck_assert_uint_eq(stats(&fx).prefetch_issued, 4);
	/* Past the end, and a pass-through cache: nothing, no error. */
	ck_assert_int_eq(cache_prefetch_range(fx.c, &ob.o, size, MIB), 0);
	verify_clean(&fx);
	fx_free(&fx);
}
END_TEST

START_TEST(test_bad_chunk_size)
{
	struct fixture fx;
	struct obj ob;
	uint8_t *data = make_bytes(5, 300000), buf[16];
	uint64_t fetched;

	fx_init(&fx, "badsize");
	write_file(&fx, "f", data, 300000);
	free(data);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 256 * MIB, MIB);
	ob.o.chunk_size = 1000; /* not a multiple of a CRC block */
	ck_assert_int_eq(tc_read(fx.c, &ob.o, 0, sizeof(buf), buf), -EINVAL);
	ck_assert_int_eq(tc_fill(fx.c, &ob.o, &fetched), -EINVAL);
	ob.o.chunk_size = 2 * MIB; /* over the cache's */
	ck_assert_int_eq(tc_read(fx.c, &ob.o, 0, sizeof(buf), buf), -EINVAL);
	ob.o.chunk_size = MIB; /* the cache's own: fine */
	read_check(fx.c, &ob.o, 5, 0, 300000);
	fx_free(&fx);
}
END_TEST

/* ---- B: derived objects ---- */

/* A gzip of seed 7, its raw and gunzip objects, in a cache of 1 MiB
 * chunks with the producer registered. */
#define GZ_SEED 7
#define GZ_SIZE (3 * MIB + 54321)

static void gz_setup(struct fixture *fx, const char *name, uint64_t budget,
		     struct gunzip *g, struct obj *raw, struct obj *der)
{
	fx_init(fx, name);
	make_gz(fx, "d.gz", GZ_SEED, GZ_SIZE);
	obj_get(fx, "d.gz", raw);
	obj_gunzip(raw, GZ_SIZE, der);
	fx_open(fx, budget, MIB);
	ck_assert_int_eq(cache_set_transform(fx->c, "gunzip", gunzip_run, g),
			 0);
}

START_TEST(test_derived_exact)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der;
	struct cache_stats s;
	unsigned seed = 1, i;

	gz_setup(&fx, "exact", 256 * MIB, &g, &raw, &der);
	for (i = 0; i < 60; i++) {
		uint64_t off = (uint64_t)rand_r(&seed) % (GZ_SIZE + 1000);
		size_t len = (size_t)(rand_r(&seed) % (300 * KIB)) + 1;

		read_check(fx.c, &der.o, GZ_SEED, off, len);
	}
	read_check(fx.c, &der.o, GZ_SEED, 0, GZ_SIZE);
	ck_assert_int_eq(runs_of(&g), 1);
	s = stats(&fx);
	ck_assert_uint_eq(s.derived_runs, 1);
	ck_assert_uint_eq(s.derived_bytes, GZ_SIZE);
	/* The source was read once, and not kept: 4 derived chunks only. */
	ck_assert_uint_eq(s.backend_bytes, raw.o.size);
	ck_assert_uint_eq(entries(&fx), 4);
	ck_assert_uint_eq(s.live_bytes, GZ_SIZE);
	ck_assert_uint_gt(s.hits, 0);
	verify_clean(&fx);

	/* A damaged derived chunk: verify names it, a read drops it and
	 * produces the object again. */
	{
		struct bad_seen bad = { 0 };
		uint64_t checked;

		damage_a_blob(&fx);
		ck_assert_int_eq(cache_verify(fx.c, note_bad, &bad, &checked),
				 1);
		ck_assert_uint_eq(checked, 4);
		ck_assert_str_eq(bad.key, "d.gz");
		read_check(fx.c, &der.o, GZ_SEED, 0, GZ_SIZE);
		ck_assert_uint_eq(stats(&fx).crc_failures, 1);
		ck_assert_int_eq(runs_of(&g), 2);
		verify_clean(&fx);
	}
	fx_free(&fx);
}
END_TEST

struct reader {
	struct fixture *fx;
	const struct cache_object *o;
	unsigned seed;
	int expect_rc; /* 0: bytes; else this error from every read */
	int bad;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint8_t *buf = malloc(400 * KIB);
	int i;

	for (i = 0; buf != NULL && i < 40; i++) {
		uint64_t off = (uint64_t)rand_r(&r->seed) % GZ_SIZE;
		size_t len = (size_t)(rand_r(&r->seed) % (400 * KIB)) + 1;
		size_t want =
			GZ_SIZE - off < len ? (size_t)(GZ_SIZE - off) : len;
		ssize_t got = tc_read(r->fx->c, r->o, off, len, buf);
		size_t k;

		if (r->expect_rc != 0) {
			if (got != r->expect_rc)
				r->bad++;
			continue;
		}
		if (got != (ssize_t)want) {
			r->bad++;
			continue;
		}
		for (k = 0; k < want; k++)
			if (buf[k] != byte_at(GZ_SEED, off + k)) {
				r->bad++;
				break;
			}
	}
	free(buf);
	return NULL;
}

static void run_readers(struct fixture *fx, const struct cache_object *o,
			int expect_rc)
{
	struct reader r[8];
	pthread_t t[8];
	size_t i;

	for (i = 0; i < ARRAY_LEN(r); i++) {
		r[i] = (struct reader){ fx, o, (unsigned)i * 77 + 1, expect_rc,
					0 };
		ck_assert_int_eq(
			pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
	}
	for (i = 0; i < ARRAY_LEN(r); i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(r[i].bad, 0);
	}
}

START_TEST(test_derived_threads_once)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der;

	gz_setup(&fx, "threads", 256 * MIB, &g, &raw, &der);
	run_readers(&fx, &der.o, 0);
	ck_assert_int_eq(runs_of(&g), 1);
	ck_assert_uint_eq(stats(&fx).derived_runs, 1);
	verify_clean(&fx);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_survives_restart)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der;
	struct tc_file *f;
	struct cache_stats s;
	uint8_t buf[5000];

	gz_setup(&fx, "restart", 256 * MIB, &g, &raw, &der);
	read_check(fx.c, &der.o, GZ_SEED, 100, 10);
	ck_assert_int_eq(runs_of(&g), 1);
	fx_close(&fx);
	fx_open(&fx, 256 * MIB, MIB);
	ck_assert_int_eq(cache_set_transform(fx.c, "gunzip", gunzip_run, &g),
			 0);
	read_check(fx.c, &der.o, GZ_SEED, 0, GZ_SIZE);
	ck_assert_int_eq(tc_file_open(fx.c, &der.o, &f), 0);
	ck_assert_int_eq(tc_file_read(f, MIB - 10, sizeof(buf), buf),
			 sizeof(buf));
	ck_assert_uint_eq(buf[0], byte_at(GZ_SEED, MIB - 10));
	ck_assert_int_eq(tc_file_ready(f, 2 * MIB, 100, buf), 100);
	ck_assert_uint_eq(buf[0], byte_at(GZ_SEED, 2 * MIB));
	tc_file_close(f);
	s = stats(&fx);
	ck_assert_int_eq(runs_of(&g), 1);
	ck_assert_uint_eq(s.derived_runs, 0);
	ck_assert_uint_eq(s.backend_reads, 0);
	verify_clean(&fx);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_error_to_all)
{
	struct gunzip g = { .fail_after = MIB + MIB / 2, .fail_rc = -EPROTO };
	struct fixture fx;
	struct obj raw, der;
	uint8_t b;

	gz_setup(&fx, "error", 256 * MIB, &g, &raw, &der);
	run_readers(&fx, &der.o, -EPROTO);
	ck_assert_int_ge(runs_of(&g), 1);
	ck_assert_uint_eq(stats(&fx).derived_runs, (uint64_t)runs_of(&g));
	/* Nothing of it stored, though a whole chunk passed. */
	ck_assert_uint_eq(entries(&fx), 0);
	ck_assert_uint_eq(stats(&fx).live_bytes, 0);
	ck_assert_int_eq(tc_read(fx.c, &der.o, 10, 1, &b), -EPROTO);
	/* Fixed: served. */
	g.fail_rc = 0;
	read_check(fx.c, &der.o, GZ_SEED, 0, GZ_SIZE);
	verify_clean(&fx);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_wrong_length)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der, longer, shorter;
	uint8_t buf[100];
	uint64_t fetched;

	gz_setup(&fx, "length", 256 * MIB, &g, &raw, &der);
	obj_gunzip(&raw, GZ_SIZE + 1, &longer);
	obj_gunzip(&raw, GZ_SIZE - 1, &shorter);
	ck_assert_int_eq(tc_read(fx.c, &longer.o, 0, sizeof(buf), buf), -EIO);
	ck_assert_int_eq(tc_read(fx.c, &shorter.o, 0, sizeof(buf), buf), -EIO);
	ck_assert_int_eq(tc_fill(fx.c, &shorter.o, &fetched), -EIO);
	ck_assert_int_eq(runs_of(&g), 3);
	/* Nothing served from what those runs stored either. */
	ck_assert_uint_eq(entries(&fx), 0);
	ck_assert_int_eq(tc_read(fx.c, &shorter.o, 0, sizeof(buf), buf), -EIO);
	ck_assert_int_eq(runs_of(&g), 4);
	read_check(fx.c, &der.o, GZ_SEED, 0, GZ_SIZE);
	ck_assert_int_eq(runs_of(&g), 5);
	verify_clean(&fx);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_evicted_reruns)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der;
	struct cache_stats s;
	uint64_t n;

	/* 2.5 MiB cannot hold the 3.05 MiB derived object. */
	gz_setup(&fx, "evict", 5 * MIB / 2, &g, &raw, &der);
	read_check(fx.c, &der.o, GZ_SEED, 0, 100);
	ck_assert_int_eq(runs_of(&g), 1);
	/* Indexed (no longer served from the committer's queue), and so
	 * evicted down to the budget. */
	ck_assert_uint_le(stats(&fx).live_bytes, 5 * MIB / 2);
	for (n = 0; n < 4; n++)
		read_check(fx.c, &der.o, GZ_SEED, n * MIB, 1000);
	ck_assert_int_ge(runs_of(&g), 2);
	s = stats(&fx);
	ck_assert_uint_le(s.live_bytes, 5 * MIB / 2);
	ck_assert_uint_gt(s.evictions, 0);
	verify_clean(&fx);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_and_raw_coexist)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der, der_small;
	uint8_t *gz, *buf;
	char path[4200];
	FILE *f;

	gz_setup(&fx, "coexist", 256 * MIB, &g, &raw, &der);
	der_small = der;
	der_small.o.key = der_small.key;
	der_small.o.etag = der_small.st.etag;
	der_small.o.chunk_size = 4 * CACHE_CRC_BLOCK;
	/* The raw gzip bytes, cached as themselves. */
	gz = malloc(raw.o.size);
	buf = malloc(raw.o.size);
	ck_assert_ptr_nonnull(gz);
	ck_assert_ptr_nonnull(buf);
	snprintf(path, sizeof(path), "%s/d.gz", fx.src);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(gz, 1, raw.o.size, f), raw.o.size);
	fclose(f);
	ck_assert_int_eq(tc_read(fx.c, &raw.o, 0, raw.o.size, buf),
			 (ssize_t)raw.o.size);
	ck_assert_int_eq(memcmp(gz, buf, raw.o.size), 0);
	read_check(fx.c, &der.o, GZ_SEED, 0, GZ_SIZE);
	read_check(fx.c, &der_small.o, GZ_SEED, 2 * MIB + 5, 70000);
	ck_assert_int_eq(runs_of(&g), 2); /* each chunk size its own run */
	ck_assert_int_eq(tc_read(fx.c, &raw.o, 0, raw.o.size, buf),
			 (ssize_t)raw.o.size);
	ck_assert_int_eq(memcmp(gz, buf, raw.o.size), 0);
	/* raw: ceil(size / 1 MiB); derived: 4; derived at 256 KiB: 13. */
	ck_assert_uint_eq(entries(&fx),
			  (raw.o.size + MIB - 1) / MIB + 4 +
				  (GZ_SIZE + 256 * KIB - 1) / (256 * KIB));
	verify_clean(&fx);
	free(gz);
	free(buf);
	fx_free(&fx);
}
END_TEST

static int reply_copy(void *arg, const struct cache_piece *p, unsigned n)
{
	uint8_t *dst = arg;
	unsigned i;

	for (i = 0; i < n; i++) {
		ck_assert_ptr_nonnull(p[i].mem);
		memcpy(dst, p[i].mem, p[i].len);
		dst += p[i].len;
	}
	return 0;
}

START_TEST(test_derived_reply_and_fill)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der;
	struct tc_file *f;
	uint8_t buf[200000];
	uint64_t fetched, i;

	gz_setup(&fx, "reply", 256 * MIB, &g, &raw, &der);
	ck_assert_int_eq(tc_fill(fx.c, &der.o, &fetched), 0);
	ck_assert_uint_eq(fetched, GZ_SIZE);
	ck_assert_int_eq(tc_fill(fx.c, &der.o, &fetched), 0);
	ck_assert_uint_eq(fetched, 0);
	ck_assert_int_eq(runs_of(&g), 1);
	ck_assert_int_eq(tc_file_open(fx.c, &der.o, &f), 0);
	ck_assert_int_eq(
		tc_file_reply(f, MIB - 1000, sizeof(buf), reply_copy, buf),
		sizeof(buf));
	for (i = 0; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], byte_at(GZ_SEED, MIB - 1000 + i));
	tc_file_close(f);
	ck_assert_int_eq(runs_of(&g), 1);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_not_read_ahead)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der;
	struct tc_file *f;
	uint8_t *buf = malloc(MIB);
	uint64_t off;

	ck_assert_ptr_nonnull(buf);
	gz_setup(&fx, "ahead", 256 * MIB, &g, &raw, &der);
	/* Sequential reads, which read a plain file ahead. */
	ck_assert_int_eq(tc_file_open(fx.c, &der.o, &f), 0);
	for (off = 0; off < 3 * MIB; off += 128 * KIB)
		ck_assert_int_eq(tc_file_read(f, off, 128 * KIB, buf),
				 128 * KIB);
	tc_file_close(f);
	ck_assert_uint_eq(stats(&fx).prefetch_issued, 0);
	ck_assert_int_eq(runs_of(&g), 1);
	free(buf);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_unsupported)
{
	struct gunzip g = { 0 };
	struct fixture fx;
	struct obj raw, der;
	struct cache *pass;
	uint8_t b;

	fx_init(&fx, "unsup");
	make_gz(&fx, "d.gz", GZ_SEED, 100000);
	obj_get(&fx, "d.gz", &raw);
	obj_gunzip(&raw, 100000, &der);
	/* No disk cache: no derived objects. */
	ck_assert_int_eq(cache_new(fx.be, &pass), 0);
	ck_assert_int_eq(cache_set_transform(pass, "gunzip", gunzip_run, &g),
			 0);
	ck_assert_int_eq(tc_read(pass, &der.o, 0, 1, &b), -EOPNOTSUPP);
	cache_free(pass);
	/* A disk cache without the producer. */
	fx_open(&fx, 256 * MIB, MIB);
	ck_assert_int_eq(tc_read(fx.c, &der.o, 0, 1, &b), -EOPNOTSUPP);
	ck_assert_int_eq(tc_read_raw(fx.c, &der.o, 0, 1, &b), -EINVAL);
	ck_assert_int_eq(cache_set_transform(fx.c, "", gunzip_run, &g),
			 -EINVAL);
	ck_assert_int_eq(runs_of(&g), 0);
	fx_free(&fx);
}
END_TEST

struct hung_reader {
	struct fixture *fx;
	const struct cache_object *o;
	ssize_t got;
};

static void *hung_main(void *arg)
{
	struct hung_reader *h = arg;
	uint8_t buf[1000];

	h->got = tc_read(h->fx->c, h->o, 0, sizeof(buf), buf);
	return NULL;
}

START_TEST(test_derived_wait_bounded)
{
	struct cache_fetch_options fo = { .wait_ms = 300 };
	sem_t started, go;
	struct gunzip g = { .started = &started, .go = &go };
	struct hung_reader h;
	struct tc_file *f;
	struct fixture fx;
	struct obj raw, der;
	pthread_t t;
	uint8_t b;

	ck_assert_int_eq(sem_init(&started, 0, 0), 0);
	ck_assert_int_eq(sem_init(&go, 0, 0), 0);
	gz_setup(&fx, "hang", 256 * MIB, &g, &raw, &der);
	cache_set_fetch_options(fx.c, &fo);
	h = (struct hung_reader){ &fx, &der.o, 0 };
	ck_assert_int_eq(pthread_create(&t, NULL, hung_main, &h), 0);
	sem_wait(&started); /* the run is in the table, producing nothing */
	/* This read waits for that run, and gives up after 300 ms. */
	ck_assert_int_eq(tc_read(fx.c, &der.o, 2 * MIB, 1, &b), -EIO);
	/* Only what is stored, never a run's: not there yet. */
	ck_assert_int_eq(tc_file_open(fx.c, &der.o, &f), 0);
	ck_assert_int_eq(tc_file_ready(f, 0, 1, &b), -ENOENT);
	sem_post(&go);
	pthread_join(t, NULL);
	ck_assert_int_eq(h.got, 1000);
	ck_assert_int_eq(runs_of(&g), 1);
	g.started = NULL;
	read_check(fx.c, &der.o, GZ_SEED, 2 * MIB, 1);
	ck_assert_int_eq(tc_file_ready(f, 0, 1, &b), 1);
	ck_assert_uint_eq(b, byte_at(GZ_SEED, 0));
	tc_file_close(f);
	ck_assert_int_eq(runs_of(&g), 1);
	fx_free(&fx);
	sem_destroy(&started);
	sem_destroy(&go);
}
END_TEST

/* ---- one run per node: two processes on one cache directory ---- */

/* A producer for a child process: counts its run in a file shared by the
 * processes (one byte each, O_APPEND), says on started_fd that it runs,
 * waits for a byte on go_fd before any output (-1: neither), then is
 * gunzip_run(). */
struct node_gunzip {
	struct gunzip g;
	int runs_fd, started_fd, go_fd;
};

static int node_gunzip_run(void *ctx, struct cache *c,
			   const struct cache_object *raw, cache_sink_fn sink,
			   void *sink_arg)
{
	struct node_gunzip *n = ctx;
	char b = 'r';

	if (write(n->runs_fd, &b, 1) != 1)
		return -EIO;
	if (n->started_fd >= 0 && write(n->started_fd, &b, 1) != 1)
		return -EIO;
	if (n->go_fd >= 0 && read(n->go_fd, &b, 1) != 1)
		return -EIO;
	return gunzip_run(&n->g, c, raw, sink, sink_arg);
}

/* The child: opens its own backend and cache on fx's directories, says
 * on reading_fd (if not -1) that it starts reading, reads der whole and
 * checks every byte. Never returns: exit status 0 (right bytes) or 1. No
 * ck_assert here: it is another process. */
static void node_child(const struct fixture *fx, const struct obj *der,
		       struct node_gunzip *n, int reading_fd)
{
	struct cache_options o = {
		.dir = fx->dir,
		.backend_id = fx->src,
		.size_bytes = 256 * MIB,
		.chunk_size = MIB,
		.inline_max = 64 * KIB,
		.inline_max_set = true,
	};
	struct obj d = *der;
	struct backend *be = NULL;
	struct cache *c = NULL;
	uint8_t *buf = malloc(GZ_SIZE);
	char b = 'r';
	int bad = 1;
	uint64_t i;

	/* A parent that failed (and holds the pipes' other ends) leaves no
	 * child waiting on them for long. */
	alarm(60);
	d.o.key = d.key;
	d.o.etag = d.st.etag;
	if (buf == NULL || backend_open(fx->src, NULL, &be) != 0 ||
	    cache_open(&o, be, &c) != 0 ||
	    cache_set_transform(c, "gunzip", node_gunzip_run, n) != 0)
		_exit(1);
	if (reading_fd >= 0 && write(reading_fd, &b, 1) != 1)
		_exit(1);
	if (tc_read(c, &d.o, 0, GZ_SIZE, buf) == (ssize_t)GZ_SIZE) {
		for (i = 0; i < GZ_SIZE && buf[i] == byte_at(GZ_SEED, i); i++)
			;
		bad = i != GZ_SIZE;
	}
	cache_free(c);
	backend_close(be);
	free(buf);
	_exit(bad);
}

/* The parent's side of two children reading der at once: the first
 * child's run starts and holds (its producer waits for go); the second
 * starts reading then; 300 ms later the first is let go (kill: killed
 * instead). Returns the runs counted, and each child's status. */
static int node_pair(struct fixture *fx, const struct obj *der, bool kill1,
		     int *st1, int *st2)
{
	int started[2], go[2], reading[2], runs_fd;
	char path[4200], b;
	pid_t p1, p2;
	struct stat st;

	snprintf(path, sizeof(path), "%s/runs", fx->src);
	runs_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0600);
	ck_assert_int_ge(runs_fd, 0);
	ck_assert_int_eq(pipe(started), 0);
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(reading), 0);
	p1 = fork();
	ck_assert_int_ge(p1, 0);
	if (p1 == 0) {
		struct node_gunzip n = { .runs_fd = runs_fd,
					 .started_fd = started[1],
					 .go_fd = go[0] };

		node_child(fx, der, &n, -1);
	}
	ck_assert_int_eq(read(started[0], &b, 1), 1); /* its run holds */
	p2 = fork();
	ck_assert_int_ge(p2, 0);
	if (p2 == 0) {
		struct node_gunzip n = { .runs_fd = runs_fd,
					 .started_fd = -1,
					 .go_fd = -1 };

		node_child(fx, der, &n, reading[1]);
	}
	ck_assert_int_eq(read(reading[0], &b, 1), 1);
	/* Not for the verdict: lets the second reach its wait. Whether it
	 * did or not, one run (two with kill1) is the only right count. */
	usleep(300 * 1000);
	if (kill1)
		ck_assert_int_eq(kill(p1, SIGKILL), 0);
	else
		ck_assert_int_eq(write(go[1], "g", 1), 1);
	ck_assert_int_eq(waitpid(p1, st1, 0), p1);
	ck_assert_int_eq(waitpid(p2, st2, 0), p2);
	ck_assert_int_eq(fstat(runs_fd, &st), 0);
	close(runs_fd);
	close(started[0]);
	close(started[1]);
	close(go[0]);
	close(go[1]);
	close(reading[0]);
	close(reading[1]);
	return (int)st.st_size;
}

static void node_setup(struct fixture *fx, const char *name, struct obj *raw,
		       struct obj *der)
{
	fx_init(fx, name);
	make_gz(fx, "d.gz", GZ_SEED, GZ_SIZE);
	obj_get(fx, "d.gz", raw);
	obj_gunzip(raw, GZ_SIZE, der);
}

START_TEST(test_derived_processes_once)
{
	struct fixture fx;
	struct obj raw, der;
	struct stat st;
	char path[4200];
	int st1, st2;

	node_setup(&fx, "procs", &raw, &der);
	/* The second process waits for the first one's run and reads what
	 * it stored: one run on the node. */
	ck_assert_int_eq(node_pair(&fx, &der, false, &st1, &st2), 1);
	ck_assert(WIFEXITED(st1) && WEXITSTATUS(st1) == 0);
	ck_assert(WIFEXITED(st2) && WEXITSTATUS(st2) == 0);
	/* One lock file for every object, owner-only. */
	snprintf(path, sizeof(path), "%s/derived.lock", fx.dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_processes_kill)
{
	struct fixture fx;
	struct obj raw, der;
	int st1, st2;

	node_setup(&fx, "prockill", &raw, &der);
	/* The first is killed holding its run: its lock goes with it, and
	 * the second, waiting for it, runs the object itself. */
	ck_assert_int_eq(node_pair(&fx, &der, true, &st1, &st2), 2);
	ck_assert(WIFSIGNALED(st1) && WTERMSIG(st1) == SIGKILL);
	ck_assert(WIFEXITED(st2) && WEXITSTATUS(st2) == 0);
	fx_free(&fx);
}
END_TEST

START_TEST(test_derived_processes_wait_bounded)
{
	struct cache_fetch_options fo = { .wait_ms = 300 };
	struct fixture fx;
	struct obj raw, der;
	int started[2], go[2], runs_fd, st;
	char path[4200], b;
	uint8_t byte;
	pid_t p1;

	node_setup(&fx, "procwait", &raw, &der);
	snprintf(path, sizeof(path), "%s/runs", fx.src);
	runs_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0600);
	ck_assert_int_ge(runs_fd, 0);
	ck_assert_int_eq(pipe(started), 0);
	ck_assert_int_eq(pipe(go), 0);
	p1 = fork();
	ck_assert_int_ge(p1, 0);
	if (p1 == 0) {
		struct node_gunzip n = { .runs_fd = runs_fd,
					 .started_fd = started[1],
					 .go_fd = go[0] };

		node_child(&fx, &der, &n, -1);
	}
	ck_assert_int_eq(read(started[0], &b, 1), 1); /* its run holds */
	/* This process waits for that run, which stores nothing: -EIO after
	 * the wait bound, not a hang, and no run of its own. */
	fx_open(&fx, 256 * MIB, MIB);
	cache_set_fetch_options(fx.c, &fo);
	{
		struct gunzip g = { 0 };

		ck_assert_int_eq(
			cache_set_transform(fx.c, "gunzip", gunzip_run, &g), 0);
		ck_assert_int_eq(tc_read(fx.c, &der.o, 0, 1, &byte), -EIO);
		ck_assert_int_eq(runs_of(&g), 0);
		/* Let go: the first stores it, and this one reads it. */
		ck_assert_int_eq(write(go[1], "g", 1), 1);
		ck_assert_int_eq(waitpid(p1, &st, 0), p1);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		read_check(fx.c, &der.o, GZ_SEED, 0, GZ_SIZE);
		ck_assert_int_eq(runs_of(&g), 0);
	}
	close(runs_fd);
	close(started[0]);
	close(started[1]);
	close(go[0]);
	close(go[1]);
	fx_free(&fx);
}
END_TEST

static Suite *cache_derived_suite(void)
{
	const struct unit_case cases[] = {
		{ "small_chunks_fetch_little", test_small_chunks_fetch_little },
		{ "small_chunks_many", test_small_chunks_many },
		{ "small_chunks_coalesced", test_small_chunks_coalesced },
		{ "prefetch_range", test_prefetch_range },
		{ "bad_chunk_size", test_bad_chunk_size },
		{ "derived_exact", test_derived_exact },
		{ "derived_threads_once", test_derived_threads_once },
		{ "derived_survives_restart", test_derived_survives_restart },
		{ "derived_error_to_all", test_derived_error_to_all },
		{ "derived_wrong_length", test_derived_wrong_length },
		{ "derived_evicted_reruns", test_derived_evicted_reruns },
		{ "derived_and_raw_coexist", test_derived_and_raw_coexist },
		{ "derived_reply_and_fill", test_derived_reply_and_fill },
		{ "derived_not_read_ahead", test_derived_not_read_ahead },
		{ "derived_unsupported", test_derived_unsupported },
		{ "derived_wait_bounded", test_derived_wait_bounded },
		{ "derived_processes_once", test_derived_processes_once },
		{ "derived_processes_kill", test_derived_processes_kill },
		{ "derived_processes_wait_bounded",
		  test_derived_processes_wait_bounded },
	};

	return unit_suite("cache_derived", cases, ARRAY_LEN(cases));
}

int main(void)
{
	static char dir[64];

	root = dir; /* filled in before any test runs */
	return unit_main(cache_derived_suite(),
			 "/tmp/check_cache_derived.XXXXXX", dir, sizeof(dir),
			 NULL);
}
