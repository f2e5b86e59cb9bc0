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
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/log.h"

bool mountpoint_is_fuse(const char *fstype)
{
	return strcmp(fstype, "fuse") == 0 || strcmp(fstype, "fuseblk") == 0 ||
	       strncmp(fstype, "fuse.", 5) == 0;
}

/* A dead FUSE connection answers ENOTCONN (ECONNABORTED after an abort
 * through fusectl on newer kernels). */
static bool errno_is_dead(int e)
{
	return e == ENOTCONN || e == ECONNABORTED;
}

/* realpath(), or for a path realpath() cannot resolve because it is a dead
 * mount, its parent's realpath plus its name. */
static int canonicalise(const char *path, char *out, size_t cap)
{
	char *real = realpath(path, NULL), *d = NULL, *b = NULL, *dreal;
	int rc = 0;

	if (real != NULL) {
		rc = snprintf(out, cap, "%s", real) < (int)cap ? 0
							       : -ENAMETOOLONG;
		free(real);
		return rc;
	}
	if (!errno_is_dead(errno))
		return -errno;
	d = strdup(path);
	b = strdup(path);
	if (d == NULL || b == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	dreal = realpath(dirname(d), NULL);
	if (dreal == NULL) {
		rc = -errno;
		goto out;
	}
	if (snprintf(out, cap, "%s/%s", strcmp(dreal, "/") == 0 ? "" : dreal,
		     basename(b)) >= (int)cap)
		rc = -ENAMETOOLONG;
	free(dreal);
out:
	free(d);
	free(b);
	return rc;
}

/* Undoes mountinfo's octal escapes (\040 for a space, and so on). */
static void unescape(char *s)
{
	char *o = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
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
		unescape(mnt);
		if (strcmp(mnt, mi->path) != 0)
			continue;
		unescape(src);
		mi->mounted = true;
		snprintf(mi->fstype, sizeof(mi->fstype), "%s", type);
		snprintf(mi->source, sizeof(mi->source), "%s", src);
	}
	fclose(f);
	return 0;
}

int mountpoint_inspect(const char *path, struct mountpoint_info *out)
{
	struct mountpoint_info mi;
	struct statx stx;
	int rc;

	memset(&mi, 0, sizeof(mi));
	rc = canonicalise(path, mi.path, sizeof(mi.path));
	if (rc < 0)
		return rc;
	rc = mountinfo_lookup(&mi);
	if (rc < 0)
		return rc;
	/* A live FUSE mount answers this; a dead one fails at once. Forced
	 * through to the daemon: a plain stat() of the root is answered
	 * from the kernel's attribute cache even after the daemon died. */
	if (mi.mounted && mountpoint_is_fuse(mi.fstype) &&
	    statx(AT_FDCWD, mi.path, AT_STATX_FORCE_SYNC, STATX_TYPE, &stx) !=
		    0 &&
	    errno_is_dead(errno))
		mi.dead = true;
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
	int rc;

	if (geteuid() == 0)
		rc = umount2(mi->path, lazy ? MNT_DETACH : 0) == 0 ? 0 : -errno;
	else
		rc = run_fusermount(mi->path, lazy);
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

int mountpoint_prepare(const char *path, bool nonempty)
{
	struct mountpoint_info mi;
	struct stat st;
	int rc;

	rc = mountpoint_inspect(path, &mi);
	if (rc < 0) {
		log_msg(LOG_ERR, "mountpoint %s: %s", path, strerror(-rc));
		return rc;
	}
	if (mi.dead) {
		rc = mountpoint_unmount(&mi, true);
		if (rc < 0)
			return rc;
		log_msg(LOG_WARNING,
			"%s was a dead FUSE mount (%s from %s: Transport "
			"endpoint is not connected), left by a daemon that "
			"crashed or was killed; unmounted it lazily",
			mi.path, mi.fstype, mi.source);
		rc = mountpoint_inspect(path, &mi);
		if (rc < 0) {
			log_msg(LOG_ERR, "mountpoint %s: %s", path,
				strerror(-rc));
			return rc;
		}
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
