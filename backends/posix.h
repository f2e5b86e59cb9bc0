/*
 * posix: what the posix backend reports beyond struct backend_ops.
 *
 * The backend itself is backend_posix_ops (backends/backend.h).
 */
#ifndef SHARDFS_POSIX_H
#define SHARDFS_POSIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

/* Symlinks that list() skipped because they resolve outside the source
 * root, counted over the backend's life (each listing adds its own); 0 for
 * NULL or a backend that is not posix. Safe from any thread. */
uint64_t backend_posix_links_refused(const struct backend *be);

/* Etags: "mtime_ns:size:ino:ctime_ns". True if etag[0..len) has the
 * three fields of manifests made before the ctime was part of it
 * ("mtime_ns:size:ino"): read() compares only those three then, and warns
 * once per backend that a file rewritten in place with its mtime put back
 * goes unseen. */
bool backend_posix_etag_legacy(const char *etag, size_t len);

/* The length of the "mtime_ns:size:ino" prefix of a four-field etag (len
 * for anything else), for a manifest listed now that must be compared
 * with a digest pinned from an older listing. */
size_t backend_posix_etag_legacy_len(const char *etag, size_t len);

#endif
