/*
 * transform_impl: what transform.c (open, close, slots, identity) and
 * run.c (one run's I/O, the per-object process, the workers) share.
 * Internal to transform/.
 */
#ifndef SHARDFS_TRANSFORM_IMPL_H
#define SHARDFS_TRANSFORM_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "transform/spawn.h"
#include "transform/transform.h"

struct xf_tail {
	char buf[TRANSFORM_TAIL_MAX];
	size_t len;
};

struct xf_worker {
	struct transform_proc p; /* p.pid < 0: not running */
	struct xf_tail tail;
};

/* A worker start asked of the spawner thread. */
struct xf_spawn_req {
	struct xf_spawn_req *next;
	struct transform_proc p;
	int rc;
	char err[200];
	bool done; /* protected by spawn_mu */
};

struct transform {
	char *name;
	enum transform_mode mode;
	bool bwrap;
	unsigned workers;
	unsigned timeout_ms;
	uint64_t output_max;
	struct transform_launch *launch;
	uint8_t identity[SHA256_LEN];
	uint64_t cpu_ns; /* atomic: the reaped processes' CPU time */

	pthread_mutex_t mu;
	pthread_cond_t cv;    /* a slot freed */
	bool *slot_busy;      /* protected by mu */
	struct xf_worker *wk; /* wk[i] used only by slot i's holder */

	pthread_mutex_t spawn_mu;
	pthread_cond_t spawn_cv;	 /* a request, or one done */
	struct xf_spawn_req *spawn_head; /* protected by spawn_mu */
	bool spawn_stop;		 /* protected by spawn_mu */
	bool spawner_started;
	pthread_t spawner;
};

/* Sets f: what, the message (printf), the escaped stderr tail. */
void transform_fail_set(struct transform_failure *f, enum transform_fail what,
			const struct xf_tail *tail, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Runs one object in slot (held by the caller): a process, or slot's
 * worker (started or replaced as needed). transform_run()'s returns. */
int transform_run_slot(struct transform *t, int slot, const void *in,
		       size_t in_len, struct transform_output *out,
		       struct transform_failure *f);

/* The spawner thread's body (arg: t): starts workers asked for. */
void *transform_spawner(void *arg);

/* Kills p's group, reaps it, closes its pipes. */
void transform_kill_reap(struct transform_proc *p);

#endif
