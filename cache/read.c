/*
 * read: the reader (docs/DESIGN.md §8), cache_read(). A read's sources
 * are chosen once:
 *   with a disk cache   memory -> queued -> index -> fetch
 *   without one         memory -> the backend, just the bytes asked for
 * For each chunk of the range (read_chunk()) the fetch engine owns the
 * sequence (fetch_obtain()): a chunk in flight or retained in its memory
 * answers first (a prefetched chunk is served from memory, no index, no
 * CRC pass); else read_look() serves it from the committer's queue or the
 * index (inline bytes from LMDB or a range of the blob file,
 * CRC-checked; a bad entry is dropped and counted, then refetched); else
 * the engine fetches it and stores the whole chunk (store_fetch_done())
 * before it leaves the engine. The engine closes the race with a fetch
 * that stores the chunk after the look missed (its epoch re-check).
 * Without a disk cache an object of up to CACHE_UNCACHED_WHOLE_MAX bytes
 * is one chunk the engine fetches whole (so the backend checks it against
 * the store's checksum of the whole object) and keeps until read once;
 * for a larger one the engine answers from memory (a chunk a sequential
 * reader's window read ahead, retained until read once), or reads the
 * bytes straight from the backend.
 *
 * Around that: a read-ahead window per reader (ahead.c) moves before the
 * bytes are read; a range over several small chunks has its missing ones
 * queued first in runs, one backend read each, that the chunk reads then
 * join (read_run(), which also serves cache_prefetch_range()); a fill
 * only makes chunks present; a ready read never fetches; a raw read goes
 * straight to the backend; a derived object's misses run its producer
 * (derived.c).
 *
 * Over 700 lines because every path here (a chunk's sources, replies
 * without copies, runs of small chunks, whole small objects without a
 * disk cache, fills, ready reads) shares the chunk naming and
 * read_lookup(); the lookup (read_lookup() and the blob rules) is the
 * first to move out if it grows.
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

/* Bytes of chunk n of obj. */
uint64_t read_chunk_len(const struct cache *c, const struct cache_object *obj,
			uint64_t n)
{
	uint64_t unit = cache_obj_chunk(c, obj), cstart = n * unit;

	return obj->size - cstart < unit ? obj->size - cstart : unit;
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

/* What a reply holds until it is sent (read_reply()): the piece, and the
 * descriptor behind it (the bytes of a checked blob are in the read's own
 * buffer, read_lookup()). */
struct read_hold {
	struct cache_piece piece;
	int fd; /* -1: none */
};

static void hold_release(struct read_hold *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

/* Steps 2 and 3: serves [off, off + len) of chunk ch from the queue or the
 * index into dst. A bad entry (CRC mismatch, short blob) is dropped and
 * counted. With hold, hold->piece points at the bytes: in dst, or in the
 * blob's descriptor (see above). Returns LOOKUP_HIT or LOOKUP_MISS (or LOOKUP_BAD: a miss). */
static int read_lookup(struct cache *c, const struct read_chunk *ch,
		       uint64_t off, size_t len, void *dst,
		       struct read_hold *hold)
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

/* Counts a chunk's part of want bytes that from answered (an error of a
 * fetch or a join is a miss). */
static void read_count(struct cache *c, enum fetch_from from, size_t want)
{
	if (from == FETCH_FROM_MEMORY || from == FETCH_FROM_LOOK) {
		stat_add(&c->hits, 1);
		stat_add(&c->bytes_from_cache, want);
	} else {
		stat_add(&c->misses, 1);
	}
}

/* The engine and the store serve whole ranges: a short count is a bug,
 * never a shorter file. Returns got, or -EIO (logged) when it is short. */
static ssize_t read_whole(const char *key, size_t key_len, uint64_t n,
			  ssize_t got, size_t want)
{
	if (got < 0 || (size_t)got == want)
		return got;
	log_msg(LOG_ERR,
		"cache: %.*s: chunk %llu gave %zd of %zu bytes; failing the "
		"read",
		(int)key_len, key, (unsigned long long)n, got, want);
	return -EIO;
}

/* What read_look() serves: [off, off + len) of chunk ch, copied into the
 * destination it is given, or with hold, where hold points. */
struct read_look_arg {
	struct cache *c;
	const struct read_chunk *ch;
	uint64_t off;
	size_t len;
	struct read_hold *hold;
};

/* The disk cache's part of a read (a fetch_look_fn): the committer's
 * queue or the index. */
static int read_look(void *arg, void *dst)
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

/* The disk cache's part of a fill or a prefetch (a fetch_look_fn): is
 * the chunk queued or indexed (not read, not checked)? */
static int read_look_present(void *arg, void *dst)
{
	struct read_look_arg *a = arg;

	(void)dst;
	return read_chunk_present(a->c, a->ch) ? 0 : -ENOENT;
}

/* A read's sources (see the file comment), chosen once per read by
 * read_sources(). */
struct read_src {
	bool disk;	    /* the disk cache: hits, misses, replies in place */
	enum fetch_how how; /* after the engine: */
	fetch_look_fn look; /* the disk cache's queue and index, or NULL */
};

static const struct read_src read_src_disk = { true, FETCH_READ, read_look };
/* Without a disk cache a chunk is in memory only when a window read it
 * ahead; a range over several chunks is one backend read. */
static const struct read_src read_src_memory = { false, FETCH_DIRECT, NULL };

static const struct read_src *read_sources(const struct cache *c)
{
	return c->disk ? &read_src_disk : &read_src_memory;
}

int read_ahead_chunk(struct cache *c, const struct read_chunk *ch)
{
	struct read_look_arg a = { .c = c, .ch = ch };

	return fetch_ahead(c->fetch, &ch->r, c->disk ? read_look_present : NULL,
			   &a);
}

/* [in_off, in_off + want) of chunk n of obj, from src: copied into dst
 * if set, else handed to fn in place (a chunk in memory pinned, a blob's
 * checked blocks not copied, anything else in a buffer the engine takes).
 * how: src->how, or FETCH_READY. Returns want or a negative errno. */
static ssize_t read_chunk(struct cache *c, const struct read_src *src,
			  const struct cache_object *obj, uint64_t n,
			  uint64_t in_off, size_t want, void *dst,
			  cache_reply_fn fn, void *arg, enum fetch_how how)
{
	struct read_hold h = { .fd = -1 };
	struct read_look_arg a = { .c = c, .off = in_off, .len = want };
	struct read_chunk ch;
	struct fetch_pin pin;
	enum fetch_from from = FETCH_FROM_BACKEND;
	ssize_t got;
	int rc;

	rc = read_chunk_name(c, obj, n, &ch);
	if (rc < 0)
		return rc;
	a.ch = &ch;
	/* A reply: a blob's bytes stay where read_lookup() read them. */
	if (dst == NULL)
		a.hold = &h;
	got = fetch_obtain(c->fetch, &ch.r, how, in_off, want, dst,
			   dst == NULL ? &pin : NULL, src->look, &a, &from);
	/* Hits and misses are the disk cache's (cache_stats). */
	if (src->disk && (got >= 0 || got != -ENOENT))
		read_count(c, from, want);
	got = read_whole(obj->key, obj->key_len, n, got, want);
	if (got >= 0 && dst == NULL) {
		struct cache_piece p = { .mem = pin.data,
					 .fd = -1,
					 .len = pin.len };

		/* Sent before the pin goes (fetch_obtain()). */
		rc = fn(arg, from == FETCH_FROM_LOOK ? &h.piece : &p, 1);
		if (rc < 0)
			got = rc;
	}
	if (dst == NULL) {
		fetch_unpin(c->fetch, &pin);
		hold_release(&h);
	}
	read_chunk_release(&ch);
	return got;
}

int read_run(struct cache *c, const struct cache_object *obj, uint64_t offset,
	     uint64_t len, bool reader)
{
	uint64_t unit = cache_obj_chunk(c, obj), n = offset / unit;
	uint64_t last = (offset + len - 1) / unit;
	struct read_chunk *ch = NULL;
	struct read_look_arg *a = NULL;
	struct fetch_request *rs = NULL;
	void **args = NULL;
	unsigned k = 0, i, queued;
	uint64_t bytes;
	int rc = 0;

	ch = calloc(FETCH_RUN_MAX, sizeof(*ch));
	a = calloc(FETCH_RUN_MAX, sizeof(*a));
	rs = calloc(FETCH_RUN_MAX, sizeof(*rs));
	args = calloc(FETCH_RUN_MAX, sizeof(*args));
	if (ch == NULL || a == NULL || rs == NULL || args == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	while (rc == 0 && n <= last) {
		/* At most a run's worth at a time (FETCH_PART_SIZE). */
		for (k = 0, bytes = 0;
		     n <= last && k < FETCH_RUN_MAX &&
		     bytes + read_chunk_len(c, obj, n) <= FETCH_PART_SIZE;
		     k++, n++) {
			rc = read_chunk_name(c, obj, n, &ch[k]);
			if (rc < 0)
				break;
			bytes += ch[k].len;
			a[k] = (struct read_look_arg){ .c = c, .ch = &ch[k] };
			rs[k] = ch[k].r;
			args[k] = &a[k];
		}
		queued = 0;
		bytes = 0;
		if (rc == 0)
			rc = fetch_run(c->fetch, rs, k, reader,
				       read_look_present, args, &queued,
				       &bytes);
		if (!reader) {
			stat_add(&c->pf_issued, queued);
			stat_add(&c->pf_bytes, bytes);
		}
		for (i = 0; i < k; i++)
			read_chunk_release(&ch[i]);
	}
out:
	free(args);
	free(rs);
	free(a);
	free(ch);
	return rc;
}

/* The largest object a pass-through cache reads whole (cache.h): one
 * backend read (FETCH_PART_SIZE), in one chunk of the cache's size. */
static uint64_t read_uncached_whole_max(const struct cache *c)
{
	_Static_assert(CACHE_UNCACHED_WHOLE_MAX <= FETCH_PART_SIZE,
		       "a whole object is fetched in one backend read");
	return c->chunk_size < CACHE_UNCACHED_WHOLE_MAX
		       ? c->chunk_size
		       : CACHE_UNCACHED_WHOLE_MAX;
}

/* [offset, offset + len) of obj (clamped, len > 0, obj's own bytes) into
 * buf from src, chunk by chunk. */
static ssize_t read_range(struct cache *c, const struct read_src *src,
			  const struct cache_object *obj, uint64_t offset,
			  size_t len, void *buf)
{
	uint64_t unit = cache_obj_chunk(c, obj);
	size_t done = 0;

	if (!src->disk && obj->size <= read_uncached_whole_max(c)) {
		/* Whole, as one chunk the engine fetches once (and the backend
		 * checks against the store's checksum of the whole object),
		 * joins or finds retained: every read of a small object is
		 * served from that one checked copy (cache.h). */
		struct cache_object whole = *obj;
		ssize_t got;

		whole.chunk_size = 0; /* the cache's: one chunk holds it */
		got = read_chunk(c, src, &whole, 0, offset, len, buf, NULL,
				 NULL, FETCH_READ);
		return got == -ENOMEM
			       ? fetch_direct(c->fetch, obj->key, obj->key_len,
					      obj->etag, obj->etag_len, offset,
					      len, buf, NULL)
			       : got;
	}
	if (!src->disk && offset / unit != (offset + len - 1) / unit)
		return fetch_direct(c->fetch, obj->key, obj->key_len, obj->etag,
				    obj->etag_len, offset, len, buf, NULL);
	/* Several small chunks: those missing come in runs of one backend
	 * read each (queued now, at reader priority), which the reads of
	 * the chunks below join; anything a run could not take (memory) is
	 * fetched chunk by chunk. */
	if (src->disk && unit < c->chunk_size &&
	    offset / unit != (offset + len - 1) / unit)
		(void)read_run(c, obj, offset, len, true);
	while (done < len) {
		uint64_t pos = offset + done, n = pos / unit;
		uint64_t clen = read_chunk_len(c, obj, n);
		uint64_t in_off = pos - n * unit;
		size_t want = clen - in_off < len - done
				      ? (size_t)(clen - in_off)
				      : len - done;
		ssize_t got;

		got = read_chunk(c, src, obj, n, in_off, want,
				 (uint8_t *)buf + done, NULL, NULL, src->how);
		if (got == -ENOMEM && done == 0) /* cannot even name it */
			return fetch_direct(c->fetch, obj->key, obj->key_len,
					    obj->etag, obj->etag_len, offset,
					    len, buf, NULL);
		if (got < 0)
			return got;
		done += want;
	}
	return (ssize_t)done;
}

/* A fill of [offset, offset + len) of obj (clamped, len > 0): fetches the
 * chunks that are neither in the engine nor stored. Returns the bytes
 * fetched. */
static ssize_t read_fill(struct cache *c, const struct cache_object *obj,
			 uint64_t offset, size_t len)
{
	uint64_t n, unit = cache_obj_chunk(c, obj), total = 0;

	for (n = offset / unit; n * unit < offset + len; n++) {
		struct read_look_arg a = { .c = c };
		enum fetch_from from = FETCH_FROM_LOOK;
		struct read_chunk ch;
		ssize_t got;
		int rc;

		rc = read_chunk_name(c, obj, n, &ch);
		if (rc < 0)
			return rc;
		a.ch = &ch;
		got = fetch_obtain(c->fetch, &ch.r, FETCH_FILL, 0, 0, NULL,
				   NULL, read_look_present, &a, &from);
		read_chunk_release(&ch);
		if (got < 0) {
			stat_add(&c->misses, 1);
			return got;
		}
		if (from == FETCH_FROM_BACKEND || from == FETCH_FROM_JOINED) {
			stat_add(&c->misses, 1);
			total += ch.len;
		}
	}
	return (ssize_t)total;
}

/* A ready read of [offset, offset + len) of obj (clamped, len > 0) from
 * src: within one chunk, at hand only. */
static ssize_t read_ready(struct cache *c, const struct read_src *src,
			  const struct cache_object *obj, uint64_t offset,
			  size_t len, void *buf)
{
	uint64_t unit = cache_obj_chunk(c, obj), n = offset / unit;
	uint64_t in_off = offset - n * unit;
	struct read_chunk ch;
	ssize_t got;

	if (!src->disk || len > read_chunk_len(c, obj, n) - in_off)
		return -ENOENT; /* past its chunk */
	if (obj->transform == NULL)
		return read_chunk(c, src, obj, n, in_off, len, buf, NULL, NULL,
				  FETCH_READY);
	/* A derived chunk is never in the engine: only stored. */
	got = read_chunk_name(c, obj, n, &ch);
	if (got < 0)
		return got;
	got = derived_stored(c, obj, &ch, in_off, len, buf);
	read_chunk_release(&ch);
	return got;
}

ssize_t read_reply_buffer(struct cache *c, void *buf, size_t len, ssize_t got,
			  cache_reply_fn fn, void *arg)
{
	struct cache_piece p = { .mem = buf, .fd = -1 };
	int rc;

	if (got >= 0) {
		p.len = (size_t)got;
		rc = fn(arg, &p, 1);
		if (rc < 0)
			got = rc;
	}
	fetch_buffer_free(c->fetch, buf, len);
	return got;
}

/* The bytes of a read whose destination is set, from src: into buf, or
 * (buf NULL) in place to r->reply where one chunk of the disk cache holds
 * them, else through one accounted buffer. */
static ssize_t read_bytes(struct cache *c, const struct read_src *src,
			  const struct cache_read *r, uint64_t offset,
			  size_t len, void *buf)
{
	const struct cache_object *obj = r->obj;
	uint64_t unit = cache_obj_chunk(c, obj), n = offset / unit;
	ssize_t got;

	if (buf == NULL && src->disk && r->flags == 0 &&
	    obj->transform == NULL &&
	    offset - n * unit + len <= read_chunk_len(c, obj, n)) {
		got = read_chunk(c, src, obj, n, offset - n * unit, len, NULL,
				 r->reply, r->reply_arg, src->how);
		if (got != -ENOMEM)
			return got; /* else through a buffer, as below */
	}
	if (buf == NULL) {
		/* Across chunks, a derived object, or without a disk cache:
		 * one buffer. */
		buf = fetch_buffer_alloc(c->fetch, len);
		if (buf == NULL)
			return -ENOMEM;
		got = read_bytes(c, src, r, offset, len, buf);
		return read_reply_buffer(c, buf, len, got, r->reply,
					 r->reply_arg);
	}
	if (r->flags & CACHE_READ_READY)
		return read_ready(c, src, obj, offset, len, buf);
	if (r->flags & CACHE_READ_RAW)
		return fetch_direct(c->fetch, obj->key, obj->key_len, obj->etag,
				    obj->etag_len, offset, len, buf, NULL);
	if (obj->transform != NULL)
		return derived_read(c, obj, offset, len, buf);
	return read_range(c, src, obj, offset, len, buf);
}

ssize_t cache_read(struct cache *c, const struct cache_read *r)
{
	const struct cache_object *obj = r->obj;
	uint64_t offset = r->offset;
	size_t len = r->len;
	bool fill = r->buf == NULL && r->reply == NULL;
	int rc;

	rc = read_obj_check(c, obj);
	if (rc < 0)
		return rc;
	if ((r->flags & CACHE_READ_RAW) && obj->transform != NULL)
		return -EINVAL;
	if (obj->transform != NULL && !c->disk)
		return fill ? 0 : -EOPNOTSUPP; /* derived bytes live on disk */
	if (offset >= obj->size || len == 0) {
		if (r->reply == NULL)
			return 0;
		rc = r->reply(r->reply_arg, NULL, 0);
		return rc < 0 ? rc : 0;
	}
	if (len > obj->size - offset)
		len = (size_t)(obj->size - offset);
	if (fill) {
		if (!c->disk ||
		    (r->flags & (CACHE_READ_RAW | CACHE_READ_READY)))
			return 0;
		if (obj->transform != NULL) {
			uint64_t made = 0;

			rc = derived_fill(c, obj, &made);
			return rc < 0 ? rc : (ssize_t)made;
		}
		return read_fill(c, obj, offset, len);
	}
	if (!(r->flags & (CACHE_READ_RAW | CACHE_READ_READY)))
		ahead_read(c, r, offset, len);
	return read_bytes(c, read_sources(c), r, offset, len, r->buf);
}
