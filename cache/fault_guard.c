/*
 * fault_guard: see fault_guard.h.
 */
#include "cache/fault_guard.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <ucontext.h>

static __thread sigjmp_buf *guard_jmp; /* the innermost armed call's */
static __thread int guard_blocked;     /* the signal a handler jumped from */
static __thread sigset_t guard_mask;   /* the mask the fault came with */
static struct sigaction guard_old[2];  /* SIGSEGV, SIGBUS */
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void guard_handler(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *jb = guard_jmp;
	const struct sigaction *old = &guard_old[sig == SIGBUS];
	struct sigaction dfl;

	if (jb != NULL && si != NULL && si->si_code > 0) {
		guard_jmp = NULL;
		/* The mask while the handler runs is the installer's
		 * choice (ThreadSanitizer blocks every signal in its
		 * wrapper); the mask of the interrupted code is the one to
		 * go back to. */
		if (uc != NULL)
			guard_mask = ((const ucontext_t *)uc)->uc_sigmask;
		guard_blocked = uc != NULL ? sig : -sig;
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
	 * calls are per read. After a jump from the handler, the mask the
	 * fault interrupted (its ucontext's) is set again: what the call
	 * began with (a jump from fault_guard_jump() changed no mask). */
	sig = sigsetjmp(jb, 0);
	if (sig == 0) {
		guard_jmp = &jb;
		*ret = fn(arg);
	} else if (guard_blocked == sig) {
		guard_blocked = 0;
		pthread_sigmask(SIG_SETMASK, &guard_mask, NULL);
	} else if (guard_blocked == -sig) { /* no context: unblock it */
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
