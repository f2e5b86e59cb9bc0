/*
 * check_prefetch: the prefetcher's pure state machines (cache/prefetch.h),
 * driven through their header: the read-ahead window within a file
 * (growth, cap, seek restart, slack, size) and the depth across files of
 * an order (start, doubling on hits, halving on misses, the probe at
 * depth 0, stopped asking), and the working depth from measured latency
 * and the reader's pace (Little's law) with its bounds. No I/O, no clock:
 * every outcome is exact.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cache/prefetch.h"
#include "tests/unit/unit.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define BIG (UINT64_C(1) << 40) /* an object no test reaches the end of */

struct range {
	uint64_t from, to;
};

static struct range win_read(struct prefetch_window *w, uint64_t off,
			     uint64_t len, uint64_t size, uint64_t cap)
{
	struct range r;

	prefetch_window_read(w, off, len, size, cap, &r.from, &r.to);
	return r;
}

/* The first read opens a window of PREFETCH_WINDOW_MIN past its end. */
START_TEST(test_window_first_read)
{
	struct prefetch_window w = { 0 };
	struct range r = win_read(&w, 0, 128 * KIB, BIG, 16 * MIB);

	ck_assert_uint_eq(w.window, PREFETCH_WINDOW_MIN);
	ck_assert_uint_eq(r.from, 128 * KIB);
	ck_assert_uint_eq(r.to, 128 * KIB + PREFETCH_WINDOW_MIN);
}
END_TEST

/* The window doubles only once another PREFETCH_WINDOW_MIN has been read
 * sequentially since it last grew, not at every request; and what is
 * asked for continues where the last range ended (nothing asked twice). */
START_TEST(test_window_growth)
{
	struct prefetch_window w = { 0 };
	const uint64_t req = 128 * KIB;
	uint64_t off = 0, ahead;
	struct range r = win_read(&w, off, req, BIG, 16 * MIB);
	int i;

	ahead = r.to;
	/* 8 more requests: 1 MiB read since the first one's end. */
	for (i = 0; i < 7; i++) {
		off += req;
		r = win_read(&w, off, req, BIG, 16 * MIB);
		ck_assert_uint_eq(w.window, PREFETCH_WINDOW_MIN);
		ck_assert_uint_eq(r.from, ahead);
		ck_assert_uint_eq(r.to, off + req + PREFETCH_WINDOW_MIN);
		ahead = r.to;
	}
	off += req; /* ends 1 MiB past where the window started */
	r = win_read(&w, off, req, BIG, 16 * MIB);
	ck_assert_uint_eq(w.window, 2 * PREFETCH_WINDOW_MIN);
	ck_assert_uint_eq(r.from, ahead);
	ck_assert_uint_eq(r.to, off + req + 2 * PREFETCH_WINDOW_MIN);
	/* The next growth needs another 1 MiB from here. */
	off += req;
	r = win_read(&w, off, req, BIG, 16 * MIB);
	ck_assert_uint_eq(w.window, 2 * PREFETCH_WINDOW_MIN);
}
END_TEST

/* The window never passes the cap, and a cap below the minimum is the
 * minimum. */
START_TEST(test_window_cap)
{
	struct prefetch_window w = { 0 };
	uint64_t off;
	struct range r;

	for (off = 0; off < 256 * MIB; off += MIB) {
		r = win_read(&w, off, MIB, BIG, 4 * MIB);
		ck_assert_uint_le(w.window, 4 * MIB);
	}
	ck_assert_uint_eq(w.window, 4 * MIB);
	ck_assert_uint_eq(r.to, off + 4 * MIB);

	memset(&w, 0, sizeof(w));
	for (off = 0; off < 64 * MIB; off += MIB)
		win_read(&w, off, MIB, BIG, 1);
	ck_assert_uint_eq(w.window, PREFETCH_WINDOW_MIN);
}
END_TEST

/* A read far from the last one is a seek: the window restarts at the
 * minimum, past the seek read's end. */
START_TEST(test_window_seek_restarts)
{
	struct prefetch_window w = { 0 };
	uint64_t off;
	struct range r;

	for (off = 0; off < 32 * MIB; off += MIB)
		win_read(&w, off, MIB, BIG, 64 * MIB);
	ck_assert_uint_gt(w.window, PREFETCH_WINDOW_MIN);

	off = 32 * MIB + PREFETCH_SLACK + 1 + 100 * MIB;
	r = win_read(&w, off, 64 * KIB, BIG, 64 * MIB);
	ck_assert_uint_eq(w.window, PREFETCH_WINDOW_MIN);
	ck_assert_uint_eq(r.from, off + 64 * KIB);
	ck_assert_uint_eq(r.to, off + 64 * KIB + PREFETCH_WINDOW_MIN);

	/* Backwards beyond the slack is a seek too. */
	for (off = 0; off < 32 * MIB; off += MIB)
		win_read(&w, off, MIB, BIG, 64 * MIB);
	ck_assert_uint_gt(w.window, PREFETCH_WINDOW_MIN);
	r = win_read(&w, 0, MIB, BIG, 64 * MIB);
	ck_assert_uint_eq(w.window, PREFETCH_WINDOW_MIN);
	ck_assert_uint_eq(r.from, MIB);
	ck_assert_uint_eq(r.to, MIB + PREFETCH_WINDOW_MIN);
}
END_TEST

/* Within PREFETCH_SLACK either side of the last read's end, a read is
 * sequential (the kernel's concurrent requests arrive out of order): the
 * window is kept. One byte beyond is a seek. */
START_TEST(test_window_slack)
{
	const uint64_t cap = 64 * MIB;
	struct prefetch_window w;
	uint64_t off, next, win;

	memset(&w, 0, sizeof(w));
	for (off = 0; off < 16 * MIB; off += MIB)
		win_read(&w, off, MIB, BIG, cap);
	next = w.next;
	win = w.window;
	ck_assert_uint_gt(win, PREFETCH_WINDOW_MIN);

	win_read(&w, next + PREFETCH_SLACK, 4 * KIB, BIG, cap);
	ck_assert_uint_ge(w.window, win);

	memset(&w, 0, sizeof(w));
	for (off = 0; off < 16 * MIB; off += MIB)
		win_read(&w, off, MIB, BIG, cap);
	win_read(&w, next - PREFETCH_SLACK, 4 * KIB, BIG, cap);
	ck_assert_uint_eq(w.window, win);
	ck_assert_uint_eq(w.next, next); /* a read behind does not move it */

	memset(&w, 0, sizeof(w));
	for (off = 0; off < 16 * MIB; off += MIB)
		win_read(&w, off, MIB, BIG, cap);
	win_read(&w, next + PREFETCH_SLACK + 1, 4 * KIB, BIG, cap);
	ck_assert_uint_eq(w.window, PREFETCH_WINDOW_MIN);

	memset(&w, 0, sizeof(w));
	for (off = 0; off < 16 * MIB; off += MIB)
		win_read(&w, off, MIB, BIG, cap);
	win_read(&w, next - PREFETCH_SLACK - 1, 4 * KIB, BIG, cap);
	ck_assert_uint_eq(w.window, PREFETCH_WINDOW_MIN);
}
END_TEST

/* Nothing past the object's end is asked for; at the end, nothing. */
START_TEST(test_window_size)
{
	struct prefetch_window w = { 0 };
	struct range r = win_read(&w, 0, 64 * KIB, 300 * KIB, 16 * MIB);

	ck_assert_uint_eq(r.from, 64 * KIB);
	ck_assert_uint_eq(r.to, 300 * KIB);
	r = win_read(&w, 64 * KIB, 64 * KIB, 300 * KIB, 16 * MIB);
	ck_assert_uint_ge(r.from, r.to);
	r = win_read(&w, 128 * KIB, 172 * KIB, 300 * KIB, 16 * MIB);
	ck_assert_uint_ge(r.from, r.to);
}
END_TEST

struct opened {
	bool hit, miss;
	uint64_t from, to;
};

static struct opened open_pos(struct prefetch_order *o, uint64_t pos,
			      unsigned limit)
{
	struct opened r;
	struct prefetch_open op;

	prefetch_order_open(o, pos, 1, limit, &op);
	r.hit = op.hit;
	r.miss = op.miss;
	r.from = op.from;
	r.to = op.to;
	return r;
}

static void expect_asked(struct opened r, uint64_t from, uint64_t to)
{
	ck_assert_uint_eq(r.from, from);
	ck_assert_uint_eq(r.to, to);
}

static void expect_none(struct opened r)
{
	ck_assert_uint_gt(r.from, r.to);
}

/* Opens pos and checks the outcome: hit, miss, the depth after it and
 * the positions asked for [from, to]. */
static void expect_open(struct prefetch_order *o, uint64_t pos, bool hit,
			bool miss, unsigned depth, uint64_t from, uint64_t to)
{
	struct opened r = open_pos(o, pos, 32);

	ck_assert(r.hit == hit && r.miss == miss);
	ck_assert_uint_eq(o->depth, depth);
	expect_asked(r, from, to);
}

/* The first open asks for PREFETCH_DEPTH_START positions after it (or the
 * limit, if smaller); limit 0 asks for nothing. */
START_TEST(test_order_start)
{
	struct prefetch_order o;
	struct opened r;

	memset(&o, 0, sizeof(o));
	r = open_pos(&o, 10, 32);
	ck_assert(!r.hit && !r.miss);
	expect_asked(r, 11, 10 + PREFETCH_DEPTH_START);

	memset(&o, 0, sizeof(o));
	r = open_pos(&o, 10, 2);
	expect_asked(r, 11, 12);

	memset(&o, 0, sizeof(o));
	r = open_pos(&o, 10, 0);
	ck_assert(!r.hit && !r.miss);
	expect_none(r);
}
END_TEST

/* Each open in the range asked for is a hit and doubles the depth up to
 * the limit; only positions not asked for yet are asked for. */
START_TEST(test_order_hits_double)
{
	struct prefetch_order o;
	uint64_t pos;

	memset(&o, 0, sizeof(o));
	open_pos(&o, 0, 32); /* asks 1..4 */
	expect_open(&o, 1, true, false, 8, 5, 9);
	expect_open(&o, 2, true, false, 16, 10, 18);
	expect_open(&o, 3, true, false, 32, 19, 35);
	/* One new position each open: the window slides. */
	for (pos = 4; pos < 100; pos++)
		expect_open(&o, pos, true, false, 32, pos + 32, pos + 32);
}
END_TEST

/* An open outside the range asked for is a miss and halves the depth;
 * what is asked for starts after the new position. Opening the same
 * position again is neither. */
START_TEST(test_order_miss_halves)
{
	struct prefetch_order o;
	struct opened r;

	memset(&o, 0, sizeof(o));
	open_pos(&o, 0, 32);
	open_pos(&o, 1, 32);
	open_pos(&o, 2, 32); /* depth 16, asked up to 18 */
	ck_assert_uint_eq(o.depth, 16);

	r = open_pos(&o, 2, 32);
	ck_assert(!r.hit && !r.miss);
	ck_assert_uint_eq(o.depth, 16);

	expect_open(&o, 1000, false, true, 8, 1001, 1008);
	expect_open(&o, 50, false, true, 4, 51, 54);
}
END_TEST

/* Misses bring the depth to 0: then nothing is asked for except one
 * position every PREFETCH_PROBE opens; a hit on the probe brings the
 * depth back to 1, and further hits double it again. */
START_TEST(test_order_probe_at_depth_zero)
{
	struct prefetch_order o;
	struct opened r;
	uint64_t pos = 0;
	int i;

	memset(&o, 0, sizeof(o));
	open_pos(&o, pos, 32); /* depth 4 */
	while (o.depth > 0) {
		pos += 100;
		r = open_pos(&o, pos, 32);
		ck_assert(r.miss);
	}
	/* The open that reached depth 0 is the first of the probe period. */
	expect_none(r);
	for (i = 1; i < PREFETCH_PROBE - 1; i++) {
		pos += 100;
		r = open_pos(&o, pos, 32);
		ck_assert(!r.hit);
		expect_none(r);
	}
	pos += 100;
	r = open_pos(&o, pos, 32);
	expect_asked(r, pos + 1, pos + 1);
	ck_assert_uint_eq(o.depth, 0);

	expect_open(&o, pos + 1, true, false, 1, pos + 2, pos + 2);
	expect_open(&o, pos + 2, true, false, 2, pos + 3, pos + 4);
}
END_TEST

/* When asking stopped before position p (memory), the next open asks from
 * p again, not from past what was asked. */
START_TEST(test_order_stopped)
{
	struct prefetch_order o;
	struct opened r;

	memset(&o, 0, sizeof(o));
	open_pos(&o, 0, 32);			 /* asks 1..4 */
	expect_asked(open_pos(&o, 1, 32), 5, 9); /* depth 8 */
	prefetch_order_stopped(&o, 7);
	r = open_pos(&o, 2, 32); /* depth 16: 3..18, 3..6 asked */
	expect_asked(r, 7, 18);

	/* Stopped before the range's start: all of it again. */
	prefetch_order_stopped(&o, 0);
	r = open_pos(&o, 3, 32);
	expect_asked(r, 4, 35);

	/* Stopped past what was asked: no change. */
	prefetch_order_stopped(&o, 1000);
	r = open_pos(&o, 4, 32);
	expect_asked(r, 36, 36);
}
END_TEST

/* A PyTorch DataLoader over an order: 4 workers (readers 100..103) take
 * batches of 32 consecutive positions in turn and read them at once, one
 * file each in turn. Each worker's first open is a miss (nobody asked
 * there) and its cursor starts at depth 0; from then on its opens are
 * hits, and a worker's jump to its next batch lands in a range a
 * teammate's cursor asked for: after the first round no miss, and every
 * open was asked for before it came. */
START_TEST(test_order_team)
{
	enum {
		WORKERS = 4,
		BATCH = 32,
		ROUNDS = 40,
		N = WORKERS * BATCH * ROUNDS
	};
	static uint8_t asked[N + 1024];
	struct prefetch_order o;
	struct prefetch_open op;
	uint64_t step, p, misses = 0;
	unsigned w;

	memset(&o, 0, sizeof(o));
	memset(asked, 0, sizeof(asked));
	for (step = 0; step < BATCH * ROUNDS; step++) {
		for (w = 0; w < WORKERS; w++) {
			uint64_t batch = w + WORKERS * (step / BATCH);
			uint64_t pos = batch * BATCH + step % BATCH;

			prefetch_order_open(&o, pos, 100 + w, 256, &op);
			misses += op.miss;
			if (step >= BATCH) {
				ck_assert_msg(op.hit, "pos %llu",
					      (unsigned long long)pos);
				ck_assert_msg(asked[pos], "pos %llu not asked",
					      (unsigned long long)pos);
			}
			for (p = op.from; p <= op.to && p < sizeof(asked); p++)
				asked[p] = 1;
		}
	}
	ck_assert_uint_eq(misses, WORKERS - 1);
	/* The pusher starts at the lowest cursor: worker 0's place. */
	ck_assert_uint_eq(prefetch_order_floor(&o),
			  (uint64_t)WORKERS * BATCH * (ROUNDS - 1) + BATCH - 1);
}
END_TEST

/* A process per file: one that takes up where the last one left off is a
 * hit and carries the depth on; ones that jump off the order ask for
 * nothing (each a cursor of its own, at depth 0) and the misses show. */
START_TEST(test_order_process_per_file)
{
	struct prefetch_order o;
	struct prefetch_open op;
	uint64_t pos, issued = 0;
	unsigned depth = PREFETCH_DEPTH_START;

	memset(&o, 0, sizeof(o));
	prefetch_order_open(&o, 0, 1000, 32, &op); /* asks 1..4 */
	for (pos = 1; pos < 6; pos++) {
		prefetch_order_open(&o, pos, 1000 + pos, 32, &op);
		ck_assert(op.hit && !op.miss);
		depth = depth * 2 < 32 ? depth * 2 : 32;
		ck_assert_uint_eq(o.depth, depth);
		ck_assert_uint_eq(op.to, pos + depth);
	}
	/* Off the order, a process each: 17 apart, wrapping at 48. */
	memset(&o, 0, sizeof(o));
	for (pos = 0; pos < 48; pos++) {
		prefetch_order_open(&o, pos * 17 % 48, 2000 + pos, 32, &op);
		if (op.from <= op.to)
			issued += op.to - op.from + 1;
	}
	ck_assert_uint_le(issued, PREFETCH_DEPTH_START);
	ck_assert_uint_eq(o.depth, 0);
}
END_TEST

/* The floor is the lowest place of the cursors in use that follow the
 * order; a cursor long still (its reader gone) does not hold the pusher
 * back. Each reader's moves are its own. */
START_TEST(test_order_floor)
{
	struct prefetch_order o;
	struct prefetch_open op;
	unsigned i;

	memset(&o, 0, sizeof(o));
	prefetch_order_open(&o, 10, 1, 32, &op); /* asks 11..14 */
	ck_assert_uint_eq(prefetch_order_floor(&o), 10);
	prefetch_order_open(&o, 12, 2, 32, &op); /* in 1's range */
	ck_assert(op.hit);
	prefetch_order_open(&o, 11, 1, 32, &op);
	ck_assert(op.hit);
	ck_assert_uint_eq(prefetch_order_floor(&o), 11);
	/* Reader 1 stops; reader 2 goes on. */
	for (i = 0; i < PREFETCH_LANES * 4; i++)
		prefetch_order_open(&o, 13 + i, 2, 32, &op);
	ck_assert_uint_eq(prefetch_order_floor(&o), 12 + PREFETCH_LANES * 4);
	ck_assert_uint_eq(
		prefetch_order_moved(&o, 2, 12 + PREFETCH_LANES * 4 + 3), 3);
	ck_assert_uint_eq(prefetch_order_moved(&o, 7, 500), 1);
}
END_TEST

/* The working depth from measurements (Little's law) and the next
 * chunk ahead. */
#define MS UINT64_C(1000000)

static struct prefetch_pace pace(uint64_t latency_ns, uint64_t gap_ns,
				 unsigned depth)
{
	struct prefetch_pace p = { 0 };

	p.latency_ns = latency_ns;
	p.gap_ns = gap_ns;
	p.depth = depth;
	p.file_bytes = 100 << 10;
	p.memory = UINT64_C(256) << 20;
	p.connections = 64;
	p.cap = 256;
	return p;
}

/* The files a reader at gap ns per file reads in PREFETCH_AHEAD_NS. */
static uint64_t ahead_files(uint64_t gap_ns)
{
	return PREFETCH_AHEAD_NS / gap_ns + 1;
}

/* A reader opening a file every 2 ms (a trainer's compute): the deeper the
 * backend's latency, the more files must be in flight, and never fewer
 * than the reader reads in PREFETCH_AHEAD_NS. */
START_TEST(test_depth_grows_with_latency)
{
	const uint64_t lat[] = { 1 * MS, 5 * MS, 20 * MS, 50 * MS, 100 * MS };
	unsigned prev = 0, d, i;
	uint64_t little;

	for (i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
		struct prefetch_pace p = pace(lat[i], 2 * MS, 1);

		d = prefetch_depth(&p);
		ck_assert_uint_ge(d, prev);
		/* Little's law: rate x latency, with the headroom. */
		little = PREFETCH_HEADROOM * (lat[i] / (2 * MS) + 1);
		ck_assert_uint_ge(d, lat[i] / (2 * MS));
		ck_assert_uint_ge(d, ahead_files(2 * MS));
		ck_assert_uint_le(d, little > ahead_files(2 * MS)
					     ? little
					     : ahead_files(2 * MS));
		prev = d;
	}
	/* 100 ms / 2 ms = 50 files in flight, twice that with headroom:
	 * above connections. */
	ck_assert_uint_eq(prev, 64);
}
END_TEST

/* The same at 50 ms: Little's law is above the time target. */
START_TEST(test_depth_little_above_target)
{
	struct prefetch_pace p = pace(50 * MS, 2 * MS, 1);
	unsigned prev = prefetch_depth(&p);

	/* 50 ms / 2 ms = 25 files in flight, twice that with headroom. */
	ck_assert_uint_eq(prev, 52);
}
END_TEST

/* The reader slows (2 ms, then 10 ms a file) at 20 ms latency: the depth
 * shrinks toward rate x latency, by at most one file per open. */
START_TEST(test_depth_shrinks_when_reader_slows)
{
	struct prefetch_pace p = pace(20 * MS, 500000, 64);
	unsigned d = prefetch_depth(&p), next, i;

	ck_assert_uint_eq(d, 64); /* 20 / 0.5 = 40 files, x2: bound 64 */
	p.gap_ns = 10 * MS;
	for (i = 0; i < 60; i++) {
		p.depth = d;
		next = prefetch_depth(&p);
		ck_assert_uint_le(next, d);
		ck_assert_uint_ge(next, d - 1);
		d = next;
	}
	/* Both 2 x (20 / 10 + 1) and 50 ms / 10 ms + 1. */
	ck_assert_uint_eq(d, PREFETCH_HEADROOM * (20 / 10 + 1));
	ck_assert_uint_eq(d, ahead_files(10 * MS));
	/* A reader far slower than the backend keeps one ahead. */
	p.gap_ns = 1000 * MS;
	for (i = 0; i < 40; i++) {
		p.depth = d;
		d = prefetch_depth(&p);
	}
	ck_assert_uint_eq(d, PREFETCH_HEADROOM);
}
END_TEST

/* A reader that waited for a fetch is paced by the fetches: the depth
 * doubles (queueing at the server needs more in flight than latency /
 * gap says), up to the bounds. */
START_TEST(test_depth_doubles_when_starved)
{
	struct prefetch_pace p = pace(20 * MS, 2 * MS, 8);
	unsigned d;

	p.starved = true;
	d = prefetch_depth(&p);
	/* 20 / 2 + 1, x2 = 22, and 50 / 2 + 1 = 26: already above 16 */
	ck_assert_uint_eq(d, 26);
	p.depth = 26;
	ck_assert_uint_eq(prefetch_depth(&p), 52);
	p.depth = 52;
	ck_assert_uint_eq(prefetch_depth(&p), 64); /* connections */
	p.connections = 1000;
	p.depth = 200;
	ck_assert_uint_eq(prefetch_depth(&p), 256); /* the cap */
}
END_TEST

/* Not measured yet: prefetch.files and memory, which hits then reach by
 * doubling (as before measurements existed). */
START_TEST(test_depth_unknown)
{
	struct prefetch_pace p = pace(0, 0, 4);

	ck_assert_uint_eq(prefetch_depth(&p), 256);
	p.latency_ns = 20 * MS;
	ck_assert_uint_eq(prefetch_depth(&p), 256);
	p.file_bytes = 2 << 20; /* 256 MiB / 2 MiB */
	ck_assert_uint_eq(prefetch_depth(&p), 128);
	p.cap = 16;
	ck_assert_uint_eq(prefetch_depth(&p), 16);
	p.cap = 0; /* prefetch off */
	ck_assert_uint_eq(prefetch_depth(&p), 0);
}
END_TEST

/* A trainer (2 ms of compute per file) against a store that answers in
 * 1 ms: Little's law alone kept 2 files ahead, so a read slower than 4 ms
 * made it wait (make bench at 0 ms: 1.6 files ahead on average, 72 of 500
 * opens waited). The depth covers PREFETCH_AHEAD_NS of its reading and
 * stays there while it does not wait, within the bounds. */
START_TEST(test_depth_slow_reader_keeps_time_ahead)
{
	struct prefetch_pace p = pace(1 * MS, 2 * MS, 1);
	unsigned i;

	ck_assert_uint_eq(prefetch_depth(&p), 26); /* 50 / 2 + 1 */
	p.depth = 26;
	for (i = 0; i < 100; i++)
		p.depth = prefetch_depth(&p);
	ck_assert_uint_eq(p.depth, 26);
	/* The backend's reads vary: one in ten takes 40 ms or more, so
	 * files for 2 x 40 ms: 80 / 2 + 1. */
	p.latency_slow_ns = 40 * MS;
	ck_assert_uint_eq(prefetch_depth(&p), 41);
	p.latency_slow_ns = 20 * MS; /* 2 x 20 ms, under 50 ms */
	ck_assert_uint_eq(prefetch_depth(&p), 26);
	p.gap_ns = 20 * MS; /* a slower reader: 50 / 20 + 1 */
	p.depth = 1;
	ck_assert_uint_eq(prefetch_depth(&p), 3);
	/* One slow file moves its pace (averaged) to 5 ms: the depth
	 * follows by one file per open, not at once to 50 / 5 + 1. */
	p.gap_ns = 5 * MS;
	p.depth = 26;
	ck_assert_uint_eq(prefetch_depth(&p), 25);
	p.gap_ns = 2 * MS;
	p.connections = 8;
	ck_assert_uint_eq(prefetch_depth(&p), 8);
	p.connections = 64;
	p.cap = 16;
	ck_assert_uint_eq(prefetch_depth(&p), 16);
	p.cap = 256;
	p.memory = 10 * p.file_bytes;
	ck_assert_uint_eq(prefetch_depth(&p), 10);
}
END_TEST

/* The order and the working depth together, as cache_order_open() runs
 * them, for that trainer over 500 files: after its first opens, the files
 * asked for reach PREFETCH_AHEAD_NS of reading past the one it opens, and
 * each open asks for about one more file (files in flight stay about
 * latency / gap, not depth). */
START_TEST(test_order_trainer_stays_ahead)
{
	struct prefetch_order o = { 0 };
	struct prefetch_pace p = pace(1 * MS, 2 * MS, 0);
	struct prefetch_open op;
	uint64_t pos, asked = 0;
	unsigned limit;

	for (pos = 0; pos < 500; pos++) {
		p.depth = o.depth;
		limit = prefetch_depth(&p);
		prefetch_order_open(&o, pos, 1, limit, &op);
		ck_assert(!op.miss);
		if (op.from <= op.to)
			asked += op.to - op.from + 1;
		if (pos >= 4) {
			ck_assert(op.hit);
			ck_assert_uint_ge(o.lanes[0].hi - pos,
					  ahead_files(2 * MS));
		}
	}
	ck_assert_uint_le(asked, 500 + ahead_files(2 * MS));
}
END_TEST

/* Whatever the measurements, never above prefetch.files, connections
 * (once measured) or memory / file size; at least 1 unless prefetch is
 * off. */
START_TEST(test_depth_bounds)
{
	uint32_t x = 12345;
	unsigned i;

	for (i = 0; i < 100000; i++) {
		struct prefetch_pace p;
		uint64_t mem_bound;
		unsigned d;

		x = x * 1103515245u + 12345u;
		p.latency_ns = (x >> 4) % 4 == 0 ? 0 : (uint64_t)(x % 997) * MS;
		x = x * 1103515245u + 12345u;
		p.gap_ns = (x >> 4) % 4 == 0 ? 0 : (uint64_t)(x % 5000) * 1000;
		x = x * 1103515245u + 12345u;
		p.depth = x % 2000;
		p.starved = (x >> 12) & 1;
		x = x * 1103515245u + 12345u;
		p.file_bytes = (x >> 3) % 3 == 0 ? 0 : (uint64_t)(x % 64) << 20;
		x = x * 1103515245u + 12345u;
		p.memory = (uint64_t)(x % 1024) << 20;
		x = x * 1103515245u + 12345u;
		p.connections = x % 300;
		x = x * 1103515245u + 12345u;
		p.cap = x % 600;

		d = prefetch_depth(&p);
		if (p.cap == 0) {
			ck_assert_uint_eq(d, 0);
			continue;
		}
		ck_assert_uint_ge(d, 1);
		ck_assert_uint_le(d, p.cap);
		if (p.connections > 0 && p.latency_ns > 0 && p.gap_ns > 0)
			ck_assert_uint_le(d, p.connections);
		if (p.file_bytes > 0 && p.memory > 0) {
			mem_bound = p.memory / p.file_bytes;
			ck_assert_uint_le(d, mem_bound > 0 ? mem_bound : 1);
		}
	}
}
END_TEST

/* The order state machine takes the working depth as its limit: hits
 * double depth up to it, and a lower one shrinks it at once. */
START_TEST(test_order_follows_working_depth)
{
	struct prefetch_order o = { 0 };
	struct prefetch_open op;
	uint64_t pos;

	prefetch_order_open(&o, 0, 1, 100, &op);
	ck_assert_uint_eq(o.depth, PREFETCH_DEPTH_START);
	ck_assert_uint_eq(op.from, 1);
	ck_assert_uint_eq(op.to, 4);
	for (pos = 1; pos < 6; pos++) {
		prefetch_order_open(&o, pos, 1, 20, &op);
		ck_assert(op.hit);
		ck_assert_uint_le(o.depth, 20);
	}
	ck_assert_uint_eq(o.depth, 20);
	prefetch_order_open(&o, 6, 1, 5, &op);
	ck_assert(op.hit);
	ck_assert_uint_eq(o.depth, 5);
	/* Asked for up to 25 already: nothing new until the reader is
	 * past it. */
	ck_assert_uint_gt(op.from, op.to);
}
END_TEST

#define MIB_UNUSED (UINT64_C(1) << 20)

/* What file.c does per read: the window, then the next chunk. Returns
 * how far ahead has been asked for after the read. */
static uint64_t window_read(struct prefetch_window *w, uint64_t off,
			    uint64_t len, uint64_t size, uint64_t cap,
			    uint64_t chunk)
{
	uint64_t from, to;

	prefetch_window_read(w, off, len, size, cap, &from, &to);
	prefetch_window_unit(w, off + len, size, chunk, &from, &to);
	return w->ahead;
}

/* A cold sequential reader of a 64 MiB file in 8 MiB chunks, 128 KiB at
 * a time: from its first MiB on, the chunk after the one it reads is
 * always asked for (before, chunk 1 was asked for only 4 MiB into chunk
 * 0, and chunk 0 was already in memory: the reader stalled on chunk 1). */
START_TEST(test_window_next_chunk_ahead)
{
	const uint64_t size = 64 * MIB, chunk = 8 * MIB;
	const uint64_t caps[] = { MIB, 16 * MIB, PREFETCH_WINDOW_MAX };
	unsigned i;

	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct prefetch_window w = { 0 };
		uint64_t off, ahead, want;

		for (off = 0; off < size; off += 128 << 10) {
			ahead = window_read(&w, off, 128 << 10, size, caps[i],
					    chunk);
			want = ((off + (128 << 10)) / chunk + 2) * chunk;
			if (want > size)
				want = size;
			if (off + (128 << 10) >= MIB)
				ck_assert_uint_ge(ahead, want);
			else /* not yet: a reader of a header only */
				ck_assert_uint_le(ahead, 2 * MIB);
		}
	}
}
END_TEST

/* Reads here and there (a seek each time) never ask for whole chunks. */
START_TEST(test_window_seeks_no_chunk)
{
	struct prefetch_window w = { 0 };
	uint64_t off = 0, ahead;
	unsigned i;

	for (i = 0; i < 50; i++) {
		off = (off + 37 * MIB + 4096) % (1024 * MIB);
		ahead = window_read(&w, off, 4096, 1024 * MIB,
				    PREFETCH_WINDOW_MAX, 8 * MIB);
		ck_assert_uint_le(ahead, off + 4096 + PREFETCH_WINDOW_MIN);
	}
}
END_TEST

/* A sequential reader's window past the end of its file is what file.c
 * reads of the next file of its order: 0 until the window reaches the
 * end, then how far past it; 0 for a reader of a header only and after a
 * seek restarted the window within the file. */
START_TEST(test_window_spill)
{
	const uint64_t size = 64 * MIB;
	struct prefetch_window w = { 0 };
	uint64_t off, from, to, spill, last = 0;

	for (off = 0; off < size; off += MIB) {
		prefetch_window_read(&w, off, MIB, size, PREFETCH_WINDOW_MAX,
				     &from, &to);
		spill = prefetch_window_spill(&w, off + MIB, size);
		if (off + MIB + w.window <= size)
			ck_assert_uint_eq(spill, 0);
		else
			ck_assert_uint_eq(spill, off + MIB + w.window - size);
		ck_assert_uint_ge(spill, last); /* it only grows */
		last = spill;
	}
	/* At the end, the whole window lies past it. */
	ck_assert_uint_eq(last, PREFETCH_WINDOW_MAX);

	/* A small file read whole in one go: no sequential run yet. */
	memset(&w, 0, sizeof(w));
	prefetch_window_read(&w, 0, 4096, 4096, PREFETCH_WINDOW_MAX, &from,
			     &to);
	ck_assert_uint_eq(prefetch_window_spill(&w, 4096, 4096), 0);

	/* A seek to the last 512 KiB restarts the window: the reader did
	 * not read a MiB sequentially since, so nothing spills. */
	memset(&w, 0, sizeof(w));
	prefetch_window_read(&w, 0, MIB, size, PREFETCH_WINDOW_MAX, &from, &to);
	prefetch_window_read(&w, size - MIB / 2, MIB / 2, size,
			     PREFETCH_WINDOW_MAX, &from, &to);
	ck_assert_uint_eq(prefetch_window_spill(&w, size, size), 0);
}
END_TEST

/* The bound on prefetch bytes in flight is HEADROOM x throughput x least
 * latency (Little's law), at least PREFETCH_INFLIGHT_MIN (nothing
 * measured yet, or a store close by), at most a quarter of the budget
 * unless that is below the minimum. */
START_TEST(test_inflight_little)
{
	/* Nothing measured: the minimum. */
	ck_assert_uint_eq(prefetch_inflight(0, 0, 1024 * MIB),
			  PREFETCH_INFLIGHT_MIN);
	/* 1 ms at 500 MB/s: 1 MB in flight is far below the minimum. */
	ck_assert_uint_eq(prefetch_inflight(1 * MS, 500000000, 1024 * MIB),
			  PREFETCH_INFLIGHT_MIN);
	/* 50 ms at 500 MB/s: HEADROOM x 25 MB. */
	ck_assert_uint_eq(prefetch_inflight(50 * MS, 500000000, 1024 * MIB),
			  PREFETCH_FLOW_HEADROOM * UINT64_C(25000000));
	/* Twice the latency or the throughput, twice the bytes. */
	ck_assert_uint_eq(
		prefetch_inflight(100 * MS, 500000000, 1024 * MIB),
		2 * prefetch_inflight(50 * MS, 500000000, 1024 * MIB));
	ck_assert_uint_eq(
		prefetch_inflight(50 * MS, 1000000000, 1024 * MIB),
		2 * prefetch_inflight(50 * MS, 500000000, 1024 * MIB));
	/* A quarter of the budget at most. */
	ck_assert_uint_eq(prefetch_inflight(50 * MS, 1000000000, 256 * MIB),
			  64 * MIB);
	/* Seconds at GB/s (their product overflows 64 bits as integers):
	 * the cap, not a wrapped value. */
	ck_assert_uint_eq(prefetch_inflight(UINT64_C(20000) * MS,
					    UINT64_C(40000000000), 1024 * MIB),
			  256 * MIB);
	/* A budget whose quarter is below the minimum: the minimum, as
	 * before the flow existed (the 3/4 rule, prefetch_may(), still
	 * bounds what is accounted). */
	ck_assert_uint_eq(prefetch_inflight(50 * MS, 1000000000, 32 * MIB),
			  PREFETCH_INFLIGHT_MIN);
}
END_TEST

/* Whatever the measurements: within [MIN, max(MIN, memory / 4)] and
 * never less for more latency or throughput. */
START_TEST(test_inflight_bounds)
{
	uint32_t x = 777;
	unsigned i;

	for (i = 0; i < 100000; i++) {
		uint64_t lat, bps, mem, v, hi;

		x = x * 1103515245u + 12345u;
		lat = (uint64_t)(x % 5000) * MS / 10;
		x = x * 1103515245u + 12345u;
		bps = (uint64_t)(x % 100000) * 100000;
		x = x * 1103515245u + 12345u;
		mem = (uint64_t)(x % 4096) * MIB;
		v = prefetch_inflight(lat, bps, mem);
		hi = mem / 4 > PREFETCH_INFLIGHT_MIN ? mem / 4
						     : PREFETCH_INFLIGHT_MIN;
		ck_assert_uint_ge(v, PREFETCH_INFLIGHT_MIN);
		ck_assert_uint_le(v, hi);
		ck_assert_uint_ge(prefetch_inflight(lat + MS, bps, mem), v);
		ck_assert_uint_ge(prefetch_inflight(lat, bps + 1000000, mem),
				  v);
	}
}
END_TEST

/* A window stretches to reach the reader's chunk, the next and what is
 * in flight after them; never below its cap, never past a quarter of the
 * budget beyond it. */
START_TEST(test_window_stretch)
{
	/* The flow fits in the cap: the cap. */
	ck_assert_uint_eq(prefetch_window_stretch(64 * MIB, 1024 * MIB,
						  32 * MIB, 8 * MIB),
			  64 * MIB);
	/* A flow of 128 MiB over 8 MiB chunks: 144 MiB. */
	ck_assert_uint_eq(prefetch_window_stretch(64 * MIB, 1024 * MIB,
						  128 * MIB, 8 * MIB),
			  144 * MIB);
	/* More than a quarter of the budget: the quarter. */
	ck_assert_uint_eq(prefetch_window_stretch(64 * MIB, 1024 * MIB,
						  512 * MIB, 8 * MIB),
			  256 * MIB);
	/* A quarter below the cap: the cap. */
	ck_assert_uint_eq(prefetch_window_stretch(64 * MIB, 128 * MIB,
						  512 * MIB, 8 * MIB),
			  64 * MIB);
	/* No budget known: the cap. */
	ck_assert_uint_eq(
		prefetch_window_stretch(64 * MIB, 0, 512 * MIB, 8 * MIB),
		64 * MIB);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "window_first_read", test_window_first_read },
		{ "window_growth", test_window_growth },
		{ "window_cap", test_window_cap },
		{ "window_seek_restarts", test_window_seek_restarts },
		{ "window_slack", test_window_slack },
		{ "window_size", test_window_size },
		{ "order_start", test_order_start },
		{ "order_hits_double", test_order_hits_double },
		{ "order_miss_halves", test_order_miss_halves },
		{ "order_probe_at_depth_zero", test_order_probe_at_depth_zero },
		{ "order_stopped", test_order_stopped },
		{ "order_team", test_order_team },
		{ "order_process_per_file", test_order_process_per_file },
		{ "order_floor", test_order_floor },
		{ "depth_grows_with_latency", test_depth_grows_with_latency },
		{ "depth_little_above_target", test_depth_little_above_target },
		{ "depth_slow_reader_keeps_time_ahead",
		  test_depth_slow_reader_keeps_time_ahead },
		{ "order_trainer_stays_ahead", test_order_trainer_stays_ahead },
		{ "depth_shrinks_when_reader_slows",
		  test_depth_shrinks_when_reader_slows },
		{ "depth_doubles_when_starved",
		  test_depth_doubles_when_starved },
		{ "depth_unknown", test_depth_unknown },
		{ "depth_bounds", test_depth_bounds },
		{ "order_follows_working_depth",
		  test_order_follows_working_depth },
		{ "window_next_chunk_ahead", test_window_next_chunk_ahead },
		{ "window_seeks_no_chunk", test_window_seeks_no_chunk },
		{ "window_spill", test_window_spill },
		{ "inflight_little", test_inflight_little },
		{ "inflight_bounds", test_inflight_bounds },
		{ "window_stretch", test_window_stretch },
	};

	return unit_run(unit_suite("prefetch", cases,
				   sizeof(cases) / sizeof(cases[0])));
}
