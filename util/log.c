/*
 * log: see log.h. A line is assembled in a stack buffer and written with one
 * write(2) (or one syslog() call), so lines from different threads never
 * interleave. The message is made printable (str_printable()) before it is
 * written, counted or kept: whatever a caller passes, no line holds a
 * control byte, so none can forge another line or reach a terminal.
 */
#include "util/log.h"

#include "util/fnv.h"
#include "util/str.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int log_threshold = LOG_INFO;
static const char *log_prog = "shardfs";
static bool log_journal;       /* stderr is the journal stream */
static int log_sink_now;       /* enum log_sink; atomic */
static int log_file_fd = -1;   /* the file sink; set before threads */
static bool log_syslog_opened; /* set before the switch to syslog */

/*
 * systemd.exec(5): JOURNAL_STREAM holds "DEV:INODE" of the stream systemd
 * connected stdout/stderr to. The variable is inherited by children whose
 * stderr may be a file or a pipe, so only a match with what stderr is now
 * means the journal reads it (sd-daemon has no call for this; this is the
 * check the man page prescribes).
 */
static bool log_detect_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int n = 0;

	if (v == NULL || sscanf(v, "%llu:%llu%n", &dev, &ino, &n) != 2 ||
	    v[n] != '\0')
		return false;
	if (fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void log_init(const char *prog)
{
	const char *slash;

	if (prog != NULL) {
		slash = strrchr(prog, '/');
		log_prog = slash != NULL ? slash + 1 : prog;
	}
	log_journal = log_detect_journal();
}

bool log_stderr_is_journal(void)
{
	return log_journal;
}

int log_file_open(const char *path)
{
	int fd = open(path,
		      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		      0640);

	if (fd < 0)
		return -errno;
	if (log_file_fd >= 0)
		close(log_file_fd);
	log_file_fd = fd;
	return 0;
}

int log_file_fileno(void)
{
	return log_file_fd;
}

void log_set_sink(enum log_sink sink)
{
	if (sink == LOG_SINK_FILE && log_file_fd < 0)
		return;
	if (sink == LOG_SINK_SYSLOG && !log_syslog_opened) {
		openlog(log_prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
		log_syslog_opened = true;
	}
	__atomic_store_n(&log_sink_now, (int)sink, __ATOMIC_RELEASE);
}

void log_set_level(int level)
{
	log_threshold = level;
}

static const char *log_level_name(int level)
{
	switch (level) {
	case LOG_EMERG:
	case LOG_ALERT:
	case LOG_CRIT:
	case LOG_ERR:
		return "error";
	case LOG_WARNING:
		return "warning";
	case LOG_NOTICE:
		return "notice";
	case LOG_INFO:
		return "info";
	default:
		return "debug";
	}
}

static pthread_mutex_t log_errors_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log_errors log_errs; /* protected by log_errors_lock */

void log_errors_get(struct log_errors *out)
{
	pthread_mutex_lock(&log_errors_lock);
	*out = log_errs;
	pthread_mutex_unlock(&log_errors_lock);
}

/* Counts a warning or an error and keeps the last error's text. */
static void log_errors_note(int level, const char *msg, size_t len)
{
	if (level > LOG_WARNING)
		return;
	pthread_mutex_lock(&log_errors_lock);
	if (level == LOG_WARNING) {
		log_errs.warnings++;
	} else {
		log_errs.errors++;
		log_errs.last_time = (long long)time(NULL);
		if (len >= sizeof(log_errs.last))
			len = sizeof(log_errs.last) - 1;
		memcpy(log_errs.last, msg, len);
		log_errs.last[len] = '\0';
	}
	pthread_mutex_unlock(&log_errors_lock);
}

/* The file sink's prefix: UTC time, program and pid, level. */
static int log_file_prefix(char *buf, size_t cap, int level)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	return snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02dZ %s[%d]: %s: ",
			tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			tm.tm_hour, tm.tm_min, tm.tm_sec, log_prog,
			(int)getpid(), log_level_name(level));
}

const char *log_key(char *buf, const char *key, size_t len)
{
	return str_escape_key(buf, LOG_KEY_MAX, key, len);
}

void log_write(int level, const char *fmt, ...)
{
	char msg[2048], line[2048];
	int saved_errno = errno;
	int sink = __atomic_load_n(&log_sink_now, __ATOMIC_ACQUIRE);
	int fd = STDERR_FILENO;
	size_t len, start, mlen;
	int n;
	va_list ap;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	mlen = n < 0			 ? 0
	       : (size_t)n < sizeof(msg) ? (size_t)n
					 : sizeof(msg) - 1;
	while (mlen > 0 && msg[mlen - 1] == '\n')
		mlen--;
	if (sink == LOG_SINK_SYSLOG)
		n = 0;
	else if (sink == LOG_SINK_FILE)
		n = log_file_prefix(line, sizeof(line), level);
	else if (log_journal)
		n = snprintf(line, sizeof(line), "<%d>", level);
	else
		n = snprintf(line, sizeof(line), "%s: %s: ", log_prog,
			     log_level_name(level));
	len = n > 0 ? (size_t)n : 0;
	start = len;
	/* Room for the '\n' after it. */
	len += str_printable(line + len, sizeof(line) - len - 1, msg, mlen);
	log_errors_note(level, line + start, len - start);
	if (sink == LOG_SINK_SYSLOG) {
		line[len] = '\0';
		syslog(level, "%s", line);
		errno = saved_errno;
		return;
	}
	if (sink == LOG_SINK_FILE)
		fd = log_file_fd;
	line[len++] = '\n';
	/* Nothing useful to do if the sink is gone. */
	if (write(fd, line, len) < 0)
		(void)0;
	errno = saved_errno;
}

#define LOG_LIMIT_SLOTS 256

struct log_limit_slot {
	uint64_t hash;		  /* 0: free */
	time_t last;		  /* when it was last logged */
	unsigned long suppressed; /* repeats kept quiet since */
};

static pthread_mutex_t log_limit_lock = PTHREAD_MUTEX_INITIALIZER;
/* protected by log_limit_lock */
static struct log_limit_slot log_limit_slots[LOG_LIMIT_SLOTS];

bool log_limit(const char *key, unsigned long *suppressed)
{
	uint64_t h = fnv_hash(key, strlen(key));
	struct log_limit_slot *s;
	struct timespec ts;
	bool quiet = false;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	s = &log_limit_slots[h % LOG_LIMIT_SLOTS];
	pthread_mutex_lock(&log_limit_lock);
	if (s->hash == h && ts.tv_sec - s->last < LOG_REPEAT_S) {
		s->suppressed++;
		quiet = true;
	} else {
		if (suppressed != NULL)
			*suppressed = s->hash == h ? s->suppressed : 0;
		s->hash = h;
		s->last = ts.tv_sec;
		s->suppressed = 0;
	}
	pthread_mutex_unlock(&log_limit_lock);
	return quiet;
}
