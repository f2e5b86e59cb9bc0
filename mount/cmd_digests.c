/*
 * cmd_digests: `shardfs digests CONFIG --transform NAME [--rank LIST]...
 * [--run] [--check FILE]`: the SHA-256 of every stored output of [transform
 * NAME] for the objects of the selected ranks, so that two nodes, or a node
 * and a pinned list, can be compared with diff(1) or --check.
 *
 * One line per object, in the manifest's order: the key escaped as in the
 * manifest, a TAB, the output's SHA-256 in hex (or "-": not stored), a TAB,
 * its size (or "-"). Only stored outputs are read (ready reads: nothing is
 * fetched or run) unless --run, which produces the missing ones first (as
 * `shardfs warm --transform` does). The digest is of the bytes as stored
 * and CRC-checked, so a node's list says what its readers get.
 *
 * --check FILE compares the lines with FILE's (any order; lines are
 * matched by key) and prints every difference to stderr, first the keys
 * that differ; exit 1 if any.
 */
#include "mount/commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/xform.h"
#include "mount/dataset.h"
#include "mount/transforms.h"
#include "util/hex.h"
#include "util/log.h"

/* Differences printed by --check before "... and N more". */
#define DIGESTS_SHOW_MAX 20

const char usage_digests[] =
	"usage: shardfs digests CONFIG --transform NAME [--rank LIST]... "
	"[--run]\n"
	"       [--check FILE] [-o section.key=value,...]\n"
	"\n"
	"Writes KEY<TAB>SHA256<TAB>SIZE for the stored output of [transform "
	"NAME] of\n"
	"every file of the selected ranks (\"-\" for one not stored), in the "
	"manifest's\n"
	"order, keys escaped as in the manifest: compare two nodes with "
	"diff(1).\n"
	"Ranks: --rank LIST (may be repeated), else [shard] ranks, else all.\n"
	"\n"
	"  --run         produce the outputs not stored first (runs the "
	"transform)\n"
	"  --check FILE  compare with FILE (such a list) instead of printing; "
	"the\n"
	"                differing keys go to stderr\n"
	"\n"
	"exit codes: 0 ok (--check: identical), 1 a difference or a failed "
	"output,\n"
	"2 usage or config error\n";

static int line_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	size_t kx = strcspn(x, "\t"), ky = strcspn(y, "\t");
	int c = memcmp(x, y, kx < ky ? kx : ky);

	return c ? c : (kx > ky) - (kx < ky);
}

/* Reads FILE's lines (without their newline) into *out. */
static int lines_read(const char *path, char ***out, size_t *n)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, **v = NULL;
	size_t cap = 0, vcap = 0;
	ssize_t len;

	*n = 0;
	if (!f) {
		fprintf(stderr, "shardfs: digests: --check %s: %s\n", path,
			strerror(errno));
		return -errno;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len == 0)
			continue;
		if (*n == vcap) {
			char **g = realloc(v, (vcap = vcap ? 2 * vcap : 256) *
						      sizeof(*v));

			if (!g)
				break;
			v = g;
		}
		v[(*n)++] = line;
		line = NULL;
		cap = 0;
	}
	free(line);
	fclose(f);
	*out = v;
	return 0;
}

/* Compares our lines with theirs (both sorted by key); prints the
 * differences. Returns their number. */
static size_t lines_compare(char **ours, size_t n_ours, char **theirs,
			    size_t n_theirs, const char *path)
{
	size_t i = 0, j = 0, diff = 0;

	while (i < n_ours || j < n_theirs) {
		int c = i == n_ours	? 1
			: j == n_theirs ? -1
					: line_cmp(&ours[i], &theirs[j]);
		const char *what = NULL, *key = c <= 0 ? ours[i] : theirs[j];

		if (c < 0)
			what = "not in the list";
		else if (c > 0)
			what = "listed, not in these ranks here";
		else if (strcmp(ours[i], theirs[j]))
			what = "differs";
		if (what && ++diff <= DIGESTS_SHOW_MAX)
			fprintf(stderr, "shardfs: digests: %.*s: %s (%s)\n",
				(int)strcspn(key, "\t"), key, what,
				c == 0 ? "here and in the list" : path);
		i += c <= 0;
		j += c >= 0;
	}
	if (diff > DIGESTS_SHOW_MAX)
		fprintf(stderr, "shardfs: digests: ... and %zu more\n",
			diff - DIGESTS_SHOW_MAX);
	return diff;
}

int cmd_digests(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "transform", required_argument, NULL, 't' },
		{ "run", no_argument, NULL, 'R' },
		{ "check", required_argument, NULL, 'c' },
		CMD_LONGOPTS_END,
	};
	struct cmd_config cc = { 0 };
	struct dataset *ds = NULL;
	struct cache *cache = NULL;
	struct mount_transforms *xfs = NULL;
	struct xform *x;
	const char *xname = NULL, *check = NULL;
	size_t i, n_lines = 0, n_theirs = 0, failed = 0;
	char **lines = NULL, **theirs = NULL;
	uint8_t *sel = NULL;
	bool run = false, *rsel = NULL;
	uint64_t r, world;
	int c, rc = EXIT_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:t:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			xname = optarg;
			break;
		case 'R':
			run = true;
			break;
		case 'c':
			check = optarg;
			break;
		default: /* -r, -o, -h, errors */
			if (!cmd_config_option(c, &cc, usage_digests, &rc))
				goto out;
			break;
		}
	}
	if (cmd_operands(argc, 1, usage_digests, "digests", "CONFIG"))
		goto out;
	if (!xname) {
		rc = cmd_usage_error(usage_digests, "digests: %s missing",
				     "--transform NAME");
		goto out;
	}
	if (cmd_load_config(argv[optind], &cc.ov, &cc.cfg))
		goto out;
	if (cmd_config_transform("digests", &cc, argv[optind], xname) < 0)
		goto out;
	c = cmd_config_ranks("digests", &cc, &rsel);
	if (c < 0) {
		rc = c == -ENOMEM ? EXIT_RUNTIME : EXIT_USAGE;
		goto out;
	}
	world = cc.cfg->shard.spec.world_size;
	if (!cc.cfg->cache.enabled) {
		fprintf(stderr,
			"shardfs: digests: cache.enabled is false in %s: no "
			"outputs are stored\n",
			argv[optind]);
		goto out;
	}
	if (check && (lines_read(check, &theirs, &n_theirs) < 0))
		goto out;
	rc = EXIT_RUNTIME;
	if (dataset_load(cc.cfg, true, &ds) < 0 ||
	    mount_cache_open(cc.cfg, ds->backend, &cache) < 0 ||
	    mount_transforms_open(cc.cfg, cache, &xfs) < 0)
		goto fail;
	x = mount_transforms_find(xfs, xname);
	sel = calloc(ds->manifest->count ? ds->manifest->count : 1, 1);
	lines = calloc(ds->manifest->count ? ds->manifest->count : 1,
		       sizeof(*lines));
	if (!sel || !lines || !x)
		goto fail;
	for (r = 0; r < world; r++) {
		const uint32_t *items;
		size_t count, npad;

		if (!rsel[r])
			continue;
		shard_plan_rank(ds->plan, r, &items, &count, &npad);
		for (size_t k = 0; k < count; k++)
			sel[items[k]] = 1;
	}
	for (i = 0; i < ds->manifest->count; i++) {
		const struct manifest_entry *e = &ds->manifest->entries[i];
		struct cache_object obj = { .key = e->key,
					    .key_len = e->key_len,
					    .etag = e->etag,
					    .etag_len = e->etag_len,
					    .size = e->size };
		uint8_t d[SHA256_LEN];
		char hex[2 * SHA256_LEN + 1], *key;
		uint64_t size = 0;
		int got;

		if (!sel[i])
			continue;
		got = xform_digest(x, &obj, run, d, &size);
		if (got && got != -ENOENT)
			failed++;
		key = manifest_escaped_copy(e->key, e->key_len);
		if (!key)
			goto fail;
		hex_encode(d, sizeof(d), hex);
		if (got)
			c = asprintf(&lines[n_lines], "%s\t-\t-", key);
		else
			c = asprintf(&lines[n_lines], "%s\t%s\t%llu", key, hex,
				     (unsigned long long)size);
		free(key);
		if (c < 0)
			goto fail;
		if (!check)
			puts(lines[n_lines]);
		n_lines++;
	}
	rc = failed ? EXIT_RUNTIME : EXIT_OK;
	if (check) {
		qsort(lines, n_lines, sizeof(*lines), line_cmp);
		qsort(theirs, n_theirs, sizeof(*theirs), line_cmp);
		if (lines_compare(lines, n_lines, theirs, n_theirs, check))
			rc = EXIT_RUNTIME;
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "shardfs: digests: writing: %s\n",
			strerror(errno));
		rc = EXIT_RUNTIME;
	}
	goto out;
fail:
	fprintf(stderr, "shardfs: digests: cannot read the outputs (see "
			"above)\n");
	rc = EXIT_RUNTIME;
out:
	mount_transforms_stop(xfs);
	cache_free(cache);
	mount_transforms_free(xfs); /* after the cache: it holds them */
	for (i = 0; i < n_lines; i++)
		free(lines[i]);
	free(lines);
	for (i = 0; i < n_theirs; i++)
		free(theirs[i]);
	free(theirs);
	free(sel);
	free(rsel);
	dataset_free(ds);
	cmd_config_free(&cc);
	return rc;
}
