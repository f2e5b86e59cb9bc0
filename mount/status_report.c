/*
 * status_report: see status_report.h. Every figure comes from one sample
 * (the later one); the rates are differences of counters over the time
 * between the two reads.
 *
 * Over 700 lines on purpose: the one parser of the stats text and both of
 * its renderings (text, JSON), which share the sample helpers; a split
 * would export those helpers for two callers.
 */
#include "mount/status_report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "mount/commands.h"
#include "util/str.h"

void status_snap_free(struct status_snap *sn)
{
	size_t i;

	for (i = 0; i < sn->n; i++) {
		free(sn->s[i].name);
		free(sn->s[i].labels);
	}
	free(sn->s);
	sn->s = NULL;
	sn->n = 0;
}

/* Parses the text format's sample lines (comments skipped). Returns 0 or
 * -EINVAL for a line that is not a sample, -ENOMEM. */
int status_snap_parse(const char *text, size_t len, struct status_snap *sn)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *sp, *brace, *close = NULL;
		struct status_sample *grown, *s;
		char *vend;

		if (p == le || *p == '#') {
			p = le + 1;
			continue;
		}
		brace = memchr(p, '{', (size_t)(le - p));
		if (brace != NULL) {
			/* The closing brace is the last one: a label value
			 * may hold '}', the value never. */
			for (sp = le; sp > brace; sp--)
				if (*sp == '}') {
					close = sp;
					break;
				}
			if (close == NULL)
				return -EINVAL;
			sp = memchr(close, ' ', (size_t)(le - close));
		} else {
			sp = memchr(p, ' ', (size_t)(le - p));
		}
		if (sp == NULL)
			return -EINVAL;
		grown = realloc(sn->s, (sn->n + 1) * sizeof(*grown));
		if (grown == NULL)
			return -ENOMEM;
		sn->s = grown;
		s = &sn->s[sn->n];
		s->name = strndup(p, (size_t)((brace ? brace : sp) - p));
		s->labels =
			brace ? strndup(brace + 1, (size_t)(close - brace - 1))
			      : strdup("");
		if (s->name == NULL || s->labels == NULL) {
			free(s->name);
			free(s->labels);
			return -ENOMEM;
		}
		sn->n++;
		errno = 0;
		s->value = strtoull(sp + 1, &vend, 10);
		if (errno != 0 || vend != le)
			return -EINVAL;
		p = le + 1;
	}
	return 0;
}

/* The value of name (no labels), or 0 if absent; *found says which. */
static unsigned long long snap_get(const struct status_snap *sn,
				   const char *name, int *found)
{
	size_t i;

	for (i = 0; i < sn->n; i++)
		if (strcmp(sn->s[i].name, name) == 0 &&
		    sn->s[i].labels[0] == '\0') {
			if (found)
				*found = 1;
			return sn->s[i].value;
		}
	if (found)
		*found = 0;
	return 0;
}

static unsigned long long v(const struct status_snap *sn, const char *name)
{
	return snap_get(sn, name, NULL);
}

/* Label key's value (unescaped) from a sample's labels, malloc'ed, or
 * NULL if absent or out of memory. */
static char *label_get(const char *labels, const char *key)
{
	const char *p = labels;

	while (*p) {
		const char *eq = strchr(p, '=');
		char *out, *o;

		if (eq == NULL || eq[1] != '"')
			return NULL;
		out = malloc(strlen(eq));
		if (out == NULL)
			return NULL;
		o = out;
		for (p = eq + 2; *p && *p != '"'; p++) {
			if (*p == '\\' && p[1]) {
				p++;
				*o++ = *p == 'n' ? '\n' : *p;
			} else {
				*o++ = *p;
			}
		}
		*o = '\0';
		if ((size_t)(eq - labels) == strlen(key) &&
		    strncmp(labels, key, strlen(key)) == 0)
			return out;
		free(out);
		if (*p == '"')
			p++;
		if (*p == ',')
			p++;
		labels = p;
	}
	return NULL;
}

/* The first sample named name's label key, malloc'ed, or NULL. */
static char *snap_label(const struct status_snap *sn, const char *name,
			const char *key)
{
	size_t i;

	for (i = 0; i < sn->n; i++)
		if (strcmp(sn->s[i].name, name) == 0)
			return label_get(sn->s[i].labels, key);
	return NULL;
}

static void ranges_put(FILE *f, long long first, long long last,
		       const char *sep)
{
	if (last > first)
		fprintf(f, "%lld-%lld%s", first, last, sep);
	else
		fprintf(f, "%lld%s", first, sep);
}

/* The readers' requests of opcode op (shardfs_fuse_requests_total). */
static unsigned long long op_count(const struct status_snap *sn, const char *op)
{
	unsigned long long n = 0;
	size_t i;

	for (i = 0; i < sn->n; i++) {
		char *l;

		if (strcmp(sn->s[i].name, "shardfs_fuse_requests_total") != 0)
			continue;
		l = label_get(sn->s[i].labels, "op");
		if (l != NULL && strcmp(l, op) == 0)
			n = sn->s[i].value;
		free(l);
	}
	return n;
}

/* What a reader's file costs: the opcodes shown, in this order. */
static const char *const status_ops[] = { "lookup", "getattr", "open", "read",
					  "release" };

/* "0-3,8" from the rank_objects samples (in rank order), each rank also
 * appended to arr; malloc'ed, or NULL if out of memory. */
static char *ranks_text(const struct status_snap *sn, json_t *arr)
{
	long long first = -1, last = -1;
	char *out = NULL;
	size_t len = 0, i;
	FILE *f = open_memstream(&out, &len);

	if (f == NULL)
		return NULL;
	for (i = 0; i < sn->n; i++) {
		char *rs;
		long long r;

		if (strcmp(sn->s[i].name, "shardfs_rank_objects") != 0)
			continue;
		rs = label_get(sn->s[i].labels, "rank");
		r = rs ? strtoll(rs, NULL, 10) : -1;
		free(rs);
		if (r < 0)
			continue;
		json_array_append_new(arr, json_integer(r));
		if (first >= 0 && r == last + 1) {
			last = r;
			continue;
		}
		if (first >= 0)
			ranges_put(f, first, last, ",");
		first = last = r;
	}
	if (first >= 0)
		ranges_put(f, first, last, "");
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static double rate(const struct status_snap *a, const struct status_snap *b,
		   const char *name)
{
	unsigned long long x = v(a, name), y = v(b, name);
	double dt = b->time - a->time;

	return dt > 0 && y >= x ? (double)(y - x) / dt : 0.0;
}

/* hits / (hits + misses), or NaN when there were none. */
static double ratio(unsigned long long hits, unsigned long long misses)
{
	return hits + misses ? (double)hits / (double)(hits + misses) : NAN;
}

static json_t *json_ratio(double r)
{
	return isnan(r) ? json_null() : json_real(r);
}

static void human_pct(char *buf, size_t cap, double r)
{
	if (isnan(r))
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%.1f%%", r * 100);
}

/* One line of .shardfs/log: "2026-01-02T03:04:05Z LEVEL: message". */
struct status_recent {
	long long time; /* 0 if the time did not parse */
	char level[16];
	const char *msg; /* into the log text */
	size_t msg_len;
};

#define STATUS_RECENT_MAX 64 /* more than a daemon keeps */

/* What both forms print, taken from the later sample. */
struct status_info {
	const char *mp;
	const struct status_snap *s, *a, *b;	    /* s = b ? b : a */
	char *version, *spec, *plan, *mdig, *last;  /* NULL if absent */
	char *log_target, *log_path, *log_fallback; /* NULL if absent */
	json_t *ranks;				    /* the ranks served */
	char *rtext;				    /* "0-3,8" */
	int cache_on;
	double cache_hr, pf_hr; /* NaN: no lookups yet */
	unsigned long long last_time;
	struct status_recent recent[STATUS_RECENT_MAX];
	size_t n_recent;
	bool has_log; /* the mount has .shardfs/log */
};

/* Splits .shardfs/log's text into in->recent (the last
 * STATUS_RECENT_MAX lines); lines that do not parse are kept whole as the
 * message. */
static void recent_parse(struct status_info *in, const char *text)
{
	const char *p = text;

	while (p != NULL && *p) {
		const char *nl = strchr(p, '\n'),
			   *end = nl ? nl : p + strlen(p);
		const char *sp = memchr(p, ' ', (size_t)(end - p)), *colon;
		struct status_recent *r;
		struct tm tm = { 0 };
		char when[32];

		if (in->n_recent == STATUS_RECENT_MAX) {
			memmove(in->recent, in->recent + 1,
				(STATUS_RECENT_MAX - 1) * sizeof(*in->recent));
			in->n_recent--;
		}
		r = &in->recent[in->n_recent++];
		memset(r, 0, sizeof(*r));
		r->msg = p;
		r->msg_len = (size_t)(end - p);
		colon = sp ? memchr(sp, ':', (size_t)(end - sp)) : NULL;
		if (sp && colon && (size_t)(sp - p) < sizeof(when) &&
		    (size_t)(colon - sp - 1) < sizeof(r->level)) {
			memcpy(when, p, (size_t)(sp - p));
			when[sp - p] = '\0';
			if (strptime(when, "%Y-%m-%dT%H:%M:%SZ", &tm) != NULL) {
				r->time = (long long)timegm(&tm);
				memcpy(r->level, sp + 1,
				       (size_t)(colon - sp - 1));
				r->msg = colon + (colon + 1 < end ? 2 : 1);
				r->msg_len = (size_t)(end - r->msg);
			}
		}
		p = nl ? nl + 1 : NULL;
	}
}

/* The counters and gauges of the JSON form: section (NULL: the top
 * level), key, and the metric it is read from. */
static const struct status_field {
	const char *section, *key, *metric;
} status_fields[] = {
	{ NULL, "world_size", "shardfs_world_size" },
	{ NULL, "objects", "shardfs_served_objects" },
	{ NULL, "bytes", "shardfs_served_bytes" },
	{ NULL, "manifest_objects", "shardfs_manifest_items" },
	{ NULL, "manifest_bytes", "shardfs_manifest_bytes" },
	{ NULL, "uptime_seconds", "shardfs_uptime_seconds" },
	{ "reads", "count", "shardfs_reads_total" },
	{ "reads", "bytes", "shardfs_read_bytes_total" },
	{ "reads", "errors", "shardfs_read_errors_total" },
	{ "backend", "requests", "shardfs_backend_requests_total" },
	{ "backend", "bytes", "shardfs_backend_bytes_total" },
	{ "backend", "errors", "shardfs_backend_errors_total" },
	{ "backend", "inflight", "shardfs_backend_inflight" },
	{ "cache", "hits", "shardfs_cache_hits_total" },
	{ "cache", "misses", "shardfs_cache_misses_total" },
	{ "cache", "bytes_from_cache", "shardfs_cache_bytes_from_cache_total" },
	{ "cache", "live_bytes", "shardfs_cache_live_bytes" },
	{ "cache", "budget_bytes", "shardfs_cache_budget_bytes" },
	{ "cache", "whole_checked", "shardfs_cache_whole_checked_total" },
	{ "cache", "whole_mismatches", "shardfs_cache_whole_mismatches_total" },
	{ "kernel", "pushed_files", "shardfs_kernel_pushes_total" },
	{ "kernel", "pushed_bytes", "shardfs_kernel_push_bytes_total" },
	{ "kernel", "own_lookups", "shardfs_kernel_lookups_total" },
	{ "prefetch", "depth_files", "shardfs_prefetch_depth_files" },
	{ "prefetch", "hits", "shardfs_prefetch_hits_total" },
	{ "prefetch", "misses", "shardfs_prefetch_misses_total" },
	{ "prefetch", "issued", "shardfs_prefetch_issued_total" },
	{ "prefetch", "refused", "shardfs_prefetch_refused_total" },
	{ "memory", "in_use_bytes", "shardfs_memory_in_use_bytes" },
	{ "memory", "high_water_bytes", "shardfs_memory_high_water_bytes" },
	{ "memory", "budget_bytes", "shardfs_memory_budget_bytes" },
	{ "errors", "logged", "shardfs_log_errors_total" },
	{ "errors", "warnings", "shardfs_log_warnings_total" },
};

/* o's member key, an object created if there is none yet; NULL on
 * failure. */
/* The per-transform counters (shardfs_transform_*{transform="NAME"}),
 * by the key status shows them under. */
static const char *const status_xform[][2] = {
	{ "runs", "shardfs_transform_runs_total" },
	{ "failures", "shardfs_transform_failures_total" },
	{ "timeouts", "shardfs_transform_timeouts_total" },
	{ "refused", "shardfs_transform_refused_total" },
	{ "cpu_us", "shardfs_transform_cpu_us_total" },
	{ "bytes_in", "shardfs_transform_bytes_in_total" },
	{ "bytes_out", "shardfs_transform_bytes_out_total" },
	{ "verify_runs", "shardfs_transform_verify_runs_total" },
	{ "verify_mismatches", "shardfs_transform_verify_mismatches_total" },
	{ "queued", "shardfs_transform_queued" },
	{ "ahead_runs", "shardfs_transform_ahead_runs_total" },
};

#define XF_N (sizeof(status_xform) / sizeof(status_xform[0]))

/* Fills val[XF_N] with the counters of the transform whose runs sample is
 * the i-th sample; returns its name (malloc'ed), or NULL if sample i is
 * not one (or out of memory). */
static char *xform_at(const struct status_snap *sn, size_t i,
		      unsigned long long val[XF_N])
{
	char *name;

	if (strcmp(sn->s[i].name, status_xform[0][1]) != 0)
		return NULL;
	name = label_get(sn->s[i].labels, "transform");
	if (name == NULL)
		return NULL;
	for (size_t k = 0; k < XF_N; k++) {
		val[k] = 0;
		for (size_t j = 0; j < sn->n; j++)
			if (strcmp(sn->s[j].name, status_xform[k][1]) == 0 &&
			    strcmp(sn->s[j].labels, sn->s[i].labels) == 0) {
				val[k] = sn->s[j].value;
				break;
			}
	}
	return name;
}

static json_t *json_section(json_t *o, const char *key)
{
	json_t *sec = json_object_get(o, key);

	if (sec == NULL) {
		sec = json_object();
		if (json_object_set_new(o, key, sec) < 0)
			return NULL;
	}
	return sec;
}

static int report_json(const struct status_info *in)
{
	const struct status_snap *s = in->s, *a = in->a, *b = in->b;
	json_t *o = json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:O}",
			      "mountpoint", in->mp, "version", in->version,
			      "shard_spec", in->spec, "plan_sha256", in->plan,
			      "manifest_sha256", in->mdig, "ranks", in->ranks);
	json_t *rates = json_null(), *sec;
	char *dump;
	size_t i;

	if (o == NULL)
		return EXIT_RUNTIME;
	for (i = 0; i < sizeof(status_fields) / sizeof(status_fields[0]); i++) {
		const struct status_field *f = &status_fields[i];

		sec = f->section ? json_section(o, f->section) : o;
		if (sec != NULL)
			json_object_set_new(
				sec, f->key,
				json_integer((json_int_t)v(s, f->metric)));
	}
	sec = json_section(o, "cache");
	if (sec != NULL) {
		json_object_set_new(sec, "enabled", json_boolean(in->cache_on));
		json_object_set_new(sec, "hit_rate", json_ratio(in->cache_hr));
	}
	sec = json_section(o, "prefetch");
	if (sec != NULL)
		json_object_set_new(sec, "hit_rate", json_ratio(in->pf_hr));
	sec = json_section(o, "requests");
	for (i = 0;
	     sec != NULL && i < sizeof(status_ops) / sizeof(status_ops[0]); i++)
		json_object_set_new(
			sec, status_ops[i],
			json_integer((json_int_t)op_count(s, status_ops[i])));
	sec = json_section(o, "transforms");
	for (i = 0; sec != NULL && i < s->n; i++) {
		unsigned long long val[XF_N];
		char *name = xform_at(s, i, val);
		json_t *t = name ? json_object() : NULL;

		for (size_t k = 0; t != NULL && k < XF_N; k++)
			json_object_set_new(t, status_xform[k][0],
					    json_integer((json_int_t)val[k]));
		if (t != NULL)
			json_object_set_new(sec, name, t);
		free(name);
	}
	sec = json_section(o, "errors");
	if (sec != NULL && in->has_log) {
		json_t *arr = json_array();
		size_t i;

		for (i = 0; arr != NULL && i < in->n_recent; i++) {
			const struct status_recent *r = &in->recent[i];

			json_array_append_new(
				arr, json_pack("{s:o, s:s, s:s%}", "time",
					       r->time ? json_integer(r->time)
						       : json_null(),
					       "level", r->level, "message",
					       r->msg, r->msg_len));
		}
		json_object_set_new(sec, "recent", arr ? arr : json_null());
	}
	json_object_set_new(
		o, "log",
		in->log_target ? json_pack("{s:s, s:s?, s:s?}", "target",
					   in->log_target, "path", in->log_path,
					   "fallback", in->log_fallback)
			       : json_null());
	if (sec != NULL) {
		json_object_set_new(sec, "last_error",
				    in->last ? json_string(in->last)
					     : json_null());
		json_object_set_new(
			sec, "last_error_time",
			in->last_time ? json_integer((json_int_t)in->last_time)
				      : json_null());
	}
	if (b != NULL)
		rates = json_pack(
			"{s:f, s:f, s:f, s:f, s:f}", "interval_seconds",
			b->time - a->time, "backend_bytes_per_second",
			rate(a, b, "shardfs_backend_bytes_total"),
			"cache_bytes_per_second",
			rate(a, b, "shardfs_cache_bytes_from_cache_total"),
			"read_bytes_per_second",
			rate(a, b, "shardfs_read_bytes_total"),
			"reads_per_second", rate(a, b, "shardfs_reads_total"));
	json_object_set_new(o, "rates", rates);
	dump = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(o);
	if (dump == NULL) {
		fprintf(stderr, "shardfs: status: out of memory\n");
		return EXIT_RUNTIME;
	}
	puts(dump);
	free(dump);
	return EXIT_OK;
}

/* s made printable for a terminal (util/str.h: control bytes, C1 and
 * bytes that are not UTF-8 as %XX) into buf; "?" for NULL. The stats text
 * comes from a daemon, perhaps an older one, and what it quotes (an error
 * naming an object key) must not reach the terminal raw. */
static const char *printable(char *buf, size_t cap, const char *s)
{
	if (s == NULL)
		return "?";
	str_printable(buf, cap, s, strlen(s));
	return buf;
}

static void report_text(const struct status_info *in)
{
	const struct status_snap *s = in->s, *a = in->a, *b = in->b;
	double cache_hr = in->cache_hr, pf_hr = in->pf_hr;
	char b1[32], b2[32], p1[16], t1[4096], t2[256], t3[256];

	printf("%-10s %s (shardfs %s, %s)\n", "mount",
	       printable(t1, sizeof(t1), in->mp),
	       printable(t2, sizeof(t2), in->version),
	       printable(t3, sizeof(t3), in->spec));
	printf("%-10s %s\n", "plan", printable(t2, sizeof(t2), in->plan));
	printf("%-10s %s\n", "manifest", printable(t2, sizeof(t2), in->mdig));
	printf("%-10s %s of world_size %llu\n", "ranks",
	       in->rtext[0] ? in->rtext : "none", v(s, "shardfs_world_size"));
	cmd_human_bytes(b1, sizeof(b1), (double)v(s, "shardfs_served_bytes"));
	printf("%-10s %llu files, %s (%llu bytes)\n", "objects",
	       v(s, "shardfs_served_objects"), b1,
	       v(s, "shardfs_served_bytes"));
	cmd_human_bytes(b1, sizeof(b1),
			(double)v(s, "shardfs_read_bytes_total"));
	printf("%-10s %llu, %s, %llu errors\n", "reads",
	       v(s, "shardfs_reads_total"), b1,
	       v(s, "shardfs_read_errors_total"));
	/* What readers' files cost in round trips, and what the daemon did
	 * so they need none. */
	cmd_human_bytes(b1, sizeof(b1),
			(double)v(s, "shardfs_kernel_push_bytes_total"));
	printf("%-10s lookup %llu, getattr %llu, open %llu, read %llu, "
	       "release %llu from readers; %llu files (%s) put into the page "
	       "cache ahead, %llu looked up by the daemon\n",
	       "requests", op_count(s, "lookup"), op_count(s, "getattr"),
	       op_count(s, "open"), op_count(s, "read"), op_count(s, "release"),
	       v(s, "shardfs_kernel_pushes_total"), b1,
	       v(s, "shardfs_kernel_lookups_total"));
	if (b != NULL) {
		cmd_human_bytes(b1, sizeof(b1),
				rate(a, b, "shardfs_backend_bytes_total"));
		cmd_human_bytes(
			b2, sizeof(b2),
			rate(a, b, "shardfs_cache_bytes_from_cache_total"));
		printf("%-10s %s/s from the backend, %s/s from the "
		       "cache, %.0f reads/s (over %.1f s)\n",
		       "rates", b1, b2, rate(a, b, "shardfs_reads_total"),
		       b->time - a->time);
	}
	cmd_human_bytes(b1, sizeof(b1),
			(double)v(s, "shardfs_backend_bytes_total"));
	printf("%-10s %llu requests, %s, %llu errors\n", "backend",
	       v(s, "shardfs_backend_requests_total"), b1,
	       v(s, "shardfs_backend_errors_total"));
	if (in->cache_on) {
		human_pct(p1, sizeof(p1), cache_hr);
		cmd_human_bytes(b1, sizeof(b1),
				(double)v(s, "shardfs_cache_live_bytes"));
		cmd_human_bytes(b2, sizeof(b2),
				(double)v(s, "shardfs_cache_budget_bytes"));
		printf("%-10s hit rate %s (%llu hits, %llu misses), "
		       "%s of %s\n",
		       "cache", p1, v(s, "shardfs_cache_hits_total"),
		       v(s, "shardfs_cache_misses_total"), b1, b2);
		printf("%-10s %llu objects checked whole against the store's "
		       "checksum, %llu did not match (dropped)\n",
		       "integrity", v(s, "shardfs_cache_whole_checked_total"),
		       v(s, "shardfs_cache_whole_mismatches_total"));
	} else {
		printf("%-10s off\n", "cache");
	}
	human_pct(p1, sizeof(p1), pf_hr);
	printf("%-10s depth %llu files, hit rate %s (%llu hits, %llu "
	       "misses)\n",
	       "prefetch", v(s, "shardfs_prefetch_depth_files"), p1,
	       v(s, "shardfs_prefetch_hits_total"),
	       v(s, "shardfs_prefetch_misses_total"));
	cmd_human_bytes(b1, sizeof(b1),
			(double)v(s, "shardfs_memory_in_use_bytes"));
	cmd_human_bytes(b2, sizeof(b2),
			(double)v(s, "shardfs_memory_budget_bytes"));
	printf("%-10s %s in use of %s\n", "memory", b1, b2);
	for (size_t i = 0; i < s->n; i++) {
		unsigned long long val[XF_N];
		char *name = xform_at(s, i, val);
		char tn[64];

		if (name == NULL)
			continue;
		cmd_human_bytes(b1, sizeof(b1), (double)val[5]);
		cmd_human_bytes(b2, sizeof(b2), (double)val[6]);
		printf("%-10s %s: %llu runs, %llu failed (%llu timeouts), "
		       "%llu refused, %.1f s CPU, %s in, %s out, %llu queued, "
		       "%llu run ahead; verify %llu runs, %llu mismatches\n",
		       "transform", printable(tn, sizeof(tn), name), val[0],
		       val[1], val[2], val[3], (double)val[4] / 1e6, b1, b2,
		       val[9], val[10], val[7], val[8]);
		free(name);
	}
	printf("%-10s %llu errors, %llu warnings logged\n", "errors",
	       v(s, "shardfs_log_errors_total"),
	       v(s, "shardfs_log_warnings_total"));
	if (in->last != NULL) {
		time_t t = (time_t)in->last_time;
		struct tm tm;
		char when[32] = "?";

		if (gmtime_r(&t, &tm) != NULL)
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC",
				 &tm);
		/* One line: a newline (%0A here) would look like another
		 * field, an ESC would reach the terminal. */
		printf("%-10s %s: %s\n", "last error", when,
		       printable(t1, sizeof(t1), in->last));
	}
	if (in->log_target != NULL) {
		printf("%-10s %s", "log",
		       printable(t2, sizeof(t2), in->log_target));
		if (in->log_path && in->log_path[0])
			printf(" %s", printable(t1, sizeof(t1), in->log_path));
		if (in->log_fallback && in->log_fallback[0])
			printf(" (the fallback: %s)",
			       printable(t1, sizeof(t1), in->log_fallback));
		putchar('\n');
	}
	for (size_t i = 0; i < in->n_recent; i++) {
		const struct status_recent *r = &in->recent[i];
		time_t t = (time_t)r->time;
		struct tm tm;
		char when[32] = "", msg[2048];

		if (r->time && gmtime_r(&t, &tm) != NULL)
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC ",
				 &tm);
		str_printable(msg, sizeof(msg), r->msg, r->msg_len);
		printf("%-10s %s%s%s%s\n", i == 0 ? "recent" : "", when,
		       printable(t2, sizeof(t2), r->level),
		       r->level[0] ? ": " : "", msg);
	}
}

int status_report(const char *mp, const struct status_snap *a,
		  const struct status_snap *b, const char *log, bool as_json)
{
	const struct status_snap *s = b ? b : a;
	struct status_info in = {
		.mp = mp,
		.s = s,
		.a = a,
		.b = b,
		.version = snap_label(s, "shardfs_build_info", "version"),
		.spec = snap_label(s, "shardfs_build_info", "shard_spec"),
		.plan = snap_label(s, "shardfs_plan_info", "plan_sha256"),
		.mdig = snap_label(s, "shardfs_plan_info", "manifest_sha256"),
		.last = snap_label(s, "shardfs_last_error_info", "message"),
		.ranks = json_array(),
		.cache_on = v(s, "shardfs_cache_enabled") != 0,
		.pf_hr = ratio(v(s, "shardfs_prefetch_hits_total"),
			       v(s, "shardfs_prefetch_misses_total")),
		.last_time = v(s, "shardfs_last_error_timestamp_seconds"),
		.log_target =
			snap_label(s, "shardfs_log_target_info", "target"),
		.log_path = snap_label(s, "shardfs_log_target_info", "path"),
		.log_fallback =
			snap_label(s, "shardfs_log_target_info", "fallback"),
		.has_log = log != NULL,
	};
	int rc = EXIT_OK;

	if (log != NULL)
		recent_parse(&in, log);
	in.cache_hr = in.cache_on ? ratio(v(s, "shardfs_cache_hits_total"),
					  v(s, "shardfs_cache_misses_total"))
				  : NAN;
	in.rtext = in.ranks ? ranks_text(s, in.ranks) : NULL;
	if (in.rtext == NULL) {
		fprintf(stderr, "shardfs: status: out of memory\n");
		rc = EXIT_RUNTIME;
	} else if (as_json) {
		rc = report_json(&in);
	} else {
		report_text(&in);
	}
	if (fflush(stdout) != 0)
		rc = EXIT_RUNTIME;
	json_decref(in.ranks);
	free(in.rtext);
	free(in.version);
	free(in.spec);
	free(in.plan);
	free(in.mdig);
	free(in.last);
	free(in.log_target);
	free(in.log_path);
	free(in.log_fallback);
	return rc;
}
