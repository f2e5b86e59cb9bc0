/*
 * cmd_warm: `shardfs warm CONFIG [--rank LIST]...`: fills the disk cache with
 * every item of the selected ranks, without a mount, through the same
 * cache a mount of CONFIG opens (mount_cache_open), so the mount then
 * finds every chunk.
 *
 * Items are warmed in each rank's epoch order, each object once (pads and
 * ranks sharing an item are not read twice). Chunks already cached are not
 * read again. Progress goes to stderr: a bar redrawn in place on a
 * terminal, a plain line every few seconds otherwise (logs, CI), and a
 * summary line at the end. A failed item is logged (by the backend) and
 * counted; the others are still warmed, and the exit code is then 1.
 *
 * --transform NAME pre-transforms instead: each item's output of [transform
 * NAME] is made present in the disk cache (xform_size() and a fill of the
 * output: the transform runs only for outputs not stored), so that a mount
 * of CONFIG reading transform-NAME/ runs it 0 times for them. An object a
 * mount on the same cache is transforming at the same moment is not run
 * twice: this process waits for the mount's run and finds its output (the
 * derived objects' node lock, cache/cache.h), and a mount's reader waits
 * for this one's likewise.
 */
#include "mount/commands.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mount/dataset.h"
#include "mount/transforms.h"
#include "mount/overrides.h"
#include "util/log.h"
#include "util/thread.h"

#define PLAIN_INTERVAL 5.0 /* seconds between plain progress lines */
#define BAR_INTERVAL 0.2

const char usage_warm[] =
	"usage: shardfs warm CONFIG [--rank LIST]... [--transform NAME] [-j N] "
	"[-q]\n"
	"       [-o section.key=value,...]\n"
	"\n"
	"Fills the node-local cache ([cache] dir) with every file of the "
	"selected ranks,\n"
	"so that a mount of CONFIG serves them without fetching. Ranks: "
	"--rank LIST (a\n"
	"rank list such as 3 or 0-3,8, as [shard] ranks; may be repeated), "
	"else [shard]\n"
	"ranks, else all.\n"
	"Chunks already cached are skipped. Shows a progress bar (bytes, "
	"files, rate,\n"
	"ETA) on a terminal and a progress line every few seconds otherwise.\n"
	"\n"
	"  -t, --transform NAME  pre-transform: store [transform NAME]'s "
	"outputs of\n"
	"                the files (running it only for outputs not stored)\n"
	"  -j, --jobs N  objects fetched at once (default 8)\n"
	"  -q, --quiet   no progress, warnings and errors only\n"
	"\n"
	"exit codes: 0 all warmed, 1 some file failed, 2 usage or config "
	"error\n";

struct progress {
	bool tty, quiet;
	uint64_t files_total, bytes_total;
	uint64_t files_done, bytes_done, fetched, errors;
	double start, last;
};

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void eta_text(char *buf, size_t len, double seconds)
{
	unsigned long s;

	if (seconds < 0 || seconds > 1e8) {
		snprintf(buf, len, "--:--");
		return;
	}
	s = (unsigned long)(seconds + 0.5);
	if (s >= 3600)
		snprintf(buf, len, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60,
			 s % 60);
	else
		snprintf(buf, len, "%lu:%02lu", s / 60, s % 60);
}

static void progress_show(struct progress *p, bool final)
{
	double t = now_mono(), el = t - p->start;
	double rate = el > 0 ? (double)p->bytes_done / el : 0;
	double frac = p->bytes_total
			      ? (double)p->bytes_done / (double)p->bytes_total
			      : (p->files_total ? (double)p->files_done /
							  (double)p->files_total
						: 1.0);
	char done[32], total[32], r[32], eta[32];

	if (p->quiet)
		return;
	if (!final && t - p->last < (p->tty ? BAR_INTERVAL : PLAIN_INTERVAL))
		return;
	p->last = t;
	cmd_human_bytes(done, sizeof(done), (double)p->bytes_done);
	cmd_human_bytes(total, sizeof(total), (double)p->bytes_total);
	cmd_human_bytes(r, sizeof(r), rate);
	eta_text(eta, sizeof(eta),
		 rate > 0 ? (double)(p->bytes_total - p->bytes_done) / rate
			  : -1);
	if (p->tty) {
		char bar[31];
		int i, fill = (int)(frac * 30);

		for (i = 0; i < 30; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[30] = '\0';
		fprintf(stderr,
			"\r[%s] %3.0f%%  %s / %s  %llu/%llu files  %s/s  ETA "
			"%s \033[K",
			bar, frac * 100, done, total,
			(unsigned long long)p->files_done,
			(unsigned long long)p->files_total, r, eta);
		if (final)
			fputc('\n', stderr);
	} else if (!final) {
		fprintf(stderr,
			"warm: %llu/%llu files, %s / %s (%.0f%%), %s/s, ETA "
			"%s\n",
			(unsigned long long)p->files_done,
			(unsigned long long)p->files_total, done, total,
			frac * 100, r, eta);
	}
	fflush(stderr);
}

/* The items to warm, shared by the workers. */
struct warm_job {
	struct cache *cache;
	struct xform *x; /* --transform: its outputs, else NULL */
	const struct manifest *m;
	const uint32_t *items; /* manifest indices, each once */
	size_t n;
	/* Relaxed atomics, written by the workers. */
	size_t next;
	uint64_t files_done, bytes_done, fetched, errors;
	unsigned running;
};

static void *warm_worker(void *arg)
{
	struct warm_job *j = arg;
	size_t i;

	while ((i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->n) {
		const struct manifest_entry *e = &j->m->entries[j->items[i]];
		struct cache_object obj = {
			.key = e->key,
			.key_len = e->key_len,
			.etag = e->etag,
			.etag_len = e->etag_len,
			.size = e->size,
		};
		struct cache_object out;
		uint64_t osize = 0;
		ssize_t fetched;

		/* The output's size runs the transform if it is not
		 * stored; then a fill of the output. */
		if (j->x != NULL) {
			fetched = xform_size(j->x, &obj, &osize);
			if (fetched == 0) {
				xform_object(j->x, &obj, osize, &out);
				obj = out;
			}
		} else {
			fetched = 0;
		}
		/* A fill: no destination. */
		if (fetched == 0)
			fetched = cache_read(j->cache,
					     &(struct cache_read){
						     .obj = &obj,
						     .len = (size_t)obj.size,
						     .order = CACHE_NO_ORDER });

		if (fetched < 0)
			__atomic_add_fetch(&j->errors, 1, __ATOMIC_RELAXED);
		else if (j->x == NULL) /* outputs: the transform's stats */
			__atomic_add_fetch(&j->fetched, (uint64_t)fetched,
					   __ATOMIC_RELAXED);
		__atomic_add_fetch(&j->bytes_done, e->size, __ATOMIC_RELAXED);
		__atomic_add_fetch(&j->files_done, 1, __ATOMIC_RELAXED);
	}
	__atomic_sub_fetch(&j->running, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void progress_load(struct progress *p, struct warm_job *j)
{
	p->files_done = __atomic_load_n(&j->files_done, __ATOMIC_RELAXED);
	p->bytes_done = __atomic_load_n(&j->bytes_done, __ATOMIC_RELAXED);
	p->fetched = __atomic_load_n(&j->fetched, __ATOMIC_RELAXED);
	p->errors = __atomic_load_n(&j->errors, __ATOMIC_RELAXED);
}

/* Runs up to jobs workers (the cache and backend are thread-safe; each
 * worker has one request in flight) and draws progress meanwhile. */
static int warm_run(struct warm_job *j, unsigned long jobs, struct progress *p)
{
	const struct timespec tick = { 0, 100 * 1000 * 1000 };
	pthread_t *t = calloc(jobs, sizeof(*t));
	unsigned long i, started = 0;

	if (t == NULL)
		return -ENOMEM;
	if (jobs > j->n)
		jobs = j->n ? j->n : 1;
	j->running = (unsigned)jobs;
	for (i = 0; i < jobs; i++) {
		if (thread_start(&t[i], warm_worker, j) != 0)
			break;
		started++;
	}
	if (started < jobs)
		__atomic_sub_fetch(&j->running, (unsigned)(jobs - started),
				   __ATOMIC_RELEASE);
	if (started == 0)
		warm_worker(j);
	while (__atomic_load_n(&j->running, __ATOMIC_ACQUIRE) > 0) {
		nanosleep(&tick, NULL);
		progress_load(p, j);
		progress_show(p, false);
	}
	for (i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	progress_load(p, j);
	return 0;
}

int cmd_warm(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "transform", required_argument, NULL, 't' },
		CMD_LONGOPTS_END,
	};
	struct progress p = { 0 };
	struct cmd_config cc = { 0 };
	struct dataset *ds = NULL;
	struct cache *cache = NULL;
	struct cache_stats cs;
	struct mount_transforms *xfs = NULL;
	struct xform_stats xs = { 0 };
	const char *xname = NULL;
	bool *sel = NULL;
	uint8_t *seen = NULL;
	uint32_t *order = NULL;
	struct warm_job job = { 0 };
	unsigned long jobs = 8;
	char *end;
	uint64_t r, world;
	int c, rc = EXIT_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:j:t:qo:h", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'j':
			errno = 0;
			jobs = strtoul(optarg, &end, 10);
			if (errno || *end || optarg[0] < '1' ||
			    optarg[0] > '9' || jobs > 256) {
				fprintf(stderr,
					"shardfs: warm: --jobs %s: not a "
					"number from 1 to 256\n",
					optarg);
				goto out;
			}
			break;
		case 't':
			xname = optarg;
			break;
		case 'q':
			p.quiet = true;
			log_set_level(LOG_WARNING);
			break;
		default: /* -r, -o, -h, errors */
			if (!cmd_config_option(c, &cc, usage_warm, &rc))
				goto out;
			break;
		}
	}
	if (cmd_operands(argc, 1, usage_warm, "warm", "CONFIG") ||
	    cmd_load_config(argv[optind], &cc.ov, &cc.cfg))
		goto out;
	c = cmd_config_ranks("warm", &cc, &sel);
	if (c < 0) {
		rc = c == -ENOMEM ? EXIT_RUNTIME : EXIT_USAGE;
		goto out;
	}
	world = cc.cfg->shard.spec.world_size;
	if (xname != NULL &&
	    cmd_config_transform("warm", &cc, argv[optind], xname) < 0)
		goto out;
	if (!cc.cfg->cache.enabled) {
		fprintf(stderr,
			"shardfs: warm: cache.enabled is false in "
			"%s: nothing to warm\n",
			argv[optind]);
		goto out;
	}

	rc = EXIT_RUNTIME;
	if (dataset_load(cc.cfg, true, &ds) < 0)
		goto out;
	if (mount_cache_open(cc.cfg, ds->backend, &cache) < 0)
		goto out;
	cache_stats_get(cache, &cs);
	if (!cs.enabled) {
		log_msg(LOG_ERR, "warm: the cache in %s cannot be used",
			cc.cfg->cache.dir);
		goto out;
	}
	if (xname != NULL) {
		if (mount_transforms_open(cc.cfg, cache, &xfs) < 0)
			goto out;
		job.x = mount_transforms_find(xfs, xname);
	}
	order = malloc((ds->manifest->count ? ds->manifest->count : 1) *
		       sizeof(*order));
	seen = calloc(ds->manifest->count ? ds->manifest->count : 1, 1);
	if (seen == NULL || order == NULL)
		goto out;
	for (r = 0; r < world; r++) {
		const uint32_t *items;
		size_t count, npad, k;

		if (!sel[r])
			continue;
		shard_plan_rank(ds->plan, r, &items, &count, &npad);
		for (k = 0; k < count; k++) {
			if (seen[items[k]])
				continue;
			seen[items[k]] = 1;
			order[job.n++] = items[k];
			p.bytes_total += ds->manifest->entries[items[k]].size;
		}
	}
	p.files_total = job.n;
	job.cache = cache;
	job.m = ds->manifest;
	job.items = order;
	p.tty = isatty(STDERR_FILENO);
	p.start = now_mono();
	p.last = p.tty ? 0 : p.start;
	if (warm_run(&job, jobs, &p) < 0)
		goto out;
	progress_show(&p, true);
	cache_stats_get(cache, &cs);
	if (!p.quiet)
		fprintf(stderr,
			"warm: %llu files, %llu bytes in %.1f s; fetched %llu "
			"bytes, %llu already cached; %llu failed; cache live "
			"bytes %llu of %llu\n",
			(unsigned long long)p.files_done,
			(unsigned long long)p.bytes_done, now_mono() - p.start,
			(unsigned long long)p.fetched,
			(unsigned long long)(p.bytes_done - p.fetched),
			(unsigned long long)p.errors,
			(unsigned long long)cs.live_bytes,
			(unsigned long long)cs.budget_bytes);
	if (cs.store_failures > 0)
		log_msg(LOG_WARNING,
			"warm: %llu chunks could not be stored (see above)",
			(unsigned long long)cs.store_failures);
	if (job.x != NULL) {
		xform_stats_get(job.x, &xs);
		if (!p.quiet)
			fprintf(stderr,
				"warm: transform %s: %llu runs, %llu failed, "
				"%llu bytes out\n",
				xname, (unsigned long long)xs.runs,
				(unsigned long long)xs.failures,
				(unsigned long long)xs.bytes_out);
	}
	rc = p.errors || cs.store_failures ? EXIT_RUNTIME : EXIT_OK;
out:
	mount_transforms_stop(xfs);
	cache_free(cache);
	mount_transforms_free(xfs); /* after the cache: it holds them */
	free(order);
	free(seen);
	free(sel);
	dataset_free(ds);
	cmd_config_free(&cc);
	return rc;
}
