/*
 * fs/xfview: what a transform tree (docs/DESIGN.md §3, "Transform views")
 * shows in place of its base's names: the manifest with each key's last
 * component changed by the transform's name rule, and the plan without
 * the items whose new name collides.
 *
 * The rule changes only a key's file name, never a directory, so the
 * renamed keys keep the source's directories and every key under one
 * directory stays contiguous in manifest order: view_build() lays the
 * renamed manifest out as it does the source. Two renamed keys may be
 * equal (a.jpg and a.jpeg, both a.png with replace_extension), a renamed
 * key may name one of the source's directories (a.png/ beside a.jpg), or
 * a new name may exceed 255 bytes: such an item is skipped (the first by
 * manifest order keeps the name), counted, and left out of the tree's
 * plan, so neither its directory nor its order file shows it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_impl.h"

/* Raw byte order, a proper prefix first (the manifest's order). */
static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen;
}

static int index_cmp(const void *pa, const void *pb, void *ctx)
{
	const struct manifest_entry *e = ctx;
	uint32_t ia = *(const uint32_t *)pa, ib = *(const uint32_t *)pb;
	int c = key_cmp(e[ia].key, e[ia].key_len, e[ib].key, e[ib].key_len);

	/* Equal names: the lower index first, which keeps the name. */
	return c != 0 ? c : (ia > ib) - (ia < ib);
}

/* Whether some key of m starts with dir + "/" (dir is a directory). */
static bool is_dir(const struct manifest *m, const char *dir, size_t len)
{
	size_t lo = 0, hi = m->count;

	/* A lower bound of dir + "/" in the manifest's byte order. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct manifest_entry *e = &m->entries[mid];
		size_t n = e->key_len < len ? e->key_len : len;
		int c = memcmp(e->key, dir, n);

		if (c == 0 && e->key_len <= len)
			c = -1; /* dir itself, or a prefix of it */
		else if (c == 0)
			c = (unsigned char)e->key[len] - '/';
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->count && m->entries[lo].key_len > len &&
	       memcmp(m->entries[lo].key, dir, len) == 0 &&
	       m->entries[lo].key[len] == '/';
}

/* The length of key's new name (written to out, which has room for
 * key_len + strlen(suffix) + 1 bytes), or -ENAMETOOLONG. */
static long rename_key(const struct fs_transform *t, const char *key,
		       size_t key_len, char *out)
{
	const char *base = memrchr(key, '/', key_len);
	size_t base_off = base != NULL ? (size_t)(base - key) + 1 : 0;
	size_t keep = key_len, slen = strlen(t->suffix);

	if (t->replace_extension) {
		const char *dot =
			memrchr(key + base_off, '.', key_len - base_off);

		/* From the last dot, if it is not the name's first byte. */
		if (dot != NULL && dot != key + base_off)
			keep = (size_t)(dot - key);
	}
	if (keep - base_off + slen > 255)
		return -ENAMETOOLONG;
	memcpy(out, key, keep);
	memcpy(out + keep, t->suffix, slen);
	out[keep + slen] = '\0';
	return (long)(keep + slen);
}

void fs_xf_names_free(struct fs_xf_names *n)
{
	if (n == NULL)
		return;
	free(n->m.entries);
	free(n->keys);
	free(n->skip);
	free(n);
}

int fs_xf_names_build(const struct manifest *src, const struct fs_transform *t,
		      struct fs_xf_names **out)
{
	struct fs_xf_names *n = calloc(1, sizeof(*n));
	size_t i, bytes = 0, slen = strlen(t->suffix), at = 0;
	uint32_t *sorted = NULL;
	int rc = -ENOMEM;

	if (n == NULL)
		return -ENOMEM;
	for (i = 0; i < src->count; i++)
		bytes += src->entries[i].key_len + slen + 1;
	n->m.entries =
		calloc(src->count ? src->count : 1, sizeof(*n->m.entries));
	n->keys = malloc(bytes ? bytes : 1);
	n->skip = calloc(src->count ? src->count : 1, 1);
	sorted = malloc((src->count ? src->count : 1) * sizeof(*sorted));
	if (n->m.entries == NULL || n->keys == NULL || n->skip == NULL ||
	    sorted == NULL)
		goto err;
	n->m.count = src->count;
	n->m.total_bytes = src->total_bytes;
	memcpy(n->m.digest, src->digest, sizeof(n->m.digest));
	for (i = 0; i < src->count; i++) {
		const struct manifest_entry *e = &src->entries[i];
		struct manifest_entry *r = &n->m.entries[i];
		long len = rename_key(t, e->key, e->key_len, n->keys + at);

		*r = *e;
		sorted[i] = (uint32_t)i;
		if (len < 0) {
			/* Keep a name (the source's) for the bookkeeping;
			 * the item is not shown. */
			memcpy(n->keys + at, e->key, e->key_len + 1);
			len = (long)e->key_len;
			n->skip[i] = 1;
		} else if (is_dir(src, n->keys + at, (size_t)len)) {
			n->skip[i] = 1;
		}
		r->key = n->keys + at;
		r->key_len = (uint32_t)len;
		at += (size_t)len + 1;
	}
	qsort_r(sorted, src->count, sizeof(*sorted), index_cmp, n->m.entries);
	for (i = 1; i < src->count; i++) {
		const struct manifest_entry *a = &n->m.entries[sorted[i - 1]];
		const struct manifest_entry *b = &n->m.entries[sorted[i]];

		if (key_cmp(a->key, a->key_len, b->key, b->key_len) == 0)
			n->skip[sorted[i]] = 1;
	}
	for (i = 0; i < src->count; i++)
		n->n_skipped += n->skip[i];
	free(sorted);
	*out = n;
	return 0;
err:
	free(sorted);
	fs_xf_names_free(n);
	return rc;
}

int fs_xf_plan_filter(const struct shard_plan *p, const uint8_t *skip,
		      struct shard_plan **out)
{
	struct shard_plan *f = calloc(1, sizeof(*f));
	size_t r, i, at = 0;

	if (f == NULL)
		return -ENOMEM;
	*f = *p;
	f->items = malloc((p->rank_start[p->world_size]
				   ? p->rank_start[p->world_size]
				   : 1) *
			  sizeof(*f->items));
	f->rank_start = malloc((p->world_size + 1) * sizeof(*f->rank_start));
	f->rank_pad = malloc((p->world_size ? p->world_size : 1) *
			     sizeof(*f->rank_pad));
	if (f->items == NULL || f->rank_start == NULL || f->rank_pad == NULL) {
		shard_plan_free(f);
		return -ENOMEM;
	}
	for (r = 0; r < p->world_size; r++) {
		size_t end = p->rank_start[r + 1];
		size_t pad_from = end - p->rank_pad[r];

		f->rank_start[r] = at;
		f->rank_pad[r] = 0;
		for (i = p->rank_start[r]; i < end; i++) {
			if (skip[p->items[i]])
				continue;
			f->items[at++] = p->items[i];
			if (i >= pad_from)
				f->rank_pad[r]++;
		}
	}
	f->rank_start[p->world_size] = at;
	*out = f;
	return 0;
}

void fs_item_source(const struct fs_gen *g, uint32_t item,
		    struct cache_object *out)
{
	const struct manifest *m =
		g->source != NULL ? g->source : g->d.manifest;
	const struct manifest_entry *e = &m->entries[item];

	memset(out, 0, sizeof(*out));
	out->key = e->key;
	out->key_len = e->key_len;
	out->etag = e->etag;
	out->etag_len = e->etag_len;
	out->size = e->size;
}

int fs_item_object(struct fs_gen *g, uint32_t item, struct cache_object *out)
{
	struct cache_object src;
	uint64_t size;
	int rc;

	fs_item_source(g, item, &src);
	if (g->xf == NULL) {
		*out = src;
		return 0;
	}
	/* The output's strings are src's (the manifest's) and the
	 * transform's, which outlive g. */
	rc = xform_size(g->xf->x, &src, &size);
	if (rc < 0)
		return rc;
	xform_object(g->xf->x, &src, size, out);
	return 0;
}
