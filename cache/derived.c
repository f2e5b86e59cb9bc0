/*
 * derived: objects whose bytes are a transform's output over an object's
 * own bytes (cache.h, cache_set_transform()), e.g. a .gz source
 * decompressed once per node. Their chunks are named (entry.c: the
 * transform is part of the identity), stored and looked up like any
 * other (read.c, read_stored()); what is new is the miss.
 *
 * A producer writes the whole stream in one pass, so a miss of any chunk
 * runs it for the whole object, once per object at a time in this
 * process: a flight, named by (key, etag, transform, chunk size, size).
 * The first reader that misses runs the producer in its own thread; later
 * ones wait for that run. Across the processes of the node (mounts and
 * shardfs warm on one cache directory) the runner first takes the
 * object's node lock (derived_node.c): while another process runs it,
 * it waits (bounded), and runs only if the chunks are still missing once
 * it has the lock; its chunks are indexed before it lets go. So an object
 * runs once per node, however many processes read it at once. The run stores each chunk as the stream
 * completes it (store_chunk(): the committer indexes it, and it is served
 * from the queue meanwhile), the last one only once the stream's length
 * is known to be right, and copies into every waiting reader the part of
 * its range that passes after it started waiting. A reader that came too
 * late for its range (the stream had passed it) looks its chunks up once
 * the run is over, and starts another run if they are gone (evicted, or
 * not storable: a read-only cache, a chunk over half the budget).
 *
 * A failed run (the producer's error, or a stream of the wrong length)
 * fails every reader waiting for it and drops the chunks it stored, all
 * before it leaves the table and counts in fails. A lookup is trusted
 * only if no run of the object was going on before it and none is after
 * it, and no run failed meanwhile (derived_lookup()): a chunk of a failed
 * run can only be found while that run is in the table. So nothing of a
 * failed run is served in this process.
 *
 * Waits are bounded like the engine's: a reader gives up with -EIO when
 * the run it waits for produced nothing for the wait bound
 * (cache_fetch_options.wait_ms), and so does a runner waiting for another
 * process's run that stores nothing for as long (derived_node.c); the
 * runner's own backend reads are bounded by the backend and the engine.
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/log.h"

/* Runs a reader may see end without its bytes before it gives up. */
#define DERIVED_ROUNDS 8
/* Times a reader looks again because a run ended while it looked. */
#define DERIVED_RELOOKS 3

struct derived_fn {
	struct derived_fn *next;
	char *name;
	cache_transform_fn fn;
	void *ctx;
};

/* A reader waiting for a run (its own or another's); on its stack. */
struct derived_waiter {
	struct derived_waiter *next;
	uint64_t off;
	size_t len;
	uint8_t *buf;
	size_t got;   /* bytes of [off, off + len) copied so far */
	bool capture; /* came before the stream passed off */
};

/* A run of a producer. The object's strings are the runner's, used only
 * while the flight is in the table (the runner is inside derived_read()
 * until it takes it out). */
struct derived_flight {
	struct derived_flight *next;
	const struct cache_object *obj;
	uint64_t chunk;
	uint64_t produced;    /* bytes of the stream so far */
	uint64_t progress_ns; /* when it last grew (CLOCK_MONOTONIC) */
	struct derived_waiter *waiters;
	bool done;
	int rc;
	unsigned refs; /* the runner and the waiters */
};

/* A chunk a run stored, to drop if the run fails. */
struct derived_stored {
	uint8_t hash[HASH_LEN];
	uint8_t *id;
	size_t id_len;
};

/* The runner's state, the sink's argument. */
struct derived_run {
	struct cache *c;
	const struct cache_object *obj;
	struct derived_flight *fl;
	uint64_t unit;
	uint8_t *chunk; /* the chunk being filled (unit bytes, accounted) */
	uint64_t n;	/* its number */
	uint64_t fill;	/* bytes in it */
	uint64_t pos;	/* bytes produced */
	struct derived_stored *stored;
	size_t n_stored, cap_stored;
};

void derived_init(struct cache *c)
{
	struct derived_state *d = &c->derived;
	pthread_condattr_t attr;

	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &attr);
	pthread_condattr_destroy(&attr);
	d->wait_ns = FETCH_WAIT_MS_DEFAULT * UINT64_C(1000000);
}

void derived_destroy(struct cache *c)
{
	struct derived_state *d = &c->derived;
	struct derived_fn *f, *next;

	for (f = d->fns; f != NULL; f = next) {
		next = f->next;
		free(f->name);
		free(f);
	}
	d->fns = NULL;
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
}

void derived_set_wait(struct cache *c, uint64_t wait_ms)
{
	if (wait_ms == 0)
		wait_ms = FETCH_WAIT_MS_DEFAULT;
	if (wait_ms > FETCH_WAIT_MS_MAX)
		wait_ms = FETCH_WAIT_MS_MAX;
	pthread_mutex_lock(&c->derived.lock);
	c->derived.wait_ns = wait_ms * UINT64_C(1000000);
	pthread_mutex_unlock(&c->derived.lock);
}

int cache_set_transform(struct cache *c, const char *name,
			cache_transform_fn fn, void *ctx)
{
	struct derived_state *d = &c->derived;
	struct derived_fn *f, *add;

	if (name == NULL || *name == '\0' || fn == NULL)
		return -EINVAL;
	add = calloc(1, sizeof(*add));
	if (add == NULL || (add->name = strdup(name)) == NULL) {
		free(add);
		return -ENOMEM;
	}
	add->fn = fn;
	add->ctx = ctx;
	pthread_mutex_lock(&d->lock);
	for (f = d->fns; f != NULL; f = f->next)
		if (strcmp(f->name, name) == 0) {
			f->fn = fn;
			f->ctx = ctx;
			break;
		}
	if (f == NULL) {
		add->next = d->fns;
		d->fns = add;
		add = NULL;
	}
	pthread_mutex_unlock(&d->lock);
	if (add != NULL) {
		free(add->name);
		free(add);
	}
	return 0;
}

/* Caller holds the lock: the run of obj going on, or NULL. */
static struct derived_flight *derived_find(struct derived_state *d,
					   const struct cache *c,
					   const struct cache_object *obj)
{
	uint64_t unit = cache_obj_chunk(c, obj);
	struct derived_flight *fl;

	for (fl = d->flights; fl != NULL; fl = fl->next) {
		const struct cache_object *o = fl->obj;

		if (fl->chunk == unit && o->size == obj->size &&
		    o->key_len == obj->key_len &&
		    o->etag_len == obj->etag_len &&
		    memcmp(o->key, obj->key, obj->key_len) == 0 &&
		    memcmp(o->etag, obj->etag, obj->etag_len) == 0 &&
		    strcmp(o->transform, obj->transform) == 0)
			return fl;
	}
	return NULL;
}

/* What a lookup saw of the runs before it looked. */
struct derived_seen {
	bool busy;	/* a run of the object was going on */
	uint64_t fails; /* d->fails */
	uint64_t ended; /* d->ended */
};

/* derived_join() without the check of d->ended. */
#define DERIVED_NO_CHECK UINT64_MAX

static void derived_see(struct cache *c, const struct cache_object *obj,
			struct derived_seen *s)
{
	struct derived_state *d = &c->derived;

	pthread_mutex_lock(&d->lock);
	s->busy = derived_find(d, c, obj) != NULL;
	s->fails = d->fails;
	s->ended = d->ended;
	pthread_mutex_unlock(&d->lock);
}

/* Whether bytes looked up after derived_see(s) can be trusted: no run of
 * the object now, and none failed meanwhile (see the file comment). */
static bool derived_still(struct cache *c, const struct cache_object *obj,
			  const struct derived_seen *s)
{
	struct derived_state *d = &c->derived;
	bool ok;

	pthread_mutex_lock(&d->lock);
	ok = derived_find(d, c, obj) == NULL && d->fails == s->fails;
	pthread_mutex_unlock(&d->lock);
	return ok;
}

/* read_stored() of [in_off, in_off + len) of chunk n of obj. Returns len,
 * a negative errno naming the chunk, or read_stored()'s error. */
static ssize_t stored_chunk(struct cache *c, const struct cache_object *obj,
			    uint64_t n, uint64_t in_off, size_t len, void *dst)
{
	struct read_chunk ch;
	int rc = read_chunk_name(c, obj, n, &ch);
	ssize_t got;

	if (rc < 0)
		return rc;
	got = read_stored(c, &ch, in_off, len, dst);
	read_chunk_release(&ch);
	return got;
}

ssize_t derived_stored(struct cache *c, const struct cache_object *obj,
		       uint64_t n, uint64_t in_off, size_t len, void *dst)
{
	struct derived_seen s;
	ssize_t got;

	derived_see(c, obj, &s);
	if (s.busy)
		return -ENOENT;
	got = stored_chunk(c, obj, n, in_off, len, dst);
	if (got >= 0 && !derived_still(c, obj, &s))
		got = -ENOENT;
	return got;
}

/* Serves [offset, offset + len) from stored chunks if every one is there.
 * Returns 1 (served), 0 (a miss: run the producer) or a negative errno;
 * *ended gets d->ended as it was before the lookup. */
static int derived_lookup(struct cache *c, const struct cache_object *obj,
			  uint64_t offset, size_t len, uint8_t *buf,
			  uint64_t *ended)
{
	struct derived_seen s;
	size_t done = 0;

	derived_see(c, obj, &s);
	*ended = s.ended;
	if (s.busy)
		return 0; /* wait for the run: its chunks may not be good */
	while (done < len) {
		uint64_t n, in_off;
		size_t want = read_chunk_span(c, obj, offset + done, len - done,
					      &n, &in_off);
		ssize_t got = stored_chunk(c, obj, n, in_off, want, buf + done);

		if (got == -ENOMEM)
			return -ENOMEM; /* naming the chunk */
		if (got < 0)
			return 0;
		done += want;
	}
	return derived_still(c, obj, &s) ? 1 : 0;
}

/* Stores the chunk the run filled (chunk r->n, r->fill bytes), and
 * remembers it to drop if the run fails. */
static void derived_store(struct derived_run *r)
{
	struct derived_stored *s;
	struct read_chunk ch;

	if (r->n_stored == r->cap_stored) {
		size_t cap = r->cap_stored ? 2 * r->cap_stored : 16;

		s = realloc(r->stored, cap * sizeof(*s));
		if (s == NULL)
			return; /* not stored: it could not be dropped */
		r->stored = s;
		r->cap_stored = cap;
	}
	if (read_chunk_name(r->c, r->obj, r->n, &ch) < 0)
		return;
	store_chunk(r->c, ch.hash, ch.id, ch.id_len, r->chunk, r->fill, NULL);
	s = &r->stored[r->n_stored++];
	memcpy(s->hash, ch.hash, HASH_LEN);
	s->id = ch.id; /* taken from ch */
	s->id_len = ch.id_len;
}

/* The producer's sink: hands the piece to the waiting readers and cuts it
 * into chunks. */
static int derived_sink(void *arg, const void *buf, size_t len)
{
	struct derived_run *r = arg;
	struct derived_state *d = &r->c->derived;
	const struct cache_object *obj = r->obj;
	const uint8_t *p = buf;
	struct derived_waiter *w;

	if (len == 0)
		return 0;
	stat_add(&r->c->derived_bytes, len);
	if (r->pos > obj->size || len > obj->size - r->pos) {
		/* Longer than obj->size: the run fails; counted on for its
		 * message, nothing more of it kept. */
		r->pos += len;
		return 0;
	}
	pthread_mutex_lock(&d->lock);
	for (w = r->fl->waiters; w != NULL; w = w->next) {
		uint64_t lo = w->off > r->pos ? w->off : r->pos;
		uint64_t hi = w->off + w->len < r->pos + len ? w->off + w->len
							     : r->pos + len;

		if (!w->capture || lo >= hi)
			continue;
		memcpy(w->buf + (lo - w->off), p + (lo - r->pos),
		       (size_t)(hi - lo));
		w->got += (size_t)(hi - lo);
	}
	r->fl->produced = r->pos + len;
	r->fl->progress_ns = clock_now_ns();
	pthread_mutex_unlock(&d->lock);
	while (len > 0) {
		uint64_t clen = read_chunk_len(r->c, obj, r->n);
		size_t take =
			clen - r->fill < len ? (size_t)(clen - r->fill) : len;

		memcpy(r->chunk + r->fill, p, take);
		r->fill += take;
		r->pos += take;
		p += take;
		len -= take;
		/* The last chunk waits for the end of the stream. */
		if (r->fill == clen && (r->n + 1) * r->unit < obj->size) {
			derived_store(r);
			r->n++;
			r->fill = 0;
		}
	}
	return 0;
}

/* The run fl (this thread's) made progress: its waiters' bound starts
 * again. A derived_node_progress_fn, for the wait for another process's
 * run too. */
static void derived_progress(struct cache *c, void *arg)
{
	struct derived_flight *fl = arg;

	pthread_mutex_lock(&c->derived.lock);
	fl->progress_ns = clock_now_ns();
	pthread_mutex_unlock(&c->derived.lock);
}

/* Runs the producer into r (the chunks it stores, dropped again if it
 * fails). Returns 0 or the run's error (logged). */
static int derived_produce(struct cache *c, const struct cache_object *obj,
			   struct derived_run *r, cache_transform_fn fn,
			   void *ctx)
{
	char kb[LOG_KEY_MAX];
	struct cache_object raw = { .key = obj->key,
				    .key_len = obj->key_len,
				    .etag = obj->etag,
				    .etag_len = obj->etag_len,
				    .size = obj->source_size };
	size_t i;
	int rc;

	stat_add(&c->derived_runs, 1);
	r->chunk = fetch_buffer_alloc(c->fetch, (size_t)r->unit);
	if (r->chunk == NULL) {
		rc = -ENOMEM;
	} else {
		rc = fn(ctx, c, &raw, derived_sink, r);
		if (rc > 0)
			rc = -EIO; /* not the contract */
	}
	if (rc == 0 && r->pos != obj->size) {
		log_msg(LOG_ERR,
			"%s: %s gave %llu bytes, the record index "
			"says %llu",
			log_key(kb, obj->key, obj->key_len), obj->transform,
			(unsigned long long)r->pos,
			(unsigned long long)obj->size);
		rc = -EIO;
	} else if (rc < 0 && rc != -EAGAIN && r->chunk != NULL) {
		/* (-EAGAIN: a run ahead of its reader found no slot free;
		 * cache/xform_ahead.c. No failure.) */
		log_msg(LOG_ERR, "%s: %s failed after %llu of %llu bytes: %s",
			log_key(kb, obj->key, obj->key_len), obj->transform,
			(unsigned long long)r->pos,
			(unsigned long long)obj->size, strerror(-rc));
	}
	if (rc == 0 && r->fill > 0)
		derived_store(r); /* the last chunk */
	fetch_buffer_free(c->fetch, r->chunk, (size_t)r->unit);
	for (i = 0; i < r->n_stored; i++) {
		if (rc < 0) {
			store_pending_drop(c, r->stored[i].hash);
			evict_entry_drop(c, r->stored[i].hash, r->stored[i].id,
					 r->stored[i].id_len);
		}
		free(r->stored[i].id);
	}
	free(r->stored);
	return rc;
}

/* Runs the producer of obj for flight fl (this thread's) under obj's node
 * lock, then takes fl out of the table with its result. The chunks are
 * indexed (or dropped) before the lock goes, so that the next process to
 * take it finds them (or runs it again). A run another process finished
 * meanwhile is not run: the flight ends with 0 and its readers look the
 * chunks up. */
static void derived_run(struct cache *c, const struct cache_object *obj,
			struct derived_flight *fl, cache_transform_fn fn,
			void *ctx)
{
	struct derived_state *d = &c->derived;
	struct derived_run r = { .c = c, .obj = obj, .fl = fl };
	struct derived_flight **pp;
	struct derived_node node;
	uint64_t wait_ns;
	int rc;

	r.unit = cache_obj_chunk(c, obj);
	pthread_mutex_lock(&d->lock);
	wait_ns = d->wait_ns;
	pthread_mutex_unlock(&d->lock);
	rc = derived_node_lock(c, obj, wait_ns, derived_progress, fl, &node);
	if (rc == 0) {
		/* The run starts now: this process's readers waited for the
		 * lock, and their wait bound runs from here, not from then. */
		derived_progress(c, fl);
		rc = derived_produce(c, obj, &r, fn, ctx);
		if (rc == 0 && r.n_stored > 0 && node.fd >= 0)
			store_drain(c);
		derived_node_unlock(&node);
	} else if (rc == 1) {
		rc = 0; /* stored by another process */
	}
	pthread_mutex_lock(&d->lock);
	if (rc < 0)
		d->fails++;
	d->ended++;
	fl->done = true;
	fl->rc = rc;
	for (pp = &d->flights; *pp != fl; pp = &(*pp)->next)
		;
	*pp = fl->next;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* Waits for fl to end (at most the wait bound without output), then lets
 * go of w and fl. Returns the run's result, or -EIO if the wait ran
 * out. */
static int derived_wait(struct cache *c, const struct cache_object *obj,
			struct derived_flight *fl, struct derived_waiter *w)
{
	char kb[LOG_KEY_MAX];
	struct derived_state *d = &c->derived;
	struct derived_waiter **pp;
	bool timed_out = false, last;
	int rc;

	pthread_mutex_lock(&d->lock);
	while (!fl->done) {
		uint64_t deadline = fl->progress_ns + d->wait_ns;
		struct timespec ts;

		if (clock_now_ns() >= deadline) {
			timed_out = true;
			break;
		}
		ts.tv_sec = (time_t)(deadline / 1000000000u);
		ts.tv_nsec = (long)(deadline % 1000000000u);
		pthread_cond_timedwait(&d->cond, &d->lock, &ts);
	}
	rc = timed_out ? -EIO : fl->rc;
	for (pp = &fl->waiters; *pp != w; pp = &(*pp)->next)
		;
	*pp = w->next;
	last = --fl->refs == 0;
	pthread_mutex_unlock(&d->lock);
	if (timed_out)
		log_msg(LOG_ERR,
			"cache: %s: the %s run this read waits for produced "
			"nothing for the wait bound; failing the read",
			log_key(kb, obj->key, obj->key_len), obj->transform);
	if (last)
		free(fl);
	return rc;
}

/* Joins the run of obj, or starts one (then runs it in this thread),
 * with w waiting for it. ended: d->ended before the caller looked its
 * chunks up (DERIVED_NO_CHECK: none); if a run ended since, the caller's
 * chunks may have been stored after it looked: no run is started.
 * Returns the run's result (0 or a negative errno), or 1: look again. */
static int derived_join(struct cache *c, const struct cache_object *obj,
			struct derived_waiter *w, uint64_t ended)
{
	char kb[LOG_KEY_MAX];
	struct derived_state *d = &c->derived;
	struct derived_flight *fl;
	cache_transform_fn fn = NULL;
	struct derived_fn *f;
	void *ctx = NULL;
	bool runner = false;

	pthread_mutex_lock(&d->lock);
	fl = derived_find(d, c, obj);
	if (fl == NULL) {
		for (f = d->fns; f != NULL; f = f->next)
			if (strcmp(f->name, obj->transform) == 0) {
				fn = f->fn;
				ctx = f->ctx;
			}
		if (fn == NULL) {
			pthread_mutex_unlock(&d->lock);
			log_msg(LOG_ERR,
				"cache: %s: no producer for transform %s; "
				"failing the read",
				log_key(kb, obj->key, obj->key_len),
				obj->transform);
			return -EOPNOTSUPP;
		}
		if (ended != DERIVED_NO_CHECK && ended != d->ended) {
			pthread_mutex_unlock(&d->lock);
			return 1;
		}
		fl = calloc(1, sizeof(*fl));
		if (fl == NULL) {
			pthread_mutex_unlock(&d->lock);
			return -ENOMEM;
		}
		fl->obj = obj;
		fl->chunk = cache_obj_chunk(c, obj);
		fl->progress_ns = clock_now_ns();
		fl->next = d->flights;
		d->flights = fl;
		runner = true;
	}
	w->capture = fl->produced <= w->off;
	w->next = fl->waiters;
	fl->waiters = w;
	fl->refs++;
	pthread_mutex_unlock(&d->lock);
	stat_add(&c->misses, 1);
	if (runner)
		derived_run(c, obj, fl, fn, ctx);
	return derived_wait(c, obj, fl, w);
}

ssize_t derived_read(struct cache *c, const struct cache_object *obj,
		     uint64_t offset, size_t len, void *buf)
{
	char kb[LOG_KEY_MAX];
	int rounds = 0, relooks = 0, rc;

	while (rounds < DERIVED_ROUNDS) {
		struct derived_waiter w = { .off = offset,
					    .len = len,
					    .buf = buf };
		uint64_t ended;

		rc = derived_lookup(c, obj, offset, len, buf, &ended);
		if (rc != 0)
			return rc < 0 ? rc : (ssize_t)len;
		rc = derived_join(c, obj, &w,
				  relooks < DERIVED_RELOOKS ? ended
							    : DERIVED_NO_CHECK);
		if (rc == 1) {
			relooks++;
			continue;
		}
		if (rc < 0)
			return rc;
		if (w.capture && w.got == len)
			return (ssize_t)len;
		rounds++;
	}
	log_msg(LOG_ERR,
		"cache: %s: %s: the chunks of %d runs were gone before this "
		"read could have them (evicted, or not storable); failing the "
		"read",
		log_key(kb, obj->key, obj->key_len), obj->transform,
		DERIVED_ROUNDS);
	return -EIO;
}

int derived_fill(struct cache *c, const struct cache_object *obj,
		 uint64_t *fetched)
{
	uint64_t unit = cache_obj_chunk(c, obj), n;
	struct derived_waiter w = { .len = 0 };
	struct read_chunk ch;
	bool present = true;
	int rc;

	for (n = 0; present && n * unit < obj->size; n++) {
		rc = read_chunk_name(c, obj, n, &ch);
		if (rc < 0)
			return rc;
		present = read_chunk_present(c, &ch);
		read_chunk_release(&ch);
	}
	if (present)
		return 0;
	rc = derived_join(c, obj, &w, DERIVED_NO_CHECK);
	if (rc == 0 && fetched != NULL)
		*fetched = obj->size; /* derived bytes, not the backend's */
	return rc;
}
