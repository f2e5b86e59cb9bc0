/*
 * backoff: see backoff.h.
 */
#include "util/backoff.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

unsigned backoff_ms(const struct backoff_policy *p, unsigned attempt,
		    double jitter)
{
	uint64_t d = p->base_ms;
	unsigned i;

	/* Doubling stops at the cap, so a large attempt cannot overflow. */
	for (i = 1; i < attempt && d < p->cap_ms; i++)
		d *= 2;
	if (d > p->cap_ms)
		d = p->cap_ms;
	if (jitter < 0)
		jitter = 0;
	return (unsigned)(d / 2 + (uint64_t)((double)(d - d / 2) * jitter));
}

double backoff_jitter(void)
{
	static __thread uint64_t state;
	uint64_t x = state;

	if (x == 0) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^
		    (uint64_t)(uintptr_t)&state ^ (uint64_t)pthread_self();
		if (x == 0) /* xorshift stays at 0 forever */
			x = 0x9e3779b97f4a7c15ULL;
	}
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	state = x;
	return (double)(x >> 11) / (double)(1ULL << 53);
}

unsigned backoff_delay_ms(const struct backoff_policy *p, unsigned attempt)
{
	return backoff_ms(p, attempt, backoff_jitter());
}
