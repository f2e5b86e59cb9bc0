/*
 * fetch_hedge: hedged reads (the policy is in fetch.h). A flight of one
 * part has at most two reads, its first (fetch_part_run()) and its hedge
 * (asked for by fetch_hedge_request(), read by a worker in fetch_worker.c,
 * which runs every read), each into its own buffer: fl->buf is the first's until an answer wins, then
 * the winner's. Each read holds a reference and, under f->lock, clears its
 * *_running flag when it returns (fetch_hedge_arrive()); whichever returns
 * last gives back the buffer that did not win, so no buffer is written
 * after it is freed or served, and the budget counts both while both run.
 */
#include "cache/fetch_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The size class of a read of len bytes: classes 8 times apart, since a
 * large read's time is its transfer, a small one's the first byte. */
static unsigned lat_class(uint64_t len)
{
	unsigned k = 0;

	while (k < FETCH_HEDGE_CLASSES - 1 && len > (UINT64_C(128) << 10)
							      << (3 * k))
		k++;
	return k;
}
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}
/* Caller holds f->lock: a backend read of len bytes took ns. Every
 * FETCH_HEDGE_RECOMPUTE samples (once there are FETCH_HEDGE_MIN_SAMPLES) sets the
 * class's median and threshold: twice its 95th percentile, at least
 * FETCH_HEDGE_FLOOR_NS. */
void fetch_lat_record(struct fetch *f, uint64_t len, uint64_t ns)
{
	struct hedge_class *hc = &f->lat[lat_class(len)];
	uint32_t sorted[FETCH_HEDGE_WINDOW];
	uint64_t us = ns / 1000, p95;

	hc->us[hc->next] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
	hc->next = (hc->next + 1) % FETCH_HEDGE_WINDOW;
	if (hc->n < FETCH_HEDGE_WINDOW)
		hc->n++;
	hc->since++;
	if (hc->n < FETCH_HEDGE_MIN_SAMPLES ||
	    (hc->since < FETCH_HEDGE_RECOMPUTE && hc->after_ns != 0))
		return;
	hc->since = 0;
	/* Until the ring is full its samples are its first n slots. */
	memcpy(sorted, hc->us, hc->n * sizeof(*sorted));
	qsort(sorted, hc->n, sizeof(*sorted), cmp_u32);
	hc->p50_ns = (uint64_t)sorted[hc->n / 2] * 1000;
	p95 = (uint64_t)sorted[hc->n * 95 / 100] * 1000;
	hc->after_ns =
		2 * p95 > FETCH_HEDGE_FLOOR_NS ? 2 * p95 : FETCH_HEDGE_FLOOR_NS;
}
/* Caller holds f->lock: when fl may be hedged, the monotonic time at
 * which its first read is overdue; else 0. Only a flight of one part
 * (its buffer is then the read's own, so a hedge can bring another),
 * with its version pinned (etag), whose first read runs and which has no
 * hedge yet. */
uint64_t fetch_hedge_due(const struct fetch *f, const struct flight *fl)
{
	uint64_t after = f->lat[lat_class(fl->len)].after_ns;

	if (!f->hedge_on || after == 0 || fl->done || fl->hedged ||
	    fl->n_parts != 1 || !fl->first_running || !fl->has_etag ||
	    fl->etag_len == 0)
		return 0;
	return fl->start_ns + after;
}
/* Caller holds f->lock: should a reader whose chunk of len bytes is not
 * in flight leave its read to a worker and wait, so it can hedge it?
 * Only when hedging may fire for that class, a worker is idle, and reads
 * take long enough (median FETCH_HANDOFF_MIN_NS) that the two context
 * switches of the hand-off do not count. */
bool fetch_hedge_handoff(const struct fetch *f, uint64_t len)
{
	const struct hedge_class *hc = &f->lat[lat_class(len)];

	return f->hedge_on && hc->after_ns != 0 &&
	       hc->p50_ns >= FETCH_HANDOFF_MIN_NS && f->idle_workers > 0 &&
	       len <= FETCH_PART_SIZE;
}
/* Caller holds f->lock: gives back a read's buffer of fl that fl no
 * longer uses. Returns it if the caller must munmap() it
 * (fetch_buf_size(fl->len) bytes) after unlocking, else NULL. */
static void *spare_give(struct fetch *f, struct flight *fl, uint8_t *buf)
{
	f->chunk_bytes -= fetch_buf_size(fl->len);
	return fetch_buf_give(f, buf, fl->len);
}
/* Caller holds f->lock: one of the two reads of hedged flight fl (the
 * hedge, or the first) returned into buf, a valid answer or not (ok).
 * The first valid answer wins; an error waits for the other read while
 * it runs. Returns true if the caller finishes fl with its answer (buf is
 * then fl->buf, or the caller's error stands), false if it just leaves.
 * A buffer no read or reader will use again is given back; *unmap is set
 * if the caller must munmap() it after unlocking. */
bool fetch_hedge_arrive(struct fetch *f, struct flight *fl, uint8_t *buf,
			bool ok, bool hedge, void **unmap)
{
	bool other;

	if (hedge)
		fl->hedge_running = false;
	else
		fl->first_running = false;
	other = hedge ? fl->first_running : fl->hedge_running;
	if (fl->done || (!ok && other)) {
		if (buf != fl->buf) /* the first's stays until fl ends */
			*unmap = spare_give(f, fl, buf);
		return false;
	}
	if (!ok) { /* both failed: fl fails with this, the later, error */
		if (buf != fl->buf)
			*unmap = spare_give(f, fl, buf);
		return true;
	}
	if (buf != fl->buf) { /* the hedge won */
		uint8_t *old = fl->buf;

		fl->buf = buf;
		f->hedge_wins++;
		/* A read still running writes into old: it gives it back
		 * when it returns. */
		if (!other)
			*unmap = spare_give(f, fl, old);
	}
	return true;
}
/* Caller holds f->lock: asks for the hedge of flight fl (fetch_hedge_due() has
 * passed): a second read of the same bytes of the same version, into a
 * buffer of its own, run by an idle worker, so the waiter goes on waiting
 * for whichever answer comes first. Only with a worker idle, a connection
 * free now (taken here for the worker), memory under the prefetches'
 * share of the budget (a hedge is optional work like a prefetch: it never
 * waits, never reclaims, so a reader always finds room) and the credit
 * for its bytes (fetch_hedge_earn()). Returns false if it could not be
 * asked for now. */
void fetch_hedge_earn(struct fetch *f, uint64_t len)
{
	f->hedge_credit += len / FETCH_HEDGE_BUDGET_DIV;
	if (f->hedge_credit > FETCH_HEDGE_CREDIT_MAX)
		f->hedge_credit = FETCH_HEDGE_CREDIT_MAX;
}

bool fetch_hedge_request(struct fetch *f, struct flight *fl)
{
	uint8_t *buf;

	if (f->idle_workers == 0 || !fetch_slot_free(f) ||
	    f->hedge_credit < fl->len ||
	    !prefetch_may_take(f->in_use, fetch_buf_need(f, fl->len),
			       f->budget))
		return false;
	buf = fetch_buf_take(f, fl->len);
	if (buf == NULL)
		return false;
	f->hedge_credit -= fl->len;
	f->chunk_bytes += fetch_buf_size(fl->len);
	f->inflight++;
	fl->refs++; /* the hedge's, until it returns */
	fl->hedged = fl->hedge_running = true;
	fl->hedge_buf = buf;
	fl->hnext = NULL;
	if (f->hedge_tail != NULL)
		f->hedge_tail->hnext = fl;
	else
		f->hedge_head = fl;
	f->hedge_tail = fl;
	f->hedges++;
	pthread_cond_signal(&f->work);
	return true;
}
