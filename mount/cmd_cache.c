/*
 * cmd_cache: `shardfs cache stat|verify|clear DIR`, and mount_cache_open(),
 * the mapping from [cache] to cache_open() options. See commands.h.
 *
 * The subcommands open DIR in inspection mode (no cleanup at open), so they
 * can run next to mounts using the same directory and change nothing but
 * what they are asked to.
 */
#include "mount/commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"
#include "util/str.h"

const char usage_cache[] =
	"usage: shardfs cache stat|verify|clear DIR\n"
	"\n"
	"Inspects the node-local cache in DIR ([cache] dir of a config). "
	"Safe while\n"
	"mounts use DIR.\n"
	"\n"
	"  stat    entries (inline and blob), live bytes, the budget and "
	"chunk size\n"
	"          the last mount set, and the index file's size\n"
	"  verify  checks every entry's CRCs, lengths and identity; lists bad "
	"entries\n"
	"          and exits 1 if there are any\n"
	"  clear   removes every entry; mounts refetch what they need\n";

static char *backend_id(const struct config *cfg)
{
	size_t len = strlen(cfg->source.url);
	char *id;

	while (len > 1 && cfg->source.url[len - 1] == '/')
		len--;
	if (asprintf(&id, "%.*s%s%s", (int)len, cfg->source.url,
		     cfg->source.endpoint ? " " : "",
		     cfg->source.endpoint ? cfg->source.endpoint : "") < 0)
		return NULL;
	return id;
}

static int cache_open_cfg(const struct config *cfg, struct backend *be,
			  struct cache **out)
{
	struct cache_options o = { 0 };
	char *id;
	int rc;

	if (!cfg->cache.enabled) {
		log_msg(LOG_INFO, "cache disabled (cache.enabled = false): "
				  "every read goes to the source");
		return cache_new(be, out);
	}
	id = backend_id(cfg);
	if (id == NULL)
		return -ENOMEM;
	o.dir = cfg->cache.dir;
	o.backend_id = id;
	o.size_bytes = cfg->cache.size_bytes;
	o.size_percent = cfg->cache.size_percent;
	o.chunk_size = cfg->cache.chunk_size;
	o.inline_max = cfg->cache.inline_max;
	o.inline_max_set = true;
	o.fsync = cfg->cache.fsync;
	rc = cache_open(&o, be, out);
	free(id);
	/* A held owners.lock is someone's doing: say so (logged) and stop,
	 * rather than read uncached behind the operator's back. */
	if (rc == -ENOMEM || rc == -ETIMEDOUT)
		return rc;
	if (rc < 0) {
		log_msg(LOG_WARNING,
			"cache %s cannot be used (%s): reading uncached",
			cfg->cache.dir, strerror(-rc));
		return cache_new(be, out);
	}
	return 0;
}

int mount_cache_open(const struct config *cfg, struct backend *be,
		     struct cache **out)
{
	struct cache_fetch_options fo = {
		.connections = cfg->prefetch.connections,
		.memory = cfg->prefetch.memory,
		.files = cfg->prefetch.files,
		/* A reader waiting on another's fetch gives up only after
		 * that fetch had time to fail by itself (read_timeout_ms)
		 * and a retry to run. */
		.wait_ms = 2 * (uint64_t)cfg->source.read_timeout_ms + 15000,
		.hedge_off = !cfg->prefetch.hedge,
	};
	int rc = cache_open_cfg(cfg, be, out);

	if (rc == 0)
		cache_set_fetch_options(*out, &fo);
	return rc;
}

/* Key and etag escaped as in the manifest, the source made printable:
 * what the index holds came from the store, and goes to a terminal. */
static void print_bad(void *arg, const struct cache_bad_entry *b)
{
	char kb[LOG_KEY_MAX], eb[LOG_KEY_MAX], sb[LOG_KEY_MAX];

	(void)arg;
	str_printable(sb, sizeof(sb), b->backend_id, strlen(b->backend_id));
	printf("bad %s: %s (source %s, key %s, etag %s, chunk %llu)\n",
	       b->hash_hex, b->reason, sb, log_key(kb, b->key, strlen(b->key)),
	       log_key(eb, b->etag, strlen(b->etag)),
	       (unsigned long long)b->chunk);
}

int cmd_cache(int argc, char **argv)
{
	struct cache_options o = { 0 };
	struct cache *c = NULL;
	const char *action, *dir;
	char *index = NULL;
	struct stat st;
	int rc = EXIT_RUNTIME;

	if (argc == 2 &&
	    (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs(usage_cache, stdout);
		return EXIT_OK;
	}
	if (argc != 3 ||
	    (strcmp(argv[1], "stat") && strcmp(argv[1], "verify") &&
	     strcmp(argv[1], "clear"))) {
		fprintf(stderr,
			"shardfs: cache: expected stat, verify or "
			"clear and a directory\n%s",
			usage_cache);
		return EXIT_USAGE;
	}
	action = argv[1];
	dir = argv[2];
	if (asprintf(&index, "%s/index.mdb", dir) < 0)
		return EXIT_RUNTIME;
	if (stat(index, &st) != 0) {
		fprintf(stderr, "shardfs: cache %s: no cache in %s (%s)\n",
			action, dir, strerror(errno));
		free(index);
		return EXIT_RUNTIME;
	}
	free(index);
	o.dir = dir;
	o.inspect = true;
	/* clear must work on any index, even a damaged one. */
	o.repair = !strcmp(action, "clear");
	if (cache_open(&o, NULL, &c) < 0) {
		fprintf(stderr, "shardfs: cache %s: cannot open %s\n", action,
			dir);
		return EXIT_RUNTIME;
	}
	if (!strcmp(action, "stat")) {
		struct cache_info in;

		if (cache_info(c, &in) == 0) {
			printf("dir %s\nentries %llu\ninline_entries %llu\n"
			       "blob_entries %llu\nlive_bytes %llu\n"
			       "budget_bytes %llu\nchunk_size %llu\n"
			       "index_file_bytes %llu\n",
			       dir, (unsigned long long)in.entries,
			       (unsigned long long)in.inline_entries,
			       (unsigned long long)in.blob_entries,
			       (unsigned long long)in.live_bytes,
			       (unsigned long long)in.budget_bytes,
			       (unsigned long long)in.chunk_size,
			       (unsigned long long)in.data_file_bytes);
			rc = EXIT_OK;
		}
	} else if (!strcmp(action, "verify")) {
		uint64_t checked = 0;
		int bad = cache_verify(c, print_bad, NULL, &checked);

		if (bad >= 0) {
			printf("checked %llu entries, %d bad\n",
			       (unsigned long long)checked, bad);
			rc = bad == 0 ? EXIT_OK : EXIT_RUNTIME;
		}
	} else {
		int e = cache_clear(c);

		if (e == 0) {
			printf("cleared %s\n", dir);
			rc = EXIT_OK;
		} else {
			fprintf(stderr, "shardfs: cache clear %s: %s\n", dir,
				strerror(-e));
		}
	}
	if (fflush(stdout) != 0)
		rc = EXIT_RUNTIME;
	cache_free(c);
	return rc;
}
