/*
 * mountpoint: what is at a mount point before shardfs mounts there, and
 * taking a mount away again (`shardfs mount`, `shardfs unmount`).
 *
 * The mount table is /proc/self/mountinfo; a path is compared in its
 * canonical form. A dead FUSE mount (its daemon crashed or was killed:
 * every access gives ENOTCONN, and realpath() fails too) is canonicalised
 * through its parent directory. Unmounting is umount2(2) as root, else
 * fusermount3 -u (the setuid helper that lets a user unmount a FUSE mount
 * of theirs). Everything here runs before the mount's threads start.
 */
#ifndef SHARDFS_MOUNTPOINT_H
#define SHARDFS_MOUNTPOINT_H

#include <stdbool.h>

/* The newest mount at a path. */
struct mountpoint_info {
	char path[4096];  /* canonical path */
	char fstype[64];  /* "fuse.shardfs", "ext4", ... ("" if not mounted) */
	char source[256]; /* what mountinfo shows as the source */
	bool mounted;	  /* something is mounted exactly at path */
	bool dead;	  /* a FUSE mount whose connection is gone (ENOTCONN) */
};

/* Looks up path. Returns 0 and fills *out (path, and the rest when
 * mounted), or a negative errno when path cannot be canonicalised or
 * mountinfo cannot be read (not logged). */
int mountpoint_inspect(const char *path, struct mountpoint_info *out);

/* True for a FUSE filesystem type ("fuse", "fuseblk", "fuse.*"). */
bool mountpoint_is_fuse(const char *fstype);

/* Unmounts the mount at info->path: lazily (MNT_DETACH, fusermount3 -uz)
 * when lazy. Returns 0 or a negative errno (-EBUSY: in use; -EIO:
 * fusermount3 failed and printed why), logging the failure with what to
 * do. */
int mountpoint_unmount(const struct mountpoint_info *info, bool lazy);

/* Before a mount at path: a dead FUSE mount there is unmounted lazily
 * (logged); a live mount there, a non-directory, and (unless nonempty) a
 * directory with entries are refused with a message that says what to
 * do. Returns 0 or a negative errno (logged). */
int mountpoint_prepare(const char *path, bool nonempty);

#endif
