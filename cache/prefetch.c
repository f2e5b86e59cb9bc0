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
	out->extents_cap = prefetch_extents_cap(memory);
}

uint64_t prefetch_extents_cap(uint64_t memory)
{
	uint64_t cap = memory / 8;

	if (cap > PREFETCH_INFLIGHT_MIN)
		cap = PREFETCH_INFLIGHT_MIN;
	return cap > (UINT64_C(64) << 10) ? cap : UINT64_C(64) << 10;
}

uint64_t prefetch_extents_ahead(uint64_t done, uint64_t cap)
{
	uint64_t ahead =
		done > PREFETCH_EXTENTS_MIN ? done : PREFETCH_EXTENTS_MIN;

	return ahead < cap ? ahead : cap;
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

uint64_t prefetch_window_stretch(uint64_t cap, uint64_t memory,
				 uint64_t inflight, uint64_t unit)
{
	uint64_t want = inflight + 2 * unit;

	if (want > memory / 4)
		want = memory / 4;
	return want > cap ? want : cap;
}

uint64_t prefetch_inflight(uint64_t latency_ns, uint64_t bytes_per_s,
			   uint64_t memory)
{
	/* In floating point: bytes/s x ns overflows 64 bits at a few GB/s
	 * and seconds. */
	double need = (double)PREFETCH_FLOW_HEADROOM * (double)bytes_per_s *
		      (double)latency_ns / 1e9;
	uint64_t cap = memory / 4;

	if (cap < PREFETCH_INFLIGHT_MIN)
		cap = PREFETCH_INFLIGHT_MIN;
	if (need <= (double)PREFETCH_INFLIGHT_MIN)
		return PREFETCH_INFLIGHT_MIN;
	return need >= (double)cap ? cap : (uint64_t)need;
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

/* A lane for a reader not seen: a free one, else the least recent. */
static struct prefetch_lane *lane_take(struct prefetch_order *o)
{
	struct prefetch_lane *l = &o->lanes[0];
	unsigned i;

	for (i = 1; i < PREFETCH_LANES; i++)
		if (o->lanes[i].seen < l->seen)
			l = &o->lanes[i];
	return l;
}

static bool lane_in_use(const struct prefetch_order *o,
			const struct prefetch_lane *l)
{
	return l->seen != 0 && o->opens - l->seen < PREFETCH_LANES * 4;
}

/* Whether pos is in the range l asked for at its last open. */
static bool lane_covers(const struct prefetch_lane *l, uint64_t pos)
{
	return l->seen != 0 && l->lo <= l->hi && pos >= l->lo && pos <= l->hi;
}

unsigned prefetch_order_depth(const struct prefetch_order *o, uint64_t reader)
{
	const struct prefetch_lane *l =
		lane_find((struct prefetch_order *)o, reader);

	return l != NULL ? l->depth : 0;
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

	for (i = 0; i < PREFETCH_LANES; i++)
		if (lane_in_use(o, &o->lanes[i]) && o->lanes[i].depth > 0 &&
		    o->lanes[i].pos < floor)
			floor = o->lanes[i].pos;
	return floor;
}

bool prefetch_order_followed(const struct prefetch_order *o, uint64_t *asked_hi,
			     unsigned *depth)
{
	bool any = false;
	unsigned i;

	*asked_hi = 0;
	*depth = 0;
	for (i = 0; i < PREFETCH_LANES; i++) {
		const struct prefetch_lane *l = &o->lanes[i];

		if (!lane_in_use(o, l) || l->depth == 0 || !l->asked)
			continue;
		any = true;
		if (l->asked_hi > *asked_hi)
			*asked_hi = l->asked_hi;
		if (l->depth > *depth)
			*depth = l->depth;
	}
	return any;
}

void prefetch_order_open(struct prefetch_order *o, uint64_t pos,
			 uint64_t reader, unsigned limit,
			 struct prefetch_open *out)
{
	struct prefetch_lane *l = lane_find(o, reader), *from = NULL;
	bool fresh = l == NULL, any_asked = false;
	unsigned i;

	memset(out, 0, sizeof(*out));
	out->from = 1;
	/* Whose range pos is in: the opener's own first (or its next
	 * position), else the deepest (the latest of those) of the cursors
	 * whose reader is there: the last open's, or one that moved twice. */
	if (l != NULL && (lane_covers(l, pos) || pos == l->pos + 1))
		from = l;
	for (i = 0; i < PREFETCH_LANES && (from == NULL || from != l); i++) {
		const struct prefetch_lane *c = &o->lanes[i];

		if (!lane_covers(c, pos) || !lane_in_use(o, c) ||
		    (c->moves < 2 && i != o->last_lane))
			continue;
		if (from == NULL || c->depth > from->depth ||
		    (c->depth == from->depth && c->seen > from->seen))
			from = &o->lanes[i];
	}
	for (i = 0; i < PREFETCH_LANES; i++)
		any_asked |= lane_in_use(o, &o->lanes[i]) &&
			     o->lanes[i].lo <= o->lanes[i].hi;
	if (fresh) {
		l = lane_take(o);
		memset(l, 0, sizeof(*l));
		l->reader = reader;
		l->pos = pos;
	}
	o->last_lane = (unsigned)(l - o->lanes);
	if (limit == 0) {
		l->pos = pos;
		l->seen = ++o->opens;
		o->last = pos;
		o->opened = true;
		o->depth = 0;
		return;
	}
	if (fresh || pos != l->pos)
		l->moves += l->moves < 2;
	if (!o->opened) {
		l->depth = PREFETCH_DEPTH_START < limit ? PREFETCH_DEPTH_START
							: limit;
		out->rerun = true;
	} else if (!fresh && pos == l->pos) {
		/* Noted again: nothing moved. */
	} else if (from != NULL) {
		out->hit = true;
		if (from != l) {
			/* Taking up where another cursor is: from its depth,
			 * after what it asked. */
			if (from->depth > l->depth || fresh)
				l->depth = from->depth;
			l->asked = from->asked;
			l->asked_hi = from->asked_hi;
		}
		l->depth = l->depth * 2 < limit ? l->depth * 2 : limit;
		if (l->depth == 0)
			l->depth = 1;
	} else {
		if (!fresh && l->lo <= l->hi)
			out->miss = true;
		else if (fresh && any_asked)
			out->miss = true;
		l->depth = fresh ? 0 : l->depth / 2;
		l->asked = false; /* asked for somewhere else */
		out->rerun = true;
	}
	if (l->depth > limit)
		l->depth = limit;
	l->pos = pos;
	l->seen = ++o->opens;
	o->opened = true;
	o->last = pos;
	o->depth = l->depth;
	if (l->depth == 0) {
		if (++l->since_probe < PREFETCH_PROBE) {
			l->lo = 1;
			l->hi = 0;
			return;
		}
		l->since_probe = 0;
		l->lo = l->hi = pos + 1;
	} else {
		l->lo = pos + 1;
		l->hi = pos + l->depth;
	}
	out->from = l->asked && l->asked_hi >= l->lo ? l->asked_hi + 1 : l->lo;
	out->to = l->hi;
	if (out->from <= out->to) {
		l->asked = true;
		l->asked_hi = out->to;
	}
}

void prefetch_order_stopped(struct prefetch_order *o, uint64_t pos)
{
	unsigned i;

	for (i = 0; i < PREFETCH_LANES; i++) {
		struct prefetch_lane *l = &o->lanes[i];

		if (!l->asked || l->asked_hi < pos)
			continue;
		if (pos == 0 || pos - 1 < l->lo)
			l->asked = false;
		else
			l->asked_hi = pos - 1;
	}
}

unsigned prefetch_order_resume(struct prefetch_order *o,
			       uint64_t from[PREFETCH_LANES],
			       uint64_t to[PREFETCH_LANES])
{
	unsigned i, n = 0;

	for (i = 0; i < PREFETCH_LANES; i++) {
		struct prefetch_lane *l = &o->lanes[i];
		uint64_t f;

		if (!lane_in_use(o, l) || l->lo > l->hi)
			continue;
		f = l->asked && l->asked_hi >= l->lo ? l->asked_hi + 1 : l->lo;
		if (f > l->hi)
			continue;
		from[n] = f;
		to[n] = l->hi;
		n++;
		l->asked = true;
		l->asked_hi = l->hi;
	}
	return n;
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
