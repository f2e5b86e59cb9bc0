/*
 * spawn: one transform process in its sandbox (spawn.h). The launch holds
 * every byte the child needs, prepared before fork; the child reports a
 * failure before exec as {stage, errno} on a close-on-exec pipe that the
 * parent reads until exec closes it (bounded: the child makes a few system
 * calls only).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transform/spawn.h"

/* How long the parent waits for the child to reach exec. */
#define SPAWN_EXEC_WAIT_MS 10000

struct transform_launch {
	char *path;  /* what the child executes: bwrap or the command */
	char **argv; /* NULL-terminated, owned */
	char **envp; /* NULL-terminated, owned */
	bool switch_user;
	uid_t uid;
	gid_t gid;
	bool parent_deathsig;
	struct rlimit as, cpu, fsize, nproc;
	bool set_cpu;
	bool sandboxed; /* path is bwrap */
};

/* FUSE mounts detached before bwrap copies the mount namespace: a
 * long-lived worker would otherwise hold a copy of the daemon's own mount,
 * whose connection then outlives the unmount, so the daemon never sees
 * its session end (and closes its workers only after that). At most this
 * many are detached. */
#define SPAWN_DETACH_MAX 64

/* Undoes mountinfo's octal escapes (\040 for a blank...) in place. */
static void spawn_unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* The mount points of the FUSE filesystems this process sees (malloc'd,
 * before fork: the child only calls umount2() on them). Returns how many;
 * none when mountinfo cannot be read. */
static size_t spawn_fuse_mounts(char **out, size_t max)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0, n = 0;

	if (f == NULL)
		return 0;
	while (n < max && getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE */
		char *fields[5], *sep = strstr(line, " - "), *p = line;
		int i;

		if (sep == NULL || strncmp(sep + 3, "fuse", 4) != 0)
			continue;
		for (i = 0; i < 5; i++) {
			fields[i] = strsep(&p, " ");
			if (fields[i] == NULL)
				break;
		}
		if (i < 5)
			continue;
		spawn_unescape(fields[4]);
		out[n] = strdup(fields[4]);
		if (out[n] != NULL)
			n++;
	}
	free(line);
	fclose(f);
	return n;
}

enum spawn_stage {
	STAGE_FDS = 1,
	STAGE_RLIMIT,
	STAGE_USER,
	STAGE_EXEC,
};

static const char *const spawn_env_default[] = {
	"PATH", "LANG", "LC_ALL", "HOME=/tmp", "TMPDIR=/tmp", NULL,
};

uint64_t transform_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A growable NULL-terminated string vector. */
struct spawn_vec {
	char **v;
	size_t n, cap;
	bool oom;
};

static void spawn_vec_add(struct spawn_vec *v, const char *s)
{
	char *d;

	if (v->oom)
		return;
	if (v->n + 2 > v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 32;
		char **nv = realloc(v->v, cap * sizeof(*nv));

		if (nv == NULL) {
			v->oom = true;
			return;
		}
		v->v = nv;
		v->cap = cap;
	}
	d = strdup(s);
	if (d == NULL) {
		v->oom = true;
		return;
	}
	v->v[v->n++] = d;
	v->v[v->n] = NULL;
}

static void spawn_vec_free(char **v)
{
	size_t i;

	if (v == NULL)
		return;
	for (i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

static bool spawn_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 &&
	       (path[n] == '\0' || path[n] == '/');
}

/* The environment as "K=V" strings: the allow-list plus the mode. */
static int spawn_env_build(const struct transform_spec *spec,
			   struct spawn_vec *env, char *err, size_t cap)
{
	const char *const *list = spec->env ? spec->env : spawn_env_default;
	bool have_path = false;
	size_t i;

	for (i = 0; list[i] != NULL; i++) {
		const char *e = list[i], *eq = strchr(e, '=');
		size_t klen = eq ? (size_t)(eq - e) : strlen(e);
		char buf[4096];

		if (klen == 0 || (klen == 22 && strncmp(e,
							"SHARDFS_TRANSFORM_"
							"MODE",
							22) == 0)) {
			snprintf(err, cap, "bad environment entry '%.64s'", e);
			return -EINVAL;
		}
		if (klen == 4 && strncmp(e, "PATH", 4) == 0)
			have_path = true;
		if (eq != NULL) {
			spawn_vec_add(env, e);
			continue;
		}
		if (getenv(e) == NULL) {
			if (strcmp(e, "PATH") == 0)
				spawn_vec_add(
					env,
					"PATH=/usr/local/bin:/usr/bin:/bin");
			continue;
		}
		if ((size_t)snprintf(buf, sizeof(buf), "%s=%s", e, getenv(e)) >=
		    sizeof(buf)) {
			snprintf(err, cap, "environment %.64s too long", e);
			return -EINVAL;
		}
		spawn_vec_add(env, buf);
	}
	if (!have_path)
		spawn_vec_add(env, "PATH=/usr/local/bin:/usr/bin:/bin");
	spawn_vec_add(env, spec->mode == TRANSFORM_MODE_WORKER
				   ? "SHARDFS_TRANSFORM_MODE=worker"
				   : "SHARDFS_TRANSFORM_MODE=process");
	return env->oom ? -ENOMEM : 0;
}

static void spawn_bwrap_args(const struct transform_spec *spec,
			     const char *bwrap, char **envp,
			     struct spawn_vec *a)
{
	static const char *const fixed[] = {
		"--unshare-user",
		"--unshare-net",
		"--unshare-ipc",
		"--unshare-pid",
		"--unshare-uts",
		"--unshare-cgroup",
		"--die-with-parent",
		"--new-session",
		"--ro-bind",
		"/",
		"/",
		"--dev",
		"/dev",
		"--proc",
		"/proc",
		"--tmpfs",
		"/tmp",
		NULL,
	};
	size_t i;

	spawn_vec_add(a, bwrap);
	for (i = 0; fixed[i] != NULL; i++)
		spawn_vec_add(a, fixed[i]);
	for (i = 0; spec->hide != NULL && spec->hide[i] != NULL; i++) {
		const char *h = spec->hide[i];
		struct stat st;

		if (h[0] != '/' || spawn_under(h, "/tmp") ||
		    spawn_under(h, "/proc") || spawn_under(h, "/dev") ||
		    strcmp(h, "/") == 0 || stat(h, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			spawn_vec_add(a, "--tmpfs");
			spawn_vec_add(a, h);
		} else {
			spawn_vec_add(a, "--ro-bind");
			spawn_vec_add(a, "/dev/null");
			spawn_vec_add(a, h);
		}
	}
	spawn_vec_add(a, "--clearenv");
	for (i = 0; envp[i] != NULL; i++) {
		char *eq = strchr(envp[i], '=');
		char key[256];
		size_t klen = (size_t)(eq - envp[i]);

		if (klen >= sizeof(key))
			continue;
		memcpy(key, envp[i], klen);
		key[klen] = '\0';
		spawn_vec_add(a, "--setenv");
		spawn_vec_add(a, key);
		spawn_vec_add(a, eq + 1);
	}
	spawn_vec_add(a, "--chdir");
	spawn_vec_add(a, "/tmp");
	spawn_vec_add(a, "--");
}

static int spawn_user(const char *user, struct transform_launch *l, char *err,
		      size_t cap)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	int rc;

	rc = getpwnam_r(user, &pw, buf, sizeof(buf), &res);
	if (res == NULL) {
		snprintf(err, cap, "user '%.64s' does not exist%s%s", user,
			 rc ? ": " : "", rc ? strerror(rc) : "");
		return -ENOENT;
	}
	if (pw.pw_uid == 0) {
		snprintf(err, cap,
			 "user '%.64s' is root: a transform never runs as root",
			 user);
		return -EPERM;
	}
	l->uid = pw.pw_uid;
	l->gid = pw.pw_gid;
	if (geteuid() == 0) {
		l->switch_user = true;
		return 0;
	}
	if (geteuid() != pw.pw_uid) {
		snprintf(err, cap,
			 "cannot run as user '%.64s': the daemon runs as uid "
			 "%u, "
			 "not root",
			 user, (unsigned)geteuid());
		return -EPERM;
	}
	l->switch_user = false;
	return 0;
}

int transform_launch_new(const struct transform_spec *spec, const char *exe,
			 const char *bwrap, struct transform_launch **lp,
			 char *err, size_t cap)
{
	struct transform_launch *l;
	struct spawn_vec env = { 0 }, args = { 0 };
	uint64_t fsize;
	size_t i;
	int rc;

	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	rc = spawn_user(spec->user ? spec->user : TRANSFORM_USER_DEFAULT, l,
			err, cap);
	if (rc)
		goto fail;
	rc = spawn_env_build(spec, &env, err, cap);
	if (rc)
		goto fail;
	if (bwrap != NULL)
		spawn_bwrap_args(spec, bwrap, env.v, &args);
	spawn_vec_add(&args, exe);
	for (i = 1; spec->argv[i] != NULL; i++)
		spawn_vec_add(&args, spec->argv[i]);
	l->path = strdup(bwrap ? bwrap : exe);
	l->sandboxed = bwrap != NULL;
	rc = -ENOMEM;
	if (args.oom || l->path == NULL)
		goto fail;
	l->argv = args.v;
	l->envp = env.v;
	l->as.rlim_cur = l->as.rlim_max =
		spec->memory ? spec->memory : TRANSFORM_MEMORY_DEFAULT;
	fsize = spec->output_max ? spec->output_max
				 : TRANSFORM_OUTPUT_MAX_DEFAULT;
	if (fsize < (1u << 20))
		fsize = 1u << 20;
	l->fsize.rlim_cur = l->fsize.rlim_max = fsize;
	l->nproc.rlim_cur = l->nproc.rlim_max =
		spec->processes ? spec->processes : TRANSFORM_PROCESSES_DEFAULT;
	if (spec->cpu_seconds && spec->mode == TRANSFORM_MODE_PROCESS) {
		l->set_cpu = true;
		/* SIGXCPU at the soft limit, SIGKILL a second later. */
		l->cpu.rlim_cur = spec->cpu_seconds;
		l->cpu.rlim_max = (rlim_t)spec->cpu_seconds + 1;
	}
	/* A per-object process dies with the thread that waits for it; a
	 * worker is started by the transform's own thread (transform.c). */
	l->parent_deathsig = true;
	*lp = l;
	return 0;
fail:
	spawn_vec_free(env.v);
	spawn_vec_free(args.v);
	free(l->path);
	free(l);
	return rc;
}

void transform_launch_free(struct transform_launch *l)
{
	if (l == NULL)
		return;
	free(l->path);
	spawn_vec_free(l->argv);
	spawn_vec_free(l->envp);
	free(l);
}

static void spawn_child_fail(int fd, int stage)
{
	int msg[2] = { stage, errno };
	ssize_t n = write(fd, msg, sizeof(msg));

	(void)n;
	_exit(127);
}

/* After fork: system calls only (spawn.h). */
static void spawn_child(const struct transform_launch *l, int in, int out,
			int errfd, int report, pid_t parent,
			char *const *detach, size_t n_detach)
{
	sigset_t none;
	int i;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			signal(i, SIG_DFL);
	setsid();
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
		spawn_child_fail(report, STAGE_FDS);
	/* Every descriptor but 0, 1, 2 and the report pipe (close-on-exec)
	 * goes: nothing of the daemon's (sockets, the cache, the log). */
	if (report > 3)
		close_range(3, (unsigned)report - 1, 0);
	close_range((unsigned)report + 1, ~0u, 0);
	if (setrlimit(RLIMIT_AS, &l->as) ||
	    setrlimit(RLIMIT_FSIZE, &l->fsize) ||
	    setrlimit(RLIMIT_NPROC, &l->nproc) ||
	    (l->set_cpu && setrlimit(RLIMIT_CPU, &l->cpu)))
		spawn_child_fail(report, STAGE_RLIMIT);
	/* As root, before bwrap copies the namespace: a namespace of its own
	 * without the FUSE mounts (best effort: without it, the sandbox
	 * works the same, and only a worker's unmount is affected). */
	if (l->sandboxed && n_detach > 0 && geteuid() == 0 &&
	    unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
		for (size_t k = 0; k < n_detach; k++)
			umount2(detach[k], MNT_DETACH);
	if (l->switch_user) {
		if (setgroups(0, NULL) || setgid(l->gid) || setuid(l->uid))
			spawn_child_fail(report, STAGE_USER);
	}
	if (getuid() == 0 || geteuid() == 0) {
		errno = EPERM;
		spawn_child_fail(report, STAGE_USER);
	}
	/* After the user switch: a change of credentials clears it. If the
	 * daemon died before this, the parent is no longer it: stop. */
	if (l->parent_deathsig) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
	}
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	execve(l->path, l->argv, l->envp);
	spawn_child_fail(report, STAGE_EXEC);
}

static void spawn_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int transform_launch_start(const struct transform_launch *l,
			   struct transform_proc *p, char *err, size_t cap)
{
	static const char *const stages[] = { "?", "set up descriptors",
					      "set rlimits", "switch user",
					      "exec" };
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int rep[2] = { -1, -1 };
	int msg[2];
	size_t got = 0, n_detach = 0;
	char *detach[SPAWN_DETACH_MAX];
	uint64_t end;
	pid_t pid, parent;
	int rc;

	if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) ||
	    pipe2(perr, O_CLOEXEC) || pipe2(rep, O_CLOEXEC)) {
		rc = -errno;
		snprintf(err, cap, "pipe: %s", strerror(errno));
		goto fail;
	}
	parent = getpid();
	if (l->sandboxed)
		n_detach = spawn_fuse_mounts(detach, SPAWN_DETACH_MAX);
	pid = fork();
	if (pid != 0)
		for (size_t k = 0; k < n_detach; k++)
			free(detach[k]);
	if (pid < 0) {
		rc = -ECHILD;
		snprintf(err, cap, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0)
		spawn_child(l, pin[0], pout[1], perr[1], rep[1], parent, detach,
			    n_detach);
	spawn_close(&pin[0]);
	spawn_close(&pout[1]);
	spawn_close(&perr[1]);
	spawn_close(&rep[1]);
	end = transform_now_ms() + SPAWN_EXEC_WAIT_MS;
	for (;;) {
		struct pollfd pfd = { .fd = rep[0], .events = POLLIN };
		uint64_t now = transform_now_ms();
		ssize_t n;

		if (now >= end)
			break;
		if (poll(&pfd, 1, (int)(end - now)) < 0 && errno != EINTR)
			break;
		n = read(rep[0], (char *)msg + got, sizeof(msg) - got);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(msg))
			break;
	}
	spawn_close(&rep[0]);
	if (got != 0) {
		int st;

		waitpid(pid, &st, 0); /* it has _exit()ed or is about to */
		snprintf(err, cap, "could not %s: %s",
			 msg[0] >= 1 && msg[0] <= 4 && got == sizeof(msg)
				 ? stages[msg[0]]
				 : "start",
			 got == sizeof(msg) ? strerror(msg[1]) : "?");
		rc = -ECHILD;
		goto fail;
	}
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	fcntl(pout[0], F_SETFL, O_NONBLOCK);
	fcntl(perr[0], F_SETFL, O_NONBLOCK);
	p->pid = pid;
	p->in = pin[1];
	p->out = pout[0];
	p->err = perr[0];
	return 0;
fail:
	spawn_close(&pin[0]);
	spawn_close(&pin[1]);
	spawn_close(&pout[0]);
	spawn_close(&pout[1]);
	spawn_close(&perr[0]);
	spawn_close(&perr[1]);
	spawn_close(&rep[0]);
	spawn_close(&rep[1]);
	return rc;
}

void transform_proc_kill(const struct transform_proc *p)
{
	if (p->pid <= 0)
		return;
	kill(-p->pid, SIGKILL);
	kill(p->pid, SIGKILL);
}

/* The CPU time of a reaped process and its reaped descendants, in ns. */
static uint64_t spawn_cpu_ns(const struct rusage *ru)
{
	return ((uint64_t)ru->ru_utime.tv_sec + (uint64_t)ru->ru_stime.tv_sec) *
		       1000000000u +
	       ((uint64_t)ru->ru_utime.tv_usec +
		(uint64_t)ru->ru_stime.tv_usec) *
		       1000u;
}

int transform_proc_reap(struct transform_proc *p, unsigned wait_ms, int *status)
{
	uint64_t end = transform_now_ms() + wait_ms;
	unsigned sleep_us = 1000;

	for (;;) {
		siginfo_t si;
		int r;

		/* Exited, not yet reaped: its pid is still its group's, so
		 * what it left running in the group (sandbox none: a
		 * background child) is killed without hitting a stranger. */
		si.si_pid = 0;
		r = waitid(P_PID, (id_t)p->pid, &si,
			   WEXITED | WNOHANG | WNOWAIT);
		if (r == 0 && si.si_pid == p->pid) {
			struct rusage ru;

			kill(-p->pid, SIGKILL);
			if (wait4(p->pid, status, 0, &ru) != p->pid)
				*status = -1;
			else if (p->cpu_ns)
				__atomic_add_fetch(p->cpu_ns, spawn_cpu_ns(&ru),
						   __ATOMIC_RELAXED);
			p->pid = -1;
			return 0;
		}
		if (r < 0 && errno == ECHILD) {
			/* Reaped by someone else (SIGCHLD ignored?): the
			 * status is lost, which is a failure. */
			*status = -1;
			p->pid = -1;
			return 0;
		}
		if (transform_now_ms() >= end)
			return -ETIMEDOUT;
		usleep(sleep_us);
		if (sleep_us < 20000)
			sleep_us *= 2;
	}
}

void transform_proc_close_fds(struct transform_proc *p)
{
	spawn_close(&p->in);
	spawn_close(&p->out);
	spawn_close(&p->err);
}
