/*
 * fetch_request: the fetch engine's requests (fetch.h): a reader's chunk
 * (fetch_obtain(): joined in flight, or fetched, waiting for memory and a
 * connection, or read directly), prefetches (fetch_ahead()), a direct read
 * (fetch_direct()), pins and forgetting. The engine's design is in
 * fetch_impl.h; its life (fetch_new(), limits, fetch_free(), stats) is
 * fetch_open.c.
 */
#include "cache/fetch_impl.h"

#include <string.h>

#include "util/log.h"

/* Caller holds f->lock: waits until fl is done, running its parts in this
 * thread while connections are free (and any queued part when no worker
 * could be started), and its hedge once its read is overdue. handoff:
 * the caller left fl to a worker (fetch_hedge_handoff()); it runs fl itself
 * only if still queued after FETCH_HANDOFF_GRACE_NS. Returns 0, or -ETIMEDOUT
 * if fl is not done by deadline_ns (a read this thread runs ends by the
 * backend's deadline). */
static int wait_done(struct fetch *f, struct flight *fl, uint64_t deadline_ns,
		     bool handoff)
{
	uint64_t grace = handoff ? clock_now_ns() + FETCH_HANDOFF_GRACE_NS : 0;
	uint64_t retry = 0; /* no hedge before: none could start */

	while (!fl->done) {
		uint64_t now = clock_now_ns(), due = fetch_hedge_due(f, fl);
		uint64_t until = deadline_ns;

		if (fl->queued && fetch_slot_free(f) && now >= grace) {
			fetch_part_run(f, fl, false);
		} else if (f->n_workers == 0 && fetch_runnable(f)) {
			fetch_part_run(f, fetch_queue_next(f), false);
		} else if (due != 0 && now >= due && now >= retry) {
			if (!fetch_hedge_request(f, fl))
				retry = now + FETCH_HEDGE_RETRY_NS;
		} else {
			/* Every wait stays bounded by deadline_ns; the hedge
			 * and the hand-off only wake the waiter sooner. */
			if (due != 0 && (due > retry ? due : retry) < until)
				until = due > retry ? due : retry;
			if (fl->queued && grace > now && grace < until)
				until = grace;
			if (fetch_wait_until(f->n_workers > 0 ? &fl->cv
							      : &f->done,
					     &f->lock, until) == ETIMEDOUT &&
			    !fl->done && clock_now_ns() >= deadline_ns)
				return -ETIMEDOUT;
		}
	}
	return 0;
}

/* Logs a reader's wait that ran out; returns -EIO. */
static int wait_failed(const struct fetch_request *r, const char *what,
		       uint64_t wait_ns)
{
	char kb[LOG_KEY_MAX];
	log_msg(LOG_ERR,
		"fetch: %s: gave up waiting for %s after %llu ms "
		"(chunk at offset %llu); failing the read",
		log_key(kb, r->key, r->key_len), what,
		(unsigned long long)(wait_ns / 1000000u),
		(unsigned long long)r->offset);
	return -EIO;
}

/* A read of [offset, offset + len) of key straight into dst, outside the
 * chunk machinery, taking a connection slot by deadline_ns at most;
 * for_memory: instead of a chunk there was no memory for (counted in
 * direct_reads); claim as fetch_backend_read()'s. Called without f->lock.
 * Returns len or a negative errno (logged). */
static ssize_t direct_read(struct fetch *f, const char *key, size_t key_len,
			   const char *etag, size_t etag_len, uint64_t offset,
			   size_t len, void *dst, uint64_t deadline_ns,
			   bool for_memory, struct backend_claim *claim)
{
	char kb[LOG_KEY_MAX];
	size_t nread = 0;
	uint64_t wait_ns;
	int rc;

	pthread_mutex_lock(&f->lock);
	wait_ns = f->wait_ns;
	rc = fetch_slot_take(f, deadline_ns);
	if (rc == 0 && for_memory)
		f->direct_reads++;
	pthread_mutex_unlock(&f->lock);
	if (rc < 0) {
		log_msg(LOG_ERR,
			"fetch: %s: gave up waiting for a connection after "
			"%llu ms (read at offset %llu); failing the read",
			log_key(kb, key, key_len),
			(unsigned long long)(wait_ns / 1000000u),
			(unsigned long long)offset);
		return -EIO;
	}
	rc = fetch_backend_read(f, key, key_len, etag, etag_len, offset, len,
				dst, &nread, claim);
	pthread_mutex_lock(&f->lock);
	fetch_slot_put(f);
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		return rc;
	if (nread != len) {
		log_msg(LOG_ERR,
			"fetch: %s: the backend returned %zu of %zu bytes "
			"at offset %llu; failing the read",
			log_key(kb, key, key_len), nread, len,
			(unsigned long long)offset);
		return -EIO;
	}
	return (ssize_t)len;
}

/* ---- requests -------------------------------------------------------------- */

/* What get() does with a chunk: fetch it unless in the table, join it if
 * in the table, or copy it only if fetched already. */
enum get_mode { GET_FETCH, GET_JOIN, GET_DONE };

/* fetch_obtain()'s engine part; -ENOENT when mode does not
 * fetch and the chunk is not there (for GET_DONE: not there whole). */
static ssize_t get(struct fetch *f, const struct fetch_request *r,
		   uint64_t epoch, uint64_t off, size_t len, void *dst,
		   enum get_mode mode, bool *ready, struct fetch_pin *pin)
{
	struct flight *fl, *dead;
	/* A reader with a buffer can be served without a chunk's memory. */
	bool direct_ok = mode == GET_FETCH && dst != NULL && len > 0;
	bool handoff = false, stalled = false;
	uint64_t start, deadline, direct_at, wait_ns, need;
	ssize_t ret;

	if (ready != NULL)
		*ready = false;
	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	fetch_workers_ensure(f);
	start = clock_now_ns();
	f->active_ns = start;
	wait_ns = f->wait_ns;
	deadline = start + wait_ns;
	direct_at = start + FETCH_DIRECT_AFTER_NS;
	for (;;) {
		fl = fetch_table_find(f, r);
		if (fl != NULL && mode == GET_DONE &&
		    (!fl->done || fl->rc != 0 || fl->valid != fl->len))
			fl = NULL;
		if (fl != NULL) {
			fl->refs++;
			if (fl->done && ready != NULL)
				*ready = true;
			if (!fl->done) {
				f->waits++;
				stalled = r->offset == 0;
				f->stalls += stalled;
			}
			if (fl->queued && fl->prio == FETCH_PRIO_PREFETCH) {
				fetch_queue_unlink(f, fl);
				fetch_queue_push(f, fl, FETCH_PRIO_READER);
				f->promoted++;
				pthread_cond_signal(&f->work);
			}
			break;
		}
		if (mode != GET_FETCH) {
			pthread_mutex_unlock(&f->lock);
			return -ENOENT;
		}
		if (fetch_epoch_moved(f, r->hash, epoch)) {
			pthread_mutex_unlock(&f->lock);
			return -EAGAIN;
		}
		/* Memory for the whole chunk, or (a fill, which has no
		 * buffer of its own) no other chunk to wait for. */
		need = fetch_buf_need(f, r->len);
		if (f->in_use + need <= f->budget ||
		    (!direct_ok && f->chunk_bytes == 0)) {
			handoff = fetch_hedge_handoff(f, r->len);
			fl = fetch_flight_create(
				f, r, FETCH_PRIO_READER,
				fetch_slot_free(f) && !handoff ? 1 : 0);
			if (fl == NULL) {
				pthread_mutex_unlock(&f->lock);
				return -ENOMEM;
			}
			fl->refs = 2; /* the table's and ours */
			stalled = r->offset == 0;
			f->stalls += stalled;
			break;
		}
		/* Reply buffers alone leave no room: nothing this thread
		 * could free or wait for would make it. */
		if (direct_ok && fetch_replies_bytes(f) + need > f->budget)
			break;
		if (fetch_reclaim_one(f, true))
			continue;
		if (fetch_wait_until(&f->memory, &f->lock,
				     direct_ok ? direct_at : deadline) ==
			    ETIMEDOUT &&
		    f->in_use + fetch_buf_need(f, r->len) > f->budget) {
			if (direct_ok)
				break;
			pthread_mutex_unlock(&f->lock);
			return wait_failed(r, "memory", wait_ns);
		}
	}
	if (fl == NULL) {
		stalled = r->offset == 0;
		f->stalls += stalled;
		pthread_mutex_unlock(&f->lock);
		ret = direct_read(f, r->key, r->key_len, r->etag, r->etag_len,
				  r->offset + off, len, dst, deadline, true,
				  NULL);
		if (stalled)
			__atomic_fetch_add(&f->stall_ns, clock_now_ns() - start,
					   __ATOMIC_RELAXED);
		return ret;
	}
	if (wait_done(f, fl, deadline, handoff) < 0) {
		dead = fetch_flight_unref(f, fl);
		pthread_mutex_unlock(&f->lock);
		fetch_flight_free(dead);
		return wait_failed(r, "the chunk", wait_ns);
	}
	if (stalled)
		__atomic_fetch_add(&f->stall_ns, clock_now_ns() - start,
				   __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);

	/* Done without an error means every byte is there (fetch_part_run()). */
	if (fl->rc < 0) {
		ret = fl->rc;
	} else {
		ret = 0;
		if (off < fl->len && len > 0) {
			ret = (ssize_t)(fl->len - off < len ? fl->len - off
							    : len);
			if (pin != NULL) {
				/* Keep our reference: fetch_unpin() does
				 * the rest of this function. */
				pin->fl = fl;
				pin->data = fl->buf + off;
				pin->len = (size_t)ret;
				return ret;
			}
			memcpy(dst, fl->buf + off, (size_t)ret);
		}
	}
	pthread_mutex_lock(&f->lock);
	/* A caller that wants no bytes (a fill) leaves nothing to serve. */
	fetch_served_unref(f, fl,
			   len > 0 ? (uint64_t)(ret > 0 ? ret : 0) : fl->len);
	return ret;
}

/* Queues chunk r at prefetch priority unless it is in the table; see
 * fetch_ahead(). */
static int prefetch(struct fetch *f, const struct fetch_request *r,
		    uint64_t epoch)
{
	struct flight *fl;
	int rc = 0;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	fetch_workers_ensure(f);
	f->active_ns = clock_now_ns();
	for (;;) {
		if (f->n_workers == 0) {
			rc = -ENOBUFS; /* nobody would run it */
		} else if (fetch_table_find(f, r) != NULL) {
			rc = 1;
		} else if (fetch_epoch_moved(f, r->hash, epoch)) {
			rc = -EAGAIN;
		} else if (!prefetch_may_take(f->in_use,
					      fetch_buf_need(f, r->len),
					      f->budget)) {
			if (fetch_reclaim_one(f, false))
				continue;
			f->refused++;
			rc = -ENOBUFS;
		} else {
			fl = fetch_flight_create(f, r, FETCH_PRIO_PREFETCH, 0);
			if (fl == NULL) {
				rc = -ENOMEM;
			} else {
				fl->refs = 1; /* the table's */
				f->queued++;
				f->queued_bytes += r->len;
			}
		}
		break;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

bool fetch_in_flight(struct fetch *f, const struct fetch_request *r)
{
	bool found;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	found = fetch_table_find(f, r) != NULL;
	pthread_mutex_unlock(&f->lock);
	return found;
}

void fetch_forget(struct fetch *f, const uint8_t *hash, const uint8_t *id,
		  size_t id_len)
{
	struct flight *fl;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	for (fl = f->table[fetch_bucket_of(hash)]; fl != NULL; fl = fl->tnext)
		if ((fl->retained || fl->storing) &&
		    memcmp(fl->hash, hash, FETCH_HASH_LEN) == 0 &&
		    fl->id_len == id_len && memcmp(fl->id, id, id_len) == 0)
			break;
	/* One being stored (done_fn may be what told the caller) leaves the
	 * table instead of being retained when done_fn returns (fetch_flight_store()). */
	if (fl != NULL && fl->storing)
		fl->forgotten = true;
	else if (fl != NULL)
		fetch_table_drop_free(f, fl);
	pthread_mutex_unlock(&f->lock);
}

ssize_t fetch_obtain(struct fetch *f, const struct fetch_request *r,
		     enum fetch_how how, uint64_t off, size_t len, void *dst,
		     struct fetch_pin *pin, fetch_look_fn look, void *look_arg,
		     enum fetch_from *from)
{
	enum fetch_from dummy;
	bool ready = false;
	ssize_t got;
	int tries;

	if (from == NULL)
		from = &dummy;
	if (pin != NULL)
		*pin = (struct fetch_pin){ NULL, NULL, 0, NULL, 0 };
	/* The engine first: a chunk in memory needs no look. A fill joins
	 * what is in flight, which a look would find missing. */
	got = get(f, r, FETCH_EPOCH_NONE, off, len, dst,
		  how == FETCH_READY ? GET_DONE : GET_JOIN, &ready,
		  pin != NULL && len > 0 ? pin : NULL);
	if (got != -ENOENT) {
		*from = ready ? FETCH_FROM_MEMORY : FETCH_FROM_JOINED;
		return got;
	}
	if (pin != NULL && dst == NULL && len > 0) {
		/* Not in the engine: the bytes need a place of their own. */
		dst = fetch_buffer_alloc(f, len);
		if (dst == NULL)
			return -ENOMEM;
		pin->own = dst;
		pin->own_len = len;
		pin->data = dst;
		pin->len = len;
	}
	if (how == FETCH_DIRECT) {
		*from = FETCH_FROM_BACKEND;
		return fetch_direct(f, r->key, r->key_len, r->etag, r->etag_len,
				    r->offset + off, len, dst, NULL);
	}
	for (tries = 0;; tries++) {
		uint64_t epoch = tries < FETCH_RELOOKS
					 ? fetch_epoch_of(f, r->hash)
					 : FETCH_EPOCH_NONE;

		if (look != NULL && look(look_arg, dst) == 0) {
			*from = FETCH_FROM_LOOK;
			return (ssize_t)len;
		}
		if (how == FETCH_READY)
			return -ENOENT;
		got = get(f, r, epoch, off, len, dst, GET_FETCH, &ready, NULL);
		if (got != -EAGAIN) {
			*from = FETCH_FROM_BACKEND;
			return got;
		}
	}
}

int fetch_ahead(struct fetch *f, const struct fetch_request *r,
		fetch_look_fn look, void *look_arg)
{
	int tries, rc;

	for (tries = 0;; tries++) {
		uint64_t epoch = tries < FETCH_RELOOKS
					 ? fetch_epoch_of(f, r->hash)
					 : FETCH_EPOCH_NONE;

		if (fetch_in_flight(f, r) ||
		    (look != NULL && look(look_arg, NULL) == 0))
			return 1;
		rc = prefetch(f, r, epoch);
		if (rc != -EAGAIN)
			return rc;
	}
}

ssize_t fetch_direct(struct fetch *f, const char *key, size_t key_len,
		     const char *etag, size_t etag_len, uint64_t offset,
		     size_t len, void *buf, struct backend_claim *claim)
{
	uint64_t deadline;

	fetch_fork_check(f);
	pthread_mutex_lock(&f->lock);
	f->active_ns = clock_now_ns();
	deadline = f->active_ns + f->wait_ns;
	pthread_mutex_unlock(&f->lock);
	return direct_read(f, key, key_len, etag, etag_len, offset, len, buf,
			   deadline, false, claim);
}
