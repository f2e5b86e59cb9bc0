/*
 * control: see control.h.
 */
#include "fs/control.h"

#include <errno.h>

static uint64_t rank_bytes(const struct manifest *m,
			   const struct shard_plan *plan, uint64_t r)
{
	const uint32_t *items;
	size_t count, npad, i;
	uint64_t bytes = 0;

	shard_plan_rank(plan, r, &items, &count, &npad);
	for (i = 0; i < count; i++)
		bytes += m->entries[items[i]].size;
	return bytes;
}

int control_write_plan(FILE *f, const struct manifest *m,
		       const struct shard_spec *spec,
		       const struct shard_plan *plan)
{
	uint64_t skipped = 0, total = 0, max_bytes = 0, r;
	size_t max_items = 0, min_items = SIZE_MAX;
	int i;

	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		skipped += m->skipped[i];
	for (r = 0; r < plan->world_size; r++) {
		uint64_t b = rank_bytes(m, plan, r);
		size_t n = plan->rank_start[r + 1] - plan->rank_start[r];

		total += b;
		if (b > max_bytes)
			max_bytes = b;
		if (n > max_items)
			max_items = n;
		if (n < min_items)
			min_items = n;
	}
	fprintf(f, "spec %s\n", SHARD_SPEC_VERSION);
	fprintf(f, "manifest_sha256 %s\n", m->digest);
	fprintf(f, "manifest_items %zu\n", m->count);
	fprintf(f, "manifest_bytes %llu\n", (unsigned long long)m->total_bytes);
	fprintf(f, "skipped_keys %llu\n", (unsigned long long)skipped);
	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		if (m->skipped[i] > 0)
			fprintf(f, "skipped_keys_%s %llu\n",
				manifest_skip_name(i),
				(unsigned long long)m->skipped[i]);
	fprintf(f, "world_size %llu\n", (unsigned long long)spec->world_size);
	fprintf(f, "seed %llu\n", (unsigned long long)spec->seed);
	fprintf(f, "epoch %llu\n", (unsigned long long)spec->epoch);
	fprintf(f, "order %s\n", shard_order_name(spec->order));
	fprintf(f, "layout %s\n", shard_layout_name(spec->layout));
	fprintf(f, "balance %s\n", shard_balance_name(spec->balance));
	fprintf(f, "dropped_items %zu\n", plan->n_dropped);
	/* Largest rank over the mean: 1.0 is perfect balance. */
	fprintf(f, "imbalance_bytes %.4f\n",
		total ? (double)max_bytes * (double)plan->world_size /
				(double)total
		      : 1.0);
	fprintf(f, "imbalance_items %zu\n",
		plan->world_size ? max_items - min_items : 0);
	for (r = 0; r < plan->world_size; r++)
		fprintf(f, "rank %llu items %zu pad %zu bytes %llu\n",
			(unsigned long long)r,
			plan->rank_start[r + 1] - plan->rank_start[r],
			plan->rank_pad[r],
			(unsigned long long)rank_bytes(m, plan, r));
	return ferror(f) ? -EIO : 0;
}

int control_write_order(FILE *f, const struct manifest *m,
			const struct shard_plan *plan, uint64_t rank)
{
	const uint32_t *items;
	size_t count, npad, i;

	shard_plan_rank(plan, rank, &items, &count, &npad);
	for (i = 0; i < count; i++) {
		const struct manifest_entry *e = &m->entries[items[i]];

		if (manifest_write_escaped(f, e->key, e->key_len) < 0)
			return -EIO;
		fputs(i >= count - npad ? "\tpad\n" : "\n", f);
	}
	return ferror(f) ? -EIO : 0;
}

static void metric(FILE *f, const char *name, const char *type,
		   const char *help, uint64_t value)
{
	fprintf(f,
		"# HELP shardfs_%s %s\n# TYPE shardfs_%s %s\nshardfs_%s %llu\n",
		name, help, name, type, name, (unsigned long long)value);
}

int control_write_stats(FILE *f, const struct manifest *m,
			const struct shard_plan *plan,
			const struct control_stats *st)
{
	int i;

	metric(f, "manifest_items", "gauge", "Objects in the manifest.",
	       m->count);
	metric(f, "manifest_bytes", "gauge", "Bytes in the manifest.",
	       m->total_bytes);
	metric(f, "world_size", "gauge", "Ranks in the shard plan.",
	       plan->world_size);
	fprintf(f, "# HELP shardfs_skipped_keys Keys that cannot be paths, "
		   "by reason.\n# TYPE shardfs_skipped_keys gauge\n");
	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		fprintf(f, "shardfs_skipped_keys{reason=\"%s\"} %llu\n",
			manifest_skip_name(i),
			(unsigned long long)m->skipped[i]);
	metric(f, "uptime_seconds", "gauge", "Seconds since the mount.",
	       st->uptime_seconds);
	metric(f, "open_files", "gauge", "Files open now.", st->open_files);
	metric(f, "reads_total", "counter", "Read requests served.", st->reads);
	metric(f, "read_bytes_total", "counter", "Bytes returned to readers.",
	       st->read_bytes);
	metric(f, "read_errors_total", "counter", "Read requests that failed.",
	       st->read_errors);
	metric(f, "backend_requests_total", "counter",
	       "Reads sent to the backend.", st->backend_reads);
	metric(f, "backend_bytes_total", "counter",
	       "Bytes received from the backend.", st->backend_bytes);
	metric(f, "backend_errors_total", "counter",
	       "Backend reads that failed.", st->backend_errors);
	metric(f, "singleflight_waits_total", "counter",
	       "Reads that joined a fetch of the same chunk in flight.",
	       st->cache.singleflight_waits);
	metric(f, "backend_inflight", "gauge", "Backend requests running now.",
	       st->cache.backend_inflight);
	metric(f, "direct_reads_total", "counter",
	       "Reads sent straight to the backend for lack of memory.",
	       st->cache.direct_reads);
	metric(f, "memory_in_use_bytes", "gauge",
	       "Fetch, prefetch and reply buffers held now.",
	       st->cache.memory_in_use_bytes);
	metric(f, "memory_high_water_bytes", "gauge",
	       "Most buffer bytes held at once.",
	       st->cache.memory_high_water_bytes);
	metric(f, "memory_budget_bytes", "gauge",
	       "The buffer budget (prefetch.memory).",
	       st->cache.memory_budget_bytes);
	metric(f, "prefetch_issued_total", "counter",
	       "Chunks queued ahead of readers.", st->cache.prefetch_issued);
	metric(f, "prefetch_bytes_total", "counter",
	       "Bytes of chunks queued ahead of readers.",
	       st->cache.prefetch_bytes);
	metric(f, "prefetch_hits_total", "counter",
	       "Opens of files the prefetcher had asked for.",
	       st->cache.prefetch_hits);
	metric(f, "prefetch_misses_total", "counter",
	       "Opens off the order while files were asked for ahead.",
	       st->cache.prefetch_misses);
	metric(f, "prefetch_refused_total", "counter",
	       "Prefetches not queued for lack of memory.",
	       st->cache.prefetch_refused);
	metric(f, "prefetch_depth_files", "gauge",
	       "Files asked for ahead, in the order opened last.",
	       st->cache.prefetch_depth);
	metric(f, "readahead_window_bytes", "gauge",
	       "Read-ahead window of the last read.",
	       st->cache.readahead_window_bytes);
	metric(f, "cache_enabled", "gauge",
	       "1 if reads go through the disk cache.", st->cache.enabled);
	if (st->cache.enabled) {
		const struct cache_stats *c = &st->cache;

		metric(f, "cache_hits_total", "counter",
		       "Chunk lookups served from the disk cache.", c->hits);
		metric(f, "cache_misses_total", "counter",
		       "Chunk lookups fetched from the backend.", c->misses);
		metric(f, "cache_bytes_from_backend_total", "counter",
		       "Bytes received from the backend.", st->backend_bytes);
		metric(f, "cache_bytes_from_cache_total", "counter",
		       "Bytes served from the disk cache.",
		       c->bytes_from_cache);
		metric(f, "cache_evictions_total", "counter",
		       "Entries this process evicted.", c->evictions);
		metric(f, "cache_crc_failures_total", "counter",
		       "Cached entries that failed their CRC and were "
		       "refetched.",
		       c->crc_failures);
		metric(f, "cache_store_failures_total", "counter",
		       "Chunks served uncached because storing failed.",
		       c->store_failures);
		metric(f, "cache_live_bytes", "gauge",
		       "Bytes in the disk cache, all processes.",
		       c->live_bytes);
		metric(f, "cache_budget_bytes", "gauge",
		       "This mount's disk cache budget.", c->budget_bytes);
	}
	return ferror(f) ? -EIO : 0;
}
