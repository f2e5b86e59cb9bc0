/*
 * check_control: the text of the .shardfs/ control files, tested through
 * fs/control.h (fs/control.c, fs/control_stats.c; the .shardfs/ files of
 * fs/control_files.c are tested through a mount: test_status, test_kernel).
 *
 * The plan cases use the DESIGN.md §5 test vectors (N=10, seed 42, W=4: the
 * epoch-0 shuffle [8,2,4,3,6,0,7,9,5,1]) on a manifest "k0".."k9" whose item
 * i weighs 100 + i bytes, so every line below was computed by hand from the
 * spec: e.g. strided pad gives r0 [8,6,5] = 108+106+105 = 319 bytes, and
 * imbalance_bytes = 319 * 4 / 1255 = 1.0167.
 */
#include "fs/control.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "fs/view.h"
#include "plan/manifest.h"
#include "plan/shard.h"
#include "tests/unit/unit.h"
#include "util/log.h"

/* "k0".."k9", item i of 100 + i bytes, plus extra keys (skipped ones). */
static struct manifest *ten_items(const char *const *extra, size_t n_extra)
{
	struct manifest *m = manifest_new();
	char key[8];
	size_t i;

	ck_assert_ptr_nonnull(m);
	for (i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%zu", i);
		ck_assert_int_eq(manifest_add(m, key, 2, 100 + i, "e", 1, 0),
				 0);
	}
	for (i = 0; i < n_extra; i++)
		ck_assert_int_eq(manifest_add(m, extra[i], strlen(extra[i]), 5,
					      "e", 1, 0),
				 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_uint_eq(m->count, 10);
	return m;
}

static struct shard_plan *plan_of(const struct shard_spec *spec, size_t n)
{
	struct shard_plan *plan = NULL;

	ck_assert_int_eq(shard_plan_build(spec, n, NULL, NULL, &plan), 0);
	return plan;
}

static const struct shard_spec spec_pad = {
	.world_size = 4,
	.seed = 42,
	.order = SHARD_ORDER_SHUFFLE,
	.layout = SHARD_LAYOUT_STRIDED,
	.balance = SHARD_BALANCE_PAD,
};

/* A memory stream; text() closes it and returns what was written. */
struct out {
	FILE *f;
	char *buf;
	size_t len;
};

static void out_open(struct out *o)
{
	o->buf = NULL;
	o->len = 0;
	o->f = open_memstream(&o->buf, &o->len);
	ck_assert_ptr_nonnull(o->f);
}

static const char *text(struct out *o)
{
	ck_assert_int_eq(fclose(o->f), 0);
	o->f = NULL;
	return o->buf;
}

static void expect_text(struct out *o, const char *want)
{
	const char *got = text(o);

	ck_assert_msg(o->len == strlen(want) && memcmp(got, want, o->len) == 0,
		      "got:\n%s\nwant:\n%s", got, want);
	free(o->buf);
}

START_TEST(test_plan_strided_pad)
{
	static const char *const extra[] = { "z/" };
	struct manifest *m = ten_items(extra, 1);
	struct shard_plan *plan = plan_of(&spec_pad, m->count);
	char want[2048];
	struct out o;

	snprintf(want, sizeof(want),
		 "spec shardfs-shard v1\n"
		 "manifest_sha256 %s\n"
		 "manifest_items 10\n"
		 "manifest_bytes 1045\n"
		 "skipped_keys 1\n"
		 "skipped_keys_directory_marker 1\n"
		 "world_size 4\n"
		 "seed 42\n"
		 "epoch 0\n"
		 "order shuffle\n"
		 "layout strided\n"
		 "balance pad\n"
		 "reshuffle global\n"
		 "dropped_items 0\n"
		 "imbalance_bytes 1.0167\n"
		 "imbalance_items 0\n"
		 "rank 0 items 3 pad 0 bytes 319\n"
		 "rank 1 items 3 pad 0 bytes 303\n"
		 "rank 2 items 3 pad 1 bytes 319\n"
		 "rank 3 items 3 pad 1 bytes 314\n",
		 m->digest);
	out_open(&o);
	ck_assert_int_eq(control_write_plan(o.f, m, &spec_pad, plan), 0);
	expect_text(&o, want);
	ck_assert_uint_eq(strlen(m->digest), 64);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_plan_contiguous_none)
{
	/* r0 [8,2,4] 314, r1 [3,6,0] 309, r2 [7,9] 216, r3 [5,1] 206. */
	static const struct shard_spec spec = {
		.world_size = 4,
		.seed = 42,
		.order = SHARD_ORDER_SHUFFLE,
		.layout = SHARD_LAYOUT_CONTIGUOUS,
		.balance = SHARD_BALANCE_NONE,
	};
	struct manifest *m = ten_items(NULL, 0);
	struct shard_plan *plan = plan_of(&spec, m->count);
	char want[2048];
	struct out o;

	snprintf(want, sizeof(want),
		 "spec shardfs-shard v1\n"
		 "manifest_sha256 %s\n"
		 "manifest_items 10\n"
		 "manifest_bytes 1045\n"
		 "skipped_keys 0\n"
		 "world_size 4\n"
		 "seed 42\n"
		 "epoch 0\n"
		 "order shuffle\n"
		 "layout contiguous\n"
		 "balance none\n"
		 "reshuffle global\n"
		 "dropped_items 0\n"
		 "imbalance_bytes 1.2019\n"
		 "imbalance_items 1\n"
		 "rank 0 items 3 pad 0 bytes 314\n"
		 "rank 1 items 3 pad 0 bytes 309\n"
		 "rank 2 items 2 pad 0 bytes 216\n"
		 "rank 3 items 2 pad 0 bytes 206\n",
		 m->digest);
	out_open(&o);
	ck_assert_int_eq(control_write_plan(o.f, m, &spec, plan), 0);
	expect_text(&o, want);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_plan_strided_drop)
{
	/* S' = [8,2,4,3,6,0,7,9] (5 and 1 dropped): r0 [8,6] 214,
	 * r1 [2,0] 202, r2 [4,7] 211, r3 [3,9] 212; 856 / 839. Skipped
	 * keys of two reasons. */
	static const struct shard_spec spec = {
		.world_size = 4,
		.seed = 42,
		.order = SHARD_ORDER_SHUFFLE,
		.layout = SHARD_LAYOUT_STRIDED,
		.balance = SHARD_BALANCE_DROP,
	};
	static const char *const extra[] = { "a//b", "..", "d/" };
	struct manifest *m = ten_items(extra, ARRAY_LEN(extra));
	struct shard_plan *plan = plan_of(&spec, m->count);
	char want[2048];
	struct out o;

	snprintf(want, sizeof(want),
		 "spec shardfs-shard v1\n"
		 "manifest_sha256 %s\n"
		 "manifest_items 10\n"
		 "manifest_bytes 1045\n"
		 "skipped_keys 3\n"
		 "skipped_keys_directory_marker 1\n"
		 "skipped_keys_bad_component 2\n"
		 "world_size 4\n"
		 "seed 42\n"
		 "epoch 0\n"
		 "order shuffle\n"
		 "layout strided\n"
		 "balance drop\n"
		 "reshuffle global\n"
		 "dropped_items 2\n"
		 "imbalance_bytes 1.0203\n"
		 "imbalance_items 0\n"
		 "rank 0 items 2 pad 0 bytes 214\n"
		 "rank 1 items 2 pad 0 bytes 202\n"
		 "rank 2 items 2 pad 0 bytes 211\n"
		 "rank 3 items 2 pad 0 bytes 212\n",
		 m->digest);
	out_open(&o);
	ck_assert_int_eq(control_write_plan(o.f, m, &spec, plan), 0);
	expect_text(&o, want);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_order_vector)
{
	static const char *const want[4] = {
		"k8\nk6\nk5\n",
		"k2\nk0\nk1\n",
		"k4\nk7\nk8\tpad\n",
		"k3\nk9\nk2\tpad\n",
	};
	struct manifest *m = ten_items(NULL, 0);
	struct shard_plan *plan = plan_of(&spec_pad, m->count);
	struct out o;
	uint64_t r;

	for (r = 0; r < 4; r++) {
		out_open(&o);
		ck_assert_int_eq(control_write_order(o.f, m, plan, r), 0);
		expect_text(&o, want[r]);
	}
	/* A rank outside the plan has no items. */
	out_open(&o);
	ck_assert_int_eq(control_write_order(o.f, m, plan, 4), 0);
	expect_text(&o, "");
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_order_escaped)
{
	/* Canonical order: "a\tb" "c%d" "e\nf" "g\rh" "x\x01y" "\xc3\xa9";
	 * order none, W=4, strided, pad: r0 [0,4] r1 [1,5] r2 [2,0*]
	 * r3 [3,1*]. */
	static const char *const keys[] = {
		"\xc3\xa9", "g\rh", "e\nf", "c%d", "a\tb", "x\x01y",
	};
	static const char *const want[4] = {
		"a%09b\nx%01y\n",
		"c%25d\n\xc3\xa9\n",
		"e%0Af\na%09b\tpad\n",
		"g%0Dh\nc%25d\tpad\n",
	};
	static const struct shard_spec spec = {
		.world_size = 4,
		.order = SHARD_ORDER_NONE,
		.layout = SHARD_LAYOUT_STRIDED,
		.balance = SHARD_BALANCE_PAD,
	};
	struct manifest *m = manifest_new();
	struct shard_plan *plan;
	struct out o;
	size_t i;

	for (i = 0; i < ARRAY_LEN(keys); i++)
		ck_assert_int_eq(
			manifest_add(m, keys[i], strlen(keys[i]), i, "", 0, 0),
			0);
	ck_assert_int_eq(manifest_finish(m), 0);
	plan = plan_of(&spec, m->count);
	for (i = 0; i < 4; i++) {
		out_open(&o);
		ck_assert_int_eq(control_write_order(o.f, m, plan, i), 0);
		expect_text(&o, want[i]);
	}
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

/* One parsed sample line. */
struct sample {
	char name[256];
	char labels[2048];
	uint64_t value;
};

/* Parses Prometheus text; asserts the format and that every metric has
 * one # HELP and one # TYPE before its first sample. */
static size_t parse_stats(const char *text, size_t len, struct sample *out,
			  size_t cap)
{
	char help[96][64], type[96][64];
	size_t n_help = 0, n_type = 0, n = 0, i;
	const char *p = text, *end = text + len;

	ck_assert_uint_gt(len, 0);
	ck_assert_int_eq(text[len - 1], '\n');
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		char line[4096], name[64], rest[160];

		ck_assert_ptr_nonnull(nl);
		ck_assert_uint_lt((size_t)(nl - p), sizeof(line));
		memcpy(line, p, (size_t)(nl - p));
		line[nl - p] = '\0';
		p = nl + 1;
		if (strncmp(line, "# HELP ", 7) == 0) {
			ck_assert_int_eq(
				sscanf(line + 7, "%63s %159[^\n]", name, rest),
				2);
			for (i = 0; i < n_help; i++)
				ck_assert_str_ne(help[i], name);
			ck_assert_uint_lt(n_help, ARRAY_LEN(help));
			strcpy(help[n_help++], name);
			continue;
		}
		if (strncmp(line, "# TYPE ", 7) == 0) {
			ck_assert_int_eq(
				sscanf(line + 7, "%63s %159s", name, rest), 2);
			ck_assert_msg(strcmp(rest, "counter") == 0 ||
					      strcmp(rest, "gauge") == 0,
				      "%s has type %s", name, rest);
			/* Counters are named *_total. */
			if (strcmp(rest, "counter") == 0)
				ck_assert_str_eq(name + strlen(name) - 6,
						 "_total");
			for (i = 0; i < n_type; i++)
				ck_assert_str_ne(type[i], name);
			/* HELP first. */
			ck_assert_uint_gt(n_help, 0);
			ck_assert_str_eq(help[n_help - 1], name);
			ck_assert_uint_lt(n_type, ARRAY_LEN(type));
			strcpy(type[n_type++], name);
			continue;
		}
		ck_assert_msg(line[0] != '#', "stray comment: %s", line);
		ck_assert_uint_lt(n, cap);
		{
			char *brace = strchr(line, '{'), *space;
			char *endp;

			/* The last '}': a label value may hold one. */
			space = strchr(brace ? strrchr(line, '}') : line, ' ');
			ck_assert_ptr_nonnull(space);
			*space = '\0';
			out[n].labels[0] = '\0';
			if (brace) {
				ck_assert_int_eq(space[-1], '}');
				space[-1] = '\0';
				snprintf(out[n].labels, sizeof(out[n].labels),
					 "%s", brace + 1);
				*brace = '\0';
			}
			snprintf(out[n].name, sizeof(out[n].name), "%.255s",
				 line);
			ck_assert_uint_gt(strlen(space + 1), 0);
			out[n].value = strtoull(space + 1, &endp, 10);
			ck_assert_msg(*endp == '\0', "bad value '%s'",
				      space + 1);
		}
		/* Declared before the first sample. */
		for (i = 0; i < n_type; i++)
			if (strcmp(type[i], out[n].name) == 0)
				break;
		ck_assert_msg(i < n_type, "%s has no # TYPE before it",
			      out[n].name);
		for (i = 0; i < n_help; i++)
			if (strcmp(help[i], out[n].name) == 0)
				break;
		ck_assert_msg(i < n_help, "%s has no # HELP", out[n].name);
		ck_assert_msg(strncmp(out[n].name, "shardfs_", 8) == 0,
			      "%s lacks the shardfs_ prefix", out[n].name);
		n++;
	}
	/* No declaration without samples. */
	ck_assert_uint_eq(n_help, n_type);
	return n;
}

static uint64_t sample_value(const struct sample *s, size_t n, const char *name,
			     const char *labels)
{
	size_t i, found = SIZE_MAX;

	for (i = 0; i < n; i++)
		if (strcmp(s[i].name, name) == 0 &&
		    strcmp(s[i].labels, labels) == 0) {
			ck_assert_msg(found == SIZE_MAX, "%s{%s} twice", name,
				      labels);
			found = i;
		}
	ck_assert_msg(found != SIZE_MAX, "no sample %s{%s}", name, labels);
	return s[found].value;
}

static const struct control_stats stats_given = {
	.libcurl = "7.0.0-given",
	.uptime_seconds = 11,
	.generation = 3,
	.reads = 3,
	.read_bytes = 4096,
	.read_errors = 1,
	.ops = { [FS_OP_LOOKUP] = 40, [FS_OP_READ] = 41, [FS_OP_OPEN] = 1 },
	.self_lookups = 77,
	.stale_reads = 2,
	.backend_reads = 5,
	.backend_bytes = 8192,
	.backend_errors = UINT64_MAX,
	.log = {
		.errors = 7,
		.warnings = 9,
		.last_time = 1700000000,
		.last = "backend: \"x\" down",
	},
	.cache = {
		.enabled = true,
		.hits = 21,
		.misses = 22,
		.bytes_from_cache = 23,
		.evictions = 24,
		.crc_failures = 25,
		.store_failures = 26,
		.live_bytes = 27,
		.budget_bytes = 28,
		.hedges_issued = 29,
		.hedges_won = 30,
		.derived_runs = 31,
		.derived_bytes = 32,
		.whole_checked = 37,
		.whole_mismatches = 38,
		.pushed_files = 33,
		.pushed_bytes = 34,
		.push_failures = 35,
		.push_sentinels = 36,
	},
};

/* Shows ranks 0 and 2. */
static bool even_ranks(const void *ctx, uint64_t r)
{
	(void)ctx;
	return r % 2 == 0;
}

/* Writes the stats for st, checks the format and the values every mount
 * has, and returns the samples in s. */
static size_t stats_common(const struct control_stats *st, struct sample *s,
			   size_t cap)
{
	static const char *const extra[] = { "z/", "y/", "a//b" };
	struct manifest *m = ten_items(extra, ARRAY_LEN(extra));
	struct shard_plan *plan = plan_of(&spec_pad, m->count);
	struct view *view = NULL;
	struct out o;
	const char *t;
	size_t n;
	int i;

	ck_assert_int_eq(view_build(m, plan, NULL, even_ranks, NULL, &view), 0);
	out_open(&o);
	ck_assert_int_eq(control_write_stats(o.f, m, &spec_pad, plan, view, st),
			 0);
	t = text(&o);
	n = parse_stats(t, o.len, s, cap);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_manifest_items", ""), 10);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_manifest_bytes", ""),
			  1045);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_world_size", ""), 4);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_uptime_seconds", ""), 11);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_generation", ""), 3);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_reads_total", ""), 3);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_read_bytes_total", ""),
			  4096);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_read_errors_total", ""),
			  1);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_kernel_lookups_total", ""), 77);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_stale_reads_total", ""),
			  2);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_kernel_pushes_total", ""),
			  st->cache.pushed_files);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_kernel_push_bytes_total", ""),
		st->cache.pushed_bytes);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_kernel_push_failures_total", ""),
		st->cache.push_failures);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_kernel_push_sentinels_total", ""),
		st->cache.push_sentinels);
	/* One series per opcode, zeros included. */
	ck_assert_uint_eq(sample_value(s, n, "shardfs_fuse_requests_total",
				       "op=\"lookup\""),
			  40);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_fuse_requests_total",
				       "op=\"read\""),
			  41);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_fuse_requests_total",
				       "op=\"open\""),
			  1);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_fuse_requests_total",
				       "op=\"release\""),
			  0);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_backend_requests_total", ""), 5);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_backend_bytes_total", ""),
			  8192);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_backend_errors_total", ""),
		UINT64_MAX);
	/* One skipped_keys series per reason, zeros included. */
	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++) {
		char labels[64];

		snprintf(labels, sizeof(labels), "reason=\"%s\"",
			 manifest_skip_name(i));
		ck_assert_uint_eq(
			sample_value(s, n, "shardfs_skipped_keys", labels),
			m->skipped[i]);
	}
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_DIR_MARKER], 2);
	ck_assert_uint_eq(m->skipped[MANIFEST_SKIP_BAD_COMPONENT], 1);
	/* Ranks 0 and 2 of the vector: r0 [8,6,5] 319 bytes, r2 [4,7] and
	 * a pad (8), which is no file: 104 + 107 = 211. */
	ck_assert_uint_eq(sample_value(s, n, "shardfs_ranks_served", ""), 2);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_served_objects", ""), 5);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_served_bytes", ""), 530);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_rank_objects", "rank=\"0\""), 3);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_rank_objects", "rank=\"2\""), 2);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_rank_bytes", "rank=\"0\""), 319);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_rank_bytes", "rank=\"2\""), 211);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_log_errors_total", ""),
			  st->log.errors);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_log_warnings_total", ""),
			  st->log.warnings);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_last_error_timestamp_seconds", ""),
		(uint64_t)st->log.last_time);
	{
		/* The plan digest is sha256 of the plan text, computed
		 * here with OpenSSL's one-shot SHA256(). */
		unsigned char md[SHA256_DIGEST_LENGTH];
		char want[512], hex[65];
		struct out p;

		out_open(&p);
		ck_assert_int_eq(control_write_plan(p.f, m, &spec_pad, plan),
				 0);
		text(&p);
		SHA256((const unsigned char *)p.buf, p.len, md);
		for (i = 0; i < SHA256_DIGEST_LENGTH; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
		free(p.buf);
		snprintf(want, sizeof(want),
			 "plan_sha256=\"%s\",manifest_sha256=\"%s\"", hex,
			 m->digest);
		ck_assert_uint_eq(sample_value(s, n, "shardfs_plan_info", want),
				  1);
		snprintf(want, sizeof(want),
			 "version=\"%s\",shard_spec=\"%s\",libfuse=\"3.",
			 SHARDFS_VERSION, SHARD_SPEC_VERSION);
		for (i = 0; i < (int)n; i++)
			if (strcmp(s[i].name, "shardfs_build_info") == 0)
				break;
		ck_assert_int_lt(i, (int)n);
		ck_assert_uint_eq(s[i].value, 1);
		ck_assert_msg(strncmp(s[i].labels, want, strlen(want)) == 0 &&
				      strstr(s[i].labels,
					     ",libcurl=\"7.0.0-given\"") !=
					      NULL,
			      "build_info {%s}", s[i].labels);
	}
	free(o.buf);
	view_free(view);
	shard_plan_free(plan);
	manifest_free(m);
	return n;
}

static int has_sample(const struct sample *s, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(s[i].name, name) == 0)
			return 1;
	return 0;
}

START_TEST(test_stats)
{
	struct control_stats st = stats_given;
	struct sample s[128];
	size_t n;

	/* No disk cache: one gauge says so, no other cache series. No error
	 * logged: no last_error_info. */
	memset(&st.cache, 0, sizeof(st.cache));
	memset(&st.log, 0, sizeof(st.log));
	n = stats_common(&st, s, ARRAY_LEN(s));
	ck_assert_uint_eq(sample_value(s, n, "shardfs_cache_enabled", ""), 0);
	ck_assert(!has_sample(s, n, "shardfs_cache_hits_total"));
	ck_assert(!has_sample(s, n, "shardfs_last_error_info"));
	/* The flow's bound on prefetch bytes in flight is the engine's,
	 * there with or without a disk cache. */
	ck_assert(has_sample(s, n, "shardfs_prefetch_inflight_max_bytes"));
	/* + build, plan, 3 served totals, 2 x 2 per rank, 3 log. */
	ck_assert_uint_eq(n, 26 + 13 + MANIFEST_SKIP_NREASONS + 12 + 13);
}
END_TEST

START_TEST(test_stats_cache)
{
	struct sample s[128];
	size_t n = stats_common(&stats_given, s, ARRAY_LEN(s));

	ck_assert_uint_eq(sample_value(s, n, "shardfs_cache_enabled", ""), 1);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_cache_hits_total", ""),
			  21);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_cache_misses_total", ""),
			  22);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_cache_bytes_from_cache_total", ""),
		23);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_cache_evictions_total", ""), 24);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_cache_crc_failures_total", ""), 25);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_cache_store_failures_total", ""),
		26);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_cache_live_bytes", ""),
			  27);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_cache_budget_bytes", ""),
			  28);
	ck_assert_uint_eq(sample_value(s, n,
				       "shardfs_cache_bytes_from_backend_total",
				       ""),
			  8192);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_hedges_issued_total", ""),
			  29);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_hedges_won_total", ""),
			  30);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_last_error_info",
				       "message=\"backend: \\\"x\\\" down\""),
			  1);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_cache_derived_runs_total", ""), 31);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_cache_derived_bytes_total", ""),
		32);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_cache_whole_checked_total", ""),
		37);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_cache_whole_mismatches_total", ""),
		38);
	ck_assert_uint_eq(n, 26 + 13 + 9 + MANIFEST_SKIP_NREASONS + 17 + 13);
}
END_TEST

/* The transform families: one sample per transform, labelled. */
START_TEST(test_stats_transforms)
{
	struct control_xform_stats x[2] = {
		{ .name = "resize",
		  .s = { .runs = 5,
			 .failures = 2,
			 .timeouts = 1,
			 .refused = 3,
			 .cpu_ns = 2500000,
			 .bytes_in = 1000,
			 .bytes_out = 200,
			 .verify_runs = 4,
			 .verify_mismatches = 1,
			 .queued = 6,
			 .ahead_runs = 7 } },
		{ .name = "tok", .s = { .runs = 9 } },
	};
	struct sample s[64];
	struct out o;
	const char *t;
	size_t n;

	out_open(&o);
	ck_assert_int_eq(control_write_xform_stats(o.f, x, 0), 0);
	ck_assert_int_eq(control_write_xform_stats(o.f, x, 2), 0);
	t = text(&o);
	n = parse_stats(t, o.len, s, ARRAY_LEN(s));
	ck_assert_uint_eq(n, 2 * 11);
#define R "transform=\"resize\""
	ck_assert_uint_eq(sample_value(s, n, "shardfs_transform_runs_total", R),
			  5);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_failures_total", R), 2);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_timeouts_total", R), 1);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_refused_total", R), 3);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_cpu_us_total", R), 2500);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_bytes_in_total", R),
		1000);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_bytes_out_total", R),
		200);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_verify_runs_total", R),
		4);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_verify_mismatches_total",
			     R),
		1);
	ck_assert_uint_eq(sample_value(s, n, "shardfs_transform_queued", R), 6);
	ck_assert_uint_eq(
		sample_value(s, n, "shardfs_transform_ahead_runs_total", R), 7);
#undef R
	ck_assert_uint_eq(sample_value(s, n, "shardfs_transform_runs_total",
				       "transform=\"tok\""),
			  9);
	free(o.buf);
}
END_TEST

START_TEST(test_stats_last_error_escaped)
{
	/* Quotes, backslashes, a newline, a '}', a valid two-byte
	 * character and bytes that are not UTF-8 (a lone continuation, an
	 * overlong, a truncated sequence at the end). */
	struct control_stats st = stats_given;
	struct sample s[128];
	size_t n;

	snprintf(st.log.last, sizeof(st.log.last), "%s",
		 "open \"a\\b\"\nnext} \xc3\xa9 \x80\xc0\xaf \xe2\x82");
	n = stats_common(&st, s, ARRAY_LEN(s));
	ck_assert_uint_eq(sample_value(s, n, "shardfs_last_error_info",
				       "message=\"open \\\"a\\\\b\\\"\\nnext} "
				       "\xc3\xa9 ??? ??\""),
			  1);
}
END_TEST

/* Where the log goes is one info sample; the log file lists the recent
 * warnings and errors, oldest first, with UTC times. */
START_TEST(test_log_target_and_file)
{
	struct control_stats st = stats_given;
	const struct log_entry e[2] = {
		{ .time = 86400, .level = LOG_WARNING, .msg = "w \"one\"" },
		{ .time = 86401, .level = LOG_ERR, .msg = "e two" },
	};
	struct sample s[96];
	struct out o;
	size_t n;

	snprintf(st.log.target, sizeof(st.log.target), "file");
	snprintf(st.log.path, sizeof(st.log.path), "/var/log/shardfs/m.log");
	snprintf(st.log.note, sizeof(st.log.note), "no syslog (/dev/log)");
	n = stats_common(&st, s, ARRAY_LEN(s));
	ck_assert_uint_eq(sample_value(s, n, "shardfs_log_target_info",
				       "target=\"file\",path=\"/var/log/"
				       "shardfs/m.log\",fallback=\"no syslog "
				       "(/dev/log)\""),
			  1);
	out_open(&o);
	ck_assert_int_eq(control_write_log(o.f, e, 2), 0);
	text(&o);
	ck_assert_str_eq(o.buf, "1970-01-02T00:00:00Z warning: w \"one\"\n"
				"1970-01-02T00:00:01Z error: e two\n");
	free(o.buf);
	out_open(&o);
	ck_assert_int_eq(control_write_log(o.f, e, 0), 0);
	text(&o);
	ck_assert_uint_eq(o.len, 0);
	free(o.buf);
}
END_TEST

/* sha256 of control_write_plan's text, with OpenSSL's one-shot SHA256(). */
static void plan_text_sha256(const struct manifest *m,
			     const struct shard_spec *spec,
			     const struct shard_plan *plan, char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	struct out o;
	int i;

	out_open(&o);
	ck_assert_int_eq(control_write_plan(o.f, m, spec, plan), 0);
	text(&o);
	SHA256((const unsigned char *)o.buf, o.len, md);
	for (i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	free(o.buf);
}

START_TEST(test_plan_digest)
{
	/* The kept digest follows what it is keyed by: another seed, then
	 * another manifest, then the first again each give their own. */
	struct shard_spec other = spec_pad;
	static const char *const extra[] = { "z/" };
	struct manifest *m = ten_items(NULL, 0);
	struct manifest *m2 = ten_items(extra, 1);
	struct shard_plan *plan = plan_of(&spec_pad, m->count), *plan2;
	char got[65], want[65], first[65];
	int round;

	other.seed = 43;
	plan2 = plan_of(&other, m->count);
	for (round = 0; round < 2; round++) {
		ck_assert_int_eq(control_plan_digest(m, &spec_pad, plan, got),
				 0);
		plan_text_sha256(m, &spec_pad, plan, want);
		ck_assert_str_eq(got, want);
		memcpy(first, got, sizeof(first));
		ck_assert_int_eq(control_plan_digest(m, &other, plan2, got), 0);
		plan_text_sha256(m, &other, plan2, want);
		ck_assert_str_eq(got, want);
		ck_assert_str_ne(got, first);
		/* Same keys and sizes, one more skipped key: another text. */
		ck_assert_int_eq(control_plan_digest(m2, &spec_pad, plan, got),
				 0);
		plan_text_sha256(m2, &spec_pad, plan, want);
		ck_assert_str_eq(got, want);
		ck_assert_str_ne(got, first);
	}
	shard_plan_free(plan2);
	shard_plan_free(plan);
	manifest_free(m2);
	manifest_free(m);
}
END_TEST

START_TEST(test_write_errors)
{
	static const struct control_stats st = { .reads = 1 };
	struct manifest *m = ten_items(NULL, 0);
	struct shard_plan *plan = plan_of(&spec_pad, m->count);
	struct view *view = NULL;
	char buf[16] = "";
	FILE *f;

	/* A stream that cannot be written reports -EIO. */
	f = fmemopen(buf, sizeof(buf), "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(control_write_plan(f, m, &spec_pad, plan), -EIO);
	fclose(f);
	f = fmemopen(buf, sizeof(buf), "r");
	ck_assert_int_eq(control_write_order(f, m, plan, 0), -EIO);
	fclose(f);
	ck_assert_int_eq(view_build(m, plan, NULL, NULL, NULL, &view), 0);
	f = fmemopen(buf, sizeof(buf), "r");
	ck_assert_int_eq(control_write_stats(f, m, &spec_pad, plan, view, &st),
			 -EIO);
	fclose(f);
	view_free(view);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

static Suite *control_suite(void)
{
	Suite *s = suite_create("control");
	struct {
		const char *name;
		const TTest *test;
	} cases[] = {
		{ "plan_strided_pad", test_plan_strided_pad },
		{ "plan_contiguous_none", test_plan_contiguous_none },
		{ "plan_strided_drop", test_plan_strided_drop },
		{ "order_vector", test_order_vector },
		{ "order_escaped", test_order_escaped },
		{ "stats", test_stats },
		{ "stats_cache", test_stats_cache },
		{ "stats_last_error_escaped", test_stats_last_error_escaped },
		{ "stats_transforms", test_stats_transforms },
		{ "log_target_and_file", test_log_target_and_file },
		{ "plan_digest", test_plan_digest },
		{ "write_errors", test_write_errors },
	};
	size_t i;

	for (i = 0; i < ARRAY_LEN(cases); i++) {
		TCase *tc = tcase_create(cases[i].name);

		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	/* Skipped keys are logged as warnings; the tests count them. */
	log_set_level(LOG_ERR - 1);
	return unit_run(control_suite());
}
