/*
 * Unit tests for mount/config: defaults, a file with every key, each kind of
 * error with its exact message (file, line, key, value), overrides, ranks,
 * sizes and the cross-key checks. Test files live in one mkdtemp directory
 * that main() removes whatever the outcome, since a failing test in a
 * forked child never reaches a teardown.
 */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <glob.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/fetch_impl.h"
#include "cache/prefetch.h"
#include "mount/config.h"
#include "tests/unit/unit.h"

static const char *tmpdir;
static char conf_path[4096];

#define SENTINEL ((struct config *)&tmpdir)

/* config_load() takes overrides as argv does: char *const *. */
#define OV(s) ((char *)(s))

static void write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

/* Writes text as the test's config file and loads it. */
static int load_len(const char *text, size_t len, char *const *ov, size_t n,
		    struct config **cfg, char *err, size_t errlen)
{
	snprintf(conf_path, sizeof(conf_path), "%s/test.conf", tmpdir);
	write_file(conf_path, text, len);
	return config_load(conf_path, ov, n, cfg, err, errlen);
}

static struct config *load_ok(const char *text, char *const *ov, size_t n)
{
	struct config *cfg = NULL;
	char err[512] = "";
	int rc = load_len(text, strlen(text), ov, n, &cfg, err, sizeof(err));

	ck_assert_msg(rc == 0, "config:\n%s\nrc %d: %s", text, rc, err);
	ck_assert_ptr_nonnull(cfg);
	return cfg;
}

/* want with each '@' replaced by the config file's path. */
static void expand(const char *want, char *buf, size_t len)
{
	size_t n = 0;

	for (; *want && n + 1 < len; want++) {
		if (*want == '@')
			n += (size_t)snprintf(buf + n, len - n, "%s",
					      conf_path);
		else
			buf[n++] = *want;
	}
	buf[n < len ? n : len - 1] = '\0';
}

static void expect_fail_len(const char *text, size_t len, char *const *ov,
			    size_t n, int want_rc, const char *want)
{
	struct config *cfg = SENTINEL;
	char err[1024], exp[1024];
	int rc = load_len(text, len, ov, n, &cfg, err, sizeof(err));

	expand(want, exp, sizeof(exp));
	ck_assert_msg(rc == want_rc, "config:\n%s\nrc %d, want %d (%s)", text,
		      rc, want_rc, err);
	ck_assert_msg(!strcmp(err, exp), "config:\n%s\nwant: %s\ngot:  %s",
		      text, exp, err);
	ck_assert_ptr_eq(cfg, SENTINEL);
}

static void expect_fail(const char *text, char *const *ov, size_t n,
			const char *want)
{
	expect_fail_len(text, strlen(text), ov, n, -EINVAL, want);
}

#define MIN_CONF "[source]\nurl = /data\n"

/* ---- defaults ---- */

START_TEST(test_defaults)
{
	struct config *cfg = load_ok(MIN_CONF, NULL, 0);
	struct backend_options opts;

	ck_assert_str_eq(cfg->file, conf_path);
	ck_assert_str_eq(cfg->source.url, "/data");
	ck_assert_ptr_null(cfg->source.endpoint);
	ck_assert_str_eq(cfg->source.region, "us-east-1");
	ck_assert_int_eq(cfg->source.addressing, BACKEND_ADDRESSING_AUTO);
	ck_assert_ptr_null(cfg->source.manifest);
	ck_assert_ptr_null(cfg->source.manifest_sha256);
	ck_assert(!cfg->source.anonymous);
	ck_assert_uint_eq(cfg->source.connect_timeout_ms, 5000);
	ck_assert_uint_eq(cfg->source.request_timeout_ms, 10000);
	ck_assert_uint_eq(cfg->source.read_timeout_ms, 30000);
	ck_assert_uint_eq(cfg->source.retries, 5);
	ck_assert_uint_eq(cfg->source.list_timeout_ms, 3600000);
	ck_assert_uint_eq(cfg->source.list_memory, UINT64_C(4) << 30);

	ck_assert_uint_eq(cfg->shard.spec.world_size, 1);
	ck_assert_uint_eq(cfg->shard.spec.seed, 0);
	ck_assert_uint_eq(cfg->shard.spec.epoch, 0);
	ck_assert_int_eq(cfg->shard.spec.order, SHARD_ORDER_SHUFFLE);
	ck_assert_int_eq(cfg->shard.spec.layout, SHARD_LAYOUT_STRIDED);
	ck_assert_int_eq(cfg->shard.spec.balance, SHARD_BALANCE_NONE);
	ck_assert_ptr_null(cfg->shard.ranks);
	ck_assert_uint_eq(cfg->shard.n_ranks, 0);
	ck_assert(config_rank_selected(cfg, 0));
	ck_assert(!config_rank_selected(cfg, 1));

	ck_assert_str_eq(cfg->cache.dir, "/var/cache/shardfs");
	ck_assert_uint_eq(cfg->cache.size_bytes, UINT64_C(10) << 30);
	ck_assert_uint_eq(cfg->cache.size_percent, 0);
	ck_assert_uint_eq(cfg->prefetch.files, 256);
	ck_assert_uint_eq(cfg->prefetch.memory, UINT64_C(512) << 20);
	ck_assert_uint_eq(cfg->prefetch.connections, 64);
	/* What the cache and its engine take for 0 are the config table's. */
	ck_assert_uint_eq(cfg->prefetch.files, PREFETCH_FILES_DEFAULT);
	ck_assert_uint_eq(cfg->prefetch.memory, FETCH_MEMORY_DEFAULT);
	ck_assert_uint_eq(cfg->prefetch.connections, FETCH_CONNECTIONS_DEFAULT);
	ck_assert(cfg->prefetch.hedge);
	ck_assert_ptr_null(cfg->mount.path);
	ck_assert(!cfg->mount.allow_other);
	ck_assert(!cfg->mount.nonempty);
	ck_assert(!cfg->source.allow_empty);
	ck_assert_ptr_null(cfg->log.file);
	ck_assert_ptr_null(cfg->metrics.listen);

	config_backend_options(cfg, &opts);
	ck_assert_ptr_null(opts.endpoint);
	ck_assert_str_eq(opts.region, "us-east-1");
	ck_assert_int_eq(opts.addressing, BACKEND_ADDRESSING_AUTO);
	ck_assert_int_eq(opts.anonymous, 0);
	ck_assert_uint_eq(opts.connect_timeout_ms, 5000);
	ck_assert_uint_eq(opts.request_timeout_ms, 10000);
	ck_assert_uint_eq(opts.read_timeout_ms, 30000);
	ck_assert_uint_eq(opts.retries, 5);
	/* The backends' own defaults for 0 are the config table's. */
	ck_assert_uint_eq(opts.connect_timeout_ms,
			  BACKEND_CONNECT_TIMEOUT_MS_DEFAULT);
	ck_assert_uint_eq(opts.request_timeout_ms,
			  BACKEND_REQUEST_TIMEOUT_MS_DEFAULT);
	ck_assert_uint_eq(opts.read_timeout_ms,
			  BACKEND_READ_TIMEOUT_MS_DEFAULT);
	ck_assert_uint_eq(opts.retries, BACKEND_RETRIES_DEFAULT);
	/* What a caller without a config (shardfs manifest) gets for 0. */
	ck_assert_uint_eq(opts.list_timeout_ms,
			  BACKEND_LIST_TIMEOUT_MS_DEFAULT);
	ck_assert_uint_eq(opts.list_memory, BACKEND_LIST_MEMORY_DEFAULT);
	config_free(cfg);
}
END_TEST

/* ---- a file with every key ---- */

#define SHA_UPPER                                                              \
	"0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"
#define SHA_LOWER                                                              \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

START_TEST(test_full)
{
	static const char text[] =
		"; shardfs test config\n"
		"# whole-line comments with either prefix\n"
		"\n"
		"[source]\n"
		"url = s3://bucket/imagenet/        ; s3://, gs:// or a path\n"
		"endpoint = http://127.0.0.1:9000   ; emulator\n"
		"region = eu-west-1 ; comment\n"
		"addressing = path\n"
		"manifest = gs://bucket/manifests/imagenet.json ; pinned\n"
		"manifest_sha256 = " SHA_UPPER "\n"
		"anonymous = yes\n"
		"connect_timeout_ms = 1500\n"
		"request_timeout_ms = 60000\n"
		"read_timeout_ms = 90000\n"
		"retries = 0\n"
		"[shard]\n"
		"world_size = 64 ; ranks\n"
		"ranks = 8-15, 0,2 ; which ranks\n"
		"seed = 0xDEADBEEF\n"
		"epoch = 18446744073709551615\n"
		"order = none\n"
		"layout = contiguous\n"
		"balance = pad\n"
		"[cache]\n"
		"dir = /srv/cache ; shared\n"
		"size = 50G\n"
		"[prefetch]\n"
		"files = 0\n"
		"memory = 1GiB\n"
		"connections = 1024\n"
		"hedge = off\n"
		"[mount]\n"
		"path = /mnt/imagenet\n"
		"allow_other = on\n"
		"nonempty = yes\n"
		"[log]\n"
		"file = /var/log/shardfs/imagenet.log\n"
		"[metrics]\n"
		"listen = [::1]:9100\n";
	struct config *cfg = load_ok(text, NULL, 0);
	struct backend_options opts;

	ck_assert_str_eq(cfg->source.url, "s3://bucket/imagenet/");
	ck_assert_str_eq(cfg->source.endpoint, "http://127.0.0.1:9000");
	ck_assert_str_eq(cfg->source.region, "eu-west-1");
	ck_assert_int_eq(cfg->source.addressing, BACKEND_ADDRESSING_PATH);
	ck_assert_str_eq(cfg->source.manifest,
			 "gs://bucket/manifests/imagenet.json");
	ck_assert_str_eq(cfg->source.manifest_sha256, SHA_LOWER);
	ck_assert(cfg->source.anonymous);
	ck_assert_uint_eq(cfg->source.connect_timeout_ms, 1500);
	ck_assert_uint_eq(cfg->source.request_timeout_ms, 60000);
	ck_assert_uint_eq(cfg->source.read_timeout_ms, 90000);
	ck_assert_uint_eq(cfg->source.retries, 0);

	ck_assert_uint_eq(cfg->shard.spec.world_size, 64);
	ck_assert_uint_eq(cfg->shard.n_ranks, 3);
	ck_assert_uint_eq(cfg->shard.ranks[0].lo, 0);
	ck_assert_uint_eq(cfg->shard.ranks[0].hi, 0);
	ck_assert_uint_eq(cfg->shard.ranks[1].lo, 2);
	ck_assert_uint_eq(cfg->shard.ranks[1].hi, 2);
	ck_assert_uint_eq(cfg->shard.ranks[2].lo, 8);
	ck_assert_uint_eq(cfg->shard.ranks[2].hi, 15);
	ck_assert_uint_eq(cfg->shard.spec.seed, 0xDEADBEEF);
	ck_assert_uint_eq(cfg->shard.spec.epoch, UINT64_MAX);
	ck_assert_int_eq(cfg->shard.spec.order, SHARD_ORDER_NONE);
	ck_assert_int_eq(cfg->shard.spec.layout, SHARD_LAYOUT_CONTIGUOUS);
	ck_assert_int_eq(cfg->shard.spec.balance, SHARD_BALANCE_PAD);

	ck_assert_str_eq(cfg->cache.dir, "/srv/cache");
	ck_assert_uint_eq(cfg->cache.size_bytes, UINT64_C(50) << 30);
	ck_assert_uint_eq(cfg->cache.size_percent, 0);
	ck_assert_uint_eq(cfg->prefetch.files, 0);
	ck_assert_uint_eq(cfg->prefetch.memory, UINT64_C(1) << 30);
	ck_assert_uint_eq(cfg->prefetch.connections, 1024);
	ck_assert(!cfg->prefetch.hedge);
	ck_assert_str_eq(cfg->mount.path, "/mnt/imagenet");
	ck_assert(cfg->mount.allow_other);
	ck_assert(cfg->mount.nonempty);
	ck_assert_str_eq(cfg->log.file, "/var/log/shardfs/imagenet.log");
	ck_assert_str_eq(cfg->metrics.listen, "[::1]:9100");

	config_backend_options(cfg, &opts);
	ck_assert_ptr_eq(opts.endpoint, cfg->source.endpoint);
	ck_assert_ptr_eq(opts.region, cfg->source.region);
	ck_assert_int_eq(opts.addressing, BACKEND_ADDRESSING_PATH);
	ck_assert_int_eq(opts.anonymous, 1);
	ck_assert_uint_eq(opts.connect_timeout_ms, 1500);
	ck_assert_uint_eq(opts.request_timeout_ms, 60000);
	ck_assert_uint_eq(opts.read_timeout_ms, 90000);
	ck_assert_uint_eq(opts.retries, 0);
	config_free(cfg);
}
END_TEST

/* The example of docs/DESIGN.md §6, verbatim: empty optional values with
 * inline comments must read as unset. */
START_TEST(test_design_example)
{
	static const char text[] =
		"[source]\n"
		"url = s3://bucket/imagenet/        ; s3://, gs://, or an "
		"absolute path (NFS, local)\n"
		"endpoint = http://127.0.0.1:9000   ; S3-compatible or "
		"emulator endpoint (optional)\n"
		"region = us-east-1\n"
		"addressing = auto                  ; auto | path | virtual\n"
		"manifest =                         ; optional pinned "
		"manifest: path or s3:// / gs:// URL\n"
		"manifest_sha256 =                  ; optional: refuse to "
		"mount on mismatch\n"
		"[shard]\n"
		"world_size = 64\n"
		"ranks = 8-15                       ; which rank directories "
		"this node shows (default all)\n"
		"seed = 0\n"
		"epoch = 0\n"
		"order = shuffle                    ; shuffle | none\n"
		"layout = strided                   ; strided | contiguous | "
		"bytes\n"
		"balance = none                     ; none | drop | pad\n"
		"[cache]\n"
		"dir = /var/cache/shardfs           ; shared by all mounts on "
		"the node\n"
		"size = 50G                         ; byte budget (K/M/G/T "
		"suffixes), or a % of the filesystem\n"
		"[prefetch]\n"
		"files = 32                         ; files ahead in rank "
		"order\n"
		"memory = 512M                      ; bound on bytes in "
		"flight and buffered\n"
		"connections = 64                   ; concurrent backend "
		"requests\n"
		"[mount]\n"
		"path = /mnt/imagenet\n"
		"allow_other = false\n";
	struct config *cfg = load_ok(text, NULL, 0);

	ck_assert_str_eq(cfg->source.url, "s3://bucket/imagenet/");
	ck_assert_ptr_null(cfg->source.manifest);
	ck_assert_ptr_null(cfg->source.manifest_sha256);
	ck_assert_uint_eq(cfg->shard.n_ranks, 1);
	ck_assert(!config_rank_selected(cfg, 7));
	ck_assert(config_rank_selected(cfg, 8));
	ck_assert(config_rank_selected(cfg, 15));
	ck_assert(!config_rank_selected(cfg, 16));
	ck_assert_uint_eq(cfg->cache.size_bytes, UINT64_C(50) << 30);
	config_free(cfg);
}
END_TEST

/* Line endings, a BOM, a last line without newline, the longest line that
 * fits, values spelt in other cases, and a first key that is indented. */
START_TEST(test_lexical)
{
	struct config *cfg;
	char text[512];
	size_t n;

	cfg = load_ok("[source]\r\nurl = /d\r\nretries = 3\r\n", NULL, 0);
	ck_assert_str_eq(cfg->source.url, "/d");
	ck_assert_uint_eq(cfg->source.retries, 3);
	config_free(cfg);

	cfg = load_ok("\xEF\xBB\xBF[source]\nurl = /d", NULL, 0);
	ck_assert_str_eq(cfg->source.url, "/d");
	config_free(cfg);

	cfg = load_ok("[source]\n    url = /d\n[mount]\n\tallow_other = TRUE\n"
		      "[shard]\norder = None\n",
		      NULL, 0);
	ck_assert(cfg->mount.allow_other);
	ck_assert_int_eq(cfg->shard.spec.order, SHARD_ORDER_NONE);
	config_free(cfg);

	/* 199 bytes before the newline is the most inih's buffer holds. */
	n = (size_t)snprintf(text, sizeof(text), "[source]\nurl = /");
	memset(text + n, 'a', 192);
	strcpy(text + n + 192, "\n");
	cfg = load_ok(text, NULL, 0);
	ck_assert_uint_eq(strlen(cfg->source.url), 193);
	config_free(cfg);
}
END_TEST

/* ---- reading and syntax errors ---- */

START_TEST(test_missing_file)
{
	struct config *cfg = SENTINEL;
	char path[4200], err[512], want[4400];

	snprintf(path, sizeof(path), "%s/absent.conf", tmpdir);
	ck_assert_int_eq(config_load(path, NULL, 0, &cfg, err, sizeof(err)),
			 -ENOENT);
	snprintf(want, sizeof(want), "cannot read %s: %s", path,
		 strerror(ENOENT));
	ck_assert_str_eq(err, want);
	ck_assert_ptr_eq(cfg, SENTINEL);

	snprintf(path, sizeof(path), "%s/adir", tmpdir);
	ck_assert(mkdir(path, 0700) == 0 || errno == EEXIST);
	ck_assert_int_eq(config_load(path, NULL, 0, &cfg, err, sizeof(err)),
			 -EISDIR);
	snprintf(want, sizeof(want), "cannot read %s: %s", path,
		 strerror(EISDIR));
	ck_assert_str_eq(err, want);
	ck_assert_ptr_eq(cfg, SENTINEL);
}
END_TEST

START_TEST(test_unreadable_file)
{
	struct config *cfg = SENTINEL;
	char path[4200], err[512], want[4400];

	/* root reads a mode 000 file anyway. */
	if (geteuid() == 0)
		return;
	snprintf(path, sizeof(path), "%s/secret.conf", tmpdir);
	write_file(path, MIN_CONF, strlen(MIN_CONF));
	ck_assert_int_eq(chmod(path, 0), 0);
	ck_assert_int_eq(config_load(path, NULL, 0, &cfg, err, sizeof(err)),
			 -EACCES);
	snprintf(want, sizeof(want), "cannot read %s: %s", path,
		 strerror(EACCES));
	ck_assert_str_eq(err, want);
	ck_assert_ptr_eq(cfg, SENTINEL);
}
END_TEST

START_TEST(test_syntax_errors)
{
	expect_fail("[source]\nurl = /a\njunk\n", NULL, 0, "@:3: syntax error");
	expect_fail("[source\nurl = /a\n", NULL, 0, "@:1: syntax error");
	/* The first error wins, whichever side found it. */
	expect_fail("[source]\nurl = /a\njunk\nretries = x\n", NULL, 0,
		    "@:3: syntax error");
	expect_fail("[source]\nretries = x\njunk\n", NULL, 0,
		    "@:2: [source] retries = x: not an unsigned integer");
	/* A file error stops before the overrides are looked at. */
	{
		char *ov[] = { OV("nodot") };

		expect_fail("[source]\nurl = /a\njunk\n", ov, 1,
			    "@:3: syntax error");
	}
}
END_TEST

/* Lines up to 64 KiB work (Debian's inih stopped at 199 bytes, too short
 * for real NFS paths and S3 prefixes); a longer one is refused, naming
 * its line, never cut in two. */
START_TEST(test_long_line)
{
	const size_t max = 65536, head = strlen("url = /");
	struct config *cfg;
	char *text;
	size_t n;

	text = malloc(max + 64);
	ck_assert_ptr_nonnull(text);

	/* 300 bytes: an S3 prefix as long as real ones get. */
	n = (size_t)snprintf(text, 64, "[source]\nurl = s3://bucket/");
	memset(text + n, 'p', 280);
	strcpy(text + n + 280, "/\nretries = 1\n");
	cfg = load_ok(text, NULL, 0);
	ck_assert_uint_eq(strlen(cfg->source.url),
			  strlen("s3://bucket/") + 281);
	ck_assert_uint_eq(cfg->source.retries, 1);
	config_free(cfg);

	/* Exactly the cap, with a CRLF end (the CR counts). */
	n = (size_t)snprintf(text, 64, "[source]\nurl = /");
	memset(text + n, 'a', max - head - 1);
	strcpy(text + n + max - head - 1, "\r\nretries = 1\n");
	cfg = load_ok(text, NULL, 0);
	ck_assert_uint_eq(strlen(cfg->source.url), max - head);
	config_free(cfg);

	/* One more byte is an error. */
	n = (size_t)snprintf(text, 64, "[source]\nurl = /");
	memset(text + n, 'a', max - head + 1);
	strcpy(text + n + max - head + 1, "\nretries = 1\n");
	expect_fail(text, NULL, 0,
		    "@:2: line too long (more than 65536 bytes)");

	/* A long comment is a comment. */
	memset(text, ';', 300);
	strcpy(text + 300, "\n" MIN_CONF);
	cfg = load_ok(text, NULL, 0);
	config_free(cfg);
	free(text);
}
END_TEST

/* '#' and ';' comments, whole-line and inline (after a blank), quoted
 * values, ':' as separator, and the syntax errors around them. */
START_TEST(test_comments)
{
	struct config *cfg;

	cfg = load_ok("# shardfs\n"
		      "  # indented comment\n"
		      "[source]   # the source\n"
		      "url = s3://b/run#3/x # '#' inside a value stays\n"
		      "region = eu-west-1\t# tab before the comment\n"
		      "manifest =   # unset\n"
		      "[cache] ; the cache\n"
		      "size = 10G # node SSD\n"
		      "dir = /srv/c;d ; ';' inside a value stays\n"
		      "[ shard ]\n"
		      "ranks = 0-3, 8 # which\n"
		      "world_size: 16\n",
		      NULL, 0);
	ck_assert_str_eq(cfg->source.url, "s3://b/run#3/x");
	ck_assert_str_eq(cfg->source.region, "eu-west-1");
	ck_assert_ptr_null(cfg->source.manifest);
	ck_assert_uint_eq(cfg->cache.size_bytes, UINT64_C(10) << 30);
	ck_assert_str_eq(cfg->cache.dir, "/srv/c;d");
	ck_assert_uint_eq(cfg->shard.spec.world_size, 16);
	ck_assert_uint_eq(cfg->shard.n_ranks, 2);
	config_free(cfg);

	/* Quotes keep " #", " ;" and outer blanks; a comment may follow. */
	cfg = load_ok("[source]\nurl = \"/data/run #1 ;x \"  # quoted\n"
		      "[mount]\npath = \"/mnt/a\"\n",
		      NULL, 0);
	ck_assert_str_eq(cfg->source.url, "/data/run #1 ;x ");
	ck_assert_str_eq(cfg->mount.path, "/mnt/a");
	config_free(cfg);

	expect_fail("[source]\nurl = \"/a\n", NULL, 0,
		    "@:2: [source] url = \"/a: no closing quote");
	expect_fail("[source]\nurl = \"/a\" b\n", NULL, 0,
		    "@:2: [source] url = \"/a\" b: text after the closing "
		    "quote");
	expect_fail("[source] url = /a\n", NULL, 0, "@:1: syntax error");
	expect_fail("[]\nurl = /a\n", NULL, 0, "@:1: syntax error");
	expect_fail("[source]\n= /a\n", NULL, 0, "@:2: syntax error");
	/* An indented comment does not continue a value; a key does. */
	cfg = load_ok("[source]\nurl = /a\n    # note\n", NULL, 0);
	config_free(cfg);
	expect_fail("[source]\nurl = /a\n  retries = 1 # r\n", NULL, 0,
		    "@:3: retries = 1: indented line would continue the value "
		    "of [source] url; remove the indentation");
}
END_TEST

START_TEST(test_nul_byte)
{
	static const char text[] = "[source]\nurl = /a\0b\n";

	expect_fail_len(text, sizeof(text) - 1, NULL, 0, -EINVAL,
			"@:2: line contains a NUL byte");
}
END_TEST

START_TEST(test_continuation)
{
	expect_fail("[source]\nurl = /a\n  region = eu-west-1\n", NULL, 0,
		    "@:3: region = eu-west-1: indented line would continue "
		    "the value of [source] url; remove the indentation");
	/* Blank lines do not end a key: inih still continues it. */
	expect_fail("[source]\nurl = /a\n\n\tretries = 1\n", NULL, 0,
		    "@:4: retries = 1: indented line would continue the "
		    "value of [source] url; remove the indentation");
	expect_fail("[source]\nurl = /a\n  [shard]\nseed = 1\n", NULL, 0,
		    "@:3: [shard]: indented line would continue the value of "
		    "[source] url; remove the indentation");
}
END_TEST

/* ---- value errors, one loop iteration per case ---- */

struct bad_case {
	const char *text;
	const char *want;
};

#define URL_WHY                                                                \
	"not an absolute path, s3://bucket[/prefix], gs://bucket[/prefix] or " \
	"nfs://server/path"
#define MANIFEST_WHY                                                           \
	"not an absolute file path, s3://bucket/key, gs://bucket/key or "      \
	"nfs://server/path/file"
#define LISTEN_WHY                                                             \
	"not ADDRESS:PORT with an IPv4 or [IPv6] address and a port 1..65535"
#define SIZE_WHY "not a size (digits and an optional K, M, G or T suffix)"
#define SHARD_KEYS                                                             \
	"world_size, ranks, seed, epoch, order, layout, balance, reshuffle, "  \
	"unit"

static const struct bad_case bad_cases[] = {
	{ MIN_CONF "[shard]\nworld_size = abc\n",
	  "@:4: [shard] world_size = abc: not an unsigned integer" },
	{ MIN_CONF "[shard]\nworld_size = -1\n",
	  "@:4: [shard] world_size = -1: not an unsigned integer" },
	{ MIN_CONF "[shard]\nworld_size = +8\n",
	  "@:4: [shard] world_size = +8: not an unsigned integer" },
	{ MIN_CONF "[shard]\nworld_size = 8x\n",
	  "@:4: [shard] world_size = 8x: not an unsigned integer" },
	{ MIN_CONF "[shard]\nworld_size = 0x10\n",
	  "@:4: [shard] world_size = 0x10: not an unsigned integer" },
	{ MIN_CONF "[shard]\nworld_size =\n",
	  "@:4: [shard] world_size = : not an unsigned integer" },
	{ MIN_CONF "[shard]\nworld_size = 0\n",
	  "@:4: [shard] world_size = 0: must be between 1 and 1048576" },
	{ MIN_CONF "[shard]\nworld_size = 1048577\n",
	  "@:4: [shard] world_size = 1048577: must be between 1 and 1048576" },
	{ MIN_CONF "[shard]\nworld_size = 99999999999999999999\n",
	  "@:4: [shard] world_size = 99999999999999999999: must be between 1 "
	  "and 1048576" },
	{ MIN_CONF "[shard]\nseed = 18446744073709551616\n",
	  "@:4: [shard] seed = 18446744073709551616: out of range (more than "
	  "64 bits)" },
	{ MIN_CONF "[shard]\nseed = 0x1FFFFFFFFFFFFFFFF\n",
	  "@:4: [shard] seed = 0x1FFFFFFFFFFFFFFFF: out of range (more than 64 "
	  "bits)" },
	{ MIN_CONF "[shard]\nseed = 0x\n",
	  "@:4: [shard] seed = 0x: not an unsigned integer" },
	{ MIN_CONF "[shard]\nepoch = 1.5\n",
	  "@:4: [shard] epoch = 1.5: not an unsigned integer" },
	{ MIN_CONF "retries = 101\n",
	  "@:3: [source] retries = 101: must be between 0 and 100" },
	{ MIN_CONF "connect_timeout_ms = 0\n",
	  "@:3: [source] connect_timeout_ms = 0: must be between 1 and "
	  "4294967295" },
	{ MIN_CONF "read_timeout_ms = 99\n",
	  "@:3: [source] read_timeout_ms = 99: must be between 100 and "
	  "3600000" },
	{ MIN_CONF "request_timeout_ms = 4294967296\n",
	  "@:3: [source] request_timeout_ms = 4294967296: must be between 1 "
	  "and 4294967295" },
	{ MIN_CONF "[prefetch]\nconnections = 1025\n",
	  "@:4: [prefetch] connections = 1025: must be between 1 and 1024" },
	{ MIN_CONF "[prefetch]\nfiles = many\n",
	  "@:4: [prefetch] files = many: not an unsigned integer" },
	{ MIN_CONF "anonymous = maybe\n",
	  "@:3: [source] anonymous = maybe: not a boolean (true/false, yes/no, "
	  "on/off, 1/0)" },
	{ MIN_CONF "[mount]\nallow_other = 2\n",
	  "@:4: [mount] allow_other = 2: not a boolean (true/false, yes/no, "
	  "on/off, 1/0)" },
	{ MIN_CONF "addressing = dns\n",
	  "@:3: [source] addressing = dns: must be one of auto, path or "
	  "virtual" },
	{ MIN_CONF "[shard]\norder = random\n",
	  "@:4: [shard] order = random: must be one of shuffle or none" },
	{ MIN_CONF "[shard]\nlayout = rows\n",
	  "@:4: [shard] layout = rows: must be one of strided, contiguous or "
	  "bytes" },
	{ MIN_CONF "[shard]\nbalance = trim\n",
	  "@:4: [shard] balance = trim: must be one of none, drop or pad" },
	{ "[source]\nurl = data/train\n",
	  "@:2: [source] url = data/train: " URL_WHY },
	{ "[source]\nurl = s3://\n", "@:2: [source] url = s3://: " URL_WHY },
	{ "[source]\nurl = s3:///key\n",
	  "@:2: [source] url = s3:///key: " URL_WHY },
	{ "[source]\nurl = http://host/x\n",
	  "@:2: [source] url = http://host/x: " URL_WHY },
	{ "[source]\nurl = gs://my bucket/x\n",
	  "@:2: [source] url = gs://my bucket/x: " URL_WHY },
	{ "[source]\nurl =\n", "@:2: [source] url = : " URL_WHY },
	{ MIN_CONF "endpoint = 127.0.0.1:9000\n",
	  "@:3: [source] endpoint = 127.0.0.1:9000: not an http:// or https:// "
	  "URL" },
	{ MIN_CONF "endpoint = https://\n",
	  "@:3: [source] endpoint = https://: not an http:// or https:// "
	  "URL" },
	{ MIN_CONF "region = us east\n",
	  "@:3: [source] region = us east: not a region name (letters, digits, "
	  "'-', '_')" },
	{ MIN_CONF "region =\n",
	  "@:3: [source] region = : not a region name (letters, digits, '-', "
	  "'_')" },
	{ MIN_CONF "manifest = s3://bucket\n",
	  "@:3: [source] manifest = s3://bucket: " MANIFEST_WHY },
	{ MIN_CONF "manifest = s3://bucket/dir/\n",
	  "@:3: [source] manifest = s3://bucket/dir/: " MANIFEST_WHY },
	{ MIN_CONF "manifest = manifest.json\n",
	  "@:3: [source] manifest = manifest.json: " MANIFEST_WHY },
	/* ';' right after '=' is no comment to inih: the value keeps it. */
	{ MIN_CONF "manifest =; none\n",
	  "@:3: [source] manifest = ; none: " MANIFEST_WHY },
	{ MIN_CONF "manifest_sha256 = abc\n",
	  "@:3: [source] manifest_sha256 = abc: not 64 hex digits" },
	{ MIN_CONF "manifest_sha256 = " SHA_LOWER "0\n",
	  "@:3: [source] manifest_sha256 = " SHA_LOWER "0: not 64 hex "
	  "digits" },
	{ MIN_CONF "manifest_sha256 = g" SHA_LOWER "\n",
	  "@:3: [source] manifest_sha256 = g" SHA_LOWER ": not 64 hex digits" },
	{ MIN_CONF "[cache]\ndir = cache\n",
	  "@:4: [cache] dir = cache: not an absolute path" },
	{ MIN_CONF "[cache]\ndir =\n",
	  "@:4: [cache] dir = : not an absolute path" },
	{ MIN_CONF "[mount]\npath = mnt/x\n",
	  "@:4: [mount] path = mnt/x: not an absolute path" },
	{ MIN_CONF "[cache]\nsize = 10X\n", "@:4: [cache] size = 10X: " SIZE_WHY
					    " or a percentage (1% to 100%)" },
	/* '#' starts an inline comment only after a blank. */
	{ MIN_CONF "[cache]\nsize = 10G#big\n",
	  "@:4: [cache] size = 10G#big: " SIZE_WHY
	  " or a percentage (1% to 100%)" },
	{ MIN_CONF "[cache]\nsize = 0\n",
	  "@:4: [cache] size = 0: must be at least 1" },
	{ MIN_CONF "[cache]\nsize = 16777216T\n",
	  "@:4: [cache] size = 16777216T: out of range (more than 64 bits)" },
	{ MIN_CONF "[cache]\nsize = 0%\n",
	  "@:4: [cache] size = 0%: percentage must be between 1 and 100" },
	{ MIN_CONF "[cache]\nsize = 101%\n",
	  "@:4: [cache] size = 101%: percentage must be between 1 and 100" },
	{ MIN_CONF "[cache]\nsize = %\n",
	  "@:4: [cache] size = %: not a percentage" },
	{ MIN_CONF "[cache]\nsize = 5%%\n",
	  "@:4: [cache] size = 5%%: not a percentage" },
	{ MIN_CONF "[prefetch]\nmemory = 0\n",
	  "@:4: [prefetch] memory = 0: must be at least 1" },
	{ MIN_CONF "[prefetch]\nmemory = 1.5G\n",
	  "@:4: [prefetch] memory = 1.5G: " SIZE_WHY },
	{ MIN_CONF "[shard]\nranks = 15-8\n",
	  "@:4: [shard] ranks = 15-8: range 15-8 ends before it starts" },
	{ MIN_CONF "[shard]\nranks = 1,,2\n",
	  "@:4: [shard] ranks = 1,,2: not a list of ranks and ranges such as "
	  "0,2,8-15" },
	{ MIN_CONF "[shard]\nranks = 99999999999999999999\n",
	  "@:4: [shard] ranks = 99999999999999999999: rank out of range (more "
	  "than 64 bits)" },
	{ MIN_CONF "[metrics]\nlisten = localhost:9100\n",
	  "@:4: [metrics] listen = localhost:9100: " LISTEN_WHY },
	{ MIN_CONF "[metrics]\nlisten = 127.0.0.1:0\n",
	  "@:4: [metrics] listen = 127.0.0.1:0: " LISTEN_WHY },
	{ MIN_CONF "[metrics]\nlisten = 127.0.0.1:65536\n",
	  "@:4: [metrics] listen = 127.0.0.1:65536: " LISTEN_WHY },
	{ MIN_CONF "[metrics]\nlisten = ::1:9100\n",
	  "@:4: [metrics] listen = ::1:9100: " LISTEN_WHY },
	{ MIN_CONF "[log]\nfile = shardfs.log\n",
	  "@:4: [log] file = shardfs.log: not an absolute path" },
	{ MIN_CONF "[shard]\nunit = file\n",
	  "@:4: [shard] unit = file: must be one of object or record" },
	{ MIN_CONF "[records]\nformat = csv\n",
	  "@:4: [records] format = csv: must be one of tfrecord, tfrecord.gz, "
	  "jsonl, jsonl.gz or tar" },
	{ MIN_CONF "[records]\nparts = 0\n",
	  "@:4: [records] parts = 0: must be between 1 and 99999" },
	{ MIN_CONF "[records]\nindex = records.idx\n",
	  "@:4: [records] index = records.idx: not an absolute file path, "
	  "s3://bucket/key, gs://bucket/key or nfs://server/path/file" },
	{ MIN_CONF "[shard]\nunit = record\n[records]\nformat = jsonl.gz\n"
		   "[cache]\nenabled = false\n",
	  "@:8: [cache] enabled = false: [records] format is compressed: its "
	  "records are decompressed once into the disk cache, which must be "
	  "enabled" },
	{ MIN_CONF "[shard]\nunit = record\n[cache]\nenabled = false\n"
		   "[records]\nformat = tfrecord.gz\n",
	  "@:8: [records] format = tfrecord.gz: a compressed format needs the "
	  "disk cache ([cache] enabled = true): its records are decompressed "
	  "once into it" },
	{ MIN_CONF "[foo]\nbar = 1\n",
	  "@:4: [foo] bar = 1: unknown section (sections are source, shard, "
	  "records, cache, prefetch, mount, log, metrics, transform NAME)" },
	{ MIN_CONF "[Shard]\nseed = 1\n",
	  "@:4: [Shard] seed = 1: unknown section (sections are source, shard, "
	  "records, cache, prefetch, mount, log, metrics, transform NAME)" },
	{ MIN_CONF "[shard]\nwolrd_size = 8\n",
	  "@:4: [shard] wolrd_size = 8: unknown key (keys in [shard] "
	  "are " SHARD_KEYS ")" },
	{ "world_size = 8\n" MIN_CONF,
	  "@:1: world_size = 8: key outside any section" },
	{ "[source]\nurl = /a\nurl = /b\n",
	  "@:3: [source] url = /b: already set at line 2" },
	{ "[shard]\nseed = 1\n" MIN_CONF "[shard]\nseed = 1\n",
	  "@:6: [shard] seed = 1: already set at line 2" },
};

START_TEST(test_bad_value)
{
	expect_fail(bad_cases[_i].text, NULL, 0, bad_cases[_i].want);
}
END_TEST

/* ---- overrides ---- */

START_TEST(test_overrides)
{
	char *ov[] = {
		OV("shard.world_size=8"),
		OV(" shard . ranks = 1-2 , 5 "),
		OV("source.endpoint=https://storage.example:443"),
		OV("source.endpoint=http://127.0.0.1:4443"),
		OV("source.manifest="),
		OV("cache.size=80%"),
		OV("mount.path=/mnt/x"),
		OV("source.url=gs://b/p"),
	};
	struct config *cfg;

	cfg = load_ok("[source]\nurl = /a\nmanifest = /m.json\n"
		      "[shard]\nworld_size = 64\n[cache]\nsize = 1T\n",
		      ov, sizeof(ov) / sizeof(ov[0]));
	ck_assert_uint_eq(cfg->shard.spec.world_size, 8);
	ck_assert_uint_eq(cfg->shard.n_ranks, 2);
	ck_assert(!config_rank_selected(cfg, 0));
	ck_assert(config_rank_selected(cfg, 1));
	ck_assert(config_rank_selected(cfg, 2));
	ck_assert(!config_rank_selected(cfg, 3));
	ck_assert(config_rank_selected(cfg, 5));
	ck_assert_str_eq(cfg->source.endpoint, "http://127.0.0.1:4443");
	ck_assert_ptr_null(cfg->source.manifest);
	ck_assert_uint_eq(cfg->cache.size_bytes, 0);
	ck_assert_uint_eq(cfg->cache.size_percent, 80);
	ck_assert_str_eq(cfg->mount.path, "/mnt/x");
	ck_assert_str_eq(cfg->source.url, "gs://b/p");
	config_free(cfg);

	/* The url may come from the command line alone. */
	cfg = load_ok("[shard]\nseed = 3\n", ov + 7, 1);
	ck_assert_str_eq(cfg->source.url, "gs://b/p");
	ck_assert_uint_eq(cfg->shard.spec.seed, 3);
	config_free(cfg);
}
END_TEST

START_TEST(test_override_errors)
{
	static const struct {
		const char *ov, *want;
	} cases[] = {
		{ "shard.world_size=abc",
		  "-o shard.world_size=abc: not an unsigned integer" },
		{ "shard.order=sorted",
		  "-o shard.order=sorted: must be one of shuffle or none" },
		{ "world_size=8",
		  "-o world_size=8: expected section.key=value" },
		{ "shard.world_size",
		  "-o shard.world_size: expected section.key=value" },
		{ "=8", "-o =8: expected section.key=value" },
		{ ".seed=8", "-o .seed=8: expected section.key=value" },
		{ "shard.=8", "-o shard.=8: expected section.key=value" },
		{ "seed=0.5", "-o seed=0.5: expected section.key=value" },
		{ "foo.bar=1",
		  "-o foo.bar=1: unknown section (sections are source, shard, "
		  "records, cache, prefetch, mount, log, metrics, transform "
		  "NAME)" },
		{ "shard.nope=1", "-o shard.nope=1: unknown key (keys in "
				  "[shard] are " SHARD_KEYS ")" },
		{ "cache.dir=rel", "-o cache.dir=rel: not an absolute path" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *ov[] = { OV("shard.seed=1"), OV(cases[i].ov) };

		expect_fail(MIN_CONF, ov, 2, cases[i].want);
	}
}
END_TEST

/* ---- ranks ---- */

static struct config *load_ranks(const char *ranks)
{
	char text[512];

	snprintf(text, sizeof(text),
		 MIN_CONF "[shard]\nworld_size = 1048576\nranks = %s\n", ranks);
	return load_ok(text, NULL, 0);
}

START_TEST(test_ranks)
{
	static const struct {
		const char *text;
		size_t n;
		struct ranks_range want[4];
	} cases[] = {
		{ "0,2, 8-15", 3, { { 0, 0 }, { 2, 2 }, { 8, 15 } } },
		{ "3,1,2", 1, { { 1, 3 } } },
		{ "0-4,2-8, 10 - 12 ,9", 1, { { 0, 12 } } },
		{ "7,7,7", 1, { { 7, 7 } } },
		{ "20-30,0-0,25-26,31", 2, { { 0, 0 }, { 20, 31 } } },
		{ "1048575", 1, { { 1048575, 1048575 } } },
	};
	struct config *cfg;
	size_t i, j;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cfg = load_ranks(cases[i].text);
		ck_assert_msg(cfg->shard.n_ranks == cases[i].n,
			      "%s: %zu ranges", cases[i].text,
			      cfg->shard.n_ranks);
		for (j = 0; j < cases[i].n; j++) {
			ck_assert_uint_eq(cfg->shard.ranks[j].lo,
					  cases[i].want[j].lo);
			ck_assert_uint_eq(cfg->shard.ranks[j].hi,
					  cases[i].want[j].hi);
		}
		config_free(cfg);
	}

	/* Empty is every rank. */
	cfg = load_ranks("");
	ck_assert_ptr_null(cfg->shard.ranks);
	ck_assert(config_rank_selected(cfg, 0));
	ck_assert(config_rank_selected(cfg, 1048575));
	ck_assert(!config_rank_selected(cfg, 1048576));
	config_free(cfg);
}
END_TEST

START_TEST(test_rank_selected)
{
	struct config *cfg = load_ranks("0, 2, 8-15, 100-199, 1000");
	uint64_t r;

	for (r = 0; r < 1100; r++) {
		bool want = r == 0 || r == 2 || (r >= 8 && r <= 15) ||
			    (r >= 100 && r <= 199) || r == 1000;

		ck_assert_msg(config_rank_selected(cfg, r) == want, "rank %lu",
			      (unsigned long)r);
	}
	ck_assert(!config_rank_selected(cfg, UINT64_MAX));
	config_free(cfg);
}
END_TEST

START_TEST(test_rank_errors)
{
	static const char *const bad[] = { "1,",  ",1",	 "a",	"-1", "1-",
					   "1-a", "1 2", "0x1", "1;2" };
	char text[256], want[512];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), MIN_CONF "[shard]\nranks = %s\n",
			 bad[i]);
		snprintf(want, sizeof(want),
			 "@:4: [shard] ranks = %s: not a list of ranks and "
			 "ranges such as 0,2,8-15",
			 bad[i]);
		expect_fail(text, NULL, 0, want);
	}
}
END_TEST

/* ---- config_parse_size ---- */

START_TEST(test_parse_size)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
		{ "0", 0 },
		{ "1", 1 },
		{ "512", 512 },
		{ "10B", 10 },
		{ "1K", 1024 },
		{ "1k", 1024 },
		{ "1KB", 1024 },
		{ "1KiB", 1024 },
		{ "2M", UINT64_C(2) << 20 },
		{ "2MiB", UINT64_C(2) << 20 },
		{ "3G", UINT64_C(3) << 30 },
		{ "3gB", UINT64_C(3) << 30 },
		{ "4T", UINT64_C(4) << 40 },
		{ "007K", 7 << 10 },
		{ "16777215T", UINT64_C(16777215) << 40 },
		{ "18446744073709551615", UINT64_MAX },
	};
	static const char *const bad[] = {
		"",
		"-1",
		"+1",
		" 1",
		"1 ",
		"1 K",
		"1.5G",
		"1Ki",
		"1iB",
		"1Kb",
		"1P",
		"G",
		"K1",
		"1KK",
		"0x10",
		"16777216T",
		"18446744073709551616",
		"1e3",
		"1KiBB",
	};
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 1234;
		ck_assert_msg(config_parse_size(good[i].s, &v) == 0, "%s",
			      good[i].s);
		ck_assert_msg(v == good[i].v, "%s: %llu", good[i].s,
			      (unsigned long long)v);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 1234;
		ck_assert_msg(config_parse_size(bad[i], &v) == -EINVAL, "%s",
			      bad[i]);
		ck_assert_uint_eq(v, 1234);
	}
	ck_assert_int_eq(config_parse_size(NULL, &v), -EINVAL);
	ck_assert_int_eq(config_parse_size("1", NULL), -EINVAL);
}
END_TEST

/* ---- cross-key checks ---- */

START_TEST(test_cross_ranks)
{
	char *ws8[] = { OV("shard.world_size=8") };
	char *ranks8[] = { OV("shard.ranks=0-8") };

	expect_fail(MIN_CONF "[shard]\nworld_size = 64\nranks = 0-3, 60-70\n",
		    NULL, 0,
		    "@:5: [shard] ranks = 0-3, 60-70: rank 70 is not below "
		    "world_size 64 (set at @:4)");
	/* ranks from the file, world_size from the command line: the
	 * message names both. */
	expect_fail(MIN_CONF "[shard]\nranks = 8-15\nworld_size = 64\n", ws8, 1,
		    "@:4: [shard] ranks = 8-15: rank 15 is not below "
		    "world_size 8 (set by -o shard.world_size=8)");
	expect_fail(MIN_CONF "[shard]\nranks = 1\n", NULL, 0,
		    "@:4: [shard] ranks = 1: rank 1 is not below world_size 1 "
		    "(the default)");
	expect_fail(MIN_CONF "[shard]\nworld_size = 8\n", ranks8, 1,
		    "-o shard.ranks=0-8: rank 8 is not below world_size 8 "
		    "(set at @:4)");
}
END_TEST

START_TEST(test_cross_spec)
{
	const struct shard_spec bad = { .world_size = 1,
					.layout = SHARD_LAYOUT_BYTES,
					.balance = SHARD_BALANCE_DROP };
	const char *msg = shard_spec_check(&bad);
	char *layout_ov[] = { OV("shard.layout=bytes") };
	char want[512];
	struct config *cfg;

	ck_assert_ptr_nonnull(msg);
	/* The key set last is the one blamed. */
	snprintf(want, sizeof(want), "@:5: [shard] balance = drop: %s", msg);
	expect_fail(MIN_CONF "[shard]\nlayout = bytes\nbalance = drop\n", NULL,
		    0, want);
	snprintf(want, sizeof(want), "@:5: [shard] layout = bytes: %s", msg);
	expect_fail(MIN_CONF "[shard]\nbalance = drop\nlayout = bytes\n", NULL,
		    0, want);
	/* ...but never a key whose default would not help. */
	snprintf(want, sizeof(want), "@:5: [shard] balance = pad: %s", msg);
	expect_fail(MIN_CONF
		    "[shard]\nlayout = bytes\nbalance = pad\nseed = 9\n",
		    NULL, 0, want);
	snprintf(want, sizeof(want), "-o shard.layout=bytes: %s", msg);
	expect_fail(MIN_CONF "[shard]\nbalance = pad\n", layout_ov, 1, want);

	cfg = load_ok(MIN_CONF "[shard]\nlayout = bytes\n", NULL, 0);
	ck_assert_int_eq(cfg->shard.spec.layout, SHARD_LAYOUT_BYTES);
	config_free(cfg);
}
END_TEST

START_TEST(test_cross_url)
{
	expect_fail("[shard]\nseed = 1\n", NULL, 0,
		    "@: [source] url is required");
	expect_fail("", NULL, 0, "@: [source] url is required");
	/* Unsetting it from the command line is not possible either. */
	{
		char *ov[] = { OV("source.url=") };

		expect_fail(MIN_CONF, ov, 1, "-o source.url=: " URL_WHY);
	}
}
END_TEST

/* ---- ownership and the error buffer ---- */

START_TEST(test_ownership)
{
	struct config *cfg = SENTINEL;
	char err[10];
	char *ov[] = { OV("source.region=x"), OV("source.region=y"),
		       OV("cache.dir=/c"),    OV("shard.ranks=1"),
		       OV("shard.ranks=2-3"), OV("shard.world_size=4"),
		       OV("source.url=/z"),   OV("shard.seed=x") };
	const size_t n_ov = sizeof(ov) / sizeof(ov[0]);
	const char *text = MIN_CONF "[shard]\nranks = 9\n";

	config_free(NULL);

	/* The message is cut to fit and always terminated. */
	memset(err, 'x', sizeof(err));
	ck_assert_int_eq(load_len("[source]\nurl = x\n", 17, NULL, 0, &cfg, err,
				  sizeof(err)),
			 -EINVAL);
	ck_assert_uint_eq(strlen(err), sizeof(err) - 1);
	ck_assert_ptr_eq(cfg, SENTINEL);
	ck_assert_int_eq(
		load_len("[source]\nurl = x\n", 17, NULL, 0, &cfg, NULL, 0),
		-EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);

	/* Replaced values are freed (ASan's leak check sees the rest), and
	 * a failure after many allocations frees them all. */
	cfg = load_ok(MIN_CONF, ov, n_ov - 1);
	ck_assert_str_eq(cfg->source.region, "y");
	ck_assert_uint_eq(cfg->shard.ranks[0].lo, 2);
	config_free(cfg);
	cfg = SENTINEL;
	ck_assert_int_eq(load_len(text, strlen(text), ov, n_ov, &cfg, NULL, 0),
			 -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);

	ck_assert_int_eq(config_load(NULL, NULL, 0, &cfg, NULL, 0), -EINVAL);
	ck_assert_int_eq(config_load(conf_path, NULL, 1, &cfg, NULL, 0),
			 -EINVAL);
	ck_assert_ptr_eq(cfg, SENTINEL);
}
END_TEST

/* ---- [cache] enabled, inline_max, chunk_size, fsync ---- */

START_TEST(test_cache_keys)
{
	struct config *cfg = load_ok(MIN_CONF, NULL, 0);

	ck_assert(cfg->cache.enabled);
	ck_assert_uint_eq(cfg->cache.inline_max, UINT64_C(256) << 10);
	ck_assert_uint_eq(cfg->cache.chunk_size, UINT64_C(8) << 20);
	ck_assert_uint_eq(cfg->cache.chunk_size, CACHE_CHUNK_SIZE_DEFAULT);
	ck_assert(!cfg->cache.fsync);
	config_free(cfg);

	cfg = load_ok(MIN_CONF "[cache]\nenabled = no\ninline_max = 0\n"
			       "chunk_size = 64K\nfsync = on\nsize = 50%\n",
		      NULL, 0);
	ck_assert(!cfg->cache.enabled);
	ck_assert_uint_eq(cfg->cache.inline_max, 0);
	ck_assert_uint_eq(cfg->cache.chunk_size, UINT64_C(64) << 10);
	ck_assert(cfg->cache.fsync);
	ck_assert_uint_eq(cfg->cache.size_percent, 50);
	config_free(cfg);

	{
		char *ov[] = { OV("cache.enabled=false"),
			       OV("cache.inline_max=1M"),
			       OV("cache.chunk_size=1G") };

		cfg = load_ok(MIN_CONF, ov, 3);
		ck_assert(!cfg->cache.enabled);
		ck_assert_uint_eq(cfg->cache.inline_max, UINT64_C(1) << 20);
		ck_assert_uint_eq(cfg->cache.chunk_size, UINT64_C(1) << 30);
		config_free(cfg);
	}
}
END_TEST

START_TEST(test_cache_key_errors)
{
	char *ov[] = { OV("cache.chunk_size=2G") };

	expect_fail(MIN_CONF "[cache]\nenabled = maybe\n", NULL, 0,
		    "@:4: [cache] enabled = maybe: not a boolean "
		    "(true/false, yes/no, on/off, 1/0)");
	expect_fail(MIN_CONF "[cache]\ninline_max = 2M\n", NULL, 0,
		    "@:4: [cache] inline_max = 2M: must be between 0 and "
		    "1048576");
	expect_fail(MIN_CONF "[cache]\nchunk_size = 4K\n", NULL, 0,
		    "@:4: [cache] chunk_size = 4K: must be between 65536 and "
		    "1073741824");
	expect_fail(MIN_CONF "[cache]\nchunk_size = big\n", NULL, 0,
		    "@:4: [cache] chunk_size = big: not a size (digits and "
		    "an optional K, M, G or T suffix)");
	expect_fail(MIN_CONF, ov, 1,
		    "-o cache.chunk_size=2G: must be between 65536 and "
		    "1073741824");
	expect_fail(MIN_CONF "[cache]\ncolour = red\n", NULL, 0,
		    "@:4: [cache] colour = red: unknown key (keys in [cache] "
		    "are dir, size, enabled, inline_max, chunk_size, fsync)");
}
END_TEST

/* ---- shardfs.conf(5) and the examples against the key table ---- */

/* The source tree: tests run from its root unless SRCDIR says otherwise. */
static const char *srcdir(void)
{
	const char *d = getenv("SRCDIR");

	return d && *d ? d : ".";
}

struct man_key {
	char section[32];
	char name[64];
	char text[2048];
};

/* Reads every ".TP" / ".B name" entry under a ".SS [section]" heading. */
static size_t man_keys(const char *path, struct man_key *out, size_t max)
{
	FILE *f = fopen(path, "r");
	char line[1024], section[32] = "";
	struct man_key *cur = NULL;
	bool tag = false;
	size_t n = 0;

	ck_assert_msg(f != NULL, "cannot read %s", path);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, ".SS", 3) || !strncmp(line, ".SH", 3)) {
			const char *lb = strchr(line, '['), *rb;

			section[0] = '\0';
			cur = NULL;
			rb = lb ? strchr(lb, ']') : NULL;
			if (!strncmp(line, ".SS", 3) && rb &&
			    (size_t)(rb - lb) < sizeof(section))
				snprintf(section, sizeof(section), "%.*s",
					 (int)(rb - lb - 1), lb + 1);
			continue;
		}
		if (!strcmp(line, ".TP")) {
			cur = NULL;
			tag = true;
			continue;
		}
		if (tag && *section && !strncmp(line, ".B ", 3)) {
			ck_assert_uint_lt(n, max);
			cur = &out[n++];
			memset(cur, 0, sizeof(*cur));
			snprintf(cur->section, sizeof(cur->section), "%s",
				 section);
			snprintf(cur->name, sizeof(cur->name), "%.63s",
				 line + 3);
			tag = false;
			continue;
		}
		tag = false;
		if (cur &&
		    strlen(cur->text) + strlen(line) + 2 < sizeof(cur->text)) {
			strcat(cur->text, line);
			strcat(cur->text, "\n");
		}
	}
	fclose(f);
	return n;
}

/* man[j] of man[0..n) is where key info is documented, with its default;
 * section is the page's ("transform NAME" for a transform's keys). */
static void man_has(const struct man_key *man, size_t n, const char *path,
		    const char *section, const struct config_key_info *info)
{
	char want[256];
	size_t j;

	for (j = 0; j < n; j++)
		if (!strcmp(man[j].section, section) &&
		    !strcmp(man[j].name, info->name))
			break;
	ck_assert_msg(j < n, "[%s] %s is not in %s", section, info->name, path);
	if (info->default_text && !*info->default_text)
		snprintf(want, sizeof(want), "Default: \\fB\"\"\\fR");
	else if (info->default_text)
		snprintf(want, sizeof(want), "Default: \\fB%s\\fR",
			 info->default_text);
	else
		snprintf(want, sizeof(want), "Default: none");
	ck_assert_msg(strstr(man[j].text, want) != NULL,
		      "[%s] %s: %s does not say \"%s\"", section, info->name,
		      path, want);
}

/* Every key of the table (and of a [transform NAME] section) is in
 * shardfs.conf(5) under its section with its default, and the page
 * documents no key the tables lack. */
START_TEST(test_man_page)
{
	static struct man_key man[160];
	struct config_key_info info;
	char path[4096];
	size_t n, i, j, count;
	bool tr;

	snprintf(path, sizeof(path), "%s/man/shardfs.conf.5", srcdir());
	n = man_keys(path, man, sizeof(man) / sizeof(man[0]));
	ck_assert_uint_gt(config_key_count(), 30);
	for (i = 0; i < config_key_count(); i++) {
		ck_assert_int_eq(config_key_at(i, &info), 0);
		man_has(man, n, path, info.section, &info);
	}
	ck_assert_uint_gt(config_transform_key_count(), 10);
	for (i = 0; i < config_transform_key_count(); i++) {
		ck_assert_int_eq(config_transform_key_at(i, &info), 0);
		ck_assert_str_eq(info.section, "transform");
		man_has(man, n, path, "transform NAME", &info);
	}
	for (j = 0; j < n; j++) {
		tr = !strcmp(man[j].section, "transform NAME");
		count = tr ? config_transform_key_count() : config_key_count();
		for (i = 0; i < count; i++) {
			ck_assert_int_eq(tr ? config_transform_key_at(i, &info)
					    : config_key_at(i, &info),
					 0);
			if ((tr || !strcmp(man[j].section, info.section)) &&
			    !strcmp(man[j].name, info.name))
				break;
		}
		ck_assert_msg(i < count,
			      "%s documents [%s] %s, which is no key", path,
			      man[j].section, man[j].name);
	}
	ck_assert_int_eq(config_key_at(config_key_count(), &info), -EINVAL);
	ck_assert_int_eq(
		config_transform_key_at(config_transform_key_count(), &info),
		-EINVAL);
}
END_TEST

/* The shipped examples load as they are. */
START_TEST(test_examples)
{
	struct config *cfg;
	char pattern[4096], err[1024];
	glob_t g;
	size_t i;

	snprintf(pattern, sizeof(pattern), "%s/examples/*.conf", srcdir());
	ck_assert_int_eq(glob(pattern, 0, NULL, &g), 0);
	ck_assert_uint_ge(g.gl_pathc, 2);
	for (i = 0; i < g.gl_pathc; i++) {
		ck_assert_msg(config_load(g.gl_pathv[i], NULL, 0, &cfg, err,
					  sizeof(err)) == 0,
			      "%s", err);
		config_free(cfg);
	}
	globfree(&g);
}
END_TEST

/* ---- [transform NAME] sections ---- */

#define TRANSFORM_KEYS                                                         \
	"command, version, mode, workers, timeout_ms, memory, output_max, "    \
	"user, sandbox, env, suffix, replace_extension, verify"

static void assert_argv(char *const *argv, const char *const *want)
{
	size_t i;

	ck_assert_ptr_nonnull(argv);
	for (i = 0; want[i]; i++) {
		ck_assert_ptr_nonnull(argv[i]);
		ck_assert_str_eq(argv[i], want[i]);
	}
	ck_assert_ptr_null(argv[i]);
}

START_TEST(test_transform_defaults)
{
	struct config *cfg = load_ok(
		MIN_CONF "[transform resize]\ncommand = /bin/cat\n", NULL, 0);
	const struct config_transform *t;
	static const char *const env[] = { "PATH",	"LANG",	       "LC_ALL",
					   "HOME=/tmp", "TMPDIR=/tmp", NULL };
	static const char *const cmd[] = { "/bin/cat", NULL };

	ck_assert_uint_eq(cfg->n_transforms, 1);
	t = &cfg->transforms[0];
	ck_assert_str_eq(t->name, "resize");
	ck_assert_str_eq(t->command, "/bin/cat");
	assert_argv(t->argv, cmd);
	ck_assert_str_eq(t->version, "");
	ck_assert_int_eq(t->mode, TRANSFORM_MODE_PROCESS);
	ck_assert_uint_eq(t->workers, 0);
	ck_assert_uint_eq(t->timeout_ms, TRANSFORM_TIMEOUT_MS_DEFAULT);
	ck_assert_uint_eq(t->memory, TRANSFORM_MEMORY_DEFAULT);
	ck_assert_uint_eq(t->output_max, TRANSFORM_OUTPUT_MAX_DEFAULT);
	ck_assert_str_eq(t->user, TRANSFORM_USER_DEFAULT);
	ck_assert_int_eq(t->sandbox, TRANSFORM_SANDBOX_BWRAP);
	assert_argv(t->env, env);
	ck_assert_str_eq(t->suffix, "");
	ck_assert(!t->replace_extension);
	ck_assert_uint_eq(t->verify_percent, 0);
	ck_assert_uint_eq(t->line, 4);
	config_free(cfg);

	/* No section: no transform. */
	cfg = load_ok(MIN_CONF, NULL, 0);
	ck_assert_uint_eq(cfg->n_transforms, 0);
	ck_assert_ptr_null(cfg->transforms);
	config_free(cfg);
}
END_TEST

START_TEST(test_transform_full)
{
	struct config *cfg = load_ok(
		MIN_CONF "[transform resize224]\n"
			 "command = python3 -m shardfs.transform "
			 "\"/opt/my transforms/resize.py\" --size=224\n"
			 "version = 2026-11 \"b\"\n"
			 "mode = WORKER\n"
			 "workers = 3\n"
			 "timeout_ms = 5000\n"
			 "memory = 2G\n"
			 "output_max = 1M\n"
			 "user = shardfs-transform\n"
			 "sandbox = none\n"
			 "env = PYTHONPATH=/opt/lib OMP_NUM_THREADS=1 LANG\n"
			 "suffix = .png\n"
			 "replace_extension = yes\n"
			 "verify = 5%\n"
			 "[cache]\n"
			 "dir = /tmp/c\n"
			 "[transform tok_2]\n"
			 "verify = 100\n"
			 "env =\n"
			 "command = /usr/bin/tok\n",
		NULL, 0);
	const struct config_transform *t;
	static const char *const cmd[] = {
		"python3",	     "-m",
		"shardfs.transform", "/opt/my transforms/resize.py",
		"--size=224",	     NULL
	};
	static const char *const env[] = { "PYTHONPATH=/opt/lib",
					   "OMP_NUM_THREADS=1", "LANG", NULL };
	static const char *const cmd2[] = { "/usr/bin/tok", NULL };
	static const char *const none[] = { NULL };

	ck_assert_uint_eq(cfg->n_transforms, 2);
	t = &cfg->transforms[0];
	ck_assert_str_eq(t->name, "resize224");
	assert_argv(t->argv, cmd);
	ck_assert_str_eq(t->version, "2026-11 \"b\"");
	ck_assert_int_eq(t->mode, TRANSFORM_MODE_WORKER);
	ck_assert_uint_eq(t->workers, 3);
	ck_assert_uint_eq(t->timeout_ms, 5000);
	ck_assert_uint_eq(t->memory, UINT64_C(2) << 30);
	ck_assert_uint_eq(t->output_max, UINT64_C(1) << 20);
	ck_assert_str_eq(t->user, "shardfs-transform");
	ck_assert_int_eq(t->sandbox, TRANSFORM_SANDBOX_NONE);
	assert_argv(t->env, env);
	ck_assert_str_eq(t->suffix, ".png");
	ck_assert(t->replace_extension);
	ck_assert_uint_eq(t->verify_percent, 5);
	ck_assert_uint_eq(t->line, 4);
	ck_assert_str_eq(cfg->cache.dir, "/tmp/c");

	t = &cfg->transforms[1];
	ck_assert_str_eq(t->name, "tok_2");
	assert_argv(t->argv, cmd2);
	/* env set empty: the environment cleared entirely. */
	assert_argv(t->env, none);
	ck_assert_uint_eq(t->verify_percent, 100);
	ck_assert_uint_eq(t->line, 20);
	config_free(cfg);
}
END_TEST

START_TEST(test_transform_split)
{
	static const struct {
		const char *s;
		const char *want[6];
	} ok[] = {
		{ "a", { "a" } },
		{ "  a\tb   c  ", { "a", "b", "c" } },
		{ "a \"b c\" d", { "a", "b c", "d" } },
		{ "a x\"b c\"y\"\"z", { "a", "xb cyz" } },
		{ "a \"\"", { "a", "" } },
		{ "'a b'", { "'a", "b'" } },
		{ "a $HOME *.jpg |x", { "a", "$HOME", "*.jpg", "|x" } },
	};
	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "", "no command (the program and its arguments, separated "
		      "by blanks)" },
		{ "  \t ", "no command (the program and its arguments, "
			   "separated by blanks)" },
		{ "a \"b c", "a double quote at byte 3 is not closed" },
		{ "\"\" x", "the program's name is empty" },
	};
	char why[256];
	char **argv;
	size_t i, j;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		argv = NULL;
		ck_assert_msg(config_split_command(ok[i].s, &argv, why,
						   sizeof(why)) == 0,
			      "%s: %s", ok[i].s, why);
		assert_argv(argv, ok[i].want);
		for (j = 0; argv[j]; j++)
			free(argv[j]);
		free(argv);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		argv = (char **)&tmpdir;
		why[0] = '\0';
		ck_assert_int_eq(
			config_split_command(bad[i].s, &argv, why, sizeof(why)),
			-EINVAL);
		ck_assert_str_eq(why, bad[i].why);
		ck_assert_ptr_eq(argv, (char **)&tmpdir);
	}
}
END_TEST

START_TEST(test_transform_errors)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ MIN_CONF "[transform]\ncommand = cat\n",
		  "@:4: [transform] command = cat: a transform's section is "
		  "[transform NAME], NAME of 1 to 32 characters a-z, 0-9, _ "
		  "or -" },
		{ MIN_CONF "[transform Resize]\ncommand = cat\n",
		  "@:4: [transform Resize] command = cat: a transform's "
		  "section is [transform NAME], NAME of 1 to 32 characters "
		  "a-z, 0-9, _ or -" },
		{ MIN_CONF "[transform a.b]\ncommand = cat\n",
		  "@:4: [transform a.b] command = cat: a transform's section "
		  "is [transform NAME], NAME of 1 to 32 characters a-z, 0-9, "
		  "_ or -" },
		{ MIN_CONF "[transformer x]\ncommand = cat\n",
		  "@:4: [transformer x] command = cat: not a [transform NAME] "
		  "section" },
		{ MIN_CONF "[transform a]\ncomand = cat\n",
		  "@:4: [transform a] comand = cat: unknown key (keys in "
		  "[transform NAME] are " TRANSFORM_KEYS ")" },
		{ MIN_CONF "[transform a]\ncommand = cat\ncommand = tac\n",
		  "@:5: [transform a] command = tac: already set at line 4" },
		{ MIN_CONF "[transform a]\ncommand = cat\n[transform b]\n"
			   "command = tac\n[transform a]\ncommand = rev\n",
		  "@:8: [transform a] command = rev: already set at line 4" },
		{ MIN_CONF "[transform a]\ncommand = a \"b\n",
		  "@:4: [transform a] command = a \"b: a double quote at byte "
		  "3 is not closed" },
		{ MIN_CONF "[transform a]\ncommand =\n",
		  "@:4: [transform a] command = : no command (the program and "
		  "its arguments, separated by blanks)" },
		{ MIN_CONF "[transform a]\nversion = 1\n",
		  "@:4: [transform a]: command is required" },
		{ MIN_CONF "[transform a]\ncommand = cat\n[transform b]\n"
			   "mode = worker\n",
		  "@:6: [transform b]: command is required" },
		{ MIN_CONF "[transform a]\ncommand = cat\nmode = pool\n",
		  "@:5: [transform a] mode = pool: not one of process, "
		  "worker" },
		{ MIN_CONF "[transform a]\ncommand = cat\nsandbox = off\n",
		  "@:5: [transform a] sandbox = off: not one of bwrap, none" },
		{ MIN_CONF "[transform a]\ncommand = cat\nworkers = -1\n",
		  "@:5: [transform a] workers = -1: not an unsigned integer" },
		{ MIN_CONF "[transform a]\ncommand = cat\nworkers = 1025\n",
		  "@:5: [transform a] workers = 1025: out of range 0..1024" },
		{ MIN_CONF "[transform a]\ncommand = cat\ntimeout_ms = 0\n",
		  "@:5: [transform a] timeout_ms = 0: out of range "
		  "1..3600000" },
		{ MIN_CONF "[transform a]\ncommand = cat\nmemory = 1M\n",
		  "@:5: [transform a] memory = 1M: out of range "
		  "16777216..18446744073709551615" },
		{ MIN_CONF "[transform a]\ncommand = cat\nmemory = lots\n",
		  "@:5: [transform a] memory = lots: not a size (e.g. 512M, "
		  "4G)" },
		{ MIN_CONF "[transform a]\ncommand = cat\noutput_max = 5G\n",
		  "@:5: [transform a] output_max = 5G: out of range "
		  "1..4294967296" },
		{ MIN_CONF "[transform a]\ncommand = cat\nuser = root\n",
		  "@:5: [transform a] user = root: a transform never runs as "
		  "root" },
		{ MIN_CONF "[transform a]\ncommand = cat\nuser = 0\n",
		  "@:5: [transform a] user = 0: a transform never runs as "
		  "root" },
		{ MIN_CONF "[transform a]\ncommand = cat\nuser =\n",
		  "@:5: [transform a] user = : not a user name" },
		{ MIN_CONF "[transform a]\ncommand = cat\nenv = PATH 1X\n",
		  "@:5: [transform a] env = PATH 1X: \"1X\" is not NAME or "
		  "NAME=VALUE (NAME: letters, digits, _)" },
		{ MIN_CONF "[transform a]\ncommand = cat\nenv = =v\n",
		  "@:5: [transform a] env = =v: \"=v\" is not NAME or "
		  "NAME=VALUE (NAME: letters, digits, _)" },
		{ MIN_CONF "[transform a]\ncommand = cat\nverify = 101%\n",
		  "@:5: [transform a] verify = 101%: out of range 0..100" },
		{ MIN_CONF "[transform a]\ncommand = cat\nverify = half\n",
		  "@:5: [transform a] verify = half: not a percentage (e.g. 5 "
		  "or 5%)" },
		{ MIN_CONF "[transform a]\ncommand = cat\nverify = %\n",
		  "@:5: [transform a] verify = %: not a percentage (e.g. 5 or "
		  "5%)" },
		{ MIN_CONF "[transform a]\ncommand = cat\nsuffix = a/b\n",
		  "@:5: [transform a] suffix = a/b: a suffix has at most 32 "
		  "bytes and no '/'" },
		{ MIN_CONF "[transform a]\ncommand = cat\n"
			   "replace_extension = maybe\n",
		  "@:5: [transform a] replace_extension = maybe: not a "
		  "boolean (true/false, yes/no, on/off, 1/0)" },
	};
	char *ov[] = { OV("transform.a.version=2") };
	char text[4096];
	size_t i, n;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_fail(cases[i].text, NULL, 0, cases[i].want);

	/* Only the file declares transforms. */
	expect_fail(MIN_CONF "[transform a]\ncommand = cat\n", ov, 1,
		    "-o transform.a.version=2: [transform NAME] keys are set "
		    "in the file only");

	/* At most CONFIG_TRANSFORMS_MAX sections. */
	n = (size_t)snprintf(text, sizeof(text), "%s", MIN_CONF);
	for (i = 0; i <= CONFIG_TRANSFORMS_MAX; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n,
				      "[transform t%zu]\ncommand = cat\n", i);
	expect_fail(text, NULL, 0,
		    "@:36: [transform t16] command = cat: more than 16 "
		    "[transform] sections");
	/* A name of CONFIG_TRANSFORM_NAME_MAX bytes is fine, one more is
	 * not. */
	config_free(load_ok(MIN_CONF "[transform "
				     "abcdefghijklmnopqrstuvwxyz-_0123]\n"
				     "command = cat\n",
			    NULL, 0));
	expect_fail(MIN_CONF "[transform abcdefghijklmnopqrstuvwxyz-_01234]\n"
			     "command = cat\n",
		    NULL, 0,
		    "@:4: [transform abcdefghijklmnopqrstuvwxyz-_01234] "
		    "command = cat: a transform's section is [transform "
		    "NAME], NAME of 1 to 32 characters a-z, 0-9, _ or -");
}
END_TEST

START_TEST(test_transform_output_name)
{
	static const struct {
		const char *suffix;
		bool replace;
		const char *name, *want;
	} cases[] = {
		{ "", false, "a.jpg", "a.jpg" },
		{ ".png", false, "a.jpg", "a.jpg.png" },
		{ ".png", true, "a.jpg", "a.png" },
		{ ".png", true, "a.tar.gz", "a.tar.png" },
		{ ".png", true, "noext", "noext.png" },
		{ ".png", true, ".hidden", ".hidden.png" },
		{ "", true, "a.jpg", "a" },
		{ ".npy", true, "a.", "a.npy" },
	};
	struct config_transform t = { 0 };
	char buf[16];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		t.suffix = (char *)cases[i].suffix;
		t.replace_extension = cases[i].replace;
		ck_assert_int_eq(config_transform_output_name(&t, cases[i].name,
							      buf, sizeof(buf)),
				 0);
		ck_assert_str_eq(buf, cases[i].want);
	}
	t.suffix = (char *)".png";
	t.replace_extension = false;
	ck_assert_int_eq(config_transform_output_name(&t, "0123456789ab", buf,
						      sizeof(buf)),
			 -ENAMETOOLONG);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc;

	tc = tcase_create("defaults");
	tcase_add_test(tc, test_defaults);
	suite_add_tcase(s, tc);

	tc = tcase_create("full");
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_design_example);
	tcase_add_test(tc, test_lexical);
	suite_add_tcase(s, tc);

	tc = tcase_create("file_errors");
	tcase_add_test(tc, test_missing_file);
	tcase_add_test(tc, test_unreadable_file);
	suite_add_tcase(s, tc);

	tc = tcase_create("syntax_errors");
	tcase_add_test(tc, test_syntax_errors);
	tcase_add_test(tc, test_long_line);
	tcase_add_test(tc, test_comments);
	tcase_add_test(tc, test_nul_byte);
	tcase_add_test(tc, test_continuation);
	suite_add_tcase(s, tc);

	tc = tcase_create("value_errors");
	tcase_add_loop_test(tc, test_bad_value, 0,
			    (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("overrides");
	tcase_add_test(tc, test_overrides);
	tcase_add_test(tc, test_override_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("ranks");
	tcase_add_test(tc, test_ranks);
	tcase_add_test(tc, test_rank_selected);
	tcase_add_test(tc, test_rank_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("parse_size");
	tcase_add_test(tc, test_parse_size);
	suite_add_tcase(s, tc);

	tc = tcase_create("cross_key");
	tcase_add_test(tc, test_cross_ranks);
	tcase_add_test(tc, test_cross_spec);
	tcase_add_test(tc, test_cross_url);
	suite_add_tcase(s, tc);

	tc = tcase_create("ownership");
	tcase_add_test(tc, test_ownership);
	suite_add_tcase(s, tc);

	tc = tcase_create("documented");
	tcase_add_test(tc, test_man_page);
	tcase_add_test(tc, test_examples);
	suite_add_tcase(s, tc);

	tc = tcase_create("transforms");
	tcase_add_test(tc, test_transform_defaults);
	tcase_add_test(tc, test_transform_full);
	tcase_add_test(tc, test_transform_split);
	tcase_add_test(tc, test_transform_errors);
	tcase_add_test(tc, test_transform_output_name);
	suite_add_tcase(s, tc);

	tc = tcase_create("cache_keys");
	tcase_add_test(tc, test_cache_keys);
	tcase_add_test(tc, test_cache_key_errors);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	static char dir[64];

	tmpdir = dir; /* filled in before any test runs */
	return unit_run_in_tmpdir(config_suite(), "/tmp/check_config.XXXXXX",
				  dir, sizeof(dir));
}
