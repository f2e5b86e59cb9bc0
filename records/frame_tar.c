/*
 * frame_tar: WebDataset tar framing (frame_tar.h, docs/RECORDS.md §1).
 *
 * A state machine over 512-byte blocks: a header (collected whole, its
 * checksum checked), then the member's data and padding, skipped as they
 * arrive (extended headers' data collected, up to REC_TAR_EXT_MAX). Pax
 * 'x' and GNU 'L'/'K' headers are prefixes of the member they precede:
 * the member starts at the first of them. Regular files with the same key
 * in a row form one sample, emitted once the next member (or the end)
 * shows it is complete. The end of the archive is the first zero block
 * (GNU tar and Python's tarfile stop there too); only zero bytes may
 * follow it.
 */
#include "records/frame_tar.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAR_BLOCK 512
/* Sizes above this are refused: offsets stay far from overflow. */
#define TAR_SIZE_MAX (1ULL << 62)

enum tar_state {
	TAR_HEADER, /* collecting a header block */
	TAR_DATA,   /* skipping a member's data, then its padding */
	TAR_EXT,    /* collecting an extended header's data */
	TAR_END,    /* after the first zero block: zero bytes only */
};

struct rec_tar {
	rec_emit_fn emit;
	void *arg;
	char *err;
	size_t cap;
	uint64_t off; /* bytes consumed */
	enum tar_state state;
	unsigned char blk[TAR_BLOCK];
	size_t have;	    /* bytes of blk collected */
	uint64_t hdr_off;   /* the header being read, or whose data is */
	uint64_t size;	    /* that member's data size */
	uint64_t data_left; /* of its data */
	uint64_t pad_left;  /* of its padding, after the data */
	/* TAR_EXT: the extended header's data. */
	char ext_type;
	unsigned char *ext;
	size_t ext_have;
	/* Prefix headers seen for the next member. */
	bool prefix;
	uint64_t prefix_off;
	bool pax_seen, pax_has_path, pax_has_size, long_name_seen;
	char *pax_path; /* may be NULL when empty */
	size_t pax_path_len;
	uint64_t pax_size;
	char *long_name; /* GNU 'L'; may be NULL when empty */
	size_t long_name_len;
	/* The sample in progress. */
	bool sample;
	uint64_t sample_off, sample_end;
	char *key;
	size_t key_len, key_cap;
	uint64_t records, skipped;
};

static int tar_fail(struct rec_tar *t, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int tar_fail(struct rec_tar *t, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(t->err, t->cap, "offset %llu: ", (unsigned long long)off);
	if (n < 0 || (size_t)n >= t->cap)
		return -EBADMSG;
	va_start(ap, fmt);
	vsnprintf(t->err + n, t->cap - (size_t)n, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

int rec_tar_new(rec_emit_fn emit, void *arg, char *err, size_t cap,
		struct rec_tar **out)
{
	struct rec_tar *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	t->emit = emit;
	t->arg = arg;
	t->err = err;
	t->cap = cap;
	*out = t;
	return 0;
}

static void tar_clear_prefix(struct rec_tar *t)
{
	free(t->pax_path);
	free(t->long_name);
	t->pax_path = t->long_name = NULL;
	t->pax_path_len = t->long_name_len = 0;
	t->pax_seen = t->pax_has_path = t->pax_has_size = false;
	t->long_name_seen = false;
	t->prefix = false;
}

void rec_tar_free(struct rec_tar *t)
{
	if (t == NULL)
		return;
	tar_clear_prefix(t);
	free(t->ext);
	free(t->key);
	free(t);
}

uint64_t rec_tar_skipped(const struct rec_tar *t)
{
	return t->skipped;
}

/* Emits the sample in progress, if any. */
static int tar_flush(struct rec_tar *t)
{
	int rc;

	if (!t->sample)
		return 0;
	t->sample = false;
	rc = t->emit(t->arg, t->sample_off, t->sample_end - t->sample_off,
		     t->key, t->key_len);
	if (rc < 0)
		return rc;
	t->records++;
	return 0;
}

/* A numeric field as Python's tarfile and GNU tar read it: text cut at
 * the first NUL, spaces around it stripped, octal digits (empty is 0); or
 * GNU base-256, 0x80 then big-endian bytes. -1 if neither, -2 if negative
 * (0xff) or above TAR_SIZE_MAX. */
static int tar_number(const unsigned char *f, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0, end;

	if (f[0] == 0x80 || f[0] == 0xff) {
		if (f[0] == 0xff)
			return -2;
		for (i = 1; i < n; i++) {
			if (v > (TAR_SIZE_MAX >> 8))
				return -2;
			v = v << 8 | f[i];
		}
		if (v > TAR_SIZE_MAX)
			return -2;
		*out = v;
		return 0;
	}
	end = strnlen((const char *)f, n);
	while (i < end && f[i] == ' ')
		i++;
	while (end > i && f[end - 1] == ' ')
		end--;
	for (; i < end; i++) {
		if (f[i] < '0' || f[i] > '7')
			return -1;
		if (v > (TAR_SIZE_MAX >> 3))
			return -2;
		v = v << 3 | (uint64_t)(f[i] - '0');
	}
	if (v > TAR_SIZE_MAX)
		return -2;
	*out = v;
	return 0;
}

static int tar_checksum(struct rec_tar *t)
{
	uint64_t stored;
	unsigned long usum = 0;
	long ssum = 0;
	int i;

	for (i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : t->blk[i];

		usum += c;
		ssum += (signed char)c;
	}
	if (tar_number(t->blk + 148, 8, &stored) != 0)
		return tar_fail(t, t->hdr_off,
				"tar header checksum field is not octal");
	if (stored != usum && (long long)stored != (long long)ssum)
		return tar_fail(t, t->hdr_off,
				"tar header checksum mismatch (stored 0%llo, "
				"computed 0%lo)",
				(unsigned long long)stored, usum);
	return 0;
}

/* Records "LEN keyword=value\n" of a pax 'x' header: path and size are
 * kept for the next member, others ignored. Trailing NULs (some writers
 * pad) are accepted, nothing else. */
static int tar_pax(struct rec_tar *t)
{
	const unsigned char *b = t->ext;
	size_t n = t->ext_have, p = 0;

	while (p < n) {
		size_t len = 0, q = p, kw, eq, vend;

		if (b[p] == '\0') {
			for (; p < n; p++)
				if (b[p] != '\0')
					goto bad;
			break;
		}
		while (q < n && b[q] >= '0' && b[q] <= '9' && len <= n) {
			len = len * 10 + (size_t)(b[q] - '0');
			q++;
		}
		if (q == p || q >= n || b[q] != ' ' || len > n - p ||
		    len < q - p + 3 || b[p + len - 1] != '\n')
			goto bad;
		kw = q + 1;
		vend = p + len - 1;
		for (eq = kw; eq < vend && b[eq] != '='; eq++)
			;
		if (eq == vend || eq == kw)
			goto bad;
		if (eq - kw > 11 && memcmp(b + kw, "GNU.sparse.", 11) == 0)
			return tar_fail(t, t->hdr_off,
					"GNU sparse file (pax) not supported");
		if (eq - kw == 4 && memcmp(b + kw, "path", 4) == 0) {
			free(t->pax_path);
			t->pax_path = NULL;
			t->pax_has_path = true;
			/* Python's tarfile strips a pax path's trailing
			 * slashes (whatever the type). */
			for (t->pax_path_len = vend - eq - 1;
			     t->pax_path_len > 0 &&
			     b[eq + t->pax_path_len] == '/';
			     t->pax_path_len--)
				;
			if (t->pax_path_len > 0) {
				t->pax_path = malloc(t->pax_path_len);
				if (t->pax_path == NULL)
					return -ENOMEM;
				memcpy(t->pax_path, b + eq + 1,
				       t->pax_path_len);
			}
		} else if (eq - kw == 4 && memcmp(b + kw, "size", 4) == 0) {
			uint64_t v = 0;
			size_t i;

			t->pax_has_size = vend > eq + 1;
			for (i = eq + 1; i < vend; i++) {
				if (b[i] < '0' || b[i] > '9' ||
				    v > TAR_SIZE_MAX / 10)
					return tar_fail(t, t->hdr_off,
							"pax size is not a "
							"number in range");
				v = v * 10 + (uint64_t)(b[i] - '0');
			}
			if (v > TAR_SIZE_MAX)
				return tar_fail(t, t->hdr_off,
						"pax size is not a number in "
						"range");
			t->pax_size = v;
		}
		p += len;
	}
	return 0;
bad:
	return tar_fail(t, t->hdr_off, "malformed pax record at byte %zu", p);
}

/* The extended header's data is complete: keep what it says. */
static int tar_ext_done(struct rec_tar *t)
{
	int rc = 0;

	if (t->ext_type == 'x' || t->ext_type == 'X') {
		rc = tar_pax(t);
	} else if (t->ext_type == 'L') {
		size_t n = strnlen((const char *)t->ext, t->ext_have);

		free(t->long_name);
		t->long_name = NULL;
		t->long_name_seen = true;
		t->long_name_len = n;
		if (n > 0) {
			t->long_name = malloc(n);
			if (t->long_name == NULL)
				return -ENOMEM;
			memcpy(t->long_name, t->ext, n);
		}
	}
	free(t->ext);
	t->ext = NULL;
	t->state = t->pad_left > 0 ? TAR_DATA : TAR_HEADER;
	/* GNU tar lets a pax path win, Python's tarfile the first header:
	 * only one source of a name is unambiguous. */
	if (rc == 0 && t->pax_has_path && t->long_name_seen)
		return tar_fail(t, t->prefix_off,
				"both a pax path and a GNU long name for one "
				"member");
	return rc;
}

static uint64_t tar_pad(uint64_t size)
{
	return (TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK;
}

/* A regular file's member [start, end) with path: joins the sample in
 * progress if its key is the same, else ends it and starts one. */
static int tar_regular(struct rec_tar *t, const char *path, size_t len,
		       uint64_t start, uint64_t end)
{
	size_t comp = len, key_len;
	int rc;

	while (comp > 0 && path[comp - 1] != '/')
		comp--;
	for (key_len = comp; key_len < len && path[key_len] != '.'; key_len++)
		;
	if (t->sample && key_len == t->key_len &&
	    (key_len == 0 || memcmp(path, t->key, key_len) == 0)) {
		t->sample_end = end;
		return 0;
	}
	rc = tar_flush(t);
	if (rc < 0)
		return rc;
	if (key_len > t->key_cap) {
		char *k = realloc(t->key, key_len);

		if (k == NULL)
			return -ENOMEM;
		t->key = k;
		t->key_cap = key_len;
	}
	if (key_len > 0)
		memcpy(t->key, path, key_len);
	t->key_len = key_len;
	t->sample = true;
	t->sample_off = start;
	t->sample_end = end;
	return 0;
}

/* A whole header block at t->hdr_off. */
static int tar_header(struct rec_tar *t)
{
	const unsigned char *h = t->blk;
	char type = (char)h[156], path[256 + 1];
	const char *p;
	uint64_t size, start;
	size_t i, plen;
	bool v7dir;
	int rc;

	for (i = 0; i < TAR_BLOCK && h[i] == 0; i++)
		;
	if (i == TAR_BLOCK) {
		if (t->prefix)
			return tar_fail(t, t->prefix_off,
					"extended header without a member "
					"(end of archive follows)");
		t->state = TAR_END;
		return tar_flush(t);
	}
	rc = tar_checksum(t);
	if (rc < 0)
		return rc;
	rc = tar_number(h + 124, 12, &size);
	if (rc == -1)
		return tar_fail(t, t->hdr_off,
				"tar size field is not a number");
	if (rc < 0)
		return tar_fail(t, t->hdr_off, "tar size out of range");
	if (type == 'g')
		return tar_fail(t, t->hdr_off,
				"pax global header not supported");
	if (type == 'x' || type == 'X' || type == 'L' || type == 'K') {
		if (size > REC_TAR_EXT_MAX)
			return tar_fail(
				t, t->hdr_off,
				"extended header too large (%llu bytes, "
				"at most %d)",
				(unsigned long long)size, REC_TAR_EXT_MAX);
		/* Two of a kind for one member: readers disagree on which
		 * wins (Python's tarfile the first, GNU tar the last). */
		if ((type == 'x' || type == 'X') && t->pax_seen)
			return tar_fail(t, t->hdr_off,
					"two pax headers for one member not "
					"supported");
		if (type == 'L' && t->long_name_seen)
			return tar_fail(t, t->hdr_off,
					"two GNU long names for one member not "
					"supported");
		if (type == 'x' || type == 'X')
			t->pax_seen = true;
		if (!t->prefix) {
			t->prefix = true;
			t->prefix_off = t->hdr_off;
		}
		t->ext_type = type;
		t->size = size;
		t->data_left = size;
		t->pad_left = tar_pad(size);
		t->ext_have = 0;
		free(t->ext);
		t->ext = malloc(size > 0 ? size : 1);
		if (t->ext == NULL)
			return -ENOMEM;
		t->state = TAR_EXT;
		return size == 0 ? tar_ext_done(t) : 0;
	}
	if (t->pax_has_size)
		size = t->pax_size;
	start = t->prefix ? t->prefix_off : t->hdr_off;
	/* The member's path: pax path, else GNU long name, else the
	 * header's (ustar: prefix "/" name). */
	if (t->pax_has_path) {
		p = t->pax_path;
		plen = t->pax_path_len;
	} else if (t->long_name_seen) {
		p = t->long_name;
		plen = t->long_name_len;
	} else {
		size_t n = strnlen((const char *)h, 100), pre = 0;

		if (memcmp(h + 257, "ustar\0", 6) == 0)
			pre = strnlen((const char *)h + 345, 155);
		if (pre > 0) {
			memcpy(path, h + 345, pre);
			path[pre++] = '/';
		}
		memcpy(path + pre, h, n);
		p = path;
		plen = pre + n;
	}
	/* As Python's tarfile (webdataset's reader): '\0' with a header
	 * name ending in '/' is an old-style directory; '0' and '7' are
	 * files whatever their name (GNU tar skips their data too). */
	v7dir = type == '\0' && strnlen((const char *)h, 100) > 0 &&
		h[strnlen((const char *)h, 100) - 1] == '/';
	if (type == '0' || type == '7' || (type == '\0' && !v7dir)) {
		t->size = size;
		t->data_left = size;
		t->pad_left = tar_pad(size);
		rc = tar_regular(t, p, plen, start,
				 t->hdr_off + TAR_BLOCK + size + t->pad_left);
		tar_clear_prefix(t);
		if (rc < 0)
			return rc;
		t->state = size > 0 ? TAR_DATA : TAR_HEADER;
		return 0;
	}
	if (v7dir || (type >= '1' && type <= '6')) {
		/* Not part of a sample. Readers disagree on whether such a
		 * member's size counts (Python's tarfile skips no data for
		 * it, GNU tar does): only 0 is unambiguous. */
		if (size != 0)
			return tar_fail(t, t->hdr_off,
					"tar member of type '%c' with data "
					"(size %llu) not supported",
					type ? type : '0',
					(unsigned long long)size);
		tar_clear_prefix(t);
		t->skipped++;
		return tar_flush(t);
	}
	if (type >= 0x21 && type < 0x7f)
		return tar_fail(t, t->hdr_off,
				"unsupported tar member type '%c'", type);
	return tar_fail(t, t->hdr_off, "unsupported tar member type 0x%02x",
			(unsigned char)type);
}

int rec_tar_feed(struct rec_tar *t, const unsigned char *p, size_t len)
{
	size_t k;
	int rc;

	while (len > 0) {
		switch (t->state) {
		case TAR_HEADER:
			if (t->have == 0)
				t->hdr_off = t->off;
			k = TAR_BLOCK - t->have;
			k = k < len ? k : len;
			memcpy(t->blk + t->have, p, k);
			t->have += k;
			break;
		case TAR_DATA:
			k = len;
			if (t->data_left + t->pad_left < k)
				k = (size_t)(t->data_left + t->pad_left);
			break;
		case TAR_EXT:
			k = len < t->data_left ? len : (size_t)t->data_left;
			memcpy(t->ext + t->ext_have, p, k);
			t->ext_have += k;
			break;
		default: /* TAR_END */
			for (k = 0; k < len; k++)
				if (p[k] != 0)
					return tar_fail(
						t, (t->off + k) & ~511ULL,
						"data after end of archive");
			break;
		}
		p += k;
		len -= k;
		t->off += k;
		rc = 0;
		if (t->state == TAR_HEADER && t->have == TAR_BLOCK) {
			t->have = 0;
			rc = tar_header(t);
		} else if (t->state == TAR_DATA) {
			uint64_t d = k < t->data_left ? k : t->data_left;

			t->data_left -= d;
			t->pad_left -= k - d;
			if (t->data_left + t->pad_left == 0)
				t->state = TAR_HEADER;
		} else if (t->state == TAR_EXT) {
			t->data_left -= k;
			if (t->data_left == 0)
				rc = tar_ext_done(t);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

int rec_tar_finish(struct rec_tar *t)
{
	switch (t->state) {
	case TAR_HEADER:
		if (t->have > 0)
			return tar_fail(t, t->hdr_off,
					"truncated: tar header cut short (%zu "
					"of %d bytes)",
					t->have, TAR_BLOCK);
		if (t->prefix)
			return tar_fail(t, t->prefix_off,
					"truncated: extended header without a "
					"member");
		return tar_flush(t);
	case TAR_DATA:
	case TAR_EXT:
		return tar_fail(
			t, t->hdr_off,
			"truncated: member data cut short (size %llu "
			"and %llu bytes of padding, %llu present)",
			(unsigned long long)t->size,
			(unsigned long long)tar_pad(t->size),
			(unsigned long long)(t->size + tar_pad(t->size) -
					     t->data_left - t->pad_left));
	default:
		return 0;
	}
}
