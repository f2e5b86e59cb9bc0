/*
 * rindex: the record index and its canonical file (records/rindex.h,
 * docs/RECORDS.md §2).
 *
 * Design: the file is the canonical form itself, so the digest is computed
 * over the bytes as written: one writer (rindex_emit_body) feeds both the
 * digest at finish and the file at write, and the loader accepts only what
 * that writer would produce (numbers without leading zeros, escapes only
 * where the manifest escapes, '@' only where a record does not start where
 * the previous one ended). So two indexes with the same content have the
 * same bytes and the same digest, and any other byte form is refused.
 *
 * The loader (rindex_load.c) shares the record checks (rindex_impl.h),
 * so the builder and the loader accept the same indexes.
 */
#include "records/rindex.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records/rindex_impl.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/str.h"

/* --- builder ------------------------------------------------------------ */

/* Manifest index of the first record object of m at or after i, or
 * m->count. */
size_t rindex_next_selected(const struct manifest *m, enum rec_format f,
			    size_t i)
{
	while (i < m->count &&
	       !rec_format_selects(f, m->entries[i].key, m->entries[i].key_len))
		i++;
	return i;
}

static bool rindex_is_jsonl(enum rec_format f)
{
	return rec_format_base(f) == REC_FORMAT_JSONL;
}

int rindex_new(enum rec_format f, const struct manifest *m, struct rindex **out)
{
	struct rindex *ri;

	if (!m || !out || !rec_format_name(f) || !m->finished)
		return -EINVAL;
	ri = calloc(1, sizeof(*ri));
	if (!ri)
		return -ENOMEM;
	ri->format = f;
	ri->manifest = m;
	memcpy(ri->manifest_digest, m->digest, sizeof(ri->manifest_digest));
	*out = ri;
	return 0;
}

void rindex_free(struct rindex *ri)
{
	if (!ri)
		return;
	free(ri->objects);
	free(ri->rec_off);
	free(ri->rec_len);
	free(ri);
}

/* Room for one more object and extra more records. */
static int rindex_reserve(struct rindex *ri, uint64_t extra)
{
	uint64_t need = ri->n_records + extra;

	if (ri->n_objects == ri->cap_objects) {
		size_t cap = ri->cap_objects ? 2 * ri->cap_objects : 16;
		void *p = realloc(ri->objects, cap * sizeof(*ri->objects));

		if (!p)
			return -ENOMEM;
		ri->objects = p;
		ri->cap_objects = cap;
	}
	if (need > ri->cap_records) {
		uint64_t cap = ri->cap_records ? 2 * ri->cap_records : 1024;
		void *o, *l;

		if (cap < need)
			cap = need;
		if (cap > SIZE_MAX / sizeof(uint64_t))
			return -ENOMEM;
		o = realloc(ri->rec_off, (size_t)cap * sizeof(*ri->rec_off));
		if (!o)
			return -ENOMEM;
		ri->rec_off = o;
		l = realloc(ri->rec_len, (size_t)cap * sizeof(*ri->rec_len));
		if (!l)
			return -ENOMEM;
		ri->rec_len = l;
		ri->cap_records = cap;
	}
	return 0;
}

/*
 * Checks one object's records; NULL if they are valid, else a static
 * message. Shared by the builder and the loader so both accept the same.
 */
const char *rindex_check_records(enum rec_format f, uint64_t decoded,
				 bool nl_added, const uint64_t *off,
				 const uint32_t *len, uint32_t count)
{
	uint64_t end = 0;
	uint32_t i;

	if (nl_added && !rindex_is_jsonl(f))
		return "flag n (newline added) on a non-jsonl object";
	if (nl_added && count == 0)
		return "flag n (newline added) on an object with no records";
	for (i = 0; i < count; i++) {
		if (len[i] == 0)
			return "empty record";
		if (off[i] < end)
			return "record overlaps the previous one";
		if (off[i] > decoded || len[i] > decoded - off[i])
			return "record ends past the object's decoded size";
		end = off[i] + len[i];
	}
	if (nl_added && end != decoded)
		return "flag n but the last record does not end the stream";
	return NULL;
}

int rindex_add_object(struct rindex *ri, uint32_t item, uint64_t decoded_size,
		      bool nl_added, const uint64_t *off, const uint32_t *len,
		      uint32_t count)
{
	const struct manifest *m;
	const struct manifest_entry *e;
	struct rindex_object *o;
	const char *why = NULL;
	size_t want;
	char *key;
	int rc;

	if (!ri || ri->finished || (count && (!off || !len)))
		return -EINVAL;
	m = ri->manifest;
	want = rindex_next_selected(
		m, ri->format,
		ri->n_objects ? ri->objects[ri->n_objects - 1].item + 1 : 0);
	if (item >= m->count || item != want) {
		key = item < m->count
			      ? manifest_escaped_copy(m->entries[item].key,
						      m->entries[item].key_len)
			      : NULL;
		log_msg(LOG_ERR,
			"record index: object %u (%s) added, the next record "
			"object of the manifest is %zu",
			item, key ? key : "?", want);
		free(key);
		return -EINVAL;
	}
	e = &m->entries[item];
	if (!rec_format_gzip(ri->format) && decoded_size != e->size)
		why = "decoded size differs from the object's size";
	else
		why = rindex_check_records(ri->format, decoded_size, nl_added,
					   off, len, count);
	if (why) {
		key = manifest_escaped_copy(e->key, e->key_len);
		log_msg(LOG_ERR, "record index: object %s: %s", key ? key : "?",
			why);
		free(key);
		return -EINVAL;
	}
	if (ri->n_records > UINT64_MAX - count)
		return -EOVERFLOW;
	rc = rindex_reserve(ri, count);
	if (rc < 0)
		return rc;
	if (count) {
		memcpy(ri->rec_off + ri->n_records, off, count * sizeof(*off));
		memcpy(ri->rec_len + ri->n_records, len, count * sizeof(*len));
	}
	o = &ri->objects[ri->n_objects++];
	o->item = item;
	o->decoded_size = decoded_size;
	o->first = ri->n_records;
	o->count = count;
	o->nl_added = nl_added;
	ri->n_records += count;
	return 0;
}

/* --- canonical bytes ---------------------------------------------------- */

/* One writer for the digest and the file: bytes go through a buffer into
 * the digest and, when f is set, the file. */
struct rindex_emit {
	struct sha256 *sha;
	FILE *f;
	size_t used;
	int err;
	char buf[1 << 16];
};

static void emit_flush(struct rindex_emit *e)
{
	if (e->used && !e->err) {
		if (e->sha && sha256_update(e->sha, e->buf, e->used) < 0)
			e->err = -EIO;
		if (e->f && fwrite(e->buf, 1, e->used, e->f) != e->used)
			e->err = -EIO;
	}
	e->used = 0;
}

static void emit_bytes(struct rindex_emit *e, const void *p, size_t n)
{
	const char *s = p;

	while (n) {
		size_t k = sizeof(e->buf) - e->used;

		if (k > n)
			k = n;
		memcpy(e->buf + e->used, s, k);
		e->used += k;
		s += k;
		n -= k;
		if (e->used == sizeof(e->buf))
			emit_flush(e);
	}
}

static void emit_str(struct rindex_emit *e, const char *s)
{
	emit_bytes(e, s, strlen(s));
}

static void emit_u64(struct rindex_emit *e, uint64_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	emit_bytes(e, tmp + i, sizeof(tmp) - i);
}

/* A line's fixed text and numbers, in one format (the file's layout as
 * docs/RECORDS.md shows it). Only for short texts: what would not fit
 * tmp sets e->err, never a cut line. */
static void emit_fmt(struct rindex_emit *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void emit_fmt(struct rindex_emit *e, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		if (!e->err)
			e->err = -EOVERFLOW;
		return;
	}
	emit_bytes(e, tmp, (size_t)n);
}

/* The manifest's escaping (manifest_write_escaped): '%' and bytes below
 * 0x20 as %XX, uppercase. */
bool rindex_needs_escape(unsigned char c)
{
	return str_key_escapes(c);
}

static void emit_escaped(struct rindex_emit *e, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (rindex_needs_escape(c)) {
			char esc[3];

			hex_percent(c, esc);
			emit_bytes(e, esc, 3);
		} else {
			emit_bytes(e, s + i, 1);
		}
	}
}

/* Every line before the end line. */
static void rindex_emit_body(const struct rindex *ri, struct rindex_emit *e)
{
	const struct manifest *m = ri->manifest;
	size_t i;

	emit_fmt(e,
		 RINDEX_HEADER "\nformat %s\nmanifest %s\nobjects %" PRIu64
			       " records %" PRIu64 " skipped %" PRIu64 "\n",
		 rec_format_name(ri->format), ri->manifest_digest,
		 (uint64_t)ri->n_objects, (uint64_t)ri->n_records,
		 (uint64_t)ri->skipped_objects);
	for (i = 0; i < ri->n_objects; i++) {
		const struct rindex_object *o = &ri->objects[i];
		const struct manifest_entry *me = &m->entries[o->item];
		uint64_t r, end = 0;

		emit_str(e, "o ");
		emit_escaped(e, me->key, me->key_len);
		emit_str(e, "\t");
		emit_escaped(e, me->etag, me->etag_len);
		emit_fmt(e, "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%c\n",
			 (uint64_t)me->size, (uint64_t)o->decoded_size,
			 (uint64_t)o->count, o->nl_added ? 'n' : '-');
		for (r = o->first; r < o->first + o->count; r++) {
			if (ri->rec_off[r] != end) {
				emit_str(e, "@");
				emit_u64(e, ri->rec_off[r]);
				emit_str(e, " ");
			}
			emit_u64(e, ri->rec_len[r]);
			emit_str(e, "\n");
			end = ri->rec_off[r] + ri->rec_len[r];
		}
	}
}

/* hex = SHA-256 of the body. */
static int rindex_body_digest(const struct rindex *ri, char hex[65])
{
	struct rindex_emit *e = calloc(1, sizeof(*e));
	uint8_t d[SHA256_LEN];
	int rc;

	if (!e)
		return -ENOMEM;
	e->sha = sha256_new();
	if (!e->sha) {
		free(e);
		return -ENOMEM;
	}
	rindex_emit_body(ri, e);
	emit_flush(e);
	rc = e->err;
	if (!rc)
		rc = sha256_final(e->sha, d);
	sha256_free(e->sha);
	free(e);
	if (rc)
		return rc;
	hex_encode(d, SHA256_LEN, hex);
	return 0;
}

int rindex_finish(struct rindex *ri)
{
	const struct manifest *m;
	size_t want;
	int rc;

	if (!ri || ri->finished)
		return -EINVAL;
	m = ri->manifest;
	want = rindex_next_selected(
		m, ri->format,
		ri->n_objects ? ri->objects[ri->n_objects - 1].item + 1 : 0);
	if (want < m->count) {
		char *key = manifest_escaped_copy(m->entries[want].key,
						  m->entries[want].key_len);

		log_msg(LOG_ERR,
			"record index: record object %s of the manifest was "
			"not indexed",
			key ? key : "?");
		free(key);
		return -EINVAL;
	}
	ri->skipped_objects = m->count - ri->n_objects;
	/* Give back the builder's slack: the index stays 12 bytes/record. */
	if (ri->n_records && ri->cap_records > ri->n_records) {
		void *o =
			realloc(ri->rec_off, ri->n_records * sizeof(uint64_t));
		void *l;

		if (o)
			ri->rec_off = o;
		l = realloc(ri->rec_len, ri->n_records * sizeof(uint32_t));
		if (l)
			ri->rec_len = l;
		if (o && l)
			ri->cap_records = ri->n_records;
	}
	rc = rindex_body_digest(ri, ri->digest);
	if (rc)
		return rc;
	ri->finished = true;
	return 0;
}

int rindex_write(const struct rindex *ri, FILE *f)
{
	struct rindex_emit *e;
	int rc;

	if (!ri || !ri->finished)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->f = f;
	rindex_emit_body(ri, e);
	emit_fmt(e, "end %s\n", ri->digest);
	emit_flush(e);
	rc = e->err;
	free(e);
	if (!rc && (fflush(f) == EOF || ferror(f)))
		rc = -EIO;
	return rc;
}

/* --- queries ------------------------------------------------------------ */

const struct rindex_object *rindex_object_of(const struct rindex *ri,
					     uint64_t r)
{
	size_t lo = 0, hi = ri->n_objects;

	if (r >= ri->n_records)
		return NULL;
	/* The last object whose first <= r: empty objects before it share
	 * its first, empty ones after it start past r. */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (ri->objects[mid].first <= r)
			lo = mid;
		else
			hi = mid;
	}
	return &ri->objects[lo];
}

uint64_t rindex_served_len(const struct rindex *ri, uint64_t r)
{
	const struct rindex_object *o = rindex_object_of(ri, r);

	if (!o)
		return 0;
	return (uint64_t)ri->rec_len[r] +
	       (o->nl_added && r == o->first + o->count - 1);
}

size_t rindex_mem_bytes(const struct rindex *ri)
{
	return sizeof(*ri) + ri->cap_objects * sizeof(*ri->objects) +
	       (size_t)ri->cap_records *
		       (sizeof(*ri->rec_off) + sizeof(*ri->rec_len));
}
