/*
 * nfs_raw: the raw libnfs read rate the NFS bench compares shardfs with.
 * Reads every file named on stdin (paths below the export) whole, 1 MiB a
 * READ, with THREADS threads, each with its own libnfs context (one
 * connection), files dealt round-robin; prints "FILES BYTES SECONDS".
 *
 *   nfs_raw nfs://127.0.0.1:PORT/export THREADS <list
 *
 * Only the bench builds this (tests/bench/nfs.sh); it is not shardfs.
 */
/* libnfs.h uses struct timeval without including its header. */
#include <sys/time.h>

#include <fcntl.h>
#include <nfsc/libnfs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char **paths;
static size_t n_paths;
static const char *url;
static int threads;
static uint64_t total_bytes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *reader(void *arg)
{
	size_t i, k = (size_t)(intptr_t)arg;
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *u = nfs_parse_url_dir(nfs, url);
	char *mine = malloc(1 << 20);
	uint64_t bytes = 0;
	char name[64];

	/* NFSv4 servers refuse a second client with the same name (libnfs'
	 * default) and another verifier: one name per context. */
	snprintf(name, sizeof(name), "nfs_raw-%ld-%zu", (long)getpid(), k);
	nfs4_set_client_name(nfs, name);
	if (u == NULL || nfs_mount(nfs, u->server, u->path) != 0) {
		fprintf(stderr, "mount: %s\n", nfs_get_error(nfs));
		exit(1);
	}
	for (i = k; i < n_paths; i += (size_t)threads) {
		struct nfsfh *fh;
		int n;

		if (nfs_open(nfs, paths[i], O_RDONLY, &fh) != 0) {
			fprintf(stderr, "%s: %s\n", paths[i],
				nfs_get_error(nfs));
			exit(1);
		}
		while ((n = nfs_read(nfs, fh, 1 << 20, mine)) > 0)
			bytes += (uint64_t)n;
		if (n < 0) {
			fprintf(stderr, "%s: %s\n", paths[i],
				nfs_get_error(nfs));
			exit(1);
		}
		nfs_close(nfs, fh);
	}
	pthread_mutex_lock(&lock);
	total_bytes += bytes;
	pthread_mutex_unlock(&lock);
	free(mine);
	nfs_destroy_url(u);
	nfs_destroy_context(nfs);
	return NULL;
}

int main(int argc, char **argv)
{
	char line[4096];
	size_t cap = 0;
	struct timespec a, b;
	pthread_t *t;
	int i;

	if (argc != 3)
		return 2;
	url = argv[1];
	threads = atoi(argv[2]);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (n_paths == cap) {
			cap = cap ? cap * 2 : 1024;
			paths = realloc(paths, cap * sizeof(*paths));
		}
		paths[n_paths++] = strdup(line);
	}
	t = calloc((size_t)threads, sizeof(*t));
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, reader, (void *)(intptr_t)i);
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%zu %llu %.3f\n", n_paths, (unsigned long long)total_bytes,
	       (double)(b.tv_sec - a.tv_sec) +
		       (double)(b.tv_nsec - a.tv_nsec) / 1e9);
	return 0;
}
