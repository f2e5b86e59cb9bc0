/*
 * exit: the process exit codes of every shardfs command (shardfs(8),
 * EXIT STATUS): 0 ok, 1 a runtime failure, 2 a usage or config error.
 */
#ifndef SHARDFS_UTIL_EXIT_H
#define SHARDFS_UTIL_EXIT_H

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

#endif
