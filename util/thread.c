/*
 * thread: see thread.h.
 */
#include "util/thread.h"

#include <unistd.h>

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

static pid_t thread_pid_cached; /* 0: not known in this process */
static pthread_once_t thread_pid_once = PTHREAD_ONCE_INIT;

static void thread_pid_forget(void)
{
	__atomic_store_n(&thread_pid_cached, 0, __ATOMIC_RELAXED);
}

static void thread_pid_init(void)
{
	pthread_atfork(NULL, NULL, thread_pid_forget);
}

pid_t thread_pid(void)
{
	pid_t pid = __atomic_load_n(&thread_pid_cached, __ATOMIC_RELAXED);

	if (pid != 0)
		return pid;
	pthread_once(&thread_pid_once, thread_pid_init);
	pid = getpid();
	__atomic_store_n(&thread_pid_cached, pid, __ATOMIC_RELAXED);
	return pid;
}
