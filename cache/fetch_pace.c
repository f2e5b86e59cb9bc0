/*
 * fetch_pace: the pace of the backend's reads, for the prefetcher (fetch.h,
 * fetch_pace_get()): the last FETCH_PACE_WINDOW reads that succeeded, each
 * timed from its start to its end; and what the engine sets from it, the
 * bound on prefetch bytes in flight (prefetch_inflight()).
 */
#include "cache/fetch_impl.h"

#include <string.h>

/* Caller holds f->lock: a backend read of bytes ran from t0 to t1. */
void fetch_pace_record(struct fetch *f, uint64_t t0, uint64_t t1,
		       uint64_t bytes)
{
	f->pace_lat[f->pace_next] = t1 - t0;
	f->pace_end[f->pace_next] = t1;
	f->pace_bytes[f->pace_next] = bytes;
	f->pace_next = (f->pace_next + 1) % FETCH_PACE_WINDOW;
	if (f->pace_n < FETCH_PACE_WINDOW)
		f->pace_n++;
	if (++f->pace_since >= FETCH_FLOW_RECOMPUTE)
		fetch_flow_update(f);
}

void fetch_flow_update(struct fetch *f)
{
	struct fetch_pace p;
	uint64_t max;

	f->pace_since = 0;
	fetch_pace_compute(f, &p);
	max = prefetch_inflight(p.latency_min_ns, p.bytes_per_s, f->budget);
	if (max > f->pf_inflight_max)
		pthread_cond_broadcast(&f->work);
	__atomic_store_n(&f->pf_inflight_max, max, __ATOMIC_RELAXED);
}
/* Caller holds f->lock. The least latency is what a read costs without
 * queueing at the server (or for a connection), so a deeper prefetch,
 * which queues more, does not make itself look necessary; throughput is
 * over the span of the window's reads. */
void fetch_pace_compute(const struct fetch *f, struct fetch_pace *out)
{
	uint64_t lat[FETCH_PACE_WINDOW], first = UINT64_MAX, last = 0,
					 bytes = 0, v;
	unsigned n = f->pace_n, i, j;

	memset(out, 0, sizeof(*out));
	if (n < 2)
		return;
	for (i = 0; i < n; i++) {
		/* Insertion sort: 64 entries, at most once per open. */
		v = f->pace_lat[i];
		for (j = i; j > 0 && lat[j - 1] > v; j--)
			lat[j] = lat[j - 1];
		lat[j] = v;
		if (f->pace_end[i] < first)
			first = f->pace_end[i];
		if (f->pace_end[i] > last)
			last = f->pace_end[i];
		bytes += f->pace_bytes[i];
	}
	out->latency_min_ns = lat[0];
	out->latency_median_ns = lat[n / 2];
	out->latency_p90_ns = lat[n * 9 / 10];
	if (last > first) {
		/* n - 1 reads (and their bytes, but the first's) ended in
		 * last - first; the first's bytes are close enough. */
		out->reads_per_s =
			(uint64_t)(n - 1) * 1000000000u / (last - first);
		out->bytes_per_s = (uint64_t)((double)bytes * (n - 1) / n *
					      1e9 / (double)(last - first));
	}
}
void fetch_pace_get(struct fetch *f, struct fetch_pace *out, uint64_t *stalls)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	fetch_pace_compute(f, out);
	if (stalls != NULL)
		*stalls = f->stalls;
	pthread_mutex_unlock(&f->lock);
}
