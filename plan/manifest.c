/*
 * manifest: see manifest.h.
 *
 * Strings live in a chunked arena so a million-entry manifest costs one
 * 40-byte entry plus its key and etag bytes each. Sorting goes through a
 * 4-byte index permutation applied in place, so it never holds a second copy
 * of the entry array, and is skipped when the input is already canonical (a
 * file written by manifest_write() always is).
 */
#include "plan/manifest.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/hex.h"
#include "util/le.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/str.h"

#define ARENA_CHUNK (1u << 20)
#define ARENA_FIRST (16u << 10)
#define SKIP_LOG_MAX 20
#define PATH_COMPONENT_MAX 255

struct manifest_chunk {
	struct manifest_chunk *next;
	size_t used, cap;
	char data[];
};

static const char *const skip_names[MANIFEST_SKIP_NREASONS] = {
	[MANIFEST_SKIP_DIR_MARKER] = "directory_marker",
	[MANIFEST_SKIP_BAD_COMPONENT] = "bad_component",
	[MANIFEST_SKIP_LONG_COMPONENT] = "long_component",
	[MANIFEST_SKIP_NUL] = "nul_byte",
	[MANIFEST_SKIP_FILE_IS_DIR] = "file_is_directory",
	[MANIFEST_SKIP_LINK_OUTSIDE] = "link_outside_root",
};

const char *manifest_skip_name(enum manifest_skip reason)
{
	return reason < MANIFEST_SKIP_NREASONS ? skip_names[reason] : "?";
}

struct manifest *manifest_new(void)
{
	return calloc(1, sizeof(struct manifest));
}

uint64_t manifest_weight(const void *ctx, size_t i)
{
	const struct manifest *m = ctx;

	return m->entries[i].size;
}

void manifest_free(struct manifest *m)
{
	struct manifest_chunk *c, *next;

	if (m == NULL)
		return;
	for (c = m->arena; c != NULL; c = next) {
		next = c->next;
		free(c);
	}
	free(m->entries);
	free(m);
}

/* Copies len bytes plus a NUL into the arena. Chunks start at 16 KiB and
 * double up to 1 MiB, so a small manifest costs little (a fresh 1 MiB for
 * each one made fuzzing and small test manifests page-fault bound). */
static char *arena_copy(struct manifest *m, const char *s, size_t len)
{
	struct manifest_chunk *c = m->arena;
	char *p;

	if (c == NULL || c->cap - c->used < len + 1) {
		size_t step = c == NULL			  ? ARENA_FIRST
			      : c->cap >= ARENA_CHUNK / 2 ? ARENA_CHUNK
							  : c->cap * 2;
		size_t cap = len + 1 > step ? len + 1 : step;

		c = malloc(sizeof(*c) + cap);
		if (c == NULL)
			return NULL;
		c->used = 0;
		c->cap = cap;
		/* A big string gets its own chunk behind the current one,
		 * so the current chunk's free space is not wasted. */
		if (cap > step && m->arena != NULL) {
			c->next = m->arena->next;
			m->arena->next = c;
		} else {
			c->next = m->arena;
			m->arena = c;
		}
	}
	p = c->data + c->used;
	memcpy(p, s, len);
	p[len] = '\0';
	c->used += len + 1;
	return p;
}

int manifest_add(struct manifest *m, const char *key, size_t key_len,
		 uint64_t size, const char *etag, size_t etag_len,
		 int64_t mtime_ns)
{
	struct manifest_entry *e;

	if (m->finished)
		return -EINVAL;
	if (key_len > UINT32_MAX || etag_len > UINT32_MAX)
		return -E2BIG;
	if (size > MANIFEST_SIZE_MAX)
		return -EFBIG;
	if (m->count == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		struct manifest_entry *n;

		n = realloc(m->entries, cap * sizeof(*n));
		if (n == NULL)
			return -ENOMEM;
		m->entries = n;
		m->cap = cap;
	}
	e = &m->entries[m->count];
	e->key = arena_copy(m, key, key_len);
	e->etag = arena_copy(m, etag, etag_len);
	if (e->key == NULL || e->etag == NULL)
		return -ENOMEM;
	e->key_len = (uint32_t)key_len;
	e->etag_len = (uint32_t)etag_len;
	e->size = size;
	e->mtime_ns = mtime_ns;
	m->count++;
	return 0;
}

/* Raw byte order, a proper prefix first. */
static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen;
}

static int entry_index_cmp(const void *pa, const void *pb, void *ctx)
{
	const struct manifest_entry *e = ctx;
	const struct manifest_entry *a = &e[*(const uint32_t *)pa];
	const struct manifest_entry *b = &e[*(const uint32_t *)pb];

	return key_cmp(a->key, a->key_len, b->key, b->key_len);
}

static int manifest_sort(struct manifest *m)
{
	uint32_t *perm;
	size_t i, j, k;
	struct manifest_entry tmp;

	for (i = 1; i < m->count; i++)
		if (key_cmp(m->entries[i - 1].key, m->entries[i - 1].key_len,
			    m->entries[i].key, m->entries[i].key_len) > 0)
			break;
	if (i >= m->count)
		return 0;
	if (m->count > UINT32_MAX)
		return -EOVERFLOW;
	perm = malloc(m->count * sizeof(*perm));
	if (perm == NULL)
		return -ENOMEM;
	for (i = 0; i < m->count; i++)
		perm[i] = (uint32_t)i;
	qsort_r(perm, m->count, sizeof(*perm), entry_index_cmp, m->entries);
	/* Apply the permutation in place, cycle by cycle; perm[i] == i marks
	 * a slot that already holds its final entry. */
	for (i = 0; i < m->count; i++) {
		if (perm[i] == i)
			continue;
		tmp = m->entries[i];
		j = i;
		while (perm[j] != i) {
			k = perm[j];
			m->entries[j] = m->entries[k];
			perm[j] = (uint32_t)j;
			j = k;
		}
		m->entries[j] = tmp;
		perm[j] = (uint32_t)j;
	}
	free(perm);
	return 0;
}

/* Per-key path rules (DESIGN §3); returns a reason or -1 if the key is a
 * valid path. */
static int key_check(const char *key, size_t len)
{
	size_t start, i;

	if (memchr(key, '\0', len) != NULL)
		return MANIFEST_SKIP_NUL;
	if (len > 0 && key[len - 1] == '/')
		return MANIFEST_SKIP_DIR_MARKER;
	start = 0;
	for (i = 0; i <= len; i++) {
		size_t clen;

		if (i < len && key[i] != '/')
			continue;
		clen = i - start;
		if (clen == 0 || (clen == 1 && key[start] == '.') ||
		    (clen == 2 && key[start] == '.' && key[start + 1] == '.'))
			return MANIFEST_SKIP_BAD_COMPONENT;
		if (clen > PATH_COMPONENT_MAX)
			return MANIFEST_SKIP_LONG_COMPONENT;
		start = i + 1;
	}
	return -1;
}

char *manifest_escaped_copy(const char *s, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (f == NULL)
		return NULL;
	if (manifest_write_escaped(f, s, len) < 0) {
		fclose(f);
		free(buf);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void log_skip(struct manifest *m, const struct manifest_entry *e,
		     enum manifest_skip reason)
{
	char *key;

	if (++m->skipped[reason] > SKIP_LOG_MAX || log_threshold < LOG_WARNING)
		return;
	key = manifest_escaped_copy(e->key, e->key_len);
	log_msg(LOG_WARNING, "manifest: skipping key '%s': %s", key ? key : "?",
		manifest_skip_name(reason));
	free(key);
}

/* True if some entry in [lo, count) starts with key + '/'. Entries are
 * sorted, so those form one run starting at the lower bound of key + '/'. */
static int has_children(const struct manifest *m, size_t lo, const char *key,
			size_t len)
{
	size_t hi = m->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct manifest_entry *e = &m->entries[mid];
		int c = memcmp(e->key, key,
			       e->key_len < len ? e->key_len : len);

		/* Bytes compare unsigned, as memcmp does: "a\xc3" > "a/". */
		if (c == 0 && e->key_len <= len)
			c = -1;
		else if (c == 0)
			c = ((unsigned char)e->key[len] > '/') -
			    ((unsigned char)e->key[len] < '/');
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= m->count)
		return 0;
	return m->entries[lo].key_len > len &&
	       memcmp(m->entries[lo].key, key, len) == 0 &&
	       m->entries[lo].key[len] == '/';
}

/* Drops keys that break the path rules, keeping canonical order. */
static int manifest_apply_path_rules(struct manifest *m)
{
	size_t i, out = 0;
	unsigned char *dir_bits;

	for (i = 0; i < m->count; i++) {
		int reason =
			key_check(m->entries[i].key, m->entries[i].key_len);

		if (reason >= 0) {
			log_skip(m, &m->entries[i], reason);
			continue;
		}
		m->entries[out++] = m->entries[i];
	}
	m->count = out;

	dir_bits = calloc(m->count / 8 + 1, 1);
	if (dir_bits == NULL)
		return -ENOMEM;
	for (i = 0; i < m->count; i++)
		if (has_children(m, i + 1, m->entries[i].key,
				 m->entries[i].key_len))
			dir_bits[i / 8] |= (unsigned char)(1u << (i % 8));
	out = 0;
	for (i = 0; i < m->count; i++) {
		if (dir_bits[i / 8] & (1u << (i % 8))) {
			log_skip(m, &m->entries[i], MANIFEST_SKIP_FILE_IS_DIR);
			continue;
		}
		m->entries[out++] = m->entries[i];
	}
	m->count = out;
	free(dir_bits);
	return 0;
}

static int manifest_digest(struct manifest *m)
{
	struct sha256 *ctx = sha256_new();
	unsigned char le[8];
	uint8_t md[SHA256_LEN];
	size_t i;
	int rc = 0;

	if (ctx == NULL)
		return -ENOMEM;
	for (i = 0; rc == 0 && i < m->count; i++) {
		const struct manifest_entry *e = &m->entries[i];

		le_put64(le, e->key_len);
		rc = sha256_update(ctx, le, 8);
		if (rc == 0)
			rc = sha256_update(ctx, e->key, e->key_len);
		le_put64(le, e->size);
		if (rc == 0)
			rc = sha256_update(ctx, le, 8);
		le_put64(le, e->etag_len);
		if (rc == 0)
			rc = sha256_update(ctx, le, 8);
		if (rc == 0)
			rc = sha256_update(ctx, e->etag, e->etag_len);
	}
	if (rc == 0)
		rc = sha256_final(ctx, md);
	sha256_free(ctx);
	if (rc < 0)
		return rc;
	hex_encode(md, sizeof(md), m->digest);
	return 0;
}

int manifest_finish(struct manifest *m)
{
	uint64_t total = 0;
	size_t i;
	int rc;

	if (m->finished)
		return -EINVAL;
	rc = manifest_sort(m);
	if (rc < 0)
		return rc;
	for (i = 1; i < m->count; i++) {
		const struct manifest_entry *a = &m->entries[i - 1];
		const struct manifest_entry *b = &m->entries[i];

		if (a->key_len == b->key_len &&
		    memcmp(a->key, b->key, a->key_len) == 0) {
			char *key = manifest_escaped_copy(a->key, a->key_len);

			log_msg(LOG_ERR, "manifest: duplicate key '%s'",
				key ? key : "?");
			free(key);
			return -EEXIST;
		}
	}
	rc = manifest_apply_path_rules(m);
	if (rc < 0)
		return rc;
	/* Each size is at most MANIFEST_SIZE_MAX, so the sum cannot wrap
	 * before it is checked; capping it keeps every partial sum (a rank's
	 * bytes, statfs blocks) in range too. */
	for (i = 0; i < m->count; i++) {
		total += m->entries[i].size;
		if (total > MANIFEST_SIZE_MAX) {
			log_msg(LOG_ERR,
				"manifest: total size of the objects is over "
				"2^63-1 bytes");
			return -EFBIG;
		}
	}
	m->total_bytes = total;
	rc = manifest_digest(m);
	if (rc < 0)
		return rc;
	m->finished = 1;
	return 0;
}

int manifest_finish_into(struct manifest *m, int rc, struct manifest **out)
{
	if (rc == 0)
		rc = manifest_finish(m);
	if (rc < 0) {
		manifest_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

long manifest_unescape(char *s, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		if (s[i] != '%') {
			s[o++] = s[i];
			continue;
		}
		int b;

		if (len - i < 3 || (b = hex_pair(s + i + 1)) < 0)
			return -EINVAL;
		s[o++] = (char)b;
		i += 2;
	}
	return (long)o;
}

int manifest_write_escaped(FILE *f, const char *s, size_t len)
{
	size_t i, run = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[3];

		if (!str_key_escapes(c))
			continue;
		hex_percent(c, esc);
		if (fwrite(s + run, 1, i - run, f) != i - run ||
		    fwrite(esc, 1, 3, f) != 3)
			return -EIO;
		run = i + 1;
	}
	if (fwrite(s + run, 1, len - run, f) != len - run)
		return -EIO;
	return 0;
}

int manifest_write(const struct manifest *m, FILE *f)
{
	size_t i;

	if (fputs(MANIFEST_HEADER "\n", f) == EOF)
		return -EIO;
	for (i = 0; i < m->count; i++) {
		const struct manifest_entry *e = &m->entries[i];

		if (manifest_write_escaped(f, e->key, e->key_len) < 0 ||
		    fprintf(f, "\t%llu\t", (unsigned long long)e->size) < 0 ||
		    manifest_write_escaped(f, e->etag, e->etag_len) < 0 ||
		    fprintf(f, "\t%lld\n", (long long)e->mtime_ns) < 0)
			return -EIO;
	}
	return ferror(f) ? -EIO : 0;
}

/* Parses a decimal field; signed allows a leading '-'. */
static int parse_num(const char *s, size_t len, int is_signed, uint64_t *out)
{
	uint64_t v = 0, limit = is_signed ? (uint64_t)INT64_MAX : UINT64_MAX;
	int neg = 0;
	size_t i = 0;

	if (is_signed && len > 0 && s[0] == '-') {
		neg = 1;
		i = 1;
		limit = (uint64_t)INT64_MAX + 1;
	}
	if (i == len)
		return -EINVAL;
	for (; i < len; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		if (v > (limit - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = neg ? (uint64_t)0 - v : v;
	return 0;
}

static int parse_line(struct manifest *m, char *line, size_t len,
		      const char **why, char *why_buf, size_t why_cap)
{
	char *field[4];
	size_t flen[4];
	uint64_t size, mtime;
	long klen, elen;
	size_t i, n = 0;
	char *p = line, *tab;

	for (n = 0; n < 4; n++) {
		tab = memchr(p, '\t', (size_t)(line + len - p));
		field[n] = p;
		flen[n] = tab ? (size_t)(tab - p) : (size_t)(line + len - p);
		if (tab == NULL)
			break;
		p = tab + 1;
	}
	if (n != 3) {
		*why = n < 3 ? "expected 4 tab-separated fields"
			     : "more than 4 tab-separated fields";
		return -EINVAL;
	}
	for (i = 0; i < 4; i++)
		if (memchr(field[i], '\r', flen[i]) != NULL) {
			*why = "unescaped CR (CRLF line ends?)";
			return -EINVAL;
		}
	klen = manifest_unescape(field[0], flen[0]);
	elen = manifest_unescape(field[2], flen[2]);
	if (klen < 0 || elen < 0) {
		*why = "malformed %XX escape";
		return -EINVAL;
	}
	if (parse_num(field[1], flen[1], 0, &size) < 0) {
		*why = "size is not an unsigned 64-bit integer";
		return -EINVAL;
	}
	if (size > MANIFEST_SIZE_MAX) {
		snprintf(why_buf, why_cap,
			 "size %llu is over 2^63-1 (the largest file size)",
			 (unsigned long long)size);
		*why = why_buf;
		return -EINVAL;
	}
	if (parse_num(field[3], flen[3], 1, &mtime) < 0) {
		*why = "mtime is not a signed 64-bit integer";
		return -EINVAL;
	}
	if (manifest_add(m, field[0], (size_t)klen, size, field[2],
			 (size_t)elen, (int64_t)mtime) < 0) {
		*why = "out of memory";
		return -ENOMEM;
	}
	return 0;
}

static int manifest_read_stream(const char *name, FILE *f,
				struct manifest **out)
{
	struct manifest *m = manifest_new();
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t len;
	const char *why = NULL;
	char why_buf[96];
	int rc = 0;

	if (m == NULL)
		return -ENOMEM;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (len == 0 || line[len - 1] != '\n') {
			why = "last line has no newline (truncated file?)";
			rc = -EINVAL;
			break;
		}
		line[--len] = '\0';
		if (lineno == 1) {
			if (strcmp(line, MANIFEST_HEADER) != 0) {
				why = "first line is not '" MANIFEST_HEADER "'";
				rc = -EINVAL;
				break;
			}
			continue;
		}
		rc = parse_line(m, line, (size_t)len, &why, why_buf,
				sizeof(why_buf));
		if (rc < 0)
			break;
	}
	if (rc == 0 && ferror(f)) {
		rc = -EIO;
		log_msg(LOG_ERR, "%s: read error", name);
	} else if (rc == 0 && lineno == 0) {
		rc = -EINVAL;
		why = "empty file (no '" MANIFEST_HEADER "' line)";
	}
	free(line);
	if (why != NULL)
		log_msg(LOG_ERR, "%s:%zu: %s", name, lineno, why);
	return manifest_finish_into(m, rc, out);
}

int manifest_load(const char *path, struct manifest **out)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
	int rc;

	if (f == NULL) {
		rc = -errno;
		log_msg(LOG_ERR, "manifest %s: %s", path, strerror(-rc));
		return rc;
	}
	rc = manifest_read_stream(path, f, out);
	if (f != stdin)
		fclose(f);
	return rc;
}

int manifest_parse(const char *name, const char *text, size_t len,
		   struct manifest **out)
{
	FILE *f;
	int rc;

	if (len == 0) {
		log_msg(LOG_ERR, "%s: empty (no '" MANIFEST_HEADER "' line)",
			name);
		return -EINVAL;
	}
	f = fmemopen((void *)text, len, "r");
	if (f == NULL)
		return -errno;
	rc = manifest_read_stream(name, f, out);
	fclose(f);
	return rc;
}

long manifest_find(const struct manifest *m, const char *key, size_t len)
{
	size_t lo = 0, hi = m->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct manifest_entry *e = &m->entries[mid];
		int c = key_cmp(e->key, e->key_len, key, len);

		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}
