/*
 * index_check: checks an LMDB 0.9 data file (the cache's index.mdb)
 * against its own structure, with pread() only, so a damaged or truncated
 * file gives a reason instead of a SIGBUS or SIGSEGV inside LMDB.
 *
 * The format checked is LMDB's on-disk format for 64-bit builds (data
 * version 1, as Debian 12's liblmdb0 0.9.24 writes it): two meta pages
 * (page 0 and 1), each naming the last page used, its transaction id and
 * the roots of the free-page tree and of the main tree; the main tree's
 * leaves name the roots of the named databases.
 *
 * Neither function changes the file. Both are pure functions of its bytes,
 * so they may run while other processes write it; the tree walk must then
 * run inside a read transaction of txnid (which keeps the pages it reaches
 * from being reused meanwhile).
 */
#ifndef SHARDFS_INDEX_CHECK_H
#define SHARDFS_INDEX_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* Checks both meta pages (flags, magic, version, page size) and that the
 * newest one's last page, roots and the file's size agree. An empty file
 * is good (LMDB initialises it). Returns 0 (good), 1 (bad: why gets a
 * sentence), or a negative errno from reading fd. */
int index_check_meta(int fd, char *why, size_t why_len);

/* Walks every branch and leaf page reachable from the meta page of
 * transaction txnid (the free-page tree, the main tree and every named
 * database), checking each page's number, kind, bounds, node offsets and
 * child page numbers, and that no page is reached twice. Overflow pages
 * are range-checked, not read. Returns 0, 1 (bad: why), -EAGAIN if the
 * meta page of txnid was overwritten meanwhile (retry in a newer
 * transaction), or a negative errno. */
int index_check_tree(int fd, uint64_t txnid, char *why, size_t why_len);

#endif
