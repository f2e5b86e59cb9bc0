/*
 * fetch_fork: the fetch engine in a process forked from its owner: every
 * entry point of the engine calls fetch_fork_check() first, so a child
 * starts with an engine of its own (no lock, flight or worker of the
 * parent's), and the files of the engine call down into this one.
 */
#include "cache/fetch_impl.h"

#include <stdlib.h>
#include <string.h>

#include "cache/fetch_fail.h"
#include "util/thread.h"

/* In a process forked from the owner (`shardfs mount` daemonizing after
 * opening the cache), the owner's threads did not come along, and its
 * locks and flights are not ours: start afresh. Runs before the child
 * has threads of its own that use the engine (see cache.h), so unlocked. */
void fetch_fork_check(struct fetch *f)
{
	pid_t pid = thread_pid();
	uint64_t pooled = 0;
	int k;

	if (__atomic_load_n(&f->owner_pid, __ATOMIC_ACQUIRE) == pid)
		return;
	pthread_mutex_init(&f->lock, NULL);
	fetch_fail_forked(f->fails);
	fetch_cond_init(&f->work);
	fetch_cond_init(&f->done);
	fetch_cond_init(&f->slot);
	fetch_cond_init(&f->memory);
	fetch_cond_init(&f->stored);
	memset(f->q, 0, sizeof(f->q));
	memset(f->table, 0, sizeof(f->table)); /* the parent's flights */
	f->ret_head = f->ret_tail = NULL;
	f->store_head = f->store_tail = NULL;
	f->n_storing = 0;
	f->store_next = 0;
	f->hedge_head = f->hedge_tail = NULL;
	f->inflight = f->slot_waiters = 0;
	f->idle_workers = 0;
	f->pf_inflight = 0;
	f->chunk_bytes = 0;
	for (k = 0; k < FETCH_POOL_CLASSES; k++)
		pooled += (uint64_t)f->n_pool[k] << (FETCH_POOL_MIN_SHIFT + k);
	f->in_use = f->high_water = pooled;
	free(f->workers);
	f->workers = NULL;
	f->n_workers = f->n_started = 0;
	f->workers_started = false;
	f->trimmer = false;
	f->stop = false;
	__atomic_store_n(&f->owner_pid, pid, __ATOMIC_RELEASE);
}
