/*
 * log: see log.h. A line is assembled in a stack buffer and written with one
 * write(2) (or one syslog() call), so lines from different threads never
 * interleave. The message is made printable (str_printable()) before it is
 * written, counted or kept: whatever a caller passes, no line holds a
 * control byte, so none can forge another line or reach a terminal.
 *
 * The file sink writes and rotates under log_file_lock, so a rotation
 * swaps the descriptor (dup3 onto the same number) between two lines.
 * Lock order: log_file_lock, then the file's flock (never waited for:
 * LOCK_NB, a busy lock retries at the next line); log_errors_lock is
 * taken alone.
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
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int log_threshold = LOG_INFO;
static const char *log_prog = "shardfs";
static bool log_journal;       /* stderr is the journal stream */
static int log_sink_now;       /* enum log_sink; atomic */
static bool log_syslog_opened; /* set before the switch to syslog */
static log_sink_fn log_func;   /* set before the switch to it */

/* The file sink. Set before threads; then protected by log_file_lock. */
static pthread_mutex_t log_file_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_file_fd = -1;
static char *log_file_path; /* for rotation */
static uint64_t log_file_max;
static unsigned log_file_keep;

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

static int log_file_create(const char *path)
{
	return open(path,
		    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		    0640);
}

int log_file_open(const char *path)
{
	char *copy = strdup(path);
	int fd;

	if (copy == NULL)
		return -ENOMEM;
	fd = log_file_create(path);
	if (fd < 0) {
		fd = -errno;
		free(copy);
		return fd;
	}
	if (log_file_fd >= 0)
		close(log_file_fd);
	log_file_fd = fd;
	free(log_file_path);
	log_file_path = copy;
	return 0;
}

void log_file_limits(uint64_t max_size, unsigned keep)
{
	log_file_max = max_size;
	log_file_keep = keep;
}

/* After a line, with log_file_lock held: rotates the file once it reached
 * log_file_max, or reopens PATH if another process rotated it. Best
 * effort: a failure leaves the current file in use. */
static void log_file_rotate(void)
{
	char from[4200], to[4200];
	struct stat fs, ps;
	unsigned k;
	int fd;

	if (fstat(log_file_fd, &fs) != 0 || (uint64_t)fs.st_size < log_file_max)
		return;
	/* Several daemons may share the file: one rotates, the others
	 * find PATH is another file and reopen it. */
	if (flock(log_file_fd, LOCK_EX | LOCK_NB) != 0)
		return;
	if (stat(log_file_path, &ps) == 0 && ps.st_dev == fs.st_dev &&
	    ps.st_ino == fs.st_ino) {
		if (log_file_keep == 0) {
			if (ftruncate(log_file_fd, 0) != 0)
				(void)0; /* the next line tries again */
			flock(log_file_fd, LOCK_UN);
			return;
		}
		for (k = log_file_keep; k > 0; k--) {
			if (k > 1)
				snprintf(from, sizeof(from), "%s.%u",
					 log_file_path, k - 1);
			else
				snprintf(from, sizeof(from), "%s",
					 log_file_path);
			snprintf(to, sizeof(to), "%s.%u", log_file_path, k);
			if (rename(from, to) != 0 && errno != ENOENT)
				break;
		}
	}
	fd = log_file_create(log_file_path);
	flock(log_file_fd, LOCK_UN);
	if (fd < 0)
		return;
	/* The same descriptor number: a daemon kept exactly it open. */
	if (dup3(fd, log_file_fd, O_CLOEXEC) < 0)
		(void)0; /* keep the old file */
	close(fd);
}

int log_file_fileno(void)
{
	return log_file_fd;
}

void log_set_func(log_sink_fn fn)
{
	log_func = fn;
}

void log_set_sink(enum log_sink sink)
{
	if (sink == LOG_SINK_FILE && log_file_fd < 0)
		return;
	if (sink == LOG_SINK_FUNC && log_func == NULL)
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

const char *log_level_name(int level)
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
/* The last LOG_RECENT_MAX warnings and errors, a ring; protected by
 * log_errors_lock. */
static struct log_entry log_ring[LOG_RECENT_MAX];
static size_t log_ring_next, log_ring_n;

void log_errors_get(struct log_errors *out)
{
	pthread_mutex_lock(&log_errors_lock);
	*out = log_errs;
	pthread_mutex_unlock(&log_errors_lock);
}

size_t log_recent_get(struct log_entry *out, size_t max)
{
	size_t i, n;

	pthread_mutex_lock(&log_errors_lock);
	n = log_ring_n < max ? log_ring_n : max;
	for (i = 0; i < n; i++)
		out[i] = log_ring[(log_ring_next + LOG_RECENT_MAX - n + i) %
				  LOG_RECENT_MAX];
	pthread_mutex_unlock(&log_errors_lock);
	return n;
}

/* Copies printable msg[0..len) into dst (cap bytes), cut at a character
 * (never inside a UTF-8 sequence: msg came from str_printable()). */
static void log_copy_cut(char *dst, size_t cap, const char *msg, size_t len)
{
	if (len >= cap) {
		len = cap - 1;
		while (len > 0 && ((unsigned char)msg[len] & 0xc0) == 0x80)
			len--;
	}
	memcpy(dst, msg, len);
	dst[len] = '\0';
}

static void log_set_field(char *dst, size_t cap, const char *s)
{
	log_copy_cut(dst, cap, s ? s : "", s ? strlen(s) : 0);
}

void log_set_target(const char *target, const char *path, const char *note)
{
	pthread_mutex_lock(&log_errors_lock);
	log_set_field(log_errs.target, sizeof(log_errs.target), target);
	log_set_field(log_errs.path, sizeof(log_errs.path), path);
	log_set_field(log_errs.note, sizeof(log_errs.note), note);
	pthread_mutex_unlock(&log_errors_lock);
}

/* Counts a warning or an error, keeps the last error's text and keeps
 * both in the ring. */
static void log_errors_note(int level, const char *msg, size_t len)
{
	struct log_entry *e;
	long long now;

	if (level > LOG_WARNING)
		return;
	now = (long long)time(NULL);
	pthread_mutex_lock(&log_errors_lock);
	if (level == LOG_WARNING) {
		log_errs.warnings++;
	} else {
		log_errs.errors++;
		log_errs.last_time = now;
		log_copy_cut(log_errs.last, sizeof(log_errs.last), msg, len);
	}
	e = &log_ring[log_ring_next];
	e->time = now;
	e->level = level;
	log_copy_cut(e->msg, sizeof(e->msg), msg, len);
	log_ring_next = (log_ring_next + 1) % LOG_RECENT_MAX;
	if (log_ring_n < LOG_RECENT_MAX)
		log_ring_n++;
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
	if (sink == LOG_SINK_FUNC) {
		line[len] = '\0';
		log_func(level, line + start, len - start);
		errno = saved_errno;
		return;
	}
	line[len++] = '\n';
	if (sink == LOG_SINK_FILE) {
		pthread_mutex_lock(&log_file_lock);
		if (write(log_file_fd, line, len) < 0)
			(void)0; /* nothing useful to do */
		if (log_file_max > 0)
			log_file_rotate();
		pthread_mutex_unlock(&log_file_lock);
		errno = saved_errno;
		return;
	}
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
