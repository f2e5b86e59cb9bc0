/*
 * nfs_impl: what nfs.c, the nfs backend's operations, shares with
 * nfs_list.c, its listing: the etag's form, and the list operation that
 * nfs.c's backend_ops names. Private to the nfs backend. What the files
 * below them share is in nfs_types.h; their contracts in nfs_conn.h,
 * nfs_fh.h and nfs_call.h.
 */
#ifndef SHARDFS_NFS_IMPL_H
#define SHARDFS_NFS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

/* "mtime_ns:size:ctime_ns" into buf; its length (nfs.c). */
size_t nfsb_format_etag(uint64_t mtime_ns, uint64_t size, uint64_t ctime_ns,
			char *buf, size_t cap);

/* backend_ops.list (nfs_list.c). */
int nfsb_list(struct backend *be, const char *prefix, backend_list_cb cb,
	      void *arg);

#endif
