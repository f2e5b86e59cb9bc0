/*
 * cmdline: the command-line handling every subcommand shares (see
 * commands.h): the end of an option switch, the operand count,
 * options that may be repeated, and sizes for people.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "mount/commands.h"

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

bool cmd_option_common(int c, struct overrides *ov, const char *usage, int *rc)
{
	if (c != 'o') {
		*rc = cmd_option_other(c, usage);
		return false;
	}
	if (overrides_parse(ov, optarg) < 0) { /* it said why */
		*rc = EXIT_USAGE;
		return false;
	}
	return true;
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

int cmd_args_push(const char ***v, size_t *n, const char *arg)
{
	const char **grown = realloc(*v, (*n + 1) * sizeof(*grown));

	if (grown == NULL)
		return -ENOMEM;
	grown[(*n)++] = arg;
	*v = grown;
	return 0;
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
