/*
 * check_reload: which config keys a reload takes (mount/reload.h), on
 * configs parsed from real files: every key that needs a restart and
 * changed is counted (and logged) and set back to its running value; the
 * keys that reload live ([shard], [source] manifest and manifest_sha256)
 * keep their new values; the [transform] sections are kept as running.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount/config.h"
#include "mount/reload.h"
#include "unit.h"

static struct config *load(const char *text)
{
	char path[] = "/tmp/check_reload.XXXXXX", err[512];
	struct config *cfg = NULL;
	int fd = mkstemp(path);
	FILE *f;

	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_msg(config_load(path, NULL, 0, &cfg, err, sizeof(err)) == 0,
		      "%s", err);
	unlink(path);
	return cfg;
}

static const char running_text[] = "[source]\n"
				   "url = /data/a\n"
				   "manifest = /m/one.tsv\n"
				   "[shard]\n"
				   "world_size = 2\n"
				   "[cache]\n"
				   "dir = /var/cache/a\n"
				   "size = 1G\n";

START_TEST(test_unchanged_config_keeps_all)
{
	struct config *a = load(running_text), *b = load(running_text);

	ck_assert_int_eq(mount_reload_keep_restart_keys(a, b), 0);
	config_free(a);
	config_free(b);
}
END_TEST

START_TEST(test_live_keys_change)
{
	struct config *a = load(running_text);
	struct config *b = load("[source]\n"
				"url = /data/a\n"
				"manifest = /m/two.tsv\n"
				"manifest_sha256 = "
				"0000000000000000000000000000000000000000000000"
				"000000000000000000\n"
				"[shard]\n"
				"world_size = 8\n"
				"ranks = 1,3-4\n"
				"seed = 9\n"
				"[cache]\n"
				"dir = /var/cache/a\n"
				"size = 1G\n");

	ck_assert_int_eq(mount_reload_keep_restart_keys(a, b), 0);
	ck_assert_str_eq(b->source.manifest, "/m/two.tsv");
	ck_assert_ptr_nonnull(b->source.manifest_sha256);
	ck_assert_uint_eq(b->shard.spec.world_size, 8);
	ck_assert_uint_eq(b->shard.spec.seed, 9);
	ck_assert_uint_eq(b->shard.n_ranks, 2);
	config_free(a);
	config_free(b);
}
END_TEST

START_TEST(test_restart_keys_kept)
{
	struct config *a = load(running_text);
	struct config *b = load("[source]\n"
				"url = /data/b\n"
				"manifest = /m/one.tsv\n"
				"region = eu-west-1\n"
				"retries = 2\n"
				"[shard]\n"
				"world_size = 4\n"
				"[cache]\n"
				"dir = /var/cache/b\n"
				"size = 50%\n"
				"enabled = false\n"
				"[prefetch]\n"
				"files = 3\n"
				"[mount]\n"
				"path = /mnt/x\n"
				"[metrics]\n"
				"listen = 127.0.0.1:9100\n");

	/* url, region, retries, dir, size, enabled, files, path, listen */
	ck_assert_int_eq(mount_reload_keep_restart_keys(a, b), 9);
	ck_assert_str_eq(b->source.url, "/data/a");
	ck_assert_str_eq(b->source.region, a->source.region);
	ck_assert_uint_eq(b->source.retries, a->source.retries);
	ck_assert_str_eq(b->cache.dir, "/var/cache/a");
	ck_assert_uint_eq(b->cache.size_bytes, a->cache.size_bytes);
	ck_assert_uint_eq(b->cache.size_percent, 0);
	ck_assert(b->cache.enabled);
	ck_assert_uint_eq(b->prefetch.files, a->prefetch.files);
	ck_assert_ptr_null(b->mount.path);
	ck_assert_ptr_null(b->metrics.listen);
	/* ... while the live key took its new value. */
	ck_assert_uint_eq(b->shard.spec.world_size, 4);
	/* Now equal: nothing more to warn about. */
	ck_assert_int_eq(mount_reload_keep_restart_keys(a, b), 0);
	config_free(a);
	config_free(b);
}
END_TEST

/* The [transform] sections are opened at mount: any change is counted
 * once and the running ones kept; the same ones count nothing. */
START_TEST(test_transforms_kept)
{
#define TR_BASE "[source]\nurl = /data/a\n[cache]\ndir = /var/cache/a\n"
	struct config *a = load(TR_BASE "[transform up]\n"
					"command = /usr/bin/tr a-z A-Z\n"
					"version = 1\n"
					"env = PATH\n");
	struct config *same = load(TR_BASE "[transform up]\n"
					   "version = 1\n"
					   "command = /usr/bin/tr  a-z A-Z\n"
					   "env = PATH\n");
	struct config *b = load(TR_BASE "[transform up]\n"
					"command = /usr/bin/tr a-z A-Z\n"
					"version = 2\n"
					"[transform two]\n"
					"command = /bin/cat\n");
	struct config *none = load(TR_BASE);

	ck_assert_int_eq(mount_reload_keep_restart_keys(a, same), 0);
	ck_assert_int_eq(mount_reload_keep_restart_keys(a, b), 1);
	ck_assert_uint_eq(b->n_transforms, 1);
	ck_assert_str_eq(b->transforms[0].name, "up");
	ck_assert_str_eq(b->transforms[0].version, "1");
	ck_assert_str_eq(b->transforms[0].argv[2], "A-Z");
	ck_assert_str_eq(b->transforms[0].env[0], "PATH");
	ck_assert_ptr_null(b->transforms[0].env[1]);
	ck_assert_int_eq(mount_reload_keep_restart_keys(b, a), 0);
	/* Removing them all is a change too. */
	ck_assert_int_eq(mount_reload_keep_restart_keys(a, none), 1);
	ck_assert_uint_eq(none->n_transforms, 1);
	config_free(a);
	config_free(same);
	config_free(b);
	config_free(none);
#undef TR_BASE
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "unchanged_config_keeps_all",
		  test_unchanged_config_keeps_all },
		{ "live_keys_change", test_live_keys_change },
		{ "restart_keys_kept", test_restart_keys_kept },
		{ "transforms_kept", test_transforms_kept },
	};

	return unit_run(
		unit_suite("reload", cases, sizeof(cases) / sizeof(cases[0])));
}
