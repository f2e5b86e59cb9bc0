/*
 * fs/gen: the generations a mount serves: making one (its order tables
 * and the empty tables the control files and the epoch trees fill),
 * listing it, finding it by id or inode, counting references and freeing
 * it with the last one. See fs_impl.h for the inode numbering and the
 * reference counting. The bottom of fs/'s calls: gen.c calls no other
 * file of fs/; the swap that makes a new generation current is swap.c's,
 * the epoch trees epoch.c's, the control files control_files.c's.
 */
#include "fs/fs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_impl.h"
#include "fs/recview.h"
#include "util/log.h"

/* Every non-pad item belongs to exactly one rank's order, so a read names
 * its rank and position (8 bytes per manifest item), and is at most one
 * file of the view (its inode, and the kernel's lookups of it: 8 more). */
static int gen_order_build(struct fs_gen *g, bool base)
{
	const struct shard_plan *plan = g->d.plan;
	size_t n = plan->n_items ? plan->n_items : 1, i;
	size_t nodes = view_node_count(g->d.view);
	uint64_t r, ino;

	g->item_rank = malloc(n * sizeof(*g->item_rank));
	g->item_pos = malloc(n * sizeof(*g->item_pos));
	g->item_ino = calloc(n, sizeof(*g->item_ino));
	g->item_nlookup = calloc(n, sizeof(*g->item_nlookup));
	g->item_pushed = calloc(n, sizeof(*g->item_pushed));
	if (base)
		g->item_stale = calloc(n, sizeof(*g->item_stale));
	if (g->item_rank == NULL || g->item_pos == NULL ||
	    g->item_ino == NULL || g->item_nlookup == NULL ||
	    g->item_pushed == NULL || (base && g->item_stale == NULL))
		return -ENOMEM;
	for (ino = FUSE_ROOT_ID; ino <= nodes; ino++) {
		const struct view_node *vn = view_node(g->d.view, ino);

		if (vn != NULL && vn->kind == VIEW_FILE)
			g->item_ino[vn->u.item] = (uint32_t)ino;
	}
	for (i = 0; i < plan->n_items; i++)
		g->item_rank[i] = g->item_pos[i] = UINT32_MAX;
	for (r = 0; r < plan->world_size; r++) {
		const uint32_t *items;
		size_t count, npad;

		shard_plan_rank(plan, r, &items, &count, &npad);
		for (i = 0; i < count - npad; i++) {
			g->item_rank[items[i]] = (uint32_t)r;
			g->item_pos[items[i]] = (uint32_t)i;
		}
	}
	return 0;
}

/* The control texts and stats snapshots control_files.c kept in g. */
static void gen_ctrl_free(struct fs_gen *g)
{
	for (size_t i = 0; g->ctrl != NULL && i < g->n_ctrl; i++) {
		if (g->ctrl[i] != NULL)
			free(g->ctrl[i]->buf);
		free(g->ctrl[i]);
	}
	free(g->ctrl);
	g->ctrl = NULL;
	while (g->snaps != NULL) {
		struct fs_snap *sn = g->snaps;

		g->snaps = sn->next;
		free(sn->text.buf);
		free(sn);
	}
}

/* A base generation's (empty) table of kept epoch trees (epoch.c fills
 * it): 0 or -ENOMEM. */
static int gen_epochs_new(struct fs_gen *g)
{
	g->epochs = calloc(1, sizeof(*g->epochs));
	if (g->epochs == NULL)
		return -ENOMEM;
	pthread_mutex_init(&g->epochs->lock, NULL);
	return 0;
}

static void gen_epochs_free(struct fs_gen *g)
{
	if (g->epochs == NULL)
		return;
	pthread_mutex_destroy(&g->epochs->lock);
	free(g->epochs);
	g->epochs = NULL;
}

static void gen_free(struct fs_gen *g)
{
	if (g == NULL)
		return;
	gen_ctrl_free(g);
	/* Its orders (gen id << 32 | rank) can never be opened again. A
	 * base's go at the next cache_set_order (fs_swap). */
	if (g->base != NULL)
		cache_order_forget(g->d.cache, (uint64_t)UINT32_MAX << 32,
				   (uint64_t)g->id << 32);
	gen_epochs_free(g);
	recview_ahead_free(g->rv_ahead);
	free(g->item_rank);
	free(g->item_pos);
	free(g->item_ino);
	free(g->item_nlookup);
	free(g->item_pushed);
	free(g->item_stale);
	free(g->path_prefix);
	pthread_mutex_destroy(&g->ctrl_lock);
	if (g->release != NULL)
		g->release(g->owner);
	free(g);
}

/* A generation over data with one reference (being current). */
static int gen_new(const struct fs_data *data, uint32_t id, bool base,
		   void (*release)(void *), void *owner, struct fs_gen **out)
{
	struct fs_gen *g = calloc(1, sizeof(*g));

	if (g == NULL)
		return -ENOMEM;
	g->id = id;
	g->d = *data;
	g->refs = 1;
	pthread_mutex_init(&g->ctrl_lock, NULL);
	g->n_ctrl = 2 + data->plan->world_size;
	g->ctrl = calloc(g->n_ctrl, sizeof(*g->ctrl));
	if (g->ctrl == NULL || gen_order_build(g, base) < 0 ||
	    (base && gen_epochs_new(g) < 0) ||
	    (data->rplan != NULL && recview_ahead_new(&g->rv_ahead) < 0)) {
		gen_free(g); /* release is not set yet: not called */
		return -ENOMEM;
	}
	g->release = release;
	g->owner = owner;
	*out = g;
	return 0;
}

/* Gives g the next id and links it into fs->gens, under fs->gens_lock held
 * for writing: for the current tree, a reload's and every epoch or
 * transform tree alike. Ids are never reused (an inode number names one
 * tree forever). Returns 0, or -EOVERFLOW when the ids ran out (g is left
 * unlinked for the caller to free, after the lock). */
static int gen_link_locked(struct fs *fs, struct fs_gen *g)
{
	if (fs->next_gen == 0)
		return -EOVERFLOW;
	g->id = fs->next_gen++;
	g->next = fs->gens;
	fs->gens = g;
	return 0;
}

/* Takes a reference unless refs is 0 (the generation is being freed). */
static bool gen_get_unless_zero(struct fs_gen *g)
{
	uint64_t refs = __atomic_load_n(&g->refs, __ATOMIC_RELAXED);

	while (refs != 0) {
		if (__atomic_compare_exchange_n(&g->refs, &refs, refs + 1, true,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return true;
	}
	return false;
}

struct fs_gen *fs_gen_get(struct fs *fs, uint32_t id)
{
	struct fs_gen *g;

	pthread_rwlock_rdlock(&fs->gens_lock);
	for (g = fs->gens; g != NULL; g = g->next)
		if (g->id == id)
			break;
	if (g != NULL && !gen_get_unless_zero(g))
		g = NULL;
	pthread_rwlock_unlock(&fs->gens_lock);
	return g;
}

struct fs_gen *fs_gen_current(struct fs *fs)
{
	struct fs_gen *g;

	/* The current generation holds its own reference, which only
	 * fs_swap drops, under the write lock. */
	pthread_rwlock_rdlock(&fs->gens_lock);
	g = fs->current;
	fs_gen_ref(g, 1);
	pthread_rwlock_unlock(&fs->gens_lock);
	return g;
}

struct fs_gen *fs_gen_of_ino(struct fs *fs, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return fs_gen_current(fs);
	return fs_gen_get(fs, FS_INO_GEN(ino));
}

void fs_gen_ref(struct fs_gen *g, uint64_t n)
{
	__atomic_add_fetch(&g->refs, n, __ATOMIC_RELAXED);
}

void fs_gen_put(struct fs *fs, struct fs_gen *g, uint64_t n)
{
	struct fs_gen **p;

	if (n == 0 || __atomic_sub_fetch(&g->refs, n, __ATOMIC_ACQ_REL) != 0)
		return;
	/* The last reference: nobody can take a new one (get_unless_zero),
	 * so unlink and free. */
	pthread_rwlock_wrlock(&fs->gens_lock);
	for (p = &fs->gens; *p != NULL; p = &(*p)->next) {
		if (*p == g) {
			*p = g->next;
			break;
		}
	}
	pthread_rwlock_unlock(&fs->gens_lock);
	if (g->base != NULL)
		log_msg(LOG_DEBUG, "epoch tree %u (epoch %llu) freed", g->id,
			(unsigned long long)g->d.spec->epoch);
	else
		log_msg(LOG_DEBUG, "generation %u freed", g->serial);
	gen_free(g);
}

size_t fs_epoch_count(struct fs *fs)
{
	size_t n = 0;

	pthread_rwlock_rdlock(&fs->gens_lock);
	for (struct fs_gen *g = fs->gens; g != NULL; g = g->next)
		n += g->base != NULL;
	pthread_rwlock_unlock(&fs->gens_lock);
	return n;
}

size_t fs_gen_count(struct fs *fs)
{
	size_t n = 0;

	pthread_rwlock_rdlock(&fs->gens_lock);
	for (struct fs_gen *g = fs->gens; g != NULL; g = g->next)
		n++;
	pthread_rwlock_unlock(&fs->gens_lock);
	return n;
}

uint32_t fs_generation(struct fs *fs)
{
	uint32_t n;

	/* Not the current id: epoch trees take ids too. */
	pthread_rwlock_rdlock(&fs->gens_lock);
	n = fs->current->serial;
	pthread_rwlock_unlock(&fs->gens_lock);
	return n;
}

int fs_gen_add(struct fs *fs, const struct fs_data *data,
	       const struct fs_gen_tree *tree, void (*release)(void *owner),
	       void *owner, struct fs_gen **out)
{
	struct fs_gen *g;
	int rc;

	/* The id is taken under the lock, after the tables are built; the
	 * tree's fields are set before anyone can find it. */
	rc = gen_new(data, 0, false, release, owner, &g);
	if (rc < 0)
		return rc;
	g->path_prefix = strdup(tree->path);
	if (g->path_prefix == NULL) {
		g->release = NULL; /* the caller keeps owner */
		gen_free(g);
		return -ENOMEM;
	}
	g->base = tree->base;
	g->data_node = tree->data_node;
	g->ctrl_node = tree->ctrl_node;
	g->skip = tree->skip;
	g->xf = tree->xf;
	g->xf_id = tree->xf_id;
	g->xf_top = tree->xf_top;
	g->source = tree->source;
	pthread_rwlock_wrlock(&fs->gens_lock);
	rc = gen_link_locked(fs, g);
	pthread_rwlock_unlock(&fs->gens_lock);
	if (rc < 0) {
		g->release = NULL; /* the caller keeps owner */
		gen_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

int fs_gen_first(struct fs *fs, const struct fs_data *data)
{
	int rc = gen_new(data, 0, true, NULL, NULL, &fs->current);

	if (rc < 0)
		return rc;
	fs->gens = fs->current;
	fs->next_gen = 1;
	return 0;
}

int fs_gen_install(struct fs *fs, const struct fs_data *data,
		   void (*release)(void *owner), void *owner,
		   struct fs_gen **new_out, struct fs_gen **old_out)
{
	struct fs_gen *g, *old;
	int rc = gen_new(data, 0, true, release, owner, &g);

	if (rc < 0)
		return rc;
	pthread_rwlock_wrlock(&fs->gens_lock);
	rc = gen_link_locked(fs, g);
	if (rc < 0) {
		pthread_rwlock_unlock(&fs->gens_lock);
		g->release = NULL; /* the caller keeps owner */
		gen_free(g);
		return rc;
	}
	old = fs->current;
	/* The caller's, besides the one old held as current: old may lose
	 * every other reference now. */
	fs_gen_ref(old, 1);
	fs->current = g;
	g->serial = ++fs->swaps;
	pthread_rwlock_unlock(&fs->gens_lock);
	*new_out = g;
	*old_out = old;
	return 0;
}

void fs_gen_free_all(struct fs *fs)
{
	struct fs_gen *g, *next;

	/* Epoch trees first: each one's release drops a reference on its
	 * base, which must still be there. */
	for (;;) {
		struct fs_gen **p;

		for (p = &fs->gens; *p != NULL && (*p)->base == NULL;
		     p = &(*p)->next)
			;
		if (*p == NULL)
			break;
		g = *p;
		*p = g->next;
		gen_free(g); /* its release puts its base */
	}
	for (g = fs->gens; g != NULL; g = next) {
		next = g->next;
		gen_free(g);
	}
	fs->gens = fs->current = NULL;
}
