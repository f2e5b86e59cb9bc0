/*
 * posix: what the posix backend reports beyond struct backend_ops.
 *
 * The backend itself is backend_posix_ops (backends/backend.h).
 */
#ifndef SHARDFS_POSIX_H
#define SHARDFS_POSIX_H

#include <stdint.h>

#include "backends/backend.h"

/* Symlinks that list() skipped because they resolve outside the source
 * root, counted over the backend's life (each listing adds its own); 0 for
 * NULL or a backend that is not posix. Safe from any thread. */
uint64_t backend_posix_links_refused(const struct backend *be);

#endif
