/*
 * rindex_load: the record index file's loader (records/rindex.h). Strict:
 * it accepts only the bytes rindex_write() would write for the same index
 * (docs/RECORDS.md §2), checks the end line's digest before anything
 * else, then every object against the manifest. On any error nothing is
 * kept and one "PATH:LINE: what" line is logged.
 */
#include "records/rindex.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "records/rindex_impl.h"
#include "util/log.h"
#include "util/sha256.h"

/* --- loader ------------------------------------------------------------- */

struct rindex_parser {
	const char *name;
	const char *p, *end; /* the unread rest of the body */
	size_t lineno;
	size_t objects_lineno; /* the "objects N records N skipped N" line */
	char why[768];
};

static int rindex_fail(struct rindex_parser *ps, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int rindex_fail(struct rindex_parser *ps, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ps->why, sizeof(ps->why), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* The next line without its '\n' (every body line has one). */
static bool rindex_line(struct rindex_parser *ps, const char **line,
			size_t *len)
{
	const char *nl;

	if (ps->p >= ps->end)
		return false;
	nl = memchr(ps->p, '\n', (size_t)(ps->end - ps->p));
	*line = ps->p;
	*len = (size_t)(nl - ps->p);
	ps->p = nl + 1;
	ps->lineno++;
	return true;
}

/* A canonical decimal (no sign, no leading zero) up to max. */
static bool rindex_num(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0 || len > 20 || (s[0] == '0' && len > 1))
		return false;
	for (i = 0; i < len; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

/* Whether s[0..len) is 64 lowercase hex digits. */
static bool rindex_hex64(const char *s, size_t len)
{
	size_t i;

	if (len != SHA256_HEX_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Whether line starts with the literal word (and is longer). */
static bool rindex_prefix(const char *line, size_t len, const char *word,
			  size_t n)
{
	return len > n && memcmp(line, word, n) == 0;
}

/*
 * Decodes an escaped field into dst (room for len bytes) and returns its
 * length, or -1 if the field is not as emit_escaped writes it: a raw byte
 * that needs escaping, a %XX that is lowercase, malformed, or of a byte
 * that needs none.
 */
static long rindex_unescape(const char *s, size_t len, char *dst)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		const char *h, *l;
		unsigned char c;

		if (s[i] != '%') {
			if (rindex_needs_escape((unsigned char)s[i]))
				return -1;
			dst[o++] = s[i];
			continue;
		}
		if (len - i < 3 || !s[i + 1] || !s[i + 2])
			return -1;
		h = strchr(hex, s[i + 1]);
		l = strchr(hex, s[i + 2]);
		if (!h || !l)
			return -1;
		c = (unsigned char)((h - hex) * 16 + (l - hex));
		if (!rindex_needs_escape(c))
			return -1;
		dst[o++] = (char)c;
		i += 2;
	}
	return (long)o;
}

/* Splits line at TABs into exactly n fields. */
static bool rindex_fields(const char *line, size_t len, const char **f,
			  size_t *flen, size_t n)
{
	const char *p = line, *end = line + len;
	size_t i;

	for (i = 0; i < n; i++) {
		const char *tab = memchr(p, '\t', (size_t)(end - p));

		if ((tab == NULL) != (i == n - 1))
			return false;
		f[i] = p;
		flen[i] = (size_t)((tab ? tab : end) - p);
		p = tab ? tab + 1 : end;
	}
	return true;
}

/* The header lines up to "objects ...": sets the counts. */
static int rindex_parse_header(struct rindex_parser *ps, struct rindex *ri,
			       const struct manifest *m, enum rec_format f,
			       uint64_t *n_obj, uint64_t *n_rec,
			       uint64_t *n_skip)
{
	const char *l, *sp1, *sp2;
	size_t n;
	int g;

	if (!rindex_line(ps, &l, &n) || n != strlen(RINDEX_HEADER) ||
	    memcmp(l, RINDEX_HEADER, n) != 0)
		return rindex_fail(ps, "first line is not '" RINDEX_HEADER "'");
	if (!rindex_line(ps, &l, &n) || !rindex_prefix(l, n, "format ", 7))
		return rindex_fail(ps, "expected 'format NAME'");
	for (g = 0; g < REC_FORMAT_COUNT; g++)
		if (n - 7 == strlen(rec_format_names[g]) &&
		    memcmp(l + 7, rec_format_names[g], n - 7) == 0)
			break;
	if (g == REC_FORMAT_COUNT)
		return rindex_fail(ps, "unknown format '%.*s'", (int)(n - 7),
				   l + 7);
	if ((enum rec_format)g != f)
		return rindex_fail(ps, "index is for %s, the config says %s",
				   rec_format_names[g], rec_format_name(f));
	ri->format = f;
	if (!rindex_line(ps, &l, &n) || !rindex_prefix(l, n, "manifest ", 9) ||
	    !rindex_hex64(l + 9, n - 9))
		return rindex_fail(ps, "expected 'manifest SHA256HEX'");
	if (memcmp(l + 9, m->digest, SHA256_HEX_LEN) != 0)
		return rindex_fail(ps,
				   "index was built from manifest %.64s, the "
				   "manifest is %s",
				   l + 9, m->digest);
	memcpy(ri->manifest_digest, m->digest, sizeof(ri->manifest_digest));
	if (!rindex_line(ps, &l, &n) || !rindex_prefix(l, n, "objects ", 8))
		return rindex_fail(ps,
				   "expected 'objects N records N skipped N'");
	ps->objects_lineno = ps->lineno;
	sp1 = memmem(l + 8, n - 8, " records ", 9);
	sp2 = sp1 ? memmem(sp1 + 9, (size_t)(l + n - sp1 - 9), " skipped ", 9)
		  : NULL;
	if (!sp2 ||
	    !rindex_num(l + 8, (size_t)(sp1 - l - 8), UINT64_MAX, n_obj) ||
	    !rindex_num(sp1 + 9, (size_t)(sp2 - sp1 - 9), UINT64_MAX, n_rec) ||
	    !rindex_num(sp2 + 9, (size_t)(l + n - sp2 - 9), UINT64_MAX, n_skip))
		return rindex_fail(ps,
				   "expected 'objects N records N skipped N'");
	if (*n_obj > m->count || *n_skip != m->count - *n_obj)
		return rindex_fail(
			ps,
			"%llu objects and %llu skipped, the manifest "
			"has %zu objects",
			(unsigned long long)*n_obj, (unsigned long long)*n_skip,
			m->count);
	/* Every record line takes at least 2 bytes: a corrupt count cannot
	 * make us allocate more than the file's size justifies. */
	if (*n_rec > (uint64_t)(ps->end - ps->p) / 2 ||
	    *n_rec > SIZE_MAX / sizeof(uint64_t))
		return rindex_fail(ps, "%llu records do not fit in the file",
				   (unsigned long long)*n_rec);
	return 0;
}

/* Names the manifest entry i in a message: its escaped key. */
static int rindex_fail_key(struct rindex_parser *ps, const struct manifest *m,
			   size_t i, const char *what)
{
	char *key =
		manifest_escaped_copy(m->entries[i].key, m->entries[i].key_len);
	int rc = rindex_fail(ps, "object %s: %s", key ? key : "?", what);

	free(key);
	return rc;
}

/*
 * One "o" line and its record lines. *next is the manifest index of the
 * record object the line must name; scratch holds at least the line.
 */
static int rindex_parse_object(struct rindex_parser *ps, struct rindex *ri,
			       const char *l, size_t n, size_t *next,
			       uint64_t n_rec, char *scratch)
{
	const struct manifest *m = ri->manifest;
	const struct manifest_entry *e;
	struct rindex_object *o;
	const char *f[6];
	size_t fl[6], i;
	long klen, elen;
	uint64_t size, decoded, count, end = 0, r;
	const char *why;
	char msg[160];
	long j;

	if (!rindex_fields(l + 2, n - 2, f, fl, 6))
		return rindex_fail(ps, "expected 6 tab-separated fields after "
				       "'o '");
	klen = rindex_unescape(f[0], fl[0], scratch);
	if (klen < 0)
		return rindex_fail(ps, "key is not canonically escaped");
	j = manifest_find(m, scratch, (size_t)klen);
	if (j < 0 || !rec_format_selects(ri->format, scratch, (size_t)klen))
		return rindex_fail(ps,
				   "object %.*s is not a record object of the "
				   "manifest",
				   (int)fl[0], f[0]);
	if ((size_t)j < *next)
		return rindex_fail(ps, "object %.*s is out of order",
				   (int)fl[0], f[0]);
	if ((size_t)j > *next)
		return rindex_fail_key(ps, m, *next,
				       "record object of the manifest is "
				       "missing from the index");
	e = &m->entries[j];
	elen = rindex_unescape(f[1], fl[1], scratch);
	if (elen < 0)
		return rindex_fail(ps, "etag is not canonically escaped");
	if ((size_t)elen != e->etag_len ||
	    memcmp(scratch, e->etag, e->etag_len))
		return rindex_fail(ps,
				   "object %.*s: etag %.*s differs from "
				   "the manifest's",
				   (int)fl[0], f[0], (int)fl[1], f[1]);
	if (!rindex_num(f[2], fl[2], UINT64_MAX, &size))
		return rindex_fail(ps, "size is not a canonical number");
	if (size != e->size)
		return rindex_fail(ps,
				   "object %.*s: size %llu, the manifest "
				   "says %llu",
				   (int)fl[0], f[0], (unsigned long long)size,
				   (unsigned long long)e->size);
	if (!rindex_num(f[3], fl[3], UINT64_MAX, &decoded) ||
	    !rindex_num(f[4], fl[4], UINT32_MAX, &count))
		return rindex_fail(ps, "decoded size or count is not a "
				       "canonical number (count up to 2^32-1)");
	if (!rec_format_gzip(ri->format) && decoded != size)
		return rindex_fail(ps,
				   "object %.*s: decoded size %llu is not "
				   "its size (format %s is not compressed)",
				   (int)fl[0], f[0],
				   (unsigned long long)decoded,
				   rec_format_name(ri->format));
	if (fl[5] != 1 || (f[5][0] != '-' && f[5][0] != 'n'))
		return rindex_fail(ps, "flags must be - or n");
	if (count > n_rec - ri->n_records)
		return rindex_fail(ps,
				   "more records than the objects line "
				   "says (%llu)",
				   (unsigned long long)n_rec);

	o = &ri->objects[ri->n_objects];
	o->item = (uint32_t)j;
	o->decoded_size = decoded;
	o->first = ri->n_records;
	o->count = (uint32_t)count;
	o->nl_added = f[5][0] == 'n';
	for (r = ri->n_records, i = 0; i < count; i++, r++) {
		const char *rl, *sp;
		size_t rn;
		uint64_t off = end, len;

		if (!rindex_line(ps, &rl, &rn) ||
		    !(rn && ((rl[0] >= '0' && rl[0] <= '9') || rl[0] == '@')))
			return rindex_fail(ps,
					   "object %.*s has %zu record "
					   "lines, its count says %llu",
					   (int)fl[0], f[0], i,
					   (unsigned long long)count);
		if (rl[0] == '@') {
			sp = memchr(rl, ' ', rn);
			if (!sp || !rindex_num(rl + 1, (size_t)(sp - rl - 1),
					       UINT64_MAX, &off))
				return rindex_fail(ps, "expected '@OFFSET "
						       "LENGTH'");
			if (off == end)
				return rindex_fail(ps,
						   "'@%llu' where the "
						   "record follows the "
						   "previous one (not "
						   "canonical)",
						   (unsigned long long)off);
			rn -= (size_t)(sp + 1 - rl);
			rl = sp + 1;
		}
		if (!rindex_num(rl, rn, UINT64_MAX, &len))
			return rindex_fail(ps, "record length is not a "
					       "canonical number");
		if (len > UINT32_MAX)
			return rindex_fail(ps,
					   "record length %llu is over "
					   "2^32-1",
					   (unsigned long long)len);
		ri->rec_off[r] = off;
		ri->rec_len[r] = (uint32_t)len;
		/* Checked per line so the message names the line. */
		why = rindex_check_records(ri->format, decoded, false,
					   &ri->rec_off[r], &ri->rec_len[r], 1);
		if (!why && off < end)
			why = "record overlaps the previous one";
		if (why) {
			snprintf(msg, sizeof(msg), "%s", why);
			return rindex_fail_key(ps, m, (size_t)j, msg);
		}
		end = off + len;
	}
	why = rindex_check_records(ri->format, decoded, o->nl_added,
				   ri->rec_off + o->first,
				   ri->rec_len + o->first, o->count);
	if (why)
		return rindex_fail_key(ps, m, (size_t)j, why);
	ri->n_objects++;
	ri->n_records += count;
	*next = rindex_next_selected(m, ri->format, (size_t)j + 1);
	return 0;
}

/* The body (every line before the end line) into ri. */
static int rindex_parse_body(struct rindex_parser *ps, struct rindex *ri,
			     enum rec_format f)
{
	const struct manifest *m = ri->manifest;
	uint64_t n_obj, n_rec, n_skip;
	const char *l;
	size_t n, next, cap = 0;
	char *scratch = NULL;
	int rc;

	rc = rindex_parse_header(ps, ri, m, f, &n_obj, &n_rec, &n_skip);
	if (rc)
		return rc;
	ri->objects = calloc(n_obj ? n_obj : 1, sizeof(*ri->objects));
	ri->rec_off = malloc((n_rec ? n_rec : 1) * sizeof(*ri->rec_off));
	ri->rec_len = malloc((n_rec ? n_rec : 1) * sizeof(*ri->rec_len));
	if (!ri->objects || !ri->rec_off || !ri->rec_len)
		return -ENOMEM;
	ri->cap_objects = n_obj;
	ri->cap_records = n_rec;
	next = rindex_next_selected(m, f, 0);
	while (rindex_line(ps, &l, &n)) {
		if (!rindex_prefix(l, n, "o ", 2)) {
			rc = rindex_fail(
				ps, "expected an object line ('o KEY...')");
			break;
		}
		if (ri->n_objects == n_obj) {
			rc = rindex_fail(ps,
					 "more object lines than the "
					 "objects line says (%llu)",
					 (unsigned long long)n_obj);
			break;
		}
		if (n > cap) {
			char *p = realloc(scratch, n);

			if (!p) {
				rc = -ENOMEM;
				break;
			}
			scratch = p;
			cap = n;
		}
		rc = rindex_parse_object(ps, ri, l, n, &next, n_rec, scratch);
		if (rc)
			break;
	}
	free(scratch);
	if (rc)
		return rc;
	ps->lineno++; /* the end line */
	if (next < m->count)
		return rindex_fail_key(ps, m, next,
				       "record object of the manifest is "
				       "missing from the index");
	/* Fewer object lines than the count, with the skipped count made to
	 * add up: the writer never says so, and the skipped count would be
	 * wrong. Named at the objects line. */
	if (ri->n_objects != n_obj) {
		ps->lineno = ps->objects_lineno;
		return rindex_fail(ps,
				   "the objects line says %llu objects, the "
				   "index has %zu object lines",
				   (unsigned long long)n_obj, ri->n_objects);
	}
	if (ri->n_records != n_rec)
		return rindex_fail(ps,
				   "%llu records, the objects line says %llu",
				   (unsigned long long)ri->n_records,
				   (unsigned long long)n_rec);
	ri->skipped_objects = n_skip;
	return 0;
}

int rindex_parse(const char *name, const char *text, size_t len,
		 const struct manifest *m, enum rec_format f,
		 const char *expect_sha256, struct rindex **out)
{
	struct rindex_parser *ps;
	struct rindex *ri = NULL;
	const char *endl;
	char hex[SHA256_HEX_LEN + 1];
	size_t body;
	int rc;

	if (!name || (!text && len) || !out)
		return -EINVAL;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	ps->name = name;
	rc = rindex_new(f, m, &ri);
	if (rc)
		goto out;

	/* The end line: the last line, "end " and 64 hex digits. */
	endl = len ? memrchr(text, '\n', len - 1) : NULL;
	body = endl ? (size_t)(endl + 1 - text) : 0;
	for (ps->p = text; ps->p < text + body; ps->p++)
		if (*ps->p == '\n')
			ps->lineno++;
	ps->lineno++;
	if (len == 0 || text[len - 1] != '\n' ||
	    !rindex_prefix(text + body, len - body - 1, "end ", 4) ||
	    !rindex_hex64(text + body + 4, len - body - 5)) {
		rc = rindex_fail(ps, "last line is not 'end SHA256HEX' "
				     "(truncated file?)");
		goto out;
	}
	rc = sha256_hex(text, body, hex);
	if (rc)
		goto out;
	if (memcmp(hex, text + body + 4, SHA256_HEX_LEN) != 0) {
		rc = rindex_fail(ps,
				 "the end line says %.64s but the bytes before "
				 "it digest to %s (damaged file)",
				 text + body + 4, hex);
		goto out;
	}
	/* The pin first: a file that is not the pinned one is named by both
	 * digests, whatever else is wrong with it. */
	if (expect_sha256 && strcmp(expect_sha256, hex) != 0) {
		log_msg(LOG_ERR,
			"%s: index_sha256 is %s but the file's digest is %s",
			name, expect_sha256, hex);
		rc = -EINVAL;
		goto out;
	}

	ps->p = text;
	ps->end = text + body;
	ps->lineno = 0;
	rc = rindex_parse_body(ps, ri, f);
	if (rc)
		goto out;
	memcpy(ri->digest, hex, sizeof(ri->digest));
	ri->finished = true;
	*out = ri;
	ri = NULL;
out:
	if (ps->why[0])
		log_msg(LOG_ERR, "%s:%zu: %s", name, ps->lineno, ps->why);
	rindex_free(ri);
	free(ps);
	return rc;
}

int rindex_load(const char *path, const struct manifest *m, enum rec_format f,
		const char *expect_sha256, struct rindex **out)
{
	struct stat st;
	char *text = NULL;
	size_t got = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		log_msg(LOG_ERR, "record index %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto err;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = -ENOMEM;
		goto err_close;
	}
	while (got < (size_t)st.st_size) {
		ssize_t k = read(fd, text + got, (size_t)st.st_size - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			goto err;
		}
		got += (size_t)k;
	}
	close(fd);
	rc = rindex_parse(path, text, got, m, f, expect_sha256, out);
	free(text);
	return rc;
err:
	log_msg(LOG_ERR, "record index %s: %s", path, strerror(-rc));
err_close:
	free(text);
	close(fd);
	return rc;
}
