/*
 * xform_verify: determinism checked (cache/xform.h, verify_percent) and the
 * digests of stored outputs (xform_digest()). See cache/xform_open.c's top for
 * the design: a stable sample by a hash of (key, etag), a set of the
 * objects queued in this process, one verifier thread per transform that
 * compares the stored output's SHA-256 with a new run's.
 *
 * Lock: x->vlock protects the queue, the set and the verifier's state;
 * never held across a read or a run.
 */
#include "cache/xform_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hex.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/thread.h"

/* The digest and size of src's stored output, from ready reads only.
 * Returns 0, -ENOENT (some of it is not stored), -EIO, -ENOMEM. */
static int stored_digest(struct xform *x, const struct cache_object *src,
			 uint8_t d[SHA256_LEN], uint64_t *size)
{
	struct cache_object lo, out;
	struct sha256 *h = NULL;
	uint8_t le[8], *buf = NULL;
	uint64_t v, off;
	ssize_t got;
	int rc;

	xform_len_object(x, src, &lo);
	got = cache_read(x->c, &(struct cache_read){ .obj = &lo,
						     .len = sizeof(le),
						     .buf = le,
						     .flags = CACHE_READ_READY,
						     .order = CACHE_NO_ORDER });
	if (got < 0)
		return (int)got;
	v = xform_le64(le);
	if (got != (ssize_t)sizeof(le) || v == 0)
		return -EIO;
	xform_object(x, src, v, &out);
	buf = malloc(XFORM_READ_STEP);
	h = sha256_new();
	rc = -ENOMEM;
	if (!buf || !h)
		goto out;
	for (off = 0; off < v; off += (uint64_t)got) {
		size_t n = v - off < XFORM_READ_STEP ? (size_t)(v - off)
						     : XFORM_READ_STEP;

		got = cache_read(
			x->c, &(struct cache_read){ .obj = &out,
						    .offset = off,
						    .len = n,
						    .buf = buf,
						    .flags = CACHE_READ_READY,
						    .order = CACHE_NO_ORDER });
		if (got < 0) {
			rc = (int)got;
			goto out;
		}
		if ((size_t)got != n) {
			rc = -EIO;
			goto out;
		}
		if (sha256_update(h, buf, n)) {
			rc = -EIO;
			goto out;
		}
	}
	rc = sha256_final(h, d);
	if (rc == 0)
		*size = v;
out:
	sha256_free(h);
	free(buf);
	return rc;
}

int xform_digest(struct xform *x, const struct cache_object *src, bool run,
		 uint8_t digest[SHA256_LEN], uint64_t *size)
{
	uint64_t v;
	int rc;

	if (run) {
		struct cache_object out;
		bool here;
		ssize_t made;

		/* As xform_size(): a stored output is queued for verify. */
		rc = xform_run_size(x, src, &v, false, &here);
		if (rc)
			return rc;
		if (!here)
			xform_verify_queue(x, src);
		/* A fill: makes the output present (running the transform
		 * if it was evicted), then the digest reads it back. */
		xform_object(x, src, v, &out);
		made = cache_read(
			x->c, &(struct cache_read){ .obj = &out,
						    .len = (size_t)v,
						    .order = CACHE_NO_ORDER });
		if (made < 0)
			return (int)made;
	}
	return stored_digest(x, src, digest, size);
}

/* Caller holds vlock: adds v to the set. Returns 1 (added), 0 (there
 * already), -ENOMEM. */
static int vset_add(struct xform *x, uint64_t v)
{
	size_t i;

	if ((x->vset_n + 1) * 2 > x->vset_cap) {
		size_t cap = x->vset_cap ? x->vset_cap * 2 : 1024;
		uint64_t *n = calloc(cap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		for (i = 0; i < x->vset_cap; i++) {
			size_t j;

			if (!x->vset[i])
				continue;
			for (j = x->vset[i] % cap; n[j]; j = (j + 1) % cap)
				;
			n[j] = x->vset[i];
		}
		free(x->vset);
		x->vset = n;
		x->vset_cap = cap;
	}
	for (i = v % x->vset_cap; x->vset[i]; i = (i + 1) % x->vset_cap)
		if (x->vset[i] == v)
			return 0;
	x->vset[i] = v;
	x->vset_n++;
	return 1;
}

/* Checks e's stored output against a new run (see the top). */
static void verify_one(struct xform *x, const struct xform_entry *e)
{
	struct cache_object src = { .key = e->key,
				    .key_len = e->key_len,
				    .etag = e->etag,
				    .etag_len = e->etag_len,
				    .size = e->src_size };
	struct transform_output out;
	struct transform_failure f;
	uint8_t stored[SHA256_LEN], now[SHA256_LEN];
	char kb[LOG_KEY_MAX], hs[2 * SHA256_LEN + 1], hn[2 * SHA256_LEN + 1];
	uint8_t *in = NULL;
	uint64_t size;
	int rc;

	if (stored_digest(x, &src, stored, &size))
		return; /* evicted meanwhile, or unreadable: nothing to check */
	if (xform_source(x->c, &src, &in))
		return; /* the read logged it */
	rc = transform_run(x->t, in, (size_t)src.size, &out, &f);
	free(in);
	if (rc) {
		count(&x->verify_runs, 1);
		log_msg(LOG_WARNING,
			"%s: transform %s: the verify run failed: %s (%s); "
			"stderr: %s",
			log_key(kb, src.key, src.key_len), x->name,
			transform_fail_name(f.what), f.message,
			f.stderr_tail[0] ? f.stderr_tail : "(none)");
		return;
	}
	rc = sha256(out.data, out.len, now);
	if (rc == 0 && (out.len != size || memcmp(stored, now, SHA256_LEN))) {
		count(&x->verify_mismatches, 1);
		hex_encode(stored, SHA256_LEN, hs);
		hex_encode(now, SHA256_LEN, hn);
		log_msg(LOG_ERR,
			"%s: transform %s is not deterministic: the stored "
			"output is sha256 %s (%llu bytes), a new run gave "
			"sha256 %s (%llu bytes); serving the stored one",
			log_key(kb, src.key, src.key_len), x->name, hs,
			(unsigned long long)size, hn,
			(unsigned long long)out.len);
	}
	/* Counted once its result is: a reader of the stats that sees the
	 * run sees its mismatch too (release: xform_stats_get() acquires). */
	__atomic_add_fetch(&x->verify_runs, 1, __ATOMIC_RELEASE);
	free(out.data);
}

static void *verifier_main(void *arg)
{
	struct xform *x = arg;

	pthread_mutex_lock(&x->vlock);
	for (;;) {
		struct xform_entry *e;

		while (!x->vhead && !x->vstop)
			pthread_cond_wait(&x->vcond, &x->vlock);
		if (x->vstop)
			break;
		e = x->vhead;
		x->vhead = e->next;
		if (!x->vhead)
			x->vtail = &x->vhead;
		x->vn--;
		pthread_mutex_unlock(&x->vlock);
		verify_one(x, e);
		xform_entry_free(e);
		pthread_mutex_lock(&x->vlock);
	}
	pthread_mutex_unlock(&x->vlock);
	return NULL;
}

void xform_verify_queue(struct xform *x, const struct cache_object *src)
{
	struct xform_entry *e;
	uint64_t h;

	if (!x->verify_percent)
		return;
	h = xform_object_hash(src);
	if (!h || h % 100 >= x->verify_percent)
		return;
	e = xform_entry_new(src);
	if (!e)
		return;
	e->src_size = src->size;
	pthread_mutex_lock(&x->vlock);
	if (x->vstop || x->vn >= XFORM_VERIFY_QUEUE_MAX ||
	    vset_add(x, h) != 1) {
		pthread_mutex_unlock(&x->vlock);
		xform_entry_free(e);
		return;
	}
	if (!x->vstarted) {
		if (thread_start(&x->verifier, verifier_main, x)) {
			pthread_mutex_unlock(&x->vlock);
			xform_entry_free(e);
			return;
		}
		x->vstarted = true;
	}
	*x->vtail = e;
	x->vtail = &e->next;
	x->vn++;
	count(&x->verify_queued, 1);
	pthread_cond_signal(&x->vcond);
	pthread_mutex_unlock(&x->vlock);
}

void xform_verify_stop(struct xform *x)
{
	struct xform_entry *e, *next;
	bool started;

	pthread_mutex_lock(&x->vlock);
	x->vstop = true;
	started = x->vstarted;
	x->vstarted = false;
	pthread_cond_broadcast(&x->vcond);
	pthread_mutex_unlock(&x->vlock);
	if (started)
		pthread_join(x->verifier, NULL);
	pthread_mutex_lock(&x->vlock);
	e = x->vhead;
	x->vhead = NULL;
	x->vtail = &x->vhead;
	x->vn = 0;
	pthread_mutex_unlock(&x->vlock);
	for (; e; e = next) {
		next = e->next;
		xform_entry_free(e);
	}
}
