/*
 * transforms: opens a mount's [transform NAME] sections (mount/transforms.h).
 * Each section's keys map onto a struct transform_spec one to one, but for
 * two the config does not have: RLIMIT_CPU in process mode is timeout_ms
 * rounded up to seconds plus one (a backstop under the runner's wall-clock
 * kill, which comes first), and the hidden paths. The sandbox hides the
 * mount's own files: the cache directory (a transform must not read other
 * outputs, nor write any), the config's directory and the log directory;
 * and the stores' credential files the daemon may read (those named by
 * AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, AWS_WEB_IDENTITY_TOKEN_FILE
 * and GOOGLE_APPLICATION_CREDENTIALS, and $HOME/.aws and
 * $HOME/.config/gcloud): usually root's 0600 files the transform's user
 * cannot read anyway, hidden for the day one is not. The environment that
 * names them is cleared but for the transform's allow-list.
 */
#include "mount/transforms.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/xform.h"
#include "transform/transform.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/sha256.h"

struct mount_transforms {
	size_t n;
	struct transform **t;
	struct xform **x;
	struct fs_transform *views; /* strings owned: names, suffixes */
};

const struct fs_transform *
mount_transforms_views(const struct mount_transforms *m, size_t *n)
{
	*n = m != NULL ? m->n : 0;
	return m != NULL ? m->views : NULL;
}

void mount_transforms_free(struct mount_transforms *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		xform_free(m->x[i]);
		transform_close(m->t[i]);
		free((char *)m->views[i].name);
		free((char *)m->views[i].suffix);
	}
	free(m->views);
	free(m->t);
	free(m->x);
	free(m);
}

void mount_transforms_stop(struct mount_transforms *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		xform_stop(m->x[i]);
}

size_t mount_transforms_count(const struct mount_transforms *m)
{
	return m ? m->n : 0;
}

struct xform *mount_transforms_at(const struct mount_transforms *m, size_t i)
{
	return m && i < m->n ? m->x[i] : NULL;
}

struct xform *const *mount_transforms_list(const struct mount_transforms *m,
					   size_t *n)
{
	*n = m ? m->n : 0;
	return m ? m->x : NULL;
}

struct xform *mount_transforms_find(const struct mount_transforms *m,
				    const char *name)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (!strcmp(xform_name(m->x[i]), name))
			return m->x[i];
	return NULL;
}

#define CRED_ENV_N 4 /* the variables naming credential files, below */

/* Opens ct into m (which has room). */
static int open_one(const struct config *cfg, const struct config_transform *ct,
		    struct cache *cache, struct mount_transforms *m)
{
	static const char *const cred_env[CRED_ENV_N] = {
		"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "GOOGLE_APPLICATION_CREDENTIALS"
	};
	char *conf_copy = strdup(cfg->file);
	char home_aws[PATH_MAX], home_gcloud[PATH_MAX];
	const char *home = getenv("HOME");
	const char *hide[3 + CRED_ENV_N + 2 + 1] = { cfg->cache.dir, NULL,
						     cfg->log.dir };
	size_t nh = 3;
	struct transform_spec spec = {
		.name = ct->name,
		.version = ct->version,
		.argv = (const char *const *)ct->argv,
		.mode = ct->mode,
		.workers = ct->workers,
		.timeout_ms = ct->timeout_ms,
		.memory = ct->memory,
		.output_max = ct->output_max,
		.user = ct->user,
		.sandbox = ct->sandbox,
		.env = (const char *const *)ct->env,
		.hide = hide,
		.cpu_seconds =
			ct->mode == TRANSFORM_MODE_PROCESS
				? (unsigned)((ct->timeout_ms + 999) / 1000) + 1
				: 0,
	};
	struct xform_options xo = { .name = ct->name,
				    .verify_percent = ct->verify_percent };
	uint8_t id[SHA256_LEN];
	char hex[2 * SHA256_LEN + 1];
	struct transform *t = NULL;
	struct xform *x = NULL;
	int rc;

	if (!conf_copy)
		return -ENOMEM;
	hide[1] = dirname(conf_copy);
	for (size_t i = 0; i < CRED_ENV_N; i++) {
		const char *v = getenv(cred_env[i]);

		if (v && v[0] == '/')
			hide[nh++] = v;
	}
	if (home && home[0] == '/' &&
	    snprintf(home_aws, sizeof(home_aws), "%s/.aws", home) <
		    (int)sizeof(home_aws) &&
	    snprintf(home_gcloud, sizeof(home_gcloud), "%s/.config/gcloud",
		     home) < (int)sizeof(home_gcloud)) {
		hide[nh++] = home_aws;
		hide[nh++] = home_gcloud;
	}
	hide[nh] = NULL;
	rc = transform_open(&spec, &t);
	free(conf_copy);
	if (rc) {
		log_msg(LOG_ERR,
			"%s:%u: [transform %s]: cannot run %s: %s (see "
			"above); not mounting",
			cfg->file, ct->line, ct->name, ct->argv[0],
			strerror(-rc));
		return rc;
	}
	rc = xform_attach(cache, t, &xo, &x);
	if (rc) {
		log_msg(LOG_ERR, "[transform %s]: %s", ct->name, strerror(-rc));
		transform_close(t);
		return rc;
	}
	m->t[m->n] = t;
	m->x[m->n] = x;
	m->views[m->n].replace_extension = ct->replace_extension;
	m->views[m->n].x = x;
	m->views[m->n].name = strdup(ct->name);
	m->views[m->n].suffix = strdup(ct->suffix);
	m->n++; /* freed with m, after the cache, whatever follows */
	if (!m->views[m->n - 1].name || !m->views[m->n - 1].suffix)
		return -ENOMEM;
	transform_identity(t, id);
	hex_encode(id, sizeof(id), hex);
	log_msg(LOG_INFO,
		"transform %s: %s (%s mode, %s sandbox, as %s), identity %s; "
		"its outputs are served under transform-%s/",
		ct->name, ct->command,
		ct->mode == TRANSFORM_MODE_WORKER ? "worker" : "process",
		ct->sandbox == TRANSFORM_SANDBOX_NONE ? "no" : "bwrap",
		ct->user, hex, ct->name);
	if (ct->sandbox == TRANSFORM_SANDBOX_NONE)
		log_msg(LOG_WARNING,
			"transform %s: sandbox = none: it runs as %s with its "
			"limits but in no sandbox: it can reach the network "
			"and read whatever %s can read",
			ct->name, ct->user, ct->user);
	return 0;
}

int mount_transforms_open(const struct config *cfg, struct cache *cache,
			  struct mount_transforms **out)
{
	struct mount_transforms *m;
	struct cache_stats cs;
	int rc = 0;

	*out = NULL;
	if (cfg->n_transforms == 0)
		return 0;
	cache_stats_get(cache, &cs);
	if (!cs.enabled) {
		log_msg(LOG_ERR,
			"%s:%u: [transform %s]: transforms keep their outputs "
			"in the disk cache, which is not open (see above); not "
			"mounting",
			cfg->file, cfg->transforms[0].line,
			cfg->transforms[0].name);
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->t = calloc(cfg->n_transforms, sizeof(*m->t));
	m->x = calloc(cfg->n_transforms, sizeof(*m->x));
	m->views = calloc(cfg->n_transforms, sizeof(*m->views));
	if (!m->t || !m->x || !m->views)
		rc = -ENOMEM;
	for (size_t i = 0; i < cfg->n_transforms && !rc; i++)
		rc = open_one(cfg, &cfg->transforms[i], cache, m);
	/* Even on failure: the cache holds the attached ones' producers, so
	 * they are freed after it, by the caller. */
	*out = m;
	return rc;
}
