/*
 * cmd_status: `shardfs status MOUNTPOINT [--json] [--interval SECONDS]`,
 * what a mount serves and how it is doing, for an admin at a glance or a
 * script (docs/OPERATIONS.md documents both outputs).
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
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>

#include "mount/commands.h"
#include "mount/mountpoint.h"
#include "mount/status_report.h"

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
	"rates (default 1; 0 = no rates), and the last warnings and errors "
	"from\n"
	"MOUNTPOINT/.shardfs/log, with where the log goes. Gives up on a mount "
	"that\n"
	"does not answer within 10 s.\n"
	"\n"
	"options:\n"
	"  --json              one JSON object (fields in "
	"docs/OPERATIONS.md)\n"
	"  --interval SECONDS  time between the two samples (default 1)\n"
	"\n"
	"exit codes: 0 ok, 1 mount dead, hung or unreadable, 2 usage or not "
	"a shardfs mount\n";

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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

/* In status_read_file()'s child: path's bytes to fd. */
static int status_read_child(int fd, const void *arg)
{
	char chunk[65536];
	ssize_t r;
	int in = open(arg, O_RDONLY | O_CLOEXEC);

	if (in < 0)
		return -errno;
	while ((r = read(in, chunk, sizeof(chunk))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (write(fd, chunk, (size_t)r) != r)
			return -EPIPE;
	}
	return 0;
}

/* Reads path in a child, so a mount that never answers cannot keep this
 * process: returns 0 and the text (malloc'ed), a negative errno from the
 * child's open or read, or -ETIMEDOUT after STATUS_TIMEOUT_S. */
static int status_read_file(const char *path, char **text, size_t *len)
{
	return mountpoint_child_run(status_read_child, path, STATUS_TIMEOUT_S,
				    STATUS_MAX_TEXT, text, len);
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
			"is gone); unmount it with shardfs unmount %s (or "
			"fusermount3 -uz %s), then mount again\n",
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
	rc = status_snap_parse(text, len, sn);
	free(text);
	if (rc < 0) {
		fprintf(stderr, "shardfs: status: %s: %s\n", stats,
			rc == -ENOMEM ? "out of memory"
				      : "not in the Prometheus text format");
		return EXIT_RUNTIME;
	}
	return 0;
}

int cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "interval", required_argument, NULL, 'i' },
		CMD_LONGOPTS_END,
	};
	struct status_snap a = { 0 }, b = { 0 };
	char *abs = NULL, *stats = NULL, *logf = NULL, *log = NULL;
	char fstype[256] = "";
	size_t log_len = 0;
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
		default:
			return cmd_option_other(c, usage_status);
		}
	}
	if (cmd_operands(argc, 1, usage_status, "status", "MOUNTPOINT"))
		return EXIT_USAGE;
	abs = mountpoint_abspath(argv[optind]);
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
			.tv_nsec =
				(long)((interval - (double)(time_t)interval) *
				       1e9),
		};

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		rc = status_sample(abs, stats, &b);
		if (rc != 0)
			goto out;
	}
	/* The recent warnings and errors; a daemon older than the file has
	 * none to give (ENOENT), which is no failure. */
	if (asprintf(&logf, "%s/.shardfs/log", abs) < 0) {
		logf = NULL;
		rc = EXIT_RUNTIME;
		goto out;
	}
	c = status_read_file(logf, &log, &log_len);
	if (c < 0 && c != -ENOENT) {
		fprintf(stderr, "shardfs: status: %s: cannot read %s: %s\n",
			abs, logf,
			c == -ETIMEDOUT ? "no answer in time" : strerror(-c));
		rc = EXIT_RUNTIME;
		goto out;
	}
	rc = status_report(abs, &a, interval > 0 ? &b : NULL, log, as_json);
out:
	free(log);
	free(logf);
	status_snap_free(&a);
	status_snap_free(&b);
	free(stats);
	free(abs);
	return rc;
}
