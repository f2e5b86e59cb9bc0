/*
 * nfs: the parts of the nfs:// backend that need no server: its URL and
 * how libnfs' errors are classified.
 *
 * The backend itself is backend_nfs_ops (backends/backend.h, nfs.c); this
 * header is what config validation, the unit tests and nfs.c share. Nothing
 * here links libnfs (nfs_url.c is pure), so the config parser and its fuzz
 * harness can check a URL without it.
 *
 * URL form:
 *
 *   nfs://HOST[:PORT]/PATH[?version=3|4&uid=N&gid=N&nfsport=N&mountport=N
 *                          &connections=N]
 *
 * HOST is a name, an IPv4 literal or a bracketed IPv6 literal. PORT (or
 * nfsport=) is the NFS port, skipping the portmapper (NFSv4 needs none;
 * the default is 2049). PATH is the source directory as the server shows
 * it (for NFSv4 a path in its pseudo filesystem, for NFSv3 the export or a
 * directory the server lets clients mount); %XX escapes are decoded, so a
 * space may be written as %20. version defaults to 4 (libnfs' own default
 * is 3). uid and gid are the AUTH_SYS credentials sent (default: the
 * daemon's). connections is the number of NFS connections the backend
 * keeps (default 8, 1..64). Any other parameter is an error.
 */
#ifndef SHARDFS_NFS_H
#define SHARDFS_NFS_H

#include <stdbool.h>
#include <stddef.h>

#define NFS_URL_HOST_MAX 256
#define NFS_CONNECTIONS_DEFAULT 8
#define NFS_CONNECTIONS_MAX 64

struct nfs_source {
	char host[NFS_URL_HOST_MAX]; /* without IPv6 brackets */
	unsigned nfsport;	     /* 0: the default */
	unsigned mountport;	     /* 0: portmapper (NFSv3 only) */
	int version;		     /* 3 or 4 */
	long uid, gid;		     /* -1: unset */
	unsigned connections;	     /* 1..NFS_CONNECTIONS_MAX */
	char *path;		     /* decoded, starts with '/', no trailing
					'/' except for "/" itself; owned */
};

/* Parses url into *out. Returns 0, -EINVAL (why says what is wrong, a
 * static string, if why is not NULL) or -ENOMEM. On success the caller
 * frees out with nfs_source_free(). */
int nfs_source_parse(const char *url, struct nfs_source *out, const char **why);

/* Frees what nfs_source_parse() allocated; NULL is a no-op. */
void nfs_source_free(struct nfs_source *src);

/* true if url is a well-formed nfs:// source; for object (a manifest),
 * the path must also name a file (not end in '/', no query). */
bool nfs_url_valid(const char *url, bool object);

/* Maps an error a libnfs callback reported (a negative errno, or anything
 * else libnfs returns) to the errno the backend returns: -ENOENT,
 * -ENOTDIR, -EACCES, -ESTALE, -EISDIR, -ENAMETOOLONG, -ENOMEM pass
 * through (EPERM becomes -EACCES); everything else is -EIO. */
int nfs_errno_map(int status);

/* true if a failure with this (mapped or raw) status is worth a retry on a
 * new connection: the connection or the server failed, not the request. */
bool nfs_errno_transient(int status);

/* true if a failure (status, libnfs' message) is the server refusing the
 * request for good (NFS4ERR_WRONGSEC: the export wants another security
 * flavour), which libnfs reports with a status that looks transient. */
bool nfs_error_refused(int status, const char *msg);

#endif
