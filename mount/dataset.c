/*
 * dataset: see dataset.h.
 */
#include "mount/dataset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/posix.h"
#include "util/log.h"

static int dataset_add_listed(void *arg, const struct backend_object *obj)
{
	int rc = manifest_add(arg, obj->key, obj->key_len, obj->size, obj->etag,
			      obj->etag_len, obj->mtime_ns);

	if (rc == -EFBIG) {
		char *key = manifest_escaped_copy(obj->key, obj->key_len);

		log_msg(LOG_ERR,
			"manifest: object '%s': size %llu is over "
			"2^63-1 (the largest file size)",
			key ? key : "?", (unsigned long long)obj->size);
		free(key);
	}
	return rc;
}

int dataset_list_manifest(struct backend *be, struct manifest **out)
{
	struct manifest *m = manifest_new();
	uint64_t refused = backend_posix_links_refused(be);
	int rc;

	if (m == NULL)
		return -ENOMEM;
	rc = be->ops->list(be, "", dataset_add_listed, m);
	/* The backend logged each by name; here they are counted with the
	 * other keys that cannot be served. */
	m->skipped[MANIFEST_SKIP_LINK_OUTSIDE] +=
		backend_posix_links_refused(be) - refused;
	if (rc == -ENOMEM)
		log_msg(LOG_ERR, "manifest: out of memory while listing");
	return manifest_finish_into(m, rc, out);
}

/* Reads a manifest stored as an object ("s3://bucket/dir/name.tsv" or
 * "gs://bucket/dir/name.tsv", the etag then being the generation): opens
 * a backend on the object's directory with the [source] options, stats the
 * object and reads it whole (pinned to the etag stat saw, so a manifest
 * replaced mid-read fails instead of mixing versions), then parses it. */
static int manifest_load_url(const char *url,
			     const struct backend_options *opts,
			     struct manifest **out)
{
	const char *slash = strrchr(url, '/'), *key;
	struct backend *be = NULL;
	struct backend_stat st;
	char *dir = NULL, *text = NULL;
	size_t done = 0, n;
	int rc;

	if (slash == NULL || slash[1] == '\0' ||
	    (size_t)(slash - url) < strlen("s3://x")) {
		log_msg(LOG_ERR, "manifest %s: not an object URL", url);
		return -EINVAL;
	}
	key = slash + 1;
	dir = strndup(url, (size_t)(slash - url) + 1);
	if (dir == NULL)
		return -ENOMEM;
	rc = backend_open(dir, opts, &be);
	if (rc < 0)
		goto out;
	rc = be->ops->stat(be, key, strlen(key), &st);
	if (rc < 0) {
		if (rc == -ENOENT)
			log_msg(LOG_ERR, "manifest %s: no such object", url);
		goto out;
	}
	if (st.size > (uint64_t)1 << 34) {
		log_msg(LOG_ERR, "manifest %s: %llu bytes is too large", url,
			(unsigned long long)st.size);
		rc = -EFBIG;
		goto out;
	}
	text = malloc((size_t)st.size + 1);
	if (text == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	while (done < st.size) {
		size_t want = st.size - done > (8u << 20) ? (8u << 20)
							  : st.size - done;

		rc = be->ops->read(be, key, strlen(key), st.etag, st.etag_len,
				   done, want, text + done, &n);
		if (rc < 0)
			goto out;
		if (n == 0) {
			log_msg(LOG_ERR, "manifest %s: shorter than its size",
				url);
			rc = -EIO;
			goto out;
		}
		done += n;
	}
	text[done] = '\0';
	rc = manifest_parse(url, text, done, out);
out:
	free(text);
	backend_close(be);
	free(dir);
	return rc;
}

/* A source that lists nothing is far more often a typo in url, a wrong
 * prefix or missing permissions than a dataset meant to be empty: refuse
 * it, naming the key that allows it. */
static int check_not_empty(const struct config *cfg, const struct manifest *m)
{
	uint64_t skipped = 0;
	int i;

	if (m->count > 0 || cfg->source.allow_empty)
		return 0;
	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		skipped += m->skipped[i];
	if (cfg->source.manifest != NULL)
		log_msg(LOG_ERR,
			"%s: the pinned manifest %s has 0 entries; refusing "
			"to serve an empty dataset (set [source] allow_empty "
			"= true if that is intended)",
			cfg->file, cfg->source.manifest);
	else
		log_msg(LOG_ERR,
			"%s: the source %s lists 0 objects (%llu keys "
			"skipped); check [source] url and its permissions, or "
			"set [source] allow_empty = true if an empty dataset "
			"is intended",
			cfg->file, cfg->source.url,
			(unsigned long long)skipped);
	return -ENODATA;
}

static uint64_t entry_weight(const void *ctx, size_t i)
{
	const struct manifest *m = ctx;

	return m->entries[i].size;
}

int dataset_load(const struct config *cfg, bool need_backend,
		 struct dataset **out)
{
	struct backend_options opts;
	struct dataset *ds = calloc(1, sizeof(*ds));
	int rc;

	if (ds == NULL)
		return -ENOMEM;
	config_backend_options(cfg, &opts);
	if (need_backend || cfg->source.manifest == NULL) {
		rc = backend_open(cfg->source.url, &opts, &ds->backend);
		if (rc < 0)
			goto err;
	}
	if (cfg->source.manifest != NULL) {
		if (strstr(cfg->source.manifest, "://") != NULL)
			rc = manifest_load_url(cfg->source.manifest, &opts,
					       &ds->manifest);
		else
			rc = manifest_load(cfg->source.manifest, &ds->manifest);
		if (rc < 0) {
			log_msg(LOG_ERR, "cannot load manifest %s",
				cfg->source.manifest);
			goto err;
		}
	} else {
		rc = dataset_list_manifest(ds->backend, &ds->manifest);
		if (rc < 0) {
			log_msg(LOG_ERR, "cannot list %s", cfg->source.url);
			goto err;
		}
	}
	rc = check_not_empty(cfg, ds->manifest);
	if (rc < 0)
		goto err;
	if (cfg->source.manifest_sha256 != NULL &&
	    strcmp(cfg->source.manifest_sha256, ds->manifest->digest) != 0) {
		log_msg(LOG_ERR,
			"manifest digest mismatch: the config pins "
			"manifest_sha256 = %s but %s has sha256 %s; refusing "
			"to serve a different dataset",
			cfg->source.manifest_sha256,
			cfg->source.manifest ? cfg->source.manifest
					     : cfg->source.url,
			ds->manifest->digest);
		rc = -EBADMSG;
		goto err;
	}
	rc = shard_plan_build(&cfg->shard.spec, ds->manifest->count,
			      entry_weight, ds->manifest, &ds->plan);
	if (rc < 0) {
		log_msg(LOG_ERR, "cannot compute the shard plan: %s",
			strerror(-rc));
		goto err;
	}
	*out = ds;
	return 0;
err:
	dataset_free(ds);
	return rc;
}

void dataset_free(struct dataset *ds)
{
	if (ds == NULL)
		return;
	shard_plan_free(ds->plan);
	manifest_free(ds->manifest);
	backend_close(ds->backend);
	free(ds);
}
