/*
 * open: opening and freeing a cache, its fetch options and its stats:
 * wiring only, above every other file of cache/ (none calls into it). The
 * design (index layout, ordering, threads and locks) is in cache_impl.h;
 * the contract in cache.h, whose functions the files of cache/ define by
 * job.
 */
#include "cache/cache_impl.h"
#include "cache/fetch_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/log.h"

void cache_set_fetch_options(struct cache *c,
			     const struct cache_fetch_options *o)
{
	struct prefetch_shares sh;
	struct fetch_stats fs;

	fetch_set_limits(c->fetch, o->connections, o->memory);
	fetch_set_wait(c->fetch, o->wait_ms);
	derived_set_wait(c, o->wait_ms);
	fetch_set_hedge(c->fetch, !o->hedge_off);
	fetch_stats_get(c->fetch, &fs); /* the budget, defaults applied */
	/* How the budget is shared: prefetch.h. */
	prefetch_shares(fs.memory_budget, QUEUE_BYTES_MAX, &sh);
	__atomic_store_n(&c->ra_cap, sh.window_cap, __ATOMIC_RELAXED);
	__atomic_store_n(&c->ra_memory, fs.memory_budget, __ATOMIC_RELAXED);
	__atomic_store_n(&c->ext_cap, sh.extents_cap, __ATOMIC_RELAXED);
	__atomic_store_n(&c->pf_files, o->files, __ATOMIC_RELAXED);
	__atomic_store_n(&c->pf_memory, sh.files, __ATOMIC_RELAXED);
	__atomic_store_n(&c->pf_conns,
			 o->connections ? o->connections
					: FETCH_CONNECTIONS_DEFAULT,
			 __ATOMIC_RELAXED);
	pthread_mutex_lock(&c->q.lock);
	c->q.max = sh.queue;
	pthread_cond_broadcast(&c->q.idle);
	pthread_mutex_unlock(&c->q.lock);
}

unsigned cache_prefetch_files(struct cache *c)
{
	return __atomic_load_n(&c->pf_files, __ATOMIC_RELAXED);
}

uint64_t cache_prefetch_ahead(struct cache *c, uint64_t done, uint64_t *step)
{
	uint64_t ahead = 0;

	if (c->disk)
		ahead = prefetch_extents_ahead(
			done, __atomic_load_n(&c->ext_cap, __ATOMIC_RELAXED));
	if (step != NULL)
		*step = prefetch_extents_step(ahead);
	return ahead;
}

/* cache_settle()'s bound on the wait for stores the engine has not
 * handed to the committer yet (store_drain() then waits as long again). */
#define CACHE_SETTLE_NS (UINT64_C(10000000000))

void cache_settle(struct cache *c)
{
	if (!c->disk)
		return;
	/* A large chunk a reader fetched is stored by a worker after the
	 * reader has its bytes: the committer's queue alone may not hold
	 * it yet. */
	fetch_drain_stores(c->fetch, CACHE_SETTLE_NS);
	store_drain(c);
}

void cache_stats_get(struct cache *c, struct cache_stats *out)
{
	struct fetch_stats fs;

	memset(out, 0, sizeof(*out));
	fetch_stats_get(c->fetch, &fs);
	out->backend_reads = fs.backend_reads;
	out->backend_bytes = fs.backend_bytes;
	out->backend_errors = fs.backend_errors;
	out->singleflight_waits = fs.singleflight_waits;
	out->prefetch_issued = stat_load(&c->pf_issued);
	out->prefetch_bytes = stat_load(&c->pf_bytes);
	out->prefetch_hits = stat_load(&c->pf_hits);
	out->prefetch_misses = stat_load(&c->pf_misses);
	out->prefetch_refused = fs.prefetch_refused;
	out->prefetch_depth = stat_load(&c->pf_depth);
	out->readahead_window_bytes = stat_load(&c->ra_window);
	out->prefetch_inflight_max_bytes = fs.prefetch_inflight_max;
	out->prefetch_gap_ns = stat_load(&c->pf_gap_ns);
	out->first_waits = fs.first_waits;
	out->first_wait_ns = fs.first_wait_ns;
	out->backend_latency_min_ns = fs.pace.latency_min_ns;
	out->backend_latency_median_ns = fs.pace.latency_median_ns;
	out->backend_reads_per_s = fs.pace.reads_per_s;
	out->backend_bytes_per_s = fs.pace.bytes_per_s;
	out->memory_in_use_bytes = fs.memory_in_use;
	out->memory_high_water_bytes = fs.memory_high_water;
	out->memory_budget_bytes = fs.memory_budget;
	out->backend_inflight = fs.inflight;
	out->direct_reads = fs.direct_reads;
	out->hedges_issued = fs.hedges;
	out->hedges_won = fs.hedge_wins;
	if (!c->disk)
		return;
	store_drain(c);
	out->enabled = true;
	out->hits = stat_load(&c->hits);
	out->misses = stat_load(&c->misses);
	out->bytes_from_cache = stat_load(&c->bytes_from_cache);
	out->evictions = stat_load(&c->evictions);
	out->crc_failures = stat_load(&c->crc_failures);
	out->store_failures = stat_load(&c->store_failures);
	out->pushed_files = stat_load(&c->push.files);
	out->pushed_bytes = stat_load(&c->push.bytes);
	out->push_failures = stat_load(&c->push.failures);
	out->push_sentinels = stat_load(&c->push.sentinels);
	out->derived_runs = stat_load(&c->derived_runs);
	out->derived_bytes = stat_load(&c->derived_bytes);
	out->whole_checked = stat_load(&c->whole.checked);
	out->whole_mismatches = stat_load(&c->whole.mismatches);
	out->live_bytes = index_live_bytes(c);
	out->budget_bytes = c->budget;
}

static int cache_budget_compute(const struct cache_options *o, uint64_t *out)
{
	struct statvfs sv;

	if (o->size_bytes > 0 || o->size_percent == 0) {
		*out = o->size_bytes;
		return 0;
	}
	if (statvfs(o->dir, &sv) != 0)
		return -errno;
	*out = (uint64_t)sv.f_blocks * sv.f_frsize / 100 * o->size_percent;
	return 0;
}

/* The fetch engine's done callback (ctx: the cache): a chunk fetched whole
 * goes to the disk cache (store_chunk()), and to the whole-object check
 * with what its replies vouched for (whole_note()). Here, in the wiring,
 * so that the store and the check, which reads stored chunks back, do not
 * call each other. */
static void cache_fetched(void *ctx, const uint8_t *hash, const uint8_t *id,
			  size_t id_len, const uint8_t *data, uint64_t len,
			  const struct fetch_vouch *v, struct fetch_pin *keep)
{
	struct cache *c = ctx;

	if (!c->disk)
		return;
	store_chunk(c, hash, id, id_len, data, len, keep);
	/* data stays valid for this call whoever keeps the pin. */
	whole_note(c, id, id_len, data, len, v);
}

static struct cache *cache_alloc(struct backend *be)
{
	struct cache *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->owners_fd = -1;
	if (fetch_new(be, 0, 0, cache_fetched, c, &c->fetch) < 0) {
		free(c);
		return NULL;
	}
	c->pf_files = PREFETCH_FILES_DEFAULT;
	c->ra_cap = PREFETCH_WINDOW_MAX;
	/* The engine's default budget (cache_set_fetch_options()). */
	c->ext_cap = prefetch_extents_cap(FETCH_MEMORY_DEFAULT);
	c->q.max = QUEUE_BYTES_MAX;
	pthread_mutex_init(&c->pf_lock, NULL);
	pthread_mutex_init(&c->evict.touch_lock, NULL);
	pthread_mutex_init(&c->evict.lock, NULL);
	pthread_mutex_init(&c->warn_lock, NULL);
	pthread_mutex_init(&c->q.lock, NULL);
	pthread_cond_init(&c->q.work, NULL);
	pthread_cond_init(&c->q.idle, NULL);
	c->q.tail = &c->q.head;
	derived_init(c);
	whole_init(c);
	push_init(c);
	if (ahead_init(c) < 0) {
		cache_free(c);
		return NULL;
	}
	return c;
}

int cache_new(struct backend *be, struct cache **out)
{
	struct cache *c = cache_alloc(be);

	if (c == NULL)
		return -ENOMEM;
	/* Read-ahead chunks (ahead_read()) are named like the disk
	 * cache's, in the engine's memory only. */
	c->chunk_size = CACHE_CHUNK_SIZE_DEFAULT;
	c->backend_id = strdup("");
	if (c->backend_id == NULL) {
		cache_free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

/* Whether DIR holds an index we may read but not write (a read-only
 * mount, or a directory without write permission for us). */
static bool cache_dir_readonly(const char *dir, const char *index)
{
	struct stat st;

	if (access(dir, W_OK) == 0 || (errno != EROFS && errno != EACCES))
		return false;
	return stat(index, &st) == 0 && st.st_size > 0;
}

int cache_open(const struct cache_options *opts, struct backend *be,
	       struct cache **out)
{
	struct cache *c = cache_alloc(be);
	char *path = NULL, *lock = NULL, *sub = NULL;
	const char *id = opts->backend_id ? opts->backend_id : "";
	bool alone = false, inspect = opts->inspect;
	int rc;

	if (c == NULL)
		return -ENOMEM;
	c->dir = strdup(opts->dir);
	c->backend_id = strdup(id);
	c->backend_id_len = strlen(id);
	c->chunk_size =
		opts->chunk_size ? opts->chunk_size : CACHE_CHUNK_SIZE_DEFAULT;
	c->inline_max = opts->inline_max_set ? opts->inline_max
					     : CACHE_INLINE_MAX_DEFAULT;
	if (c->inline_max > c->chunk_size)
		c->inline_max = c->chunk_size;
	c->fsync = opts->fsync;
	c->evict.last_flush = time(NULL);
	if (getrandom(&c->blob_seed, sizeof(c->blob_seed), 0) !=
	    sizeof(c->blob_seed))
		c->blob_seed = (uint64_t)time(NULL) << 32 ^ (uint64_t)getpid()
								    << 16;
	if (c->dir == NULL || c->backend_id == NULL ||
	    asprintf(&path, "%s/index.mdb", opts->dir) < 0 ||
	    asprintf(&lock, "%s/index.mdb-lock", opts->dir) < 0 ||
	    asprintf(&sub, "%s/owners.lock", opts->dir) < 0) {
		rc = -ENOMEM;
		goto fail;
	}
	c->index_path = path;
	path = NULL;
	c->readonly = cache_dir_readonly(opts->dir, c->index_path);
	if (c->readonly) {
		inspect = true; /* no cleanup, no eviction */
		log_msg(LOG_WARNING,
			"cache %s is read-only (%s): serving the chunks it "
			"holds, storing nothing",
			opts->dir, strerror(errno == EROFS ? EROFS : EACCES));
	} else {
		char *blobs = NULL, *tmp = NULL;

		rc = store_mkdir_p(opts->dir);
		if (rc == 0 && (asprintf(&blobs, "%s/blobs", opts->dir) < 0 ||
				asprintf(&tmp, "%s/blobs/tmp", opts->dir) < 0))
			rc = -ENOMEM;
		if (rc == 0)
			rc = store_dir_make(blobs);
		if (rc == 0)
			rc = store_dir_make(tmp);
		free(blobs);
		free(tmp);
		if (rc < 0) {
			log_msg(LOG_WARNING, "cache %s: cannot create it: %s",
				opts->dir, strerror(-rc));
			goto fail;
		}
		maint_perms_tighten(c);
	}
	rc = cache_budget_compute(opts, &c->budget);
	if (rc < 0)
		goto fail_dir;
	rc = store_file_open(sub, c->readonly ? O_RDONLY : O_RDWR | O_CREAT);
	if (rc < 0 && !(c->readonly && rc == -ENOENT))
		goto fail_dir;
	c->owners_fd = rc;
	if (c->owners_fd >= 0) {
		if (!inspect && flock(c->owners_fd, LOCK_EX | LOCK_NB) == 0)
			alone = true;
		else if ((rc = maint_owners_lock(c, sub, LOCK_SH)) < 0)
			goto fail; /* logged */
	}
	if (!c->readonly) {
		rc = maint_lock_file_prepare(lock);
		if (rc < 0)
			goto fail_dir;
	}
	rc = index_open(c, !opts->inspect || opts->repair, store_forked);
	if (rc < 0)
		goto fail;
	c->disk = true;
	c->opened = true;
	if (!inspect)
		maint_at_open(c, alone);
	if (alone)
		flock(c->owners_fd, LOCK_SH);
	free(sub);
	free(lock);
	*out = c;
	return 0;
fail_dir:
	log_msg(LOG_WARNING, "cache %s: %s", opts->dir, strerror(-rc));
fail:
	free(sub);
	free(lock);
	free(path);
	cache_free(c);
	return rc;
}

bool cache_stores(const struct cache *c)
{
	return c->disk && !c->readonly;
}

void cache_free(struct cache *c)
{
	if (c == NULL)
		return;
	/* First the pushers, which read through the engine; then the
	 * checker, which reads the index and drops chunks from the engine;
	 * then the engine's workers store what they fetch (and the store
	 * queue lets go of the engine's memory before that). */
	push_destroy(c);
	whole_close(c);
	if (c->disk)
		store_close(c);
	fetch_free(c->fetch);
	c->fetch = NULL;
	verified_free(c);
	if (c->disk && index_ours(c)) {
		pthread_mutex_lock(&c->q.lock);
		c->q.stop = true;
		pthread_cond_signal(&c->q.work);
		pthread_mutex_unlock(&c->q.lock);
		if (c->q.running)
			pthread_join(c->q.thread, NULL);
		evict_touches_flush(c);
	}
	index_close(c);
	if (c->owners_fd >= 0)
		close(c->owners_fd);
	free(c->evict.touched);
	free(c->orders);
	ahead_destroy(c);
	pthread_mutex_destroy(&c->pf_lock);
	pthread_mutex_destroy(&c->evict.touch_lock);
	pthread_mutex_destroy(&c->evict.lock);
	pthread_mutex_destroy(&c->warn_lock);
	pthread_mutex_destroy(&c->q.lock);
	pthread_cond_destroy(&c->q.work);
	pthread_cond_destroy(&c->q.idle);
	derived_destroy(c);
	whole_destroy(c);
	free(c->index_path);
	free(c->backend_id);
	free(c->dir);
	free(c);
}
