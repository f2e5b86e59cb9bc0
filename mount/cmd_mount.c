/*
 * cmd_mount: `shardfs mount` and the mount(8) form (docs/DESIGN.md §7):
 * load the config, check the mount point (mountpoint.h), fork into the
 * background unless -f (daemon.h; before any thread starts), load the
 * manifest and the plan, build the tree, open the cache, and serve the
 * mount until it ends, telling systemd how it goes (notify.h) from the
 * hooks fs_run() calls.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/http.h"
#include "cache/cache.h"
#include "fs/fs.h"
#include "fs/recview.h"
#include "fs/view.h"
#include "mount/commands.h"
#include "mount/config.h"
#include "mount/daemon.h"
#include "mount/dataset.h"
#include "mount/logtarget.h"
#include "mount/metrics.h"
#include "mount/mountpoint.h"
#include "mount/notify.h"
#include "mount/overrides.h"
#include "mount/transforms.h"
#include "mount/reload.h"
#include "util/log.h"

const char usage_mount[] =
	"usage: shardfs mount CONFIG [MOUNTPOINT] [options]\n"
	"\n"
	"Mounts MOUNTPOINT (default: [mount] path in CONFIG) with one "
	"directory per\n"
	"selected rank, rank-R/, holding that rank's files under their "
	"original\n"
	"relative paths, and .shardfs/ with manifest.tsv, plan, "
	"rank-R.order, stats.\n"
	"Returns once the mount serves, unless -f; then logs to [log] target "
	"(auto:\n"
	"[log] file, the journal, syslog, else [log] dir/MOUNTNAME.log; it "
	"says which).\n"
	"Refuses a mount point that is mounted or not empty (see -o "
	"nonempty); a dead\n"
	"mount left by a killed daemon is unmounted first. Stop it with "
	"shardfs unmount,\n"
	"umount, SIGTERM or SIGINT; SIGHUP reloads.\n"
	"\n"
	"options:\n"
	"  -f, --foreground   stay in the foreground\n"
	"  -s, --single       serve one request at a time\n"
	"  -d, --debug        trace every FUSE request (implies -f, -v)\n"
	"  -v, --verbose      log debug messages\n"
	"  -q, --quiet        log warnings and errors only\n"
	"  -o OPTS            comma-separated: section.key=value overrides a "
	"config\n"
	"                     key (e.g. shard.world_size=8); allow_other; "
	"nonempty;\n"
	"                     generic mount options (ro, rw, nodev, _netdev, "
	"x-*, ...)\n"
	"                     are accepted and ignored. Several -o may be "
	"given.\n"
	"\n"
	"mount(8) form: shardfs CONFIG MOUNTPOINT [-sfnv] [-o OPTS] "
	"[-t fuse.shardfs]\n"
	"  (mount -t fuse.shardfs CONFIG MOUNTPOINT, an fstab line): "
	"always in the\n"
	"  background; -s ignores unknown options with a warning, -f checks "
	"without\n"
	"  mounting, -n is ignored, -v logs debug messages.\n";

static bool config_rank_filter(const void *ctx, uint64_t r)
{
	return config_rank_selected(ctx, r);
}

/*
 * What the hooks need while the mount runs. fs_run() calls the three hooks
 * below from its own threads: ready (readiness, STATUS=, the metrics
 * endpoint), reload (one per SIGHUP, in the reload thread) and stopping.
 */
struct mount_run {
	const struct config *cfg; /* as started: what cannot change live */
	const char *mountpoint;	  /* absolute: the daemon moves to "/" */
	struct cache *cache;
	struct logtarget log; /* where lines go once serving */
	/* What SIGHUP re-reads; only the reload thread uses it. */
	struct mount_reload reload;
	pthread_mutex_t lock;
	struct mount_served served;   /* protected by lock (a reload sets it) */
	struct notify_ticker *ticker; /* STATUS= and WATCHDOG=1 */
	struct metrics *metrics;      /* [metrics] listen, or NULL */
};

/* The STATUS= line: what is served and how the cache does. Sizes in the
 * unit that fits ("0.0 GiB" said nothing of a small dataset). */
static void mount_status_text(void *arg, char *buf, size_t cap)
{
	struct mount_run *run = arg;
	struct mount_served sv;
	struct cache_stats st;
	unsigned long long lookups;
	char size[32], read[32];

	pthread_mutex_lock(&run->lock);
	sv = run->served;
	pthread_mutex_unlock(&run->lock);
	cache_stats_get(run->cache, &st);
	lookups = (unsigned long long)(st.hits + st.misses);
	cmd_human_bytes(size, sizeof(size), (double)sv.bytes);
	cmd_human_bytes(read, sizeof(read), (double)st.backend_bytes);
	if (!st.enabled)
		snprintf(buf, cap,
			 "serving %zu objects (%s), ranks %s of %llu; "
			 "no disk cache; %s read from the source",
			 sv.objects, size, sv.ranks,
			 (unsigned long long)sv.world_size, read);
	else
		snprintf(buf, cap,
			 "serving %zu objects (%s), ranks %s of %llu; "
			 "cache hit rate %.1f%% (%llu of %llu chunks); "
			 "%s read from the source",
			 sv.objects, size, sv.ranks,
			 (unsigned long long)sv.world_size,
			 lookups ? 100.0 * (double)st.hits / (double)lookups
				 : 0.0,
			 (unsigned long long)st.hits, lookups, read);
}

/* hooks->ready: the mount answers (a stat went through the kernel). */
static void mount_on_ready(struct fs *fs, void *arg)
{
	struct mount_run *run = arg;
	char status[512];

	(void)fs;
	/* The log moves to its target, then (background) the waiting
	 * `shardfs mount` returns. */
	logtarget_switch(&run->log);
	daemon_serving(run->log.keep_stderr);
	mount_status_text(run, status, sizeof(status));
	log_msg(LOG_INFO, "%s: %s", run->mountpoint, status);
	notify_ready(status);
	if (notify_ticker_start(run->mountpoint, mount_status_text, run,
				&run->ticker) < 0)
		run->ticker = NULL;
	/* A port that cannot be bound does not fail the mount: the files
	 * matter more than their statistics (metrics_start logged why). */
	if (run->cfg->metrics.listen != NULL &&
	    metrics_start(run->cfg->metrics.listen, fs, &run->metrics) < 0)
		log_msg(LOG_WARNING, "metrics: no endpoint; the mount serves "
				     "files as usual (.shardfs/stats still "
				     "works)");
}

/* hooks->reload: one per SIGHUP, in fs_run's reload thread. */
static int mount_on_reload(struct fs *fs, void *arg)
{
	struct mount_run *run = arg;
	char status[512];
	int rc;

	notify_reloading();
	rc = mount_reload(fs, &run->reload);
	if (rc == -ECANCELED)
		return rc; /* the mount is ending: STOPPING=1 comes next */
	if (rc == 0) {
		pthread_mutex_lock(&run->lock);
		run->served = run->reload.served;
		pthread_mutex_unlock(&run->lock);
	}
	mount_status_text(run, status, sizeof(status));
	notify_ready(status);
	return rc;
}

/* hooks->stopping: the loop ended (signal, unmount, abort). */
static void mount_on_stopping(struct fs *fs, void *arg)
{
	struct mount_run *run = arg;

	(void)fs;
	notify_stopping("unmounting");
	notify_ticker_stop(run->ticker);
	run->ticker = NULL;
	metrics_stop(run->metrics);
	run->metrics = NULL;
}

/* Loads, builds and serves; the part that runs in the daemon. */
static int mount_serve(struct mount_run *run, struct fs_options *fo)
{
	struct fs_hooks hooks = {
		.arg = run,
		.ready = mount_on_ready,
		.reload = mount_on_reload,
		.stopping = mount_on_stopping,
	};
	const struct config *cfg = run->cfg;
	struct dataset *ds = NULL;
	struct view *view = NULL;
	struct cache *cache = NULL;
	struct mount_transforms *transforms = NULL;
	int rc = EXIT_RUNTIME;

	if (dataset_load(cfg, true, &ds) < 0)
		goto out;
	if (view_build(ds->manifest, ds->plan, ds->rplan, config_rank_filter,
		       cfg, &view) < 0) {
		log_msg(LOG_ERR, "cannot build the directory tree: out of "
				 "memory");
		goto out;
	}
	if (mount_cache_open(cfg, ds->backend, &cache) < 0)
		goto out;
	if (ds->rindex != NULL && rec_format_gzip(ds->rindex->format)) {
		struct cache_stats cs;

		uint64_t decoded = 0;
		size_t i;

		cache_stats_get(cache, &cs);
		for (i = 0; i < ds->rindex->n_objects; i++)
			decoded += ds->rindex->objects[i].decoded_size;
		/* Evicted before it is read, a decompressed chunk costs a
		 * whole object's download and inflate again. */
		if (cs.enabled && cs.budget_bytes && decoded > cs.budget_bytes)
			log_msg(LOG_WARNING,
				"the %s records decompress to %llu bytes, more "
				"than the cache's budget of %llu: chunks "
				"evicted before they are read make whole "
				"objects be downloaded and decompressed again "
				"(raise [cache] size)",
				rec_format_name(ds->rindex->format),
				(unsigned long long)decoded,
				(unsigned long long)cs.budget_bytes);
		if (!cs.enabled) {
			log_msg(LOG_ERR,
				"[records] format %s is decompressed once into "
				"the disk cache, which could not be opened "
				"(see above); not mounting",
				rec_format_name(ds->rindex->format));
			goto out;
		}
	}
	if (ds->rindex != NULL && recview_register(cache) < 0) {
		log_msg(LOG_ERR,
			"cannot set up the record view: out of memory");
		goto out;
	}
	if (cfg->n_transforms > 0 && ds->rindex != NULL) {
		/* Record-level transforms are not made (RECORDS.md says
		 * what they would need). */
		log_msg(LOG_ERR,
			"%s:%u: [transform %s] with [shard] unit = record: a "
			"transform maps whole objects, and a record view "
			"shows no objects; remove the [transform] sections or "
			"use unit = object; not mounting",
			cfg->file, cfg->transforms[0].line,
			cfg->transforms[0].name);
		goto out;
	}
	if (mount_transforms_open(cfg, cache, &transforms) < 0)
		goto out;
	if (ds->rindex != NULL)
		log_msg(LOG_INFO,
			"record view: %llu %s records in %zu objects, %u "
			"parts per rank, index sha256 %s",
			(unsigned long long)ds->rindex->n_records,
			rec_format_name(ds->rindex->format),
			ds->rindex->n_objects, rplan_parts(ds->rplan),
			ds->rindex->digest);
	log_msg(LOG_INFO, "manifest %s: %zu objects, %llu bytes, sha256 %s",
		cfg->source.manifest ? cfg->source.manifest : cfg->source.url,
		ds->manifest->count,
		(unsigned long long)ds->manifest->total_bytes,
		ds->manifest->digest);
	run->cache = cache;
	run->reload.cache = cache;
	run->reload.transforms =
		mount_transforms_views(transforms, &run->reload.n_transforms);
	mount_served_fill(cfg, ds, &run->served);
	{
		struct fs_data data = {
			.manifest = ds->manifest,
			.spec = &cfg->shard.spec,
			.plan = ds->plan,
			.rindex = ds->rindex,
			.rplan = ds->rplan,
			.view = view,
			.cache = cache,
			.transforms = run->reload.transforms,
			.n_transforms = run->reload.n_transforms,
		};

		fo->xforms = mount_transforms_list(transforms, &fo->n_xforms);
		rc = fs_run(fo, &data, &hooks) < 0 ? EXIT_RUNTIME : EXIT_OK;
	}
	notify_ticker_stop(run->ticker);
	run->ticker = NULL;
out:
	mount_transforms_stop(transforms); /* no verify reads the cache */
	cache_free(cache);
	mount_transforms_free(transforms); /* after the cache: see there */
	view_free(view);
	dataset_free(ds);
	return rc;
}

int cmd_mount(int argc, char **argv, bool helper_form)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "single", no_argument, NULL, 's' },
		{ "debug", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		CMD_LONGOPTS_END,
	};
	/* mount(8)'s helper flags: spec dir [-sfnv] [-N ns] [-o opts]
	 * [-t type.subtype]; -s is sloppy and -f fake there. */
	static const struct option no_longopts[] = { { NULL, 0, NULL, 0 } };
	struct overrides ov = { 0 };
	struct fs_options fo = { 0 };
	struct mount_run run = { 0 };
	struct config *cfg = NULL;
	const char *mountpoint, **opt_args = NULL;
	char *abs_mountpoint = NULL, *config_abs = NULL;
	size_t n_opt_args = 0, i;
	bool fake = false;
	int c, rc = EXIT_USAGE;

	opt_args = calloc((size_t)argc, sizeof(*opt_args));
	if (opt_args == NULL)
		return EXIT_RUNTIME;
	/* A SIGHUP while the manifest loads is a reload for later, never
	 * the end of the mount. */
	fs_signals_early();
	optind = 1;
	while ((c = getopt_long(
			argc, argv, helper_form ? "sfnvhN:t:o:" : "fsdvqho:",
			helper_form ? no_longopts : longopts, NULL)) != -1) {
		if (helper_form && c == 's')
			c = 'S'; /* sloppy */
		else if (helper_form && c == 'f')
			c = 'F'; /* fake */
		switch (c) {
		case 'f':
			fo.foreground = true;
			break;
		case 's':
			fo.single_thread = true;
			break;
		case 'S':
			ov.sloppy = true;
			break;
		case 'F':
			fake = true;
			break;
		case 'n':
		case 't':
			break; /* no mtab to skip; the type is ours */
		case 'N':
			fprintf(stderr,
				"shardfs: -N %s: mounting in another "
				"namespace is not supported\n",
				optarg);
			goto out;
		case 'd':
			fo.debug = fo.foreground = true;
			log_set_level(LOG_DEBUG);
			break;
		case 'v':
			log_set_level(LOG_DEBUG);
			break;
		case 'q':
			log_set_level(LOG_WARNING);
			break;
		case 'o':
			opt_args[n_opt_args++] = optarg;
			break;
		default:
			rc = cmd_option_other(c, usage_mount);
			goto out;
		}
	}
	/* After the loop, so -s applies wherever it stands. */
	for (i = 0; i < n_opt_args; i++)
		if (overrides_parse(&ov, opt_args[i]) < 0)
			goto out;
	if (argc - optind < 1 || argc - optind > 2 ||
	    (helper_form && argc - optind != 2)) {
		rc = cmd_usage_error(usage_mount, "%s",
				     argc - optind < 1
					     ? "mount: CONFIG missing"
					     : "mount: too many arguments");
		goto out;
	}
	if (ov.debug) {
		fo.debug = fo.foreground = true;
		log_set_level(LOG_DEBUG);
	}
	rc = cmd_load_config(argv[optind], &ov, &cfg);
	if (rc != 0)
		goto out;
	rc = EXIT_USAGE;
	mountpoint = argc - optind == 2 ? argv[optind + 1] : cfg->mount.path;
	if (mountpoint == NULL) {
		rc = cmd_usage_error(
			usage_mount, "%s",
			"mount: no MOUNTPOINT given and no [mount] "
			"path in the config");
		goto out;
	}
	rc = EXIT_OK;
	if (fake)
		goto out; /* mount -f: the config is good; mount nothing */
	rc = EXIT_RUNTIME;
	if (mountpoint_prepare(mountpoint, cfg->mount.nonempty || ov.nonempty) <
	    0)
		goto out;
	abs_mountpoint = realpath(mountpoint, NULL);
	if (abs_mountpoint == NULL) {
		log_msg(LOG_ERR, "mountpoint %s: %s", mountpoint,
			strerror(errno));
		goto out;
	}
	if (logtarget_prepare(cfg, abs_mountpoint, fo.foreground, &run.log) < 0)
		goto out;
	if (!fo.foreground) {
		/* Before any thread: the child does the rest. */
		c = daemon_fork();
		if (c >= 0) {
			rc = c;
			goto out;
		}
	}
	fo.mountpoint = abs_mountpoint;
	fo.source = cfg->source.url;
	fo.allow_other = cfg->mount.allow_other || ov.allow_other;
	fo.page_cache = cfg->prefetch.files ? cfg->prefetch.page_cache : 0;
	fo.libcurl = http_version();
	run.cfg = cfg;
	run.mountpoint = abs_mountpoint;
	/* SIGHUP re-reads this file with these overrides; absolute, since
	 * a background mount's cwd is "/". */
	config_abs = realpath(argv[optind], NULL);
	run.reload.config_path = config_abs ? config_abs : argv[optind];
	run.reload.ov = &ov;
	run.reload.running = cfg;
	pthread_mutex_init(&run.lock, NULL);
	rc = mount_serve(&run, &fo);
	pthread_mutex_destroy(&run.lock);
out:
	free(abs_mountpoint);
	free(config_abs);
	free(opt_args);
	config_free(cfg);
	overrides_free(&ov);
	return rc;
}
