/*
 * thread: see thread.h.
 */
#include "util/thread.h"

void thread_block_signals(int extra, sigset_t *old)
{
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	if (extra != 0)
		sigaddset(&block, extra);
	pthread_sigmask(SIG_BLOCK, &block, old);
}

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t old;
	int rc;

	thread_block_signals(0, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -rc;
}
