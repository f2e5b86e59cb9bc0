/*
 * backoff: the one retry-delay policy of the stores (HTTP for S3 and GCS,
 * NFS): capped exponential growth with equal jitter. Each caller names its
 * base and cap in one struct backoff_policy and says there why; the shape
 * of the curve lives here only.
 *
 * The delay before retry n (n = 1 for the first retry) is
 * d = min(base * 2^(n-1), cap), then jittered into [d/2, d): never below
 * half the nominal delay (a retry storm is spread out, not collapsed to
 * zero), never above the cap. Jitter is drawn from a per-thread xorshift
 * source, so threads that failed together retry apart without sharing
 * state or a lock.
 */
#ifndef SHARDFS_UTIL_BACKOFF_H
#define SHARDFS_UTIL_BACKOFF_H

struct backoff_policy {
	unsigned base_ms; /* nominal delay before the first retry */
	unsigned cap_ms;  /* no nominal delay exceeds this */
};

/* The delay in ms before retry attempt (1 = first; 0 is taken as 1) of
 * policy p, with jitter in [0, 1) choosing where in [d/2, d) it falls
 * (jitter 0 gives d/2). Pure, for tests; backoff_delay_ms draws the
 * jitter itself. Cannot fail. */
unsigned backoff_ms(const struct backoff_policy *p, unsigned attempt,
		    double jitter);

/* A uniform double in [0, 1) from the calling thread's own source, seeded
 * on first use from the clock and the thread. Not for cryptography. */
double backoff_jitter(void);

/* backoff_ms(p, attempt, backoff_jitter()): the delay a retry loop sleeps.
 * The caller still bounds it by its own deadline. */
unsigned backoff_delay_ms(const struct backoff_policy *p, unsigned attempt);

#endif
