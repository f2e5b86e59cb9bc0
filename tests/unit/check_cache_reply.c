/*
 * Unit tests for tc_file_reply() (cache/cache.h), with the posix
 * backend as the store: a chunk in memory is handed over in place (no
 * reply buffer taken: memory in use stays exactly the chunk's while fn
 * runs) and its pin is released when fn returns (memory back to 0 once the
 * chunk was read whole); a blob is handed over as its descriptor only
 * after this process checked its blocks, and a blob rewritten after that
 * check is read and checked again (the wrong byte is never served); inline
 * rows, ranges across chunks and the end of the object.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "cache/cache.h"
#include "tests/unit/cache_util.h"
#include "tests/unit/unit.h"

static char root[256];

struct fixture {
	char src[512], dir[512];
	struct backend *be;
	struct cache *c;
	struct tc_file *f;
	struct cache_object o;
	struct backend_stat st;
	char key[64];
};

static uint8_t byte_at(unsigned s, uint64_t i)
{
	uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)s * 0xBF58476D;

	z ^= z >> 29;
	return (uint8_t)(z * 0x94D049BB133111EBull >> 56);
}

static void fx_open(struct fixture *fx, const char *name, unsigned seed,
		    uint64_t size, uint64_t chunk, uint64_t inline_max)
{
	struct cache_options o = {
		.size_bytes = 256 << 20,
		.chunk_size = chunk,
		.inline_max = inline_max,
		.inline_max_set = true,
	};
	char path[600];
	uint8_t *buf = malloc(size ? size : 1);
	uint64_t i;
	FILE *f;

	memset(fx, 0, sizeof(*fx));
	snprintf(fx->src, sizeof(fx->src), "%s/%s-src", root, name);
	snprintf(fx->dir, sizeof(fx->dir), "%s/%s-cache", root, name);
	ck_assert_int_eq(mkdir(fx->src, 0755), 0);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < size; i++)
		buf[i] = byte_at(seed, i);
	snprintf(path, sizeof(path), "%s/f", fx->src);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, size, f), size);
	ck_assert_int_eq(fclose(f), 0);
	free(buf);

	ck_assert_int_eq(backend_open(fx->src, NULL, &fx->be), 0);
	snprintf(fx->key, sizeof(fx->key), "f");
	ck_assert_int_eq(fx->be->ops->stat(fx->be, "f", 1, &fx->st), 0);
	fx->o.key = fx->key;
	fx->o.key_len = 1;
	fx->o.etag = fx->st.etag;
	fx->o.etag_len = fx->st.etag_len;
	fx->o.size = fx->st.size;
	o.dir = fx->dir;
	o.backend_id = fx->src;
	ck_assert_int_eq(cache_open(&o, fx->be, &fx->c), 0);
	ck_assert_int_eq(tc_file_open(fx->c, &fx->o, &fx->f), 0);
}

static void fx_free(struct fixture *fx)
{
	tc_file_close(fx->f);
	cache_free(fx->c);
	backend_close(fx->be);
}

static struct cache_stats stats(struct fixture *fx)
{
	struct cache_stats s;

	cache_stats_get(fx->c, &s);
	return s;
}

/* What a reply got: the bytes, how they came, and the memory in use
 * while they were held. */
struct got {
	struct fixture *fx;
	uint8_t *bytes;
	size_t len;
	unsigned calls, n_fd, n_mem;
	uint64_t in_use;
};

static int reply_fn(void *arg, const struct cache_piece *p, unsigned n)
{
	struct got *g = arg;
	unsigned i;

	g->calls++;
	g->in_use = stats(g->fx).memory_in_use_bytes;
	for (i = 0; i < n; i++) {
		g->bytes = realloc(g->bytes, g->len + p[i].len + 1);
		ck_assert_ptr_nonnull(g->bytes);
		if (p[i].mem != NULL) {
			g->n_mem++;
			memcpy(g->bytes + g->len, p[i].mem, p[i].len);
		} else {
			g->n_fd++;
			ck_assert_int_eq(pread(p[i].fd, g->bytes + g->len,
					       p[i].len, (off_t)p[i].pos),
					 (ssize_t)p[i].len);
		}
		g->len += p[i].len;
	}
	return 0;
}

/* Replies [off, off + len) and checks the bytes against seed. */
static void reply_check(struct fixture *fx, unsigned seed, uint64_t off,
			size_t len, struct got *g)
{
	size_t want = off >= fx->o.size	       ? 0
		      : fx->o.size - off < len ? (size_t)(fx->o.size - off)
					       : len;
	ssize_t rc;
	size_t i;

	free(g->bytes);
	memset(g, 0, sizeof(*g));
	g->fx = fx;
	rc = tc_file_reply(fx->f, off, len, reply_fn, g);
	ck_assert_int_eq(rc, (ssize_t)want);
	ck_assert_uint_eq(g->calls, 1);
	ck_assert_uint_eq(g->len, want);
	for (i = 0; i < want; i++)
		if (g->bytes[i] != byte_at(seed, off + i))
			ck_abort_msg("byte %llu differs",
				     (unsigned long long)(off + i));
}

/* Waits (at most 20 s) for the engine's memory to come back to 0. */
static uint64_t memory_settled(struct fixture *fx)
{
	uint64_t m = 0;
	int i;

	for (i = 0; i < 200; i++) {
		m = stats(fx).memory_in_use_bytes;
		if (m == 0)
			break;
		usleep(100000);
	}
	return m;
}

START_TEST(test_retained_chunk_pinned)
{
	/* One 32 MiB chunk: over the pooled sizes, so its memory is unmapped
	 * (and leaves the count) as soon as nothing holds it. */
	const uint64_t chunk = UINT64_C(32) << 20;
	struct fixture fx;
	struct got g = { 0 };
	uint8_t *head = malloc(4096);
	uint64_t before, reads;

	fx_open(&fx, "pinned", 3, chunk, chunk, 1000);
	/* A reader's fetch of part of the chunk leaves it retained. */
	ck_assert_int_eq(tc_read(fx.c, &fx.o, 0, 4096, head), 4096);
	before = stats(&fx).memory_in_use_bytes;
	ck_assert_uint_eq(before, chunk);
	reads = stats(&fx).backend_reads; /* its parts */

	/* Handed over in place: no reply buffer while fn runs. */
	reply_check(&fx, 3, 4096, 65536, &g);
	ck_assert_uint_eq(g.n_mem, 1);
	ck_assert_uint_eq(g.in_use, chunk);
	ck_assert_uint_eq(stats(&fx).memory_in_use_bytes, chunk);

	/* The rest of it: once read whole the retained chunk goes, so the
	 * pin was released. */
	reply_check(&fx, 3, 4096 + 65536, (size_t)chunk - 4096 - 65536, &g);
	ck_assert_uint_eq(g.in_use, chunk);
	ck_assert_uint_eq(memory_settled(&fx), 0);
	ck_assert_uint_eq(stats(&fx).backend_reads, reads);

	free(g.bytes);
	free(head);
	fx_free(&fx);
}
END_TEST

static int find_blob(const char *dir, char *out, size_t len)
{
	char cmd[700];
	FILE *p;
	int ok;

	snprintf(cmd, sizeof(cmd),
		 "find '%s/blobs' -mindepth 2 -type f ! -path '*/blobs/tmp/*' "
		 "| head -1",
		 dir);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ok = fgets(out, (int)len, p) != NULL;
	pclose(p);
	if (ok)
		out[strcspn(out, "\n")] = '\0';
	return ok ? 0 : -ENOENT;
}

/* Fills the cache with the object and waits (at most 10 s) until its
 * blob's ctime is over a second older than the clock: a blob is
 * remembered as checked only then (cache/verified.c). */
static void fill_and_age(struct fixture *fx)
{
	char blob[700];
	struct timespec now = { 0 };
	struct stat st;
	int i;

	ck_assert_int_eq(tc_fill(fx->c, &fx->o, NULL), 0);
	(void)stats(fx); /* indexes the queued rows */
	for (i = 0; i < 200 && find_blob(fx->dir, blob, sizeof(blob)) != 0; i++)
		usleep(50000);
	ck_assert_int_eq(find_blob(fx->dir, blob, sizeof(blob)), 0);
	ck_assert_int_eq(stat(blob, &st), 0);
	for (i = 0; i < 1000; i++) {
		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec > st.st_ctim.tv_sec + 1)
			break;
		usleep(10000);
	}
	ck_assert_int_gt(now.tv_sec, st.st_ctim.tv_sec + 1);
}

START_TEST(test_blob_checked_then_spliced)
{
	struct fixture fx;
	struct got g = { 0 };
	char blob[700];
	int fd;
	uint8_t b;

	fx_open(&fx, "splice", 5, 1 << 20, 1 << 20, 1000);
	fill_and_age(&fx);
	ck_assert_uint_eq(memory_settled(&fx), 0);

	/* First: read and checked, handed over from memory. */
	reply_check(&fx, 5, 65536, 131072, &g);
	ck_assert_uint_eq(g.n_mem, 1);
	ck_assert_uint_eq(g.n_fd, 0);
	/* Again: the checked blocks go as the blob's descriptor. */
	reply_check(&fx, 5, 65536, 131072, &g);
	ck_assert_uint_eq(g.n_fd, 1);
	/* Part of them and an unchecked block: read and checked. */
	reply_check(&fx, 5, 131072, 131072, &g);
	ck_assert_uint_eq(g.n_mem, 1);
	ck_assert_uint_eq(stats(&fx).crc_failures, 0);

	/* Rewritten after the check: the change shows in its ctime, so the
	 * blocks are read and checked again, the CRC fails, and the bytes
	 * come from the backend. */
	ck_assert_int_eq(find_blob(fx.dir, blob, sizeof(blob)), 0);
	fd = open(blob, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, 70000), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, 70000), 1);
	close(fd);
	reply_check(&fx, 5, 65536, 131072, &g);
	ck_assert_uint_eq(g.n_fd, 0);
	ck_assert_uint_eq(stats(&fx).crc_failures, 1);
	ck_assert_uint_eq(stats(&fx).backend_reads, 2);

	free(g.bytes);
	fx_free(&fx);
}
END_TEST

START_TEST(test_inline_across_and_end)
{
	struct fixture fx;
	struct got g = { 0 };

	/* 100 000-byte chunks stored inline, 250 000 bytes in all. */
	fx_open(&fx, "inline", 7, 250000, 100000, 100000);
	ck_assert_int_eq(tc_fill(fx.c, &fx.o, NULL), 0);
	(void)stats(&fx);
	reply_check(&fx, 7, 1000, 5000, &g);
	ck_assert_uint_eq(g.n_mem, 1);
	reply_check(&fx, 7, 99000, 5000, &g);	/* across chunks */
	reply_check(&fx, 7, 240000, 65536, &g); /* short at the end */
	reply_check(&fx, 7, 250000, 4096, &g);	/* at the end: no pieces */
	ck_assert_uint_eq(g.len, 0);
	ck_assert_uint_eq(stats(&fx).backend_reads, 3);
	ck_assert_uint_eq(memory_settled(&fx), 0);
	free(g.bytes);
	fx_free(&fx);
}
END_TEST

/* tc_file_ready() (the push at open): a chunk stored in the disk
 * cache, not in memory (a new cache on the directory, as after a
 * remount), inline or as a blob, is copied without a backend read; a
 * chunk not stored is -ENOENT, never fetched. */
START_TEST(test_read_ready_stored)
{
	const uint64_t size = 150000;
	uint8_t *buf = malloc(size);
	struct cache_options o = { .size_bytes = 256 << 20,
				   .chunk_size = 200000,
				   .inline_max_set = true };
	struct fixture fx;
	int blob;
	uint64_t i;

	ck_assert_ptr_nonnull(buf);
	for (blob = 0; blob < 2; blob++) {
		o.inline_max = blob ? 1000 : 200000;
		fx_open(&fx, blob ? "ready-blob" : "ready-inline", 13, size,
			o.chunk_size, o.inline_max);
		/* Not stored: not fetched either. */
		ck_assert_int_eq(tc_file_ready(fx.f, 0, size, buf), -ENOENT);
		ck_assert_uint_eq(stats(&fx).backend_reads, 0);
		ck_assert_int_eq(tc_fill(fx.c, &fx.o, NULL), 0);
		/* A new cache on the directory: nothing in memory. */
		tc_file_close(fx.f);
		cache_free(fx.c);
		o.dir = fx.dir;
		o.backend_id = fx.src;
		ck_assert_int_eq(cache_open(&o, fx.be, &fx.c), 0);
		ck_assert_int_eq(tc_file_open(fx.c, &fx.o, &fx.f), 0);
		memset(buf, 0, size);
		ck_assert_int_eq(tc_file_ready(fx.f, 0, size, buf),
				 (ssize_t)size);
		for (i = 0; i < size; i++)
			if (buf[i] != byte_at(13, i))
				ck_abort_msg("byte %llu differs",
					     (unsigned long long)i);
		ck_assert_uint_eq(stats(&fx).backend_reads, 0);
		ck_assert_uint_eq(stats(&fx).hits, 1);
		fx_free(&fx);
	}
	free(buf);
}
END_TEST

START_TEST(test_cold_reply)
{
	struct fixture fx;
	struct got g = { 0 };

	fx_open(&fx, "cold", 9, 3 << 20, 1 << 20, 1000);
	reply_check(&fx, 9, 500000, 1 << 20, &g); /* across, fetched */
	reply_check(&fx, 9, (2 << 20) + 10, 70000, &g);
	ck_assert_uint_eq(memory_settled(&fx), 0);
	free(g.bytes);
	fx_free(&fx);
}
END_TEST

/* The reply lets the reader close the file: RELEASE may free f before fn
 * returns (cache.h: nothing reads f after fn). With the disk cache off. */
struct close_in_fn {
	struct tc_file *f;
	size_t len;
};

static int close_fn(void *arg, const struct cache_piece *p, unsigned n)
{
	struct close_in_fn *a = arg;

	a->len = n ? p[0].len : 0;
	tc_file_close(a->f); /* the RELEASE that raced the reply */
	return 0;
}

START_TEST(test_uncached_close_in_reply)
{
	struct fixture fx;
	struct close_in_fn a;
	struct cache *pt;
	int i;

	fx_open(&fx, "uncclose", 11, 3 << 20, 1 << 20, 1000);
	ck_assert_int_eq(cache_new(fx.be, &pt), 0);
	for (i = 0; i < 50; i++) {
		ck_assert_int_eq(tc_file_open(pt, &fx.o, &a.f), 0);
		ck_assert_int_eq(tc_file_reply(a.f, 4096, 65536, close_fn, &a),
				 65536);
		ck_assert_uint_eq(a.len, 65536);
	}
	cache_free(pt);
	fx_free(&fx);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "retained_chunk_pinned", test_retained_chunk_pinned },
		{ "blob_checked_then_spliced", test_blob_checked_then_spliced },
		{ "inline_across_and_end", test_inline_across_and_end },
		{ "read_ready_stored", test_read_ready_stored },
		{ "cold_reply", test_cold_reply },
		{ "uncached_close_in_reply", test_uncached_close_in_reply },
	};

	return unit_run_in_tmpdir(unit_suite("cache_reply", cases,
					     sizeof(cases) / sizeof(cases[0])),
				  "/tmp/check_cache_reply.XXXXXX", root,
				  sizeof(root));
}
