/*
 * xform: a user's transform's outputs as derived objects (cache/xform.h
 * says what; this says how).
 *
 * Two producers per transform, registered with cache_set_transform():
 * the length object's reads the source whole (raw reads through the
 * cache: verified like any read), runs the transform, and, with a cache
 * that stores, fills the output object (its run, nested in this one,
 * takes the output from this run: xform_pending) and writes the length;
 * with one that does not, it leaves the output in the stash, a small
 * list keyed by (key, etag), for the output object's producer, which
 * runs the transform again when it is not there. The
 * stash is bounded (stash_max outputs and stash_bytes bytes, the oldest
 * dropped): an output dropped from it costs one more run, never a wrong
 * byte, since the length object's length is checked against the output
 * by the derived run (a different length fails it).
 *
 * Failures: a table of objects whose last run failed, with the time the
 * next run may start and the failures in a row (for the backoff). It
 * grows with failing objects only and an entry goes at the object's next
 * good run; bounded in practice by the dataset's failing objects.
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
 *
 * The verify and the digests are in cache/xform_verify.c.
 *
 * Lock: x->lock protects the stash, the failure table and nothing else;
 * never held across a read or a run. x->vlock protects the verify queue,
 * the set and the verifier's state; never held across a read or a run.
 */
#include "cache/xform_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/hex.h"
#include "util/log.h"
#include "util/sha256.h"

#define XFORM_STASH_DEFAULT 64u
#define XFORM_STASH_BYTES_DEFAULT (UINT64_C(256) << 20)
#define XFORM_RETRY_BASE_MS 1000u
#define XFORM_RETRY_CAP_MS 300000u
#define XFORM_ID_BYTES 16

/* The thread that ran a length object's producer just now (derived.c
 * runs it in the thread of the reader that missed): xform_size() does
 * not verify an output it has just made. */
static __thread bool xform_produced_here;

/* This thread runs ahead of a reader (xform_size_ahead()). */
static __thread bool xform_ahead_here;

/* The output a length run of this thread is storing (xform_len_produce()
 * sets it around its nested fill of the output object). */
struct xform_pending {
	const struct xform *x;
	const struct cache_object *raw;
	const struct transform_output *out;
};
static __thread const struct xform_pending *xform_pending;

static uint64_t xform_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void xform_entry_free(struct xform_entry *e)
{
	if (!e)
		return;
	free(e->key);
	free(e->etag);
	free(e->data);
	free(e);
}

static bool entry_is(const struct xform_entry *e, const struct cache_object *o)
{
	return e->key_len == o->key_len && e->etag_len == o->etag_len &&
	       !memcmp(e->key, o->key, o->key_len) &&
	       !memcmp(e->etag, o->etag, o->etag_len);
}

struct xform_entry *xform_entry_new(const struct cache_object *o)
{
	struct xform_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->key = malloc(o->key_len + 1);
	e->etag = malloc(o->etag_len + 1);
	if (!e->key || !e->etag) {
		xform_entry_free(e);
		return NULL;
	}
	memcpy(e->key, o->key, o->key_len);
	e->key[o->key_len] = '\0';
	memcpy(e->etag, o->etag, o->etag_len);
	e->etag[o->etag_len] = '\0';
	e->key_len = o->key_len;
	e->etag_len = o->etag_len;
	return e;
}

/* Caller holds the lock: unlinks and returns o's entry of *list. */
static struct xform_entry *entry_take(struct xform_entry **list,
				      const struct cache_object *o)
{
	for (struct xform_entry **pp = list; *pp; pp = &(*pp)->next) {
		struct xform_entry *e = *pp;

		if (entry_is(e, o)) {
			*pp = e->next;
			e->next = NULL;
			return e;
		}
	}
	return NULL;
}

/* Keeps out (taken) for the output's producer, dropping the oldest
 * beyond stash_max. */
static void stash_put(struct xform *x, const struct cache_object *o,
		      struct transform_output *out)
{
	struct xform_entry *e = xform_entry_new(o), *old, **pp;
	struct xform_entry *drop = NULL;

	if (!e) {
		free(out->data);
		return;
	}
	e->data = out->data;
	e->len = out->len;
	pthread_mutex_lock(&x->lock);
	old = entry_take(&x->stash, o);
	if (old) {
		x->n_stash--;
		x->stash_bytes -= old->len;
	}
	e->next = x->stash;
	x->stash = e;
	x->n_stash++;
	x->stash_bytes += e->len;
	/* The oldest go first; the newest stays even alone over the bytes
	 * bound (its reader is about to take it). */
	while (x->stash->next && (x->n_stash > x->stash_max ||
				  x->stash_bytes > x->stash_bytes_max)) {
		for (pp = &x->stash; (*pp)->next; pp = &(*pp)->next)
			;
		x->n_stash--;
		x->stash_bytes -= (*pp)->len;
		(*pp)->next = drop;
		drop = *pp;
		*pp = NULL;
	}
	pthread_mutex_unlock(&x->lock);
	xform_entry_free(old);
	while (drop) {
		struct xform_entry *next = drop->next;

		xform_entry_free(drop);
		drop = next;
	}
}

static bool stash_take(struct xform *x, const struct cache_object *o,
		       struct transform_output *out)
{
	struct xform_entry *e;

	pthread_mutex_lock(&x->lock);
	e = entry_take(&x->stash, o);
	if (e) {
		x->n_stash--;
		x->stash_bytes -= e->len;
	}
	pthread_mutex_unlock(&x->lock);
	if (!e)
		return false;
	out->data = e->data;
	out->len = e->len;
	e->data = NULL;
	xform_entry_free(e);
	return true;
}

/* Remembers a failure of o: no run before the backoff has passed. */
static void failed_note(struct xform *x, const struct cache_object *o)
{
	struct xform_entry *e;

	pthread_mutex_lock(&x->lock);
	e = entry_take(&x->failed, o);
	if (!e)
		e = xform_entry_new(o);
	if (e) {
		e->fails++;
		e->retry_ns = xform_now_ns() +
			      (uint64_t)backoff_delay_ms(&x->retry, e->fails) *
				      1000000u;
		e->next = x->failed;
		x->failed = e;
	}
	pthread_mutex_unlock(&x->lock);
}

/* Whether o is in a failure's backoff (then the read fails at once). */
static bool failed_waiting(struct xform *x, const struct cache_object *o)
{
	bool wait = false;

	pthread_mutex_lock(&x->lock);
	for (struct xform_entry *e = x->failed; e; e = e->next)
		if (entry_is(e, o)) {
			wait = xform_now_ns() < e->retry_ns;
			break;
		}
	pthread_mutex_unlock(&x->lock);
	return wait;
}

static void failed_clear(struct xform *x, const struct cache_object *o)
{
	pthread_mutex_lock(&x->lock);
	xform_entry_free(entry_take(&x->failed, o));
	pthread_mutex_unlock(&x->lock);
}

/* Reads raw (the source) whole into *in (free() it). Bytes the node holds
 * (stored, or fetched by the prefetcher for the raw view and not read
 * yet) serve it without a request (CACHE_READ_READY); a source not all at
 * hand is read from the store in one read that is not stored
 * (CACHE_READ_RAW: a producer's read; only the output is kept). Returns 0
 * or the read's error (logged by it). */
int xform_source(struct cache *c, const struct cache_object *raw, uint8_t **in)
{
	size_t size = (size_t)raw->size;
	ssize_t got = 0;

	if (raw->size > SIZE_MAX - 1)
		return -EFBIG;
	*in = malloc(size ? size : 1);
	if (!*in)
		return -ENOMEM;
	if (size) {
		struct cache_read r = { .obj = raw,
					.len = size,
					.buf = *in,
					.flags = CACHE_READ_READY,
					.order = CACHE_NO_ORDER };

		got = cache_read(c, &r);
		if (got == -ENOENT) {
			r.flags = CACHE_READ_RAW;
			got = cache_read(c, &r);
		}
		if (got >= 0 && (size_t)got != size)
			got = -EIO;
	}
	if (got < 0) {
		free(*in);
		*in = NULL;
		return (int)got;
	}
	return 0;
}

/* Reads raw (the source) whole and runs the transform over it. Returns 0
 * and *out, or -EIO (logged here, once per run, and counted). */
static int xform_run(struct xform *x, struct cache *c,
		     const struct cache_object *raw,
		     struct transform_output *out)
{
	struct transform_failure f;
	char kb[LOG_KEY_MAX];
	uint8_t *in = NULL;
	size_t size = (size_t)raw->size;
	int rc;

	rc = xform_source(c, raw, &in);
	if (rc)
		return rc;
	if (xform_ahead_here && !xform_ahead_slot(x)) {
		free(in);
		return -EAGAIN; /* no slot free: the reader runs it */
	}
	count(&x->runs, 1);
	count(&x->bytes_in, size);
	rc = transform_run(x->t, in, size, out, &f);
	free(in);
	if (rc == 0) {
		count(&x->bytes_out, out->len);
		return 0;
	}
	count(&x->failures, 1);
	if (f.what == TRANSFORM_FAIL_TIMEOUT)
		count(&x->timeouts, 1);
	log_msg(LOG_ERR, "%s: transform %s failed: %s (%s); stderr: %s",
		log_key(kb, raw->key, raw->key_len), x->name,
		transform_fail_name(f.what), f.message,
		f.stderr_tail[0] ? f.stderr_tail : "(none)");
	failed_note(x, raw);
	return -EIO;
}

/* The length object's producer. */
static int xform_len_produce(void *ctx, struct cache *c,
			     const struct cache_object *raw, cache_sink_fn sink,
			     void *sink_arg)
{
	struct xform *x = ctx;
	struct transform_output out;
	uint8_t le[8];
	uint64_t len;
	int rc;

	rc = xform_run(x, c, raw, &out);
	if (rc)
		return rc;
	xform_produced_here = true;
	len = out.len;
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(len >> (8 * i));
	if (cache_stores(c)) {
		struct xform_pending p = { x, raw, &out };
		struct cache_object o;

		/* The output is stored now, under this run's node lock and
		 * before its length: a process that finds the length finds
		 * the output, rather than run the transform again for it
		 * (its stash is this process's). The nested run takes it
		 * from here, not from the stash, which other runs may have
		 * dropped it from meanwhile. Its error is the output run's,
		 * logged there; the length stays good. */
		xform_object(x, raw, len, &o);
		xform_pending = &p;
		(void)cache_read(
			c, &(struct cache_read){ .obj = &o,
						 .len = (size_t)len,
						 .order = CACHE_NO_ORDER });
		xform_pending = NULL;
		free(out.data);
	} else {
		stash_put(x, raw, &out);
	}
	return sink(sink_arg, le, sizeof(le));
}

/* The output object's producer. */
static int xform_out_produce(void *ctx, struct cache *c,
			     const struct cache_object *raw, cache_sink_fn sink,
			     void *sink_arg)
{
	struct xform *x = ctx;
	const struct xform_pending *p = xform_pending;
	struct transform_output out;
	int rc;

	if (p != NULL && p->x == x && p->raw->key_len == raw->key_len &&
	    p->raw->etag_len == raw->etag_len &&
	    memcmp(p->raw->key, raw->key, raw->key_len) == 0 &&
	    memcmp(p->raw->etag, raw->etag, raw->etag_len) == 0)
		/* Nested in this thread's length run: its output. */
		return sink(sink_arg, p->out->data, p->out->len);
	if (!stash_take(x, raw, &out)) {
		rc = xform_run(x, c, raw, &out);
		if (rc)
			return rc;
	}
	rc = sink(sink_arg, out.data, out.len);
	free(out.data);
	return rc;
}

int xform_attach(struct cache *c, struct transform *t,
		 const struct xform_options *o, struct xform **out)
{
	uint8_t id[SHA256_LEN];
	char hex[2 * XFORM_ID_BYTES + 1];
	struct xform *x;
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
	rc = cache_set_transform(c, x->len_name, xform_len_produce, x);
	if (rc)
		goto fail;
	/* From here the cache holds x as a producer's context (there is no
	 * way to take a producer back): out of memory now keeps x, unused,
	 * until the process ends, rather than leave the cache a dangling
	 * pointer. */
	rc = cache_set_transform(c, x->out_name, xform_out_produce, x);
	if (rc)
		return rc;
	*out = x;
	return 0;
fail:
	xform_free(x);
	return rc;
}

int xform_size(struct xform *x, const struct cache_object *src, uint64_t *size)
{
	struct cache_object lo;
	uint8_t le[8];
	uint64_t v = 0;
	ssize_t got;

	if (failed_waiting(x, src)) {
		count(&x->refused, 1);
		return -EIO;
	}
	xform_len_object(x, src, &lo);
	xform_produced_here = false;
	{
		struct cache_read r = { .obj = &lo,
					.len = sizeof(le),
					.buf = le,
					.order = CACHE_NO_ORDER };

		got = cache_read(x->c, &r);
		/* A run ahead that found no slot (xform_ahead.c) ended the
		 * run this lookup joined: it runs the object itself. */
		if (got == -EAGAIN && !xform_ahead_here)
			got = cache_read(x->c, &r);
	}
	if (got < 0)
		return (int)got;
	if (got != (ssize_t)sizeof(le))
		return -EIO;
	v = xform_le64(le);
	if (v == 0)
		return -EIO; /* a transform's output has at least a byte */
	failed_clear(x, src);
	if (!xform_produced_here)
		xform_verify_queue(x, src);
	*size = v;
	return 0;
}

bool xform_size_ahead(struct xform *x, const struct cache_object *src,
		      uint64_t *size)
{
	bool made;

	xform_ahead_here = true;
	made = xform_size(x, src, size) == 0 && xform_produced_here;
	xform_ahead_here = false;
	return made;
}

void xform_object(const struct xform *x, const struct cache_object *src,
		  uint64_t size, struct cache_object *out)
{
	*out = *src;
	out->transform = x->out_name;
	out->source_size = src->size;
	out->size = size;
	out->chunk_size = 0;
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
