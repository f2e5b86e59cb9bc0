/*
 * cmd_unmount: `shardfs unmount [--lazy] [--stale-only] CONFIG|MOUNTPOINT`.
 *
 * Unmounts a shardfs mount: the daemon sees its FUSE connection end, and
 * exits 0. Only a fuse.shardfs mount is touched, so a typo never unmounts
 * /home, and a symlink as the last component is refused, never followed
 * (root's epilog walking a user-writable directory). A mount that does
 * not answer in time (its daemon hung or stopped) is only detached with
 * --lazy. A path that is not mounted is not an error,
 * so the command can run unconditionally (ExecStartPre, a Slurm epilog, a
 * Kubernetes preStop hook). --stale-only unmounts only a dead mount, the
 * one a crashed or killed daemon leaves (ENOTCONN), and leaves a serving
 * mount alone: the recovery step before starting a daemon.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "mount/commands.h"
#include "mount/config.h"
#include "mount/mountpoint.h"
#include "util/log.h"

const char usage_unmount[] =
	"usage: shardfs unmount [--lazy] [--stale-only] CONFIG|MOUNTPOINT\n"
	"\n"
	"Unmounts the shardfs mount at MOUNTPOINT (or at CONFIG's [mount] "
	"path); its\n"
	"daemon then exits. A path that is not mounted is left alone (exit "
	"0).\n"
	"\n"
	"options:\n"
	"  -l, --lazy         detach now even if busy (open files); the "
	"mount ends\n"
	"                     when its last user leaves\n"
	"  --stale-only       only unmount a dead mount (a killed daemon's, "
	"ENOTCONN),\n"
	"                     lazily; leave a serving mount alone (for "
	"ExecStartPre)\n"
	"\n"
	"A mount that does not answer within 10 s (daemon hung) is refused "
	"(exit 1)\n"
	"unless --lazy; --stale-only leaves it (exit 1). A symbolic link is "
	"refused.\n";

/* CONFIG (a regular file) or MOUNTPOINT. A path listed as a mount point
 * is a MOUNTPOINT without a stat(): that would ask its daemon, which may
 * be hung. Otherwise lstat() stays in the parent directory; a symlink is
 * refused rather than followed. */
static int unmount_target(const char *arg, struct config **cfg,
			  const char **path)
{
	struct overrides none = { 0 };
	struct mountpoint_info mi;
	struct stat st;
	int rc;

	rc = mountpoint_inspect_table(arg, &mi);
	if (rc == 0 && mi.mounted) {
		*path = arg;
		return 0;
	}
	if (lstat(arg, &st) != 0 || !S_ISREG(st.st_mode)) {
		*path = arg;
		return 0;
	}
	rc = cmd_load_config(arg, &none, cfg);
	if (rc != 0)
		return rc;
	if ((*cfg)->mount.path == NULL)
		return cmd_usage_error(usage_unmount,
				       "unmount: %s has no [mount] path", arg);
	*path = (*cfg)->mount.path;
	return 0;
}

int cmd_unmount(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "lazy", no_argument, NULL, 'l' },
		{ "stale-only", no_argument, NULL, 'S' },
		CMD_LONGOPTS_END,
	};
	struct mountpoint_info mi;
	struct config *cfg = NULL;
	const char *path = NULL;
	bool lazy = false, stale_only = false;
	int c, rc = EXIT_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "lh", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			lazy = true;
			break;
		case 'S':
			stale_only = true;
			break;
		default:
			return cmd_option_other(c, usage_unmount);
		}
	}
	if (cmd_operands(argc, 1, usage_unmount, "unmount",
			 "CONFIG or MOUNTPOINT"))
		return EXIT_USAGE;
	rc = unmount_target(argv[optind], &cfg, &path);
	if (rc != 0)
		goto out;
	rc = EXIT_RUNTIME;
	c = mountpoint_lookup(path, true, &mi);
	if (c == -ENOENT || c == -ENOTDIR) {
		log_msg(LOG_NOTICE, "%s does not exist: not mounted", path);
		rc = EXIT_OK;
		goto out;
	}
	if (c < 0)
		goto out; /* logged */
	if (!mi.mounted) {
		log_msg(LOG_NOTICE, "%s is not mounted; nothing to do", path);
		rc = EXIT_OK;
		goto out;
	}
	c = mountpoint_recover_dead(&mi);
	if (c != 0) {
		rc = c == 1 ? EXIT_OK : EXIT_RUNTIME;
		goto out;
	}
	if (mi.hung &&
	    (stale_only || !lazy || !mountpoint_is_shardfs(mi.fstype))) {
		log_msg(LOG_ERR,
			"%s does not answer within %d s (%s from %s; daemon "
			"hung, e.g. stopped?)%s",
			mi.path, MOUNTPOINT_PROBE_TIMEOUT_S, mi.fstype,
			mi.source,
			stale_only ? ": not stale, left alone; use shardfs "
				     "unmount --lazy to detach it"
			: mountpoint_is_shardfs(mi.fstype)
				? "; use --lazy to detach it"
				: "; not a shardfs mount, left alone");
		goto out;
	}
	if (stale_only) {
		log_msg(LOG_INFO, "%s is mounted and answers; left alone",
			mi.path);
		rc = EXIT_OK;
		goto out;
	}
	if (!mountpoint_is_shardfs(mi.fstype)) {
		log_msg(LOG_ERR,
			"%s is not a shardfs mount (%s from %s); use umount "
			"for it",
			mi.path, mi.fstype, mi.source);
		goto out;
	}
	if (mountpoint_unmount(&mi, lazy) < 0)
		goto out;
	log_msg(LOG_INFO, "unmounted %s%s", mi.path, lazy ? " (lazily)" : "");
	rc = EXIT_OK;
out:
	config_free(cfg);
	return rc;
}
