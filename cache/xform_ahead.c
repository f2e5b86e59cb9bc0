/*
 * xform_ahead: a transform's runs ahead of its reader (cache/xform.h,
 * xform_ahead()). A reader's lookup of a file of a transform tree queues
 * the next files of its order here (fs/order.c, fs_order_xf_ahead()), and
 * these threads run them (xform_size(): the run is stored, or joined if
 * a reader or another process makes it, or found stored), so that the
 * reader's lookup finds the output made.
 *
 * Threads: one per transform slot but one (`workers` - 1, at least 1),
 * started at the first queued object. A reader's own lookup runs in its
 * FUSE thread, not here. An ahead thread's run takes a slot only when one
 * is free (xform_ahead_slot(): transform_reserve() polled for at most
 * XFORM_AHEAD_SLOT_WAIT_MS), and only once it is the object's runner (a
 * slot held while joining a reader's run would keep another reader's run
 * waiting); with none in time it ends with -EAGAIN, which is no failure
 * (not counted, logged nor backed off), and a reader that had joined it
 * runs the object itself (xform_size() asks again). With workers >= 2 the ahead
 * threads leave a slot to readers (the verifier, verify = P, may take
 * it); with workers = 1 a reader may wait for one ahead run.
 *
 * Queue: FIFO, at most XFORM_AHEAD_QUEUE_MAX objects (more are not
 * queued: a later lookup asks again); an object is queued again only
 * once XFORM_AHEAD_RECENT others were queued after it (a ring of sample
 * hashes), so the overlapping windows of consecutive lookups queue each
 * object once. The queue's length is the stats' `queued` gauge.
 *
 * Memory: a run holds its source whole and its output (at most
 * output_max), so the ahead threads hold at most threads x (source +
 * output_max); a source larger than XFORM_AHEAD_SOURCE_MAX is never run
 * ahead (its reader's lookup runs it).
 *
 * Stop (xform_stop(), before the cache goes): queued objects are dropped
 * and the threads joined; a run in progress ends first, bounded by its
 * source's read and the transform's timeout.
 *
 * Only with a cache that stores: otherwise a run ahead is kept nowhere
 * its reader finds it (the stash is for the run's own output read). Queued entries
 * own copies of their key and etag: nothing here points into a tree.
 *
 * Lock: x->alock protects the queue, the ring and the threads' state;
 * never held across a run.
 */
#include "cache/xform_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/thread.h"

/* xform_size() for the ahead threads: true if it succeeded and this
 * thread made the run (rather than found it stored, or joined another's);
 * a stored output is queued for verify, as by a reader's lookup. */
static bool size_ahead(struct xform *x, const struct cache_object *src,
		       uint64_t *size)
{
	bool made = false;

	if (xform_run_size(x, src, size, true, &made))
		return false;
	if (!made)
		xform_verify_queue(x, src);
	return made;
}

static void *ahead_main(void *arg)
{
	struct xform *x = arg;

	pthread_mutex_lock(&x->alock);
	for (;;) {
		struct xform_entry *e;
		struct cache_object src;
		uint64_t size;

		while (!x->ahead && !x->astop)
			pthread_cond_wait(&x->acond, &x->alock);
		if (x->astop)
			break;
		e = x->ahead;
		x->ahead = e->next;
		if (!x->ahead)
			x->atail = &x->ahead;
		x->an--;
		pthread_mutex_unlock(&x->alock);
		src = (struct cache_object){ .key = e->key,
					     .key_len = e->key_len,
					     .etag = e->etag,
					     .etag_len = e->etag_len,
					     .size = e->src_size };
		/* Its errors are the run's, logged and counted there; the
		 * reader's lookup meets them again (or the backoff). No slot
		 * in time: the reader runs it. (Its reader's lookup queues
		 * it for verify, if sampled: as a lookup of any output not
		 * made in its own thread.) */
		if (size_ahead(x, &src, &size))
			count(&x->ahead_runs, 1);
		transform_unreserve(x->t); /* if no run used it */
		xform_entry_free(e);
		pthread_mutex_lock(&x->alock);
	}
	pthread_mutex_unlock(&x->alock);
	return NULL;
}

/* Caller holds alock: whether h was queued among the last
 * XFORM_AHEAD_RECENT; if not, it is now. */
static bool recent_seen(struct xform *x, uint64_t h)
{
	unsigned i;

	for (i = 0; i < XFORM_AHEAD_RECENT; i++)
		if (x->arecent[i] == h)
			return true;
	x->arecent[x->anext] = h;
	x->anext = (x->anext + 1) % XFORM_AHEAD_RECENT;
	return false;
}

/* Caller holds alock: starts one more thread if fewer than wanted run.
 * Returns whether any runs. */
static bool threads_ensure(struct xform *x)
{
	unsigned want = transform_workers(x->t);

	want = want > 1 ? want - 1 : 1;
	if (want > XFORM_AHEAD_THREADS_MAX)
		want = XFORM_AHEAD_THREADS_MAX;
	if (x->nthreads < want &&
	    thread_start(&x->athreads[x->nthreads], ahead_main, x) == 0)
		x->nthreads++;
	return x->nthreads > 0;
}

void xform_ahead(struct xform *x, const struct cache_object *src)
{
	struct xform_entry *e;
	uint64_t h;

	if (src->size > XFORM_AHEAD_SOURCE_MAX || !cache_stores(x->c))
		return;
	h = xform_object_hash(src);
	if (!h)
		return;
	pthread_mutex_lock(&x->alock);
	if (x->astop || x->an >= XFORM_AHEAD_QUEUE_MAX || recent_seen(x, h)) {
		pthread_mutex_unlock(&x->alock);
		return;
	}
	pthread_mutex_unlock(&x->alock);
	e = xform_entry_new(src);
	if (!e)
		return;
	e->src_size = src->size;
	pthread_mutex_lock(&x->alock);
	if (x->astop || x->an >= XFORM_AHEAD_QUEUE_MAX || !threads_ensure(x)) {
		pthread_mutex_unlock(&x->alock);
		xform_entry_free(e);
		return;
	}
	*x->atail = e;
	x->atail = &e->next;
	x->an++;
	pthread_cond_signal(&x->acond);
	pthread_mutex_unlock(&x->alock);
}

unsigned xform_ahead_depth(const struct xform *x)
{
	unsigned d = 2 * transform_workers(x->t);
	unsigned files = cache_prefetch_files(x->c);

	if (d > XFORM_AHEAD_DEPTH_MAX)
		d = XFORM_AHEAD_DEPTH_MAX;
	return d < files ? d : files;
}

uint64_t xform_ahead_queued(struct xform *x)
{
	uint64_t n;

	pthread_mutex_lock(&x->alock);
	n = x->an;
	pthread_mutex_unlock(&x->alock);
	return n;
}

void xform_ahead_stop(struct xform *x)
{
	struct xform_entry *e, *next;
	unsigned i, n;

	pthread_mutex_lock(&x->alock);
	x->astop = true;
	n = x->nthreads;
	x->nthreads = 0;
	pthread_cond_broadcast(&x->acond);
	e = x->ahead;
	x->ahead = NULL;
	x->atail = &x->ahead;
	x->an = 0;
	pthread_mutex_unlock(&x->alock);
	for (i = 0; i < n; i++)
		pthread_join(x->athreads[i], NULL);
	for (; e; e = next) {
		next = e->next;
		xform_entry_free(e);
	}
}
