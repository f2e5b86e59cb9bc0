/*
 * daemon: see daemon.h. The pipe carries one byte, 'S', from the child
 * once it serves; its end of file without that byte means the child ended.
 */
#include "mount/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/exit.h"
#include "util/log.h"

/* The child's end of the pipe; -1 in a process that did not fork, and
 * after daemon_serving(). */
static int daemon_pipe = -1;

/* The parent: waits for 'S', the end of the pipe, or the deadline. */
static int daemon_wait(pid_t child, int fd)
{
	struct timespec start, now;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int status, left_ms, n;
	char c;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left_ms = DAEMON_SERVE_WAIT_S * 1000 -
			  (int)((now.tv_sec - start.tv_sec) * 1000 +
				(now.tv_nsec - start.tv_nsec) / 1000000);
		if (left_ms <= 0) {
			log_msg(LOG_ERR,
				"the mount did not serve within %d s; "
				"stopping it (pid %d). Pin a manifest "
				"([source] manifest) or mount with -f if "
				"loading takes longer",
				DAEMON_SERVE_WAIT_S, (int)child);
			kill(child, SIGTERM);
			return EXIT_RUNTIME;
		}
		n = poll(&p, 1, left_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_msg(LOG_ERR, "waiting for the mount: %s",
				strerror(errno));
			return EXIT_RUNTIME;
		}
		if (n == 0)
			continue;
		n = (int)read(fd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 1 && c == 'S')
			return EXIT_OK;
		break; /* end of file: the child is gone */
	}
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return EXIT_RUNTIME;
	if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		log_msg(LOG_ERR, "the mount's process ended by signal %d",
			WTERMSIG(status));
	return EXIT_RUNTIME;
}

/* Closes every descriptor above stderr but keep1 and keep2 (-1: none):
 * an inherited pipe (`shardfs mount 3>&1 | cat`) would keep the caller
 * waiting for as long as the daemon runs. stdio is let go once serving. */
static void daemon_close_inherited(int keep1, int keep2)
{
	int lo = keep1 < keep2 ? keep1 : keep2;
	int hi = keep1 < keep2 ? keep2 : keep1;
	unsigned from = STDERR_FILENO + 1;

	if (lo > STDERR_FILENO) {
		if ((unsigned)lo > from)
			close_range(from, (unsigned)lo - 1, 0);
		from = (unsigned)lo + 1;
	}
	if (hi > STDERR_FILENO && hi != lo) {
		if ((unsigned)hi > from)
			close_range(from, (unsigned)hi - 1, 0);
		from = (unsigned)hi + 1;
	}
	close_range(from, ~0U, 0);
}

int daemon_fork(void)
{
	int fds[2], rc;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0) {
		log_msg(LOG_ERR, "cannot start the background mount: %s",
			strerror(errno));
		return EXIT_RUNTIME;
	}
	/* Lines written before the fork must not be written twice. */
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		log_msg(LOG_ERR, "cannot start the background mount: %s",
			strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return EXIT_RUNTIME;
	}
	if (pid > 0) {
		close(fds[1]);
		rc = daemon_wait(pid, fds[0]);
		close(fds[0]);
		return rc;
	}
	close(fds[0]);
	daemon_pipe = fds[1];
	daemon_close_inherited(daemon_pipe, log_file_fileno());
	/* Its own session: no terminal's SIGHUP or SIGINT reaches it. A
	 * reader of the caller's stderr that went away (`| head`) must
	 * not kill it with SIGPIPE before it lets go of that stderr. */
	setsid();
	signal(SIGPIPE, SIG_IGN);
	return -1;
}

void daemon_serving(bool keep_stderr)
{
	int fd;

	if (daemon_pipe < 0)
		return;
	/* The caller switched the sink first, so no line goes to /dev/null
	 * in between. */
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (!keep_stderr)
			dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	if (chdir("/") != 0)
		(void)0; /* only keeps a directory busy */
	/* The parent may be gone (killed); the byte is then lost. */
	if (write(daemon_pipe, "S", 1) < 0)
		(void)0;
	close(daemon_pipe);
	daemon_pipe = -1;
}
