/*
 * transform: runs a user's deterministic transform (a command that reads one
 * object's bytes on stdin and writes its output on stdout) on one object at
 * a time, isolated, bounded, from any thread (issue 27). The caller (the
 * cache's derived objects, later) keys and stores the outputs; this module
 * only runs the command and says exactly what happened.
 *
 * Two modes:
 *  - process: a process per object. Its stdin is the object, closed after
 *    the last byte; its stdout, read to EOF, is the output, valid only if
 *    it exits 0 and wrote at least one byte.
 *  - worker: up to `workers` long-lived processes, started when first
 *    needed, each handling one object at a time over the framed protocol
 *    of transform/protocol.h. A worker that dies, times out, breaks the
 *    protocol or exceeds output_max is killed; the object in flight fails
 *    and the next object starts a new worker. A worker that exits 0
 *    without a byte of reply (it ended itself between objects just as the
 *    request went out) has the object resent to a new worker, once.
 * Both set SHARDFS_TRANSFORM_MODE=process|worker in the command's
 * environment (python/shardfs/transform.py's main() reads it).
 *
 * Isolation, both modes: the command never runs as root. The child of the
 * daemon starts a new session (its process group is killed on timeout),
 * sets rlimits (RLIMIT_AS = memory, RLIMIT_CPU = cpu_seconds in process
 * mode, RLIMIT_FSIZE = output_max (at least 1 MiB) for files it writes in
 * its /tmp, RLIMIT_NPROC = processes: the kernel counts every process and
 * thread of that uid on the machine, so leave room for all workers of all
 * transforms running as that user), closes every
 * descriptor but 0, 1, 2, sets no_new_privs, clears its environment to the
 * allow-list, drops to `user` (supplementary groups cleared, the user's
 * primary group), then executes bubblewrap (sandbox bwrap, the default;
 * transform/spawn.h lists its arguments and why): new user, network, IPC,
 * PID, UTS and cgroup namespaces, a read-only /, a private /tmp, /proc and
 * /dev, an empty tmpfs over each hidden directory and an unopenable
 * /dev/null over each hidden file; or the command itself (sandbox none: the same user and
 * rlimits, no namespaces, everything readable that `user` can read).
 *
 * Reading and writing: stdin, stdout and stderr are serviced together
 * (poll, non-blocking), so a command that writes before it has read all of
 * its input never deadlocks. The output is returned only whole: any
 * failure returns no bytes. When a per-object process exits, whatever it
 * left running in its process group is killed (in bwrap the PID namespace
 * ends with it anyway); one that still holds stdout or stderr open keeps
 * the run to its timeout. The last TRANSFORM_TAIL_MAX bytes of the
 * command's stderr (in worker mode: of that worker, drained during every
 * run) come back with a failure, escaped into one printable line.
 *
 * Bounds: every wait is bounded. A run waits at most timeout_ms for a free
 * slot (-EAGAIN, TRANSFORM_FAIL_BUSY), then at most timeout_ms for the
 * command (killed: SIGKILL to its process group, which ends the sandbox's
 * PID namespace); transform_close() waits at most TRANSFORM_STOP_MS for
 * workers to exit after SIGTERM, then kills them.
 */
#ifndef SHARDFS_TRANSFORM_H
#define SHARDFS_TRANSFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/sha256.h"

enum transform_mode {
	TRANSFORM_MODE_PROCESS = 0,
	TRANSFORM_MODE_WORKER,
};

enum transform_sandbox {
	TRANSFORM_SANDBOX_BWRAP = 0, /* the default */
	TRANSFORM_SANDBOX_NONE,	     /* an explicit opt-out: log it */
};

/* Defaults for the fields left 0 or NULL. */
#define TRANSFORM_TIMEOUT_MS_DEFAULT 60000u
#define TRANSFORM_OUTPUT_MAX_DEFAULT (64ull << 20)
#define TRANSFORM_MEMORY_DEFAULT (4ull << 30)
#define TRANSFORM_PROCESSES_DEFAULT 256u
#define TRANSFORM_USER_DEFAULT "nobody"
/* How long transform_close() lets workers exit after SIGTERM. */
#define TRANSFORM_STOP_MS 2000u
/* The stderr kept per process or worker. */
#define TRANSFORM_TAIL_MAX 1024u

/*
 * What to run and how. Everything is copied by transform_open(); the
 * caller's strings may go afterwards.
 */
struct transform_spec {
	const char *name;    /* required, for logs and the identity */
	const char *version; /* required (may be ""), in the identity */
	/* The command, NULL-terminated, argv[0] found through PATH if it has
	 * no '/' (at open, in the daemon's PATH). No shell. */
	const char *const *argv;
	enum transform_mode mode;
	unsigned workers;     /* 0: the number of online cores */
	unsigned timeout_ms;  /* per object; 0: the default */
	uint64_t memory;      /* RLIMIT_AS, bytes; 0: the default */
	uint64_t output_max;  /* bytes; 0: the default */
	unsigned cpu_seconds; /* RLIMIT_CPU, process mode only; 0: none */
	unsigned processes;   /* RLIMIT_NPROC; 0: the default */
	const char *user;     /* NULL: "nobody"; uid 0 is refused */
	enum transform_sandbox sandbox;
	/* The environment allow-list, NULL-terminated: "NAME=VALUE" sets a
	 * value, "NAME" copies the daemon's value if it has one. NULL: PATH,
	 * LANG, LC_ALL, HOME=/tmp, TMPDIR=/tmp. */
	const char *const *env;
	/* Paths the sandbox must not see, NULL-terminated (the cache dir,
	 * the config's dir, credential files): each existing directory gets
	 * an empty tmpfs, each existing file /dev/null (which cannot be
	 * opened there: EACCES, devices are off in the sandbox's mounts,
	 * so a hidden file is unreadable). Paths under /tmp,
	 * /proc and /dev are hidden already; missing ones are skipped.
	 * Ignored with sandbox none (say so when logging the opt-out). */
	const char *const *hide;
	/* bwrap's path; NULL: "bwrap" through PATH (for tests). */
	const char *bwrap;
};

enum transform_fail {
	TRANSFORM_FAIL_NONE = 0,
	TRANSFORM_FAIL_EXIT,	   /* exited non-zero: status */
	TRANSFORM_FAIL_SIGNAL,	   /* killed by a signal: signal */
	TRANSFORM_FAIL_TIMEOUT,	   /* ran past timeout_ms: killed */
	TRANSFORM_FAIL_OUTPUT_MAX, /* wrote more than output_max: killed */
	TRANSFORM_FAIL_EMPTY,	   /* exited 0 (or replied ok) with no bytes */
	/* Failed, and its stderr or error reply says memory ("MemoryError",
	 * "Cannot allocate memory", "out of memory", "bad_alloc", "memory
	 * exhausted"): how a program reports a failed allocation is its
	 * own, so this is a best guess; else it is exit or signal. */
	TRANSFORM_FAIL_MEMORY,
	TRANSFORM_FAIL_PROTOCOL, /* worker: a malformed or unexpected frame */
	TRANSFORM_FAIL_ERROR,	 /* worker: replied with an error */
	TRANSFORM_FAIL_START,	 /* could not start (fork, exec, user) */
	TRANSFORM_FAIL_BUSY,	 /* no free slot within timeout_ms */
};

/* Why a run failed. All strings are printable one-line text. */
struct transform_failure {
	enum transform_fail what;
	int status; /* exit status (TRANSFORM_FAIL_EXIT, _MEMORY) or -1 */
	/* The signal (TRANSFORM_FAIL_SIGNAL, _MEMORY), or 0. In the bwrap
	 * sandbox a command killed by signal N shows as bwrap's exit
	 * 128 + N, reported as signal N. */
	int signal;
	/* What happened in a few words, with the worker's error message or
	 * the frame that was wrong. */
	char message[256];
	/* The last TRANSFORM_TAIL_MAX bytes of stderr, escaped (%XX for
	 * control bytes and newlines), NUL-terminated. */
	char stderr_tail[3 * TRANSFORM_TAIL_MAX + 1];
};

/* The output of one run, owned by the caller: free(out->data). */
struct transform_output {
	void *data;
	size_t len; /* >= 1 */
};

struct transform;

/*
 * Checks spec and prepares to run it: resolves argv[0] (and bwrap) through
 * PATH, resolves the user (refusing uid 0), computes the identity. Starts
 * no process (workers start when first needed). Returns 0 and *t, or:
 * -EINVAL (no name, version or argv, a bad env entry), -ENOENT (argv[0] or
 * bwrap not found, or the user does not exist), -EPERM (the user is root,
 * or the daemon is not root and is not that user), -ENOMEM, -EIO (reading
 * the executable). The reason is logged once, naming the transform.
 */
int transform_open(const struct transform_spec *spec, struct transform **t);

/*
 * Runs the transform on in[0..in_len) (in may be NULL if in_len is 0).
 * Thread-safe: up to `workers` runs at once; more wait for a slot. Returns
 * 0 with *out filled (f->what = TRANSFORM_FAIL_NONE), or a negative errno
 * with *out untouched and *f saying why: -EIO (the command failed: exit,
 * signal, empty, memory, protocol, error reply), -ETIMEDOUT (timeout),
 * -EFBIG (output_max), -EAGAIN (no slot in time), -ECHILD (could not
 * start), -ENOMEM. Logs nothing: the caller logs the failure once, with
 * its key. f may be NULL.
 */
int transform_run(struct transform *t, const void *in, size_t in_len,
		  struct transform_output *out, struct transform_failure *f);

/* SHA-256 over the name, version, argv and the bytes of the executable
 * (argv[0] resolved) and of every other argv element naming a regular
 * file (a script given to an interpreter), as read by transform_open():
 * any change gives another identity. */
void transform_identity(const struct transform *t, uint8_t out[SHA256_LEN]);

/* The CPU time (user + system, ns) of t's commands so far: of each
 * process when it is reaped (with its descendants it reaped: in the bwrap
 * sandbox, the command), so a per-object process counts when its run
 * ends and a worker only when it exits (transform_close(), a timeout, its
 * death). Thread-safe. */
uint64_t transform_cpu_ns(const struct transform *t);

/* Its `workers`: the runs it makes at once (the rest wait for a slot). */
unsigned transform_workers(const struct transform *t);

/* Takes a slot of t now, if one is free, for the calling thread's next
 * transform_run() of t (which then never waits for one); returns whether
 * it did. transform_unreserve() gives it back if no run used it (a run
 * gives it back when it ends). For work ahead of a reader, which must
 * not wait for a slot, nor hold up a reader that joins its run while it
 * waits (cache/xform_ahead.c). */
bool transform_reserve(struct transform *t);
void transform_unreserve(struct transform *t);

/* The what of a failure in a word ("exit", "timeout", ...). */
const char *transform_fail_name(enum transform_fail what);

/* Stops the workers (SIGTERM, at most TRANSFORM_STOP_MS, SIGKILL; every
 * one reaped) and frees t. No run may be in progress or start. NULL is a
 * no-op. */
void transform_close(struct transform *t);

#endif
