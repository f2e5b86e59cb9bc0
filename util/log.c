/*
 * log: see log.h. A line is assembled in a stack buffer and written with one
 * write(2), so lines from different threads never interleave.
 */
#include "util/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void log_write(int level, const char *fmt, ...)
{
	char line[2048];
	int saved_errno = errno;
	size_t len;
	int n;
	va_list ap;

	if (log_journal)
		n = snprintf(line, sizeof(line), "<%d>", level);
	else
		n = snprintf(line, sizeof(line), "%s: %s: ", log_prog,
			     log_level_name(level));
	len = n > 0 ? (size_t)n : 0;
	va_start(ap, fmt);
	n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	va_end(ap);
	if (n > 0)
		len += (size_t)n;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	/* Nothing useful to do if stderr is gone. */
	if (write(STDERR_FILENO, line, len) < 0)
		(void)0;
	errno = saved_errno;
}
