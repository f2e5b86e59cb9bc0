/*
 * cmd_mount: `shardfs mount` and the mount(8) form (docs/DESIGN.md §7):
 * load the config, the manifest and the plan, build the tree, open the
 * cache, and serve the mount until it ends.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "fs/fs.h"
#include "fs/view.h"
#include "mount/commands.h"
#include "mount/config.h"
#include "mount/dataset.h"
#include "mount/metrics.h"
#include "mount/overrides.h"
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
	"Returns once the mount serves, unless -f. Stop it with umount, "
	"SIGTERM or SIGINT.\n"
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
	"generic\n"
	"                     mount options (ro, nodev, _netdev, ...) are "
	"accepted\n"
	"                     and ignored. Several -o may be given.\n";

/* --- metrics wiring (ops-status branch): merge into the daemon helper's
 * fs_hooks: ready starts the endpoint, stopping stops it. --- */
struct mount_metrics {
	const struct config *cfg;
	struct metrics *metrics; /* set by ready, cleared by stopping */
};

static void mount_metrics_ready(struct fs *fs, void *arg)
{
	struct mount_metrics *mm = arg;

	/* A port that cannot be bound does not fail the mount: the files
	 * matter more than their statistics (metrics_start logged why). */
	if (mm->cfg->metrics.listen != NULL &&
	    metrics_start(mm->cfg->metrics.listen, fs, &mm->metrics) < 0)
		log_msg(LOG_WARNING,
			"metrics: no endpoint; the mount serves files "
			"as usual (.shardfs/stats still works)");
}

static void mount_metrics_stopping(struct fs *fs, void *arg)
{
	struct mount_metrics *mm = arg;

	(void)fs;
	metrics_stop(mm->metrics);
	mm->metrics = NULL;
}
/* --- end of metrics wiring --- */

static bool config_rank_filter(const void *ctx, uint64_t r)
{
	return config_rank_selected(ctx, r);
}

int cmd_mount(int argc, char **argv, bool helper_form)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "single", no_argument, NULL, 's' },
		{ "debug", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct overrides ov = { 0 };
	struct fs_options fo = { 0 };
	struct config *cfg = NULL;
	struct dataset *ds = NULL;
	struct view *view = NULL;
	struct cache *cache = NULL;
	const char *mountpoint;
	struct stat st;
	int c, rc = EXIT_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "fsdvqho:", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'f':
			fo.foreground = true;
			break;
		case 's':
			fo.single_thread = true;
			break;
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
		case 'h':
			fputs(usage_mount, stdout);
			rc = EXIT_OK;
			goto out;
		case 'o':
			if (overrides_parse(&ov, optarg) < 0)
				goto out;
			break;
		default:
			fputs(usage_mount, stderr);
			goto out;
		}
	}
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
	if (stat(mountpoint, &st) < 0) {
		log_msg(LOG_ERR, "mountpoint %s: %s", mountpoint,
			strerror(errno));
		rc = EXIT_RUNTIME;
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		log_msg(LOG_ERR, "mountpoint %s: not a directory", mountpoint);
		rc = EXIT_RUNTIME;
		goto out;
	}
	rc = EXIT_RUNTIME;
	if (dataset_load(cfg, true, &ds) < 0)
		goto out;
	if (view_build(ds->manifest, ds->plan, config_rank_filter, cfg, &view) <
	    0) {
		log_msg(LOG_ERR, "cannot build the directory tree: out of "
				 "memory");
		goto out;
	}
	if (mount_cache_open(cfg, ds->backend, &cache) < 0)
		goto out;
	log_msg(LOG_INFO, "manifest %s: %zu objects, %llu bytes, sha256 %s",
		cfg->source.manifest ? cfg->source.manifest : cfg->source.url,
		ds->manifest->count,
		(unsigned long long)ds->manifest->total_bytes,
		ds->manifest->digest);
	fo.mountpoint = mountpoint;
	fo.source = cfg->source.url;
	fo.allow_other = cfg->mount.allow_other || ov.allow_other;
	{
		struct fs_data data = {
			.manifest = ds->manifest,
			.spec = &cfg->shard.spec,
			.plan = ds->plan,
			.view = view,
			.cache = cache,
		};

		/* metrics wiring (ops-status): merge into the daemon hooks. */
		struct mount_metrics mm = { .cfg = cfg };
		struct fs_hooks hooks = {
			.arg = &mm,
			.ready = mount_metrics_ready,
			.stopping = mount_metrics_stopping,
		};

		rc = fs_run(&fo, &data, &hooks) < 0 ? EXIT_RUNTIME : EXIT_OK;
	}
out:
	cache_free(cache);
	view_free(view);
	dataset_free(ds);
	config_free(cfg);
	overrides_free(&ov);
	return rc;
}
