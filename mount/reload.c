/*
 * reload: see reload.h.
 *
 * A reload makes a new generation owned by a struct reload_gen (its
 * config, dataset and view), which fs_swap() hands back through
 * reload_gen_release() once the kernel and every open file have let go of
 * it. The spec the plan file shows points into that generation's config,
 * so the config lives exactly as long as the tree built from it.
 */
#include "mount/reload.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/control.h"
#include "fs/view.h"
#include "mount/dataset.h"
#include "util/log.h"
#include "util/ranks.h"

struct reload_gen {
	struct config *cfg;
	struct dataset *ds;
	struct view *view;
};

static void reload_gen_free(struct reload_gen *rg)
{
	if (rg == NULL)
		return;
	view_free(rg->view);
	dataset_free(rg->ds);
	config_free(rg->cfg);
	free(rg);
}

/* fs_swap's release: the generation is gone from the mount. */
static void reload_gen_release(void *owner)
{
	reload_gen_free(owner);
}

static void restart_warn(const char *section, const char *name,
			 const char *keep, const char *now)
{
	log_msg(LOG_WARNING,
		"reload: %s.%s changed: needs a restart; keeping %s (the "
		"config now says %s)",
		section, name, keep, now);
}

/* The keys that need a restart are marked so in the config's key table
 * (mount/config.c says why each). */
int mount_reload_keep_restart_keys(const struct config *running,
				   struct config *next)
{
	struct config_key_info key;
	char a[512], b[512];
	int n = 0;

	for (size_t i = 0; i < config_key_count(); i++) {
		if (config_key_at(i, &key) < 0 || !key.restart)
			continue;
		config_key_format(running, i, a, sizeof(a));
		config_key_format(next, i, b, sizeof(b));
		if (strcmp(a, b) == 0)
			continue;
		restart_warn(key.section, key.name, a, b);
		n++;
		if (config_key_copy(next, running, i) < 0)
			return -ENOMEM;
	}
	/* The transforms are opened once, at mount (mount/transforms.h). */
	if (!config_transforms_equal(running->transforms, running->n_transforms,
				     next->transforms, next->n_transforms)) {
		log_msg(LOG_WARNING,
			"reload: the [transform] sections changed: they need "
			"a restart; keeping the running ones");
		n++;
		if (config_transforms_copy(
			    &next->transforms, &next->n_transforms,
			    running->transforms, running->n_transforms) < 0)
			return -ENOMEM;
	}
	return n;
}

/* The SHA-256 of the plan file's text, which names the manifest digest,
 * the spec version and every spec value: the plan is a pure function of
 * those, so equal digests mean equal plans. */
void mount_served_fill(const struct config *cfg, const struct dataset *ds,
		       struct mount_served *out)
{
	out->objects = ds->manifest->count;
	out->bytes = ds->manifest->total_bytes;
	out->world_size = cfg->shard.spec.world_size;
	if (cfg->shard.ranks != NULL)
		ranks_format(cfg->shard.ranks, cfg->shard.n_ranks, out->ranks,
			     sizeof(out->ranks));
	else
		snprintf(out->ranks, sizeof(out->ranks), "0-%" PRIu64,
			 out->world_size - 1);
}

static bool reload_rank_filter(const void *ctx, uint64_t r)
{
	return config_rank_selected(ctx, r);
}

int mount_reload(struct fs *fs, struct mount_reload *rl)
{
	struct reload_gen *rg = calloc(1, sizeof(*rg));
	char err[1024], digest[65];
	struct mount_served served;
	struct fs_data data;
	int rc;

	if (rg == NULL)
		return -ENOMEM;
	rc = config_load(rl->config_path, rl->ov->v, rl->ov->n, &rg->cfg, err,
			 sizeof(err));
	if (rc < 0) {
		log_msg(LOG_ERR, "reload: %s", err);
		goto fail;
	}
	/* From here on the new config holds the running values of those
	 * keys, so a listing or a manifest URL goes to the source the mount
	 * reads from, with its options. */
	rc = mount_reload_keep_restart_keys(rl->running, rg->cfg);
	if (rc < 0)
		goto fail;
	rc = dataset_load(rg->cfg, false, &rg->ds);
	if (rc < 0)
		goto fail; /* logged with the reason */
	/* A listing opened a backend: the mount reads through its own. */
	backend_close(rg->ds->backend);
	rg->ds->backend = NULL;
	rc = view_build(rg->ds->manifest, rg->ds->plan, rg->ds->rplan,
			reload_rank_filter, rg->cfg, &rg->view);
	if (rc < 0) {
		log_msg(LOG_ERR, "reload: cannot build the directory tree: %s",
			strerror(-rc));
		goto fail;
	}
	data.manifest = rg->ds->manifest;
	data.spec = &rg->cfg->shard.spec;
	data.plan = rg->ds->plan;
	data.rindex = rg->ds->rindex;
	data.rplan = rg->ds->rplan;
	data.view = rg->view;
	data.cache = rl->cache;
	/* A record view shows no objects to transform (the mount refuses
	 * the two together; a reload to one shows no transform-NAME/). */
	data.transforms = data.rindex == NULL ? rl->transforms : NULL;
	data.n_transforms = data.rindex == NULL ? rl->n_transforms : 0;
	if (control_plan_digest_of(&data, digest) < 0)
		strcpy(digest, "?");
	mount_served_fill(rg->cfg, rg->ds, &served);
	rc = fs_swap(fs, &data, reload_gen_release, rg);
	if (rc == -ECANCELED) {
		log_msg(LOG_INFO,
			"reload: the mount is ending; not swapped in");
		goto fail;
	}
	if (rc < 0) {
		log_msg(LOG_ERR, "reload: cannot swap in the new tree: %s",
			strerror(-rc));
		goto fail;
	}
	/* rg now belongs to the mount; it stays alive while it is current,
	 * that is until this thread's next swap. */
	log_msg(LOG_INFO,
		"reloaded: generation %u, %zu objects, manifest sha256 %s, "
		"plan digest %s, ranks %s of %llu",
		fs_generation(fs), data.manifest->count, data.manifest->digest,
		digest, served.ranks, (unsigned long long)served.world_size);
	rl->served = served;
	return 0;
fail:
	reload_gen_free(rg);
	return rc;
}
