/*
 * bench_transform: objects per second through the transform runner
 * (transform/transform.h), for the figures of issue 27's report; not a
 * test and not built by make. From the repository root, after make:
 *
 *   cc -D_GNU_SOURCE -I. -o build/bench_transform \
 *       tests/unit/transform/bench_transform.c build/libshardfs.a \
 *       $(pkg-config --libs libcrypto) -lpthread
 *   build/bench_transform process|worker WORKERS OBJECTS INPUT \
 *       [none] -- ARGV...
 *
 * Runs OBJECTS objects (each INPUT's bytes) from WORKERS threads on a
 * transform with WORKERS workers, in the bwrap sandbox as nobody (or
 * "none"), and prints objects/s and ms per object. Worker start-up is
 * included (the first object of each worker).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transform/spawn.h"
#include "transform/transform.h"

static struct transform *t;
static void *in;
static size_t in_len;
static int left; /* protected by mu */
static int failed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *loop(void *arg)
{
	(void)arg;
	for (;;) {
		struct transform_output out;
		struct transform_failure f;
		int more;

		pthread_mutex_lock(&mu);
		more = left > 0;
		left--;
		pthread_mutex_unlock(&mu);
		if (!more)
			return NULL;
		if (transform_run(t, in, in_len, &out, &f) != 0) {
			fprintf(stderr, "failed: %s: %s [%s]\n",
				transform_fail_name(f.what), f.message,
				f.stderr_tail);
			pthread_mutex_lock(&mu);
			failed++;
			pthread_mutex_unlock(&mu);
			continue;
		}
		free(out.data);
	}
}

int main(int argc, char **argv)
{
	static const char *const env[] = { "PATH=/usr/bin:/bin", "HOME=/tmp",
					   "TMPDIR=/tmp", NULL };
	struct transform_spec s = { .name = "bench",
				    .version = "1",
				    .env = env,
				    .timeout_ms = 120000 };
	pthread_t th[64];
	unsigned i, n;
	uint64_t t0, ms;
	FILE *fp;
	int a = 5;

	if (argc < 7) {
		fprintf(stderr, "usage: see the file's head\n");
		return 2;
	}
	s.mode = strcmp(argv[1], "worker") == 0 ? TRANSFORM_MODE_WORKER
						: TRANSFORM_MODE_PROCESS;
	s.workers = (unsigned)atoi(argv[2]);
	n = (unsigned)atoi(argv[3]);
	if (s.workers == 0 || s.workers > 64)
		return 2;
	fp = fopen(argv[4], "rb");
	if (fp == NULL)
		return 2;
	fseek(fp, 0, SEEK_END);
	in_len = (size_t)ftell(fp);
	fseek(fp, 0, SEEK_SET);
	in = malloc(in_len);
	if (fread(in, 1, in_len, fp) != in_len)
		return 2;
	fclose(fp);
	if (strcmp(argv[a], "none") == 0) {
		s.sandbox = TRANSFORM_SANDBOX_NONE;
		a++;
	}
	if (strcmp(argv[a], "--") != 0)
		return 2;
	s.argv = (const char *const *)&argv[a + 1];
	if (transform_open(&s, &t) != 0)
		return 1;
	left = (int)n;
	t0 = transform_now_ms();
	for (i = 0; i < s.workers; i++)
		pthread_create(&th[i], NULL, loop, NULL);
	for (i = 0; i < s.workers; i++)
		pthread_join(th[i], NULL);
	ms = transform_now_ms() - t0;
	transform_close(t);
	printf("%s workers=%u objects=%u failed=%d: %.1f objects/s, %.2f ms "
	       "per object\n",
	       argv[1], s.workers, n, failed, n * 1000.0 / (double)ms,
	       (double)ms / n);
	free(in);
	return failed ? 1 : 0;
}
