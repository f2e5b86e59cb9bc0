/*
 * fetch_worker: running flights' parts (the design is in fetch_impl.h's
 * file comment): connection slots, one backend read per part
 * (or one per run, run_read()), a flight's finish when its last part
 * returns (done_fn, then retained), and the worker threads, which take
 * hedges, stores left to them and queued parts. A reader runs its own
 * chunk's parts here too (fetch_request.c's get()).
 */
#include "cache/fetch_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "backends/backend.h"
#include "cache/fetch_fail.h"
#include "util/log.h"
#include "util/thread.h"

/* One backend read of [offset, offset + len) of key into buf, counted in
 * the engine's stats; returns 0 and sets *nread, or a negative errno
 * (-ENXIO without a backend). With claim (may be NULL), also what the
 * reply vouched for about the whole object (backend.h, read_claim()). A
 * read of a range that failed just now fails at once (fetch_fail.h). It
 * takes no connection: its caller holds one. */
int fetch_backend_read(struct fetch *f, const char *key, size_t key_len,
		       const char *etag, size_t etag_len, uint64_t offset,
		       size_t len, void *buf, size_t *nread,
		       struct backend_claim *claim)
{
	const struct backend_read r = { .key = key,
					.key_len = key_len,
					.etag = etag,
					.etag_len = etag_len,
					.offset = offset,
					.len = len,
					.buf = buf };
	int rc;

	if (claim != NULL)
		memset(claim, 0, sizeof(*claim));
	if (f->be == NULL)
		return -ENXIO;
	/* A range that failed just now fails at once (fetch_fail.h). */
	rc = fetch_fail_check(f->fails, key, key_len, etag, etag_len, offset,
			      len);
	if (rc < 0)
		return rc;
	__atomic_add_fetch(&f->backend_reads, 1, __ATOMIC_RELAXED);
	if (claim != NULL && f->be->ops->read_claim != NULL)
		rc = f->be->ops->read_claim(f->be, &r, nread, claim);
	else
		rc = f->be->ops->read(f->be, &r, nread);
	if (rc < 0) {
		__atomic_add_fetch(&f->backend_errors, 1, __ATOMIC_RELAXED);
		fetch_fail_note(f->fails, key, key_len, etag, etag_len, offset,
				len, rc);
		return rc;
	}
	__atomic_add_fetch(&f->backend_bytes, *nread, __ATOMIC_RELAXED);
	return 0;
}

/* Caller holds f->lock: may a queued prefetch part start now, as far as
 * the bytes in flight go (prefetch_inflight())? */
static bool prefetch_room(const struct fetch *f)
{
	return f->pf_inflight < f->pf_inflight_max;
}

/* Caller holds f->lock. */
bool fetch_runnable(const struct fetch *f)
{
	return (f->q[FETCH_PRIO_READER].head != NULL ||
		(f->q[FETCH_PRIO_PREFETCH].head != NULL && prefetch_room(f))) &&
	       fetch_slot_free(f);
}

/* Caller holds f->lock: a read of len bytes (a prefetch's if pf) that took
 * a slot in fetch_part_run() or run_read() ended. Gives the slot and the
 * prefetch bytes back and wakes who may use them; a worker looks for more
 * work itself, so only another caller wakes one. */
static void part_slot_put(struct fetch *f, uint64_t len, bool pf, bool worker)
{
	f->inflight--;
	if (pf)
		f->pf_inflight -= len;
	if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot);
	else if (!worker && fetch_runnable(f))
		pthread_cond_signal(&f->work);
	if (f->n_workers == 0)
		pthread_cond_broadcast(&f->done);
}

/* Caller holds f->lock. */
struct flight *fetch_queue_next(struct fetch *f)
{
	return f->q[FETCH_PRIO_READER].head != NULL
		       ? f->q[FETCH_PRIO_READER].head
		       : f->q[FETCH_PRIO_PREFETCH].head;
}

/* Caller holds f->lock: one more reply of fl (a part, the first read or
 * its hedge) that brought every byte asked for vouched for claim. */
void fetch_claim_add(struct flight *fl, const struct backend_claim *claim)
{
	if (fl->claims++ == 0) {
		fl->claim = *claim;
	} else if (!backend_claim_same(&fl->claim, claim)) {
		fl->claim_conflict = true;
	} else {
		/* Checked whole only if every reply was: a part is not. */
		fl->claim.checked = fl->claim.checked && claim->checked;
	}
}

/* Hands done flight fl to done_fn, then leaves it retained, or drops it
 * if readers have copied it all meanwhile. Caller holds f->lock (dropped
 * around done_fn) and a reference. */
void fetch_flight_store(struct fetch *f, struct flight *fl)
{
	struct fetch_pin keep = { .fl = fl, .data = fl->buf };
	struct fetch_vouch v = { .object_size = fl->object_size,
				 .claim = fl->claim,
				 .conflict = fl->claim_conflict };

	if (v.conflict)
		memset(&v.claim, 0, sizeof(v.claim));
	fl->refs++; /* keep's */
	pthread_mutex_unlock(&f->lock);
	f->done_fn(f->ctx, fl->hash, fl->id, fl->id_len, fl->buf, fl->len, &v,
		   &keep);
	fetch_unpin(f, &keep); /* unless done_fn kept it */
	pthread_mutex_lock(&f->lock);
	fl->storing = false;
	f->n_storing--;
	pthread_cond_broadcast(&f->stored);
	if (fl->served >= fl->len || fl->forgotten)
		fetch_table_drop(f,
				 fl); /* not the last reference: the caller's */
	else
		fetch_flight_retain(f, fl);
}

/* Drops a reference to fl; caller holds f->lock, dropped while freeing. */
void fetch_flight_unref_free(struct fetch *f, struct flight *fl)
{
	fetch_flight_free_unlocked(f, fetch_flight_unref(f, fl));
}

/* Runs the read of run head: one backend read of its range into the run's
 * buffer, copied to each flight, which then finishes as a part would
 * (fetch_part_finish(): stored, retained, its readers woken). Caller
 * holds f->lock (dropped around the read and the stores) and has checked
 * fetch_slot_free(). */
static void run_read(struct fetch *f, struct flight *head, bool worker)
{
	struct flight *fls[FETCH_RUN_MAX], *m;
	uint64_t start = head->offset, len = head->run_len, t0, t1;
	uint8_t *buf = head->run_buf;
	struct backend_claim claim;
	size_t nread = 0;
	unsigned n = 0, i;
	bool pf = true;
	void *unmap;
	int rc;

	/* Every flight of it starts now: none is queued or run again. */
	for (m = head; m != NULL; m = m->run_next) {
		fls[n++] = m;
		m->next_part = m->n_parts;
		if (m->queued)
			fetch_queue_unlink(f, m);
		pf = pf && m->prio == FETCH_PRIO_PREFETCH;
	}
	head->run_buf = NULL; /* the read's now */
	f->inflight++;
	if (pf)
		f->pf_inflight += len;
	t0 = clock_now_ns();
	pthread_mutex_unlock(&f->lock);

	rc = fetch_backend_read(
		f, head->key, head->key_len, head->has_etag ? head->etag : NULL,
		head->etag_len, start, (size_t)len, buf, &nread, &claim);
	/* No one reads a flight's buffer before it is done. */
	if (rc == 0 && nread == len)
		for (i = 0; i < n; i++)
			memcpy(fls[i]->buf, buf + (fls[i]->offset - start),
			       (size_t)fls[i]->len);

	pthread_mutex_lock(&f->lock);
	t1 = clock_now_ns();
	if (rc == 0)
		fetch_pace_record(f, t0, t1, nread);
	if (rc == 0 && nread == len) {
		fetch_lat_record(f, len, t1 - t0);
	} else if (rc == 0) {
		char kb[LOG_KEY_MAX];

		/* Once for the run, not once per chunk. */
		log_msg(LOG_ERR,
			"fetch: %s: the backend returned %zu of %llu bytes "
			"at offset %llu; failing the read",
			log_key(kb, head->key, head->key_len), nread,
			(unsigned long long)len, (unsigned long long)start);
		rc = -EIO;
	}
	part_slot_put(f, len, pf, worker);
	for (i = 0; i < n; i++)
		fls[i]->run_head = fls[i]->run_next = NULL;
	/* Each drops the run's reference (the part's). */
	for (i = 0; i < n; i++) {
		if (rc == 0)
			fetch_claim_add(fls[i], &claim);
		fetch_part_finish(f, fls[i], 0, rc,
				  rc == 0 ? (size_t)fls[i]->len : 0, worker);
	}
	f->chunk_bytes -= fetch_buf_size(len);
	unmap = fetch_buf_give(f, buf, len);
	if (unmap != NULL) {
		pthread_mutex_unlock(&f->lock);
		munmap(unmap, (size_t)fetch_buf_size(len));
		pthread_mutex_lock(&f->lock);
	}
}

/* Runs the next part of queued flight fl (a flight of a run: the run's
 * read). Caller holds f->lock and has checked fetch_slot_free(); the lock
 * is dropped around the read and done_fn. worker: the caller is a worker
 * thread (it looks for more work itself). */
void fetch_part_run(struct fetch *f, struct flight *fl, bool worker)
{
	uint64_t start, plen, t0;
	size_t nread = 0;
	unsigned part;
	bool pf = fl->prio == FETCH_PRIO_PREFETCH;
	void *unmap = NULL;
	struct backend_claim claim;
	uint8_t *buf;
	int rc;

	if (fl->run_head != NULL) {
		run_read(f, fl->run_head, worker);
		return;
	}
	part = fl->next_part++;
	if (fl->next_part == fl->n_parts)
		fetch_queue_unlink(f, fl);
	f->inflight++;
	fl->refs++; /* ours, while we use it unlocked */
	start = (uint64_t)part * fl->part_size;
	plen = fl->len - start < fl->part_size ? fl->len - start
					       : fl->part_size;
	if (pf)
		f->pf_inflight += plen;
	/* A part that failed fails the chunk: the rest need not wait out
	 * their own deadlines one after another. */
	rc = fl->rc;
	/* A hedge that wins puts its own buffer in fl->buf: this read keeps
	 * writing into the one it started with. */
	buf = fl->buf;
	t0 = clock_now_ns();
	if (part == 0) {
		fl->start_ns = t0;
		fl->first_running = true;
	}
	pthread_mutex_unlock(&f->lock);

	if (rc == 0)
		rc = fetch_backend_read(
			f, fl->key, fl->key_len, fl->has_etag ? fl->etag : NULL,
			fl->etag_len, fl->offset + start, (size_t)plen,
			buf + start, &nread, &claim);

	pthread_mutex_lock(&f->lock);
	if (rc == 0 && nread == plen) {
		fetch_lat_record(f, plen, clock_now_ns() - t0);
		fetch_claim_add(fl, &claim);
		fetch_hedge_earn(f, plen);
	}
	if (rc == 0)
		fetch_pace_record(f, t0, clock_now_ns(), nread);
	part_slot_put(f, plen, pf, worker);
	if (!fl->hedged) {
		fl->first_running = false;
		fetch_part_finish(f, fl, part, rc, nread, worker);
		return;
	}
	if (fetch_hedge_arrive(f, fl, buf, rc == 0 && nread == plen, false,
			       &unmap))
		fetch_part_finish(f, fl, part, rc, nread, worker);
	else
		fetch_flight_unref_free(f, fl);
	if (unmap != NULL) {
		pthread_mutex_unlock(&f->lock);
		munmap(unmap, (size_t)fetch_buf_size(plen));
		pthread_mutex_lock(&f->lock);
	}
}

/* Records what part `part` of fl returned (rc, nread) and, when it was
 * the last, finishes fl: wakes its readers, then stores and retains it,
 * or drops it on an error. Drops the reference the read held. Caller
 * holds f->lock (dropped around done_fn and a free). */
void fetch_part_finish(struct fetch *f, struct flight *fl, unsigned part,
		       int rc, size_t nread, bool worker)
{
	char kb[LOG_KEY_MAX];
	struct flight *dead;
	unsigned i;

	fl->nread[part] = rc < 0 ? 0 : nread;
	if (rc < 0 && fl->rc == 0)
		fl->rc = rc;
	if (++fl->parts_done < fl->n_parts)
		goto out;
	for (i = 0; i < fl->n_parts; i++) {
		uint64_t want = fl->len - (uint64_t)i * fl->part_size;

		if (want > fl->part_size)
			want = fl->part_size;
		fl->valid += fl->nread[i];
		if (fl->nread[i] < want)
			break;
	}
	if (fl->rc == 0 && fl->valid != fl->len) {
		/* A read returns exactly the bytes asked for, or an error:
		 * a short chunk is never served, stored or retained. */
		log_msg(LOG_ERR,
			"fetch: %s: the backend returned %llu of %llu bytes "
			"at offset %llu; failing the read",
			log_key(kb, fl->key, fl->key_len),
			(unsigned long long)fl->valid,
			(unsigned long long)fl->len,
			(unsigned long long)fl->offset);
		fl->rc = -EIO;
	}
	/* Every part finished, so nothing writes the buffer any more:
	 * readers may copy while it is stored. */
	fl->done = true;
	pthread_cond_broadcast(&fl->cv);
	if (fl->rc != 0 || fl->valid != fl->len) {
		fetch_table_drop(f, fl); /* not the last reference: ours */
	} else if (f->done_fn == NULL) {
		fetch_flight_retain(f, fl);
	} else if (!worker && fl->len > FETCH_STORE_INLINE_MAX &&
		   f->n_workers > 0) {
		/* Off the reader's path: a worker writes the blob. */
		fl->storing = true;
		fl->store_ticket = f->store_next++;
		f->n_storing++;
		fl->refs++; /* the store queue's */
		fl->snext = NULL;
		if (f->store_tail != NULL)
			f->store_tail->snext = fl;
		else
			f->store_head = fl;
		f->store_tail = fl;
		pthread_cond_signal(&f->work);
	} else {
		fl->storing = true;
		fl->store_ticket = f->store_next++;
		f->n_storing++;
		fetch_flight_store(f, fl);
	}
out:
	dead = fetch_flight_unref(f, fl);
	if (dead != NULL) {
		pthread_mutex_unlock(&f->lock);
		fetch_flight_free(dead);
		pthread_mutex_lock(&f->lock);
	}
}

/* Runs the hedge at the head of the hedge queue, in a worker; its slot
 * and buffer were taken by fetch_hedge_request(). Caller holds f->lock,
 * dropped around the read. A stopping engine does not read: the hedge
 * just gives back what it holds. */
static void hedge_run(struct fetch *f)
{
	char kb[LOG_KEY_MAX];
	struct flight *fl = f->hedge_head;
	uint64_t len = fl->len, t0, late_ms;
	uint8_t *buf = fl->hedge_buf;
	size_t nread = 0;
	void *unmap = NULL;
	struct backend_claim claim;
	/* A first read that finished since the hedge was queued makes it
	 * moot: no request, fetch_hedge_arrive() gives the buffer back. */
	bool ok, skip = f->stop || fl->done;
	int rc = -ECANCELED;

	f->hedge_head = fl->hnext;
	if (f->hedge_head == NULL)
		f->hedge_tail = NULL;
	fl->hedge_buf = NULL;
	t0 = clock_now_ns();
	late_ms = (t0 - fl->start_ns) / 1000000u;
	pthread_mutex_unlock(&f->lock);

	if (!skip) {
		log_msg(LOG_DEBUG,
			"fetch: %s: read running for %llu ms; hedging it",
			log_key(kb, fl->key, fl->key_len),
			(unsigned long long)late_ms);
		rc = fetch_backend_read(f, fl->key, fl->key_len,
					fl->has_etag ? fl->etag : NULL,
					fl->etag_len, fl->offset, (size_t)len,
					buf, &nread, &claim);
	}

	pthread_mutex_lock(&f->lock);
	fetch_slot_put(f);
	ok = rc == 0 && nread == len;
	if (ok) {
		fetch_lat_record(f, len, clock_now_ns() - t0);
		fetch_claim_add(fl, &claim);
	}
	if (fetch_hedge_arrive(f, fl, buf, ok, true, &unmap))
		fetch_part_finish(f, fl, 0, rc, nread, true);
	else
		fetch_flight_unref_free(f, fl);
	if (unmap != NULL) {
		pthread_mutex_unlock(&f->lock);
		munmap(unmap, (size_t)fetch_buf_size(len));
		pthread_mutex_lock(&f->lock);
	}
}

static void *worker_main(void *arg)
{
	struct fetch *f = arg;
	bool trimmer;

	pthread_setname_np(pthread_self(), "shardfs-fetch");
	pthread_mutex_lock(&f->lock);
	f->n_started++;
	/* One worker also gives back what the engine holds while idle. */
	trimmer = !f->trimmer;
	f->trimmer = true;
	pthread_cond_broadcast(&f->done);
	for (;;) {
		while (!f->stop && f->store_head == NULL &&
		       f->hedge_head == NULL && !fetch_runnable(f)) {
			uint64_t now = clock_now_ns();

			/* Timed, so the trimmer gives back what it holds even
			 * when no one signals it. */
			if (trimmer && fetch_holds_idle(f) &&
			    now - f->trim_ns >= FETCH_WORKER_WAIT_NS) {
				f->trim_ns = now;
				fetch_trim_idle(f);
				continue;
			}
			f->idle_workers++;
			fetch_wait_until(&f->work, &f->lock,
					 now + FETCH_WORKER_WAIT_NS);
			f->idle_workers--;
		}
		if (f->hedge_head != NULL) { /* even when stopping */
			hedge_run(f);
			continue;
		}
		if (f->store_head != NULL) { /* even when stopping */
			struct flight *fl = f->store_head, *dead;

			f->store_head = fl->snext;
			if (f->store_head == NULL)
				f->store_tail = NULL;
			fetch_flight_store(f, fl);
			dead = fetch_flight_unref(f, fl);
			if (dead != NULL) {
				pthread_mutex_unlock(&f->lock);
				fetch_flight_free(dead);
				pthread_mutex_lock(&f->lock);
			}
			continue;
		}
		if (f->stop)
			break;
		fetch_part_run(f, fetch_queue_next(f), true);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* Starts the workers on first use. Caller holds f->lock. */
void fetch_workers_ensure(struct fetch *f)
{
	unsigned n, i;

	if (f->workers_started)
		return;
	f->workers_started = true;
	n = f->connections < FETCH_WORKERS_MAX ? f->connections
					       : FETCH_WORKERS_MAX;
	f->workers = calloc(n, sizeof(*f->workers));
	if (f->workers == NULL)
		return;
	for (i = 0; i < n; i++) {
		if (thread_start(&f->workers[f->n_workers], worker_main, f) !=
		    0)
			break;
		f->n_workers++;
	}
	if (f->n_workers < n)
		log_msg(LOG_WARNING,
			"fetch: started %u of %u worker threads; readers "
			"fetch in their own threads as needed",
			f->n_workers, n);
	/* Until a new thread runs its start routine, the threads library
	 * (or a sanitizer's runtime) may hold locks for it; a fork meanwhile
	 * would leave them held in the child. So return with every worker
	 * running. */
	while (f->n_started < f->n_workers)
		fetch_wait_until(&f->done, &f->lock,
				 clock_now_ns() + FETCH_WORKER_WAIT_NS);
}

/* Caller holds f->lock: takes a connection slot, ahead of queued parts,
 * waiting until deadline_ns at most. Returns 0 or -ETIMEDOUT. */
int fetch_slot_take(struct fetch *f, uint64_t deadline_ns)
{
	int rc = 0;

	f->slot_waiters++;
	while (f->inflight >= f->connections)
		if (fetch_wait_until(&f->slot, &f->lock, deadline_ns) ==
			    ETIMEDOUT &&
		    f->inflight >= f->connections) {
			rc = -ETIMEDOUT;
			break;
		}
	f->slot_waiters--;
	if (rc == 0)
		f->inflight++;
	else if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot); /* pass on a missed wake-up */
	else
		pthread_cond_signal(&f->work); /* parts may start again */
	return rc;
}

/* Caller holds f->lock: gives back a slot taken by fetch_slot_take(). */
void fetch_slot_put(struct fetch *f)
{
	f->inflight--;
	if (f->slot_waiters > 0)
		pthread_cond_signal(&f->slot);
	else
		pthread_cond_signal(&f->work);
	if (f->n_workers == 0)
		pthread_cond_broadcast(&f->done);
}
