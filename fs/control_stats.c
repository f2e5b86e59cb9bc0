/*
 * control_stats: the text of .shardfs/stats (the Prometheus exposition:
 * the live counters and the cache's metric table, build info, the plan
 * digest and its memo, the ranks served, the log's counts) and of
 * .shardfs/log, formats in control.h, from the numbers it is given
 * (control_files.c's fs_stats_write() gathers a mount's). Both are
 * written anew at each open (control_files.c serves them). Calls
 * control.c for the plan text it digests.
 */
#include "fs/control.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "fs/fs_impl.h"
#include "util/sha256.h"

static void metric(FILE *f, const char *name, const char *type,
		   const char *help, uint64_t value)
{
	fprintf(f,
		"# HELP shardfs_%s %s\n# TYPE shardfs_%s %s\nshardfs_%s %llu\n",
		name, help, name, type, name, (unsigned long long)value);
}

/* The last plan digest and each rank's served bytes, keyed by everything
 * the plan text is a function of (so a reload to another manifest or spec
 * recomputes, and pointer reuse cannot return a stale answer). */
struct plan_memo {
	bool valid;
	char manifest_digest[65];
	size_t count;
	uint64_t total_bytes;
	uint64_t skipped[MANIFEST_SKIP_NREASONS];
	struct shard_spec spec;
	char digest[65];
	uint64_t *rank_bytes; /* world_size entries: non-pad bytes */
};

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plan_memo memo; /* protected by memo_lock */

static bool memo_matches(const struct manifest *m,
			 const struct shard_spec *spec)
{
	return memo.valid && strcmp(memo.manifest_digest, m->digest) == 0 &&
	       memo.count == m->count && memo.total_bytes == m->total_bytes &&
	       memcmp(memo.skipped, m->skipped, sizeof(memo.skipped)) == 0 &&
	       memo.spec.world_size == spec->world_size &&
	       memo.spec.seed == spec->seed && memo.spec.epoch == spec->epoch &&
	       memo.spec.order == spec->order &&
	       memo.spec.layout == spec->layout &&
	       memo.spec.balance == spec->balance &&
	       memo.spec.reshuffle == spec->reshuffle &&
	       memo.spec.skip == spec->skip &&
	       memo.spec.skip_world == spec->skip_world;
}

/* Fills the memo for m and spec; memo_lock held. */
static int memo_fill(const struct manifest *m, const struct shard_spec *spec,
		     const struct shard_plan *plan)
{
	uint64_t *bytes =
		calloc(plan->world_size ? plan->world_size : 1, sizeof(*bytes));
	char *text = NULL, digest[65];
	size_t len = 0, r;
	FILE *f;
	int rc;

	if (bytes == NULL)
		return -ENOMEM;
	f = open_memstream(&text, &len);
	if (f == NULL) {
		free(bytes);
		return -ENOMEM;
	}
	rc = control_write_plan(f, m, spec, plan);
	if (fclose(f) != 0 && rc == 0)
		rc = -ENOMEM;
	if (rc == 0)
		rc = sha256_hex(text, len, digest);
	free(text);
	if (rc < 0) {
		free(bytes);
		return rc;
	}
	for (r = 0; r < plan->world_size; r++) {
		const uint32_t *items;
		size_t count, npad, i;

		shard_plan_rank(plan, r, &items, &count, &npad);
		for (i = 0; i < count - npad; i++)
			bytes[r] += m->entries[items[i]].size;
	}
	free(memo.rank_bytes);
	memo.rank_bytes = bytes;
	memcpy(memo.manifest_digest, m->digest, sizeof(memo.manifest_digest));
	memo.count = m->count;
	memo.total_bytes = m->total_bytes;
	memcpy(memo.skipped, m->skipped, sizeof(memo.skipped));
	memo.spec = *spec;
	memcpy(memo.digest, digest, sizeof(memo.digest));
	memo.valid = true;
	return 0;
}

int control_plan_digest(const struct manifest *m, const struct shard_spec *spec,
			const struct shard_plan *plan, char hex[65])
{
	int rc = 0;

	pthread_mutex_lock(&memo_lock);
	if (!memo_matches(m, spec))
		rc = memo_fill(m, spec, plan);
	if (rc == 0)
		memcpy(hex, memo.digest, 65);
	pthread_mutex_unlock(&memo_lock);
	return rc;
}

/* Writes s as a label value: UTF-8 with \\, \" and \n escaped (the text
 * format's rules); bytes that are not valid UTF-8 (an object key in an
 * error message may hold any) become '?', since a scraper rejects them. */
static void write_label_value(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t n = 0, i;

		if (*p == '\\' || *p == '"') {
			fputc('\\', f);
			fputc(*p++, f);
			continue;
		}
		if (*p == '\n') {
			fputs("\\n", f);
			p++;
			continue;
		}
		if (*p < 0x80)
			n = 1;
		else if (*p >= 0xc2 && *p <= 0xdf)
			n = 2;
		else if (*p >= 0xe0 && *p <= 0xef)
			n = 3;
		else if (*p >= 0xf0 && *p <= 0xf4)
			n = 4;
		for (i = 1; i < n; i++)
			if ((p[i] & 0xc0) != 0x80)
				n = 0;
		/* Overlongs, surrogates and code points past U+10FFFF. */
		if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) ||
		    (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
		    (n == 4 && p[0] == 0xf0 && p[1] < 0x90) ||
		    (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
			n = 0;
		if (n == 0) {
			fputc('?', f);
			p++;
			continue;
		}
		fwrite(p, 1, n, f);
		p += n;
	}
}

static void family(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP shardfs_%s %s\n# TYPE shardfs_%s %s\n", name, help,
		name, type);
}

/* One sample with one label, the value escaped. */
static void labelled(FILE *f, const char *name, const char *label,
		     const char *value, uint64_t v)
{
	fprintf(f, "shardfs_%s{%s=\"", name, label);
	write_label_value(f, value);
	fprintf(f, "\"} %llu\n", (unsigned long long)v);
}

static int write_info(FILE *f, const struct manifest *m,
		      const struct shard_spec *spec,
		      const struct shard_plan *plan,
		      const struct control_stats *st)
{
	char digest[65];

	if (st->plan_digest[0] != '\0')
		memcpy(digest, st->plan_digest, sizeof(digest));
	else if (control_plan_digest(m, spec, plan, digest) < 0)
		return -EIO;
	family(f, "build_info", "gauge",
	       "Always 1: this build's version and libraries.");
	fputs("shardfs_build_info{version=\"", f);
	write_label_value(f, SHARDFS_VERSION);
	fputs("\",shard_spec=\"", f);
	write_label_value(f, SHARD_SPEC_VERSION);
	fputs("\",libfuse=\"", f);
	write_label_value(f, fuse_pkgversion());
	fputs("\",libcurl=\"", f);
	write_label_value(f, st->libcurl ? st->libcurl : "");
	fputs("\"} 1\n", f);
	family(f, "plan_info", "gauge",
	       "Always 1: the plan served (plan_sha256 is sha256 of the "
	       "plan text) and its manifest.");
	fprintf(f,
		"shardfs_plan_info{plan_sha256=\"%s\",manifest_sha256=\"%s\"} "
		"1\n",
		digest, m->digest);
	return 0;
}

/* The ranks view shows, in order: its .shardfs/rank-R.order files. */
static const struct view_node *ctrl_dir(const struct view *view)
{
	const struct view_node *root = view_node(view, 1);
	uint64_t ino;

	if (root == NULL || view_lookup(view, root, ".shardfs", 8, &ino) < 0)
		return NULL;
	return view_node(view, ino);
}

static bool served_rank(const struct view *view, const struct view_node *dir,
			uint32_t i, uint64_t *rank)
{
	const struct view_node *n = view_child(view, dir, i);

	if (n->kind != VIEW_CTRL || n->ctrl != VIEW_CTRL_ORDER)
		return false;
	*rank = n->u.rank;
	return true;
}

static int write_ranks(FILE *f, const struct manifest *m,
		       const struct shard_spec *spec,
		       const struct shard_plan *plan, const struct view *view)
{
	const struct view_node *dir = ctrl_dir(view);
	uint64_t n_ranks = 0, objects = 0, bytes = 0, r;
	uint32_t i, n = dir ? dir->u.dir.count : 0;
	char label[24];
	int pass;

	/* Under memo_lock: the per-rank bytes belong to the memo. */
	pthread_mutex_lock(&memo_lock);
	if (!memo_matches(m, spec) && memo_fill(m, spec, plan) < 0) {
		pthread_mutex_unlock(&memo_lock);
		return -EIO;
	}
	for (i = 0; i < n; i++)
		if (served_rank(view, dir, i, &r) && r < plan->world_size) {
			const uint32_t *items;
			size_t count, npad;

			shard_plan_rank(plan, r, &items, &count, &npad);
			n_ranks++;
			objects += count - npad;
			bytes += memo.rank_bytes[r];
		}
	metric(f, "ranks_served", "gauge",
	       "Ranks this mount shows as rank-R/ directories.", n_ranks);
	metric(f, "served_objects", "gauge",
	       "Files in the served ranks' directories (pads excluded).",
	       objects);
	metric(f, "served_bytes", "gauge",
	       "Bytes of the files in the served ranks' directories.", bytes);
	for (pass = 0; pass < 2 && n_ranks > 0; pass++) {
		if (pass == 0)
			family(f, "rank_objects", "gauge",
			       "Files in a served rank's directory.");
		else
			family(f, "rank_bytes", "gauge",
			       "Bytes of the files in a served rank's "
			       "directory.");
		for (i = 0; i < n; i++) {
			const uint32_t *items;
			size_t count, npad;

			if (!served_rank(view, dir, i, &r) ||
			    r >= plan->world_size)
				continue;
			shard_plan_rank(plan, r, &items, &count, &npad);
			snprintf(label, sizeof(label), "%llu",
				 (unsigned long long)r);
			labelled(f, pass == 0 ? "rank_objects" : "rank_bytes",
				 "rank", label,
				 pass == 0 ? count - npad : memo.rank_bytes[r]);
		}
	}
	pthread_mutex_unlock(&memo_lock);
	return ferror(f) ? -EIO : 0;
}

int control_plan_digest_of(const struct fs_data *d, char hex[65])
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (d->rplan == NULL)
		return control_plan_digest(d->manifest, d->spec, d->plan, hex);
	/* A record view's text is a few lines per rank: hashed each time,
	 * no memo. */
	f = open_memstream(&text, &len);
	if (f == NULL)
		return -ENOMEM;
	rc = control_write_plan_of(f, d);
	if (fclose(f) != 0 && rc == 0)
		rc = -ENOMEM;
	if (rc == 0)
		rc = sha256_hex(text, len, hex);
	free(text);
	return rc;
}

int control_write_log(FILE *f, const struct log_entry *e, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		time_t t = (time_t)e[i].time;
		struct tm tm;
		char when[32] = "?";

		if (gmtime_r(&t, &tm) != NULL)
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		fprintf(f, "%s %s: %s\n", when, log_level_name(e[i].level),
			e[i].msg);
	}
	return ferror(f) ? -EIO : 0;
}

static void write_log(FILE *f, const struct log_errors *log)
{
	metric(f, "log_errors_total", "counter", "Errors logged.", log->errors);
	metric(f, "log_warnings_total", "counter", "Warnings logged.",
	       log->warnings);
	metric(f, "last_error_timestamp_seconds", "gauge",
	       "Unix time of the last error logged, 0 if none.",
	       log->last_time > 0 ? (uint64_t)log->last_time : 0);
	if (log->last[0] != '\0') {
		family(f, "last_error_info", "gauge",
		       "Always 1: the last error logged, as its message "
		       "label.");
		labelled(f, "last_error_info", "message", log->last, 1);
	}
	if (log->target[0] != '\0') {
		family(f, "log_target_info", "gauge",
		       "Always 1: where the log goes (target, path of a file, "
		       "why a fallback was taken).");
		fputs("shardfs_log_target_info{target=\"", f);
		write_label_value(f, log->target);
		fputs("\",path=\"", f);
		write_label_value(f, log->path);
		fputs("\",fallback=\"", f);
		write_label_value(f, log->note);
		fputs("\"} 1\n", f);
	}
}

/* The lines of control_write_stats() that are one uint64_t of struct
 * control_stats each, in their order: a table, so a new counter is one row.
 * div turns nanoseconds into the microseconds the names say. The rows
 * named cache_* come after shardfs_cache_enabled, and only with a disk
 * cache (st->cache.enabled). */
struct stat_metric {
	const char *name;
	const char *type;
	const char *help;
	size_t offset;
	uint64_t div;
};

#define STAT_CACHE_PREFIX "cache_"

static const char *const fs_op_names[FS_OP_COUNT] = {
	"lookup",  "getattr", "open",	"read",	 "release",
	"opendir", "readdir", "forget", "other",
};

static const struct stat_metric stat_metrics[] = {
	{ "uptime_seconds", "gauge", "Seconds since the mount.",
	  offsetof(struct control_stats, uptime_seconds), 1 },
	{ "generation", "gauge",
	  "Trees served so far: 0 at mount, +1 per reload (SIGHUP).",
	  offsetof(struct control_stats, generation), 1 },
	{ "epoch_trees", "gauge",
	  "epoch-E/ and skip-K/ trees in memory (kept, or still used by the "
	  "kernel).",
	  offsetof(struct control_stats, epoch_trees), 1 },
	{ "epoch_trees_built_total", "counter",
	  "epoch-E/ and skip-K/ trees planned (on first use, or ahead near "
	  "the end of an epoch).",
	  offsetof(struct control_stats, epoch_builds), 1 },
	{ "reads_total", "counter", "Read requests served.",
	  offsetof(struct control_stats, reads), 1 },
	{ "read_bytes_total", "counter", "Bytes returned to readers.",
	  offsetof(struct control_stats, read_bytes), 1 },
	{ "read_errors_total", "counter", "Read requests that failed.",
	  offsetof(struct control_stats, read_errors), 1 },
	{ "stale_reads_total", "counter",
	  "Reads of a file through a tree older than a reload that changed "
	  "its object (they fail).",
	  offsetof(struct control_stats, stale_reads), 1 },
	{ "kernel_lookups_total", "counter",
	  "Lookups and listings (READDIRPLUS, many files each) the daemon "
	  "made through its own mount, so the kernel knows the files the "
	  "pusher puts into its page cache.",
	  offsetof(struct control_stats, self_lookups), 1 },
	{ "kernel_pushes_total", "counter",
	  "Files put whole into the kernel's page cache ahead of their "
	  "reader (reads of them need no request to the daemon).",
	  offsetof(struct control_stats, cache.pushed_files), 1 },
	{ "kernel_push_bytes_total", "counter", "Bytes of those files.",
	  offsetof(struct control_stats, cache.pushed_bytes), 1 },
	{ "kernel_push_failures_total", "counter",
	  "Files the pusher read but could not put into the page cache.",
	  offsetof(struct control_stats, cache.push_failures), 1 },
	{ "kernel_push_sentinels_total", "counter",
	  "Files ahead left to their reader on purpose, so its read tells "
	  "the prefetcher where it is.",
	  offsetof(struct control_stats, cache.push_sentinels), 1 },
	{ "backend_requests_total", "counter", "Reads sent to the backend.",
	  offsetof(struct control_stats, backend_reads), 1 },
	{ "backend_bytes_total", "counter", "Bytes received from the backend.",
	  offsetof(struct control_stats, backend_bytes), 1 },
	{ "backend_errors_total", "counter", "Backend reads that failed.",
	  offsetof(struct control_stats, backend_errors), 1 },
	{ "singleflight_waits_total", "counter",
	  "Reads that joined a fetch of the same chunk in flight.",
	  offsetof(struct control_stats, cache.singleflight_waits), 1 },
	{ "backend_inflight", "gauge", "Backend requests running now.",
	  offsetof(struct control_stats, cache.backend_inflight), 1 },
	{ "direct_reads_total", "counter",
	  "Reads sent straight to the backend for lack of memory.",
	  offsetof(struct control_stats, cache.direct_reads), 1 },
	{ "hedges_issued_total", "counter",
	  "Backend reads re-issued for being much slower than recent ones "
	  "(prefetch.hedge).",
	  offsetof(struct control_stats, cache.hedges_issued), 1 },
	{ "hedges_won_total", "counter",
	  "Re-issued reads whose answer came first and was served.",
	  offsetof(struct control_stats, cache.hedges_won), 1 },
	{ "memory_in_use_bytes", "gauge",
	  "Fetch, prefetch and reply buffers held now.",
	  offsetof(struct control_stats, cache.memory_in_use_bytes), 1 },
	{ "memory_high_water_bytes", "gauge", "Most buffer bytes held at once.",
	  offsetof(struct control_stats, cache.memory_high_water_bytes), 1 },
	{ "memory_budget_bytes", "gauge",
	  "The buffer budget (prefetch.memory).",
	  offsetof(struct control_stats, cache.memory_budget_bytes), 1 },
	{ "prefetch_issued_total", "counter", "Chunks queued ahead of readers.",
	  offsetof(struct control_stats, cache.prefetch_issued), 1 },
	{ "prefetch_bytes_total", "counter",
	  "Bytes of chunks queued ahead of readers.",
	  offsetof(struct control_stats, cache.prefetch_bytes), 1 },
	{ "prefetch_hits_total", "counter",
	  "Opens of files the prefetcher had asked for.",
	  offsetof(struct control_stats, cache.prefetch_hits), 1 },
	{ "prefetch_misses_total", "counter",
	  "Opens off the order while files were asked for ahead.",
	  offsetof(struct control_stats, cache.prefetch_misses), 1 },
	{ "prefetch_refused_total", "counter",
	  "Prefetches not queued for lack of memory.",
	  offsetof(struct control_stats, cache.prefetch_refused), 1 },
	{ "prefetch_depth_files", "gauge",
	  "Files asked for ahead, in the order opened last.",
	  offsetof(struct control_stats, cache.prefetch_depth), 1 },
	{ "prefetch_reader_gap_us", "gauge",
	  "Time between opens of the order opened last, averaged.",
	  offsetof(struct control_stats, cache.prefetch_gap_ns), 1000 },
	{ "first_chunk_waits_total", "counter",
	  "Reads that found a file's first chunk not fetched yet.",
	  offsetof(struct control_stats, cache.first_waits), 1 },
	{ "first_chunk_wait_us_total", "counter",
	  "Time those reads waited for it, summed.",
	  offsetof(struct control_stats, cache.first_wait_ns), 1000 },
	{ "backend_latency_min_us", "gauge",
	  "Least start-to-end time of the recent backend reads.",
	  offsetof(struct control_stats, cache.backend_latency_min_ns), 1000 },
	{ "backend_latency_median_us", "gauge",
	  "Median start-to-end time of the recent backend reads.",
	  offsetof(struct control_stats, cache.backend_latency_median_ns),
	  1000 },
	{ "backend_reads_per_second", "gauge",
	  "Backend reads completed per second, recently.",
	  offsetof(struct control_stats, cache.backend_reads_per_s), 1 },
	{ "backend_bytes_per_second", "gauge",
	  "Bytes of backend reads completed per second, recently.",
	  offsetof(struct control_stats, cache.backend_bytes_per_s), 1 },
	{ "readahead_window_bytes", "gauge",
	  "Read-ahead window of the last read.",
	  offsetof(struct control_stats, cache.readahead_window_bytes), 1 },
	{ "prefetch_inflight_max_bytes", "gauge",
	  "Bytes of prefetch reads that may run at once: throughput x "
	  "latency.",
	  offsetof(struct control_stats, cache.prefetch_inflight_max_bytes),
	  1 },
	{ "cache_hits_total", "counter",
	  "Chunk lookups served from the disk cache.",
	  offsetof(struct control_stats, cache.hits), 1 },
	{ "cache_misses_total", "counter",
	  "Chunk lookups fetched from the backend.",
	  offsetof(struct control_stats, cache.misses), 1 },
	{ "cache_bytes_from_backend_total", "counter",
	  "Bytes received from the backend.",
	  offsetof(struct control_stats, backend_bytes), 1 },
	{ "cache_bytes_from_cache_total", "counter",
	  "Bytes served from the disk cache.",
	  offsetof(struct control_stats, cache.bytes_from_cache), 1 },
	{ "cache_evictions_total", "counter", "Entries this process evicted.",
	  offsetof(struct control_stats, cache.evictions), 1 },
	{ "cache_crc_failures_total", "counter",
	  "Cached entries that failed their CRC and were refetched.",
	  offsetof(struct control_stats, cache.crc_failures), 1 },
	{ "cache_store_failures_total", "counter",
	  "Chunks served uncached because storing failed.",
	  offsetof(struct control_stats, cache.store_failures), 1 },
	{ "cache_derived_runs_total", "counter",
	  "Producer runs of derived objects (a .gz source decompressed).",
	  offsetof(struct control_stats, cache.derived_runs), 1 },
	{ "cache_derived_bytes_total", "counter",
	  "Bytes those producer runs gave.",
	  offsetof(struct control_stats, cache.derived_bytes), 1 },
	{ "cache_whole_checked_total", "counter",
	  "Objects held whole that matched the store's checksum of them.",
	  offsetof(struct control_stats, cache.whole_checked), 1 },
	{ "cache_whole_mismatches_total", "counter",
	  "Objects held whole that did not: their chunks were dropped.",
	  offsetof(struct control_stats, cache.whole_mismatches), 1 },
	{ "cache_live_bytes", "gauge",
	  "Bytes in the disk cache, all processes.",
	  offsetof(struct control_stats, cache.live_bytes), 1 },
	{ "cache_budget_bytes", "gauge", "This mount's disk cache budget.",
	  offsetof(struct control_stats, cache.budget_bytes), 1 },
};

/* Writes the rows of stat_metrics named cache_* (cache true) or the
 * others. */
static void write_metric_table(FILE *f, const struct control_stats *st,
			       bool cache)
{
	const struct stat_metric *t = stat_metrics;
	size_t i, n = sizeof(stat_metrics) / sizeof(stat_metrics[0]);

	for (i = 0; i < n; i++) {
		uint64_t v;

		if (cache != !strncmp(t[i].name, STAT_CACHE_PREFIX,
				      strlen(STAT_CACHE_PREFIX)))
			continue;
		memcpy(&v, (const char *)st + t[i].offset, sizeof(v));
		metric(f, t[i].name, t[i].type, t[i].help, v / t[i].div);
	}
}

int control_write_stats(FILE *f, const struct manifest *m,
			const struct shard_spec *spec,
			const struct shard_plan *plan, const struct view *view,
			const struct control_stats *st)
{
	int i;

	if (write_info(f, m, spec, plan, st) < 0 ||
	    write_ranks(f, m, spec, plan, view) < 0)
		return -EIO;

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
	write_metric_table(f, st, false);
	family(f, "fuse_requests_total", "counter",
	       "Requests from readers, by opcode (the daemon's own lookups "
	       "are kernel_lookups_total): their round trips.");
	for (i = 0; i < FS_OP_COUNT; i++)
		labelled(f, "fuse_requests_total", "op", fs_op_names[i],
			 st->ops[i]);
	metric(f, "cache_enabled", "gauge",
	       "1 if reads go through the disk cache.", st->cache.enabled);
	if (st->cache.enabled)
		write_metric_table(f, st, true);
	write_log(f, &st->log);
	return ferror(f) ? -EIO : 0;
}

/* The counters of struct xform_stats as families, in the order of the
 * docs (OPERATIONS.md); each value divided by div. */
static const struct xform_metric {
	const char *name, *type, *help;
	size_t offset;
	uint64_t div;
} xform_metrics[] = {
	{ "transform_runs_total", "counter",
	  "Runs of the transform that produce an output, failed ones too.",
	  offsetof(struct xform_stats, runs), 1 },
	{ "transform_failures_total", "counter",
	  "Runs that failed (exit, signal, timeout, output_max, no output).",
	  offsetof(struct xform_stats, failures), 1 },
	{ "transform_timeouts_total", "counter",
	  "Runs killed at the transform's timeout (also in failures).",
	  offsetof(struct xform_stats, timeouts), 1 },
	{ "transform_refused_total", "counter",
	  "Lookups refused with EIO in a failed object's backoff.",
	  offsetof(struct xform_stats, refused), 1 },
	{ "transform_cpu_us_total", "counter",
	  "CPU time of the transform's processes, verify runs included (a "
	  "worker's counts when it exits).",
	  offsetof(struct xform_stats, cpu_ns), 1000 },
	{ "transform_bytes_in_total", "counter", "Source bytes given to runs.",
	  offsetof(struct xform_stats, bytes_in), 1 },
	{ "transform_bytes_out_total", "counter", "Output bytes runs produced.",
	  offsetof(struct xform_stats, bytes_out), 1 },
	{ "transform_verify_runs_total", "counter",
	  "Stored outputs re-run to check determinism (verify).",
	  offsetof(struct xform_stats, verify_runs), 1 },
	{ "transform_verify_mismatches_total", "counter",
	  "Verify runs whose output differed from the stored one.",
	  offsetof(struct xform_stats, verify_mismatches), 1 },
	{ "transform_queued", "gauge",
	  "Objects queued to run ahead of the reader, not started yet.",
	  offsetof(struct xform_stats, queued), 1 },
	{ "transform_ahead_runs_total", "counter",
	  "Runs made ahead of the reader (in runs_total too).",
	  offsetof(struct xform_stats, ahead_runs), 1 },
};

int control_write_xform_stats(FILE *f, const struct control_xform_stats *x,
			      size_t n)
{
	size_t i, k;

	if (n == 0)
		return 0;
	for (k = 0; k < sizeof(xform_metrics) / sizeof(xform_metrics[0]); k++) {
		const struct xform_metric *m = &xform_metrics[k];

		family(f, m->name, m->type, m->help);
		for (i = 0; i < n; i++) {
			uint64_t v;

			memcpy(&v, (const char *)&x[i].s + m->offset,
			       sizeof(v));
			labelled(f, m->name, "transform", x[i].name,
				 v / m->div);
		}
	}
	return ferror(f) ? -EIO : 0;
}
