/*
 * logtarget: where a mount's lines go once it serves ([log] target, file,
 * dir, max_size, rotate: shardfs.conf(5), docs/OPERATIONS.md "Logging").
 *
 * Until a mount serves it logs to stderr, so a failing mount says why
 * where it was started. The target is decided before the daemon forks,
 * so which one it is, and why a fallback was taken, reach the caller's
 * stderr too; logtarget_switch() moves the log there once serving.
 *
 * The default never loses a line to a missing log daemon: a background
 * mount with [log] target = auto writes [log] file if set, else the
 * journal if its socket accepts a connection, else syslog if /dev/log
 * does, else the fallback file [log] dir/MOUNTNAME.log (MOUNTNAME: the
 * mount point's path, '/' as '-'), or [cache] dir/log/MOUNTNAME.log when
 * [log] dir cannot be written. Files rotate at [log] max_size keeping
 * [log] rotate older ones (util/log.h). journal and syslog chosen
 * explicitly fall back to that file, with a warning, when they are not
 * there. A foreground mount (-f) keeps stderr unless a target or a file
 * is named. Whatever the target, util/log keeps the last warnings and
 * errors for `shardfs status`.
 */
#ifndef SHARDFS_LOGTARGET_H
#define SHARDFS_LOGTARGET_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "mount/config.h"

enum logtarget_kind {
	LOGTARGET_STDERR = 0, /* as it is: a terminal, a pipe, the journal */
	LOGTARGET_JOURNAL,    /* sd_journal_send(), fields below */
	LOGTARGET_SYSLOG,     /* syslog(3) through /dev/log */
	LOGTARGET_FILE,	      /* util/log's file sink, rotated */
	LOGTARGET_NONE,	      /* nothing could be opened: memory only */
};

/* Where the journal and syslog listen. */
#define LOGTARGET_JOURNAL_SOCKET "/run/systemd/journal/socket"
#define LOGTARGET_SYSLOG_SOCKET "/dev/log"

struct logtarget {
	enum logtarget_kind kind;
	/* A background daemon keeps the caller's stderr ([log] target =
	 * stderr) instead of pointing it at /dev/null. */
	bool keep_stderr;
	char path[PATH_MAX]; /* LOGTARGET_FILE: the file, open as the sink */
	char note[768];	     /* why a fallback was taken, "" if none */
	char mountpoint[PATH_MAX]; /* SHARDFS_MOUNT= of journal entries */
};

/* Decides where cfg's mount at mountpoint (absolute) logs once it serves,
 * foreground or not, opens the file if it is one (util/log.h
 * log_file_open(), with [log] max_size and rotate), and logs the choice
 * and any fallback (a warning when an explicitly chosen journal or syslog
 * is not there). Call before forking and before threads. Returns 0, or a
 * negative errno when [log] file cannot be opened (logged naming the
 * config, the key and the file: the mount must fail). */
int logtarget_prepare(const struct config *cfg, const char *mountpoint,
		      bool foreground, struct logtarget *out);

/* Once the mount serves: sends the log to t (borrowed; it must outlive the
 * mount) and names it for `shardfs status` (log_set_target()); the first
 * line in the target says where it came from. From any one thread. */
void logtarget_switch(const struct logtarget *t);

/* Whether something listens on the Unix socket at path: a datagram (or,
 * for a stream-only /dev/log, a stream) connection succeeds. Returns 0,
 * or the negative errno of the connect (-ENOENT: no such socket,
 * -ECONNREFUSED: nobody bound to it). Nothing is sent. */
int logtarget_socket_accepts(const char *path);

/* The fallback file's name for a mount point: its path without the
 * leading '/', '/' as '-', bytes other than [A-Za-z0-9._-] as '_', then
 * ".log" ("/mnt/imagenet" gives "mnt-imagenet.log"; "/" gives
 * "root.log"); cut to fit cap (at least 16). */
void logtarget_file_name(const char *mountpoint, char *buf, size_t cap);

#endif
