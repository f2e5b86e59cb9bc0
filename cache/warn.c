/*
 * warn: the cache's rate-limited warning. Storing, evicting and reading
 * the index fail the same way on every read once the disk is full or the
 * index is unwritable; the reader is served uncached either way, so one
 * line a minute says so without flooding the log. Its own file so the
 * files that warn (store, evict, read, index users) depend on it, not on
 * the wiring file (open.c) that depends on them.
 */
#include "cache/cache_impl.h"

#include <time.h>

#include "util/log.h"

#define WARN_SECONDS 60

void cache_warn_limited(struct cache *c, const char *what, int rc)
{
	time_t now = time(NULL);
	bool say;

	pthread_mutex_lock(&c->warn_lock);
	say = c->last_warn == 0 || now - c->last_warn >= WARN_SECONDS;
	if (say)
		c->last_warn = now;
	pthread_mutex_unlock(&c->warn_lock);
	if (say)
		log_msg(LOG_WARNING,
			"cache %s: %s: %s; serving uncached (this warning is "
			"repeated at most once a minute)",
			c->dir, what, index_strerror(rc));
}
