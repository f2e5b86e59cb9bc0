/*
 * prefetch: the prefetcher's policy (docs/DESIGN.md §8, docs/DECISIONS.md), all of it:
 * how far ahead, in what order, within what share of the memory budget.
 * Internal to cache/: pure state machines and rules, no I/O, no locks, no
 * clock; ahead.c keeps one window per reader of an object and one state
 * per order, under its own lock, and turns the chunks these name into
 * prefetch requests of the fetch engine (the first chunk of each file of
 * an order; the chunks of a window); the engine (fetch_*.c) and
 * cache_set_fetch_options() apply the budget's rules below.
 *
 * Within a file: a read that continues the last one (within
 * PREFETCH_SLACK, since the kernel sends concurrent requests of one file
 * slightly out of order) is sequential; the window doubles, from
 * PREFETCH_WINDOW_MIN up to the cap, each time the reader has read another
 * PREFETCH_WINDOW_MIN sequentially since it last grew (not at every
 * request: with small requests that would reach the cap after a few KiB;
 * not only after a whole window's worth: a reader of a large file then
 * waits for each chunk at the start of every file). Any other read is a
 * seek and restarts the window. The range to read ahead is what lies within the
 * window past the read and was not asked for yet.
 *
 * Across files: an order's readers each have a cursor (a lane: the
 * reader is the opener's thread id, so a DataLoader's workers, or a
 * reader's threads, each follow their own part of the order at once).
 * Opening position p moves the opener's cursor to p and asks for
 * p+1 .. p+depth of its cursor, those not asked for already. An open in
 * the range its cursor asked for last is a hit and doubles the cursor's
 * depth (up to the limit); so is an open in another cursor's range (a
 * reader taking up where another left off: a new process per file in
 * order, a worker jumping to its next batch, which a teammate's cursor
 * reached): the cursor then goes on from that one's depth and asks. An
 * open elsewhere is a miss and halves the cursor's depth, down to 0; a
 * reader not seen before that lands nowhere asked starts at depth 0 (a
 * process per file off the order must not ask for files it never reads).
 * Another cursor's range counts while its reader is there: the cursor of
 * the last open, or one that moved more than once (a process that read
 * one file and left is not followed by the next one landing in its
 * range), and a cursor's own next position is always a hit.
 * At depth 0 nothing is asked for, except one position every
 * PREFETCH_PROBE opens, to notice a reader that follows the order again.
 * The pusher pushes from the lowest position of the cursors in use
 * (prefetch_order_floor()) up to the furthest one asked.
 *
 * How far a hit may take depth is the working depth of prefetch_depth()
 * (Little's law: files in flight = rate x latency), not prefetch.files,
 * which only caps it.
 */
#ifndef SHARDFS_CACHE_PREFETCH_H
#define SHARDFS_CACHE_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PREFETCH_WINDOW_MIN (UINT64_C(1) << 20)
#define PREFETCH_WINDOW_MAX (UINT64_C(64) << 20)
#define PREFETCH_SLACK (UINT64_C(4) << 20)
#define PREFETCH_DEPTH_START 4
#define PREFETCH_PROBE 8
#define PREFETCH_FILES_DEFAULT 256 /* files ahead in an order: a cap */

/* ---- the memory budget (prefetch.memory) ---- */

/* Bytes of prefetch parts that run at once (the fetch engine's bound,
 * set by prefetch_inflight() from what it measures). Parts start in
 * queue order, and streams share the server's bandwidth, so the part a
 * reader will need next should not share it with every chunk the window
 * reaches; but a store far away needs many bytes in flight to keep its
 * bandwidth busy (Little's law: throughput x latency). A reader's chunk
 * is never held back by the bound.
 *
 * prefetch_inflight(): PREFETCH_FLOW_HEADROOM x the measured throughput x
 * the least latency of a recent read (a read without queueing, at the
 * server or for a connection). While the store is not the limit, reads
 * take about their least latency, the product is what is in flight now,
 * and the bound doubles as reads finish; once the store is (a server
 * whose bandwidth the reads share), reads take longer, the throughput
 * stops growing and the bound stays where a read takes about HEADROOM
 * times its least latency: a part started now shares the store with
 * that much, no more. A reader slower than the store sets the
 * throughput itself, so it gets what its own pace needs. At least
 * PREFETCH_INFLIGHT_MIN (a local store's need, and the bound until
 * something is measured: small files, latency bound, still go many at a
 * time), at most a quarter of the budget (the window's share, which the
 * window then stretches to: prefetch_window_stretch()). */
#define PREFETCH_INFLIGHT_MIN (UINT64_C(32) << 20)
#define PREFETCH_FLOW_HEADROOM 2
uint64_t prefetch_inflight(uint64_t latency_ns, uint64_t bytes_per_s,
			   uint64_t memory);

/* Whether optional work (a prefetch, a hedged read) may take need more
 * bytes with in_use of budget accounted: at most 3/4 of the budget, so a
 * reader always finds room. */
static inline bool prefetch_may_take(uint64_t in_use, uint64_t need,
				     uint64_t budget)
{
	return in_use + need <= budget / 4 * 3;
}

/* How a budget of memory bytes is shared: the read-ahead window's cap
 * (prefetch_window_cap(): a quarter), what files ahead in an order may
 * hold together (half), the committer's queue of inline bytes waiting
 * for their rows (a quarter, at most queue_max), and how far ahead a
 * reader of named extents reads (prefetch_extents_cap(): an eighth). */
struct prefetch_shares {
	uint64_t window_cap;
	uint64_t files;
	uint64_t queue;
	uint64_t extents_cap;
};
void prefetch_shares(uint64_t memory, uint64_t queue_max,
		     struct prefetch_shares *out);

struct prefetch_window {
	uint64_t next;	 /* end of the furthest read */
	uint64_t window; /* 0 before the first read */
	uint64_t ahead;	 /* read ahead up to here already */
	uint64_t grown;	 /* where the window last grew (or restarted) */
	uint64_t start;	 /* where the sequential run began */
};

/* A read of [off, off + len) of an object of size bytes, with window cap
 * (>= PREFETCH_WINDOW_MIN). Sets [*from, *to) to the bytes to read ahead
 * now (empty when *from >= *to). */
void prefetch_window_read(struct prefetch_window *w, uint64_t off, uint64_t len,
			  uint64_t size, uint64_t cap, uint64_t *from,
			  uint64_t *to);

/* The window's cap for a memory budget of memory bytes: read-ahead and
 * the committer's queue of inline bytes live in the same budget, so
 * neither takes more than a quarter of it; within [PREFETCH_WINDOW_MIN,
 * PREFETCH_WINDOW_MAX]. */
uint64_t prefetch_window_cap(uint64_t memory);

/* The cap of a window over chunks of unit bytes when the engine lets
 * inflight bytes of prefetch parts run at once (prefetch_inflight()):
 * cap (prefetch_window_cap()), or more when the flow needs it: a window
 * reaches the chunk its reader reads, the next, and what is in flight
 * after them, so one reader alone can keep the flow going; never more
 * than a quarter of memory (nor below cap). */
uint64_t prefetch_window_stretch(uint64_t cap, uint64_t memory,
				 uint64_t inflight, uint64_t unit);

/* ---- extents a reader names (cache_prefetch_range()) ---- */

/* A reader that knows what it reads next, scattered over objects (a
 * record view's part: its next records), has the extents of the next
 * prefetch_extents_ahead() bytes of its stream read ahead of each read,
 * each extent (a record, or records next to each other in their object)
 * one backend read of the small chunks around it (fetch_run()). How far:
 * as many bytes as the reader has read of its stream (done: a reader that
 * stops after a few records costs little, one that goes on gets a deeper
 * window), at least PREFETCH_EXTENTS_MIN, at most cap. Connections bound
 * how many of those reads run at once and prefetch_inflight() their
 * bytes; the rest wait in the engine's queue, in order, behind readers'
 * chunks. The reader asks in steps of at least a quarter of that, so
 * that records next to each other come in one read, not one read per
 * reader's request. */
#define PREFETCH_EXTENTS_MIN (UINT64_C(4) << 20)
uint64_t prefetch_extents_ahead(uint64_t done, uint64_t cap);
static inline uint64_t prefetch_extents_step(uint64_t ahead)
{
	return ahead / 4;
}

/* The cap for a memory budget of memory bytes: a read queued ahead holds
 * its chunks and its own buffer until it returns (twice its bytes), and
 * its chunks stay in memory until read, so an eighth keeps it within a
 * quarter, as the read-ahead window; at most PREFETCH_INFLIGHT_MIN (what
 * prefetches read at once before the flow is measured), at least 64 KiB. */
uint64_t prefetch_extents_cap(uint64_t memory);

/* The chunks (of chunk_size bytes) to queue for a read ending at end
 * (exclusive, > 0) that prefetch_window_read() answered with [from, to):
 * those the window reaches past the ones the read itself fetches. Returns
 * false if none, else true and sets [*first, *last]. */
bool prefetch_window_chunks(uint64_t end, uint64_t from, uint64_t to,
			    uint64_t chunk_size, uint64_t *first,
			    uint64_t *last);

/* After prefetch_window_read() for a read ending at end: once the reader
 * has read PREFETCH_WINDOW_MIN sequentially, the unit (chunk) after the
 * one it is in is always asked for, whatever the window, so it is in
 * flight while the reader reads this one (a window that grows per MiB
 * read reaches the next 8 MiB chunk only half-way through the first, and
 * a chunk already in memory is read far faster than the next is
 * fetched). Extends [*from, *to) to the end of that unit (at most size).
 * unit >= 1. */
void prefetch_window_unit(struct prefetch_window *w, uint64_t end,
			  uint64_t size, uint64_t unit, uint64_t *from,
			  uint64_t *to);

/* After prefetch_window_read() for a read ending at end of an object of
 * size bytes: how far the window of a sequential reader past its first
 * PREFETCH_WINDOW_MIN reaches beyond the end of the object (0 if it does
 * not, or for any other reader). file.c reads that much of the next file
 * of the reader's order ahead, so a reader of large files in order keeps
 * its window full across a file's end instead of draining it at every
 * file (only the next file's first chunk was asked for, and the window
 * restarted at PREFETCH_WINDOW_MIN in it). */
uint64_t prefetch_window_spill(const struct prefetch_window *w, uint64_t end,
			       uint64_t size);

/* Without a disk cache, a window reads whole chunks into memory only
 * for a reader past its first PREFETCH_WINDOW_MIN of a sequential run
 * (not one that reads a header), and only the chunks after the one it
 * reads (that one is read just as asked for): whether a read ending at end
 * may read ahead. */
static inline bool prefetch_uncached_ahead(const struct prefetch_window *w,
					   uint64_t end)
{
	return end >= w->start + PREFETCH_WINDOW_MIN;
}

/* Cursors of one order (readers told apart); a cursor not moved in the
 * last PREFETCH_LANES x 4 opens of the order is not in use. */
#define PREFETCH_LANES 16

struct prefetch_lane {
	uint64_t reader;      /* the opener's id */
	uint64_t pos;	      /* its last position */
	uint64_t seen;	      /* the order's open count at its last open:
				* 0, never (a free lane) */
	uint64_t lo, hi;      /* range asked for at its last open: [lo, hi],
				* empty if lo > hi */
	uint64_t asked_hi;    /* highest position it asked for, if asked */
	bool asked;	      /* anything asked and not given up since */
	unsigned depth;	      /* files ahead now */
	unsigned since_probe; /* its opens at depth 0 since the last probe */
	unsigned moves;	      /* opens that moved it, up to 2 */
};

struct prefetch_order {
	uint64_t last;	    /* position opened last, by any reader */
	uint64_t opens;	    /* opens noted, the lanes' clock */
	unsigned last_lane; /* the lane of the last open */
	bool opened;	    /* any open yet */
	unsigned depth;	    /* the depth of the cursor opened last (stats) */
	struct prefetch_lane lanes[PREFETCH_LANES];
};

struct prefetch_open {
	bool hit;	   /* pos was in a range asked for */
	bool miss;	   /* it was not, and something had been asked */
	bool rerun;	   /* the opener's cursor jumped (or started) here */
	uint64_t from, to; /* positions to ask for now; none if from > to */
};

/* Position pos of the order was opened by reader (an id; 0: unknown, all
 * such one reader); limit is the most files ahead (prefetch.files, >= 1).
 * Sets *out: whether it was a hit or a miss, and the positions to ask
 * for: those of pos+1 .. pos+depth not asked for already. */
void prefetch_order_open(struct prefetch_order *o, uint64_t pos,
			 uint64_t reader, unsigned limit,
			 struct prefetch_open *out);

/* The depth of reader's cursor (0 for a reader not seen): what the
 * working depth's computation starts from. */
unsigned prefetch_order_depth(const struct prefetch_order *o, uint64_t reader);

/* The positions reader moved since its last open of the order (1 for a
 * reader not seen or gone back): the pace counts files read without a
 * note, e.g. pushed into the kernel, and the cursors each their own
 * (pos - last would count another reader's place). */
uint64_t prefetch_order_moved(const struct prefetch_order *o, uint64_t reader,
			      uint64_t pos);

/* The lowest position of the cursors in use: where the pusher starts.
 * The last position for a single reader. */
uint64_t prefetch_order_floor(const struct prefetch_order *o);

/* Whether any cursor in use follows the order (depth > 0, something
 * asked): then *asked_hi is the furthest position asked and *depth the
 * deepest cursor's depth. */
bool prefetch_order_followed(const struct prefetch_order *o, uint64_t *asked_hi,
			     unsigned *depth);

/* What the working depth is computed from: measurements (the fetch
 * engine's, the order's) and bounds. */
struct prefetch_pace {
	uint64_t latency_ns; /* a backend read without queueing: the least of
			      * the recent ones (0: not known yet) */
	uint64_t latency_slow_ns; /* their 90th percentile (0: not known) */
	uint64_t gap_ns;     /* the reader's time between opens of the order,
			      * averaged (0: not known yet) */
	bool starved;	     /* the reader waited for a fetch since its last
			      * open: its pace is ours, not its own */
	unsigned depth;	     /* the order's depth now */
	uint64_t file_bytes; /* bytes a file ahead holds, averaged (0: not
			      * known) */
	uint64_t memory;     /* bytes files ahead may hold together */
	unsigned connections;
	unsigned cap; /* prefetch.files: 0 turns prefetch off */
};

/* Files ahead needed so the next file is there when the reader opens
 * it, the most of:
 * - Little's law: PREFETCH_HEADROOM x (latency / gap + 1) in flight (a
 *   reader slower than the backend needs only its own rate x latency);
 * - the time target: the files the reader reads in PREFETCH_AHEAD_NS, or
 *   in PREFETCH_HEADROOM x the slow latency (the 90th percentile of the
 *   recent reads) if that is longer. latency
 *   is the least of the recent reads; a read that takes longer (the
 *   server or the daemon busy) would otherwise make a reader slower than
 *   the backend wait for a file every time (a trainer at 2 ms per file
 *   kept 1 to 3 files ahead at 0 ms, and 62 of its 500 opens waited).
 *   Files ahead of a slower reader cost memory only until stored, and in
 *   flight there are still about latency / gap: it asks for one more file
 *   per open.
 * A starved reader's gap is set by the fetches themselves, so there it is
 * at least twice the depth now (it grows until the reader stops waiting or
 * a bound is reached, as a server whose requests queue needs many more in
 * flight than latency / service time); otherwise it shrinks by at most one
 * file per open (the reader's pace is an average over a few opens, which
 * one slow file moves; the files already asked for are then read before
 * any more is asked). Never more than cap, connections (more files in
 * flight than requests can run only queue) or memory / file_bytes; at
 * least 1 unless cap is 0. Not measured yet: cap and memory / file_bytes
 * (hits then double depth to them, as before there were measurements;
 * files queued beyond the connections wait in the engine's queue). */
/* A reader's pace: its time between opens averaged over about 8 (one slow
 * file is not a change of pace), a gap of more than PREFETCH_GAP_MAX_NS
 * (an epoch's end, a checkpoint) counting as that much. moved: the
 * positions the reader moved since its last note (files it read without
 * one, e.g. pushed into the kernel, count). Returns the new average. */
#define PREFETCH_GAP_MAX_NS (UINT64_C(1000000000))
uint64_t prefetch_pace_gap(uint64_t avg_ns, uint64_t gap_ns, uint64_t moved);
/* The bytes a file ahead holds, averaged the same way. */
uint64_t prefetch_file_bytes(uint64_t avg, uint64_t sample);

/* ---- pushing into the kernel's page cache (cache/push.c) ---- */

/* An order whose reader was not noted this long has no share of the
 * page cache budget: its reader stopped, or reads pushed files only (then
 * its next sentinel notes it again). */
#define PREFETCH_PUSH_ACTIVE_NS (UINT64_C(10) * 1000000000)

/* The last position of an order the pusher may push: the reader's known
 * position plus its share of budget (bytes ahead, all of active orders
 * together) in files of file_bytes (0: not known yet; then depth files),
 * and never past asked_hi, what the prefetcher asked for. */
uint64_t prefetch_push_last(uint64_t known, uint64_t asked_hi, uint64_t budget,
			    uint64_t active, uint64_t file_bytes,
			    unsigned depth);

/* Whether position pos is a sentinel, left to its reader: one in every
 * half depth (at least every 2nd), so that the reader's read of it notes
 * its place before it runs out of pushed files. */
static inline bool prefetch_push_sentinel(uint64_t pos, unsigned depth)
{
	uint64_t step = depth / 2 > 2 ? depth / 2 : 2;

	return pos % step == 0;
}

#define PREFETCH_HEADROOM 2
#define PREFETCH_AHEAD_NS (UINT64_C(50) * 1000000)
unsigned prefetch_depth(const struct prefetch_pace *p);

/* Asking stopped before position pos (memory, or the order ended there
 * for now): positions from pos on may
 * be asked for again. */
void prefetch_order_stopped(struct prefetch_order *o, uint64_t pos);

/* The order's end moved (the next epoch's order joined it): the parts of
 * the cursors' last ranges not asked for (given up at the old end by
 * prefetch_order_stopped()), one range [from[i], to[i]] per cursor, now
 * marked asked; returns how many (at most PREFETCH_LANES). Without it, a
 * reader whose last files come from the kernel (pushed) notes nothing
 * more, and the next epoch's first files would not be fetched ahead. */
unsigned prefetch_order_resume(struct prefetch_order *o,
			       uint64_t from[PREFETCH_LANES],
			       uint64_t to[PREFETCH_LANES]);

#endif
