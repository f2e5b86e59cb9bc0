/*
 * xform_impl: what a transform's four files share: cache/xform_open.c
 * (attach, the reader's lookup, stats, stop), cache/xform_ahead.c (runs
 * ahead of the reader), cache/xform_verify.c (verify, digests) and
 * cache/xform_run.c (one object's run, the stash, failures), in that
 * order from the top; nothing outside cache/xform* includes it. Types,
 * bounds and inline helpers here; the functions below say whose they
 * are.
 */
#ifndef SHARDFS_CACHE_XFORM_IMPL_H
#define SHARDFS_CACHE_XFORM_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache/xform.h"

/* Objects waiting for the verifier; more are not queued (nor marked, so
 * a later lookup queues them). */
#define XFORM_VERIFY_QUEUE_MAX 1024u
/* Bytes per ready read of a stored output: one CRC block, so it never
 * crosses a chunk (chunk sizes are multiples of it). */
#define XFORM_READ_STEP ((size_t)CACHE_CRC_BLOCK)
/* Runs ahead (xform_ahead.c): objects queued at most; objects queued
 * since, before one is queued again; threads at most; the largest source
 * run ahead; files ahead of a lookup at most. */
#define XFORM_AHEAD_QUEUE_MAX 64u
#define XFORM_AHEAD_RECENT 256u
#define XFORM_AHEAD_THREADS_MAX 16u
#define XFORM_AHEAD_SOURCE_MAX (UINT64_C(64) << 20)
#define XFORM_AHEAD_DEPTH_MAX 32u
/* How an ahead thread waits for a free slot (xform_ahead.c). */
#define XFORM_AHEAD_SLOT_WAIT_MS 10000u
#define XFORM_AHEAD_SLOT_POLL_MS 20u

struct xform_entry {
	struct xform_entry *next;
	char *key, *etag;
	size_t key_len, etag_len;
	void *data; /* stash: the output */
	size_t len;
	uint64_t src_size; /* verify: the source's size */
	uint64_t retry_ns; /* failures: no run before this */
	unsigned fails;	   /* failures: in a row */
};

struct xform {
	struct cache *c;
	struct transform *t;
	char *name;
	char *out_name; /* "xf-NAME-ID" */
	char *len_name; /* "xf-NAME-ID.len" */
	struct backoff_policy retry;
	unsigned stash_max;
	uint64_t stash_bytes_max;
	pthread_mutex_t lock;
	struct xform_entry *stash;  /* protected by lock; newest first */
	unsigned n_stash;	    /* protected by lock */
	uint64_t stash_bytes;	    /* protected by lock */
	struct xform_entry *failed; /* protected by lock */
	uint64_t runs, failures, refused, bytes_in, bytes_out; /* atomic */
	uint64_t timeouts, verify_queued, verify_runs;	       /* atomic */
	uint64_t verify_mismatches;			       /* atomic */
	unsigned verify_percent;

	pthread_mutex_t vlock;
	pthread_cond_t vcond;	   /* queued, or stop */
	struct xform_entry *vhead; /* protected by vlock; oldest first */
	struct xform_entry **vtail;
	unsigned vn;		 /* protected by vlock */
	uint64_t *vset;		 /* protected by vlock: open addressing */
	size_t vset_cap, vset_n; /* protected by vlock */
	bool vstarted, vstop;	 /* protected by vlock */
	pthread_t verifier;

	pthread_mutex_t alock;
	pthread_cond_t acond;	    /* queued, or stop */
	struct xform_entry *ahead;  /* protected by alock; oldest first */
	struct xform_entry **atail; /* protected by alock */
	unsigned an;		    /* protected by alock: queued */
	uint64_t arecent[XFORM_AHEAD_RECENT]; /* protected by alock: a ring */
	unsigned anext;			      /* protected by alock */
	pthread_t athreads[XFORM_AHEAD_THREADS_MAX];
	unsigned nthreads;   /* protected by alock: started */
	bool astop;	     /* protected by alock */
	uint64_t ahead_runs; /* atomic: runs an ahead thread made */
};

static inline void count(uint64_t *v, uint64_t n)
{
	__atomic_add_fetch(v, n, __ATOMIC_RELAXED);
}

/* The length object of src's output. */
static inline void xform_len_object(const struct xform *x,
				    const struct cache_object *src,
				    struct cache_object *lo)
{
	*lo = *src;
	lo->transform = x->len_name;
	lo->source_size = src->size;
	lo->size = 8;
	lo->chunk_size = 0;
}

static inline uint64_t xform_le64(const uint8_t le[8])
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | le[i];
	return v;
}

/* ---- xform_run.c (calls none of the others) ---- */

/* An entry for o (its key and etag copied), or NULL. */
struct xform_entry *xform_entry_new(const struct cache_object *o);
void xform_entry_free(struct xform_entry *e);

/* Reads raw (the source) whole into *in (free() it). Returns 0 or the
 * read's error (logged by it). */
int xform_source(struct cache *c, const struct cache_object *raw, uint8_t **in);

/* The first 8 bytes of SHA-256(key, NUL, etag) of o: the same on every
 * node and run; never 0. 0 only if hashing failed (no memory). */
uint64_t xform_object_hash(const struct cache_object *o);

/* Registers x's two producers with its cache. *held is set once the
 * cache holds x (from then on x must outlive the cache). Returns 0 or
 * cache_set_transform()'s error. */
int xform_produce_register(struct xform *x, bool *held);

/* xform_size() without the verify: *made tells whether this thread ran
 * the object just now (rather than found it stored, or joined another's
 * run). With ahead (an ahead thread's lookup) its run starts only on a
 * free slot (xform_ahead_slot()), or ends with -EAGAIN; without, a lookup
 * that joined such a run and got -EAGAIN runs the object itself. */
int xform_run_size(struct xform *x, const struct cache_object *src,
		   uint64_t *size, bool ahead, bool *made);

/* An ahead thread's run: takes a free slot of x's transform for this
 * thread's next run, polling for at most XFORM_AHEAD_SLOT_WAIT_MS or
 * until x stops. Returns whether it has one. */
bool xform_ahead_slot(struct xform *x);

/* ---- xform_verify.c (calls xform_run.c only) ---- */

/* Queues src for the verifier if it is in the sample and was not queued
 * before; starts the verifier at the first. Never waits for a run. */
void xform_verify_queue(struct xform *x, const struct cache_object *src);

/* Drops the verify queue and joins the verifier (it ends its check
 * first); none starts after it. */
void xform_verify_stop(struct xform *x);

/* ---- xform_ahead.c (calls xform_verify.c and xform_run.c) ---- */

/* The ahead queue's length now (the stats' gauge). */
uint64_t xform_ahead_queued(struct xform *x);

/* Drops the ahead queue and joins the ahead threads (each ends its run
 * first); none starts after it. */
void xform_ahead_stop(struct xform *x);

#endif
