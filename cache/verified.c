/*
 * verified: which blob blocks this process checked, so a reply may splice
 * them from the blob's file instead of reading them (read.c,
 * cache_read() replies).
 *
 * The rule (docs/DESIGN.md, "Replies without copies"): a blob may be
 * handed to the reply as its file descriptor (spliced by the kernel, never read here)
 * only when this process has checked the CRC blocks served, on this very
 * file, and the file has not changed since. The check is on (dev, ino,
 * size, mtime, ctime) from an fstat() of the open blob before the
 * checking read, compared with one just before the reply:
 *   - a blob is immutable once renamed into place; anything that changes
 *     its bytes through the filesystem (write, truncate, a writable
 *     mapping written back, a copy over it) sets its ctime to the current
 *     time, which utimensat() cannot set back;
 *   - ctime has the kernel's clock-tick granularity, so a change in the
 *     same tick as the blob's last one could keep it: a blob is remembered
 *     only when its ctime is over a second older than the clock at the
 *     checking read, so any later change shows a newer ctime;
 *   - a reused inode (a blob evicted, another created) has a new ctime.
 * What this does not see: a change between the fstat() before the reply
 * and the kernel reading the page (microseconds; the kernel then serves
 * the bytes as they are), and damage below the filesystem (a disk that
 * returns other bytes for a page read again after eviction from the page
 * cache, without an error). A read that is not spliced checks its CRCs
 * as before.
 *
 * The table is direct-mapped by inode (a collision forgets the older
 * blob, which is then read and checked again), allocated on first use.
 */
#include "cache/cache_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECKED_SLOTS 4096
#define CHECKED_BLOCKS 256 /* 16 MiB of blob; blocks past it: never spliced */

struct checked_blob {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	uint64_t bits[CHECKED_BLOCKS / 64]; /* CRC blocks checked */
};

struct verified {
	pthread_mutex_t lock; /* protects slot[]; innermost */
	struct checked_blob slot[CHECKED_SLOTS];
};

static struct verified *verified_table(struct cache *c)
{
	struct verified *t, *none = NULL;

	t = __atomic_load_n(&c->verified, __ATOMIC_ACQUIRE);
	if (t != NULL)
		return t;
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	if (!__atomic_compare_exchange_n(&c->verified, &none, t, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		pthread_mutex_destroy(&t->lock);
		free(t);
		return none;
	}
	return t;
}

void verified_free(struct cache *c)
{
	struct verified *t = c->verified;

	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t);
	c->verified = NULL;
}

static bool verified_same(const struct checked_blob *b, const struct stat *st)
{
	return b->ino == st->st_ino && b->dev == st->st_dev &&
	       b->size == st->st_size &&
	       b->mtime.tv_sec == st->st_mtim.tv_sec &&
	       b->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       b->ctime.tv_sec == st->st_ctim.tv_sec &&
	       b->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static struct checked_blob *verified_slot(struct verified *t,
					  const struct stat *st)
{
	uint64_t k = ((uint64_t)st->st_ino * UINT64_C(0x9e3779b97f4a7c15)) ^
		     (uint64_t)st->st_dev;

	return &t->slot[(k >> 32) % CHECKED_SLOTS];
}

bool verified_covers(struct cache *c, const struct stat *st, uint32_t b0,
		     uint32_t b1)
{
	struct verified *t = __atomic_load_n(&c->verified, __ATOMIC_ACQUIRE);
	struct checked_blob *b;
	bool ok;
	uint32_t i;

	if (t == NULL || b1 >= CHECKED_BLOCKS)
		return false;
	pthread_mutex_lock(&t->lock);
	b = verified_slot(t, st);
	ok = verified_same(b, st);
	for (i = b0; ok && i <= b1; i++)
		ok = (b->bits[i / 64] >> (i % 64)) & 1;
	pthread_mutex_unlock(&t->lock);
	return ok;
}

void verified_mark(struct cache *c, const struct stat *st, uint32_t b0,
		   uint32_t b1)
{
	struct verified *t;
	struct checked_blob *b;
	struct timespec now;
	uint32_t i;

	clock_gettime(CLOCK_REALTIME, &now);
	if (b1 >= CHECKED_BLOCKS || st->st_ctim.tv_sec + 1 >= now.tv_sec)
		return; /* see above: too recent to tell a change by */
	t = verified_table(c);
	if (t == NULL)
		return;
	pthread_mutex_lock(&t->lock);
	b = verified_slot(t, st);
	if (!verified_same(b, st)) {
		memset(b, 0, sizeof(*b));
		b->dev = st->st_dev;
		b->ino = st->st_ino;
		b->size = st->st_size;
		b->mtime = st->st_mtim;
		b->ctime = st->st_ctim;
	}
	for (i = b0; i <= b1; i++)
		b->bits[i / 64] |= UINT64_C(1) << (i % 64);
	pthread_mutex_unlock(&t->lock);
}
