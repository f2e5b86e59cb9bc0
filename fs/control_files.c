/*
 * control_files: the .shardfs/ files of a mounted generation (fs_impl.h):
 * manifest.tsv, plan and rank-R.order never change, so their text is
 * built on first use (getattr or open) and kept in the generation; stats
 * and log are written anew at each open into a snapshot its handle owns.
 * Every open handle is listed in its generation, so one whose RELEASE
 * never comes is freed with the generation. An epoch tree serves its
 * base's manifest.tsv text. The texts are control.c's (plan, order) and
 * control_stats.c's (stats, log); this file calls them and neither calls
 * it. fs_stats_write() (fs.h) gathers a mount's counters into the stats
 * text, for .shardfs/stats and the metrics endpoint alike.
 */
#include "fs/control.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/fs_impl.h"
#include "fs/recview.h"
#include "util/dlist.h"

static size_t ctrl_slot(const struct view_node *n)
{
	switch (n->ctrl) {
	case VIEW_CTRL_MANIFEST:
		return 0;
	case VIEW_CTRL_PLAN:
		return 1;
	default:
		return 2 + n->u.rank;
	}
}

static int ctrl_generate(struct fs *fs, struct fs_gen *g,
			 const struct view_node *n, struct ctrl_text *out)
{
	FILE *f;
	int rc;

	out->buf = NULL;
	out->len = 0;
	f = open_memstream(&out->buf, &out->len);
	if (f == NULL)
		return -ENOMEM;
	switch (n->ctrl) {
	case VIEW_CTRL_MANIFEST:
		rc = manifest_write(g->d.manifest, f);
		break;
	case VIEW_CTRL_PLAN:
		rc = control_write_plan_of(f, &g->d);
		break;
	case VIEW_CTRL_ORDER:
		if (g->d.rplan != NULL)
			rc = recview_write_order(f, &g->d, n->u.rank);
		else
			rc = control_write_order(f, g->d.manifest, g->d.plan,
						 n->u.rank);
		break;
	case VIEW_CTRL_LOG: {
		struct log_entry e[LOG_RECENT_MAX];

		rc = control_write_log(f, e, log_recent_get(e, LOG_RECENT_MAX));
		break;
	}
	default:
		rc = fs_stats_write(fs, f);
		break;
	}
	if (fclose(f) != 0 && rc == 0)
		rc = -ENOMEM;
	if (rc < 0) {
		free(out->buf);
		out->buf = NULL;
		out->len = 0;
	}
	return rc;
}

/* The kept text of an immutable control file, built on first use. */
static int ctrl_get(struct fs *fs, struct fs_gen *g, const struct view_node *n,
		    const struct ctrl_text **out)
{
	size_t slot = ctrl_slot(n);
	struct ctrl_text *t;
	int rc = 0;

	/* An epoch tree serves its base's manifest (the same one): one
	 * kept text, however many trees; the tree keeps the base alive. */
	if (slot == 0 && g->base != NULL)
		g = g->base;
	pthread_mutex_lock(&g->ctrl_lock);
	t = g->ctrl[slot];
	if (t == NULL) {
		t = malloc(sizeof(*t));
		if (t == NULL)
			rc = -ENOMEM;
		else if ((rc = ctrl_generate(fs, g, n, t)) < 0)
			free(t);
		else
			g->ctrl[slot] = t;
	}
	pthread_mutex_unlock(&g->ctrl_lock);
	if (rc == 0)
		*out = t;
	return rc;
}

/* control_snap_find() with g->ctrl_lock held. */
static struct fs_snap *control_snap_find_locked(struct fs_gen *g, uint32_t id)
{
	struct fs_snap *sn;

	for (sn = g->snaps; sn != NULL; sn = sn->next)
		if (sn->id == id)
			return sn;
	return NULL;
}

int control_file_text(struct fs *fs, struct fs_gen *g,
		      const struct view_node *n, const struct ctrl_text **out)
{
	return ctrl_get(fs, g, n, out);
}

int control_snap_new(struct fs *fs, struct fs_gen *g, const struct view_node *n,
		     struct fs_snap **out)
{
	uint32_t node = (uint32_t)view_ino(g->d.view, n);
	struct fs_snap *sn;
	struct timespec mono;
	uint64_t now;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &mono);
	now = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
	pthread_mutex_lock(&g->ctrl_lock);
	sn = g->snap_last;
	if (sn != NULL && sn->node == node &&
	    !__atomic_load_n(&sn->read, __ATOMIC_RELAXED) &&
	    now - sn->born_ns < FS_SNAP_FRESH_NS) {
		sn->nlookup++;
		pthread_mutex_unlock(&g->ctrl_lock);
		*out = sn;
		return 0;
	}
	pthread_mutex_unlock(&g->ctrl_lock);
	sn = calloc(1, sizeof(*sn));
	if (sn == NULL)
		return -ENOMEM;
	sn->born_ns = now;
	rc = ctrl_generate(fs, g, n, &sn->text);
	if (rc < 0) {
		free(sn);
		return rc;
	}
	clock_gettime(CLOCK_REALTIME, &sn->mtime);
	sn->node = node;
	sn->nlookup = 1;
	pthread_mutex_lock(&g->ctrl_lock);
	/* Serials wrap after 2^31 snapshots: skip one still known. */
	do {
		g->snap_serial = (g->snap_serial + 1) & ~FS_SNAP_BIT;
		sn->id = FS_SNAP_BIT | g->snap_serial;
	} while (control_snap_find_locked(g, sn->id) != NULL);
	DLIST_PUSH(g->snaps, sn);
	g->snap_last = sn;
	pthread_mutex_unlock(&g->ctrl_lock);
	*out = sn;
	return 0;
}

struct fs_snap *control_snap_find(struct fs_gen *g, uint32_t id)
{
	struct fs_snap *sn;

	pthread_mutex_lock(&g->ctrl_lock);
	sn = control_snap_find_locked(g, id);
	pthread_mutex_unlock(&g->ctrl_lock);
	return sn;
}

void control_snap_forget(struct fs_gen *g, uint32_t id, uint64_t nlookup)
{
	struct fs_snap *sn;

	pthread_mutex_lock(&g->ctrl_lock);
	sn = control_snap_find_locked(g, id);
	if (sn != NULL) {
		sn->nlookup = nlookup < sn->nlookup ? sn->nlookup - nlookup : 0;
		if (sn->nlookup == 0) {
			DLIST_UNLINK(g->snaps, sn);
			if (g->snap_last == sn)
				g->snap_last = NULL;
		} else {
			sn = NULL;
		}
	}
	pthread_mutex_unlock(&g->ctrl_lock);
	if (sn != NULL) {
		free(sn->text.buf);
		free(sn);
	}
}

int fs_stats_write(struct fs *fs, FILE *f)
{
	struct control_stats st = { 0 };
	struct cache_stats cs;
	struct timespec now;
	struct fs_gen *g;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &now);
	cache_settle(fs->cache);
	cache_stats_get(fs->cache, &cs);
	st.libcurl = fs->libcurl;
	st.uptime_seconds = (uint64_t)(now.tv_sec - fs->start_mono.tv_sec);
	st.reads = __atomic_load_n(&fs->reads, __ATOMIC_RELAXED);
	st.read_bytes = __atomic_load_n(&fs->read_bytes, __ATOMIC_RELAXED);
	st.read_errors = __atomic_load_n(&fs->read_errors, __ATOMIC_RELAXED);
	for (int i = 0; i < FS_OP_COUNT; i++)
		st.ops[i] = __atomic_load_n(&fs->ops[i], __ATOMIC_RELAXED);
	st.self_lookups = __atomic_load_n(&fs->self_lookups, __ATOMIC_RELAXED);
	st.stale_reads = __atomic_load_n(&fs->stale_reads, __ATOMIC_RELAXED);
	st.backend_reads = cs.backend_reads;
	st.backend_bytes = cs.backend_bytes;
	st.backend_errors = cs.backend_errors;
	st.cache = cs;
	log_errors_get(&st.log);
	st.epoch_builds = __atomic_load_n(&fs->epoch_builds, __ATOMIC_RELAXED);
	st.epoch_trees = fs_epoch_count(fs);
	g = fs_gen_current(fs);
	st.generation = g->serial; /* the same tree as the rest of the text */
	if (g->d.rplan != NULL && control_plan_digest_of(&g->d, st.plan_digest))
		st.plan_digest[0] = '\0';
	rc = control_write_stats(f, g->d.manifest, g->d.spec, g->d.plan,
				 g->d.view, &st);
	fs_gen_put(fs, g, 1);
	if (rc == 0 && fs->n_xforms) {
		struct control_xform_stats *xs =
			calloc(fs->n_xforms, sizeof(*xs));

		if (!xs)
			return -ENOMEM;
		for (size_t i = 0; i < fs->n_xforms; i++) {
			xs[i].name = xform_name(fs->xforms[i]);
			xform_stats_get(fs->xforms[i], &xs[i].s);
		}
		rc = control_write_xform_stats(f, xs, fs->n_xforms);
		free(xs);
	}
	return rc;
}
