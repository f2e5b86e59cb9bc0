/*
 * push: the prefetcher's last step, into the kernel (cache_set_push()).
 *
 * A reader that follows an order (a rank's epoch order) gets the files
 * ahead of it put into the kernel's page cache, whole and verified, so
 * that its read() of them is answered by the kernel: no READ reaches the
 * daemon, and with a mount that needs no OPEN either (fs/), a warm file
 * costs the reader no round trip at all.
 *
 * What is pushed: positions of an order after the reader's last noted one
 * (known), up to the highest the prefetcher asked for (its depth, which
 * grows while the reader follows the order and falls to 0 when it does
 * not) and to the budget's share of this order in files. The push
 * function reads each through cache_read() like any read (it joins the
 * prefetch in flight, or finds the bytes in memory or on disk, checked)
 * and hands it to the kernel. Files larger than a chunk and empty ones
 * are not pushed (the kernel's own read-ahead serves a large file; READs
 * of it note the reader as any read does).
 *
 * Sentinels: since reads of pushed files never reach the daemon, the
 * daemon would never learn that the reader moved on. So one position in
 * every step (half the depth, at least 2: the policy is prefetch.h's) is
 * left out: the reader's read
 * of it is a READ (from memory or disk, fast), whose note moves known and
 * the prefetcher's window, and the pusher goes on ahead of it. A reader
 * that reads faster than the pusher reads unpushed files as usual; its
 * notes move known past them.
 *
 * Threads: PUSH_THREADS pusher threads, started with the first push
 * function, stopped by cache_free() or cache_set_push(NULL). A call of the
 * push function may wait for a lookup through the mount (fs/): it is made
 * with no lock held, and cache_set_push(NULL) waits for running calls.
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/thread.h"

/* How long an idle pusher sleeps before it looks again. */
#define PUSH_IDLE_NS (UINT64_C(1000000000))
/* How long cache_set_push(NULL) waits for running calls between log lines. */
#define PUSH_STOP_WARN_NS (UINT64_C(5000000000))

void push_init(struct cache *c)
{
	pthread_condattr_t attr;

	pthread_mutex_init(&c->push.lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->push.cond, &attr);
	pthread_cond_init(&c->push.idle, &attr);
	pthread_condattr_destroy(&attr);
}

void push_wake(struct cache *c)
{
	pthread_mutex_lock(&c->push.lock);
	if (c->push.fn != NULL)
		pthread_cond_broadcast(&c->push.cond);
	pthread_mutex_unlock(&c->push.lock);
}

/* A task: position pos of order, to push unless sentinel. */
struct push_task {
	uint64_t order, pos;
	bool sentinel;
};

/* Takes the next position to push of some order, under pf_lock. Returns
 * false if there is none now. budget: the bytes all orders may have
 * ahead. */
static bool push_claim(struct cache *c, uint64_t budget, struct push_task *t)
{
	uint64_t now = clock_now_ns(), active = 0;
	bool found = false;
	size_t i;

	pthread_mutex_lock(&c->pf_lock);
	for (i = 0; i < c->n_orders; i++)
		active += now - c->orders[i].noted_ns < PREFETCH_PUSH_ACTIVE_NS;
	for (i = 0; i < c->n_orders && !found; i++) {
		struct order_slot *s = &c->orders[i];
		uint64_t next, hi, asked_hi;
		unsigned depth;

		if (!prefetch_order_followed(&s->st, &asked_hi, &depth) ||
		    s->noted_ns == 0 ||
		    now - s->noted_ns >= PREFETCH_PUSH_ACTIVE_NS)
			continue;
		next = (s->claimed > s->known ? s->claimed : s->known) + 1;
		hi = prefetch_push_last(s->known, asked_hi, budget, active,
					s->file_bytes, depth);
		if (next > hi)
			continue;
		s->claimed = next;
		t->order = s->order;
		t->pos = next;
		t->sentinel = prefetch_push_sentinel(next, depth);
		found = true;
	}
	pthread_mutex_unlock(&c->pf_lock);
	return found;
}

/* Hands the file of t to fn (or leaves it, a sentinel). */
static void push_one(struct cache *c, const struct push_task *t,
		     cache_push_fn fn, void *ctx)
{
	ssize_t got;

	if (t->sentinel) {
		stat_add(&c->push.sentinels, 1);
		return;
	}
	got = fn(ctx, t->order, t->pos, c->chunk_size);
	if (got >= 0) {
		stat_add(&c->push.files, 1);
		stat_add(&c->push.bytes, (uint64_t)got);
	} else if (got != -EFBIG && got != -ENOENT && got != -EALREADY) {
		stat_add(&c->push.failures, 1);
	}
}

static void *push_main(void *arg)
{
	struct cache *c = arg;
	struct push_state *p = &c->push;

	pthread_setname_np(pthread_self(), "shardfs-push");
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		cache_push_fn fn = p->fn;
		void *ctx = p->ctx;
		uint64_t budget = p->budget;
		struct push_task t;
		struct timespec ts;
		uint64_t until;

		if (fn != NULL && budget > 0) {
			pthread_mutex_unlock(&p->lock);
			if (push_claim(c, budget, &t)) {
				pthread_mutex_lock(&p->lock);
				/* Stopping waits for calls: count it first. */
				if (p->stop || p->fn != fn)
					continue;
				p->calls++;
				pthread_mutex_unlock(&p->lock);
				push_one(c, &t, fn, ctx);
				pthread_mutex_lock(&p->lock);
				p->calls--;
				pthread_cond_broadcast(&p->idle);
				continue;
			}
			pthread_mutex_lock(&p->lock);
		}
		until = clock_now_ns() + PUSH_IDLE_NS;
		ts.tv_sec = (time_t)(until / 1000000000u);
		ts.tv_nsec = (long)(until % 1000000000u);
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

void cache_set_push(struct cache *c, cache_push_fn fn, void *ctx,
		    uint64_t budget)
{
	struct push_state *p = &c->push;

	pthread_mutex_lock(&p->lock);
	p->fn = fn;
	p->ctx = ctx;
	p->budget = budget;
	if (fn != NULL && c->disk) {
		while (p->threads < PUSH_THREADS &&
		       thread_start(&p->tid[p->threads], push_main, c) == 0)
			p->threads++;
		if (p->threads == 0)
			log_msg(LOG_WARNING, "cache: no pusher thread could "
					     "start; reads go to the daemon");
	}
	pthread_cond_broadcast(&p->cond);
	/* A caller stopping must not return while a call runs (it would
	 * free what the call uses). A call ends on its own: fs/ stops new
	 * calls first (kernel_stop()), a running one's lookup through the
	 * mount fails once the session is unmounted, and its read is
	 * bounded like any read (at most the fetch's wait and the backend's
	 * deadlines, cache.h). So the wait is timed only to say so in the
	 * log when one takes long, never to give up. */
	while (fn == NULL && p->calls > 0) {
		struct timespec ts;
		uint64_t until = clock_now_ns() + PUSH_STOP_WARN_NS;

		ts.tv_sec = (time_t)(until / 1000000000u);
		ts.tv_nsec = (long)(until % 1000000000u);
		if (pthread_cond_timedwait(&p->idle, &p->lock, &ts) ==
			    ETIMEDOUT &&
		    p->calls > 0)
			log_msg(LOG_WARNING,
				"cache: stopping the pusher waits for %u "
				"push call(s) into the kernel",
				p->calls);
	}
	pthread_mutex_unlock(&p->lock);
}

void push_destroy(struct cache *c)
{
	struct push_state *p = &c->push;
	unsigned i;

	pthread_mutex_lock(&p->lock);
	p->stop = true;
	p->fn = NULL;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (i = 0; i < p->threads; i++)
		pthread_join(p->tid[i], NULL);
	p->threads = 0;
	pthread_cond_destroy(&p->cond);
	pthread_cond_destroy(&p->idle);
	pthread_mutex_destroy(&p->lock);
}
