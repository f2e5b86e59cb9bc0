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
#include "fs/ranks.h"
#include "fs/view.h"
#include "mount/dataset.h"
#include "util/log.h"

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

/* The keys that need a restart: the backend the cache reads through
 * ([source] except the manifest and its pin), the cache and the
 * prefetcher (sized and opened once), the mount itself, the log and the
 * metrics endpoint (set up at start). */
enum key_type { KEY_STR, KEY_BOOL, KEY_UINT, KEY_U64, KEY_ADDRESSING };

static const struct restart_key {
	const char *name;
	enum key_type type;
	size_t off;
} restart_keys[] = {
#define K(name, type, field)                                                   \
	{                                                                      \
		name, type, offsetof(struct config, field)                     \
	}
	K("source.url", KEY_STR, source.url),
	K("source.endpoint", KEY_STR, source.endpoint),
	K("source.region", KEY_STR, source.region),
	K("source.addressing", KEY_ADDRESSING, source.addressing),
	K("source.anonymous", KEY_BOOL, source.anonymous),
	K("source.connect_timeout_ms", KEY_UINT, source.connect_timeout_ms),
	K("source.request_timeout_ms", KEY_UINT, source.request_timeout_ms),
	K("source.read_timeout_ms", KEY_UINT, source.read_timeout_ms),
	K("source.retries", KEY_UINT, source.retries),
	K("cache.dir", KEY_STR, cache.dir),
	/* cache.size: two fields, below */
	K("cache.enabled", KEY_BOOL, cache.enabled),
	K("cache.inline_max", KEY_U64, cache.inline_max),
	K("cache.chunk_size", KEY_U64, cache.chunk_size),
	K("cache.fsync", KEY_BOOL, cache.fsync),
	K("prefetch.files", KEY_UINT, prefetch.files),
	K("prefetch.memory", KEY_U64, prefetch.memory),
	K("prefetch.connections", KEY_UINT, prefetch.connections),
	K("prefetch.hedge", KEY_BOOL, prefetch.hedge),
	K("mount.path", KEY_STR, mount.path),
	K("mount.allow_other", KEY_BOOL, mount.allow_other),
	K("mount.nonempty", KEY_BOOL, mount.nonempty),
	K("log.file", KEY_STR, log.file),
	K("metrics.listen", KEY_STR, metrics.listen),
#undef K
};

/* The value of k in cfg as the config would spell it ("" when unset). */
static void key_format(const struct config *cfg, const struct restart_key *k,
		       char *buf, size_t len)
{
	const char *p = (const char *)cfg + k->off;

	switch (k->type) {
	case KEY_STR: {
		const char *s = *(char *const *)(const void *)p;

		snprintf(buf, len, "\"%s\"", s != NULL ? s : "");
		break;
	}
	case KEY_BOOL:
		snprintf(buf, len, "%s",
			 *(const bool *)(const void *)p ? "true" : "false");
		break;
	case KEY_UINT:
		snprintf(buf, len, "%u", *(const unsigned *)(const void *)p);
		break;
	case KEY_U64:
		snprintf(buf, len, "%" PRIu64,
			 *(const uint64_t *)(const void *)p);
		break;
	case KEY_ADDRESSING: {
		static const char *const names[] = { "auto", "path",
						     "virtual" };
		unsigned a = *(const enum backend_addressing *)(const void *)p;

		snprintf(buf, len, "%s", a < 3 ? names[a] : "?");
		break;
	}
	}
}

static void cache_size_format(const struct config *cfg, char *buf, size_t len)
{
	if (cfg->cache.size_percent != 0)
		snprintf(buf, len, "%u%%", cfg->cache.size_percent);
	else
		snprintf(buf, len, "%" PRIu64, cfg->cache.size_bytes);
}

static void restart_warn(const char *name, const char *keep, const char *now)
{
	log_msg(LOG_WARNING,
		"reload: %s changed: needs a restart; keeping %s (the config "
		"now says %s)",
		name, keep, now);
}

/* Sets k in next to its value in running. Returns 0 or -ENOMEM. */
static int key_keep(const struct config *running, struct config *next,
		    const struct restart_key *k)
{
	const char *from = (const char *)running + k->off;
	char *to = (char *)next + k->off;
	size_t size;

	switch (k->type) {
	case KEY_STR: {
		const char *s = *(char *const *)(const void *)from;
		char *copy = NULL;

		if (s != NULL && (copy = strdup(s)) == NULL)
			return -ENOMEM;
		free(*(char **)(void *)to);
		*(char **)(void *)to = copy;
		return 0;
	}
	case KEY_BOOL:
		size = sizeof(bool);
		break;
	case KEY_UINT:
		size = sizeof(unsigned);
		break;
	case KEY_U64:
		size = sizeof(uint64_t);
		break;
	default:
		size = sizeof(enum backend_addressing);
		break;
	}
	memcpy(to, from, size);
	return 0;
}

int mount_reload_keep_restart_keys(const struct config *running,
				   struct config *next)
{
	char a[512], b[512];
	int n = 0;

	for (size_t i = 0; i < sizeof(restart_keys) / sizeof(restart_keys[0]);
	     i++) {
		key_format(running, &restart_keys[i], a, sizeof(a));
		key_format(next, &restart_keys[i], b, sizeof(b));
		if (strcmp(a, b) == 0)
			continue;
		restart_warn(restart_keys[i].name, a, b);
		n++;
		if (key_keep(running, next, &restart_keys[i]) < 0)
			return -ENOMEM;
	}
	cache_size_format(running, a, sizeof(a));
	cache_size_format(next, b, sizeof(b));
	if (strcmp(a, b) != 0) {
		restart_warn("cache.size", a, b);
		n++;
		next->cache.size_bytes = running->cache.size_bytes;
		next->cache.size_percent = running->cache.size_percent;
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
	rc = view_build(rg->ds->manifest, rg->ds->plan, reload_rank_filter,
			rg->cfg, &rg->view);
	if (rc < 0) {
		log_msg(LOG_ERR, "reload: cannot build the directory tree: %s",
			strerror(-rc));
		goto fail;
	}
	data.manifest = rg->ds->manifest;
	data.spec = &rg->cfg->shard.spec;
	data.plan = rg->ds->plan;
	data.view = rg->view;
	data.cache = rl->cache;
	if (control_plan_digest(data.manifest, data.spec, data.plan, digest) <
	    0)
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
