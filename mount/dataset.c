/*
 * dataset: see dataset.h.
 */
#include "mount/dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/posix.h"
#include "mount/rbuild.h"
#include "records/frame.h"
#include "records/rplan.h"
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

/* A copy of the listed manifest m of a posix source with each etag cut to
 * the "mtime_ns:size:ino" older shardfs listed (backends/posix.h), or NULL
 * if m is not such a listing or memory runs out. */
static struct manifest *legacy_posix_manifest(const struct backend *be,
					      const struct manifest *m)
{
	struct manifest *old;
	size_t i;
	int rc = 0;

	if (be == NULL || be->ops != &backend_posix_ops)
		return NULL;
	old = manifest_new();
	if (old == NULL)
		return NULL;
	for (i = 0; i < m->count && rc == 0; i++) {
		const struct manifest_entry *e = &m->entries[i];

		rc = manifest_add(
			old, e->key, e->key_len, e->size, e->etag,
			backend_posix_etag_legacy_len(e->etag, e->etag_len),
			e->mtime_ns);
	}
	if (rc == 0)
		rc = manifest_finish(old);
	if (rc < 0) {
		manifest_free(old);
		return NULL;
	}
	/* The keys m skipped are not in it: its counts are m's. */
	memcpy(old->skipped, m->skipped, sizeof(old->skipped));
	return old;
}

/* A pin that does not match a posix listing may have been taken by an
 * older shardfs, whose etags had no ctime. If the listing cut to those
 * etags has the pinned digest, it is the same dataset: serve it with the
 * pinned etags (a file rewritten in place with its mtime put back then
 * goes unseen, as before) and say how to get the full check. Returns true
 * and replaces ds->manifest in that case. */
static bool pin_of_older_listing(const struct config *cfg, struct dataset *ds)
{
	struct manifest *old = legacy_posix_manifest(ds->backend, ds->manifest);

	if (old == NULL || strcmp(old->digest, cfg->source.manifest_sha256)) {
		manifest_free(old);
		return false;
	}
	log_msg(LOG_WARNING,
		"%s: manifest_sha256 = %s is the digest of %s as older "
		"shardfs listed it (etags without the ctime): serving it so; a "
		"file rewritten in place with its mtime put back is not "
		"detected until you pin the digest of today's listing, %s",
		cfg->file, cfg->source.manifest_sha256, cfg->source.url,
		ds->manifest->digest);
	manifest_free(ds->manifest);
	ds->manifest = old;
	return true;
}

/* Reads a small object named by URL ("s3://bucket/dir/name" or
 * "gs://bucket/dir/name", the etag then being the generation) whole:
 * opens a backend on the object's directory with the [source] options,
 * stats the object and reads it pinned to the etag stat saw, so a file
 * replaced mid-read fails instead of mixing versions. what names the file
 * in messages ("manifest", "record index"). *text is NUL-terminated and
 * the caller's to free. */
static int dataset_fetch_url(const char *url,
			     const struct backend_options *opts,
			     const char *what, char **text, size_t *len)
{
	const char *slash = strrchr(url, '/'), *key;
	struct backend *be = NULL;
	struct backend_stat st;
	char *dir = NULL, *buf = NULL;
	size_t done = 0, n;
	int rc;

	if (slash == NULL || slash[1] == '\0' ||
	    (size_t)(slash - url) < strlen("s3://x")) {
		log_msg(LOG_ERR, "%s %s: not an object URL", what, url);
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
			log_msg(LOG_ERR, "%s %s: no such object", what, url);
		goto out;
	}
	if (st.size > (uint64_t)1 << 34) {
		log_msg(LOG_ERR, "%s %s: %llu bytes is too large", what, url,
			(unsigned long long)st.size);
		rc = -EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.size + 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	while (done < st.size) {
		size_t want = st.size - done > (8u << 20) ? (8u << 20)
							  : st.size - done;
		const struct backend_read r = { .key = key,
						.key_len = strlen(key),
						.etag = st.etag,
						.etag_len = st.etag_len,
						.offset = done,
						.len = want,
						.buf = buf + done };

		rc = be->ops->read(be, &r, &n);
		if (rc < 0)
			goto out;
		if (n == 0) {
			log_msg(LOG_ERR, "%s %s: shorter than its size", what,
				url);
			rc = -EIO;
			goto out;
		}
		done += n;
	}
	buf[done] = '\0';
	*text = buf;
	*len = done;
	buf = NULL;
out:
	free(buf);
	backend_close(be);
	free(dir);
	return rc;
}

static int manifest_load_url(const char *url,
			     const struct backend_options *opts,
			     struct manifest **out)
{
	char *text = NULL;
	size_t len = 0;
	int rc = dataset_fetch_url(url, opts, "manifest", &text, &len);

	if (rc == 0)
		rc = manifest_parse(url, text, len, out);
	free(text);
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

/* Where a mount keeps the record index it built: beside the cache, keyed
 * by everything the index is a function of (the manifest and the
 * format). Returns 0 and fills path, or -ENAMETOOLONG. */
static int records_cache_path(const struct config *cfg,
			      const struct manifest *m, char *path, size_t size)
{
	/* REC_FRAME_VERSION: an index built under other framing rules (a
	 * tar read another way) is not reused. */
	int n = snprintf(path, size, "%s/records/%s-%s.f%d.idx", cfg->cache.dir,
			 m->digest, rec_format_name(cfg->records.format),
			 REC_FRAME_VERSION);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Saves a built index where records_cache_path() says, through a
 * temporary file and a rename, readable only by its owner (it lists the
 * dataset). A failure only costs the next mount a rebuild: warned. */
static void records_cache_save(const struct config *cfg,
			       const struct rindex *ri, const char *path)
{
	char dir[4096], tmp[4300];
	FILE *f = NULL;
	int fd, rc = 0;

	snprintf(dir, sizeof(dir), "%s/records", cfg->cache.dir);
	if ((mkdir(cfg->cache.dir, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(dir, 0700) < 0 && errno != EEXIST)) {
		rc = -errno;
		goto out;
	}
	if (snprintf(tmp, sizeof(tmp), "%.4200s.tmp.%ld", path,
		     (long)getpid()) >= (int)sizeof(tmp)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	/* The directory may predate us with other modes: it lists the
	 * dataset, so it is the owner's only, and the temporary file is new
	 * (never a link planted there). */
	if (chmod(dir, 0700) < 0) {
		rc = -errno;
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	f = fdopen(fd, "w");
	if (f == NULL) {
		rc = -errno;
		close(fd);
		unlink(tmp);
		goto out;
	}
	rc = rindex_write(ri, f);
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
out:
	if (rc < 0)
		log_msg(LOG_WARNING,
			"cannot keep the record index in %s (%s): the next "
			"mount builds it again",
			path, strerror(-rc));
}

/* The record index a mount serves: the pinned one ([records] index), or
 * the one an earlier mount built and kept, or one built now. */
static int records_index(const struct config *cfg,
			 const struct backend_options *opts, struct dataset *ds)
{
	const char *pin = cfg->records.index;
	const char *want = cfg->records.index_sha256;
	enum rec_format f = cfg->records.format;
	struct rbuild_options bo = { .progress = isatty(STDERR_FILENO) };
	char path[4200];
	int rc;

	if (pin != NULL && strstr(pin, "://") != NULL) {
		char *text = NULL;
		size_t len = 0;

		rc = dataset_fetch_url(pin, opts, "record index", &text, &len);
		if (rc == 0)
			rc = rindex_parse(pin, text, len, ds->manifest, f, want,
					  &ds->rindex);
		free(text);
	} else if (pin != NULL) {
		rc = rindex_load(pin, ds->manifest, f, want, &ds->rindex);
	} else {
		rc = records_cache_path(cfg, ds->manifest, path, sizeof(path));
		if (rc == 0 && cfg->cache.enabled && access(path, F_OK) == 0) {
			rc = rindex_load(path, ds->manifest, f, NULL,
					 &ds->rindex);
			if (rc < 0)
				log_msg(LOG_WARNING,
					"%s: the record index kept there "
					"is not usable; building it again",
					path);
			rc = 0;
		}
		if (rc == 0 && ds->rindex == NULL) {
			log_msg(LOG_WARNING,
				"%s: no pinned [records] index: building one "
				"from the data, so this node downloads every "
				"record object once to index it (pin an index "
				"made by `shardfs index` to avoid that)",
				cfg->file);
			if (ds->backend == NULL)
				rc = backend_open(cfg->source.url, opts,
						  &ds->backend);
			if (rc == 0)
				rc = rbuild_run(ds->backend, ds->manifest, f,
						&bo, &ds->rindex);
			if (rc == 0 && cfg->cache.enabled)
				records_cache_save(cfg, ds->rindex, path);
		}
		if (rc == 0 && want != NULL &&
		    strcmp(want, ds->rindex->digest) != 0) {
			log_msg(LOG_ERR,
				"record index digest mismatch: the config "
				"pins index_sha256 = %s but the index of %s "
				"has sha256 %s; refusing to serve other "
				"records",
				want, ds->manifest->digest, ds->rindex->digest);
			rc = -EBADMSG;
		}
	}
	if (rc < 0) {
		log_msg(LOG_ERR, "no record index for %s", cfg->file);
		return rc;
	}
	if (ds->rindex->n_records == 0 && !cfg->source.allow_empty) {
		log_msg(LOG_ERR,
			"%s: the record index has 0 records of format %s "
			"(%llu objects skipped for their suffix); refusing to "
			"serve an empty dataset (set [source] allow_empty = "
			"true if that is intended)",
			cfg->file, rec_format_name(f),
			(unsigned long long)ds->rindex->skipped_objects);
		return -ENODATA;
	}
	rc = rplan_build_runs(ds->rindex, &cfg->shard.spec, cfg->records.parts,
			      cfg->records.run_bytes, cfg->records.window,
			      &ds->rplan);
	if (rc < 0)
		log_msg(LOG_ERR, "cannot compute the record plan: %s",
			strerror(-rc));
	return rc;
}

int dataset_load_manifest(const struct config *cfg, bool need_backend,
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
	    strcmp(cfg->source.manifest_sha256, ds->manifest->digest) != 0 &&
	    (cfg->source.manifest != NULL || !pin_of_older_listing(cfg, ds))) {
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
	*out = ds;
	return 0;
err:
	dataset_free(ds);
	return rc;
}

int dataset_load(const struct config *cfg, bool need_backend,
		 struct dataset **out)
{
	struct backend_options opts;
	struct dataset *ds = NULL;
	int rc = dataset_load_manifest(cfg, need_backend, &ds);

	if (rc < 0)
		return rc;
	config_backend_options(cfg, &opts);
	if (cfg->shard.unit == CONFIG_UNIT_RECORD) {
		rc = records_index(cfg, &opts, ds);
		if (rc < 0)
			goto err;
	}
	/* A record view serves no object as a file: its object plan is
	 * empty, and everything that walks one (the view, the order
	 * files, the prefetch hints) finds nothing in it. */
	rc = shard_plan_build(
		&cfg->shard.spec,
		cfg->shard.unit == CONFIG_UNIT_RECORD ? 0 : ds->manifest->count,
		manifest_weight, ds->manifest, &ds->plan);
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
	rplan_free(ds->rplan);
	rindex_free(ds->rindex);
	manifest_free(ds->manifest);
	backend_close(ds->backend);
	free(ds);
}
