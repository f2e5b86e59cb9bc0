/*
 * daemon: a background mount (`shardfs mount` without -f, and mount(8)).
 *
 * The process forks before it starts any thread (threads do not survive a
 * fork, and libcurl, LMDB and the fetch engine start some), so the child
 * does all the work: loading the manifest, opening the cache, mounting.
 * The parent waits on a pipe until the child says it serves, or ends, and
 * then exits with 0, or with the child's status; meanwhile the child writes
 * its errors to the caller's stderr, so a failing mount says why where it
 * was started. Once it serves, the child lets go of the caller's stdin,
 * stdout and stderr (pointing them at /dev/null), so `ssh node shardfs
 * mount ...` and `shardfs mount ... | cat` return, and logs where
 * mount/logtarget.h decided.
 */
#ifndef SHARDFS_DAEMON_H
#define SHARDFS_DAEMON_H

#include <stdbool.h>

/* How long the parent waits for the child to serve before it gives up,
 * stops the child and fails: a listing of millions of keys takes minutes;
 * pin a manifest ([source] manifest) or use -f for longer ones. */
#define DAEMON_SERVE_WAIT_S 300

/* Forks. In the parent, waits as described above and returns the exit
 * code for the caller to return (0 serving, else the child's non-zero
 * status, or 1). In the child (now a session leader), returns -1; the
 * child must call daemon_serving() once it serves, or just exit on
 * failure. Returns 1 (in the only process) if the fork failed, logged. */
int daemon_fork(void);

/* In a forked child, once the mount serves and its log went to its target
 * (logtarget_switch()): points stdin, stdout and, unless keep_stderr,
 * stderr at /dev/null, moves to "/" (so the daemon keeps no directory
 * busy) and tells the parent. Does nothing in a process that did not
 * fork (-f). Call once, from any thread. */
void daemon_serving(bool keep_stderr);

#endif
