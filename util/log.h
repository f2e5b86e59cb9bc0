/*
 * log: one line per event, to one sink.
 *
 * Every layer logs through here (backends, cache, fs, mount), which is why
 * this lives in util/ rather than mount/. The sinks:
 *  - stderr (the default). When stderr is systemd's journal stream (the
 *    "DEV:INODE" in JOURNAL_STREAM names the file stderr is, systemd.exec(5))
 *    each line starts with a "<N>" syslog priority prefix, which journald
 *    turns into the entry's PRIORITY; otherwise lines read
 *    "shardfs: LEVEL: message". A JOURNAL_STREAM inherited by a process
 *    whose stderr went elsewhere (a file, a pipe) is ignored.
 *  - a file: "2026-01-02T03:04:05Z shardfs[PID]: LEVEL: msg", opened
 *    O_APPEND so several daemons may share it, and rotated by size
 *    (log_file_limits()): PATH becomes PATH.1, PATH.1 PATH.2 and so on.
 *  - syslog(3) with the level as priority (LOG_DAEMON).
 *  - a function (log_set_func()): mount/ sends lines to the journal so.
 * Which sink a mount uses, and why, is mount/logtarget.h's business.
 *
 * The level is checked before the message is formatted, so a disabled debug
 * line costs a compare. A line is written with one write(2) (or syslog()
 * call), so lines from threads never interleave. Never pass a secret or a
 * signed URL.
 *
 * A message is one line of printable text whatever it is given: control
 * bytes (newlines, ESC), C1 controls and bytes that are not UTF-8 are
 * written %XX (util/str.h, str_printable()) before the line is written,
 * counted or kept for `shardfs status`, so no caller can forge a line or
 * send a terminal escape. Object keys go in escaped with log_key(), as the
 * manifest writes them, so a key reads the same in both.
 *
 * Whatever the sink, warnings and errors are counted and the last
 * LOG_RECENT_MAX of them kept in memory (log_recent_get()), so a mount
 * whose sink is gone or unread still shows them (.shardfs/log, `shardfs
 * status`).
 */
#ifndef SHARDFS_LOG_H
#define SHARDFS_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <syslog.h> /* LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG */

/* Current threshold; messages with a numerically higher level are dropped.
 * Written only by log_init()/log_set_level() before threads start. */
extern int log_threshold;

/* Sets the program name and detects systemd's journal stream on stderr.
 * Call once, early (before threads). */
void log_init(const char *prog);

/* True when stderr is the journal stream (lines get "<N>" prefixes). */
bool log_stderr_is_journal(void);

enum log_sink {
	LOG_SINK_STDERR = 0,
	LOG_SINK_FILE,	 /* the file opened by log_file_open() */
	LOG_SINK_SYSLOG, /* openlog(prog, LOG_PID, LOG_DAEMON) */
	LOG_SINK_FUNC,	 /* the function given to log_set_func() */
};

/* Opens path for appending (created 0640, O_CLOEXEC; a symlink is refused:
 * ELOOP, since the daemon often runs as root) as the file sink,
 * without switching to it, so that a bad [log] file fails before a mount
 * starts. Returns 0 or a negative errno (not logged). Call before
 * threads; a second call replaces the file. */
int log_file_open(const char *path);

/* Rotation of the file sink: once a line leaves the file at max_size
 * bytes or more, PATH.N-1 becomes PATH.N ... PATH becomes PATH.1 (keep
 * files kept besides PATH; with keep 0, PATH is emptied instead) and a
 * new PATH is opened. Processes sharing the file take turns (an flock);
 * one that finds PATH already rotated by another just reopens it. max_size
 * 0 (the default) never rotates. Call before threads. */
void log_file_limits(uint64_t max_size, unsigned keep);

/* The file sink's descriptor, or -1 (a daemon keeps it when it closes
 * what it inherited). */
int log_file_fileno(void);

/* What LOG_SINK_FUNC calls for each line: the level and the message
 * (printable, without the level or a newline), from any thread. */
typedef void (*log_sink_fn)(int level, const char *msg, size_t len);

/* Sets the function LOG_SINK_FUNC calls. Call before switching to it. */
void log_set_func(log_sink_fn fn);

/* Switches the sink; LOG_SINK_FILE needs a successful log_file_open(),
 * LOG_SINK_FUNC a log_set_func(). Safe while other threads log: each
 * line goes wholly to one sink. */
void log_set_sink(enum log_sink sink);

/* Names where lines go, for `shardfs status`: target ("stderr",
 * "journal", "syslog", "file", "none") and, for a file, its path; note
 * says why a fallback was taken ("" if none). Copied. Thread-safe. */
void log_set_target(const char *target, const char *path, const char *note);

/* Sets the threshold (LOG_ERR .. LOG_DEBUG). Default LOG_INFO. */
void log_set_level(int level);

/* Room log_key() needs; longer keys are cut, ending in "...". */
#define LOG_KEY_MAX 1024

/* key[0..len) escaped for a log line as the manifest escapes keys ('%' and
 * bytes below 0x20 as %XX: util/str.h, str_escape_key()) into buf, which
 * holds LOG_KEY_MAX bytes. Returns buf. Every log line that names an
 * object key passes it through this. */
const char *log_key(char *buf, const char *key, size_t len);

/* Formats and writes one line; use log_msg(), which checks the level. */
void log_write(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* What `shardfs status` and the stats file show of the log. */
struct log_errors {
	unsigned long long errors;   /* lines logged at LOG_ERR or worse */
	unsigned long long warnings; /* lines logged at LOG_WARNING */
	long long last_time;	     /* realtime seconds of the last error, 0 */
	char last[512];		     /* its message (truncated), "" if none */
	char target[16];	     /* log_set_target()'s, "" if never set */
	char path[512];
	char note[512];
};

/* Copies the counters, the last error line and the target. Thread-safe. */
void log_errors_get(struct log_errors *out);

/* The warnings and errors kept for `shardfs status`. */
#define LOG_RECENT_MAX 16
struct log_entry {
	long long time; /* realtime seconds */
	int level;	/* LOG_ERR (or worse) or LOG_WARNING */
	char msg[480];	/* printable, cut at a character */
};

/* Copies up to max of the last LOG_RECENT_MAX warnings and errors, oldest
 * first; returns how many. Thread-safe. */
size_t log_recent_get(struct log_entry *out, size_t max);

/* "error", "warning", "notice", "info" or "debug". */
const char *log_level_name(int level);

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
