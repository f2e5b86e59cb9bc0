/*
 * mountpoint: what is at a mount point before shardfs mounts there, and
 * taking a mount away again (`shardfs mount`, `shardfs unmount`).
 *
 * The mount table is /proc/self/mountinfo; a path is compared in its
 * canonical form, resolved through its parent directory only: a dead FUSE
 * mount (its daemon crashed or was killed) fails every access with
 * ENOTCONN, a hung one (its daemon stopped) blocks every access, and a
 * symlink in the last component is never followed (a user-writable
 * directory must not redirect root's unmount). Whether a mount answers is
 * asked in a child process with a deadline. Unmounting is umount2(2) as root, else
 * fusermount3 -u (the setuid helper that lets a user unmount a FUSE mount
 * of theirs). Everything here runs before the mount's threads start.
 */
#ifndef SHARDFS_MOUNTPOINT_H
#define SHARDFS_MOUNTPOINT_H

#include <stdbool.h>
#include <stddef.h>

/* The newest mount at a path. */
struct mountpoint_info {
	char path[4096];  /* canonical path */
	char fstype[64];  /* "fuse.shardfs", "ext4", ... ("" if not mounted) */
	char source[256]; /* what mountinfo shows as the source */
	bool mounted;	  /* something is mounted exactly at path */
	bool dead;	  /* a FUSE mount whose connection is gone (ENOTCONN) */
	bool hung;	  /* a FUSE mount that did not answer in time */
	bool symlink;	  /* not mounted, and the last component is a symlink */
};

/* How long a mount's daemon has to answer the probe, in seconds. */
#define MOUNTPOINT_PROBE_TIMEOUT_S 10

/* path as an absolute path, resolved without touching the last component
 * (a dead or hung mount there fails or blocks every access; a symlink
 * there is not followed): the parent is resolved, the name kept. ".",
 * ".." and "/" are resolved whole. Malloc'ed; NULL with errno set. */
char *mountpoint_abspath(const char *path);

/* Runs fn(fd, arg) in a child process and collects what it writes to fd
 * for at most timeout_s seconds, so a mount whose daemon never answers
 * cannot keep the caller (the child is killed at the deadline: a FUSE
 * request waits killably). fn returns 0 or a negative errno, carried back
 * in the exit code. Returns 0 and, unless text is NULL, the output in
 * *text (malloc'ed, NUL-terminated) and its length in *len; else the
 * child's negative errno, -EFBIG past max bytes (64 KiB at least), or
 * -ETIMEDOUT. */
int mountpoint_child_run(int (*fn)(int fd, const void *arg), const void *arg,
			 int timeout_s, size_t max, char **text, size_t *len);

/* A statx(AT_STATX_FORCE_SYNC) of path in a child process, so a mount
 * whose daemon never answers cannot keep the caller: 0, the child's
 * negative errno, or -ETIMEDOUT after timeout_s. */
int mountpoint_probe(const char *path, int timeout_s);

/* Looks up path. The last component is never followed nor touched
 * before the bounded probe. Returns 0 and fills *out (path, and the rest
 * when mounted), or a negative errno when path cannot be canonicalised or
 * mountinfo cannot be read (not logged). */
int mountpoint_inspect(const char *path, struct mountpoint_info *out);

/* mountpoint_inspect() for a command given the mount point itself (mount,
 * unmount): logs a failure (but -ENOENT and -ENOTDIR when absent_quiet)
 * and refuses a symbolic link (-ELOOP, logged): a link must not redirect
 * the command. Returns 0 or a negative errno. */
int mountpoint_lookup(const char *path, bool absent_quiet,
		      struct mountpoint_info *mi);

/* Only the mount table part of mountpoint_inspect(): path and what is
 * mounted there; never touches path, never probes. */
int mountpoint_inspect_table(const char *path, struct mountpoint_info *out);

/* True for "fuse.shardfs": only those are recovered automatically. */
bool mountpoint_is_shardfs(const char *fstype);

/* Logs the refusal to touch a dead FUSE mount that is not shardfs, with
 * the command to remove it by hand. */
void mountpoint_refuse_foreign(const struct mountpoint_info *mi);

/* True for a FUSE filesystem type ("fuse", "fuseblk", "fuse.*"). */
bool mountpoint_is_fuse(const char *fstype);

/* Unmounts the mount at info->path: lazily (MNT_DETACH, fusermount3 -uz)
 * when lazy. Returns 0 or a negative errno (-EBUSY: in use; -EIO:
 * fusermount3 failed and printed why), logging the failure with what to
 * do. */
int mountpoint_unmount(const struct mountpoint_info *info, bool lazy);

/* If mi is a dead FUSE mount: a shardfs one is unmounted lazily and
 * logged; one of another type is refused (logged, with the command to
 * remove it by hand: mountpoint_refuse_foreign). Returns 1 if it was
 * dead and is gone, 0 if it is not dead, or a negative errno (logged;
 * -EBUSY for one not ours). */
int mountpoint_recover_dead(const struct mountpoint_info *mi);

/* Before a mount at path: a dead shardfs mount there is unmounted lazily
 * (logged); a dead FUSE mount of another type, a hung mount, a symlink,
 * a live mount there, a non-directory, and (unless nonempty) a
 * directory with entries are refused with a message that says what to
 * do. Returns 0 or a negative errno (logged). */
int mountpoint_prepare(const char *path, bool nonempty);

#endif
