/*
 * logtarget: see logtarget.h. The journal gets each line through
 * sd_journal_sendv() with MESSAGE, PRIORITY, SYSLOG_IDENTIFIER=shardfs and
 * SHARDFS_MOUNT (journalctl -t shardfs, or SHARDFS_MOUNT=/mnt/x).
 */
#include "mount/logtarget.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#include "mount/commands.h"
#include "util/log.h"

/* Appends to a message buffer; a message cut short is still a message. */
static void note_add(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void note_add(char *buf, size_t cap, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= cap)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, cap - used, fmt, ap);
	va_end(ap);
}

int logtarget_socket_accepts(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int types[] = { SOCK_DGRAM, SOCK_STREAM }, fd, rc = -ENOENT;
	size_t i;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	/* syslog daemons listen on datagrams; glibc tries a stream when
	 * the socket is of that type (EPROTOTYPE), and so do we. */
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0
			     ? 0
			     : -errno;
		close(fd);
		if (rc != -EPROTOTYPE)
			break;
	}
	return rc;
}

void logtarget_file_name(const char *mountpoint, char *buf, size_t cap)
{
	const char *p = mountpoint;
	size_t o = 0;

	while (*p == '/')
		p++;
	if (*p == '\0')
		p = "root";
	for (; *p && o + 5 < cap; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '/')
			buf[o++] = '-';
		else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			 c == '-')
			buf[o++] = (char)c;
		else
			buf[o++] = '_';
	}
	/* A trailing '/' would leave a trailing '-'. */
	while (o > 0 && buf[o - 1] == '-')
		o--;
	memcpy(buf + o, ".log", 5);
}

/* Opens dir/name as the file sink, creating dir (one level, mode) if it
 * is missing. Returns 0 with path filled, or a negative errno. */
static int open_in(const char *dir, const char *name, mode_t mode, char *path,
		   size_t cap)
{
	int n;

	if (mkdir(dir, mode) != 0 && errno != EEXIST)
		return -errno;
	n = snprintf(path, cap, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	return log_file_open(path);
}

/* The fallback file: [log] dir/NAME, else [cache] dir/log/NAME. Returns
 * 0 with t->path set, or a negative errno with why (both tries) filled. */
static int open_fallback(const struct config *cfg, struct logtarget *t,
			 char *why, size_t whylen)
{
	char name[256], cache_log[PATH_MAX];
	int rc, rc2;

	logtarget_file_name(t->mountpoint, name, sizeof(name));
	rc = open_in(cfg->log.dir, name, 0750, t->path, sizeof(t->path));
	if (rc == 0)
		return 0;
	/* The cache directory belongs to the daemon's user, who may not
	 * write /var/log: a file there is still a file an admin finds. */
	if (snprintf(cache_log, sizeof(cache_log), "%s/log", cfg->cache.dir) >=
	    (int)sizeof(cache_log))
		rc2 = -ENAMETOOLONG;
	else if (mkdir(cfg->cache.dir, 0700) != 0 && errno != EEXIST)
		rc2 = -errno;
	else
		rc2 = open_in(cache_log, name, 0700, t->path, sizeof(t->path));
	why[0] = '\0';
	note_add(why, whylen, "%s/%s: %s", cfg->log.dir, name, strerror(-rc));
	if (rc2 == 0)
		return 0;
	note_add(why, whylen, "; %s/%s: %s", cache_log, name, strerror(-rc2));
	t->path[0] = '\0';
	return rc2;
}

/* "no journal (SOCKET: reason)" for a socket that does not accept. */
static void missing(char *buf, size_t cap, const char *what, const char *sock,
		    int rc)
{
	buf[0] = '\0';
	note_add(buf, cap, "no %s (%s: %s)", what, sock, strerror(-rc));
}

static void limits_text(const struct config *cfg, char *buf, size_t cap)
{
	char size[32];

	if (cfg->log.max_size == 0) {
		snprintf(buf, cap, "never rotated");
		return;
	}
	cmd_human_bytes(size, sizeof(size), (double)cfg->log.max_size);
	snprintf(buf, cap, "rotated at %s, %u older file%s kept", size,
		 cfg->log.rotate, cfg->log.rotate == 1 ? "" : "s");
}

int logtarget_prepare(const struct config *cfg, const char *mountpoint,
		      bool foreground, struct logtarget *out)
{
	enum config_log_target want = cfg->log.target;
	struct logtarget t = { .kind = LOGTARGET_STDERR };
	char journal[320] = "", syslog_why[320] = "", file_why[1200] = "";
	char limits[96];
	int rc, level = LOG_INFO;

	snprintf(t.mountpoint, sizeof(t.mountpoint), "%s", mountpoint);
	log_file_limits(cfg->log.max_size, cfg->log.rotate);
	limits_text(cfg, limits, sizeof(limits));
	if (want == CONFIG_LOG_STDERR ||
	    (want == CONFIG_LOG_AUTO && foreground && cfg->log.file == NULL)) {
		t.keep_stderr = want == CONFIG_LOG_STDERR;
		if (t.keep_stderr && !foreground)
			log_msg(LOG_INFO,
				"log: once serving, lines go on to this "
				"standard error ([log] target = stderr)");
		*out = t;
		return 0;
	}
	if ((want == CONFIG_LOG_AUTO || want == CONFIG_LOG_FILE) &&
	    cfg->log.file != NULL) {
		rc = log_file_open(cfg->log.file);
		if (rc < 0) {
			log_msg(LOG_ERR, "%s: [log] file = %s: %s", cfg->file,
				cfg->log.file, strerror(-rc));
			return rc;
		}
		t.kind = LOGTARGET_FILE;
		snprintf(t.path, sizeof(t.path), "%s", cfg->log.file);
		log_msg(LOG_INFO, "log: once serving, lines go to %s (%s)",
			t.path, limits);
		*out = t;
		return 0;
	}
	if (want == CONFIG_LOG_AUTO || want == CONFIG_LOG_JOURNAL) {
		rc = logtarget_socket_accepts(LOGTARGET_JOURNAL_SOCKET);
		if (rc == 0) {
			t.kind = LOGTARGET_JOURNAL;
			log_msg(LOG_INFO,
				"log: once serving, lines go to the journal "
				"(journalctl -t shardfs)");
			*out = t;
			return 0;
		}
		missing(journal, sizeof(journal), "journal",
			LOGTARGET_JOURNAL_SOCKET, rc);
	}
	if (want == CONFIG_LOG_AUTO || want == CONFIG_LOG_SYSLOG) {
		rc = logtarget_socket_accepts(LOGTARGET_SYSLOG_SOCKET);
		if (rc == 0) {
			t.kind = LOGTARGET_SYSLOG;
			log_msg(LOG_INFO,
				"log: once serving, lines go to syslog (%s)",
				LOGTARGET_SYSLOG_SOCKET);
			*out = t;
			return 0;
		}
		missing(syslog_why, sizeof(syslog_why), "syslog",
			LOGTARGET_SYSLOG_SOCKET, rc);
	}
	/* The fallback file: explicit journal or syslog missing is worth a
	 * warning; auto finding neither is what containers look like. */
	if (want == CONFIG_LOG_JOURNAL || want == CONFIG_LOG_SYSLOG)
		level = LOG_WARNING;
	else if (want == CONFIG_LOG_AUTO)
		level = LOG_NOTICE;
	note_add(t.note, sizeof(t.note), "%s%s%s", journal,
		 journal[0] && syslog_why[0] ? ", " : "", syslog_why);
	rc = open_fallback(cfg, &t, file_why, sizeof(file_why));
	if (rc == 0) {
		if (file_why[0])
			note_add(t.note, sizeof(t.note), "%scannot write %s",
				 t.note[0] ? ", " : "", file_why);
		t.kind = LOGTARGET_FILE;
		log_msg(level, "log: once serving, lines go to %s (%s)%s%s",
			t.path, limits, t.note[0] ? ", the fallback: " : "",
			t.note);
		*out = t;
		return 0;
	}
	t.kind = LOGTARGET_NONE;
	note_add(t.note, sizeof(t.note), "%scannot write %s",
		 t.note[0] ? ", " : "", file_why);
	log_msg(LOG_WARNING,
		"log: no log target: %s; once %s, lines are kept only in "
		"memory (the last %d warnings and errors: shardfs status, "
		".shardfs/log)",
		t.note, foreground ? "serving" : "detached", LOG_RECENT_MAX);
	*out = t;
	return 0;
}

static const struct logtarget *lt_journal; /* set before the switch */

static void journal_line(int level, const char *msg, size_t len)
{
	char message[2100], priority[32], mount[PATH_MAX + 16];
	struct iovec iov[4];
	int n;

	n = snprintf(message, sizeof(message), "MESSAGE=%.*s", (int)len, msg);
	iov[0].iov_base = message;
	iov[0].iov_len = n < 0			       ? 0
			 : (size_t)n < sizeof(message) ? (size_t)n
						       : sizeof(message) - 1;
	n = snprintf(priority, sizeof(priority), "PRIORITY=%d", level);
	iov[1].iov_base = priority;
	iov[1].iov_len = (size_t)n;
	iov[2].iov_base = (char *)"SYSLOG_IDENTIFIER=shardfs";
	iov[2].iov_len = strlen("SYSLOG_IDENTIFIER=shardfs");
	n = snprintf(mount, sizeof(mount), "SHARDFS_MOUNT=%s",
		     lt_journal->mountpoint);
	iov[3].iov_base = mount;
	iov[3].iov_len = n < 0			     ? 0
			 : (size_t)n < sizeof(mount) ? (size_t)n
						     : sizeof(mount) - 1;
	/* A journal that went away loses the line; warnings and errors are
	 * still kept in memory (util/log.h). */
	if (sd_journal_sendv(iov, 4) < 0)
		(void)0;
}

void logtarget_switch(const struct logtarget *t)
{
	switch (t->kind) {
	case LOGTARGET_JOURNAL:
		lt_journal = t;
		log_set_func(journal_line);
		log_set_sink(LOG_SINK_FUNC);
		log_set_target("journal", "", t->note);
		break;
	case LOGTARGET_SYSLOG:
		log_set_sink(LOG_SINK_SYSLOG);
		log_set_target("syslog", LOGTARGET_SYSLOG_SOCKET, t->note);
		break;
	case LOGTARGET_FILE:
		log_set_sink(LOG_SINK_FILE);
		log_set_target("file", t->path, t->note);
		break;
	case LOGTARGET_NONE:
		log_set_target("none", "", t->note);
		return; /* stderr, /dev/null once detached: no line to say */
	default:
		log_set_target("stderr", "", t->note);
		return;
	}
	log_msg(LOG_NOTICE, "log: %s logs here%s%s%s", t->mountpoint,
		t->note[0] ? " (the fallback: " : "", t->note,
		t->note[0] ? ")" : "");
}
