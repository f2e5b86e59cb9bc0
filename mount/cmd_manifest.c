/*
 * cmd_manifest: `shardfs manifest URL [-o FILE]` (docs/DESIGN.md §7):
 * lists a source through its backend and writes the canonical manifest,
 * whole or not at all, with a summary (objects, bytes, skipped keys,
 * sha256) to pin in configs.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "mount/commands.h"
#include "mount/config.h"
#include "mount/dataset.h"
#include "plan/manifest.h"

const char usage_manifest[] =
	"usage: shardfs manifest URL [-o FILE] [S3/GCS options]\n"
	"\n"
	"Lists every object under URL (an absolute directory path, "
	"s3://bucket/prefix/,\n"
	"gs://bucket/prefix/ or nfs://server[:port]/path) and writes the "
	"canonical\n"
	"manifest to FILE (default: standard output). Prints the object "
	"count, bytes,\n"
	"skipped keys and the sha256 digest to pin in configs.\n"
	"\n"
	"S3/GCS options (as [source] in a config):\n"
	"  --endpoint URL        S3-compatible endpoint, e.g. "
	"http://127.0.0.1:9000\n"
	"                        (default: $AWS_ENDPOINT_URL, else AWS);\n"
	"                        for gs://, the JSON API endpoint (default:\n"
	"                        $STORAGE_EMULATOR_HOST, else Google)\n"
	"  --region R            S3 region (default: $AWS_REGION, else "
	"us-east-1)\n"
	"  --addressing A        S3: auto, path or virtual (default auto)\n"
	"  --anonymous           send unsigned requests (public buckets)\n"
	"Listing bounds (as [source] list_timeout_ms and list_memory, with "
	"their\n"
	"defaults):\n"
	"  --list-timeout-ms MS  give up a listing still going after MS\n"
	"  --list-memory SIZE    give up once the listed objects hold more "
	"than SIZE\n"
	"                        (e.g. 16G)\n";

static int summary(FILE *out, const struct manifest *m)
{
	uint64_t skipped = 0;
	int i;

	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		skipped += m->skipped[i];
	fprintf(out, "objects %zu\nbytes %llu\nskipped_keys %llu\nsha256 %s\n",
		m->count, (unsigned long long)m->total_bytes,
		(unsigned long long)skipped, m->digest);
	return 0;
}

static int write_manifest(FILE *f, const void *m)
{
	return manifest_write(m, f);
}

/* --addressing: the config's names ([source] addressing), exactly as
 * spelled there. Returns 0 or -EINVAL. */
static int manifest_addressing(const char *s, enum backend_addressing *out)
{
	const char *name;
	int a;

	for (a = 0; (name = config_addressing_name(a)) != NULL; a++) {
		if (strcmp(s, name) == 0) {
			*out = (enum backend_addressing)a;
			return 0;
		}
	}
	return -EINVAL;
}

int cmd_manifest(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "endpoint", required_argument, NULL, 'E' },
		{ "region", required_argument, NULL, 'R' },
		{ "addressing", required_argument, NULL, 'A' },
		{ "anonymous", no_argument, NULL, 'N' },
		{ "list-timeout-ms", required_argument, NULL, 'T' },
		{ "list-memory", required_argument, NULL, 'M' },
		CMD_LONGOPTS_END,
	};
	struct backend_options opts = { .retries = -1 };
	const char *output = NULL;
	struct backend *be = NULL;
	struct manifest *m = NULL;
	unsigned long ms;
	char *end;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			/* manifest reads no config: an override here would
			 * silently become the output file's name. */
			if (strchr(optarg, '=') != NULL &&
			    strchr(optarg, '/') == NULL) {
				fprintf(stderr,
					"shardfs: manifest: -o %s: manifest "
					"takes no config overrides (-o names "
					"the output file here); use "
					"--endpoint, --region, --addressing "
					"or --anonymous\n",
					optarg);
				return EXIT_USAGE;
			}
			output = optarg;
			break;
		case 'E':
			opts.endpoint = optarg;
			break;
		case 'R':
			opts.region = optarg;
			break;
		case 'A':
			if (manifest_addressing(optarg, &opts.addressing) < 0)
				return cmd_usage_error(
					usage_manifest,
					"manifest: --addressing "
					"%s: expected auto, path or "
					"virtual",
					optarg);
			break;
		case 'N':
			opts.anonymous = 1;
			break;
		case 'T':
			errno = 0;
			ms = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg ||
			    optarg[0] == '-' || ms < 1000 || ms > UINT_MAX)
				return cmd_usage_error(
					usage_manifest,
					"manifest: --list-timeout-ms %s: "
					"expected 1000 to 4294967295",
					optarg);
			opts.list_timeout_ms = (unsigned)ms;
			break;
		case 'M':
			if (config_parse_size(optarg, &opts.list_memory) < 0 ||
			    opts.list_memory == 0)
				return cmd_usage_error(
					usage_manifest,
					"manifest: --list-memory %s: "
					"expected a size such as 512M or 16G",
					optarg);
			break;
		default:
			return cmd_option_other(c, usage_manifest);
		}
	}
	if (cmd_operands(argc, 1, usage_manifest, "manifest", "URL"))
		return EXIT_USAGE;
	rc = backend_open(argv[optind], &opts, &be);
	if (rc == -EPROTONOSUPPORT || rc == -EINVAL) {
		backend_close(be);
		return EXIT_USAGE;
	}
	if (rc == 0)
		rc = dataset_list_manifest(be, &m);
	if (rc == 0) {
		if (output != NULL && strcmp(output, "-") != 0) {
			rc = cmd_write_file(output, write_manifest, m);
			if (rc == 0)
				summary(stdout, m);
		} else {
			rc = manifest_write(m, stdout);
			if (fflush(stdout) != 0)
				rc = -EIO;
			if (rc == 0)
				summary(stderr, m);
		}
	}
	manifest_free(m);
	backend_close(be);
	return rc < 0 ? EXIT_RUNTIME : EXIT_OK;
}
