/*
 * fuzz_config: the config file and the -o overrides (mount/config.c,
 * mount/overrides.c).
 *
 * The input up to its first NUL is written to a temp file and loaded with
 * config_load(); each NUL-separated piece after it is one -o argument,
 * collected with overrides_parse() and applied on top. A failed load
 * says why in err; a config that loads has a source URL and a world size
 * of at least 1. Nothing leaks either way.
 */
#include <string.h>
#include <unistd.h>

#include "mount/config.h"
#include "mount/overrides.h"
#include "tests/fuzz/fuzz.h"

static char conf_path[256];

static void remove_conf(void)
{
	unlink(conf_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	int fd;

	(void)argc;
	(void)argv;
	/* tmpfs if there is one: a disk file rewritten at every input made
	 * the harness writeback bound. */
	if (tmp == NULL)
		tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(conf_path, sizeof(conf_path), "%s/shardfs-fuzz-conf.XXXXXX",
		 tmp);
	fd = mkstemp(conf_path);
	FUZZ_CHECK(fd >= 0);
	close(fd);
	atexit(remove_conf);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nul = memchr(text, '\0', size);
	size_t conf_len = nul ? (size_t)(nul - text) : size;
	struct overrides o = { 0 };
	struct config *cfg = NULL;
	struct backend_options opts;
	char err[512], *rest = NULL, *p, *end;
	uint64_t v;
	FILE *f;

	f = fopen(conf_path, "we");
	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(fwrite(text, 1, conf_len, f) == conf_len);
	FUZZ_CHECK(fclose(f) == 0);

	if (nul != NULL) {
		rest = malloc(size - conf_len);
		FUZZ_CHECK(rest != NULL);
		memcpy(rest, nul + 1, size - conf_len - 1);
		rest[size - conf_len - 1] = '\0';
		end = rest + (size - conf_len - 1);
		/* Each piece is an -o argument (and a size, for the size
		 * parser the config shares with the command line). */
		for (p = rest; p <= end; p += strlen(p) + 1) {
			(void)overrides_parse(&o, p);
			(void)config_parse_size(p, &v);
		}
	}
	if (config_load(conf_path, o.v, o.n, &cfg, err, sizeof(err)) == 0) {
		FUZZ_CHECK(cfg->source.url != NULL);
		FUZZ_CHECK(cfg->shard.spec.world_size >= 1);
		config_backend_options(cfg, &opts);
		(void)config_rank_selected(cfg, 0);
		(void)config_rank_selected(cfg, cfg->shard.spec.world_size - 1);
		config_free(cfg);
	} else {
		FUZZ_CHECK(err[0] != '\0');
	}
	overrides_free(&o);
	free(rest);
	return 0;
}
