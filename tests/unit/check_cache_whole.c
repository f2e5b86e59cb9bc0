/*
 * check_cache_whole: the whole-object check (cache.h, "What the store
 * vouches for"; cache/whole.c), through cache.h.
 *
 * The store is a posix backend wrapped by a vouching backend: every read
 * also reports a claim about the whole object (a CRC-32C or an MD5 of the
 * file, computed here), can flip one bit of the first reply that holds a
 * given offset (headers, that is the claim, unchanged), or claim a wrong
 * checksum once. Objects are cut into 128 KiB chunks, so a read of one
 * is several ranged backend reads, none of which the claim can check.
 *
 * Covered: an object held whole is checked and counted (CRC-32C combined
 * from the chunks, MD5 read back), and stays cached; one bit flipped in
 * one ranged reply is found once the object is whole, counted, every
 * chunk dropped, and a re-read fetches and returns the right bytes;
 * chunks stored by an earlier cache of the same directory count toward
 * "whole" (read back for their CRC); a mismatch drops the object's chunks
 * at other chunk sizes too; replies claiming different checksums drop it;
 * a backend that vouches for nothing, and a one-chunk object the backend
 * checked whole, cost no check. Waits for the checker are polls of the
 * counters with a bound that tells a hang from a slow machine.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
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
#include "unit.h"
#include "util/crc32c.h"
#include "util/log.h"
#include "util/md5.h"

#define CHUNK (UINT64_C(128) << 10)
#define OBJ_SIZE (5 * CHUNK + 1000) /* 6 chunks, the last short */
#define NO_FLIP UINT64_MAX

static char root[64];

/* ---- the vouching backend ---- */

struct vouch {
	struct backend base; /* first: the cache sees a struct backend */
	struct backend *inner;
	enum backend_claim_kind kind;
	pthread_mutex_t lock; /* protects what follows */
	uint64_t flip_at;     /* flip bit 4 of this object byte once */
	bool wrong_once;      /* the next claim is wrong */
	unsigned reads;
	/* The claims of "f": */
	uint32_t crc;
	uint8_t md5[MD5_LEN];
	uint64_t size;
};

static int vouch_read(struct backend *be, const struct backend_read *r,
		      size_t *nread)
{
	struct vouch *v = (struct vouch *)be;
	int rc;

	rc = v->inner->ops->read(v->inner, r, nread);
	pthread_mutex_lock(&v->lock);
	v->reads++;
	if (rc == 0 && v->flip_at != NO_FLIP && v->flip_at >= r->offset &&
	    v->flip_at < r->offset + *nread) {
		((uint8_t *)r->buf)[v->flip_at - r->offset] ^= 0x10;
		v->flip_at = NO_FLIP;
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

static int vouch_read_claim(struct backend *be, const struct backend_read *r,
			    size_t *nread, struct backend_claim *claim)
{
	struct vouch *v = (struct vouch *)be;
	int rc = vouch_read(be, r, nread);

	memset(claim, 0, sizeof(*claim));
	claim->kind = v->kind;
	claim->crc32c = v->crc;
	memcpy(claim->md5, v->md5, MD5_LEN);
	pthread_mutex_lock(&v->lock);
	if (v->wrong_once) {
		claim->crc32c ^= 1;
		claim->md5[0] ^= 1;
		v->wrong_once = false;
	}
	pthread_mutex_unlock(&v->lock);
	/* A reply of the whole object is checked, as the real backends do. */
	if (rc == 0 && r->offset == 0 && r->len == v->size)
		claim->checked =
			v->kind == BACKEND_CLAIM_CRC32C &&
			crc32c_update(0, r->buf, r->len) == claim->crc32c;
	return rc;
}

static const struct backend_ops vouch_ops = {
	.name = "vouching",
	.read = vouch_read,
	.read_claim = vouch_read_claim,
};

static const struct backend_ops silent_ops = {
	.name = "silent",
	.read = vouch_read,
};

/* ---- fixture ---- */

struct fixture {
	char src[256], dir[256];
	struct vouch v;
	struct cache *c;
	struct backend_stat st;
	struct cache_object obj;
	uint8_t *data;
};

static uint8_t byte_at(uint64_t i)
{
	uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;

	z ^= z >> 29;
	return (uint8_t)(z * 0x94D049BB133111EBull >> 56);
}

static void fx_cache(struct fixture *fx)
{
	struct cache_options o = {
		.dir = fx->dir,
		.backend_id = fx->src,
		.size_bytes = UINT64_C(1) << 30,
		.chunk_size = CHUNK,
	};

	ck_assert_int_eq(cache_open(&o, &fx->v.base, &fx->c), 0);
}

/* A source directory with file "f" of size bytes, claims of kind, a
 * cache (chunks of CHUNK) over it. */
static void fx_init(struct fixture *fx, const char *name,
		    enum backend_claim_kind kind, uint64_t size)
{
	char path[300];
	struct md5 *m;
	FILE *f;
	uint64_t i;

	memset(fx, 0, sizeof(*fx));
	snprintf(fx->src, sizeof(fx->src), "%s/%s-src", root, name);
	snprintf(fx->dir, sizeof(fx->dir), "%s/%s-cache", root, name);
	ck_assert_int_eq(mkdir(fx->src, 0755), 0);
	fx->data = malloc(size);
	ck_assert_ptr_nonnull(fx->data);
	for (i = 0; i < size; i++)
		fx->data[i] = byte_at(i);
	snprintf(path, sizeof(path), "%s/f", fx->src);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(fx->data, 1, size, f), size);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(backend_open(fx->src, NULL, &fx->v.inner), 0);
	fx->v.base.ops = kind == BACKEND_CLAIM_NONE ? &silent_ops : &vouch_ops;
	fx->v.kind = kind;
	fx->v.flip_at = NO_FLIP;
	fx->v.size = size;
	fx->v.crc = crc32c_update(0, fx->data, size);
	m = md5_new();
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(md5_update(m, fx->data, size), 0);
	ck_assert_int_eq(md5_final(m, fx->v.md5), 0);
	md5_free(m);
	pthread_mutex_init(&fx->v.lock, NULL);
	ck_assert_int_eq(fx->v.inner->ops->stat(fx->v.inner, "f", 1, &fx->st),
			 0);
	fx->obj.key = "f";
	fx->obj.key_len = 1;
	fx->obj.etag = fx->st.etag;
	fx->obj.etag_len = fx->st.etag_len;
	fx->obj.size = size;
	fx_cache(fx);
}

static void fx_free(struct fixture *fx)
{
	cache_free(fx->c);
	backend_close(fx->v.inner);
	pthread_mutex_destroy(&fx->v.lock);
	free(fx->data);
}

static struct cache_stats stats(struct fixture *fx)
{
	struct cache_stats s;

	cache_stats_get(fx->c, &s);
	return s;
}

static unsigned reads(struct fixture *fx)
{
	unsigned n;

	pthread_mutex_lock(&fx->v.lock);
	n = fx->v.reads;
	pthread_mutex_unlock(&fx->v.lock);
	return n;
}

/* Reads [from, to) of obj in 64 KiB reads; returns whether every byte was
 * the file's. */
static bool read_range(struct fixture *fx, const struct cache_object *obj,
		       uint64_t from, uint64_t to)
{
	static uint8_t buf[64 << 10];
	bool same = true;
	uint64_t off;

	for (off = from; off < to; off += sizeof(buf)) {
		size_t len = to - off < sizeof(buf) ? (size_t)(to - off)
						    : sizeof(buf);

		ck_assert_int_eq(tc_read(fx->c, obj, off, len, buf),
				 (ssize_t)len);
		same = same && memcmp(buf, fx->data + off, len) == 0;
	}
	return same;
}

/* Waits until the checker has counted want checks and mismatches (at
 * most 30 s: a bound that tells a missing check from a slow one). */
static void wait_counts(struct fixture *fx, uint64_t checked,
			uint64_t mismatches)
{
	struct cache_stats s;
	int i;

	for (i = 0; i < 6000; i++) {
		s = stats(fx);
		if (s.whole_checked >= checked &&
		    s.whole_mismatches >= mismatches)
			break;
		usleep(5000);
	}
	s = stats(fx);
	ck_assert_uint_eq(s.whole_checked, checked);
	ck_assert_uint_eq(s.whole_mismatches, mismatches);
}

/* ---- tests ---- */

/* Read whole, checked, kept: a second read sends nothing to the store. */
static void held_whole_matches(enum backend_claim_kind kind, const char *name)
{
	struct fixture fx;
	unsigned before;

	fx_init(&fx, name, kind, OBJ_SIZE);
	ck_assert(read_range(&fx, &fx.obj, 0, OBJ_SIZE));
	wait_counts(&fx, 1, 0);
	before = reads(&fx);
	ck_assert(read_range(&fx, &fx.obj, 0, OBJ_SIZE));
	ck_assert_uint_eq(reads(&fx), before);
	fx_free(&fx);
}

START_TEST(test_crc32c_match)
{
	held_whole_matches(BACKEND_CLAIM_CRC32C, "crcok");
}
END_TEST

START_TEST(test_md5_match)
{
	held_whole_matches(BACKEND_CLAIM_MD5, "md5ok");
}
END_TEST

/* One bit flipped in one ranged reply: found once the object is held
 * whole, every chunk dropped, the re-read fetched again and right, and
 * then checked and matching. */
static void flipped(enum backend_claim_kind kind, const char *name)
{
	struct fixture fx;
	unsigned before;

	fx_init(&fx, name, kind, OBJ_SIZE);
	fx.v.flip_at = 3 * CHUNK + 777;
	/* The flipped byte may be served before the check (the window). */
	(void)read_range(&fx, &fx.obj, 0, OBJ_SIZE);
	wait_counts(&fx, 0, 1);
	before = reads(&fx);
	ck_assert(read_range(&fx, &fx.obj, 0, OBJ_SIZE));
	ck_assert_uint_ge(reads(&fx), before + 6); /* every chunk again */
	wait_counts(&fx, 1, 1);
	fx_free(&fx);
}

START_TEST(test_crc32c_flip)
{
	flipped(BACKEND_CLAIM_CRC32C, "crcflip");
}
END_TEST

START_TEST(test_md5_flip)
{
	flipped(BACKEND_CLAIM_MD5, "md5flip");
}
END_TEST

START_TEST(test_completed_later)
{
	/* The first cache of the directory stores chunks 0-2 (chunk 1 with a
	 * bit flipped) and goes; the second stores 3-5, and so holds the
	 * object whole: chunks 0-2 are read back for their CRC-32C, the
	 * mismatch is found and everything is fetched again. */
	struct fixture fx;
	unsigned before;

	fx_init(&fx, "later", BACKEND_CLAIM_CRC32C, OBJ_SIZE);
	fx.v.flip_at = CHUNK + 5;
	(void)read_range(&fx, &fx.obj, 0, 3 * CHUNK);
	cache_free(fx.c);
	fx_cache(&fx);
	ck_assert(read_range(&fx, &fx.obj, 3 * CHUNK, OBJ_SIZE));
	wait_counts(&fx, 0, 1);
	before = reads(&fx);
	ck_assert(read_range(&fx, &fx.obj, 0, OBJ_SIZE));
	ck_assert_uint_ge(reads(&fx), before + 6);
	fx_free(&fx);
}
END_TEST

START_TEST(test_other_chunk_sizes)
{
	/* Cached at 64 KiB chunks (as a record view cuts it; fetched in
	 * coalesced reads), checked and kept; then at the cache's 128 KiB
	 * chunks with a bit flipped: the mismatch drops both. */
	struct fixture fx;
	struct cache_object small;
	unsigned before;

	fx_init(&fx, "sizes", BACKEND_CLAIM_CRC32C, OBJ_SIZE);
	small = fx.obj;
	small.chunk_size = UINT64_C(64) << 10;
	ck_assert(read_range(&fx, &small, 0, OBJ_SIZE));
	wait_counts(&fx, 1, 0);
	before = reads(&fx);
	ck_assert(read_range(&fx, &small, 0, OBJ_SIZE));
	ck_assert_uint_eq(reads(&fx), before);
	fx.v.flip_at = 2 * CHUNK;
	(void)read_range(&fx, &fx.obj, 0, OBJ_SIZE);
	wait_counts(&fx, 1, 1);
	before = reads(&fx);
	ck_assert(read_range(&fx, &small, 0, OBJ_SIZE));
	ck_assert_uint_gt(reads(&fx), before);
	fx_free(&fx);
}
END_TEST

START_TEST(test_claims_disagree)
{
	/* Every byte right, but one reply vouched for another checksum: the
	 * object cannot be trusted, so it goes. */
	struct fixture fx;

	fx_init(&fx, "disagree", BACKEND_CLAIM_MD5, OBJ_SIZE);
	fx.v.wrong_once = true;
	ck_assert(read_range(&fx, &fx.obj, 0, OBJ_SIZE));
	wait_counts(&fx, 0, 1);
	ck_assert(read_range(&fx, &fx.obj, 0, OBJ_SIZE));
	wait_counts(&fx, 1, 1);
	fx_free(&fx);
}
END_TEST

START_TEST(test_nothing_vouched)
{
	/* A store that vouches for nothing (posix, nfs), and a one-chunk
	 * object whose whole reply the backend checked: no check to run.
	 * (The stats wait for the stores; nothing is queued for the
	 * checker, so nothing can come later.) */
	struct fixture fx, one;
	struct cache_stats s;

	fx_init(&fx, "silent", BACKEND_CLAIM_NONE, OBJ_SIZE);
	ck_assert(read_range(&fx, &fx.obj, 0, OBJ_SIZE));
	s = stats(&fx);
	ck_assert_uint_eq(s.whole_checked, 0);
	ck_assert_uint_eq(s.whole_mismatches, 0);
	fx_free(&fx);
	fx_init(&one, "onechunk", BACKEND_CLAIM_CRC32C, 100000);
	ck_assert(read_range(&one, &one.obj, 0, 100000));
	s = stats(&one);
	ck_assert_uint_eq(s.whole_checked, 0);
	ck_assert_uint_eq(s.whole_mismatches, 0);
	fx_free(&one);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "crc32c_match", test_crc32c_match },
		{ "md5_match", test_md5_match },
		{ "crc32c_flip", test_crc32c_flip },
		{ "md5_flip", test_md5_flip },
		{ "completed_later", test_completed_later },
		{ "other_chunk_sizes", test_other_chunk_sizes },
		{ "claims_disagree", test_claims_disagree },
		{ "nothing_vouched", test_nothing_vouched },
	};

	log_set_level(LOG_ERR - 1); /* the mismatches are logged */
	return unit_run_in_tmpdir(unit_suite("cache_whole", cases,
					     sizeof(cases) / sizeof(cases[0])),
				  "/tmp/check_cache_whole.XXXXXX", root,
				  sizeof(root));
}
