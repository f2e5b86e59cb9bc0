/*
 * notify: telling the service manager how the mount is doing, through
 * libsystemd's sd_notify(3) (a no-op unless NOTIFY_SOCKET is set, i.e.
 * outside a Type=notify unit).
 *
 *   READY=1 + STATUS=   the mount answers (after a reload too)
 *   STATUS=             refreshed by a ticker thread every
 *                       NOTIFY_STATUS_INTERVAL_S
 *   RELOADING=1 + MONOTONIC_USEC=   a reload starts (systemd 253+ uses
 *                       the time to tell this reload from an earlier one)
 *   STOPPING=1          the mount is ending
 *   WATCHDOG=1          when the unit sets WatchdogSec=: sent by the
 *                       ticker at half that period, only after a stat()
 *                       of the mountpoint went through the kernel and
 *                       back, so a wedged mount gets restarted
 */
#ifndef SHARDFS_NOTIFY_H
#define SHARDFS_NOTIFY_H

#include <stddef.h>

#define NOTIFY_STATUS_INTERVAL_S 15

/* Each returns nothing: a manager that cannot be told is not an error of
 * the mount (a failure is logged at debug level). status may be NULL. */
void notify_ready(const char *status);
void notify_status(const char *status);
void notify_reloading(void);
void notify_stopping(const char *status);

/* Writes the current STATUS= text into buf (always terminated). */
typedef void (*notify_status_fn)(void *arg, char *buf, size_t cap);

struct notify_ticker;

/* Starts the ticker thread (signals blocked): every
 * NOTIFY_STATUS_INTERVAL_S, or half the watchdog period if shorter, it
 * sends STATUS= from status(arg) and, with a watchdog, WATCHDOG=1 once a
 * stat() of mountpoint (borrowed) answered. Returns 0 and sets *out, or a
 * negative errno (logged). */
int notify_ticker_start(const char *mountpoint, notify_status_fn status,
			void *arg, struct notify_ticker **out);

/* Stops the ticker; after it returns, status() is not called again.
 * Safe while the mount no longer answers (a stat() in flight is left to
 * fail once the mount is gone). NULL is a no-op. */
void notify_ticker_stop(struct notify_ticker *t);

#endif
