/*
 * xform_run: one object's run of a user's transform, as derived objects
 * (cache/xform.h says what; this says how). The lowest of a transform's
 * files: xform_open.c, xform_verify.c and xform_ahead.c call it, and it
 * calls none of them (see xform_open.c's top for the order).
 *
 * Two producers per transform, registered with cache_set_transform()
 * (xform_produce_register()): the length object's reads the source whole
 * (raw reads through the cache: verified like any read), runs the
 * transform, and, with a cache that stores, fills the output object (its
 * run, nested in this one, takes the output from this run: xform_pending)
 * and writes the length; with one that does not, it leaves the output in
 * the stash, a small list keyed by (key, etag), for the output object's
 * producer, which runs the transform again when it is not there. The
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
 * Runs ahead (xform_ahead.c) take a slot of the transform only once they
 * are the object's runner (xform_ahead_slot(), here because the run
 * asks for it).
 *
 * Lock: x->lock protects the stash, the failure table and nothing else;
 * never held across a read or a run. x->alock is read here only for the
 * ahead threads' stop flag.
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
#include <unistd.h>

#include "util/log.h"
#include "util/sha256.h"

/* The thread that ran a length object's producer just now (derived.c
 * runs it in the thread of the reader that missed): xform_size() does
 * not verify an output it has just made. */
static __thread bool xform_produced_here;

/* This thread runs ahead of a reader (xform_run_size()'s ahead). */
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

static int run_size(struct xform *x, const struct cache_object *src,
		    uint64_t *size, bool *made)
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
	*made = xform_produced_here;
	*size = v;
	return 0;
}

int xform_run_size(struct xform *x, const struct cache_object *src,
		   uint64_t *size, bool ahead, bool *made)
{
	int rc;

	xform_ahead_here = ahead;
	rc = run_size(x, src, size, made);
	xform_ahead_here = false;
	return rc;
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

int xform_produce_register(struct xform *x, bool *held)
{
	int rc;

	*held = false;
	rc = cache_set_transform(x->c, x->len_name, xform_len_produce, x);
	if (rc)
		return rc;
	*held = true;
	return cache_set_transform(x->c, x->out_name, xform_out_produce, x);
}

/* Also the sample key of an object: never 0 (the set's empty slot). */
uint64_t xform_object_hash(const struct cache_object *o)
{
	uint8_t d[SHA256_LEN];
	struct sha256 *h = sha256_new();
	uint64_t v = 0;

	if (!h || sha256_update(h, o->key, o->key_len) ||
	    sha256_update(h, "", 1) || sha256_update(h, o->etag, o->etag_len) ||
	    sha256_final(h, d)) {
		sha256_free(h);
		return 0;
	}
	sha256_free(h);
	for (int i = 0; i < 8; i++)
		v = v << 8 | d[i];
	return v ? v : 1;
}

bool xform_ahead_slot(struct xform *x)
{
	unsigned i;

	for (i = 0; i <= XFORM_AHEAD_SLOT_WAIT_MS / XFORM_AHEAD_SLOT_POLL_MS;
	     i++) {
		bool stop;

		if (transform_reserve(x->t))
			return true;
		pthread_mutex_lock(&x->alock);
		stop = x->astop;
		pthread_mutex_unlock(&x->alock);
		if (stop)
			return false;
		usleep(XFORM_AHEAD_SLOT_POLL_MS * 1000);
	}
	return false;
}
