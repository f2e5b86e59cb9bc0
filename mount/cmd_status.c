/*
 * cmd_status: `shardfs status MOUNTPOINT [--json] [--interval SECONDS]`,
 * what a mount serves and how it is doing, for an admin at a glance or a
 * script (docs/OPERATIONS-status.md documents both outputs).
 *
 * Everything comes from MOUNTPOINT/.shardfs/stats, read twice --interval
 * seconds apart for the rates. The mount may be dead (its daemon gone:
 * ENOTCONN) or hung (its daemon alive but not answering), so the file is
 * read in a child process the parent waits for at most STATUS_TIMEOUT_S
 * and then kills: status always ends. Whether MOUNTPOINT is a shardfs
 * mount at all comes from /proc/self/mountinfo, which never touches it.
 *
 * Exit codes: 0 ok; 1 the mount is dead, hung or unreadable; 2 usage, or
 * MOUNTPOINT is not a shardfs mount.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <jansson.h>

#include "mount/commands.h"

#define STATUS_TIMEOUT_S 10
#define STATUS_MAX_TEXT (16u << 20) /* far above any stats file */
#define STATUS_FSTYPE "fuse.shardfs"

const char usage_status[] =
	"usage: shardfs status MOUNTPOINT [--json] [--interval SECONDS]\n"
	"\n"
	"Shows what the shardfs mount at MOUNTPOINT serves and how it is "
	"doing: plan\n"
	"digest, ranks, objects and bytes, cache and prefetch hit rates, "
	"bytes/s from\n"
	"the backend and from the cache, memory in use against the budget, "
	"errors and\n"
	"the last error. Reads MOUNTPOINT/.shardfs/stats twice, SECONDS "
	"apart, for the\n"
	"rates (default 1; 0 = no rates). Gives up on a mount that does not "
	"answer\n"
	"within 10 s.\n"
	"\n"
	"options:\n"
	"  --json              one JSON object (fields in "
	"docs/OPERATIONS-status.md)\n"
	"  --interval SECONDS  time between the two samples (default 1)\n"
	"\n"
	"exit codes: 0 ok, 1 mount dead, hung or unreadable, 2 usage or not "
	"a shardfs mount\n";

/* One sample line of the stats text. */
struct status_sample {
	char *name;
	char *labels; /* the text between the braces, escaped; "" if none */
	unsigned long long value;
};

struct status_snap {
	struct status_sample *s;
	size_t n;
	double time; /* monotonic seconds, after the read */
};

static void snap_free(struct status_snap *sn)
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
static int snap_parse(const char *text, size_t len, struct status_snap *sn)
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

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* MOUNTPOINT as an absolute path, resolved without touching the mount
 * itself (a dead one fails every access): the parent is resolved, the
 * last component kept. */
static char *status_abspath(const char *mp)
{
	char *copy1 = strdup(mp), *copy2 = strdup(mp), *dir, *base, *rp;
	char *out = NULL;

	if (copy1 == NULL || copy2 == NULL)
		goto out;
	dir = dirname(copy1);
	base = basename(copy2);
	if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
	    strcmp(base, "/") == 0) {
		out = realpath(mp, NULL);
		goto out;
	}
	rp = realpath(dir, NULL);
	if (rp == NULL)
		goto out;
	if (asprintf(&out, "%s%s%s", rp, strcmp(rp, "/") ? "/" : "", base) < 0)
		out = NULL;
	free(rp);
out:
	free(copy1);
	free(copy2);
	return out;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* The filesystem type of the topmost mount at path, into type. Returns 1
 * if path is a mount point, 0 if not, a negative errno. */
static int status_fstype(const char *path, char *type, size_t cap)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t n = 0;
	int found = 0;

	if (f == NULL)
		return -errno;
	while (getline(&line, &n, f) > 0) {
		char mnt[PATH_MAX], fstype[256];
		const char *dash;

		/* id parent maj:min root MOUNTPOINT opts [tags] - TYPE ... */
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		unescape_octal(mnt);
		dash = strstr(line, " - ");
		if (dash == NULL || sscanf(dash + 3, "%255s", fstype) != 1)
			continue;
		if (strcmp(mnt, path) == 0) {
			snprintf(type, cap, "%s", fstype);
			found = 1; /* keep going: the last one is on top */
		}
	}
	free(line);
	fclose(f);
	return found;
}

/* Reads path in a child, so a mount that never answers cannot keep this
 * process: returns 0 and the text (malloc'ed), a negative errno from the
 * child's open or read, or -ETIMEDOUT after STATUS_TIMEOUT_S. */
static int status_read_file(const char *path, char **text, size_t *len)
{
	int fds[2], st, rc = 0;
	char *buf = NULL;
	size_t used = 0, cap = 0;
	double deadline;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	if (pid == 0) {
		/* The child: the exit code carries the errno. */
		char chunk[65536];
		ssize_t r;
		int fd;

		close(fds[0]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			_exit(errno & 0xff ? errno & 0xff : EIO);
		while ((r = read(fd, chunk, sizeof(chunk))) != 0) {
			if (r < 0) {
				if (errno == EINTR)
					continue;
				_exit(errno & 0xff ? errno & 0xff : EIO);
			}
			if (write(fds[1], chunk, (size_t)r) != r)
				_exit(EPIPE);
		}
		_exit(0);
	}
	close(fds[1]);
	deadline = now_mono() + STATUS_TIMEOUT_S;
	for (;;) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		double left = deadline - now_mono();
		ssize_t r;

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		r = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (r == 0)
			continue;
		if (cap - used < 65536) {
			char *g;

			if (cap >= STATUS_MAX_TEXT) {
				rc = -EFBIG;
				break;
			}
			g = realloc(buf, cap ? 2 * cap : 65536 + 1);
			if (g == NULL) {
				rc = -ENOMEM;
				break;
			}
			buf = g;
			cap = cap ? 2 * cap : 65536 + 1;
		}
		r = read(fds[0], buf + used, cap - used - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (r == 0)
			break;
		used += (size_t)r;
	}
	close(fds[0]);
	if (rc < 0) {
		/* A FUSE request waits killably: SIGKILL ends the child. It
		 * is reaped if it went; a zombie goes with this process. */
		kill(pid, SIGKILL);
		waitpid(pid, &st, WNOHANG);
		free(buf);
		return rc;
	}
	if (waitpid(pid, &st, 0) < 0) {
		rc = -errno;
	} else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
		rc = -WEXITSTATUS(st);
	} else if (!WIFEXITED(st)) {
		rc = -EIO;
	}
	if (rc < 0 || buf == NULL) {
		free(buf);
		if (rc < 0)
			return rc;
		buf = strdup("");
		if (buf == NULL)
			return -ENOMEM;
	}
	buf[used] = '\0';
	*text = buf;
	*len = used;
	return 0;
}

/* Reads and parses one sample of the stats. Prints why it failed and
 * returns the exit code, or 0. */
static int status_sample(const char *mp, const char *stats,
			 struct status_snap *sn)
{
	char *text = NULL;
	size_t len = 0;
	int rc = status_read_file(stats, &text, &len);

	if (rc == -ENOTCONN) {
		fprintf(stderr,
			"shardfs: status: %s: mount is dead (stale: its daemon "
			"is gone); unmount it with fusermount3 -uz %s (as "
			"root: umount -l %s), then mount again\n",
			mp, mp, mp);
		return EXIT_RUNTIME;
	}
	if (rc == -ETIMEDOUT) {
		fprintf(stderr,
			"shardfs: status: %s: the mount did not answer within "
			"%d s (daemon hung or stopped?)\n",
			mp, STATUS_TIMEOUT_S);
		return EXIT_RUNTIME;
	}
	if (rc == -ENOENT) {
		fprintf(stderr,
			"shardfs: status: %s: no .shardfs/stats: not a shardfs "
			"mount\n",
			mp);
		return EXIT_USAGE;
	}
	if (rc < 0) {
		fprintf(stderr, "shardfs: status: %s: cannot read %s: %s\n", mp,
			stats, strerror(-rc));
		return EXIT_RUNTIME;
	}
	sn->time = now_mono();
	rc = snap_parse(text, len, sn);
	free(text);
	if (rc < 0) {
		fprintf(stderr, "shardfs: status: %s: %s\n", stats,
			rc == -ENOMEM ? "out of memory"
				      : "not in the Prometheus text format");
		return EXIT_RUNTIME;
	}
	return 0;
}

static void ranges_put(FILE *f, long long first, long long last,
		       const char *sep)
{
	if (last > first)
		fprintf(f, "%lld-%lld%s", first, last, sep);
	else
		fprintf(f, "%lld%s", first, sep);
}

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

static void human_bytes(char *buf, size_t cap, double b)
{
	static const char *const unit[] = { "B",   "KiB", "MiB",
					    "GiB", "TiB", "PiB" };
	int u = 0;

	while (b >= 1024 && u < 5) {
		b /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%.0f B", b);
	else
		snprintf(buf, cap, "%.1f %s", b, unit[u]);
}

static void human_pct(char *buf, size_t cap, double r)
{
	if (isnan(r))
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%.1f%%", r * 100);
}

static int status_print(const char *mp, const struct status_snap *a,
			const struct status_snap *b, double interval,
			int as_json)
{
	const struct status_snap *s = b ? b : a;
	char *version = snap_label(s, "shardfs_build_info", "version");
	char *spec = snap_label(s, "shardfs_build_info", "shard_spec");
	char *plan = snap_label(s, "shardfs_plan_info", "plan_sha256");
	char *mdig = snap_label(s, "shardfs_plan_info", "manifest_sha256");
	char *last = snap_label(s, "shardfs_last_error_info", "message");
	json_t *ranks = json_array();
	char *rtext = ranks_text(s, ranks);
	int cache_on = v(s, "shardfs_cache_enabled") != 0;
	double cache_hr = cache_on ? ratio(v(s, "shardfs_cache_hits_total"),
					   v(s, "shardfs_cache_misses_total"))
				   : NAN;
	double pf_hr = ratio(v(s, "shardfs_prefetch_hits_total"),
			     v(s, "shardfs_prefetch_misses_total"));
	unsigned long long last_time =
		v(s, "shardfs_last_error_timestamp_seconds");
	int rc = EXIT_OK;

	if (ranks == NULL || rtext == NULL) {
		fprintf(stderr, "shardfs: status: out of memory\n");
		rc = EXIT_RUNTIME;
		goto out;
	}
	if (as_json) {
		json_t *o = json_pack(
			"{s:s, s:s?, s:s?, s:s?, s:s?, s:I, s:O, s:I, s:I, "
			"s:I, s:I, s:I, s:I}",
			"mountpoint", mp, "version", version, "shard_spec",
			spec, "plan_sha256", plan, "manifest_sha256", mdig,
			"world_size", (json_int_t)v(s, "shardfs_world_size"),
			"ranks", ranks, "objects",
			(json_int_t)v(s, "shardfs_served_objects"), "bytes",
			(json_int_t)v(s, "shardfs_served_bytes"),
			"manifest_objects",
			(json_int_t)v(s, "shardfs_manifest_items"),
			"manifest_bytes",
			(json_int_t)v(s, "shardfs_manifest_bytes"),
			"uptime_seconds",
			(json_int_t)v(s, "shardfs_uptime_seconds"),
			"open_files", (json_int_t)v(s, "shardfs_open_files"));
		json_t *rates = json_null();
		char *dump;

		if (o == NULL) {
			rc = EXIT_RUNTIME;
			goto out;
		}
		json_object_set_new(
			o, "reads",
			json_pack(
				"{s:I, s:I, s:I}", "count",
				(json_int_t)v(s, "shardfs_reads_total"),
				"bytes",
				(json_int_t)v(s, "shardfs_read_bytes_total"),
				"errors",
				(json_int_t)v(s, "shardfs_read_errors_total")));
		json_object_set_new(
			o, "backend",
			json_pack(
				"{s:I, s:I, s:I, s:I}", "requests",
				(json_int_t)v(s,
					      "shardfs_backend_requests_total"),
				"bytes",
				(json_int_t)v(s, "shardfs_backend_bytes_total"),
				"errors",
				(json_int_t)v(s,
					      "shardfs_backend_errors_total"),
				"inflight",
				(json_int_t)v(s, "shardfs_backend_inflight")));
		json_object_set_new(
			o, "cache",
			json_pack(
				"{s:b, s:I, s:I, s:o, s:I, s:I, s:I}",
				"enabled", cache_on, "hits",
				(json_int_t)v(s, "shardfs_cache_hits_total"),
				"misses",
				(json_int_t)v(s, "shardfs_cache_misses_total"),
				"hit_rate", json_ratio(cache_hr),
				"bytes_from_cache",
				(json_int_t)v(s,
					      "shardfs_cache_bytes_from_cache_"
					      "total"),
				"live_bytes",
				(json_int_t)v(s, "shardfs_cache_live_bytes"),
				"budget_bytes",
				(json_int_t)v(s,
					      "shardfs_cache_budget_bytes")));
		json_object_set_new(
			o, "prefetch",
			json_pack(
				"{s:I, s:I, s:I, s:o, s:I, s:I}", "depth_files",
				(json_int_t)v(s,
					      "shardfs_prefetch_depth_files"),
				"hits",
				(json_int_t)v(s, "shardfs_prefetch_hits_total"),
				"misses",
				(json_int_t)v(s,
					      "shardfs_prefetch_misses_total"),
				"hit_rate", json_ratio(pf_hr), "issued",
				(json_int_t)v(s,
					      "shardfs_prefetch_issued_total"),
				"refused",
				(json_int_t)v(
					s, "shardfs_prefetch_refused_total")));
		json_object_set_new(
			o, "memory",
			json_pack(
				"{s:I, s:I, s:I}", "in_use_bytes",
				(json_int_t)v(s, "shardfs_memory_in_use_bytes"),
				"high_water_bytes",
				(json_int_t)v(
					s, "shardfs_memory_high_water_bytes"),
				"budget_bytes",
				(json_int_t)v(s,
					      "shardfs_memory_budget_bytes")));
		json_object_set_new(
			o, "errors",
			json_pack(
				"{s:I, s:I, s:o, s:o}", "logged",
				(json_int_t)v(s, "shardfs_log_errors_total"),
				"warnings",
				(json_int_t)v(s, "shardfs_log_warnings_total"),
				"last_error",
				last ? json_string(last) : json_null(),
				"last_error_time",
				last_time ? json_integer((json_int_t)last_time)
					  : json_null()));
		if (b != NULL)
			rates = json_pack(
				"{s:f, s:f, s:f, s:f, s:f}", "interval_seconds",
				b->time - a->time, "backend_bytes_per_second",
				rate(a, b, "shardfs_backend_bytes_total"),
				"cache_bytes_per_second",
				rate(a, b,
				     "shardfs_cache_bytes_from_cache_total"),
				"read_bytes_per_second",
				rate(a, b, "shardfs_read_bytes_total"),
				"reads_per_second",
				rate(a, b, "shardfs_reads_total"));
		json_object_set_new(o, "rates", rates);
		dump = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
		json_decref(o);
		if (dump == NULL) {
			fprintf(stderr, "shardfs: status: out of memory\n");
			rc = EXIT_RUNTIME;
			goto out;
		}
		puts(dump);
		free(dump);
	} else {
		char b1[32], b2[32], p1[16];

		printf("%-10s %s (shardfs %s, %s)\n", "mount", mp,
		       version ? version : "?", spec ? spec : "?");
		printf("%-10s %s\n", "plan", plan ? plan : "?");
		printf("%-10s %s\n", "manifest", mdig ? mdig : "?");
		printf("%-10s %s of world_size %llu\n", "ranks",
		       rtext[0] ? rtext : "none", v(s, "shardfs_world_size"));
		human_bytes(b1, sizeof(b1),
			    (double)v(s, "shardfs_served_bytes"));
		printf("%-10s %llu files, %s (%llu bytes)\n", "objects",
		       v(s, "shardfs_served_objects"), b1,
		       v(s, "shardfs_served_bytes"));
		human_bytes(b1, sizeof(b1),
			    (double)v(s, "shardfs_read_bytes_total"));
		printf("%-10s %llu, %s, %llu errors; %llu files open\n",
		       "reads", v(s, "shardfs_reads_total"), b1,
		       v(s, "shardfs_read_errors_total"),
		       v(s, "shardfs_open_files"));
		if (b != NULL) {
			human_bytes(b1, sizeof(b1),
				    rate(a, b, "shardfs_backend_bytes_total"));
			human_bytes(
				b2, sizeof(b2),
				rate(a, b,
				     "shardfs_cache_bytes_from_cache_total"));
			printf("%-10s %s/s from the backend, %s/s from the "
			       "cache, %.0f reads/s (over %.1f s)\n",
			       "rates", b1, b2,
			       rate(a, b, "shardfs_reads_total"),
			       b->time - a->time);
		}
		human_bytes(b1, sizeof(b1),
			    (double)v(s, "shardfs_backend_bytes_total"));
		printf("%-10s %llu requests, %s, %llu errors\n", "backend",
		       v(s, "shardfs_backend_requests_total"), b1,
		       v(s, "shardfs_backend_errors_total"));
		if (cache_on) {
			human_pct(p1, sizeof(p1), cache_hr);
			human_bytes(b1, sizeof(b1),
				    (double)v(s, "shardfs_cache_live_bytes"));
			human_bytes(b2, sizeof(b2),
				    (double)v(s, "shardfs_cache_budget_bytes"));
			printf("%-10s hit rate %s (%llu hits, %llu misses), "
			       "%s of %s\n",
			       "cache", p1, v(s, "shardfs_cache_hits_total"),
			       v(s, "shardfs_cache_misses_total"), b1, b2);
		} else {
			printf("%-10s off\n", "cache");
		}
		human_pct(p1, sizeof(p1), pf_hr);
		printf("%-10s depth %llu files, hit rate %s (%llu hits, %llu "
		       "misses)\n",
		       "prefetch", v(s, "shardfs_prefetch_depth_files"), p1,
		       v(s, "shardfs_prefetch_hits_total"),
		       v(s, "shardfs_prefetch_misses_total"));
		human_bytes(b1, sizeof(b1),
			    (double)v(s, "shardfs_memory_in_use_bytes"));
		human_bytes(b2, sizeof(b2),
			    (double)v(s, "shardfs_memory_budget_bytes"));
		printf("%-10s %s in use of %s\n", "memory", b1, b2);
		printf("%-10s %llu errors, %llu warnings logged\n", "errors",
		       v(s, "shardfs_log_errors_total"),
		       v(s, "shardfs_log_warnings_total"));
		if (last != NULL) {
			time_t t = (time_t)last_time;
			struct tm tm;
			char when[32] = "?";

			if (gmtime_r(&t, &tm) != NULL)
				strftime(when, sizeof(when),
					 "%Y-%m-%d %H:%M:%S UTC", &tm);
			/* One line: a newline in the message would look like
			 * another field. */
			for (char *c = last; *c; c++)
				if (*c == '\n')
					*c = ' ';
			printf("%-10s %s: %s\n", "last error", when, last);
		}
		(void)interval;
	}
	if (fflush(stdout) != 0)
		rc = EXIT_RUNTIME;
out:
	json_decref(ranks);
	free(rtext);
	free(version);
	free(spec);
	free(plan);
	free(mdig);
	free(last);
	return rc;
}

int cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "interval", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct status_snap a = { 0 }, b = { 0 };
	char *abs = NULL, *stats = NULL, fstype[256] = "";
	double interval = 1.0;
	int c, as_json = 0, rc = EXIT_USAGE;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			as_json = 1;
			break;
		case 'i':
			errno = 0;
			interval = strtod(optarg, &end);
			if (errno != 0 || *end != '\0' || optarg[0] == '\0' ||
			    !(interval >= 0 && interval <= 3600))
				return cmd_usage_error(
					usage_status,
					"status: --interval %s: expected "
					"seconds from 0 to 3600",
					optarg);
			break;
		case 'h':
			fputs(usage_status, stdout);
			return EXIT_OK;
		default:
			fputs(usage_status, stderr);
			return EXIT_USAGE;
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(usage_status, "%s",
				       argc - optind < 1
					       ? "status: MOUNTPOINT missing"
					       : "status: too many arguments");
	abs = status_abspath(argv[optind]);
	if (abs == NULL) {
		fprintf(stderr, "shardfs: status: %s: %s\n", argv[optind],
			strerror(errno ? errno : ENOMEM));
		goto out;
	}
	c = status_fstype(abs, fstype, sizeof(fstype));
	if (c < 0) {
		fprintf(stderr,
			"shardfs: status: cannot read /proc/self/mountinfo: "
			"%s\n",
			strerror(-c));
		rc = EXIT_RUNTIME;
		goto out;
	}
	if (c == 0) {
		fprintf(stderr,
			"shardfs: status: %s is not a mount point (not a "
			"shardfs mount)\n",
			abs);
		goto out;
	}
	if (strcmp(fstype, STATUS_FSTYPE) != 0) {
		fprintf(stderr,
			"shardfs: status: %s is a %s mount, not a shardfs "
			"mount\n",
			abs, fstype);
		goto out;
	}
	if (asprintf(&stats, "%s/.shardfs/stats", abs) < 0) {
		stats = NULL;
		rc = EXIT_RUNTIME;
		goto out;
	}
	rc = status_sample(abs, stats, &a);
	if (rc != 0)
		goto out;
	if (interval > 0) {
		struct timespec ts = {
			.tv_sec = (time_t)interval,
			.tv_nsec = (long)((interval - floor(interval)) * 1e9),
		};

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		rc = status_sample(abs, stats, &b);
		if (rc != 0)
			goto out;
	}
	rc = status_print(abs, &a, interval > 0 ? &b : NULL, interval, as_json);
out:
	snap_free(&a);
	snap_free(&b);
	free(stats);
	free(abs);
	return rc;
}
