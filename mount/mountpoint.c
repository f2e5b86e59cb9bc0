/*
 * mountpoint: see mountpoint.h.
 */
#include "mount/mountpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/str.h"

/* How often an unmount that finds the mount busy tries again, 100 ms apart
 * (mountpoint_unmount()). */
#define MOUNTPOINT_BUSY_TRIES 20

bool mountpoint_is_fuse(const char *fstype)
{
	return strcmp(fstype, "fuse") == 0 || strcmp(fstype, "fuseblk") == 0 ||
	       strncmp(fstype, "fuse.", 5) == 0;
}

bool mountpoint_is_shardfs(const char *fstype)
{
	return strcmp(fstype, "fuse.shardfs") == 0;
}

void mountpoint_refuse_foreign(const struct mountpoint_info *mi)
{
	log_msg(LOG_ERR,
		"%s is a dead FUSE mount of another filesystem (%s from %s), "
		"not shardfs: left alone; if it is no longer needed, remove "
		"it with umount -l %s (as its owner: fusermount3 -uz %s)",
		mi->path, mi->fstype, mi->source, mi->path, mi->path);
}

/* A dead FUSE connection answers ENOTCONN (ECONNABORTED after an abort
 * through fusectl on newer kernels). */
static bool errno_is_dead(int e)
{
	return e == ENOTCONN || e == ECONNABORTED;
}

char *mountpoint_abspath(const char *path)
{
	char *copy1 = strdup(path), *copy2 = strdup(path), *dir, *base, *rp;
	char *out = NULL;

	if (copy1 == NULL || copy2 == NULL)
		goto out;
	dir = dirname(copy1);
	base = basename(copy2);
	if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
	    strcmp(base, "/") == 0) {
		out = realpath(path, NULL);
		goto out;
	}
	rp = realpath(dir, NULL);
	if (rp == NULL)
		goto out;
	if (asprintf(&out, "%s%s%s", rp, strcmp(rp, "/") ? "/" : "", base) < 0)
		out = NULL;
	free(rp);
out:
	free(copy1);
	free(copy2);
	return out;
}

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int mountpoint_child_run(int (*fn)(int fd, const void *arg), const void *arg,
			 int timeout_s, size_t max, char **text, size_t *len)
{
	int fds[2], st, rc = 0;
	char *buf = NULL;
	size_t used = 0, cap = 0;
	double deadline;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(fds[0]);
		close(fds[1]);
		return rc;
	}
	if (pid == 0) {
		/* The child: the exit code carries the errno; its end of the
		 * pipe closes when it exits. */
		close(fds[0]);
		rc = fn(fds[1], arg);
		_exit(rc == 0 ? 0 : (-rc & 0xff ? -rc & 0xff : EIO));
	}
	close(fds[1]);
	deadline = now_mono() + timeout_s;
	for (;;) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		double left = deadline - now_mono();
		ssize_t r;

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		r = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (r > 0) {
			if (cap - used < 65536) {
				size_t ncap = cap ? 2 * cap : 65536 + 1;
				char *g;

				if (cap > 0 && cap >= max) {
					rc = -EFBIG;
					break;
				}
				g = realloc(buf, ncap);
				if (g == NULL) {
					rc = -ENOMEM;
					break;
				}
				buf = g;
				cap = ncap;
			}
			r = read(fds[0], buf + used, cap - used - 1);
			if (r == 0)
				break; /* the child is done */
			if (r > 0)
				used += (size_t)r;
		}
		/* r == 0 from poll: look at the deadline again. */
		if (r < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
	}
	close(fds[0]);
	if (rc < 0) {
		/* A FUSE request waits killably: SIGKILL ends the child. It
		 * is reaped if it went soon; else it goes with this process. */
		kill(pid, SIGKILL);
		for (int i = 0; i < 100 && waitpid(pid, &st, WNOHANG) == 0; i++)
			usleep(10000);
		free(buf);
		return rc;
	}
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			free(buf);
			return -errno;
		}
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		free(buf);
		return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
	}
	if (text == NULL) {
		free(buf);
		return 0;
	}
	if (buf == NULL && (buf = malloc(1)) == NULL)
		return -ENOMEM;
	buf[used] = '\0';
	*text = buf;
	if (len != NULL)
		*len = used;
	return 0;
}

/* In the probe's child: a statx() forced through to the daemon. */
static int probe_child(int fd, const void *arg)
{
	struct statx stx;

	(void)fd;
	if (statx(AT_FDCWD, arg, AT_STATX_FORCE_SYNC | AT_NO_AUTOMOUNT,
		  STATX_TYPE, &stx) != 0)
		return -errno;
	return 0;
}

int mountpoint_probe(const char *path, int timeout_s)
{
	return mountpoint_child_run(probe_child, path, timeout_s, 0, NULL,
				    NULL);
}

/* mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - TYPE
 * SOURCE SUPEROPTS". The last line for a path is the mount on top. */
static int mountinfo_lookup(struct mountpoint_info *mi)
{
	char line[8192], mnt[4096], type[64], src[256];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	const char *sep;

	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		sep = strstr(line, " - ");
		if (sep == NULL || sscanf(sep, " - %63s %255s", type, src) != 2)
			continue;
		str_unescape_octal(mnt);
		if (strcmp(mnt, mi->path) != 0)
			continue;
		str_unescape_octal(src);
		mi->mounted = true;
		snprintf(mi->fstype, sizeof(mi->fstype), "%s", type);
		snprintf(mi->source, sizeof(mi->source), "%s", src);
	}
	fclose(f);
	return 0;
}

int mountpoint_inspect_table(const char *path, struct mountpoint_info *out)
{
	char *abs;
	int rc;

	memset(out, 0, sizeof(*out));
	/* Nothing here may touch the mount itself before the probe: a
	 * realpath() or stat() of a hung mount's root waits for its daemon
	 * forever. The parent is resolved, the last component kept. */
	abs = mountpoint_abspath(path);
	if (abs == NULL)
		return errno ? -errno : -ENOMEM;
	rc = snprintf(out->path, sizeof(out->path), "%s", abs) <
			     (int)sizeof(out->path)
		     ? 0
		     : -ENAMETOOLONG;
	free(abs);
	if (rc < 0)
		return rc;
	rc = mountinfo_lookup(out);
	if (rc < 0)
		return rc;
	return 0;
}

int mountpoint_inspect(const char *path, struct mountpoint_info *out)
{
	struct mountpoint_info mi;
	struct stat st;
	int rc;

	rc = mountpoint_inspect_table(path, &mi);
	if (rc < 0)
		return rc;
	if (!mi.mounted) {
		/* Not a mount root: lstat stays in the parent directory. */
		if (lstat(mi.path, &st) != 0)
			return -errno;
		mi.symlink = S_ISLNK(st.st_mode);
	} else if (mountpoint_is_fuse(mi.fstype)) {
		/* Forced through to the daemon (a plain stat() of the root
		 * is answered from the kernel's attribute cache even after
		 * the daemon died), in a child with a deadline. */
		rc = mountpoint_probe(mi.path, MOUNTPOINT_PROBE_TIMEOUT_S);
		mi.dead = errno_is_dead(-rc);
		mi.hung = rc == -ETIMEDOUT;
	}
	*out = mi;
	return 0;
}

/* Runs fusermount3 -u [-z] path and waits for it. */
static int run_fusermount(const char *path, bool lazy)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (lazy)
			execlp("fusermount3", "fusermount3", "-u", "-z", "--",
			       path, (char *)NULL);
		else
			execlp("fusermount3", "fusermount3", "-u", "--", path,
			       (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return -ENOENT;
	return -EIO; /* fusermount3 printed why */
}

int mountpoint_unmount(const struct mountpoint_info *mi, bool lazy)
{
	unsigned tries = 0;
	int rc;

	/* The daemon's own pusher holds a directory of the mount open for
	 * the moment it lists it (fs/kernel.c), so a mount that served
	 * reads just now can be busy for that moment: as root, try again
	 * for up to MOUNTPOINT_BUSY_TRIES x 100 ms before saying busy
	 * (fusermount3 says busy only in its message: -EIO). Each try
	 * first looks again: gone meanwhile is done; anything but a
	 * shardfs mount from the same source there now is left alone. */
	for (;;) {
		if (tries > 0) {
			struct mountpoint_info now;

			if (mountpoint_inspect_table(mi->path, &now) < 0)
				break; /* rc stays -EBUSY */
			if (!now.mounted)
				return 0;
			if (strcmp(now.fstype, mi->fstype) != 0 ||
			    strcmp(now.source, mi->source) != 0)
				break;
		}
		if (geteuid() == 0)
			rc = umount2(mi->path,
				     UMOUNT_NOFOLLOW |
					     (lazy ? MNT_DETACH : 0)) == 0
				     ? 0
				     : -errno;
		else
			rc = run_fusermount(mi->path, lazy);
		if (rc != -EBUSY || ++tries >= MOUNTPOINT_BUSY_TRIES)
			break;
		usleep(100000);
	}
	if (rc == -EBUSY)
		log_msg(LOG_ERR,
			"cannot unmount %s: it is busy (open files or a "
			"working directory there; see fuser -vm %s); "
			"shardfs unmount --lazy %s detaches it now and it "
			"ends when the last user leaves",
			mi->path, mi->path, mi->path);
	else if (rc == -EIO && geteuid() != 0)
		log_msg(LOG_ERR,
			"cannot unmount %s: fusermount3 -u failed (its "
			"message is above); if the mount is busy, shardfs "
			"unmount --lazy %s detaches it",
			mi->path, mi->path);
	else if (rc == -ENOENT && geteuid() != 0)
		log_msg(LOG_ERR,
			"cannot unmount %s: fusermount3 not found (install "
			"the fuse3 package, or unmount as root)",
			mi->path);
	else if (rc < 0)
		log_msg(LOG_ERR, "cannot unmount %s: %s", mi->path,
			strerror(-rc));
	return rc;
}

/* 1 if dir has an entry besides "." and "..", 0 if not, or -errno. */
static int dir_has_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;

	if (d == NULL)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 &&
		    strcmp(e->d_name, "..") != 0) {
			found = 1;
			break;
		}
	}
	closedir(d);
	return found;
}

int mountpoint_recover_dead(const struct mountpoint_info *mi)
{
	int rc;

	if (!mi->dead)
		return 0;
	if (!mountpoint_is_shardfs(mi->fstype)) {
		mountpoint_refuse_foreign(mi);
		return -EBUSY;
	}
	rc = mountpoint_unmount(mi, true);
	if (rc < 0)
		return rc;
	log_msg(LOG_WARNING,
		"%s was a dead FUSE mount (%s from %s: Transport endpoint is "
		"not connected), left by a daemon that crashed or was killed; "
		"unmounted it lazily",
		mi->path, mi->fstype, mi->source);
	return 1;
}

int mountpoint_lookup(const char *path, bool absent_quiet,
		      struct mountpoint_info *mi)
{
	int rc = mountpoint_inspect(path, mi);

	if (rc < 0) {
		if (!absent_quiet || (rc != -ENOENT && rc != -ENOTDIR))
			log_msg(LOG_ERR, "mountpoint %s: %s", path,
				strerror(-rc));
		return rc;
	}
	if (mi->symlink) {
		log_msg(LOG_ERR,
			"mountpoint %s is a symbolic link: not followed (a "
			"link must not redirect a mount or an unmount); give "
			"the directory itself (realpath %s)",
			mi->path, path);
		return -ELOOP;
	}
	return 0;
}

int mountpoint_prepare(const char *path, bool nonempty)
{
	struct mountpoint_info mi;
	struct stat st;
	int rc;

	rc = mountpoint_lookup(path, false, &mi);
	if (rc < 0)
		return rc;
	rc = mountpoint_recover_dead(&mi);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		rc = mountpoint_lookup(path, false, &mi);
		if (rc < 0)
			return rc;
	}
	if (mi.hung) {
		log_msg(LOG_ERR,
			"%s is already a mount point (%s from %s) and does "
			"not answer (daemon hung?); shardfs unmount --lazy %s "
			"detaches it",
			mi.path, mi.fstype, mi.source, path);
		return -EBUSY;
	}
	if (mi.mounted) {
		log_msg(LOG_ERR,
			"%s is already a mount point (%s from %s); unmount "
			"it first: shardfs unmount %s (or umount %s)",
			mi.path, mi.fstype, mi.source, path, path);
		return -EBUSY;
	}
	if (stat(mi.path, &st) != 0) {
		rc = -errno;
		log_msg(LOG_ERR, "mountpoint %s: %s", path, strerror(-rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		log_msg(LOG_ERR, "mountpoint %s: not a directory", path);
		return -ENOTDIR;
	}
	if (nonempty)
		return 0;
	rc = dir_has_entries(mi.path);
	if (rc < 0) {
		log_msg(LOG_ERR, "mountpoint %s: %s", path, strerror(-rc));
		return rc;
	}
	if (rc > 0) {
		log_msg(LOG_ERR,
			"mountpoint %s is not empty: the mount would hide "
			"its files; use an empty directory, or pass -o "
			"nonempty (or set [mount] nonempty = true) to mount "
			"over them",
			path);
		return -ENOTEMPTY;
	}
	return 0;
}
