/*
 * fuzz_keys: the key-to-path rules (plan/manifest.c, DESIGN §3) and the tree
 * built from what they keep (fs/view.c).
 *
 * The input is a list of keys, one per line (any bytes but LF, NUL
 * included). manifest_finish() must refuse duplicates, and otherwise keep
 * exactly the keys an independent reading of the rules keeps: no NUL, no
 * trailing '/', no empty, "." or ".." component, none over 255 bytes, and
 * no key that is also a directory of another kept key. What it keeps is
 * sorted and each kept key is found in the view at rank-0/<key>, as a file.
 */
#include <errno.h>
#include <string.h>

#include "fs/view.h"
#include "plan/manifest.h"
#include "plan/shard.h"
#include "tests/fuzz/fuzz.h"

struct key {
	const char *s;
	size_t len;
};

/* The rules, written again from DESIGN §3 rather than shared. */
static int ref_valid(const char *s, size_t len)
{
	size_t start = 0, i;

	if (len == 0 || memchr(s, '\0', len) != NULL || s[len - 1] == '/')
		return 0;
	for (i = 0; i <= len; i++) {
		if (i < len && s[i] != '/')
			continue;
		if (i == start || i - start > 255 ||
		    (i - start == 1 && s[start] == '.') ||
		    (i - start == 2 && s[start] == '.' && s[start + 1] == '.'))
			return 0;
		start = i + 1;
	}
	return 1;
}

/* True if b lies under a as a directory: b starts with a + '/'. */
static int ref_under(const struct key *a, const struct key *b)
{
	return b->len > a->len && b->s[a->len] == '/' &&
	       memcmp(a->s, b->s, a->len) == 0;
}

static void check_view(const struct manifest *m)
{
	struct shard_spec spec = { .world_size = 1 };
	struct shard_plan *plan = NULL;
	struct view *v = NULL;
	const struct view_node *root, *n;
	uint64_t ino;
	size_t i;

	FUZZ_CHECK(shard_plan_build(&spec, m->count, NULL, NULL, &plan) == 0);
	FUZZ_CHECK(view_build(m, plan, NULL, NULL, NULL, &v) == 0);
	root = view_node(v, 1);
	FUZZ_CHECK(root != NULL);
	FUZZ_CHECK(view_lookup(v, root, "rank-0", 6, &ino) == 0);
	root = view_node(v, ino);
	for (i = 0; i < m->count; i++) {
		const char *k = m->entries[i].key,
			   *end = k + m->entries[i].key_len;
		const char *slash;

		n = root;
		while (1) {
			slash = memchr(k, '/', (size_t)(end - k));
			FUZZ_CHECK(n->kind == VIEW_DIR);
			FUZZ_CHECK(
				view_lookup(v, n, k,
					    (size_t)((slash ? slash : end) - k),
					    &ino) == 0);
			n = view_node(v, ino);
			FUZZ_CHECK(n != NULL);
			if (slash == NULL)
				break;
			k = slash + 1;
		}
		FUZZ_CHECK(n->kind == VIEW_FILE && n->u.item == i);
	}
	view_free(v);
	shard_plan_free(plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *p = text, *end = text + size;
	struct manifest *m = manifest_new();
	struct key *keys = calloc(size + 1, sizeof(*keys));
	size_t n = 0, i, j, kept = 0, skipped = 0;
	int dup = 0, rc;

	FUZZ_CHECK(m != NULL && keys != NULL);
	while (p <= end && size > 0) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		keys[n].s = p;
		keys[n].len = (size_t)((nl ? nl : end) - p);
		FUZZ_CHECK(manifest_add(m, keys[n].s, keys[n].len, 1, "e", 1,
					0) == 0);
		n++;
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	for (i = 0; i < n && !dup; i++)
		for (j = i + 1; j < n && !dup; j++)
			dup = keys[i].len == keys[j].len &&
			      memcmp(keys[i].s, keys[j].s, keys[i].len) == 0;
	rc = manifest_finish(m);
	if (dup) {
		FUZZ_CHECK(rc == -EEXIST);
		goto out;
	}
	FUZZ_CHECK(rc == 0);
	for (i = 0; i < n; i++) {
		int keep = ref_valid(keys[i].s, keys[i].len);

		for (j = 0; j < n && keep; j++)
			if (ref_valid(keys[j].s, keys[j].len) &&
			    ref_under(&keys[i], &keys[j]))
				keep = 0;
		if (keep) {
			kept++;
			FUZZ_CHECK(manifest_find(m, keys[i].s, keys[i].len) >=
				   0);
		}
	}
	FUZZ_CHECK(m->count == kept);
	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		skipped += m->skipped[i];
	FUZZ_CHECK(skipped + kept == n);
	for (i = 1; i < m->count; i++) {
		const struct manifest_entry *a = &m->entries[i - 1];
		const struct manifest_entry *b = &m->entries[i];
		size_t l = a->key_len < b->key_len ? a->key_len : b->key_len;
		int c = memcmp(a->key, b->key, l);

		FUZZ_CHECK(c < 0 || (c == 0 && a->key_len < b->key_len));
	}
	check_view(m);
out:
	free(keys);
	manifest_free(m);
	return 0;
}
