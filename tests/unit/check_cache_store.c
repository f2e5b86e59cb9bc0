/*
 * Unit tests for the disk cache behind cache/cache.h, with the posix
 * backend as the store: inline and blob entries, chunk boundaries, CRC
 * corruption (blob and inline) detected and refetched, eviction to 90% of
 * the budget, LRU order through batched access times, cleanup at open, two
 * processes on one directory, a full filesystem (a 2 MiB tmpfs, when we may
 * mount one), fills, changed etags, verify and clear; the directory:
 * an index truncated while open (SIGBUS caught) or damaged at open (moved
 * aside), other faults left alone, 0700/0600 modes, a held owners.lock,
 * a full disk under LMDB logged as ENOSPC.
 *
 * Backend reads are counted by the cache's own stats (backend_reads), which
 * count calls into the backend. Every test works in its own directory under
 * one mkdtemp root that main() removes whatever the outcome.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lmdb.h>

#include "backends/backend.h"
#include "cache/cache.h"
#include "tests/unit/cache_util.h"
#include "cache/fault_guard.h"
#include "tests/unit/unit.h"

static const char *root;
static char tmpfs_dir[2048];

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

static void fx_open_sync(struct fixture *fx, uint64_t budget, uint64_t chunk,
			 uint64_t inline_max, bool fsync)
{
	struct cache_options o = {
		.dir = fx->dir,
		.backend_id = fx->src,
		.size_bytes = budget,
		.chunk_size = chunk,
		.inline_max = inline_max,
		.inline_max_set = true,
		.fsync = fsync,
	};

	ck_assert_int_eq(cache_open(&o, fx->be, &fx->c), 0);
}

static void fx_open(struct fixture *fx, uint64_t budget, uint64_t chunk,
		    uint64_t inline_max)
{
	fx_open_sync(fx, budget, chunk, inline_max, false);
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

/* Deterministic bytes: file seed s, position i. */
static uint8_t byte_at(unsigned s, uint64_t i)
{
	uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)s * 0xBF58476D;

	z ^= z >> 29;
	return (uint8_t)(z * 0x94D049BB133111EBull >> 56);
}

static void make_file(struct fixture *fx, const char *name, unsigned seed,
		      uint64_t size)
{
	char path[4200];
	uint8_t *buf = malloc(size ? size : 1);
	uint64_t i;
	FILE *f;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < size; i++)
		buf[i] = byte_at(seed, i);
	snprintf(path, sizeof(path), "%s/%s", fx->src, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, size, f), size);
	ck_assert_int_eq(fclose(f), 0);
	free(buf);
}

/* The object as a manifest would pin it (size and etag from stat). */
struct obj {
	struct cache_object o;
	struct backend_stat st;
	char key[256];
};

static void obj_get(struct fixture *fx, const char *name, struct obj *ob)
{
	snprintf(ob->key, sizeof(ob->key), "%s", name);
	memset(&ob->o, 0, sizeof(ob->o));
	ck_assert_int_eq(
		fx->be->ops->stat(fx->be, ob->key, strlen(ob->key), &ob->st),
		0);
	ob->o.key = ob->key;
	ob->o.key_len = strlen(ob->key);
	ob->o.etag = ob->st.etag;
	ob->o.etag_len = ob->st.etag_len;
	ob->o.size = ob->st.size;
}

/* Reads [off, off + len) and checks every byte against seed. */
static void read_check(struct fixture *fx, struct obj *ob, unsigned seed,
		       uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len ? len : 1);
	size_t want = off >= ob->o.size	       ? 0
		      : ob->o.size - off < len ? (size_t)(ob->o.size - off)
					       : len;
	ssize_t got;
	size_t i;

	ck_assert_ptr_nonnull(buf);
	got = tc_read(fx->c, &ob->o, off, len, buf);
	ck_assert_int_eq(got, (ssize_t)want);
	for (i = 0; i < want; i++)
		if (buf[i] != byte_at(seed, off + i))
			ck_abort_msg("%s: byte %llu differs", ob->key,
				     (unsigned long long)(off + i));
	free(buf);
}

static void read_all(struct fixture *fx, struct obj *ob, unsigned seed)
{
	read_check(fx, ob, seed, 0, (size_t)ob->o.size);
}

static struct cache_stats stats(struct fixture *fx)
{
	struct cache_stats s;

	cache_stats_get(fx->c, &s);
	return s;
}

static struct cache_info info(struct fixture *fx)
{
	struct cache_info in;

	ck_assert_int_eq(cache_info(fx->c, &in), 0);
	return in;
}

static void print_bad(void *arg, const struct cache_bad_entry *b)
{
	(void)arg;
	fprintf(stderr, "bad entry %s: %s (key %s, chunk %llu)\n", b->hash_hex,
		b->reason, b->key, (unsigned long long)b->chunk);
}

static int verify(struct fixture *fx)
{
	uint64_t checked;

	return cache_verify(fx->c, print_bad, NULL, &checked);
}

/* The blob file of the only blob entry in dir. */
static int find_blob(const char *dir, char *out, size_t len)
{
	char cmd[4400];
	FILE *p;
	int ok;

	snprintf(cmd, sizeof(cmd),
		 "find '%s/blobs' -mindepth 2 -type f ! -path '*/blobs/tmp/*' "
		 "| head "
		 "-1",
		 dir);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ok = fgets(out, (int)len, p) != NULL;
	pclose(p);
	if (ok)
		out[strcspn(out, "\n")] = '\0';
	return ok ? 0 : -ENOENT;
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, at), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

/* ---- inline and blob entries, chunking ---- */

START_TEST(test_inline_and_blob)
{
	struct fixture fx;
	struct obj small, big;
	struct cache_stats s;
	struct cache_info in;

	fx_init(&fx, "paths");
	make_file(&fx, "small", 1, 100000);
	make_file(&fx, "big", 2, 5 * 65536 + 123);
	obj_get(&fx, "small", &small);
	obj_get(&fx, "big", &big);
	fx_open(&fx, 64 << 20, 2 * 65536, 100000);

	read_all(&fx, &small, 1);
	read_all(&fx, &big, 2);
	s = stats(&fx);
	ck_assert(s.enabled);
	/* small: 1 chunk; big: 3 chunks (2+2+1.x blocks) */
	ck_assert_uint_eq(s.misses, 4);
	ck_assert_uint_eq(s.hits, 0);
	ck_assert_uint_eq(s.backend_reads, 4);
	ck_assert_uint_eq(s.backend_bytes, 100000 + 5 * 65536 + 123);
	in = info(&fx);
	ck_assert_uint_eq(in.entries, 4);
	/* small (100000) and big's last chunk (65536 + 123) are inline */
	ck_assert_uint_eq(in.inline_entries, 2);
	ck_assert_uint_eq(in.blob_entries, 2);
	ck_assert_uint_eq(in.live_bytes, 100000 + 5 * 65536 + 123);

	read_all(&fx, &small, 1);
	read_all(&fx, &big, 2);
	s = stats(&fx);
	ck_assert_uint_eq(s.backend_reads, 4);
	ck_assert_uint_eq(s.hits, 4);
	ck_assert_uint_eq(s.bytes_from_cache, 100000 + 5 * 65536 + 123);
	ck_assert_int_eq(verify(&fx), 0);

	/* A restart keeps everything. */
	fx_close(&fx);
	fx_open(&fx, 64 << 20, 2 * 65536, 100000);
	read_all(&fx, &big, 2);
	read_all(&fx, &small, 1);
	ck_assert_uint_eq(stats(&fx).backend_reads, 0);
	fx_free(&fx);
}
END_TEST

START_TEST(test_chunk_boundaries)
{
	static const uint64_t offs[] = { 0,	 1,	 65535,	 65536,
					 65537,	 131071, 131072, 131073,
					 196607, 250000, 262143, 262144 };
	static const size_t lens[] = {
		1, 2, 100, 65536, 65537, 131072, 300000
	};
	struct fixture fx;
	struct obj ob;
	size_t i, j;
	uint8_t b;

	fx_init(&fx, "bounds");
	make_file(&fx, "f", 3, 4 * 65536 + 7);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 64 << 20, 65536, 1000);
	for (i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++)
			read_check(&fx, &ob, 3, offs[i], lens[j]);
	/* At and past the end. */
	ck_assert_int_eq(tc_read(fx.c, &ob.o, ob.o.size, 10, &b), 0);
	ck_assert_int_eq(tc_read(fx.c, &ob.o, ob.o.size + 5, 10, &b), 0);
	/* 5 chunks, each fetched once. */
	ck_assert_uint_eq(stats(&fx).backend_reads, 5);
	ck_assert_int_eq(verify(&fx), 0);
	fx_free(&fx);
}
END_TEST

START_TEST(test_empty_object)
{
	struct fixture fx;
	struct obj ob;
	uint8_t b;

	fx_init(&fx, "empty");
	make_file(&fx, "e", 4, 0);
	obj_get(&fx, "e", &ob);
	fx_open(&fx, 64 << 20, 0, 0);
	ck_assert_int_eq(tc_read(fx.c, &ob.o, 0, 10, &b), 0);
	ck_assert_int_eq(tc_fill(fx.c, &ob.o, NULL), 0);
	ck_assert_uint_eq(stats(&fx).backend_reads, 0);
	fx_free(&fx);
}
END_TEST

/* ---- CRC ---- */

/* Whether the file system of dir takes O_DIRECT (tmpfs may not). */
static bool direct_io_works(const char *dir)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/direct-probe", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_DIRECT, 0600);
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0;
}

/* A blob's page-aligned part is written around the page cache (O_DIRECT:
 * copying every byte of a large chunk into new page-cache pages was more
 * than half the daemon's CPU in a cold large sequential read); its tail
 * after the last whole page is written as before. The bytes are the
 * same: served from the blob after a restart. */
START_TEST(test_blob_direct)
{
	const uint64_t size = (3 << 20) + 100;
	const size_t page = 4096, pages = (size + page - 1) / page;
	unsigned char *vec = malloc(pages);
	struct fixture fx;
	struct obj ob;
	char blob[4200];
	size_t i, resident = 0;
	void *map;
	int fd, n;

	ck_assert_ptr_nonnull(vec);
	fx_init(&fx, "direct");
	make_file(&fx, "f", 9, size);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 64 << 20, 4 << 20, 1000);
	read_all(&fx, &ob, 9);
	/* A worker stores it; the blob is renamed into place once written. */
	for (n = 0; n < 600 && find_blob(fx.dir, blob, sizeof(blob)) != 0; n++)
		usleep(50000);
	ck_assert_int_eq(find_blob(fx.dir, blob, sizeof(blob)), 0);
	if (direct_io_works(fx.dir)) {
		fd = open(blob, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		ck_assert_ptr_ne(map, MAP_FAILED);
		ck_assert_int_eq(mincore(map, size, vec), 0);
		for (i = 0; i + 1 < pages; i++)
			resident += vec[i] & 1;
		ck_assert_uint_eq(resident, 0);
		ck_assert_int_eq(vec[pages - 1] & 1, 1); /* the tail */
		munmap(map, size);
		close(fd);
	}
	fx_close(&fx);
	fx_open(&fx, 64 << 20, 4 << 20, 1000);
	read_all(&fx, &ob, 9);
	ck_assert_uint_eq(stats(&fx).backend_reads, 0);
	ck_assert_int_eq(verify(&fx), 0);
	fx_free(&fx);
	free(vec);
}
END_TEST

START_TEST(test_crc_blob)
{
	struct fixture fx;
	struct obj ob;
	char blob[4200];
	struct cache_stats s;

	fx_init(&fx, "crcblob");
	make_file(&fx, "f", 5, 300000);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 64 << 20, 1 << 20, 1000);
	read_all(&fx, &ob, 5);
	ck_assert_int_eq(find_blob(fx.dir, blob, sizeof(blob)), 0);
	flip_byte(blob, 200000);
	ck_assert_int_eq(verify(&fx), 1);

	/* A read of a block that is intact is served; it is the block
	 * with the flipped byte that fails. */
	read_check(&fx, &ob, 5, 0, 1000);
	ck_assert_uint_eq(stats(&fx).crc_failures, 0);
	read_check(&fx, &ob, 5, 199990, 20);
	s = stats(&fx);
	ck_assert_uint_eq(s.crc_failures, 1);
	ck_assert_uint_eq(s.backend_reads, 2);
	/* Refetched and stored again: clean, and served from the cache. */
	ck_assert_int_eq(verify(&fx), 0);
	read_all(&fx, &ob, 5);
	ck_assert_uint_eq(stats(&fx).backend_reads, 2);
	/* A read whose ends are inside blocks (0 and the short last one)
	 * with whole blocks between: each piece checked, served from the
	 * blob (entry_blob_read()). */
	read_check(&fx, &ob, 5, 1000, 298000);
	ck_assert_uint_eq(stats(&fx).backend_reads, 2);
	/* A flipped byte in a block read whole, between the ends: caught. */
	ck_assert_int_eq(find_blob(fx.dir, blob, sizeof(blob)), 0);
	flip_byte(blob, 140000);
	read_check(&fx, &ob, 5, 1000, 298000);
	s = stats(&fx);
	ck_assert_uint_eq(s.crc_failures, 2);
	ck_assert_uint_eq(s.backend_reads, 3);
	fx_free(&fx);
}
END_TEST

/* Finds needle in the file at path; returns its offset or -1. */
static off_t find_in_file(const char *path, const uint8_t *needle, size_t n)
{
	struct stat st;
	uint8_t *buf;
	off_t at = -1;
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	if ((size_t)st.st_size >= n) {
		const uint8_t *p = memmem(buf, (size_t)st.st_size, needle, n);

		if (p != NULL)
			at = (off_t)(p - buf);
	}
	free(buf);
	return at;
}

START_TEST(test_crc_inline)
{
	struct fixture fx;
	struct obj ob;
	uint8_t needle[64];
	char index[4200];
	off_t at;
	int i;

	fx_init(&fx, "crcinline");
	make_file(&fx, "f", 6, 5000);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 64 << 20, 0, 0 + (256 << 10));
	read_all(&fx, &ob, 6);
	fx_close(&fx);

	for (i = 0; i < 64; i++)
		needle[i] = byte_at(6, 2000 + (uint64_t)i);
	snprintf(index, sizeof(index), "%s/index.mdb", fx.dir);
	at = find_in_file(index, needle, sizeof(needle));
	ck_assert_int_ge(at, 0);
	flip_byte(index, at + 10);

	fx_open(&fx, 64 << 20, 0, 256 << 10);
	ck_assert_int_eq(verify(&fx), 1);
	read_all(&fx, &ob, 6);
	ck_assert_uint_eq(stats(&fx).crc_failures, 1);
	ck_assert_uint_eq(stats(&fx).backend_reads, 1);
	ck_assert_int_eq(verify(&fx), 0);
	fx_free(&fx);
}
END_TEST

/* ---- budget ---- */

START_TEST(test_eviction)
{
	struct fixture fx;
	struct obj ob[30];
	uint64_t budget = 1 << 20;
	struct cache_stats s;
	char name[32];
	int i;

	fx_init(&fx, "evict");
	for (i = 0; i < 30; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		make_file(&fx, name, 100 + (unsigned)i, 100000 + (uint64_t)i);
		obj_get(&fx, name, &ob[i]);
	}
	fx_open(&fx, budget, 64 << 10, 32 << 10);
	for (i = 0; i < 30; i++) {
		read_all(&fx, &ob[i], 100 + (unsigned)i);
		s = stats(&fx);
		ck_assert_msg(s.live_bytes <= budget, "live %llu > budget",
			      (unsigned long long)s.live_bytes);
	}
	s = stats(&fx);
	ck_assert_uint_gt(s.evictions, 0);
	ck_assert_uint_eq(s.live_bytes, info(&fx).live_bytes);
	ck_assert_int_eq(verify(&fx), 0);
	/* Everything still reads correctly, evicted or not. */
	for (i = 0; i < 30; i++)
		read_all(&fx, &ob[i], 100 + (unsigned)i);
	ck_assert_uint_le(stats(&fx).live_bytes, budget);
	fx_free(&fx);
}
END_TEST

START_TEST(test_eviction_to_90_percent)
{
	struct fixture fx;
	struct obj ob[11];
	uint64_t budget = 1000000;
	char name[32];
	int i;

	fx_init(&fx, "evict90");
	for (i = 0; i < 11; i++) {
		snprintf(name, sizeof(name), "g%02d", i);
		make_file(&fx, name, 200 + (unsigned)i, 100000);
		obj_get(&fx, name, &ob[i]);
	}
	fx_open(&fx, budget, 0, 256 << 10);
	for (i = 0; i < 10; i++)
		read_all(&fx, &ob[i], 200 + (unsigned)i);
	ck_assert_uint_eq(stats(&fx).live_bytes, 1000000);
	ck_assert_uint_eq(stats(&fx).evictions, 0);
	/* One more would exceed the budget: evict down to 90% minus it. */
	read_all(&fx, &ob[10], 210);
	ck_assert_uint_eq(stats(&fx).evictions, 2);
	ck_assert_uint_eq(stats(&fx).live_bytes, 900000);
	fx_free(&fx);
}
END_TEST

START_TEST(test_lru_batched_atime)
{
	struct fixture fx;
	struct obj ob[11];
	uint64_t before;
	char name[32];
	time_t t;
	int i;

	fx_init(&fx, "lru");
	for (i = 0; i < 11; i++) {
		snprintf(name, sizeof(name), "h%02d", i);
		make_file(&fx, name, 300 + (unsigned)i, 100000);
		obj_get(&fx, name, &ob[i]);
	}
	fx_open(&fx, 1000000, 0, 256 << 10);
	for (i = 0; i < 10; i++)
		read_all(&fx, &ob[i], 300 + (unsigned)i);
	/* Access times are in seconds: once every row is stored (stats()
	 * waits for the queued ones), wait for the clock's next second
	 * (at most 3 s), then touch the two oldest entries. Their new times
	 * sit in memory until the eviction flushes them; the eviction must
	 * see them. */
	(void)stats(&fx);
	t = time(NULL);
	for (i = 0; i < 300 && time(NULL) <= t; i++)
		usleep(10000);
	ck_assert_int_gt(time(NULL), t);
	read_all(&fx, &ob[0], 300);
	read_all(&fx, &ob[1], 301);
	read_all(&fx, &ob[10], 310); /* evicts two */
	ck_assert_uint_eq(stats(&fx).evictions, 2);
	before = stats(&fx).backend_reads;
	read_all(&fx, &ob[0], 300);
	read_all(&fx, &ob[1], 301);
	ck_assert_uint_eq(stats(&fx).backend_reads, before);
	fx_free(&fx);
}
END_TEST

/* Many threads of one process, a budget a third of the data: lookups,
 * fetches, the committer thread, access times and evictions at once. */
#define THREAD_FILES 30
#define THREADS 8

struct thread_arg {
	struct fixture *fx;
	struct obj *ob;
	int seed;
	int bad;
};

static void *reader_thread(void *arg)
{
	struct thread_arg *a = arg;
	uint8_t *buf = malloc(200000);
	unsigned r = (unsigned)a->seed;
	int k, i;

	for (k = 0; buf != NULL && k < 3 * THREAD_FILES; k++) {
		struct obj *ob;
		uint64_t off;
		size_t len;
		ssize_t got;

		r = r * 1103515245 + 12345;
		i = (int)((r >> 8) % THREAD_FILES);
		ob = &a->ob[i];
		off = (r >> 4) % ob->o.size;
		len = (size_t)(ob->o.size - off);
		got = tc_read(a->fx->c, &ob->o, off, len, buf);
		if (got != (ssize_t)len) {
			a->bad++;
			continue;
		}
		for (size_t j = 0; j < len; j++)
			if (buf[j] != byte_at(700 + (unsigned)i, off + j)) {
				a->bad++;
				break;
			}
	}
	free(buf);
	return NULL;
}

START_TEST(test_threads)
{
	struct fixture fx;
	struct obj ob[THREAD_FILES];
	struct thread_arg args[THREADS];
	pthread_t t[THREADS];
	uint64_t total = 0;
	char name[32];
	int i;

	fx_init(&fx, "threads");
	for (i = 0; i < THREAD_FILES; i++) {
		uint64_t size = 20000 + (uint64_t)i * 5000;

		snprintf(name, sizeof(name), "t%02d", i);
		make_file(&fx, name, 700 + (unsigned)i, size);
		obj_get(&fx, name, &ob[i]);
		total += size;
	}
	fx_open(&fx, total / 3, 64 << 10, 32 << 10);
	for (i = 0; i < THREADS; i++) {
		args[i] = (struct thread_arg){ &fx, ob, i + 1, 0 };
		ck_assert_int_eq(
			pthread_create(&t[i], NULL, reader_thread, &args[i]),
			0);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(args[i].bad, 0);
	}
	ck_assert_uint_le(stats(&fx).live_bytes, total / 3);
	ck_assert_uint_gt(stats(&fx).evictions, 0);
	ck_assert_int_eq(verify(&fx), 0);
	fx_free(&fx);
}
END_TEST

/* ---- cleanup at open ---- */

START_TEST(test_cleanup_at_open)
{
	struct fixture fx;
	struct obj a, b;
	char path[4400], blob[4200];
	struct stat st;
	FILE *f;

	fx_init(&fx, "cleanup");
	make_file(&fx, "a", 7, 200000);
	make_file(&fx, "b", 8, 300000);
	obj_get(&fx, "a", &a);
	obj_get(&fx, "b", &b);
	fx_open(&fx, 64 << 20, 0, 1000);
	read_all(&fx, &a, 7);
	fx_close(&fx);

	/* A row without its blob. */
	ck_assert_int_eq(find_blob(fx.dir, blob, sizeof(blob)), 0);
	ck_assert_int_eq(unlink(blob), 0);
	/* A blob without a row, and a tmp file of a dead writer. */
	snprintf(path, sizeof(path), "%s/blobs/ab", fx.dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/blobs/ab/ab%062d", fx.dir, 0);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("orphan", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/blobs/tmp/ab%062d.999999999.1", fx.dir,
		 0);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);

	fx_open(&fx, 64 << 20, 0, 1000);
	ck_assert_uint_eq(info(&fx).entries, 0);
	ck_assert_uint_eq(info(&fx).live_bytes, 0);
	ck_assert_int_ne(stat(path, &st), 0);
	snprintf(path, sizeof(path), "%s/blobs/ab/ab%062d", fx.dir, 0);
	ck_assert_int_ne(stat(path, &st), 0);
	ck_assert_int_eq(verify(&fx), 0);
	read_all(&fx, &a, 7);
	read_all(&fx, &b, 8);
	ck_assert_uint_eq(info(&fx).entries, 2);
	fx_free(&fx);
}
END_TEST

/* A row whose blob disappears while open (another process evicted it) is
 * a miss, not an error. */
START_TEST(test_blob_vanishes)
{
	struct fixture fx;
	struct obj a;
	char blob[4200];

	fx_init(&fx, "vanish");
	make_file(&fx, "a", 9, 200000);
	obj_get(&fx, "a", &a);
	fx_open(&fx, 64 << 20, 0, 1000);
	read_all(&fx, &a, 9);
	ck_assert_int_eq(find_blob(fx.dir, blob, sizeof(blob)), 0);
	ck_assert_int_eq(unlink(blob), 0);
	read_all(&fx, &a, 9);
	ck_assert_uint_eq(stats(&fx).backend_reads, 2);
	ck_assert_uint_eq(stats(&fx).crc_failures, 0);
	ck_assert_int_eq(verify(&fx), 0);
	fx_free(&fx);
}
END_TEST

/* ---- two processes ---- */

#define SHARED_FILES 24

static void child_reads(struct fixture *fx, int which)
{
	struct obj ob;
	char name[32];
	int i, k;

	backend_close(fx->be);
	if (backend_open(fx->src, NULL, &fx->be) != 0)
		_exit(10);
	fx_open(fx, 64 << 20, 64 << 10, 16 << 10);
	for (k = 0; k < 3; k++)
		for (i = 0; i < SHARED_FILES; i++) {
			int f = which ? SHARED_FILES - 1 - i : i;

			snprintf(name, sizeof(name), "s%02d", f);
			obj_get(fx, name, &ob);
			read_all(fx, &ob, 400 + (unsigned)f);
		}
	fx_free(fx);
	_exit(0);
}

START_TEST(test_two_processes)
{
	struct fixture fx;
	struct obj ob;
	char name[32];
	pid_t pid[2];
	int i, status;
	uint64_t total = 0;

	fx_init(&fx, "shared");
	for (i = 0; i < SHARED_FILES; i++) {
		uint64_t size = 10000 + (uint64_t)i * 9000;

		snprintf(name, sizeof(name), "s%02d", i);
		make_file(&fx, name, 400 + (unsigned)i, size);
		total += size;
	}
	/* Create the directory first, as a mount would. */
	fx_open(&fx, 64 << 20, 64 << 10, 16 << 10);
	fx_close(&fx);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		ck_assert_int_ge(pid[i], 0);
		if (pid[i] == 0)
			child_reads(&fx, i);
	}
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(waitpid(pid[i], &status, 0), pid[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	fx_open(&fx, 64 << 20, 64 << 10, 16 << 10);
	ck_assert_int_eq(verify(&fx), 0);
	ck_assert_uint_eq(info(&fx).live_bytes, total);
	for (i = 0; i < SHARED_FILES; i++) {
		snprintf(name, sizeof(name), "s%02d", i);
		obj_get(&fx, name, &ob);
		read_all(&fx, &ob, 400 + (unsigned)i);
	}
	/* Each one's chunks serve the other: nothing is fetched again. */
	ck_assert_uint_eq(stats(&fx).backend_reads, 0);
	fx_free(&fx);
}
END_TEST

/* `shardfs mount` without -f opens the cache, then forks (daemonizes) and
 * the parent exits: the child must use its own LMDB environment, and other
 * processes may open the directory meanwhile. */
START_TEST(test_fork_after_open)
{
	struct fixture fx;
	struct obj ob[4];
	char name[32];
	pid_t pid;
	int i, status;

	fx_init(&fx, "forked");
	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "k%d", i);
		make_file(&fx, name, 600 + (unsigned)i,
			  90000 + 70000 * (uint64_t)i);
		obj_get(&fx, name, &ob[i]);
	}
	fx_open(&fx, 64 << 20, 64 << 10, 32 << 10);
	read_all(&fx, &ob[0], 600);
	/* Rows are indexed by a committer thread: wait for them, so the
	 * other process below finds ob[0]. */
	(void)stats(&fx);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct fixture other = fx;

		/* Another process opens the directory while we use it. */
		other.c = NULL;
		fx_open(&other, 64 << 20, 64 << 10, 32 << 10);
		for (i = 0; i < 4; i++)
			read_all(&fx, &ob[i], 600 + (unsigned)i);
		(void)stats(&fx);
		for (i = 0; i < 4; i++)
			read_all(&other, &ob[i], 600 + (unsigned)i);
		if (stats(&other).backend_reads != 0)
			_exit(3);
		cache_free(other.c);
		fx_free(&fx);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (i = 0; i < 4; i++)
		read_all(&fx, &ob[i], 600 + (unsigned)i);
	/* Only ob[0]'s two chunks were fetched here; the child fetched the
	 * rest. */
	ck_assert_uint_eq(stats(&fx).misses, 2);
	ck_assert_int_eq(verify(&fx), 0);
	fx_free(&fx);
}
END_TEST

/* ---- full filesystem ---- */

START_TEST(test_full_filesystem)
{
	struct fixture fx;
	struct obj ob[8];
	char name[32];
	int i;

	fx_init(&fx, "full");
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "%s/tmpfs", root);
	ck_assert_int_eq(mkdir(tmpfs_dir, 0755), 0);
	if (mount("tmpfs", tmpfs_dir, "tmpfs", 0, "size=2m") != 0) {
		fprintf(stderr,
			"check_cache_store: cannot mount a tmpfs (%s): "
			"full-filesystem test skipped\n",
			strerror(errno));
		tmpfs_dir[0] = '\0';
		fx_free(&fx);
		return;
	}
	snprintf(fx.dir, sizeof(fx.dir), "%s/cache", tmpfs_dir);
	for (i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "big%d", i);
		make_file(&fx, name, 500 + (unsigned)i, 700000);
		obj_get(&fx, name, &ob[i]);
	}
	fx_open(&fx, UINT64_C(1) << 30, 256 << 10, 100 << 10);
	for (i = 0; i < 8; i++)
		read_all(&fx, &ob[i], 500 + (unsigned)i);
	for (i = 0; i < 8; i++)
		read_all(&fx, &ob[i], 500 + (unsigned)i);
	ck_assert_uint_gt(stats(&fx).store_failures, 0);
	ck_assert_uint_eq(stats(&fx).backend_errors, 0);
	ck_assert_int_eq(verify(&fx), 0);
	fx_free(&fx);
	ck_assert_int_eq(umount2(tmpfs_dir, MNT_DETACH), 0);
	tmpfs_dir[0] = '\0';
}
END_TEST

/* Another process holds the index's write lock (a stopped `shardfs cache`
 * command, a second mount stuck in a sync): the committer cannot index,
 * its queue fills, and stores must give up after a bounded wait instead
 * of blocking the readers whose threads store small chunks. Reads stay
 * correct, the dropped stores are counted, and once the lock is free the
 * cache stores again. (The test opens the index with LMDB itself, playing
 * that other process.) */
START_TEST(test_committer_stalled)
{
	struct cache_fetch_options fo = { .connections = 4, .memory = 1 << 20 };
	struct fixture fx;
	struct obj ob[24];
	char name[32], path[4200], ok;
	int i, start[2], go[2], done[2], status;
	pid_t pid;

	fx_init(&fx, "stalled");
	for (i = 0; i < 24; i++) {
		snprintf(name, sizeof(name), "st%02d", i);
		make_file(&fx, name, 1100 + (unsigned)i, 40000);
		obj_get(&fx, name, &ob[i]);
	}
	/* The lock holder is forked before the cache starts threads: a
	 * child of a threaded process may find the allocator's lock held
	 * (AddressSanitizer's), and it allocates. */
	ck_assert_int_eq(pipe(start), 0);
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(done), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		MDB_env *env;
		MDB_txn *txn;
		int rc;

		close(start[1]);
		close(go[0]);
		close(done[1]);
		if (read(start[0], &ok, 1) != 1)
			_exit(1); /* the parent gave up */
		snprintf(path, sizeof(path), "%s/index.mdb", fx.dir);
		rc = mdb_env_create(&env);
		if (rc == 0)
			rc = mdb_env_set_maxdbs(env, 4);
		if (rc == 0)
			rc = mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOTLS,
					  0600);
		if (rc == 0)
			rc = mdb_txn_begin(env, NULL, 0, &txn);
		if (rc != 0) {
			fprintf(stderr, "lock holder: %s\n", mdb_strerror(rc));
			_exit(1);
		}
		if (write(go[1], "g", 1) != 1)
			_exit(1);
		/* Until the parent is done reading. */
		if (read(done[0], &ok, 1) < 0)
			_exit(1);
		mdb_txn_abort(txn);
		mdb_env_close(env);
		_exit(0);
	}
	close(start[0]);
	close(go[1]);
	close(done[0]);
	fx_open(&fx, 64 << 20, 65536, 65536);
	/* A quarter of 1 MiB may wait in the queue: about 6 of these. */
	cache_set_fetch_options(fx.c, &fo);
	read_all(&fx, &ob[0], 1100); /* the index exists, rows are written */
	ck_assert_int_eq(write(start[1], "s", 1), 1);
	ck_assert_int_eq(read(go[0], &ok, 1), 1);
	for (i = 1; i < 24; i++)
		read_all(&fx, &ob[i], 1100 + (unsigned)i);
	ck_assert_uint_gt(stats(&fx).store_failures, 0);
	ck_assert_uint_eq(stats(&fx).backend_errors, 0);
	ck_assert_int_eq(write(done[1], "d", 1), 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(start[1]);
	close(go[0]);
	close(done[1]);
	/* The lock is free: what was queued is indexed, reads are right. */
	for (i = 0; i < 24; i++)
		read_all(&fx, &ob[i], 1100 + (unsigned)i);
	fx_close(&fx);
	fx_open(&fx, 64 << 20, 65536, 65536);
	ck_assert_int_eq(verify(&fx), 0);
	for (i = 0; i < 24; i++)
		read_all(&fx, &ob[i], 1100 + (unsigned)i);
	fx_free(&fx);
}
END_TEST

/* ---- the cache directory: damage, permissions, owners.lock ---- */

/* Some inline entries (small chunks), indexed. */
static void fill_inline(struct fixture *fx, struct obj *ob, int n)
{
	char name[32];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "in%d", i);
		make_file(fx, name, 900 + (unsigned)i, 3 * 65536 + 11);
		obj_get(fx, name, &ob[i]);
	}
	fx_open(fx, 64 << 20, 65536, 65536);
	for (i = 0; i < n; i++)
		read_all(fx, &ob[i], 900 + (unsigned)i);
	ck_assert_uint_eq(info(fx).entries, (uint64_t)n * 4);
}

static bool aside_exists(const char *dir)
{
	struct dirent *de;
	bool found = false;
	DIR *d = opendir(dir);

	while (d != NULL && (de = readdir(d)) != NULL)
		found |= !strncmp(de->d_name, "index.mdb.corrupt-", 18);
	if (d != NULL)
		closedir(d);
	return found;
}

/* index.mdb truncated by someone else while this process has it mapped:
 * the next lookups fault inside LMDB (SIGBUS). The process lives, reads
 * stay correct (from the source), and the next open starts afresh. */
START_TEST(test_index_truncated_while_open)
{
	struct fixture fx;
	struct obj ob[6];
	char path[4200];
	uint64_t reads;
	int i;

	fx_init(&fx, "trunc");
	fill_inline(&fx, ob, 6);
	snprintf(path, sizeof(path), "%s/index.mdb", fx.dir);
	ck_assert_int_eq(truncate(path, 8192), 0);
	reads = stats(&fx).backend_reads;
	for (i = 0; i < 6; i++)
		read_all(&fx, &ob[i], 900 + (unsigned)i);
	ck_assert_uint_gt(stats(&fx).backend_reads, reads);
	ck_assert_int_ne(cache_info(fx.c, &(struct cache_info){ 0 }), 0);
	fx_close(&fx);

	fx_open(&fx, 64 << 20, 65536, 65536);
	ck_assert(aside_exists(fx.dir));
	ck_assert_uint_eq(info(&fx).entries, 0);
	for (i = 0; i < 6; i++)
		read_all(&fx, &ob[i], 900 + (unsigned)i);
	ck_assert_int_eq(verify(&fx), 0);
	fx_free(&fx);
}
END_TEST

/* The offset of the flags of the main tree's root page, from the newest
 * of LMDB's two meta pages (index_check.c has the layout). */
static off_t main_root_flags(const char *path)
{
	uint8_t m[2][160];
	uint64_t txn[2], root;
	uint32_t psize;
	int fd = open(path, O_RDONLY), i;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, m[0], 160, 0), 160);
	memcpy(&psize, m[0] + 40, 4);
	ck_assert_int_eq(pread(fd, m[1], 160, psize), 160);
	close(fd);
	for (i = 0; i < 2; i++) /* mm_txnid: 16 + 24 + 2 * 48 + 8 */
		memcpy(&txn[i], m[i] + 144, 8);
	memcpy(&root, m[txn[1] > txn[0]] + 128, 8);
	return (off_t)(root * psize + 10);
}

/* Damage found at open (a meta page, a page's header) is moved aside;
 * inspection reports it instead. */
START_TEST(test_index_damaged_at_open)
{
	struct {
		off_t off;
		const char *bytes;
	} damage[] = {
		{ 16, "\x01\x02\x03\x04" }, /* page 0's magic */
		{ -1, "\x77\x77" },	    /* the main root's flags */
	};
	struct cache_options o = { .inspect = true };
	struct fixture fx;
	struct obj ob[3];
	char path[4200];
	struct cache *c = NULL;
	size_t d;
	int fd, i;

	fx_init(&fx, "damaged");
	fill_inline(&fx, ob, 3);
	fx_close(&fx);
	snprintf(path, sizeof(path), "%s/index.mdb", fx.dir);
	for (d = 0; d < ARRAY_LEN(damage); d++) {
		if (damage[d].off < 0)
			damage[d].off = main_root_flags(path);
		fd = open(path, O_WRONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, damage[d].bytes,
					strlen(damage[d].bytes), damage[d].off),
				 (ssize_t)strlen(damage[d].bytes));
		close(fd);
		o.dir = fx.dir;
		ck_assert_int_eq(cache_open(&o, NULL, &c), -EIO);
		fx_open(&fx, 64 << 20, 65536, 65536);
		ck_assert(aside_exists(fx.dir));
		ck_assert_uint_eq(info(&fx).entries, 0);
		for (i = 0; i < 3; i++)
			read_all(&fx, &ob[i], 900 + (unsigned)i);
		ck_assert_uint_eq(info(&fx).entries, 12);
		fx_close(&fx);
	}
	fx_free(&fx);
}
END_TEST

/* The guard catches only faults inside LMDB: any other SIGSEGV still
 * kills the process (kill(2)ed or a real fault). */
START_TEST(test_guard_leaves_other_faults)
{
	volatile uintptr_t bad_addr = 8; /* unmapped, opaque to the compiler */
	struct fixture fx;
	struct obj ob[1];
	int how, status;

	fx_init(&fx, "guard");
	fill_inline(&fx, ob, 1);
	for (how = 0; how < 2; how++) {
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			read_all(&fx, &ob[0], 900);
			if (how == 0)
				kill(getpid(), SIGSEGV);
			else
				*(volatile int *)bad_addr = 1;
			_exit(0);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		/* Killed by it, or (ASan's handler) exited non-zero. */
		ck_assert(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
		if (WIFSIGNALED(status))
			ck_assert_int_eq(WTERMSIG(status), SIGSEGV);
	}
	fx_free(&fx);
}
END_TEST

static int guard_touch(void *arg)
{
	return *(volatile const char *)arg;
}

/* A fault caught by the guard leaves the thread's signal mask as it was
 * (the guard does not save it per call): a second fault in the same
 * thread is caught too, not fatal for being blocked, and SIGBUS is not
 * left blocked. */
START_TEST(test_guard_twice)
{
	char path[] = "/tmp/check_guard.XXXXXX";
	int fd = mkstemp(path), i, ret = 0;
	sigset_t mask;
	char *map;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8192), 0);
	map = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert(map != MAP_FAILED);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	unlink(path);
	ck_assert_int_eq(fault_guard_call(guard_touch, map, &ret), SIGBUS);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(
			fault_guard_call(guard_touch, map + 4096, &ret),
			SIGBUS);
		ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, NULL, &mask), 0);
		ck_assert(!sigismember(&mask, SIGBUS));
	}
	munmap(map, 8192);
	close(fd);
}
END_TEST

/* Whoever really installed the handler (ThreadSanitizer's wrapper does,
 * with every signal in sa_mask) decides the mask the handler runs with;
 * after a jump from it the thread must have the mask the guarded call
 * began with. Left with everything blocked, a FUSE worker could not be
 * cancelled at unmount (glibc's SIGCANCEL) and the daemon hung there. */
START_TEST(test_guard_restores_mask)
{
	char path[] = "/tmp/check_guard.XXXXXX";
	int fd = mkstemp(path), ret = 0;
	struct sigaction sa;
	sigset_t before, after;
	char *map;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8192), 0);
	map = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert(map != MAP_FAILED);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	unlink(path);
	/* Installs the guard, then widens its handler's sa_mask. */
	ck_assert_int_eq(fault_guard_call(guard_touch, map, &ret), SIGBUS);
	ck_assert_int_eq(sigaction(SIGBUS, NULL, &sa), 0);
	sigfillset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGBUS, &sa, NULL), 0);
	ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, NULL, &before), 0);
	ck_assert(!sigismember(&before, SIGUSR1));
	ck_assert_int_eq(fault_guard_call(guard_touch, map + 4096, &ret),
			 SIGBUS);
	ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, NULL, &after), 0);
	ck_assert(!sigismember(&after, SIGBUS));
	ck_assert(!sigismember(&after, SIGUSR1));
	ck_assert(!sigismember(&after, SIGRTMIN));
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGBUS, &sa, NULL), 0);
	munmap(map, 8192);
	close(fd);
}
END_TEST

static void assert_private(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	if ((st.st_mode & 077) != 0)
		ck_abort_msg("%s: mode %04o", path,
			     (unsigned)(st.st_mode & 07777));
}

/* 0700 directories and 0600 files whatever the umask; a looser cache is
 * tightened at open. */
START_TEST(test_permissions)
{
	static const char *const names[] = {
		"",	  "/index.mdb", "/index.mdb-lock", "/owners.lock",
		"/blobs", "/blobs/tmp"
	};
	struct fixture fx;
	struct obj ob;
	char path[4400], blob[4200];
	mode_t old = umask(0);
	size_t i;

	fx_init(&fx, "perms");
	make_file(&fx, "b", 3, 300000);
	obj_get(&fx, "b", &ob);
	fx_open(&fx, 64 << 20, 0, 1000);
	read_all(&fx, &ob, 3);
	(void)stats(&fx); /* indexed */
	for (i = 0; i < ARRAY_LEN(names); i++) {
		snprintf(path, sizeof(path), "%s%s", fx.dir, names[i]);
		assert_private(path);
	}
	ck_assert_int_eq(find_blob(fx.dir, blob, sizeof(blob)), 0);
	assert_private(blob);
	*strrchr(blob, '/') = '\0';
	assert_private(blob);
	fx_close(&fx);

	ck_assert_int_eq(chmod(fx.dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/index.mdb", fx.dir);
	ck_assert_int_eq(chmod(path, 0644), 0);
	fx_open(&fx, 64 << 20, 0, 1000);
	assert_private(fx.dir);
	assert_private(path);
	umask(old);
	fx_free(&fx);
}
END_TEST

/* Another process holding owners.lock exclusively cannot make an open
 * wait forever. */
START_TEST(test_owners_lock_held)
{
	struct cache_options o = { .inspect = true };
	struct fixture fx;
	struct obj ob[1];
	struct cache *c = NULL;
	char path[4200];
	int fd;

	fx_init(&fx, "lockheld");
	fill_inline(&fx, ob, 1);
	fx_close(&fx);
	snprintf(path, sizeof(path), "%s/owners.lock", fx.dir);
	fd = open(path, O_RDONLY); /* its own open file: a separate lock */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	o.dir = fx.dir;
	ck_assert_int_eq(cache_open(&o, NULL, &c), -ETIMEDOUT);
	close(fd);
	ck_assert_int_eq(cache_open(&o, NULL, &c), 0);
	cache_free(c);
	fx_free(&fx);
}
END_TEST

/* A disk full while LMDB writes (inline chunks only, so no blob write
 * fails first) is logged as ENOSPC, which LMDB reports as EIO. */
START_TEST(test_full_filesystem_inline)
{
	struct fixture fx;
	struct obj ob[6];
	char name[32], logp[4200], text[8192];
	int i, saved, lfd;
	ssize_t n;

	fx_init(&fx, "fullinl");
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "%s/tmpfs2", root);
	ck_assert_int_eq(mkdir(tmpfs_dir, 0755), 0);
	if (mount("tmpfs", tmpfs_dir, "tmpfs", 0, "size=1m") != 0) {
		tmpfs_dir[0] = '\0';
		fx_free(&fx);
		return;
	}
	snprintf(fx.dir, sizeof(fx.dir), "%s/cache", tmpfs_dir);
	for (i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		make_file(&fx, name, 700 + (unsigned)i, 400000);
		obj_get(&fx, name, &ob[i]);
	}
	snprintf(logp, sizeof(logp), "%s/full.log", root);
	lfd = open(logp, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(lfd, 0);
	saved = dup(2);
	dup2(lfd, 2);
	fx_open(&fx, UINT64_C(1) << 30, 65536, 65536);
	for (i = 0; i < 6; i++)
		read_all(&fx, &ob[i], 700 + (unsigned)i);
	(void)stats(&fx);
	dup2(saved, 2);
	close(saved);
	ck_assert_uint_gt(stats(&fx).store_failures, 0);
	n = pread(lfd, text, sizeof(text) - 1, 0);
	close(lfd);
	text[n > 0 ? n : 0] = '\0';
	if (strstr(text, "No space left on device") == NULL ||
	    strstr(text, "Input/output error") != NULL ||
	    strstr(text, "Unknown error") != NULL)
		ck_abort_msg("log: %s", text);
	fx_free(&fx);
	ck_assert_int_eq(umount2(tmpfs_dir, MNT_DETACH), 0);
	tmpfs_dir[0] = '\0';
}
END_TEST

/* ---- fill, etags, clear ---- */

START_TEST(test_fill)
{
	struct fixture fx;
	struct obj ob;
	uint64_t fetched;

	fx_init(&fx, "fill");
	make_file(&fx, "f", 10, 3 * 65536 + 5);
	obj_get(&fx, "f", &ob);
	fx_open(&fx, 64 << 20, 65536, 1000);
	ck_assert_int_eq(tc_fill(fx.c, &ob.o, &fetched), 0);
	ck_assert_uint_eq(fetched, ob.o.size);
	ck_assert_int_eq(tc_fill(fx.c, &ob.o, &fetched), 0);
	ck_assert_uint_eq(fetched, 0);
	read_all(&fx, &ob, 10);
	ck_assert_uint_eq(stats(&fx).backend_reads, 4);
	ck_assert_uint_eq(stats(&fx).hits, 4);
	fx_free(&fx);
}
END_TEST

/* The process's fdatasync calls, LMDB's included: this definition
 * interposes libc's for the shared liblmdb too. */
static unsigned long n_fdatasync;

int fdatasync(int fd)
{
	__atomic_add_fetch(&n_fdatasync, 1, __ATOMIC_RELAXED);
	return (int)syscall(SYS_fdatasync, fd);
}

/* Without [cache] fsync nothing waits for the disk: not the blobs, not
 * the index's commits (MDB_NOSYNC); with it, both sync. */
START_TEST(test_fsync_option)
{
	struct fixture fx;
	struct obj ob;
	uint64_t fetched;
	unsigned long n0;
	int sync;

	fx_init(&fx, "fsync");
	make_file(&fx, "f", 14, 6 * 65536 + 7);
	obj_get(&fx, "f", &ob);
	for (sync = 0; sync < 2; sync++) {
		n0 = __atomic_load_n(&n_fdatasync, __ATOMIC_RELAXED);
		/* Chunks of 64 KiB, the last 7 bytes inline. */
		fx_open_sync(&fx, 64 << 20, 65536, 1000, sync);
		ck_assert_int_eq(tc_fill(fx.c, &ob.o, &fetched), 0);
		ck_assert_uint_eq(fetched, ob.o.size);
		read_all(&fx, &ob, 14);
		fx_close(&fx);
		if (sync)
			ck_assert_uint_ge(n_fdatasync - n0, 6);
		else
			ck_assert_uint_eq(n_fdatasync - n0, 0);
		fx_open(&fx, 64 << 20, 65536, 1000);
		ck_assert_int_eq(cache_clear(fx.c), 0);
		fx_close(&fx);
	}
	fx_free(&fx);
}
END_TEST

START_TEST(test_new_etag_new_bytes)
{
	struct fixture fx;
	struct obj old, cur;
	uint8_t b;

	fx_init(&fx, "etag");
	make_file(&fx, "f", 11, 150000);
	obj_get(&fx, "f", &old);
	fx_open(&fx, 64 << 20, 65536, 1000);
	read_all(&fx, &old, 11);
	/* Replaced upstream: a new manifest pins the new etag. */
	usleep(10000);
	make_file(&fx, "f", 12, 150001);
	obj_get(&fx, "f", &cur);
	ck_assert_str_ne(old.st.etag, cur.st.etag);
	read_all(&fx, &cur, 12);
	/* The old version is still cached and consistent with the old
	 * manifest; a miss against it fails rather than mixing versions. */
	read_check(&fx, &old, 11, 0, 65536);
	ck_assert_int_eq(tc_read(fx.c, &old.o, 149999, 1, &b), 1);
	ck_assert_uint_eq(b, byte_at(11, 149999));
	fx_close(&fx);
	fx_open(&fx, 64 << 20, 65536, 1000);
	ck_assert_int_eq(cache_clear(fx.c), 0);
	ck_assert_int_eq(tc_read(fx.c, &old.o, 0, 1, &b), -ESTALE);
	ck_assert_uint_eq(info(&fx).entries, 0);
	read_all(&fx, &cur, 12);
	fx_free(&fx);
}
END_TEST

START_TEST(test_passthrough)
{
	struct fixture fx;
	struct obj ob;

	fx_init(&fx, "pass");
	make_file(&fx, "f", 13, 70000);
	obj_get(&fx, "f", &ob);
	ck_assert_int_eq(cache_new(fx.be, &fx.c), 0);
	read_all(&fx, &ob, 13);
	read_all(&fx, &ob, 13);
	ck_assert(!stats(&fx).enabled);
	ck_assert_uint_eq(stats(&fx).backend_reads, 2);
	fx_free(&fx);
}
END_TEST

static Suite *cache_store_suite(void)
{
	Suite *s = suite_create("cache_store");
	TCase *tc;

	tc = tcase_create("paths");
	tcase_add_test(tc, test_inline_and_blob);
	tcase_add_test(tc, test_blob_direct);
	tcase_add_test(tc, test_chunk_boundaries);
	tcase_add_test(tc, test_empty_object);
	tcase_add_test(tc, test_passthrough);
	suite_add_tcase(s, tc);

	tc = tcase_create("crc");
	tcase_add_test(tc, test_crc_blob);
	tcase_add_test(tc, test_crc_inline);
	suite_add_tcase(s, tc);

	tc = tcase_create("budget");
	tcase_add_test(tc, test_eviction);
	tcase_add_test(tc, test_eviction_to_90_percent);
	tcase_add_test(tc, test_lru_batched_atime);
	tcase_add_test(tc, test_threads);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);

	tc = tcase_create("open");
	tcase_add_test(tc, test_cleanup_at_open);
	tcase_add_test(tc, test_blob_vanishes);
	suite_add_tcase(s, tc);

	tc = tcase_create("shared");
	tcase_add_test(tc, test_two_processes);
#if defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer cannot start threads in a child forked from a
	 * threaded process ("not supported"): the ASan and plain builds run
	 * it. */
	(void)test_fork_after_open;
#else
	tcase_add_test(tc, test_fork_after_open);
#endif
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("full_filesystem");
	tcase_add_test(tc, test_full_filesystem);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);

	tc = tcase_create("directory");
	tcase_add_test(tc, test_index_truncated_while_open);
	tcase_add_test(tc, test_index_damaged_at_open);
	tcase_add_test(tc, test_guard_leaves_other_faults);
	tcase_add_test(tc, test_guard_twice);
	tcase_add_test(tc, test_guard_restores_mask);
	tcase_add_test(tc, test_permissions);
	tcase_add_test(tc, test_owners_lock_held);
	tcase_add_test(tc, test_full_filesystem_inline);
	tcase_add_test(tc, test_committer_stalled);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("fill_etag_clear");
	tcase_add_test(tc, test_fill);
	tcase_add_test(tc, test_new_etag_new_bytes);
	tcase_add_test(tc, test_fsync_option);
	suite_add_tcase(s, tc);
	return s;
}

/* A failed test in a forked child never unmounted its tmpfs. */
static void cache_store_umount(const char *dir)
{
	char tmpfs[4200];

	snprintf(tmpfs, sizeof(tmpfs), "%s/tmpfs", dir);
	umount2(tmpfs, MNT_DETACH);
	snprintf(tmpfs, sizeof(tmpfs), "%s/tmpfs2", dir);
	umount2(tmpfs, MNT_DETACH);
}

int main(void)
{
	static char dir[64];

	root = dir; /* filled in before any test runs */
	return unit_main(cache_store_suite(), "/tmp/check_cache_store.XXXXXX",
			 dir, sizeof(dir), cache_store_umount);
}
