/*
 * fuzz_s3_xml: the XML the S3 backend reads (backends/s3_xml.c): a
 * ListObjectsV2 page, an <Error> body, and ISO 8601 times.
 *
 * A page that parses has a key and an etag for every object, keys as long
 * as they say; a failed parse leaves nothing behind once finished (LSan
 * checks the leak this harness was written for: a <Contents> inside an
 * unfinished one).
 */
#include <string.h>

#include "backends/s3_xml.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *xml = (const char *)data;
	struct s3_xml_list_page pg;
	char code[64], message[128], *s;
	int64_t ns;
	size_t i;

	if (s3_xml_list_parse(xml, size, &pg) == 0) {
		for (i = 0; i < pg.count; i++) {
			FUZZ_CHECK(pg.objects[i].key != NULL);
			FUZZ_CHECK(pg.objects[i].etag != NULL);
			FUZZ_CHECK(pg.objects[i].key[pg.objects[i].key_len] ==
				   '\0');
		}
	}
	s3_xml_list_page_fini(&pg);
	FUZZ_CHECK(pg.count == 0 && pg.objects == NULL);

	if (s3_xml_error_parse(xml, size, code, sizeof(code), message,
			       sizeof(message)) < 0)
		FUZZ_CHECK(code[0] == '\0' && message[0] == '\0');
	FUZZ_CHECK(strlen(code) < sizeof(code));
	FUZZ_CHECK(strlen(message) < sizeof(message));

	s = strndup(xml, size);
	FUZZ_CHECK(s != NULL);
	ns = 42;
	if (s3_parse_iso8601(s, &ns) < 0)
		FUZZ_CHECK(ns == 42);
	free(s);
	return 0;
}
