/*
 * read_lookup: what the reader knows of a chunk without fetching it (the
 * reader itself is read.c). Its name (read_chunk_name(): identity, hash
 * and the engine's request, built once per read) and steps 2 and 3 of
 * the reader, the lookup in the disk cache: the committer's queue, then
 * the index (an inline entry's bytes, CRC-checked, or a range of its
 * blob file, every CRC block it touches checked unless verified.c says
 * this process checked them already). A bad entry is dropped and
 * counted; a hit is recorded for eviction. Also used by the whole-object
 * check and derived objects, which read stored chunks back; and both as
 * the fetch engine's look functions (read_look(), read_look_present()).
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

/* Bytes of chunk n of obj. */
uint64_t read_chunk_len(const struct cache *c, const struct cache_object *obj,
			uint64_t n)
{
	uint64_t unit = cache_obj_chunk(c, obj), cstart = n * unit;

	return obj->size - cstart < unit ? obj->size - cstart : unit;
}

size_t read_chunk_span(const struct cache *c, const struct cache_object *obj,
		       uint64_t pos, size_t left, uint64_t *n, uint64_t *in_off)
{
	uint64_t unit = cache_obj_chunk(c, obj), clen;

	*n = pos / unit;
	*in_off = pos - *n * unit;
	clen = read_chunk_len(c, obj, *n);
	return clen - *in_off < left ? (size_t)(clen - *in_off) : left;
}

int read_obj_check(const struct cache *c, const struct cache_object *obj)
{
	if (cache_obj_chunk_ok(c, obj))
		return 0;
	log_msg(LOG_ERR,
		"cache: %.*s: chunk size %llu is not a multiple of %llu up to "
		"the cache's %llu; failing the read",
		(int)obj->key_len, obj->key,
		(unsigned long long)obj->chunk_size,
		(unsigned long long)CACHE_CRC_BLOCK,
		(unsigned long long)c->chunk_size);
	return -EINVAL;
}

int read_chunk_name(const struct cache *c, const struct cache_object *obj,
		    uint64_t n, struct read_chunk *ch)
{
	int rc;

	ch->n = n;
	ch->len = read_chunk_len(c, obj, n);
	rc = entry_ident_build(c, obj, n, &ch->id, &ch->id_len, ch->hash);
	if (rc < 0)
		return rc;
	ch->r.hash = ch->hash;
	ch->r.id = ch->id;
	ch->r.id_len = ch->id_len;
	ch->r.key = obj->key;
	ch->r.key_len = obj->key_len;
	ch->r.etag = obj->etag;
	ch->r.etag_len = obj->etag_len;
	ch->r.offset = n * cache_obj_chunk(c, obj);
	ch->r.len = ch->len;
	ch->r.object_size = obj->size;
	return 0;
}

void read_chunk_release(struct read_chunk *ch)
{
	free(ch->id);
	ch->id = NULL;
}

struct read_lookup_args {
	const uint8_t *hash, *id;
	size_t id_len;
	uint64_t chunk_len, off;
	size_t len;
	void *dst;
	uint32_t b0, b1;
	struct entry *e;
	int ret; /* LOOKUP_*: LOOKUP_BLOB to read the blob of *e */
};

/* The index part of read_lookup(): copies an inline entry's bytes. */
static int read_lookup_run(struct cache *c, void *arg)
{
	struct read_lookup_args *a = arg;
	struct index_txn *txn;
	const void *v, *d;
	size_t v_len, d_len;
	int rc;

	a->ret = LOOKUP_MISS;
	rc = index_begin(c, false, &txn);
	if (rc != 0)
		return rc;
	rc = index_get(txn, INDEX_ROWS, a->hash, &v, &v_len);
	if (rc != 0)
		goto out;
	rc = entry_parse(v, v_len, a->id, a->id_len, a->e);
	if (rc == -ENOENT || rc == -ENOMEM) {
		rc = 0;
		goto out;
	}
	if (rc != 0 || a->e->h.length != a->chunk_len) {
		rc = 0;
		a->ret = LOOKUP_BAD;
		goto out;
	}
	if (!(a->e->h.flags & ENTRY_INLINE)) {
		a->ret = LOOKUP_BLOB;
		goto out;
	}
	rc = index_get(txn, INDEX_DATA, a->hash, &d, &d_len);
	if (rc != 0 && rc != -ENOENT)
		goto out;
	if (rc != 0 || d_len != a->chunk_len ||
	    !entry_crcs_ok(d, 0, a->chunk_len, a->e->crcs, a->b0, a->b1)) {
		a->ret = LOOKUP_BAD;
	} else {
		memcpy(a->dst, (const uint8_t *)d + a->off, a->len);
		a->ret = LOOKUP_HIT;
	}
	rc = 0;
out:
	index_end(txn, false);
	return rc == -ENOENT ? 0 : rc;
}

void read_hold_release(struct read_hold *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

/* Steps 2 and 3: serves [off, off + len) of chunk ch from the queue or the
 * index into dst. A bad entry (CRC mismatch, short blob) is dropped and
 * counted. With hold, hold->piece points at the bytes: in dst, or in the
 * blob's descriptor (see above). Returns LOOKUP_HIT or LOOKUP_MISS (or LOOKUP_BAD: a miss). */
int read_lookup(struct cache *c, const struct read_chunk *ch, uint64_t off,
		size_t len, void *dst, struct read_hold *hold)
{
	const uint8_t *hash = ch->hash, *id = ch->id;
	size_t id_len = ch->id_len;
	uint64_t chunk_len = ch->len;
	struct entry e = { .crcs = NULL };
	uint32_t b0 = (uint32_t)(off / CACHE_CRC_BLOCK);
	uint32_t b1 = (uint32_t)((off + len - 1) / CACHE_CRC_BLOCK);
	uint8_t *edge = NULL;
	char *path = NULL;
	int rc, fd, ret = LOOKUP_MISS;
	struct stat st;
	bool have_st = false, ok;

	if (!index_available(c))
		return LOOKUP_MISS;
	ret = store_pending_find(c, hash, id, id_len, chunk_len, off, len, dst,
				 &e);
	if (ret == LOOKUP_HIT)
		return LOOKUP_HIT;
	if (ret == LOOKUP_BLOB) {
		ret = LOOKUP_MISS;
		goto blob;
	}
	{
		struct read_lookup_args a = { .hash = hash,
					      .id = id,
					      .id_len = id_len,
					      .chunk_len = chunk_len,
					      .off = off,
					      .len = len,
					      .dst = dst,
					      .b0 = b0,
					      .b1 = b1,
					      .e = &e };

		rc = index_guarded(c, read_lookup_run, &a);
		if (rc != 0) {
			if (rc != INDEX_BROKEN)
				cache_warn_limited(c, "cannot read the index",
						   rc);
			ret = LOOKUP_MISS;
			goto out;
		}
		ret = a.ret;
		if (ret != LOOKUP_BLOB)
			goto out;
		ret = LOOKUP_MISS;
	}

blob:
	/* A blob: the range, every CRC block it touches checked. */
	path = entry_blob_path(c, hash, e.h.blob_id);
	if (path == NULL)
		goto out;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* Evicted by another process, or removed: a miss. */
		if (errno == ENOENT) {
			store_pending_drop(c, hash);
			evict_entry_drop(c, hash, id, id_len);
		}
		goto out;
	}
	/* A blob is spliced only under the rule of verified.c. */
	if (hold != NULL && fstat(fd, &st) == 0) {
		have_st = (uint64_t)st.st_size == chunk_len;
		if (have_st && verified_covers(c, &st, b0, b1)) {
			hold->fd = fd;
			hold->piece = (struct cache_piece){
				.mem = NULL, .fd = fd, .pos = off, .len = len
			};
			ret = LOOKUP_HIT;
			goto out;
		}
	}
	/* Straight into dst, which the reply then points into (with hold):
	 * one buffer of the read's size, not a second one for the blocks
	 * (only a block read in part needs one, of one block). */
	if (entry_blob_edges(chunk_len, off, len)) {
		edge = fetch_buffer_alloc(c->fetch, CACHE_CRC_BLOCK);
		if (edge == NULL) {
			close(fd);
			goto out;
		}
	}
	ok = entry_blob_read(fd, chunk_len, e.crcs, off, len, dst, edge);
	close(fd);
	if (!ok) {
		ret = LOOKUP_BAD;
		goto out;
	}
	if (hold != NULL) {
		if (have_st)
			verified_mark(c, &st, b0, b1);
		hold->piece = (struct cache_piece){ .mem = dst,
						    .fd = -1,
						    .len = len };
	}
	ret = LOOKUP_HIT;
out:
	if (ret == LOOKUP_BAD) {
		char hex[2 * HASH_LEN + 1];

		entry_hash_hex(hash, hex);
		stat_add(&c->crc_failures, 1);
		log_msg(LOG_WARNING,
			"cache %s: entry %s failed its check (CRC or length); "
			"dropped, refetching",
			c->dir, hex);
		store_pending_drop(c, hash);
		evict_entry_drop(c, hash, id, id_len);
	}
	if (ret == LOOKUP_HIT)
		evict_touch(c, hash);
	fetch_buffer_free(c->fetch, edge, CACHE_CRC_BLOCK);
	free(path);
	free(e.crcs);
	return ret;
}

ssize_t read_stored(struct cache *c, const struct read_chunk *ch,
		    uint64_t in_off, size_t len, void *dst)
{
	if (read_lookup(c, ch, in_off, len, dst, NULL) != LOOKUP_HIT)
		return -ENOENT;
	stat_add(&c->hits, 1);
	stat_add(&c->bytes_from_cache, len);
	return (ssize_t)len;
}

ssize_t read_stored_uncounted(struct cache *c, const struct read_chunk *ch,
			      uint64_t in_off, size_t len, void *dst)
{
	return read_lookup(c, ch, in_off, len, dst, NULL) == LOOKUP_HIT
		       ? (ssize_t)len
		       : -ENOENT;
}

struct read_present_args {
	const uint8_t *id;
	size_t id_len;
	bool present;
};

static void read_present_row(void *arg, const void *val, size_t len)
{
	struct read_present_args *a = arg;
	struct entry e = { .crcs = NULL };

	a->present = entry_parse(val, len, a->id, a->id_len, &e) == 0;
	free(e.crcs);
}

bool read_chunk_present(struct cache *c, const struct read_chunk *ch)
{
	const uint8_t *hash = ch->hash;
	struct read_present_args a = { ch->id, ch->id_len, false };
	bool present = false;
	struct pending *p;

	if (!index_available(c))
		return false;
	pthread_mutex_lock(&c->q.lock);
	for (p = c->q.head; p != NULL && !present; p = p->next)
		present = memcmp(p->hash, hash, HASH_LEN) == 0;
	pthread_mutex_unlock(&c->q.lock);
	if (present)
		return true;
	index_row_visit(c, hash, read_present_row, &a);
	return a.present;
}

int read_look_name(struct read_look_arg *a, struct cache *c,
		   const struct cache_object *obj, uint64_t n,
		   struct read_chunk *ch)
{
	int rc = read_chunk_name(c, obj, n, ch);

	if (rc == 0) {
		a->c = c;
		a->ch = ch;
	}
	return rc;
}

int read_look(void *arg, void *dst)
{
	struct read_look_arg *a = arg;

	if (a->hold != NULL)
		a->hold->piece = (struct cache_piece){ .mem = dst,
						       .fd = -1,
						       .len = a->len };
	return read_lookup(a->c, a->ch, a->off, a->len, dst, a->hold) ==
			       LOOKUP_HIT
		       ? 0
		       : -ENOENT;
}

int read_look_present(void *arg, void *dst)
{
	struct read_look_arg *a = arg;

	(void)dst;
	return read_chunk_present(a->c, a->ch) ? 0 : -ENOENT;
}
