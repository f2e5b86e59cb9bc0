/*
 * control: see control.h; and the .shardfs/ files of a mounted generation
 * (fs_impl.h): manifest.tsv, plan and rank-R.order never change, so their
 * text is built on first use (getattr or open) and kept in the generation;
 * stats and log are written anew at each open into a snapshot its handle
 * owns.
 * Every open handle is listed in its generation, so one whose RELEASE
 * never comes is freed with the generation. An epoch tree serves its
 * base's manifest.tsv text.
 *
 * The plan and order texts are written here; the stats and log texts in
 * control_stats.c.
 */
#include "fs/control.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fuse_lowlevel.h>

#include "fs/fs_impl.h"
#include "fs/recview.h"
#include "util/dlist.h"
#include "util/sha256.h"

static uint64_t rank_bytes(const struct manifest *m,
			   const struct shard_plan *plan, uint64_t r)
{
	const uint32_t *items;
	size_t count, npad, i;
	uint64_t bytes = 0;

	shard_plan_rank(plan, r, &items, &count, &npad);
	for (i = 0; i < count; i++)
		bytes += m->entries[items[i]].size;
	return bytes;
}

/* The lines every plan text starts with: the spec, the manifest and every
 * parameter of the plan. */
static void write_plan_params(FILE *f, const struct manifest *m,
			      const struct shard_spec *spec)
{
	uint64_t skipped = 0;
	int i;

	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		skipped += m->skipped[i];
	fprintf(f, "spec %s\n", SHARD_SPEC_VERSION);
	fprintf(f, "manifest_sha256 %s\n", m->digest);
	fprintf(f, "manifest_items %zu\n", m->count);
	fprintf(f, "manifest_bytes %llu\n", (unsigned long long)m->total_bytes);
	fprintf(f, "skipped_keys %llu\n", (unsigned long long)skipped);
	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		if (m->skipped[i] > 0)
			fprintf(f, "skipped_keys_%s %llu\n",
				manifest_skip_name(i),
				(unsigned long long)m->skipped[i]);
	fprintf(f, "world_size %llu\n", (unsigned long long)spec->world_size);
	fprintf(f, "seed %llu\n", (unsigned long long)spec->seed);
	fprintf(f, "epoch %llu\n", (unsigned long long)spec->epoch);
	fprintf(f, "order %s\n", shard_order_name(spec->order));
	fprintf(f, "layout %s\n", shard_layout_name(spec->layout));
	fprintf(f, "balance %s\n", shard_balance_name(spec->balance));
	fprintf(f, "reshuffle %s\n", shard_reshuffle_name(spec->reshuffle));
	if (spec->skip != 0 || spec->skip_world != 0)
		fprintf(f, "skip %llu\nskip_world %llu\n",
			(unsigned long long)spec->skip,
			(unsigned long long)(spec->skip_world
						     ? spec->skip_world
						     : spec->world_size));
}

int control_write_plan(FILE *f, const struct manifest *m,
		       const struct shard_spec *spec,
		       const struct shard_plan *plan)
{
	uint64_t total = 0, max_bytes = 0, r;
	size_t max_items = 0, min_items = SIZE_MAX;

	for (r = 0; r < plan->world_size; r++) {
		uint64_t b = rank_bytes(m, plan, r);
		size_t n = plan->rank_start[r + 1] - plan->rank_start[r];

		total += b;
		if (b > max_bytes)
			max_bytes = b;
		if (n > max_items)
			max_items = n;
		if (n < min_items)
			min_items = n;
	}
	write_plan_params(f, m, spec);
	if (spec->skip != 0 || spec->skip_world != 0)
		fprintf(f, "skipped_items %zu\n", plan->n_skipped);
	fprintf(f, "dropped_items %zu\n", plan->n_dropped);
	/* Largest rank over the mean: 1.0 is perfect balance. */
	fprintf(f, "imbalance_bytes %.4f\n",
		total ? (double)max_bytes * (double)plan->world_size /
				(double)total
		      : 1.0);
	fprintf(f, "imbalance_items %zu\n",
		plan->world_size ? max_items - min_items : 0);
	for (r = 0; r < plan->world_size; r++)
		fprintf(f, "rank %llu items %zu pad %zu bytes %llu\n",
			(unsigned long long)r,
			plan->rank_start[r + 1] - plan->rank_start[r],
			plan->rank_pad[r],
			(unsigned long long)rank_bytes(m, plan, r));
	return ferror(f) ? -EIO : 0;
}

int control_write_plan_of(FILE *f, const struct fs_data *d)
{
	/* A record view's object plan is empty: its rank lines and
	 * aggregates would only say so. */
	if (d->rplan == NULL)
		return control_write_plan(f, d->manifest, d->spec, d->plan);
	write_plan_params(f, d->manifest, d->spec);
	return ferror(f) ? -EIO : recview_write_plan(f, d);
}

int control_plan_digest_of(const struct fs_data *d, char hex[65])
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (d->rplan == NULL)
		return control_plan_digest(d->manifest, d->spec, d->plan, hex);
	/* A record view's text is a few lines per rank: hashed each time,
	 * no memo. */
	f = open_memstream(&text, &len);
	if (f == NULL)
		return -ENOMEM;
	rc = control_write_plan_of(f, d);
	if (fclose(f) != 0 && rc == 0)
		rc = -ENOMEM;
	if (rc == 0)
		rc = sha256_hex(text, len, hex);
	free(text);
	return rc;
}

int control_write_order(FILE *f, const struct manifest *m,
			const struct shard_plan *plan, uint64_t rank)
{
	const uint32_t *items;
	size_t count, npad, i;

	shard_plan_rank(plan, rank, &items, &count, &npad);
	for (i = 0; i < count; i++) {
		const struct manifest_entry *e = &m->entries[items[i]];

		if (manifest_write_escaped(f, e->key, e->key_len) < 0)
			return -EIO;
		fputs(i >= count - npad ? "\tpad\n" : "\n", f);
	}
	return ferror(f) ? -EIO : 0;
}

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
