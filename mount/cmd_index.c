/*
 * cmd_index: `shardfs index CONFIG --output FILE`, the record index a
 * record view pins ([records] index, index_sha256), built once by reading
 * every record object of CONFIG's dataset (mount/rbuild.h).
 *
 * -o gives config overrides, as for mount, plan and warm. It named the
 * output file here once, so that a second -o KEY=VALUE silently replaced
 * it: an -o without '=' is now a usage error naming --output.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount/commands.h"
#include "mount/dataset.h"
#include "mount/rbuild.h"
#include "util/log.h"

const char usage_index[] =
	"usage: shardfs index CONFIG --output FILE [-j N] [-q] "
	"[-o section.key=value,...]\n"
	"\n"
	"Reads every record object of CONFIG's dataset once (objects whose "
	"names end in\n"
	"[records] format's suffix), checks every frame (CRCs, lengths, "
	"truncated tails,\n"
	"gzip streams, tar headers) and writes the record index to FILE. "
	"Prints its\n"
	"sha256: pin both in the config ([records] index = FILE, index_sha256 "
	"= DIGEST)\n"
	"so that every node plans the same record views without reading the "
	"data.\n"
	"A malformed object fails the command, naming the object, the offset "
	"and what\n"
	"was wrong; FILE is then not written.\n"
	"\n"
	"  --output FILE       where to write the index (\"-\": standard "
	"output)\n"
	"  -j, --jobs N        objects read at once (default 8)\n"
	"  -q, --quiet         no progress line\n"
	"  -o OPTS             section.key=value overrides of config keys, as "
	"for mount\n";

static int index_write(FILE *f, const void *ri)
{
	return rindex_write(ri, f);
}

int cmd_index(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'O' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		/* The older spelling of -o KEY=VALUE here. */
		{ "set", required_argument, NULL, 'o' },
		CMD_LONGOPTS_END,
	};
	struct cmd_config cc = { 0 };
	struct rbuild_options bo = { .progress = isatty(STDERR_FILENO) };
	struct dataset *ds = NULL;
	struct rindex *ri = NULL;
	const char *output = NULL;
	char *end;
	unsigned long j;
	int c, rc = EXIT_USAGE;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:j:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'O':
			output = optarg;
			break;
		case 'o':
			if (strchr(optarg, '=') == NULL) {
				fprintf(stderr,
					"shardfs: index: -o %s: -o gives "
					"config "
					"overrides (section.key=value), as for "
					"mount, plan and warm; name the output "
					"file with --output %s\n",
					optarg, optarg);
				rc = EXIT_USAGE;
				goto out;
			}
			if (!cmd_config_option(c, &cc, usage_index, &rc))
				goto out;
			break;
		case 'j':
			errno = 0;
			j = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || j < 1 ||
			    j > 256) {
				rc = cmd_usage_error(usage_index,
						     "index: -j %s: expected "
						     "1 to 256",
						     optarg);
				goto out;
			}
			bo.threads = (unsigned)j;
			break;
		case 'q':
			bo.progress = false;
			break;
		default:
			rc = cmd_option_other(c, usage_index);
			goto out;
		}
	}
	rc = cmd_operands(argc, 1, usage_index, "index", "CONFIG");
	if (rc != 0)
		goto out;
	if (output == NULL) {
		rc = cmd_usage_error(usage_index, "index: %s missing",
				     "--output FILE");
		goto out;
	}
	rc = cmd_load_config(argv[optind], &cc.ov, &cc.cfg);
	if (rc != 0)
		goto out;
	rc = EXIT_RUNTIME;
	if (dataset_load_manifest(cc.cfg, true, &ds) < 0)
		goto out;
	if (rbuild_run(ds->backend, ds->manifest, cc.cfg->records.format, &bo,
		       &ri) < 0)
		goto out;
	if (strcmp(output, "-") == 0)
		c = rindex_write(ri, stdout) < 0 || fflush(stdout) != 0 ? -EIO
									: 0;
	else
		c = cmd_write_file(output, index_write, ri);
	if (c < 0)
		goto out;
	fprintf(strcmp(output, "-") == 0 ? stderr : stdout,
		"%llu records (%s) in %zu objects, %llu objects skipped for "
		"their suffix\nsha256 %s\n",
		(unsigned long long)ri->n_records,
		rec_format_name(cc.cfg->records.format), ri->n_objects,
		(unsigned long long)ri->skipped_objects, ri->digest);
	rc = EXIT_OK;
out:
	rindex_free(ri);
	dataset_free(ds);
	cmd_config_free(&cc);
	return rc;
}
