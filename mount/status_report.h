/*
 * status_report: the parsed text of a mount's .shardfs/stats and the
 * report `shardfs status` prints from one or two samples of it (cmd_status
 * reads them; docs/OPERATIONS-status.md documents both outputs).
 */
#ifndef SHARDFS_STATUS_REPORT_H
#define SHARDFS_STATUS_REPORT_H

#include <stdbool.h>
#include <stddef.h>

/* One sample line of the stats text. */
struct status_sample {
	char *name;
	char *labels; /* the text between the braces, escaped; "" if none */
	unsigned long long value;
};

/* One read of the stats file. */
struct status_snap {
	struct status_sample *s;
	size_t n;
	double time; /* monotonic seconds, after the read */
};

/* Parses the text format's sample lines into sn (comments skipped).
 * Returns 0, -EINVAL for a line that is not a sample, or -ENOMEM; either
 * way status_snap_free() frees what was parsed. */
int status_snap_parse(const char *text, size_t len, struct status_snap *sn);
void status_snap_free(struct status_snap *sn);

/* Prints the report for the mount at mp to stdout: from a, with rates
 * over a..b when b is not NULL, and the recent warnings and errors from
 * log (the text of .shardfs/log, NULL when the mount has none: an older
 * daemon); JSON (one object, one line) or text. Returns the exit code:
 * 0, or 1 if out of memory or stdout failed. */
int status_report(const char *mp, const struct status_snap *a,
		  const struct status_snap *b, const char *log, bool as_json);

#endif
