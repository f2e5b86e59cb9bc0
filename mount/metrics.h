/*
 * metrics: the optional Prometheus endpoint of a mount ([metrics] listen).
 *
 * Serves GET (and HEAD) /metrics with the text of .shardfs/stats
 * (fs_stats_write), 404 for every other path and 405 for other methods,
 * on exactly the configured address: one listening socket bound to that
 * IPv4 or IPv6 literal and port, never a wildcard. libmicrohttpd's one
 * internal polling thread serves it; connections are limited in number
 * (METRICS_MAX_CONNECTIONS, METRICS_MAX_PER_IP) and in idle time
 * (METRICS_TIMEOUT_S), so a slow or stalled client cannot hold the
 * endpoint, and nothing it does reaches the FUSE threads: a scrape only
 * reads the counters.
 */
#ifndef SHARDFS_METRICS_H
#define SHARDFS_METRICS_H

#include "fs/fs.h"

#define METRICS_MAX_CONNECTIONS 32
#define METRICS_MAX_PER_IP 8
#define METRICS_TIMEOUT_S 10

struct metrics;

/* Listens on listen ("ADDR:PORT" or "[ADDR6]:PORT", as config.c
 * validates) and serves fs's stats until metrics_stop(). fs must stay
 * valid until then. Returns 0 and sets *out, or a negative errno, logged
 * once with the address (-EADDRINUSE, -EADDRNOTAVAIL, -EACCES, -EINVAL
 * for an address that does not parse, -ENOMEM, -EIO if libmicrohttpd
 * would not start); *out is then untouched. */
int metrics_start(const char *listen, struct fs *fs, struct metrics **out);

/* Stops serving: waits for the request in progress, closes the socket and
 * every connection, frees m. NULL is a no-op. */
void metrics_stop(struct metrics *m);

#endif
