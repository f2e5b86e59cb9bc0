/*
 * xform_open: a transform attached to a cache (cache/xform.h): its state
 * made and freed, the lookup of an output's size that a reader makes, the
 * stats. The file above the other three of a transform's files:
 *   xform_open.c -> xform_ahead.c (runs ahead of the reader)
 *                -> xform_verify.c (the verify queue and thread, digests)
 *                -> xform_run.c (one object's run; the stash, failures)
 * each calling only files below it. What they share is
 * cache/xform_impl.h (struct xform, with the lock each part owns).
 *
 * Verify (xform_options.verify_percent): xform_size() of an output it
 * did not just produce in its own thread (a stored one) queues the object
 * for one verifier thread per transform, started at the first, if the
 * object is in the sample (the first 8 bytes of SHA-256(key, NUL, etag)
 * modulo 100 below the percent: stable across runs and nodes) and was not
 * queued before in this process (a set of those 8 bytes; a collision
 * skips one verify, never serves a byte). The verifier reads the stored
 * output (ready reads only: an output evicted meanwhile is skipped), runs
 * the transform again on the source and compares SHA-256 digests; a
 * mismatch is logged and counted, and nothing is changed: readers keep
 * the first output. One verifier takes at most one of the transform's
 * `workers` slots. xform_stop() ends it before the cache goes.
 */
#include "cache/xform_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hex.h"
#include "util/sha256.h"

#define XFORM_STASH_DEFAULT 64u
#define XFORM_STASH_BYTES_DEFAULT (UINT64_C(256) << 20)
#define XFORM_RETRY_BASE_MS 1000u
#define XFORM_RETRY_CAP_MS 300000u
#define XFORM_ID_BYTES 16

int xform_attach(struct cache *c, struct transform *t,
		 const struct xform_options *o, struct xform **out)
{
	uint8_t id[SHA256_LEN];
	char hex[2 * XFORM_ID_BYTES + 1];
	struct xform *x;
	bool held;
	size_t n;
	int rc = -ENOMEM;

	if (!c || !t || !o || !o->name || !*o->name || !out)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	pthread_mutex_init(&x->lock, NULL);
	pthread_mutex_init(&x->vlock, NULL);
	pthread_cond_init(&x->vcond, NULL);
	pthread_mutex_init(&x->alock, NULL);
	pthread_cond_init(&x->acond, NULL);
	x->atail = &x->ahead;
	x->vtail = &x->vhead;
	x->verify_percent = o->verify_percent > 100 ? 100 : o->verify_percent;
	x->c = c;
	x->t = t;
	x->retry = o->retry;
	if (!x->retry.base_ms)
		x->retry.base_ms = XFORM_RETRY_BASE_MS;
	if (!x->retry.cap_ms)
		x->retry.cap_ms = XFORM_RETRY_CAP_MS;
	x->stash_max = o->stash_max ? o->stash_max : XFORM_STASH_DEFAULT;
	x->stash_bytes_max =
		o->stash_bytes ? o->stash_bytes : XFORM_STASH_BYTES_DEFAULT;
	transform_identity(t, id);
	hex_encode(id, XFORM_ID_BYTES, hex);
	n = strlen(o->name) + sizeof(hex) + 8;
	x->name = strdup(o->name);
	x->out_name = malloc(n);
	x->len_name = malloc(n);
	if (!x->name || !x->out_name || !x->len_name)
		goto fail;
	snprintf(x->out_name, n, "xf-%s-%s", o->name, hex);
	snprintf(x->len_name, n, "xf-%s-%s.len", o->name, hex);
	rc = xform_produce_register(x, &held);
	/* Once the cache holds x as a producer's context (there is no way
	 * to take a producer back), out of memory keeps x, unused, until
	 * the process ends, rather than leave the cache a dangling
	 * pointer. */
	if (rc && held)
		return rc;
	if (rc)
		goto fail;
	*out = x;
	return 0;
fail:
	xform_free(x);
	return rc;
}

int xform_size(struct xform *x, const struct cache_object *src, uint64_t *size)
{
	bool here;
	int rc = xform_run_size(x, src, size, false, &here);

	if (rc == 0 && !here)
		xform_verify_queue(x, src);
	return rc;
}

void xform_stats_get(struct xform *x, struct xform_stats *s)
{
	s->runs = __atomic_load_n(&x->runs, __ATOMIC_RELAXED);
	s->failures = __atomic_load_n(&x->failures, __ATOMIC_RELAXED);
	s->refused = __atomic_load_n(&x->refused, __ATOMIC_RELAXED);
	s->bytes_in = __atomic_load_n(&x->bytes_in, __ATOMIC_RELAXED);
	s->bytes_out = __atomic_load_n(&x->bytes_out, __ATOMIC_RELAXED);
	s->timeouts = __atomic_load_n(&x->timeouts, __ATOMIC_RELAXED);
	s->cpu_ns = transform_cpu_ns(x->t);
	s->verify_queued = __atomic_load_n(&x->verify_queued, __ATOMIC_RELAXED);
	s->verify_runs = __atomic_load_n(&x->verify_runs, __ATOMIC_ACQUIRE);
	s->verify_mismatches =
		__atomic_load_n(&x->verify_mismatches, __ATOMIC_RELAXED);
	s->queued = xform_ahead_queued(x);
	s->ahead_runs = __atomic_load_n(&x->ahead_runs, __ATOMIC_RELAXED);
}

const char *xform_name(const struct xform *x)
{
	return x->name;
}

void xform_stop(struct xform *x)
{
	if (!x)
		return;
	xform_ahead_stop(x);
	xform_verify_stop(x);
}

void xform_free(struct xform *x)
{
	struct xform_entry *e, *next;

	if (!x)
		return;
	xform_stop(x);
	for (e = x->stash; e; e = next) {
		next = e->next;
		xform_entry_free(e);
	}
	for (e = x->failed; e; e = next) {
		next = e->next;
		xform_entry_free(e);
	}
	pthread_mutex_destroy(&x->lock);
	pthread_mutex_destroy(&x->vlock);
	pthread_cond_destroy(&x->vcond);
	pthread_mutex_destroy(&x->alock);
	pthread_cond_destroy(&x->acond);
	free(x->vset);
	free(x->name);
	free(x->out_name);
	free(x->len_name);
	free(x);
}
