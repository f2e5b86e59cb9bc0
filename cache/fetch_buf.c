/*
 * fetch_buf: the fetch engine's buffers (fetch_impl.h). Every chunk buffer
 * and reply buffer is accounted in the budget from when it is taken (from
 * a pool of reusable buffers or newly mapped) until it is unmapped.
 * Buffers are mmap()ed, so what the budget counts is what the process
 * holds, without the allocator's caching. Buffers of up to FETCH_POOL_BUF bytes
 * come in power-of-two classes from 64 KiB and are kept in a small pool
 * per class for reuse (mapping, faulting in and zeroing a buffer per
 * chunk costs more than fetching a small one): 16 buffers, or 16 MiB of
 * a small class; pooled buffers stay accounted, and a reader short of
 * memory unmaps them first.
 */
#include "cache/fetch_impl.h"

#include <sys/mman.h>

static void *map(uint64_t bytes)
{
	void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}
/* Caller holds f->lock. */
static void account(struct fetch *f, uint64_t bytes)
{
	f->in_use += bytes;
	if (f->in_use > f->high_water)
		f->high_water = f->in_use;
}
/* Caller holds f->lock. */
static void unaccount(struct fetch *f, uint64_t bytes)
{
	f->in_use -= bytes;
	pthread_cond_broadcast(&f->memory);
}
/* The pool class of a buffer of n bytes, or -1: mapped to its size. */
static int class_of(uint64_t n)
{
	int k = 0;

	if (n > FETCH_POOL_BUF)
		return -1;
	while (k < FETCH_POOL_CLASSES - 1 &&
	       (UINT64_C(1) << (FETCH_POOL_MIN_SHIFT + k)) < n)
		k++;
	return k;
}
/* Bytes a buffer for n bytes takes: mapped, and accounted. */
uint64_t fetch_buf_size(uint64_t n)
{
	int k = class_of(n);

	return k < 0 ? fetch_round_page(n)
		     : UINT64_C(1) << (FETCH_POOL_MIN_SHIFT + k);
}
/* Caller holds f->lock: what taking a buffer for n bytes would add to the
 * account (nothing when the pool has one). */
uint64_t fetch_buf_need(const struct fetch *f, uint64_t n)
{
	int k = class_of(n);

	return k >= 0 && f->n_pool[k] > 0 ? 0 : fetch_buf_size(n);
}
/* Caller holds f->lock: a buffer for n bytes, accounted, from the pool or
 * newly mapped; NULL if out of memory. */
void *fetch_buf_take(struct fetch *f, uint64_t n)
{
	int k = class_of(n);
	void *p;

	if (k >= 0 && f->n_pool[k] > 0)
		return f->pool[k][--f->n_pool[k]];
	p = map(fetch_buf_size(n));
	if (p != NULL)
		account(f, fetch_buf_size(n));
	return p;
}

/* Idle buffers class k keeps (FETCH_POOL_MAX at most). */
static unsigned pool_keep(int k)
{
	uint64_t n = FETCH_POOL_CLASS_BYTES >> (FETCH_POOL_MIN_SHIFT + k);

	return n > FETCH_POOL_MAX_LARGE ? (unsigned)n : FETCH_POOL_MAX_LARGE;
}
/* Caller holds f->lock: gives back a buffer taken for n bytes, to the
 * pool (still accounted) or out of the account. Returns it if the caller
 * must munmap() it (fetch_buf_size(n) bytes) after unlocking, else NULL. */
void *fetch_buf_give(struct fetch *f, void *p, uint64_t n)
{
	int k = class_of(n);

	if (p == NULL)
		return NULL;
	if (k >= 0 && f->n_pool[k] < pool_keep(k)) {
		f->pool[k][f->n_pool[k]++] = p;
		pthread_cond_broadcast(&f->memory);
		return NULL;
	}
	unaccount(f, fetch_buf_size(n));
	return p;
}
/* Unmaps one idle pooled buffer (the largest), with f->lock held and
 * dropped while unmapping. Returns false if the pools are empty. */
bool fetch_pool_release_one(struct fetch *f)
{
	void *p;
	uint64_t bytes;
	int k;

	for (k = FETCH_POOL_CLASSES - 1; k >= 0; k--)
		if (f->n_pool[k] > 0)
			break;
	if (k < 0)
		return false;
	p = f->pool[k][--f->n_pool[k]];
	bytes = UINT64_C(1) << (FETCH_POOL_MIN_SHIFT + k);
	unaccount(f, bytes);
	pthread_mutex_unlock(&f->lock);
	munmap(p, (size_t)bytes);
	pthread_mutex_lock(&f->lock);
	return true;
}
/* Caller holds f->lock: bytes held outside chunks and pools, i.e. reply
 * buffers (fetch_buffer_alloc()): what no reclaim can free. */
uint64_t fetch_replies_bytes(const struct fetch *f)
{
	uint64_t held = f->chunk_bytes;
	int k;

	for (k = 0; k < FETCH_POOL_CLASSES; k++)
		held += (uint64_t)f->n_pool[k] << (FETCH_POOL_MIN_SHIFT + k);
	return f->in_use > held ? f->in_use - held : 0;
}
void *fetch_buffer_alloc(struct fetch *f, size_t len)
{
	void *p;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->active_ns = clock_now_ns();
	p = fetch_buf_take(f, len ? len : 1);
	pthread_mutex_unlock(&f->lock);
	return p;
}
void fetch_buffer_free(struct fetch *f, void *p, size_t len)
{
	void *unmap;

	if (p == NULL)
		return;
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	unmap = fetch_buf_give(f, p, len ? len : 1);
	pthread_mutex_unlock(&f->lock);
	if (unmap != NULL)
		munmap(unmap, (size_t)fetch_buf_size(len ? len : 1));
}
