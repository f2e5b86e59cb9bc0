/*
 * notify: see notify.h.
 *
 * The ticker's stat() of the mountpoint goes through this daemon's own
 * FUSE loop. When the mount ends, the loop stops answering before the
 * unmount, so a stat() may be in flight while notify_ticker_stop() runs:
 * the stop waits a little, then lets the thread go (detached, its state
 * left allocated) and the stat() fails once the mount is gone; the thread
 * then sees the stop flag and ends without calling status() again.
 */
#include "mount/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "util/log.h"
#include "util/thread.h"

static void notify_send(const char *what, int rc)
{
	if (rc < 0)
		log_msg(LOG_DEBUG, "sd_notify %s: %s", what, strerror(-rc));
}

void notify_ready(const char *status)
{
	notify_send("READY", sd_notifyf(0, "READY=1\nSTATUS=%s",
					status ? status : "serving"));
}

void notify_status(const char *status)
{
	if (status != NULL)
		notify_send("STATUS", sd_notifyf(0, "STATUS=%s", status));
}

void notify_reloading(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	notify_send("RELOADING",
		    sd_notifyf(0,
			       "RELOADING=1\nMONOTONIC_USEC=%llu\n"
			       "STATUS=reloading the configuration",
			       (unsigned long long)ts.tv_sec * 1000000ULL +
				       (unsigned long long)ts.tv_nsec / 1000));
}

void notify_stopping(const char *status)
{
	notify_send("STOPPING", sd_notifyf(0, "STOPPING=1\nSTATUS=%s",
					   status ? status : "stopping"));
}

struct notify_ticker {
	const char *mountpoint;
	notify_status_fn status;
	void *arg;
	uint64_t period_us;
	uint64_t watchdog_us; /* 0: no watchdog */
	pthread_t thr;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* signalled by notify_ticker_stop() */
	bool stop;	     /* protected by lock */
	int done;	     /* atomic: the thread has ended */
};

static void *notify_ticker_main(void *arg)
{
	struct notify_ticker *t = arg;
	char buf[512];
	struct timespec until;
	struct statx stx;
	bool stop, alive;

	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += (time_t)(t->period_us / 1000000);
		until.tv_nsec += (long)(t->period_us % 1000000) * 1000;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&t->lock);
		while (!t->stop && pthread_cond_timedwait(&t->cond, &t->lock,
							  &until) != ETIMEDOUT)
			;
		stop = t->stop;
		pthread_mutex_unlock(&t->lock);
		if (stop)
			break;
		/* Forced through to this daemon's loop: a plain stat()
		 * of the root comes from the kernel's attribute cache. */
		alive = t->watchdog_us == 0 ||
			statx(AT_FDCWD, t->mountpoint, AT_STATX_FORCE_SYNC,
			      STATX_TYPE, &stx) == 0;
		pthread_mutex_lock(&t->lock);
		stop = t->stop;
		pthread_mutex_unlock(&t->lock);
		if (stop)
			break;
		t->status(t->arg, buf, sizeof(buf));
		notify_status(buf);
		if (t->watchdog_us != 0 && alive)
			notify_send("WATCHDOG", sd_notify(0, "WATCHDOG=1"));
		else if (t->watchdog_us != 0)
			log_msg(LOG_WARNING,
				"watchdog: %s does not answer; not telling "
				"systemd it is alive",
				t->mountpoint);
	}
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

int notify_ticker_start(const char *mountpoint, notify_status_fn status,
			void *arg, struct notify_ticker **out)
{
	struct notify_ticker *t = calloc(1, sizeof(*t));
	uint64_t wd = 0;
	pthread_condattr_t ca;
	int rc;

	if (t == NULL)
		return -ENOMEM;
	t->mountpoint = mountpoint;
	t->status = status;
	t->arg = arg;
	t->period_us = (uint64_t)NOTIFY_STATUS_INTERVAL_S * 1000000;
	if (sd_watchdog_enabled(0, &wd) > 0 && wd > 0) {
		t->watchdog_us = wd;
		if (wd / 2 < t->period_us)
			t->period_us = wd / 2 > 0 ? wd / 2 : 1;
		log_msg(LOG_INFO, "watchdog: pinging systemd every %llu ms",
			(unsigned long long)t->period_us / 1000);
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = thread_start(&t->thr, notify_ticker_main, t);
	if (rc < 0) {
		log_msg(LOG_ERR, "cannot start the status thread: %s",
			strerror(-rc));
		pthread_cond_destroy(&t->cond);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void notify_ticker_stop(struct notify_ticker *t)
{
	int i;

	if (t == NULL)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	/* Up to 2 s for a stat() in flight; see the top of the file. */
	for (i = 0; i < 200 && !__atomic_load_n(&t->done, __ATOMIC_ACQUIRE);
	     i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	if (!__atomic_load_n(&t->done, __ATOMIC_ACQUIRE)) {
		pthread_detach(t->thr);
		return; /* t stays allocated for the thread */
	}
	pthread_join(t->thr, NULL);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
