/*
 * fetch_open: the fetch engine's life (fetch.h): fetch_new(), its limits,
 * wait and hedging, fetch_free(), and its stats. The engine's design is in
 * fetch_impl.h; the requests are fetch_request.c.
 */
#include "cache/fetch_impl.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "cache/fetch_fail.h"
#include "util/thread.h"

int fetch_new(struct backend *be, unsigned connections, uint64_t memory,
	      fetch_done_fn done_fn, void *ctx, struct fetch **out)
{
	struct fetch *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -ENOMEM;
	if (fetch_fail_new(&f->fails) < 0) {
		free(f);
		return -ENOMEM;
	}
	f->be = be;
	f->done_fn = done_fn;
	f->ctx = ctx;
	f->connections = connections ? connections : FETCH_CONNECTIONS_DEFAULT;
	f->budget = memory ? memory : FETCH_MEMORY_DEFAULT;
	f->wait_ns = FETCH_WAIT_MS_DEFAULT * UINT64_C(1000000);
	f->hedge_on = true;
	f->pf_inflight_max = PREFETCH_INFLIGHT_MIN;
	f->owner_pid = getpid();
	pthread_mutex_init(&f->lock, NULL);
	fetch_cond_init(&f->work);
	fetch_cond_init(&f->done);
	fetch_cond_init(&f->slot);
	fetch_cond_init(&f->memory);
	fetch_cond_init(&f->stored);
	*out = f;
	return 0;
}

void fetch_set_limits(struct fetch *f, unsigned connections, uint64_t memory)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	if (connections)
		f->connections = connections;
	if (memory)
		f->budget = memory;
	fetch_flow_update(f); /* its cap is the budget's */
	pthread_cond_broadcast(&f->work);
	pthread_cond_broadcast(&f->memory);
	pthread_mutex_unlock(&f->lock);
}

void fetch_set_wait(struct fetch *f, uint64_t wait_ms)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	if (wait_ms == 0)
		wait_ms = FETCH_WAIT_MS_DEFAULT;
	if (wait_ms > FETCH_WAIT_MS_MAX) /* deadlines must not wrap */
		wait_ms = FETCH_WAIT_MS_MAX;
	f->wait_ns = wait_ms * UINT64_C(1000000);
	pthread_mutex_unlock(&f->lock);
}

void fetch_set_hedge(struct fetch *f, bool on)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->hedge_on = on;
	pthread_mutex_unlock(&f->lock);
}

void fetch_free(struct fetch *f)
{
	struct flight *dead = NULL;
	unsigned b;
	int k;

	if (f == NULL)
		return;
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; i < f->n_workers; i++)
		pthread_join(f->workers[i], NULL);
	/* Only queued prefetches and retained flights can be left: no
	 * reader and no worker. */
	for (b = 0; b < FETCH_BUCKETS; b++)
		while (f->table[b] != NULL) {
			struct flight *fl = f->table[b];

			f->table[b] = fl->tnext;
			fl->tnext = dead;
			dead = fl;
		}
	while (dead != NULL) {
		struct flight *next = dead->tnext;

		fetch_flight_free(dead);
		dead = next;
	}
	for (k = 0; k < FETCH_POOL_CLASSES; k++)
		while (f->n_pool[k] > 0)
			munmap(f->pool[k][--f->n_pool[k]],
			       (size_t)UINT64_C(1)
				       << (FETCH_POOL_MIN_SHIFT + k));
	free(f->workers);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->work);
	pthread_cond_destroy(&f->done);
	pthread_cond_destroy(&f->slot);
	pthread_cond_destroy(&f->memory);
	pthread_cond_destroy(&f->stored);
	fetch_fail_free(f->fails);
	free(f);
}

/* Caller holds f->lock: whether a flight that began storing before
 * ticket is still storing (a scan of the table: drains are rare). */
static bool storing_before(const struct fetch *f, uint64_t ticket)
{
	const struct flight *fl;
	unsigned b;

	if (f->n_storing == 0)
		return false;
	for (b = 0; b < FETCH_BUCKETS; b++)
		for (fl = f->table[b]; fl != NULL; fl = fl->tnext)
			if (fl->storing && fl->store_ticket < ticket)
				return true;
	return false;
}

void fetch_drain_stores(struct fetch *f, uint64_t wait_ns)
{
	uint64_t deadline = clock_now_ns() + wait_ns, ticket;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	/* Only what began before: a busy engine stores all the time. */
	ticket = f->store_next;
	while (storing_before(f, ticket) &&
	       fetch_wait_until(&f->stored, &f->lock, deadline) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&f->lock);
}

void fetch_stats_get(struct fetch *f, struct fetch_stats *out)
{
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	out->singleflight_waits = f->waits;
	out->prefetch_queued = f->queued;
	out->prefetch_bytes = f->queued_bytes;
	out->prefetch_promoted = f->promoted;
	out->prefetch_refused = f->refused;
	out->inflight = f->inflight;
	out->memory_in_use = f->in_use;
	out->memory_high_water = f->high_water;
	out->memory_budget = f->budget;
	out->direct_reads = f->direct_reads;
	out->hedges = f->hedges;
	out->hedge_wins = f->hedge_wins;
	out->first_waits = f->stalls;
	out->first_wait_ns = __atomic_load_n(&f->stall_ns, __ATOMIC_RELAXED);
	out->prefetch_inflight_max = f->pf_inflight_max;
	fetch_pace_compute(f, &out->pace);
	pthread_mutex_unlock(&f->lock);
	out->backend_reads =
		__atomic_load_n(&f->backend_reads, __ATOMIC_RELAXED);
	out->backend_bytes =
		__atomic_load_n(&f->backend_bytes, __ATOMIC_RELAXED);
	out->backend_errors =
		__atomic_load_n(&f->backend_errors, __ATOMIC_RELAXED);
}

uint64_t fetch_inflight_max(struct fetch *f)
{
	return __atomic_load_n(&f->pf_inflight_max, __ATOMIC_RELAXED);
}
