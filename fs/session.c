/*
 * fs: the FUSE session: mounting, the request loop, unmounting. See fs.h.
 */
#include "fs/fs.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fs/fs_impl.h"
#include "util/log.h"
#include "util/str.h"
#include "util/thread.h"

/* libfuse's own messages go through our log. */
static void fs_fuse_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char line[1024];
	size_t len;

	if ((int)level > log_threshold)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	len = strlen(line);
	if (len > 0 && line[len - 1] == '\n')
		line[len - 1] = '\0';
	log_write((int)level, "fuse: %s", line);
}

/*
 * The kernel's default per-mount readahead (128 KiB) splits sequential reads
 * into small requests; raise it to the request size through the mount's
 * backing device in sysfs. Found via /proc/self/mountinfo, because a stat()
 * of our own mountpoint would wait on this very daemon.
 */
static void raise_readahead(const char *mountpoint)
{
	char path[PATH_MAX], line[4096], dev[64], mnt[PATH_MAX];
	char *real;
	FILE *f;
	int found = 0;

	real = realpath(mountpoint, NULL);
	f = fopen("/proc/self/mountinfo", "re");
	if (real == NULL || f == NULL) {
		free(real);
		if (f != NULL)
			fclose(f);
		return;
	}
	/* The last matching line is the newest mount, ours. Mount points
	 * with spaces are written with octal escapes and never match: the
	 * readahead then just stays at the default. */
	while (fgets(line, sizeof(line), f) != NULL) {
		char d[64], m[PATH_MAX];

		if (sscanf(line, "%*s %*s %63s %*s %4095s", d, m) == 2 &&
		    strcmp(m, real) == 0) {
			strcpy(dev, d);
			strcpy(mnt, m);
			found = 1;
		}
	}
	fclose(f);
	free(real);
	if (!found)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "we");
	if (f == NULL || fprintf(f, "%u\n", FS_IO_SIZE / 1024) < 0 ||
	    fclose(f) != 0) {
		log_msg(LOG_INFO,
			"cannot raise readahead of %s via %s: %s (reads "
			"stay at the kernel default size)",
			mnt, path, strerror(errno));
		return;
	}
	log_msg(LOG_DEBUG, "readahead of %s raised to %u KiB", mnt,
		FS_IO_SIZE / 1024);
}

/* Finds in /proc/self/mountinfo the device ("major:minor") of the newest
 * mount at mountpoint (want == NULL), or whether a mount of device want is
 * still there, at mountpoint if not NULL (compared as given, never
 * resolved: resolving would touch a mount that may be dead). Returns 1 if found (dev filled), 0 if not, -1 when
 * mountinfo cannot be read. */
static int mountinfo_find(const char *mountpoint, const char *want, char *dev,
			  size_t cap)
{
	char line[4096], d[64], m[PATH_MAX], *real = NULL;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int found = 0;

	if (f == NULL)
		return -1;
	if (want == NULL && (real = realpath(mountpoint, NULL)) == NULL) {
		fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%*s %*s %63s %*s %4095s", d, m) != 2)
			continue;
		str_unescape_octal(m);
		/* With want, the path must match too: once our mount is
		 * gone its anonymous device number is free, and a mount
		 * made meanwhile by another process may have it. */
		if (want != NULL ? strcmp(d, want) == 0 &&
					   (mountpoint == NULL ||
					    strcmp(m, mountpoint) == 0)
				 : strcmp(m, real) == 0) {
			snprintf(dev, cap, "%s", d);
			found = 1;
		}
	}
	fclose(f);
	free(real);
	return found;
}

/* The threads fs_run keeps beside the FUSE loop: one that waits for the
 * mount to answer and then runs hooks->ready, one that runs hooks->reload
 * for each SIGHUP. */
struct fs_watch {
	struct fs *fs;
	const struct fs_hooks *hooks;
	const char *mountpoint;
	pthread_t ready_thr, reload_thr;
	bool ready_started, reload_started;
	bool ready_done;  /* written by the ready thread before it ends */
	sem_t reload_sem; /* posted by SIGHUP and by fs_watch_stop() */
	int stop;	  /* atomic: the reload thread should end */
};

/* sem_post() and atomics are async-signal-safe; the handler does nothing
 * else. A SIGHUP before the reload thread's semaphore exists is kept in
 * fs_hup_pending; whoever sees both posts once. */
static sem_t *fs_hup_sem;
static int fs_hup_pending;

static void fs_hup_post(void)
{
	sem_t *sem = __atomic_load_n(&fs_hup_sem, __ATOMIC_ACQUIRE);

	if (sem != NULL &&
	    __atomic_exchange_n(&fs_hup_pending, 0, __ATOMIC_ACQ_REL) != 0)
		sem_post(sem);
}

static void fs_on_hup(int sig)
{
	(void)sig;
	__atomic_store_n(&fs_hup_pending, 1, __ATOMIC_RELEASE);
	fs_hup_post();
}

void fs_signals_early(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = fs_on_hup;
	/* libfuse's fuse_set_signal_handlers() then leaves SIGHUP alone:
	 * it only replaces SIG_DFL. */
	sigaction(SIGHUP, &sa, NULL);
}

/* A stat() of the mountpoint goes through the kernel to this daemon's
 * loop: when it returns, the mount answers. */
static void *fs_ready_main(void *arg)
{
	struct fs_watch *w = arg;
	struct stat st;

	if (stat(w->mountpoint, &st) != 0) {
		log_msg(LOG_ERR, "mount %s does not answer: %s", w->mountpoint,
			strerror(errno));
		return NULL;
	}
	kernel_start(w->fs, w->mountpoint);
	if (w->hooks->ready != NULL)
		w->hooks->ready(w->fs, w->hooks->arg);
	__atomic_store_n(&w->ready_done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void *fs_reload_main(void *arg)
{
	struct fs_watch *w = arg;
	int rc;

	for (;;) {
		while (sem_wait(&w->reload_sem) != 0)
			;
		if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
			return NULL;
		log_msg(LOG_INFO, "SIGHUP: reloading");
		rc = w->hooks->reload(w->fs, w->hooks->arg);
		if (rc < 0 && rc != -ECANCELED)
			log_msg(LOG_ERR,
				"reload failed (%s); still serving the "
				"previous tree",
				strerror(-rc));
	}
}

/* Starts the watch threads, after any fork (threads do not survive
 * one). SIGHUP reloads when there is a reload hook, and is ignored
 * otherwise (it no longer ends the mount). Returns 0 or a negative errno. */
static int fs_watch_start(struct fs_watch *w)
{
	struct sigaction sa;
	int rc;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = SIG_IGN;
	if (w->hooks->reload != NULL) {
		if (sem_init(&w->reload_sem, 0, 0) != 0)
			return -errno;
		rc = thread_start(&w->reload_thr, fs_reload_main, w);
		if (rc < 0) {
			sem_destroy(&w->reload_sem);
			return rc;
		}
		w->reload_started = true;
		sa.sa_handler = fs_on_hup;
	}
	sigaction(SIGHUP, &sa, NULL);
	if (w->reload_started) {
		__atomic_store_n(&fs_hup_sem, &w->reload_sem, __ATOMIC_RELEASE);
		fs_hup_post(); /* a SIGHUP while the mount was being set up */
	}
	rc = thread_start(&w->ready_thr, fs_ready_main, w);
	if (rc < 0)
		return rc;
	w->ready_started = true;
	return 0;
}

/* After the loop, before the unmount: no more SIGHUPs, no more swaps (a
 * swap's notifications need the session's fd, which the unmount closes),
 * and the reload thread ends once a reload in progress did (its swap then
 * fails with -ECANCELED). */
static void fs_watch_stop_reload(struct fs_watch *w)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGHUP, &sa, NULL);
	fs_swap_stop(w->fs);
	if (w->reload_started) {
		__atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
		sem_post(&w->reload_sem);
		pthread_join(w->reload_thr, NULL);
		__atomic_store_n(&fs_hup_sem, NULL, __ATOMIC_RELEASE);
		sem_destroy(&w->reload_sem);
		w->reload_started = false;
	}
}

/* After the unmount: the ready thread's stat() has ended (the loop
 * answered it, or the connection is gone). Returns whether the ready hook
 * ran. */
static bool fs_watch_stop(struct fs_watch *w)
{
	fs_watch_stop_reload(w);
	if (w->ready_started) {
		pthread_join(w->ready_thr, NULL);
		w->ready_started = false;
	}
	return __atomic_load_n(&w->ready_done, __ATOMIC_ACQUIRE);
}

int fs_run(const struct fs_options *opt, const struct fs_data *data,
	   const struct fs_hooks *hooks)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *loop_cfg = NULL;
	struct fuse_session *se = NULL;
	char *mount_opts = NULL, *fsname = NULL, dev[64] = "";
	struct fs fs;
	static const struct fs_hooks no_hooks;
	struct fs_watch watch = { 0 };
	int rc = -ENOMEM;
	bool stopped = false;

	watch.fs = &fs;
	watch.hooks = hooks != NULL ? hooks : &no_hooks;
	watch.mountpoint = opt->mountpoint;

	fuse_set_log_func(fs_fuse_log);
	if (fs_state_init(&fs, data) < 0)
		goto out;
	fs.page_cache = opt->page_cache;
	fs.xforms = opt->xforms;
	fs.n_xforms = opt->n_xforms;
	fs.libcurl = opt->libcurl;

	if (asprintf(&fsname, "fsname=%s", opt->source) < 0) {
		fsname = NULL;
		goto out;
	}
	if (fuse_opt_add_arg(&args, "shardfs") != 0 ||
	    fuse_opt_add_opt(&mount_opts,
			     "ro,default_permissions,subtype=shardfs,"
			     "max_read=1048576") != 0 ||
	    fuse_opt_add_opt_escaped(&mount_opts, fsname) != 0 ||
	    (opt->allow_other &&
	     fuse_opt_add_opt(&mount_opts, "allow_other") != 0) ||
	    fuse_opt_add_arg(&args, "-o") != 0 ||
	    fuse_opt_add_arg(&args, mount_opts) != 0 ||
	    (opt->debug && fuse_opt_add_arg(&args, "-d") != 0))
		goto out;

	se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), &fs);
	if (se == NULL) {
		log_msg(LOG_ERR, "cannot create the FUSE session");
		rc = -EIO;
		goto out;
	}
	fs.se = se;
	rc = fs_epoch_start(&fs);
	if (rc < 0) {
		log_msg(LOG_ERR, "cannot start the epoch worker: %s",
			strerror(-rc));
		goto out_session;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		rc = -EIO;
		goto out_session;
	}
	if (fuse_session_mount(se, opt->mountpoint) != 0) {
		log_msg(LOG_ERR,
			"cannot mount on %s (see the fuse message "
			"above)",
			opt->mountpoint);
		rc = -EIO;
		goto out_signals;
	}
	raise_readahead(opt->mountpoint);
	/* Our mount's device, to tell an unmount from an aborted
	 * connection when the loop ends (both end it the same way). */
	if (mountinfo_find(opt->mountpoint, NULL, dev, sizeof(dev)) != 1)
		dev[0] = '\0';
	log_msg(LOG_INFO, "serving %s at %s", opt->source, opt->mountpoint);

	/* No fuse_daemonize() here: it forks, and threads (libcurl's, the
	 * cache's) do not survive a fork. A background mount forked before
	 * any of them started (mount/daemon.c). */
	rc = fs_watch_start(&watch);
	if (rc < 0) {
		log_msg(LOG_ERR, "cannot start the mount's threads: %s",
			strerror(-rc));
		goto out_unmount;
	}
	if (opt->single_thread) {
		rc = fuse_session_loop(se);
	} else {
		loop_cfg = fuse_loop_cfg_create();
		if (loop_cfg == NULL) {
			rc = -ENOMEM;
			goto out_unmount;
		}
		fuse_loop_cfg_set_max_threads(
			loop_cfg, opt->max_threads ? opt->max_threads
						   : FS_THREADS_DEFAULT);
		fuse_loop_cfg_set_clone_fd(loop_cfg, 0);
		rc = fuse_session_loop_mt(se, loop_cfg);
		fuse_loop_cfg_destroy(loop_cfg);
	}
	/* A reload in progress finishes first (its swap is refused), so
	 * nothing reports "reloaded" after the stopping hook. That waits
	 * for its manifest to load: bounded by the source's deadlines. */
	fs_watch_stop_reload(&watch);
	/* Before the unmount when the mount served (the ready hook ran);
	 * else after, once the ready thread is joined. */
	if (__atomic_load_n(&watch.ready_done, __ATOMIC_ACQUIRE)) {
		if (watch.hooks->stopping != NULL)
			watch.hooks->stopping(&fs, watch.hooks->arg);
		stopped = true;
	}
	/* The kernel ends the loop with ENODEV, which libfuse reports as
	 * 0, both after an unmount and after the connection was aborted
	 * (echo 1 > /sys/fs/fuse/connections/N/abort): only after an abort
	 * is the mount still there, dead, and that is a failure. */
	if (rc == 0 && dev[0] != '\0' &&
	    mountinfo_find(opt->mountpoint, dev, dev, sizeof(dev)) == 1) {
		log_msg(LOG_ERR,
			"the FUSE connection of %s was aborted; the mount is "
			"dead until unmounted (fusermount3 -u %s)",
			opt->mountpoint, opt->mountpoint);
		rc = -ECONNABORTED;
		goto out_unmount;
	}
	/* A signal ends the loop with its number; that is a clean stop. */
	if (rc > 0)
		rc = 0;
	if (rc < 0)
		log_msg(LOG_ERR, "FUSE loop failed: %s", strerror(-rc));
	else
		log_msg(LOG_INFO, "unmounting %s", opt->mountpoint);
out_unmount:
	fs_watch_stop_reload(&watch);
	/* No push notification starts once the fd may close. */
	kernel_stop(&fs);
	/* Also ends a ready thread's stat() that the loop never answered,
	 * and a pusher's own lookup: closing the session's fd fails the
	 * pending request. */
	fuse_session_unmount(se);
	if (fs_watch_stop(&watch) && !stopped && watch.hooks->stopping != NULL)
		watch.hooks->stopping(&fs, watch.hooks->arg);
	kernel_end(&fs);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
	fs.se = NULL;
out:
	fuse_opt_free_args(&args);
	free(mount_opts);
	free(fsname);
	fs_state_destroy(&fs);
	return rc;
}
