/*
 * backend_list: the bounds of a listing (backend_list_bound in
 * backend.h), shared by the backends that list a store (objstore.c for
 * S3 and GCS, nfs_list.c), and the count of the entries a listing skips
 * (posix.c, nfs_list.c). Apart from backend.c, whose table names every
 * backend, so that code that lists without opening one (the fuzz
 * harnesses) links it alone.
 */
#include "backends/backend.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/log.h"

void backend_list_bound_start(struct backend_list_bound *b, unsigned timeout_ms,
			      uint64_t memory, const char *what)
{
	memset(b, 0, sizeof(*b));
	b->what = what;
	b->timeout_ms =
		timeout_ms ? timeout_ms : BACKEND_LIST_TIMEOUT_MS_DEFAULT;
	b->memory = memory ? memory : BACKEND_LIST_MEMORY_DEFAULT;
	b->start_ms = clock_now_ms();
}

int backend_list_bound_check(struct backend_list_bound *b,
			     const struct backend_object *obj)
{
	uint64_t took = clock_now_ms() - b->start_ms;

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

void backend_list_skipped(atomic_uint_fast64_t *count, int level,
			  const char *where, const char *sep, const char *key,
			  const char *why)
{
	if (atomic_fetch_add(count, 1) < BACKEND_LIST_SKIPPED_LOG_MAX)
		log_msg(level, "source %s%s%s: %s, skipped", where, sep, key,
			why);
}
