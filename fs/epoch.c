/*
 * fs/epoch: the epoch-E/ and epoch-E/skip-K/ trees (docs/DESIGN.md §3,
 * "Epochs and resuming"; the plans are spec v1's, §5).
 *
 * An epoch tree is a generation of its own (fs_impl.h) that is never
 * current: its plan is the base generation's spec with another epoch (and
 * skip), over the base's manifest, record index and cache, and its view
 * (view_build_under) has a hidden root whose two children are what the
 * mount shows: the "epoch" directory (rank-R/ ..., answered for
 * MOUNT/epoch-E) and ".shardfs" (answered for MOUNT/.shardfs/epoch-E).
 * Its inode numbers name it, so the kernel's lookups, open files and
 * FORGETs count on it as on any generation, and the prefetcher's orders
 * (gen id << 32 | rank) follow whichever epoch a reader walks.
 *
 * Each base keeps at most FS_EPOCH_VIEWS trees (least recently looked up
 * goes first). The slot holds one reference; an evicted tree lives on only
 * while the kernel uses it, and the worker thread tells the kernel to
 * drop its entries so that it lets go (a request handler must not: the
 * kernel may hold the directory lock the notification needs until the
 * handler replies). The worker also builds the next epoch's tree when a
 * reader nears the end of an epoch, so that the prefetcher can walk on
 * into it (fs_order_object) and the first files of E+1 are warm.
 *
 * A transform tree (docs/DESIGN.md §3, "Transform views") is built the
 * same way, keyed by its transform too: transform-NAME/ (the configured
 * plan, epoch-E/ below it), and epoch-E/ and skip-K/ under that; its view
 * is laid out over the renamed manifest (fs/xfview.c), and it shares its
 * base's slots with the epoch trees.
 *
 * Names are canonical decimals ("epoch-01" is not epoch 1), so a number
 * has one spelling; a few names still plan what another does (skip-0 of
 * a strided epoch is the epoch itself), which costs a tree, not a wrong
 * byte.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/fs_impl.h"
#include "util/log.h"
#include "util/str.h"
#include "util/thread.h"

/* What an epoch tree owns (its generation's release frees it). */
struct epoch_owner {
	struct fs *fs;
	struct fs_gen *base; /* one reference */
	struct shard_spec spec;
	struct shard_plan *plan;
	struct rplan *rplan;
	struct view *view;
	/* A transform tree's renamed manifest, and the plan before its
	 * collisions were dropped. */
	struct fs_xf_names *names;
};

#define EPOCH_TASKS 64

enum epoch_task_kind { TASK_BUILD, TASK_INVAL };

struct epoch_task {
	enum epoch_task_kind kind;
	struct fs_gen *base; /* TASK_BUILD: one reference */
	struct epoch_key key;
	uint32_t base_id; /* TASK_INVAL: whose .shardfs/ */
	char name[64];	  /* TASK_INVAL: the name at the root */
};

/* The name at the mount's root (and its .shardfs/) that leads to tree g:
 * epoch-E, or transform-NAME for a transform tree (its epoch-E/ trees are
 * below that). */
static void tree_root_name(const struct fs_gen *g, char *buf, size_t len)
{
	if (g->xf != NULL)
		snprintf(buf, len, "transform-%s", g->xf->name);
	else
		snprintf(buf, len, "epoch-%llu",
			 (unsigned long long)g->d.spec->epoch);
}

/* Lock order: swap_lock (fs_swap's retire), then a base's epochs lock,
 * then gens_lock (fs_gen_add, fs_gen_put); the worker's lock is a leaf,
 * never held while taking another. */
struct fs_epoch_worker {
	struct fs *fs;
	pthread_mutex_t lock; /* guards the ring */
	pthread_cond_t wake;
	struct epoch_task ring[EPOCH_TASKS];
	unsigned head, len;
	bool stop; /* atomic; set (under lock) by fs_epoch_stop */
	pthread_t thr;
};

static const char top_name[] = "epoch";
static const char ctrl_name[] = ".shardfs";

static bool parse_epoch(const char *name, uint64_t *epoch)
{
	return strncmp(name, "epoch-", 6) == 0 &&
	       str_u64_canon(name + 6, strlen(name + 6), epoch);
}

static const char xf_prefix[] = "transform-";

/* The transform named by "transform-NAME" in base (1 + its index), or 0. */
static uint32_t parse_xf(const struct fs_gen *base, const char *name)
{
	size_t plen = strlen(xf_prefix);

	if (strncmp(name, xf_prefix, plen) != 0)
		return 0;
	for (size_t i = 0; i < base->d.n_transforms; i++)
		if (strcmp(name + plen, base->d.transforms[i].name) == 0)
			return (uint32_t)i + 1;
	return 0;
}

static bool key_eq(const struct epoch_key *a, const struct epoch_key *b)
{
	if (a->xf != b->xf || a->xf_top != b->xf_top)
		return false;
	if (a->xf_top)
		return true;
	return a->epoch == b->epoch && a->is_skip == b->is_skip &&
	       (!a->is_skip ||
		(a->skip == b->skip && a->skip_world == b->skip_world));
}

/* An epoch tree shows the ranks its base shows. */
static bool base_shows_rank(const void *ctx, uint64_t r)
{
	const struct view *v = ctx;
	char name[32];
	uint64_t ino;
	int len = snprintf(name, sizeof(name), "rank-%llu",
			   (unsigned long long)r);

	return view_lookup(v, view_node(v, FUSE_ROOT_ID), name, (size_t)len,
			   &ino) == 0;
}

static void owner_free(struct epoch_owner *o)
{
	view_free(o->view);
	rplan_free(o->rplan);
	shard_plan_free(o->plan);
	fs_xf_names_free(o->names);
	free(o);
}

static void epoch_release(void *arg)
{
	struct epoch_owner *o = arg;
	struct fs *fs = o->fs;
	struct fs_gen *base = o->base;

	owner_free(o);
	fs_gen_put(fs, base, 1);
}

/* Plans and lays out key's tree over base's data (no lock held: CPU
 * only). */
static int owner_build(struct fs *fs, struct fs_gen *base,
		       const struct epoch_key *key, struct epoch_owner **out)
{
	const struct fs_data *d = &base->d;
	struct epoch_owner *o = calloc(1, sizeof(*o));
	int rc;

	if (o == NULL)
		return -ENOMEM;
	o->fs = fs;
	o->spec = *d->spec;
	if (!key->xf_top) {
		o->spec.epoch = key->epoch;
		o->spec.skip = key->is_skip ? key->skip : 0;
		o->spec.skip_world = key->is_skip ? key->skip_world : 0;
	}
	if (key->xf != 0) {
		/* A transform tree: the renamed keys, without collisions
		 * (never a record view: the mount refuses that). */
		struct shard_plan *all = NULL;

		rc = fs_xf_names_build(d->manifest, &d->transforms[key->xf - 1],
				       &o->names);
		if (rc == 0)
			rc = shard_plan_build(&o->spec, d->manifest->count,
					      manifest_weight, d->manifest,
					      &all);
		if (rc == 0)
			rc = fs_xf_plan_filter(all, o->names->skip, &o->plan);
		shard_plan_free(all);
		if (rc == 0)
			rc = view_build_under(&o->names->m, o->plan, NULL,
					      base_shows_rank, d->view,
					      top_name, &o->view);
		if (rc < 0) {
			owner_free(o);
			return rc;
		}
		*out = o;
		return 0;
	}
	if (d->rplan != NULL) {
		/* A record view: an empty object plan (as dataset.c makes;
		 * the bytes layout wants a weight even for no items). */
		rc = shard_plan_build(&o->spec, 0, manifest_weight, d->manifest,
				      &o->plan);
		if (rc == 0)
			rc = rplan_build_runs(
				d->rindex, &o->spec, rplan_parts(d->rplan),
				rplan_run_bytes(d->rplan),
				rplan_window(d->rplan), &o->rplan);
	} else {
		rc = shard_plan_build(&o->spec, d->manifest->count,
				      manifest_weight, d->manifest, &o->plan);
	}
	if (rc == 0)
		rc = view_build_under(d->manifest, o->plan, o->rplan,
				      base_shows_rank, d->view, top_name,
				      &o->view);
	if (rc < 0) {
		owner_free(o);
		return rc;
	}
	*out = o;
	return 0;
}

/* Makes o a generation (taking a reference on base for it). */
static int owner_gen(struct fs *fs, struct fs_gen *base, struct epoch_owner *o,
		     const struct epoch_key *key, struct fs_gen **out)
{
	struct fs_data d = base->d;
	const struct view_node *root;
	struct fs_gen_tree tree = { .base = base, .skip = key->is_skip };
	struct fs_gen *g;
	uint64_t top = 0, ctl = 0;
	char xf_dir[64] = "";
	int rc;

	d.spec = &o->spec;
	d.plan = o->plan;
	d.rplan = o->rplan;
	d.view = o->view;
	if (o->names != NULL) {
		tree.xf = &base->d.transforms[key->xf - 1];
		tree.xf_id = key->xf;
		tree.xf_top = key->xf_top;
		tree.source = base->d.manifest;
		d.manifest = &o->names->m;
	}
	root = view_node(o->view, FUSE_ROOT_ID);
	if (view_lookup(o->view, root, top_name, strlen(top_name), &top) < 0 ||
	    view_lookup(o->view, root, ctrl_name, strlen(ctrl_name), &ctl) < 0)
		return -EINVAL; /* view_build_under made both */
	tree.data_node = (uint32_t)top;
	tree.ctrl_node = (uint32_t)ctl;
	/* The name it is looked up by, for the pusher's own lookups. */
	if (key->xf != 0)
		snprintf(xf_dir, sizeof(xf_dir), "%s%s/", xf_prefix,
			 tree.xf->name);
	if (key->xf_top)
		snprintf(tree.path, sizeof(tree.path), "%s", xf_dir);
	else if (!key->is_skip)
		snprintf(tree.path, sizeof(tree.path), "%sepoch-%llu/", xf_dir,
			 (unsigned long long)key->epoch);
	else if (key->skip_world == 0)
		snprintf(tree.path, sizeof(tree.path),
			 "%sepoch-%llu/skip-%llu/", xf_dir,
			 (unsigned long long)key->epoch,
			 (unsigned long long)key->skip);
	else
		snprintf(tree.path, sizeof(tree.path),
			 "%sepoch-%llu/skip-%llu-of-%llu/", xf_dir,
			 (unsigned long long)key->epoch,
			 (unsigned long long)key->skip,
			 (unsigned long long)key->skip_world);
	o->base = base;
	fs_gen_ref(base, 1);
	rc = fs_gen_add(fs, &d, &tree, epoch_release, o, &g);
	if (rc < 0) {
		fs_gen_put(fs, base, 1);
		o->base = NULL;
		return rc;
	}
	__atomic_add_fetch(&fs->epoch_builds, 1, __ATOMIC_RELAXED);
	*out = g;
	return 0;
}

static void worker_push(struct fs *fs, const struct epoch_task *t);

/* base's tree for key, with a reference: kept, or built when build is
 * set. NULL and *err for none. */
static struct fs_gen *epochs_get(struct fs *fs, struct fs_gen *base,
				 const struct epoch_key *key, bool build,
				 int *err)
{
	struct fs_epochs *e = base->epochs;
	struct fs_gen *g = NULL, *evicted = NULL;
	struct epoch_owner *o = NULL;
	unsigned i, victim = 0;
	int rc;

	*err = -ENOENT;
	if (e == NULL)
		return NULL;
	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&e->lock);
		if (e->retired) {
			pthread_mutex_unlock(&e->lock);
			break;
		}
		for (i = 0; i < FS_EPOCH_VIEWS; i++) {
			if (e->slot[i].gen != NULL &&
			    key_eq(&e->slot[i].key, key)) {
				g = e->slot[i].gen;
				fs_gen_ref(g, 1);
				if (build)
					e->slot[i].used = ++e->clock;
				break;
			}
		}
		if (g == NULL && o != NULL) {
			/* Built outside the lock; still missing: keep it in
			 * the least recently used slot. */
			for (i = 0; i < FS_EPOCH_VIEWS; i++) {
				if (e->slot[i].gen == NULL) {
					victim = i;
					break;
				}
				if (e->slot[i].used < e->slot[victim].used)
					victim = i;
			}
			rc = owner_gen(fs, base, o, key, &g);
			if (rc < 0) {
				*err = rc;
			} else {
				o = NULL; /* the generation's now */
				evicted = e->slot[victim].gen;
				e->slot[victim].gen = g;
				e->slot[victim].key = *key;
				e->slot[victim].used = ++e->clock;
				fs_gen_ref(g, 1);
			}
		}
		pthread_mutex_unlock(&e->lock);
		if (g != NULL || !build || pass == 1)
			break;
		rc = owner_build(fs, base, key, &o);
		if (rc < 0) {
			*err = rc;
			break;
		}
	}
	if (o != NULL)
		owner_free(o); /* another lookup kept its own first */
	if (evicted != NULL) {
		struct epoch_task t = { .kind = TASK_INVAL,
					.base_id = base->id };

		t.key.epoch = evicted->d.spec->epoch;
		tree_root_name(evicted, t.name, sizeof(t.name));
		log_msg(LOG_DEBUG, "epoch tree %u (epoch %llu) evicted",
			evicted->id,
			(unsigned long long)evicted->d.spec->epoch);
		worker_push(fs, &t);
		fs_gen_put(fs, evicted, 1);
	}
	if (g != NULL)
		*err = 0;
	return g;
}

int fs_epoch_link(struct fs *fs, struct fs_gen *g, const struct view_node *dir,
		  const char *name, struct fs_gen **tg,
		  const struct view_node **tn)
{
	uint64_t dir_ino = view_ino(g->d.view, dir);
	struct epoch_key key = { 0 };
	struct fs_gen *base, *t;
	bool ctrl;
	int rc;

	if (g->base == NULL) {
		/* The root, or the root's .shardfs/. */
		if (dir_ino == FUSE_ROOT_ID)
			ctrl = false;
		else if (dir->parent == 0 && dir->kind == VIEW_DIR &&
			 dir->name_len == strlen(ctrl_name) &&
			 memcmp(dir->name, ctrl_name, dir->name_len) == 0)
			ctrl = true;
		else
			return -ENOENT;
		if ((key.xf = parse_xf(g, name)) != 0)
			key.xf_top = true;
		else if (!parse_epoch(name, &key.epoch))
			return -ENOENT;
		base = g;
	} else if (g->xf_top) {
		/* transform-NAME/ or .shardfs/transform-NAME/: epoch-E. */
		if (dir_ino != g->data_node && dir_ino != g->ctrl_node)
			return -ENOENT;
		ctrl = dir_ino == g->ctrl_node;
		if (!parse_epoch(name, &key.epoch))
			return -ENOENT;
		key.xf = g->xf_id;
		base = g->base;
	} else {
		/* An epoch-E tree's directory or its .shardfs/: skip-K. */
		if (g->skip ||
		    (dir_ino != g->data_node && dir_ino != g->ctrl_node))
			return -ENOENT;
		ctrl = dir_ino == g->ctrl_node;
		if (strncmp(name, "skip-", 5) != 0 ||
		    !str_skip_spec(name + 5, &key.skip, &key.skip_world) ||
		    key.skip_world > FS_SKIP_WORLD_MAX)
			return -ENOENT;
		key.epoch = g->d.spec->epoch;
		key.is_skip = true;
		key.xf = g->xf_id;
		base = g->base;
	}
	t = epochs_get(fs, base, &key, true, &rc);
	if (t == NULL)
		return rc;
	*tg = t;
	*tn = view_node(t->d.view, ctrl ? t->ctrl_node : t->data_node);
	return 0;
}

struct fs_gen *fs_epoch_next(struct fs *fs, struct fs_gen *g)
{
	struct fs_gen *base = g->base != NULL ? g->base : g;
	struct epoch_key key = { .epoch = g->d.spec->epoch + 1,
				 .xf = g->xf_id };
	int err;

	if (g->d.spec->epoch == UINT64_MAX)
		return NULL;
	return epochs_get(fs, base, &key, false, &err);
}

/* Near the end: the last sixteenth, and at least the last 64 files. */
#define EPOCH_NEAR_END(count) ((count) / 16 > 64 ? (count) / 16 : 64)

void fs_epoch_opened(struct fs *fs, struct fs_gen *g, uint64_t pos,
		     uint64_t count)
{
	struct fs_gen *base = g->base != NULL ? g->base : g;
	struct epoch_task t = { .kind = TASK_BUILD };

	/* A reader of rank-R/ on a mount that never served an epoch tree
	 * reads the same epoch again, if any: nothing to warm. */
	if (g->base == NULL &&
	    __atomic_load_n(&fs->epoch_builds, __ATOMIC_RELAXED) == 0)
		return;
	if (pos + EPOCH_NEAR_END(count) < count ||
	    g->d.spec->epoch == UINT64_MAX ||
	    __atomic_exchange_n(&g->next_asked, 1, __ATOMIC_RELAXED))
		return;
	t.key.epoch = g->d.spec->epoch + 1;
	t.key.xf = g->xf_id;
	t.base = base;
	fs_gen_ref(base, 1);
	worker_push(fs, &t);
}

/* Tells the kernel to forget epoch-E at the root and in base's
 * .shardfs/ (and everything below them it does not use). The session's fd
 * must stay open: fs_swap's caller holds swap_lock and checks stopping;
 * the worker runs before fs_epoch_stop returns, and stops between two
 * notifications once *stop is set. */
static void inval_epoch(struct fs *fs, const bool *stop, uint32_t base_id,
			const char *name)
{
	size_t len = strlen(name);
	/* .shardfs is the root's first child: view inode 2. */
	fuse_ino_t parents[2] = { FUSE_ROOT_ID, FS_INO(base_id, 2) };

	for (int i = 0; i < 2; i++) {
		int rc;

		if (stop != NULL && __atomic_load_n(stop, __ATOMIC_ACQUIRE))
			return;
		if (fs->se == NULL)
			return;
		rc = fuse_lowlevel_notify_inval_entry(fs->se, parents[i], name,
						      len);
		if (rc < 0 && rc != -ENOENT)
			log_msg(LOG_DEBUG, "invalidating %s: %s", name,
				strerror(-rc));
	}
}

void fs_epoch_retire(struct fs *fs, struct fs_gen *g)
{
	struct fs_epochs *e = g->epochs;
	struct fs_gen *gens[FS_EPOCH_VIEWS];
	unsigned i, n = 0;

	if (e == NULL)
		return;
	pthread_mutex_lock(&e->lock);
	e->retired = true;
	for (i = 0; i < FS_EPOCH_VIEWS; i++) {
		if (e->slot[i].gen != NULL)
			gens[n++] = e->slot[i].gen;
		e->slot[i].gen = NULL;
	}
	pthread_mutex_unlock(&e->lock);
	for (i = 0; i < n; i++) {
		char name[64];

		tree_root_name(gens[i], name, sizeof(name));
		if (!fs->stopping)
			inval_epoch(fs, NULL, g->id, name);
		fs_gen_put(fs, gens[i], 1);
	}
}

struct resume_ctx {
	struct fs *fs;
	struct fs_gen *base;
};

/* cache_order_resume()'s filter: an order of a tree of the base. */
static bool resume_want(void *arg, uint64_t order)
{
	struct resume_ctx *r = arg;
	struct fs_gen *g = fs_gen_get(r->fs, (uint32_t)(order >> 32));
	bool ours;

	if (g == NULL)
		return false;
	ours = g == r->base || g->base == r->base;
	fs_gen_put(r->fs, g, 1);
	return ours;
}

static void task_run(struct fs *fs, struct epoch_task *t, const bool *stop)
{
	struct fs_gen *g;
	int err;

	if (t->kind == TASK_INVAL) {
		inval_epoch(fs, stop, t->base_id, t->name);
		return;
	}
	g = epochs_get(fs, t->base, &t->key, true, &err);
	if (g != NULL) {
		log_msg(LOG_DEBUG, "epoch %llu planned ahead (tree %u)",
			(unsigned long long)t->key.epoch, g->id);
		fs_gen_put(fs, g, 1);
		/* The previous epoch's orders go on into this one now: what
		 * their readers' windows wanted past the end is asked for
		 * (orders of t->base's trees only: its reference keeps
		 * their manifest, which every tree of a base shares). */
		if (!__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
			struct resume_ctx rc = { fs, t->base };

			cache_order_resume(fs->cache, resume_want, &rc);
		}
	} else if (err != -ENOENT) {
		log_msg(LOG_WARNING, "planning epoch %llu ahead: %s",
			(unsigned long long)t->key.epoch, strerror(-err));
	}
	fs_gen_put(fs, t->base, 1);
}

static void *worker_main(void *arg)
{
	struct fs_epoch_worker *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct epoch_task t;

		while (w->len == 0 && !w->stop)
			pthread_cond_wait(&w->wake, &w->lock);
		if (w->stop)
			break; /* fs_epoch_stop drains the queue */
		t = w->ring[w->head];
		w->head = (w->head + 1) % EPOCH_TASKS;
		w->len--;
		pthread_mutex_unlock(&w->lock);
		task_run(w->fs, &t, &w->stop);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Queues t; a full queue drops it (a build not done is a cold start of
 * the next epoch; an invalidation not done leaves the evicted tree to the
 * kernel's own reclaim of unused entries, or to the next walk of that
 * path, which the one-second entry timeout makes look it up again).
 * Never waits. */
static void worker_push(struct fs *fs, const struct epoch_task *t)
{
	struct fs_epoch_worker *w = fs->epoch_worker;
	bool queued = false;

	if (w != NULL) {
		pthread_mutex_lock(&w->lock);
		if (!w->stop && w->len < EPOCH_TASKS) {
			w->ring[(w->head + w->len) % EPOCH_TASKS] = *t;
			w->len++;
			queued = true;
			pthread_cond_signal(&w->wake);
		}
		pthread_mutex_unlock(&w->lock);
	}
	if (!queued) {
		log_msg(LOG_DEBUG,
			"epoch worker busy: %s of epoch %llu dropped",
			t->kind == TASK_BUILD ? "planning ahead"
					      : "invalidation",
			(unsigned long long)t->key.epoch);
		if (t->kind == TASK_BUILD)
			fs_gen_put(fs, t->base, 1);
	}
}

int fs_epoch_start(struct fs *fs)
{
	struct fs_epoch_worker *w = calloc(1, sizeof(*w));
	int rc;

	if (w == NULL)
		return -ENOMEM;
	w->fs = fs;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	fs->epoch_worker = w;
	rc = thread_start(&w->thr, worker_main, w);
	if (rc < 0) {
		fs->epoch_worker = NULL;
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return rc;
	}
	return 0;
}

/* How long fs_epoch_stop waits for the worker. A plan takes well under a
 * second per million items; what can take longer is a notification the
 * kernel holds until a lookup in the same directory is answered, and
 * after the loop has ended nothing answers it until the unmount. */
#define EPOCH_STOP_WAIT_S 30

void fs_epoch_stop(struct fs *fs)
{
	struct fs_epoch_worker *w = fs->epoch_worker;
	struct timespec until;
	unsigned i;
	int rc;

	if (w == NULL)
		return;
	pthread_mutex_lock(&w->lock);
	__atomic_store_n(&w->stop, true, __ATOMIC_RELEASE);
	/* The tasks not started: their references go now, so a worker
	 * that outlives this call (below) has nothing left that touches
	 * fs. */
	for (i = 0; i < w->len; i++) {
		struct epoch_task *t = &w->ring[(w->head + i) % EPOCH_TASKS];

		if (t->kind == TASK_BUILD)
			fs_gen_put(fs, t->base, 1);
	}
	w->len = 0;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += EPOCH_STOP_WAIT_S;
	rc = pthread_timedjoin_np(w->thr, NULL, &until);
	if (rc != 0) {
		/* Left running (and w with it, never freed): it stops at its
		 * next check of stop, once the kernel lets the notification
		 * go, at the latest when the unmount ends the connection. */
		log_msg(LOG_WARNING,
			"epoch worker still in a kernel notification after "
			"%d s; leaving it behind",
			EPOCH_STOP_WAIT_S);
		return;
	}
	fs->epoch_worker = NULL;
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
