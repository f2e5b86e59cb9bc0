/*
 * clock: the monotonic clock in nanoseconds, which every deadline, pace
 * and idle time inside one process is measured on (never the wall clock,
 * which may jump).
 */
#ifndef SHARDFS_UTIL_CLOCK_H
#define SHARDFS_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, in nanoseconds. Cannot fail. */
static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC now, in milliseconds (the unit of the backends' and
 * the cache's configured timeouts). Cannot fail. */
static inline uint64_t clock_now_ms(void)
{
	return clock_now_ns() / 1000000u;
}

#endif
