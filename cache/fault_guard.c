/*
 * fault_guard: see fault_guard.h.
 */
#include "cache/fault_guard.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>

static __thread sigjmp_buf *guard_jmp; /* the innermost armed call's */
static __thread int guard_blocked;     /* the signal a handler jumped from */
static struct sigaction guard_old[2];  /* SIGSEGV, SIGBUS */
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void guard_handler(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jb = guard_jmp;
	const struct sigaction *old = &guard_old[sig == SIGBUS];
	struct sigaction dfl;

	if (jb != NULL && si != NULL && si->si_code > 0) {
		guard_jmp = NULL;
		guard_blocked = sig; /* the kernel blocked it for us */
		siglongjmp(*jb, sig);
	}
	if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction != NULL) {
		old->sa_sigaction(sig, si, uc);
		return;
	}
	if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL &&
	    old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
		return;
	}
	/* The default action: a real fault recurs when we return, a sent
	 * signal is raised again (blocked until we return). */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	if (si == NULL || si->si_code <= 0)
		raise(sig);
}

static void guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = guard_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &guard_old[0]);
	sigaction(SIGBUS, &sa, &guard_old[1]);
}

int fault_guard_call(int (*fn)(void *arg), void *arg, int *ret)
{
	sigjmp_buf jb, *outer = guard_jmp;
	int sig;

	pthread_once(&guard_once, guard_install);
	/* savemask 0: saving the mask is a system call on every call, and
	 * calls are per read. The handler runs with only its own signal
	 * added to the mask (sa_mask is empty), so after a jump from it
	 * unblocking that one restores the mask the call began with (a
	 * jump from fault_guard_jump() changed no mask). */
	sig = sigsetjmp(jb, 0);
	if (sig == 0) {
		guard_jmp = &jb;
		*ret = fn(arg);
	} else if (guard_blocked == sig) {
		sigset_t set;

		guard_blocked = 0;
		sigemptyset(&set);
		sigaddset(&set, sig);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	}
	guard_jmp = outer;
	return sig;
}

void fault_guard_jump(int sig)
{
	sigjmp_buf *jb = guard_jmp;

	if (jb != NULL) {
		guard_jmp = NULL;
		siglongjmp(*jb, sig);
	}
}
