/*
 * fetch_run: runs (fetch_run(), fetch.h): consecutive chunks that one
 * backend read fetches. Each chunk of a run is an ordinary flight in the
 * table, queued with one part and holding one more reference for the
 * run's read; its head holds the read's buffer. Whoever would run a part
 * of any of them runs the one read for all (fetch_worker.c); a queued
 * prefetch run no reader waits for is cancelled whole (fetch_table.c).
 */
#include "cache/fetch_impl.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

/* Queues rs[0..n-1] (consecutive chunks, span bytes together) as one run
 * at prio, or as an ordinary chunk when n is 1. Caller holds f->lock and
 * has checked the budget. Returns 0 or -ENOMEM (nothing queued; the lock
 * may have been dropped). */
static int run_create(struct fetch *f, const struct fetch_request *rs,
		      unsigned n, uint64_t span, int prio)
{
	struct flight *head = NULL, *prev = NULL, *fl;
	uint8_t *buf;
	unsigned i;

	/* A reader's runs wait for it (it joins them next, and runs them
	 * in its thread, as its own chunk: fetch_obtain()), so that it
	 * cannot miss the end of its own run; a worker takes them only if
	 * no connection is free for it. */
	if (n == 1) {
		fl = fetch_flight_create(f, rs, prio,
					 prio == FETCH_PRIO_READER ? 1 : 0);
		if (fl == NULL)
			return -ENOMEM;
		fl->refs = 1; /* the table's */
		return 0;
	}
	buf = fetch_buf_take(f, span);
	if (buf == NULL)
		return -ENOMEM;
	f->chunk_bytes += fetch_buf_size(span);
	for (i = 0; i < n; i++) {
		/* Its one part is the run's read: no worker woken for it. */
		fl = fetch_flight_create(f, &rs[i], prio, 1);
		if (fl == NULL)
			break;
		fl->refs = 2; /* the table's and the run's */
		fl->run_head = head != NULL ? head : fl;
		if (prev != NULL)
			prev->run_next = fl;
		else
			head = fl;
		prev = fl;
	}
	if (head == NULL) {
		void *unmap = fetch_buf_give(f, buf, span);

		f->chunk_bytes -= fetch_buf_size(span);
		if (unmap != NULL) {
			pthread_mutex_unlock(&f->lock);
			munmap(unmap, (size_t)fetch_buf_size(span));
			pthread_mutex_lock(&f->lock);
		}
		return -ENOMEM;
	}
	head->run_buf = buf;
	head->run_len = span;
	if (i < n) {
		fetch_run_drop(f, head);
		return -ENOMEM;
	}
	if (prio != FETCH_PRIO_READER)
		pthread_cond_signal(&f->work);
	return 0;
}

/* What a chunk of fetch_run() is, as far as it knows. */
enum { RUN_LOOK, RUN_MISSING, RUN_THERE };

int fetch_run(struct fetch *f, const struct fetch_request *rs, unsigned n,
	      bool reader, fetch_look_fn look, void *const *look_args,
	      unsigned *queued, uint64_t *bytes)
{
	uint64_t epochs[FETCH_RUN_MAX], span, need;
	uint8_t state[FETCH_RUN_MAX];
	int prio = reader ? FETCH_PRIO_READER : FETCH_PRIO_PREFETCH;
	unsigned i, j, k, tries;
	bool again;
	int rc = 0;

	*queued = 0;
	*bytes = 0;
	if (n > FETCH_RUN_MAX)
		return -EINVAL;
	if (n == 0)
		return 0;
	fetch_fork_check(f);
	memset(state, RUN_LOOK, n);
	/* As fetch_obtain(): a chunk whose group's epoch moved between its
	 * look and the table may have been stored meanwhile: look again. */
	for (tries = 0;; tries++) {
		pthread_mutex_lock(&f->lock);
		for (i = 0; i < n; i++)
			if (state[i] == RUN_LOOK && fetch_table_find(f, &rs[i]))
				state[i] = RUN_THERE;
		pthread_mutex_unlock(&f->lock);
		for (i = 0; i < n; i++) {
			if (state[i] != RUN_LOOK)
				continue;
			epochs[i] = tries < FETCH_RELOOKS
					    ? fetch_epoch_of(f, rs[i].hash)
					    : FETCH_EPOCH_NONE;
			state[i] = look != NULL && look(look_args[i], NULL) == 0
					   ? RUN_THERE
					   : RUN_MISSING;
		}
		pthread_mutex_lock(&f->lock);
		again = false;
		for (i = 0; i < n; i++) {
			if (state[i] != RUN_MISSING)
				continue;
			if (fetch_table_find(f, &rs[i]) != NULL) {
				state[i] = RUN_THERE;
			} else if (fetch_epoch_moved(f, rs[i].hash,
						     epochs[i])) {
				state[i] = RUN_LOOK;
				again = true;
			}
		}
		if (!again)
			break;
		pthread_mutex_unlock(&f->lock);
	}
	fetch_workers_ensure(f);
	f->active_ns = clock_now_ns();
	if (!reader && f->n_workers == 0) {
		pthread_mutex_unlock(&f->lock);
		return -ENOBUFS; /* nobody would run it */
	}
	for (i = 0; i < n;) {
		if (state[i] != RUN_MISSING) {
			i++;
			continue;
		}
		span = 0;
		need = 0;
		for (j = i; j < n && state[j] == RUN_MISSING &&
			    span + rs[j].len <= FETCH_PART_SIZE;
		     j++) {
			span += rs[j].len;
			need += fetch_buf_size(rs[j].len);
		}
		if (j - i > 1)
			need += fetch_buf_size(span);
		if (reader ? f->in_use + need > f->budget
			   : !prefetch_may_take(f->in_use, need, f->budget)) {
			if (fetch_reclaim_one(f, reader)) {
				/* The lock was dropped: the table again. */
				for (k = i; k < n; k++)
					if (state[k] == RUN_MISSING &&
					    fetch_table_find(f, &rs[k]) != NULL)
						state[k] = RUN_THERE;
				continue;
			}
			if (!reader)
				f->refused++;
			rc = -ENOBUFS;
			break;
		}
		rc = run_create(f, rs + i, j - i, span, prio);
		if (rc < 0)
			break;
		if (!reader) {
			f->queued += j - i;
			f->queued_bytes += span;
		}
		*queued += j - i;
		*bytes += span;
		i = j;
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}
