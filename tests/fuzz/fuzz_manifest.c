/*
 * fuzz_manifest: the manifest file format (plan/manifest.c).
 *
 * Any input either fails to parse or gives a manifest that writes back
 * to text which parses to the same manifest (count, total, digest, every
 * key found at its index). Independently, the key escape is a bijection:
 * manifest_write_escaped then manifest_unescape gives back the input.
 */
#include <string.h>

#include "plan/manifest.h"
#include "tests/fuzz/fuzz.h"

static void check_escape(const uint8_t *data, size_t size)
{
	char *buf = NULL;
	size_t len = 0, i;
	FILE *f = open_memstream(&buf, &len);
	long n;

	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(manifest_write_escaped(f, (const char *)data, size) == 0);
	FUZZ_CHECK(fclose(f) == 0);
	/* The escaped form has no byte a line or field could end at. */
	for (i = 0; i < len; i++)
		FUZZ_CHECK((unsigned char)buf[i] >= 0x20);
	n = manifest_unescape(buf, len);
	FUZZ_CHECK(n >= 0 && (size_t)n == size);
	FUZZ_CHECK(memcmp(buf, data, size) == 0);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct manifest *m = NULL, *m2 = NULL;
	char *text = NULL;
	size_t len = 0, i;
	FILE *f;

	check_escape(data, size);
	if (manifest_parse("fuzz", (const char *)data, size, &m) < 0)
		return 0;
	FUZZ_CHECK(m->total_bytes <= MANIFEST_SIZE_MAX);
	f = open_memstream(&text, &len);
	FUZZ_CHECK(f != NULL);
	FUZZ_CHECK(manifest_write(m, f) == 0);
	FUZZ_CHECK(fclose(f) == 0);
	FUZZ_CHECK(manifest_parse("fuzz-rewritten", text, len, &m2) == 0);
	FUZZ_CHECK(m2->count == m->count);
	FUZZ_CHECK(m2->total_bytes == m->total_bytes);
	FUZZ_CHECK(strcmp(m2->digest, m->digest) == 0);
	for (i = 0; i < m->count; i++) {
		const struct manifest_entry *e = &m->entries[i];

		FUZZ_CHECK(e->size <= MANIFEST_SIZE_MAX);
		FUZZ_CHECK(manifest_find(m, e->key, e->key_len) == (long)i);
		FUZZ_CHECK(m2->entries[i].key_len == e->key_len);
		FUZZ_CHECK(memcmp(m2->entries[i].key, e->key, e->key_len) == 0);
		FUZZ_CHECK(m2->entries[i].size == e->size);
		FUZZ_CHECK(m2->entries[i].mtime_ns == e->mtime_ns);
	}
	free(text);
	manifest_free(m2);
	manifest_free(m);
	return 0;
}
