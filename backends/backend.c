/*
 * backend: picks the backend for a URL. The table is the only place that
 * names every backend.
 */
#include "backends/backend.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "util/log.h"

static const struct backend_ops *const backend_table[] = {
	&backend_posix_ops,
	&backend_s3_ops,
	&backend_gcs_ops,
	&backend_nfs_ops,
};

int backend_open(const char *url, const struct backend_options *opts,
		 struct backend **out)
{
	size_t i;

	for (i = 0; i < sizeof(backend_table) / sizeof(backend_table[0]); i++)
		if (backend_table[i]->handles(url))
			return backend_table[i]->open(url, opts, out);
	log_msg(LOG_ERR,
		"source url '%s': not an absolute path, s3://, gs:// or nfs:// "
		"URL",
		url);
	return -EPROTONOSUPPORT;
}

void backend_close(struct backend *be)
{
	if (be != NULL)
		be->ops->close(be);
}

int backend_key_relative(const char *key, size_t key_len)
{
	size_t start = 0, i;

	if (key_len == 0 || memchr(key, '\0', key_len) != NULL)
		return -EINVAL;
	for (i = 0; i <= key_len; i++) {
		if (i < key_len && key[i] != '/')
			continue;
		if (i == start || (i - start == 1 && key[start] == '.') ||
		    (i - start == 2 && key[start] == '.' &&
		     key[start + 1] == '.'))
			return -EINVAL;
		start = i + 1;
	}
	return 0;
}

static uint64_t list_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void backend_list_bound_start(struct backend_list_bound *b, unsigned timeout_ms,
			      uint64_t memory, const char *what)
{
	memset(b, 0, sizeof(*b));
	b->what = what;
	b->timeout_ms =
		timeout_ms ? timeout_ms : BACKEND_LIST_TIMEOUT_MS_DEFAULT;
	b->memory = memory ? memory : BACKEND_LIST_MEMORY_DEFAULT;
	b->start_ms = list_now_ms();
}

int backend_list_bound_check(struct backend_list_bound *b,
			     const struct backend_object *obj)
{
	uint64_t took = list_now_ms() - b->start_ms;

	if (obj != NULL) {
		b->objects++;
		b->bytes += obj->key_len + obj->etag_len +
			    BACKEND_LIST_OBJECT_BYTES;
	}
	if (b->bytes > b->memory) {
		log_msg(LOG_ERR,
			"%s: list: the objects listed so far (%" PRIu64
			" in %.1f s) hold more than [source] list_memory = "
			"%" PRIu64 " bytes; giving up (a store that never "
			"ends its listing, or a source bigger than that: "
			"raise list_memory (shardfs manifest: --list-memory), "
			"or pin a manifest)",
			b->what, b->objects, (double)took / 1000, b->memory);
		return -EIO;
	}
	if (took >= b->timeout_ms) {
		log_msg(LOG_ERR,
			"%s: list: still listing after [source] "
			"list_timeout_ms = %" PRIu64 " ms (%" PRIu64
			" objects, %" PRIu64 " bytes so far); giving up (a "
			"store that never ends its listing, or a slow one: "
			"raise list_timeout_ms (shardfs manifest: "
			"--list-timeout-ms), or pin a manifest)",
			b->what, b->timeout_ms, b->objects, b->bytes);
		return -EIO;
	}
	return 0;
}
