/*
 * spawn: starts one transform process (a per-object process or a worker)
 * in its sandbox, with pipes for stdin, stdout and stderr; kills and reaps
 * it. Internal to transform/: transform.c is its only user.
 *
 * Everything the child needs (paths, argv, environment, rlimits, ids) is
 * built by transform_launch_new() in the daemon, so the forked child only
 * makes system calls before exec (the daemon is multi-threaded: no malloc,
 * no locks after fork).
 *
 * The bwrap command line, and why each part is there:
 *   --unshare-user          an unprivileged user namespace: what lets bwrap
 *                           make the others without setuid; the command
 *                           has no capability outside it
 *   --unshare-net           no network: only a loopback nobody listens on
 *   --unshare-ipc           no System V IPC or POSIX queues of the host
 *   --unshare-pid           sees only its own processes, and all of them
 *                           die when the sandbox's init dies
 *   --unshare-uts           a hostname it cannot change for the host
 *   --unshare-cgroup        its own cgroup root view
 *   --die-with-parent       bwrap (and so the sandbox) dies when the daemon
 *                           thread that started it does: a killed daemon
 *                           leaves no transform running
 *   --new-session           no TIOCSTI on a terminal it might inherit
 *   --ro-bind / /           the system's programs and libraries, read-only
 *   --dev /dev              a minimal /dev (null, zero, urandom, ...)
 *   --proc /proc            a /proc of the new PID namespace
 *   --tmpfs /tmp            a private, empty, writable /tmp (HOME, TMPDIR)
 *   --tmpfs DIR / --ro-bind /dev/null FILE
 *                           for each hidden path (cache, config, credentials)
 *   --clearenv --setenv K V the allow-list only
 *   --chdir /tmp            a working directory that exists and is private
 *   -- EXE ARGS...          argv[0] as resolved in the daemon's PATH
 */
#ifndef SHARDFS_TRANSFORM_SPAWN_H
#define SHARDFS_TRANSFORM_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "transform/transform.h"

struct transform_launch;

/* A running process: its pid (the leader of its own process group) and
 * the daemon's ends of its pipes (non-blocking, close-on-exec; -1 once
 * closed). */
struct transform_proc {
	pid_t pid;
	int in;
	int out;
	int err;
	/* Not NULL: transform_proc_reap() adds the CPU time (user and
	 * system, ns) of the process and of every descendant it reaped
	 * (bwrap's: the command) to *cpu_ns, atomically. */
	uint64_t *cpu_ns;
};

/* Prepares launches of spec's command (exe: argv[0] resolved, bwrap: its
 * path or NULL for sandbox none), with SHARDFS_TRANSFORM_MODE set for
 * mode. Returns 0 and *l, -EINVAL (a bad env entry), -ENOENT (no such
 * user), -EPERM (root, or cannot switch to the user), -ENOMEM; the
 * reason in err (cap bytes). */
int transform_launch_new(const struct transform_spec *spec, const char *exe,
			 const char *bwrap, struct transform_launch **l,
			 char *err, size_t cap);

void transform_launch_free(struct transform_launch *l);

/* Starts a process. Returns 0 and *p, or -ECHILD (fork, the user switch
 * or exec failed: the reason in err), -EMFILE/-ENFILE, -ENOMEM. */
int transform_launch_start(const struct transform_launch *l,
			   struct transform_proc *p, char *err, size_t cap);

/* SIGKILLs p's process group (and p). */
void transform_proc_kill(const struct transform_proc *p);

/* Waits up to wait_ms for p to exit, SIGKILLs what is left in its process
 * group, and reaps it; *status as waitpid's, or -1 if the status was lost
 * (another waiter reaped it). Returns 0, or -ETIMEDOUT (still running,
 * not reaped). */
int transform_proc_reap(struct transform_proc *p, unsigned wait_ms,
			int *status);

/* Closes p's pipe ends that are still open. */
void transform_proc_close_fds(struct transform_proc *p);

/* Monotonic milliseconds. */
uint64_t transform_now_ms(void);

#endif
