/*
 * cmdline: the command-line handling every subcommand shares (see
 * commands.h): the end of an option switch, the operand count, what a
 * config command holds (its -o overrides, --rank arguments and config)
 * and the ranks --rank selects, sizes for people, files written whole,
 * loading a config with its -o overrides and usage errors.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount/commands.h"
#include "mount/config.h"
#include "util/log.h"
#include "util/ranks.h"

int cmd_option_other(int c, const char *usage)
{
	if (c == 'h') {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	/* getopt has said what was wrong. */
	fputs(usage, stderr);
	return EXIT_USAGE;
}

/* Appends arg (borrowed) to the array *v of *n, for an option that may
 * be repeated. Returns 0 or -ENOMEM (then *v and *n are unchanged). */
static int cmd_args_push(const char ***v, size_t *n, const char *arg)
{
	const char **grown = realloc(*v, (*n + 1) * sizeof(*grown));

	if (grown == NULL)
		return -ENOMEM;
	grown[(*n)++] = arg;
	*v = grown;
	return 0;
}

bool cmd_config_option(int c, struct cmd_config *cc, const char *usage, int *rc)
{
	switch (c) {
	case 'r':
		if (cmd_args_push(&cc->rank_args, &cc->n_rank_args, optarg) <
		    0) {
			*rc = EXIT_RUNTIME;
			return false;
		}
		return true;
	case 'o':
		if (overrides_parse(&cc->ov, optarg) < 0) { /* it said why */
			*rc = EXIT_USAGE;
			return false;
		}
		return true;
	default:
		*rc = cmd_option_other(c, usage);
		return false;
	}
}

void cmd_config_free(struct cmd_config *cc)
{
	free(cc->rank_args);
	config_free(cc->cfg);
	overrides_free(&cc->ov);
	memset(cc, 0, sizeof(*cc));
}

int cmd_operands(int argc, int want, const char *usage, const char *cmd,
		 const char *what)
{
	int n = argc - optind;

	if (n == want)
		return 0;
	fprintf(stderr, "shardfs: %s: ", cmd);
	if (n < want)
		fprintf(stderr, "%s missing\n%s", what, usage);
	else
		fprintf(stderr, "too many arguments\n%s", usage);
	return EXIT_USAGE;
}

void cmd_human_bytes(char *buf, size_t cap, double b)
{
	static const char *const unit[] = { "B",   "KiB", "MiB",
					    "GiB", "TiB", "PiB" };
	int u = 0;

	while (b >= 1024 && u < 5) {
		b /= 1024;
		u++;
	}
	snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

int cmd_write_file(const char *path, int (*write)(FILE *f, const void *obj),
		   const void *obj)
{
	char *tmp = NULL;
	FILE *f;
	int rc;

	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0)
		return -ENOMEM;
	f = fopen(tmp, "we");
	if (f == NULL) {
		rc = -errno;
		log_msg(LOG_ERR, "cannot write %s: %s", tmp, strerror(-rc));
		free(tmp);
		return rc;
	}
	rc = write(f, obj);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		rc = rc ? rc : -errno;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc < 0) {
		log_msg(LOG_ERR, "cannot write %s: %s", path, strerror(-rc));
		unlink(tmp);
	}
	free(tmp);
	return rc;
}

/* Loads CONFIG with the overrides; prints the error and returns the exit
 * code on failure, or 0. */
int cmd_load_config(const char *path, const struct overrides *o,
		    struct config **cfg)
{
	char err[1024];
	int rc = config_load(path, o->v, o->n, cfg, err, sizeof(err));

	if (rc < 0) {
		fprintf(stderr, "shardfs: %s\n", err);
		return EXIT_USAGE;
	}
	return 0;
}

/* One --rank argument of subcommand cmd: its ranks, each below world.
 * Returns 0 and sets *out (free() it) and *n_out; or prints
 * "shardfs: CMD: --rank ARG: reason" and returns -EINVAL or -ERANGE; or
 * -ENOMEM. */
static int cmd_rank_arg(const char *cmd, const char *arg, uint64_t world,
			struct ranks_range **out, size_t *n_out)
{
	char why[256];
	size_t n = 0;
	int rc = ranks_parse(arg, out, &n, why, sizeof(why));

	if (rc == 0) {
		rc = ranks_check_world(*out, n, world, why, sizeof(why));
		if (rc < 0) {
			free(*out);
			*out = NULL;
		}
	}
	if (rc < 0) {
		if (rc != -ENOMEM)
			fprintf(stderr, "shardfs: %s: --rank %s: %s\n", cmd,
				arg, why);
		return rc;
	}
	*n_out = n;
	return 0;
}

int cmd_config_ranks(const char *cmd, const struct cmd_config *cc, bool **out)
{
	const struct config *cfg = cc->cfg;
	uint64_t world = cfg->shard.spec.world_size, r;
	bool *sel = calloc((size_t)world, sizeof(*sel));
	size_t i, k, n = cc->n_rank_args;
	int rc;

	if (sel == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct ranks_range *rr = NULL;
		size_t nr = 0;

		rc = cmd_rank_arg(cmd, cc->rank_args[i], world, &rr, &nr);
		if (rc < 0) {
			free(sel);
			return rc;
		}
		for (k = 0; k < nr; k++)
			for (r = rr[k].lo; r <= rr[k].hi; r++)
				sel[r] = true;
		free(rr);
	}
	if (n == 0)
		for (r = 0; r < world; r++)
			sel[r] = config_rank_selected(cfg, r);
	*out = sel;
	return 0;
}

int cmd_config_transform(const char *cmd, const struct cmd_config *cc,
			 const char *path, const char *name)
{
	size_t i;

	for (i = 0; i < cc->cfg->n_transforms; i++)
		if (strcmp(cc->cfg->transforms[i].name, name) == 0)
			return 0;
	fprintf(stderr,
		"shardfs: %s: --transform %s: %s has no [transform %s]\n", cmd,
		name, path, name);
	return -ENOENT;
}

int cmd_usage_error(const char *usage, const char *fmt, const char *arg)
{
	fprintf(stderr, "shardfs: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	return EXIT_USAGE;
}
