/*
 * Unit tests for the prefetcher's pure policy (cache/prefetch.h): the
 * working depth of an order from measured latency and the reader's pace
 * (Little's law), and its bounds; fed numbers, no clock, no I/O.
 */
#include <check.h>
#include <stdint.h>

#include "cache/prefetch.h"
#include "tests/unit/unit.h"

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

/* A reader opening a file every 2 ms (a trainer's compute): the deeper the
 * backend's latency, the more files must be in flight. */
START_TEST(test_depth_grows_with_latency)
{
	const uint64_t lat[] = { 1 * MS, 5 * MS, 20 * MS, 50 * MS };
	unsigned prev = 0, d, i;

	for (i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
		struct prefetch_pace p = pace(lat[i], 2 * MS, 1);

		d = prefetch_depth(&p);
		ck_assert_uint_gt(d, prev);
		/* Little's law: rate x latency, with the headroom. */
		ck_assert_uint_ge(d, lat[i] / (2 * MS));
		ck_assert_uint_le(d,
				  PREFETCH_HEADROOM * (lat[i] / (2 * MS) + 1));
		prev = d;
	}
	/* 50 ms / 2 ms = 25 files in flight, twice that with headroom. */
	ck_assert_uint_eq(prev, 52);
}
END_TEST

/* The reader slows (2 ms, then 10 ms a file) at 20 ms latency: the depth
 * shrinks toward rate x latency, by at most a quarter per open. */
START_TEST(test_depth_shrinks_when_reader_slows)
{
	struct prefetch_pace p = pace(20 * MS, 500000, 64);
	unsigned d = prefetch_depth(&p), next, i;

	ck_assert_uint_eq(d, 64); /* 20 / 0.5 = 40 files, x2: bound 64 */
	p.gap_ns = 10 * MS;
	for (i = 0; i < 20; i++) {
		p.depth = d;
		next = prefetch_depth(&p);
		ck_assert_uint_le(next, d);
		ck_assert_uint_ge(next, d - (d + 3) / 4);
		d = next;
	}
	ck_assert_uint_eq(d, PREFETCH_HEADROOM * (20 / 10 + 1));
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
	ck_assert_uint_eq(d, 22); /* 20 / 2 + 1, x2: already above 16 */
	p.depth = 22;
	ck_assert_uint_eq(prefetch_depth(&p), 44);
	p.depth = 44;
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
	uint64_t from, to, pos;
	bool hit, miss;

	prefetch_order_open(&o, 0, 100, &hit, &miss, &from, &to);
	ck_assert_uint_eq(o.depth, PREFETCH_DEPTH_START);
	ck_assert_uint_eq(from, 1);
	ck_assert_uint_eq(to, 4);
	for (pos = 1; pos < 6; pos++) {
		prefetch_order_open(&o, pos, 20, &hit, &miss, &from, &to);
		ck_assert(hit);
		ck_assert_uint_le(o.depth, 20);
	}
	ck_assert_uint_eq(o.depth, 20);
	prefetch_order_open(&o, 6, 5, &hit, &miss, &from, &to);
	ck_assert(hit);
	ck_assert_uint_eq(o.depth, 5);
	/* Asked for up to 25 already: nothing new until the reader is
	 * past it. */
	ck_assert_uint_gt(from, to);
}
END_TEST

#define MIB (UINT64_C(1) << 20)

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

int main(void)
{
	const struct unit_case cases[] = {
		{ "depth_grows_with_latency", test_depth_grows_with_latency },
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
	};
	return unit_run(unit_suite("prefetch", cases,
				   sizeof(cases) / sizeof(cases[0])));
}
