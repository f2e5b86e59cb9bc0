/*
 * rplan: record views planned over a record index (records/rplan.h).
 *
 * Design: the shard plan's items array (record ids, rank 0's first) is
 * kept as is, and one array of cumulative served bytes over it,
 * cum[k] = served bytes of items[0..k), serves every rank and part: a
 * part is a run [a, b) of that array, its size cum[b] - cum[a] (plus the
 * tar trailer), and the record under a part offset is found by binary
 * search in cum[a..b]. Records are never empty, so cum strictly grows.
 */
#include "records/rplan.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/log.h"

struct rplan {
	const struct rindex *ri;
	struct shard_plan *plan;
	uint64_t *cum; /* plan positions + 1 entries */
	unsigned parts;
	bool tar;
	uint64_t run_bytes; /* 0: records one by one */
	uint32_t window;    /* with runs and a shuffle; else 0 */
};

static uint64_t rplan_weight(const void *ctx, size_t i)
{
	return rindex_served_len(ctx, i);
}

/* The runs of ri: run i is records [first[i], first[i + 1]); bytes[i]
 * its served bytes. */
struct rplan_runs {
	uint32_t *first; /* n + 1 entries */
	uint64_t *bytes;
	size_t n;
};

static uint64_t rplan_run_weight(const void *ctx, size_t i)
{
	const struct rplan_runs *runs = ctx;

	return runs->bytes[i];
}

static int rplan_cut_runs(const struct rindex *ri, uint64_t run_bytes,
			  struct rplan_runs *runs)
{
	size_t o, n = 0;

	/* At most one run per record, plus the sentinel. */
	runs->first = malloc(((size_t)ri->n_records + 1) * sizeof(uint32_t));
	runs->bytes = malloc(((size_t)ri->n_records + 1) * sizeof(uint64_t));
	if (!runs->first || !runs->bytes)
		return -ENOMEM;
	for (o = 0; o < ri->n_objects; o++) {
		const struct rindex_object *obj = &ri->objects[o];
		uint64_t r, end = obj->first + obj->count;

		for (r = obj->first; r < end; r++) {
			uint64_t len = rindex_served_len(ri, r);

			if (r == obj->first ||
			    runs->bytes[n - 1] + len > run_bytes) {
				runs->first[n] = (uint32_t)r;
				runs->bytes[n++] = len;
			} else {
				runs->bytes[n - 1] += len;
			}
		}
	}
	runs->first[n] = (uint32_t)ri->n_records;
	runs->n = n;
	return 0;
}

/* The record plan of a run plan: each run replaced by its records. */
static int rplan_expand(const struct shard_plan *rp_runs,
			const struct rplan_runs *runs, struct shard_plan **out)
{
	uint64_t w = rp_runs->world_size, r, total = 0;
	size_t k, pos = 0, dropped = 0;
	struct shard_plan *p;

	for (k = 0; k < rp_runs->rank_start[w]; k++) {
		uint32_t i = rp_runs->items[k];

		total += runs->first[i + 1] - runs->first[i];
	}
	if (total > UINT32_MAX)
		return -EOVERFLOW;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->world_size = w;
	p->n_items = runs->first[runs->n];
	p->items = malloc((total ? total : 1) * sizeof(*p->items));
	p->rank_start = malloc((w + 1) * sizeof(*p->rank_start));
	p->rank_pad = calloc(w ? w : 1, sizeof(*p->rank_pad));
	if (!p->items || !p->rank_start || !p->rank_pad) {
		shard_plan_free(p);
		return -ENOMEM;
	}
	for (r = 0; r < w; r++) {
		size_t a = rp_runs->rank_start[r],
		       b = rp_runs->rank_start[r + 1];

		p->rank_start[r] = pos;
		for (k = a; k < b; k++) {
			uint32_t i = rp_runs->items[k], rec;

			for (rec = runs->first[i]; rec < runs->first[i + 1];
			     rec++)
				p->items[pos++] = rec;
			if (k >= b - rp_runs->rank_pad[r])
				p->rank_pad[r] +=
					runs->first[i + 1] - runs->first[i];
		}
	}
	p->rank_start[w] = pos;
	/* Records in no rank (dropped runs): all but those placed once. */
	dropped = p->n_items - pos;
	for (r = 0; r < w; r++)
		dropped += p->rank_pad[r];
	p->n_dropped = dropped;
	*out = p;
	return 0;
}

/* Shuffles each rank's non-pad records within windows (see
 * rplan_build_runs()). */
static void rplan_window_shuffle(struct shard_plan *p,
				 const struct shard_spec *spec, uint32_t window)
{
	uint64_t r;

	for (r = 0; r < p->world_size; r++) {
		uint64_t v[4] = { 2, spec->seed, spec->epoch, r };
		uint64_t state = shard_derive(v, 4);
		size_t a = p->rank_start[r];
		size_t n = p->rank_start[r + 1] - a - p->rank_pad[r], w0;

		for (w0 = 0; w0 < n; w0 += window) {
			uint32_t *x = p->items + a + w0;
			size_t len = n - w0 < window ? n - w0 : window, i;

			for (i = len - 1; i >= 1; i--) {
				size_t j = (size_t)shard_bounded(&state, i + 1);
				uint32_t t = x[i];

				x[i] = x[j];
				x[j] = t;
			}
		}
	}
}

/* The checks and the empty plan both builders start from. */
static int rplan_new(const struct rindex *ri, const struct shard_spec *spec,
		     unsigned parts, struct rplan **out, struct rplan **rp)
{
	if (!ri || !ri->finished || !out || parts < 1 ||
	    parts > RPLAN_PARTS_MAX || shard_spec_check(spec))
		return -EINVAL;
	if (ri->n_records > UINT32_MAX) {
		log_msg(LOG_ERR,
			"record index has %llu records; record views take at "
			"most 4294967295 (2^32-1)",
			(unsigned long long)ri->n_records);
		return -EOVERFLOW;
	}
	*rp = calloc(1, sizeof(**rp));
	if (!*rp)
		return -ENOMEM;
	(*rp)->ri = ri;
	(*rp)->parts = parts;
	(*rp)->tar = rec_format_base(ri->format) == REC_FORMAT_TAR;
	return 0;
}

static int rplan_finish(struct rplan *rp, struct rplan **out);

/* Logs why a plan could not be built: shard_plan_build() said -EOVERFLOW.
 * grouping: " in runs" for a plan of runs, or "". */
static void rplan_overflow_log(const struct rindex *ri,
			       const struct shard_spec *spec,
			       const char *grouping)
{
	log_msg(LOG_ERR,
		"record plan: %llu records%s with world_size %llu give more "
		"than 2^32-1 positions",
		(unsigned long long)ri->n_records, grouping,
		(unsigned long long)spec->world_size);
}

int rplan_build_runs(const struct rindex *ri, const struct shard_spec *spec,
		     unsigned parts, uint64_t run_bytes, uint32_t window,
		     struct rplan **out)
{
	struct rplan_runs runs = { 0 };
	struct shard_plan *by_run = NULL;
	struct rplan *rp;
	int rc;

	if (run_bytes == 0)
		return rplan_build(ri, spec, parts, out);
	rc = rplan_new(ri, spec, parts, out, &rp);
	if (rc)
		return rc;
	rc = rplan_cut_runs(ri, run_bytes, &runs);
	if (rc == 0)
		rc = shard_plan_build(spec, runs.n, rplan_run_weight, &runs,
				      &by_run);
	if (rc == 0)
		rc = rplan_expand(by_run, &runs, &rp->plan);
	if (rc == -EOVERFLOW)
		rplan_overflow_log(ri, spec, " in runs");
	shard_plan_free(by_run);
	free(runs.first);
	free(runs.bytes);
	if (rc) {
		rplan_free(rp);
		return rc;
	}
	rp->run_bytes = run_bytes;
	if (spec->order == SHARD_ORDER_SHUFFLE && window > 1) {
		rp->window = window;
		rplan_window_shuffle(rp->plan, spec, window);
	}
	return rplan_finish(rp, out);
}

int rplan_build(const struct rindex *ri, const struct shard_spec *spec,
		unsigned parts, struct rplan **out)
{
	struct rplan *rp;
	int rc;

	rc = rplan_new(ri, spec, parts, out, &rp);
	if (rc)
		return rc;
	rc = shard_plan_build(spec, (size_t)ri->n_records, rplan_weight, ri,
			      &rp->plan);
	if (rc == -EOVERFLOW)
		rplan_overflow_log(ri, spec, "");
	if (rc)
		goto err;
	return rplan_finish(rp, out);
err:
	rplan_free(rp);
	return rc;
}

/* Sets the cumulative offsets over rp's plan and hands it out. */
static int rplan_finish(struct rplan *rp, struct rplan **out)
{
	const struct rindex *ri = rp->ri;
	size_t total, k;

	total = rp->plan->rank_start[rp->plan->world_size];
	/* After the shard plan freed its scratch: the peak stays at
	 * 12 (index) + 4 (items) + 8 (cum) bytes per record. */
	rp->cum = malloc((total + 1) * sizeof(*rp->cum));
	if (!rp->cum) {
		rplan_free(rp);
		return -ENOMEM;
	}
	rp->cum[0] = 0;
	for (k = 0; k < total; k++)
		rp->cum[k + 1] =
			rp->cum[k] + rindex_served_len(ri, rp->plan->items[k]);
	*out = rp;
	return 0;
}

void rplan_free(struct rplan *rp)
{
	if (!rp)
		return;
	shard_plan_free(rp->plan);
	free(rp->cum);
	free(rp);
}

uint64_t rplan_run_bytes(const struct rplan *rp)
{
	return rp->run_bytes;
}

uint32_t rplan_window(const struct rplan *rp)
{
	return rp->window;
}

unsigned rplan_parts(const struct rplan *rp)
{
	return rp->parts;
}

uint64_t rplan_world_size(const struct rplan *rp)
{
	return rp->plan->world_size;
}

size_t rplan_dropped(const struct rplan *rp)
{
	return rp->plan->n_dropped;
}

void rplan_rank(const struct rplan *rp, uint64_t r, const uint32_t **recs,
		size_t *count, size_t *npad)
{
	shard_plan_rank(rp->plan, r, recs, count, npad);
}

void rplan_part_range(const struct rplan *rp, uint64_t r, unsigned p,
		      size_t *first, size_t *count)
{
	size_t n, q, m;

	*first = 0;
	*count = 0;
	if (r >= rp->plan->world_size || p >= rp->parts)
		return;
	n = rp->plan->rank_start[r + 1] - rp->plan->rank_start[r];
	q = n / rp->parts;
	m = n % rp->parts;
	*first = q * p + (p < m ? p : m);
	*count = q + (p < m);
}

/* Part p of rank r as plan positions [*a, *b); false out of range. */
static bool rplan_span(const struct rplan *rp, uint64_t r, unsigned p,
		       size_t *a, size_t *b)
{
	size_t first, count;

	if (r >= rp->plan->world_size || p >= rp->parts)
		return false;
	rplan_part_range(rp, r, p, &first, &count);
	*a = rp->plan->rank_start[r] + first;
	*b = *a + count;
	return true;
}

uint64_t rplan_part_size(const struct rplan *rp, uint64_t r, unsigned p)
{
	size_t a, b;

	if (!rplan_span(rp, r, p, &a, &b))
		return 0;
	return rp->cum[b] - rp->cum[a] + (rp->tar ? RPLAN_TAR_TRAILER : 0);
}

size_t rplan_map(const struct rplan *rp, uint64_t r, unsigned p, uint64_t off,
		 uint64_t len, struct rplan_seg *segs, size_t max)
{
	const struct rindex *ri = rp->ri;
	size_t a, b, lo, hi, n = 0;
	uint64_t base, records, size, pos, end;

	if (!rplan_span(rp, r, p, &a, &b))
		return 0;
	base = rp->cum[a];
	records = rp->cum[b] - base;
	size = records + (rp->tar ? RPLAN_TAR_TRAILER : 0);
	if (off >= size || len == 0)
		return 0;
	end = len > size - off ? size : off + len;
	pos = off;

	/* The last position k in [a, b) with cum[k] - base <= off. */
	lo = a;
	hi = b;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (rp->cum[mid] - base <= pos)
			lo = mid;
		else
			hi = mid;
	}
	for (; lo < b && pos < end && n < max; lo++) {
		uint64_t rec = rp->plan->items[lo];
		uint64_t in = pos - (rp->cum[lo] - base);
		uint64_t stored = ri->rec_len[rec];
		uint64_t stop = rp->cum[lo + 1] - base;

		if (in < stored) {
			uint64_t k = stored - in;

			if (k > end - pos)
				k = end - pos;
			segs[n++] = (struct rplan_seg){ RPLAN_SEG_RECORD, rec,
							in, k };
			pos += k;
		}
		/* Served longer than stored: the added '\n'. */
		if (pos < end && pos < stop && n < max) {
			segs[n++] = (struct rplan_seg){ RPLAN_SEG_NEWLINE, rec,
							0, 1 };
			pos++;
		}
		if (pos < stop)
			break; /* out of room or range mid-record */
	}
	if (pos >= records && pos < end && n < max)
		segs[n++] =
			(struct rplan_seg){ RPLAN_SEG_ZERO, 0, 0, end - pos };
	return n;
}

int rplan_part_name(const struct rplan *rp, unsigned p, char *buf, size_t size)
{
	int k;

	if (p >= rp->parts)
		return -EINVAL;
	k = snprintf(buf, size, "part-%05u-of-%05u.%s", p, rp->parts,
		     rec_format_ext(rp->ri->format));
	if (k < 0 || (size_t)k >= size)
		return -ENAMETOOLONG;
	return 0;
}

size_t rplan_mem_bytes(const struct rplan *rp)
{
	size_t total = rp->plan->rank_start[rp->plan->world_size];

	return sizeof(*rp) + sizeof(*rp->plan) +
	       (total + 1) * (sizeof(*rp->plan->items) + sizeof(*rp->cum)) +
	       (size_t)rp->plan->world_size * 2 * sizeof(size_t) +
	       sizeof(size_t);
}
