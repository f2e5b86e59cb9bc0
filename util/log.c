/*
 * log: see log.h. A line is assembled in a stack buffer and written with one
 * write(2), so lines from different threads never interleave.
 */
#include "util/log.h"

#include "util/fnv.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int log_threshold = LOG_INFO;
static const char *log_prog = "shardfs";
static int log_journal;

void log_init(const char *prog)
{
	const char *slash;

	if (prog != NULL) {
		slash = strrchr(prog, '/');
		log_prog = slash != NULL ? slash + 1 : prog;
	}
	log_journal = getenv("JOURNAL_STREAM") != NULL;
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

void log_write(int level, const char *fmt, ...)
{
	char line[2048];
	int saved_errno = errno;
	size_t len, start;
	int n;
	va_list ap;

	if (log_journal)
		n = snprintf(line, sizeof(line), "<%d>", level);
	else
		n = snprintf(line, sizeof(line), "%s: %s: ", log_prog,
			     log_level_name(level));
	len = n > 0 ? (size_t)n : 0;
	start = len;
	va_start(ap, fmt);
	n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	va_end(ap);
	if (n > 0)
		len += (size_t)n;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	log_errors_note(level, line + start, len - start);
	line[len++] = '\n';
	/* Nothing useful to do if stderr is gone. */
	if (write(STDERR_FILENO, line, len) < 0)
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
