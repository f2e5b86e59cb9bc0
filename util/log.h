/*
 * log: one line per event on stderr.
 *
 * Every layer logs through here (backends, cache, fs, mount), which is why
 * this lives in util/ rather than mount/. Under systemd (JOURNAL_STREAM set)
 * each line starts with a "<N>" syslog priority prefix so journald keeps the
 * level; otherwise lines read "shardfs: LEVEL: message". The level is checked
 * before the message is formatted, so a disabled debug line costs a compare.
 * Never pass a secret or a signed URL.
 */
#ifndef SHARDFS_LOG_H
#define SHARDFS_LOG_H

#include <stdbool.h>
#include <syslog.h> /* LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG */

/* Current threshold; messages with a numerically higher level are dropped.
 * Written only by log_init()/log_set_level() before threads start. */
extern int log_threshold;

/* Sets the program name and detects systemd's journal. Call once, early. */
void log_init(const char *prog);

/* Sets the threshold (LOG_ERR .. LOG_DEBUG). Default LOG_INFO. */
void log_set_level(int level);

/* Formats and writes one line; use log_msg(), which checks the level. */
void log_write(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* What `shardfs status` and the stats file show of the log. */
struct log_errors {
	unsigned long long errors;   /* lines logged at LOG_ERR or worse */
	unsigned long long warnings; /* lines logged at LOG_WARNING */
	long long last_time;	     /* realtime seconds of the last error, 0 */
	char last[512];		     /* its message (truncated), "" if none */
};

/* Copies the counters and the last error line. Thread-safe. */
void log_errors_get(struct log_errors *out);

/* Seconds during which log_limit() keeps repeats of one failure quiet. */
#define LOG_REPEAT_S 10

/* For a failure that callers may hit again and again (every read of an
 * object that changed, every read while a server is down), so the log
 * says it once, not once per FUSE request. key names the failure (e.g.
 * "s3://b/k"). Returns false when the caller should log it now: the first
 * time, or LOG_REPEAT_S seconds after it was last logged; *suppressed
 * (may be NULL) then gets how many repeats were kept quiet meanwhile.
 * Returns true, and counts the repeat, when the caller should stay quiet.
 * Thread-safe; remembers the last 256 keys by hash (a clash only logs a
 * repeat early). */
bool log_limit(const char *key, unsigned long *suppressed);

#define log_msg(level, ...)                                                    \
	do {                                                                   \
		if ((level) <= log_threshold)                                  \
			log_write((level), __VA_ARGS__);                       \
	} while (0)

#endif
