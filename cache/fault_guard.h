/*
 * fault_guard: runs a function with the SIGSEGV and SIGBUS it causes in
 * the calling thread caught, for code that reads memory it cannot trust:
 * LMDB reading a shared mapping of a file that another process may have
 * damaged or truncated (cache/index.c).
 *
 * A process-wide handler is installed on first use (the previous one is
 * kept). A fault the kernel raises synchronously (si_code > 0) in a thread
 * whose guard is armed jumps back to fault_guard_call() with siglongjmp;
 * any other SIGSEGV/SIGBUS (no guard armed, or sent with kill(2)) goes to
 * the previous handler, or gets the default action (the process dies as
 * it would have). The handler only reads a thread-local pointer and jumps:
 * async-signal-safe.
 *
 * What fn was doing when it faulted is abandoned: it must not hold a lock
 * or own memory that matters while it touches the untrusted memory; the
 * caller cleans up what fn left (index.c aborts the thread's LMDB
 * transaction). Calls nest: a fault returns to the innermost.
 */
#ifndef SHARDFS_FAULT_GUARD_H
#define SHARDFS_FAULT_GUARD_H

/* Calls fn(arg) with the guard armed. Returns 0 and sets *ret to fn's
 * result, or returns the signal (SIGSEGV or SIGBUS) that interrupted fn. */
int fault_guard_call(int (*fn)(void *arg), void *arg, int *ret);

/* From code the guarded function calls that finds it cannot go on (an
 * assertion in LMDB): if a guard is armed in this thread, returns to its
 * fault_guard_call() as a fault sig would; otherwise returns. Not for
 * signal handlers (fault_guard_call() handles those). */
void fault_guard_jump(int sig);

#endif
