/*
 * fs/swap: the mount's state across its life: setting it up over the
 * first generation, the swap to a new generation on reload (fs_swap in
 * fs.h: the new tree made current, the kernel told to drop the root's
 * entries and the changed files, the old tree's epoch trees dropped), and
 * the teardown. It drives gen.c, epoch.c, kernel.c and order.c; none of
 * them calls back into it.
 */
#include "fs/fs.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_impl.h"
#include "util/log.h"

/* How long fs_swap waits for lookups of the root that started on the old
 * generation before it invalidates the root's entries. They are answered
 * from memory, so this bound is only reached when a reply write hangs;
 * then the swap invalidates anyway (and logs it). */
#define FS_SWAP_DRAIN_MS 5000

int fs_state_init(struct fs *fs, const struct fs_data *data)
{
	int rc;

	memset(fs, 0, sizeof(*fs));
	fs->cache = data->cache;
	fs->uid = getuid();
	fs->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->mount_time);
	clock_gettime(CLOCK_MONOTONIC, &fs->start_mono);
	pthread_rwlock_init(&fs->push_lock, NULL);
	pthread_rwlock_init(&fs->gens_lock, NULL);
	pthread_mutex_init(&fs->swap_lock, NULL);
	rc = fs_gen_first(fs, data);
	if (rc < 0)
		return rc;
	cache_set_order(fs->cache, fs_order_object, fs);
	return 0;
}

void fs_state_destroy(struct fs *fs)
{
	struct fs_gen *g;

	if (fs->current != NULL)
		cache_set_order(fs->cache, NULL, NULL);
	fs_epoch_stop(fs);
	/* The loop has ended: whatever the kernel did not forget (it does
	 * not send FORGETs at unmount) goes now, the bases' kept epoch trees
	 * dropped first. */
	for (g = fs->gens; g != NULL; g = g->next)
		if (g->base == NULL)
			fs_epoch_retire(fs, g);
	fs_gen_free_all(fs);
	pthread_mutex_destroy(&fs->swap_lock);
	pthread_rwlock_destroy(&fs->gens_lock);
	pthread_rwlock_destroy(&fs->push_lock);
}

/* Tells the kernel to forget the root's entry name (and what hangs below
 * it, if unused). Not cached is fine. */
static void inval_root_entry(struct fs *fs, const struct view_node *n)
{
	int rc = fuse_lowlevel_notify_inval_entry(fs->se, FUSE_ROOT_ID, n->name,
						  n->name_len);

	if (rc < 0 && rc != -ENOENT)
		log_msg(LOG_DEBUG, "invalidating /%.*s: %s", (int)n->name_len,
			n->name, strerror(-rc));
}

/* After a swap: waits for the root lookups that may still answer from old,
 * then drops the kernel's entries for every name under the root in old or
 * new (a new name may be cached as negative) and the root's attributes and
 * cached listing. old is held by the caller. */
static void inval_root(struct fs *fs, struct fs_gen *old, struct fs_gen *new)
{
	const struct view_node *root;
	struct timespec nap = { 0, 1000000 };
	unsigned waited = 0;
	uint32_t i;
	int rc;

	if (fs->se == NULL)
		return;
	while (__atomic_load_n(&old->root_ops, __ATOMIC_ACQUIRE) != 0 &&
	       waited < FS_SWAP_DRAIN_MS) {
		nanosleep(&nap, NULL);
		waited++;
	}
	if (waited >= FS_SWAP_DRAIN_MS)
		log_msg(LOG_WARNING,
			"reload: root lookups on generation %u still running "
			"after %u ms; invalidating anyway",
			old->id, FS_SWAP_DRAIN_MS);
	root = view_node(old->d.view, FUSE_ROOT_ID);
	for (i = 0; i < root->u.dir.count; i++)
		inval_root_entry(fs, view_child(old->d.view, root, i));
	root = view_node(new->d.view, FUSE_ROOT_ID);
	for (i = 0; i < root->u.dir.count; i++)
		inval_root_entry(fs, view_child(new->d.view, root, i));
	rc = fuse_lowlevel_notify_inval_inode(fs->se, FUSE_ROOT_ID, 0, 0);
	if (rc < 0 && rc != -ENOENT)
		log_msg(LOG_DEBUG, "invalidating the root: %s", strerror(-rc));
}

void fs_swap_stop(struct fs *fs)
{
	pthread_mutex_lock(&fs->swap_lock);
	fs->stopping = true;
	pthread_mutex_unlock(&fs->swap_lock);
	fs_epoch_stop(fs);
}

int fs_swap(struct fs *fs, const struct fs_data *data,
	    void (*release)(void *owner), void *owner)
{
	struct fs_gen *g, *old;
	int rc;

	pthread_mutex_lock(&fs->swap_lock);
	if (fs->stopping) {
		pthread_mutex_unlock(&fs->swap_lock);
		return -ECANCELED;
	}
	/* old comes with two references: the one it held as current and
	 * ours, for inval_root. */
	rc = fs_gen_install(fs, data, release, owner, &g, &old);
	if (rc < 0) {
		pthread_mutex_unlock(&fs->swap_lock);
		return rc;
	}
	/* Same function and context: this only forgets the prefetcher's
	 * per-order state. Orders carry the generation id, so opens of the
	 * old tree and of the new one never share a slot anyway. */
	cache_set_order(fs->cache, fs_order_object, fs);
	fs_gen_put(fs, old, 1); /* no longer current */
	inval_root(fs, old, g);
	kernel_reload(fs, old, g);
	fs_epoch_retire(fs, old);
	fs_gen_put(fs, old, 1);
	pthread_mutex_unlock(&fs->swap_lock);
	return 0;
}
