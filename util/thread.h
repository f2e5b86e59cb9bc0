/*
 * thread: starting helper threads. Signals belong to the main thread (and
 * the FUSE loop's): every helper thread blocks SIGHUP, SIGINT and SIGTERM
 * (docs/STYLE.md, Threads), so a signal is never delivered to a thread
 * that cannot act on it.
 */
#ifndef SHARDFS_UTIL_THREAD_H
#define SHARDFS_UTIL_THREAD_H

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

/* Blocks SIGHUP, SIGINT and SIGTERM, and extra if it is not 0, in the
 * calling thread, saving the previous mask in *old; a thread started
 * before pthread_sigmask(SIG_SETMASK, old, NULL) inherits the block (for
 * threads a library starts). */
void thread_block_signals(int extra, sigset_t *old);

/* pthread_create(t, NULL, fn, arg) with SIGHUP, SIGINT and SIGTERM
 * blocked in the new thread; the caller's mask is unchanged. Returns 0 or
 * pthread_create's error as a negative errno. */
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* getpid() without a system call per use (a hot path asks it to notice a
 * fork): the first call caches it, and a fork's child (pthread_atfork)
 * forgets it. Thread-safe. */
pid_t thread_pid(void);

#endif
