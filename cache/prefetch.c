/*
 * prefetch: the prefetcher's policy as pure state machines (the contract
 * and the rules are in prefetch.h).
 */
#include "cache/prefetch.h"

#include <string.h>

void prefetch_window_read(struct prefetch_window *w, uint64_t off, uint64_t len,
			  uint64_t size, uint64_t cap, uint64_t *from,
			  uint64_t *to)
{
	uint64_t end = off + len;
	bool seq = w->window > 0 && off + PREFETCH_SLACK >= w->next &&
		   off <= w->next + PREFETCH_SLACK;

	if (cap < PREFETCH_WINDOW_MIN)
		cap = PREFETCH_WINDOW_MIN;
	if (!seq) {
		w->window = PREFETCH_WINDOW_MIN;
		w->ahead = end;
		w->next = end;
		w->grown = end;
		w->start = off;
	} else {
		if (end >= w->grown + PREFETCH_WINDOW_MIN && w->window < cap) {
			w->window = w->window * 2 < cap ? w->window * 2 : cap;
			w->grown = end;
		}
		if (end > w->next)
			w->next = end;
	}
	*from = w->ahead > end ? w->ahead : end;
	*to = end + w->window;
	if (*to > size)
		*to = size;
	if (*to > w->ahead)
		w->ahead = *to;
}

void prefetch_shares(uint64_t memory, uint64_t queue_max,
		     struct prefetch_shares *out)
{
	out->window_cap = prefetch_window_cap(memory);
	out->files = memory / 2;
	out->queue = memory / 4 < queue_max ? memory / 4 : queue_max;
}

uint64_t prefetch_pace_gap(uint64_t avg_ns, uint64_t gap_ns, uint64_t moved)
{
	if (moved > 1)
		gap_ns /= moved;
	if (gap_ns > PREFETCH_GAP_MAX_NS)
		gap_ns = PREFETCH_GAP_MAX_NS;
	return avg_ns ? (avg_ns * 7 + gap_ns) / 8 : gap_ns;
}

uint64_t prefetch_file_bytes(uint64_t avg, uint64_t sample)
{
	return avg ? (avg * 7 + sample) / 8 : sample;
}

uint64_t prefetch_push_last(uint64_t known, uint64_t asked_hi, uint64_t budget,
			    uint64_t active, uint64_t file_bytes,
			    unsigned depth)
{
	uint64_t share = budget / (active ? active : 1);
	uint64_t files = file_bytes ? share / file_bytes : depth;

	if (files < 1)
		files = 1;
	return asked_hi < known + files ? asked_hi : known + files;
}

uint64_t prefetch_window_cap(uint64_t memory)
{
	uint64_t cap = memory / 4;

	if (cap > PREFETCH_WINDOW_MAX)
		cap = PREFETCH_WINDOW_MAX;
	if (cap < PREFETCH_WINDOW_MIN)
		cap = PREFETCH_WINDOW_MIN;
	return cap;
}

bool prefetch_window_chunks(uint64_t end, uint64_t from, uint64_t to,
			    uint64_t chunk_size, uint64_t *first,
			    uint64_t *last)
{
	uint64_t n = (end - 1) / chunk_size + 1;

	if (from >= to)
		return false;
	if (from / chunk_size > n)
		n = from / chunk_size;
	*first = n;
	*last = (to - 1) / chunk_size;
	return n <= *last;
}

void prefetch_window_unit(struct prefetch_window *w, uint64_t end,
			  uint64_t size, uint64_t unit, uint64_t *from,
			  uint64_t *to)
{
	uint64_t want;

	if (w->window == 0 || end < w->start + PREFETCH_WINDOW_MIN)
		return;
	want = (end / unit + 2) * unit;
	if (want > size)
		want = size;
	if (want <= *to)
		return;
	if (*from >= *to) /* nothing asked for by the window */
		*from = w->ahead > end ? w->ahead : end;
	*to = want;
	if (w->ahead < want)
		w->ahead = want;
}

uint64_t prefetch_window_spill(const struct prefetch_window *w, uint64_t end,
			       uint64_t size)
{
	if (w->window == 0 || end < w->start + PREFETCH_WINDOW_MIN ||
	    end + w->window <= size)
		return 0;
	return end + w->window - size;
}

/* The lane of reader, or NULL. */
static struct prefetch_lane *lane_find(struct prefetch_order *o,
				       uint64_t reader)
{
	unsigned i;

	for (i = 0; i < PREFETCH_LANES; i++)
		if (o->lanes[i].seen != 0 && o->lanes[i].reader == reader)
			return &o->lanes[i];
	return NULL;
}

/* A lane for a reader not seen: an unused one, else the least recent. */
static struct prefetch_lane *lane_take(struct prefetch_order *o)
{
	struct prefetch_lane *l = &o->lanes[0];
	unsigned i;

	for (i = 1; i < PREFETCH_LANES; i++)
		if (o->lanes[i].seen < l->seen)
			l = &o->lanes[i];
	return l;
}

uint64_t prefetch_order_moved(const struct prefetch_order *o, uint64_t reader,
			      uint64_t pos)
{
	const struct prefetch_lane *l =
		lane_find((struct prefetch_order *)o, reader);

	return l != NULL && pos > l->pos ? pos - l->pos : 1;
}

uint64_t prefetch_order_floor(const struct prefetch_order *o)
{
	uint64_t floor = o->last;
	unsigned i;

	for (i = 0; i < PREFETCH_LANES; i++) {
		const struct prefetch_lane *l = &o->lanes[i];

		if (l->seen != 0 && o->opens - l->seen < PREFETCH_LANES * 4 &&
		    l->pos >= o->run_lo && l->pos < floor)
			floor = l->pos;
	}
	return floor;
}

void prefetch_order_open(struct prefetch_order *o, uint64_t pos,
			 uint64_t reader, unsigned limit,
			 struct prefetch_open *out)
{
	struct prefetch_lane *lane = lane_find(o, reader);
	bool in_run = o->opened && pos != o->last && pos >= o->run_lo &&
		      pos <= o->reach;
	/* A reader not seen yet, a little ahead of the others. */
	bool joins = lane == NULL && o->opened && o->depth > 0 &&
		     pos > o->reach && pos - o->reach <= PREFETCH_TEAM_SPAN;

	memset(out, 0, sizeof(*out));
	out->from = 1;
	if (lane == NULL) {
		lane = lane_take(o);
		lane->reader = reader;
	}
	lane->pos = pos;
	lane->seen = ++o->opens;
	if (limit == 0)
		return;
	if (!o->opened) {
		o->depth = PREFETCH_DEPTH_START < limit ? PREFETCH_DEPTH_START
							: limit;
		o->run_lo = o->top = o->reach = pos;
		out->rerun = true;
	} else if (in_run) {
		out->hit = true;
		o->depth = o->depth * 2 < limit ? o->depth * 2 : limit;
		if (o->depth == 0)
			o->depth = 1;
	} else if (!joins && pos != o->last) {
		if (o->lo <= o->hi) {
			out->miss = true;
			o->depth /= 2;
		}
		o->asked = false; /* asked for somewhere else */
		o->run_lo = o->top = o->reach = pos;
		out->rerun = true;
	}
	if (o->depth > limit)
		o->depth = limit;
	if (pos > o->top)
		o->top = pos;
	o->opened = true;
	o->last = pos;
	if (o->depth == 0) {
		if (++o->since_probe < PREFETCH_PROBE) {
			o->lo = 1;
			o->hi = 0;
			return;
		}
		o->since_probe = 0;
		o->lo = o->hi = pos + 1;
	} else {
		o->lo = pos + 1;
		o->hi = o->top + o->depth;
	}
	if (o->hi > o->reach)
		o->reach = o->hi;
	/* After a run's asks, on from the furthest (a joining reader's
	 * teammates read what lies between). */
	out->from =
		o->asked && o->asked_hi + 1 > o->lo ? o->asked_hi + 1 : o->lo;
	if (o->asked && joins)
		out->from = o->asked_hi + 1;
	out->to = o->hi;
	if (out->from <= out->to) {
		o->asked = true;
		o->asked_hi = out->to;
	}
}

void prefetch_order_stopped(struct prefetch_order *o, uint64_t pos)
{
	if (!o->asked || o->asked_hi < pos)
		return;
	if (pos == 0 || pos - 1 < o->run_lo)
		o->asked = false;
	else
		o->asked_hi = pos - 1;
}

unsigned prefetch_depth(const struct prefetch_pace *p)
{
	uint64_t bound = p->cap, want, span;

	if (p->cap == 0)
		return 0;
	if (p->file_bytes > 0 && p->memory > 0 &&
	    p->memory / p->file_bytes < bound)
		bound = p->memory / p->file_bytes;
	if (bound == 0)
		bound = 1;
	if (p->latency_ns == 0 || p->gap_ns == 0)
		return (unsigned)bound;
	if (p->connections > 0 && p->connections < bound)
		bound = p->connections;
	/* Rounded up: a reader as fast as the backend needs one ahead. */
	want = p->latency_ns / p->gap_ns + 1;
	want = want > bound ? bound : want * PREFETCH_HEADROOM;
	/* The time target (prefetch.h). */
	span = PREFETCH_AHEAD_NS;
	if (p->latency_slow_ns > span / PREFETCH_HEADROOM)
		span = PREFETCH_HEADROOM * p->latency_slow_ns;
	if (want < span / p->gap_ns + 1)
		want = span / p->gap_ns + 1;
	if (p->starved && want < 2 * (uint64_t)p->depth)
		want = 2 * (uint64_t)p->depth;
	if (!p->starved && p->depth > 0 && want < (uint64_t)p->depth - 1)
		want = (uint64_t)p->depth - 1;
	if (want > bound)
		want = bound;
	return want > 0 ? (unsigned)want : 1;
}
