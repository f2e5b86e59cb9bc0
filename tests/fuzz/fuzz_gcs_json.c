/*
 * fuzz_gcs_json: the JSON the GCS backend reads (backends/gcs_json.c): an
 * objects.list page, object metadata, an error body, and the crc32c of an
 * x-goog-hash header.
 *
 * A page that parses has, for every object, a name as long as it says, a
 * size within int64 and a generation of 1 to 19 digits; a failed parse
 * leaves nothing behind and says why. Error fields always fit and hold
 * printable ASCII only (they go to the log).
 */
#include <errno.h>
#include <string.h>

#include "backends/gcs.h"
#include "tests/fuzz/fuzz.h"

static void check_object(const struct gcs_object *o)
{
	size_t n = strlen(o->generation), i;

	FUZZ_CHECK(o->name != NULL && o->name_len > 0);
	FUZZ_CHECK(o->name[o->name_len] == '\0');
	FUZZ_CHECK(o->size <= (uint64_t)INT64_MAX);
	FUZZ_CHECK(n >= 1 && n <= 19);
	for (i = 0; i < n; i++)
		FUZZ_CHECK(o->generation[i] >= '0' && o->generation[i] <= '9');
}

static void check_printable(const char *s, size_t cap)
{
	FUZZ_CHECK(strlen(s) < cap);
	for (; *s; s++)
		FUZZ_CHECK(*s >= 0x20 && *s <= 0x7e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	struct gcs_list_page pg = { 0 };
	struct gcs_object o;
	char why[160], reason[64], msg[128], *s;
	uint32_t crc;
	size_t i;
	int rc;

	why[0] = 'x';
	rc = gcs_list_parse(body, size, &pg, why, sizeof(why));
	if (rc == 0) {
		for (i = 0; i < pg.count; i++)
			check_object(&pg.objects[i]);
		FUZZ_CHECK(pg.next_token == NULL || pg.next_token[0] != '\0');
	} else {
		FUZZ_CHECK(rc == -EBADMSG || rc == -ENOMEM);
		FUZZ_CHECK(pg.count == 0 && pg.objects == NULL);
		FUZZ_CHECK(rc != -EBADMSG || why[0] != '\0');
	}
	gcs_list_page_fini(&pg);
	FUZZ_CHECK(pg.count == 0 && pg.objects == NULL &&
		   pg.next_token == NULL);

	if (gcs_object_parse(body, size, &o, why, sizeof(why)) == 0) {
		check_object(&o);
		free(o.name);
	}

	gcs_error_parse(body, size, reason, sizeof(reason), msg, sizeof(msg));
	check_printable(reason, sizeof(reason));
	check_printable(msg, sizeof(msg));

	s = strndup(body, size);
	FUZZ_CHECK(s != NULL);
	crc = 42;
	rc = gcs_hash_crc32c(s, &crc);
	FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL);
	if (rc != 0)
		FUZZ_CHECK(crc == 42);
	free(s);
	return 0;
}
