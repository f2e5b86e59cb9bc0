/*
 * read: the reader (docs/DESIGN.md §1). One chunk's part is looked for in
 * this order, and the first place that has it answers:
 *   1. in flight or retained in the fetch engine (fetch_join()): a
 *      prefetched chunk is served from memory, no index, no CRC pass;
 *   2. queued for the committer (store_pending_find()): stored, no row yet;
 *   3. the index: inline bytes in LMDB, or the blob file, CRC-checked
 *      (a bad entry is dropped and counted, then refetched);
 *   4. fetched through the engine (fetch_get()), which stores the whole
 *      chunk through store_fetch_done() before it leaves the engine.
 * Between 1 and 4 the engine's epoch (fetch_epoch()) closes the race with
 * a fetch that stores the chunk after 2-3 missed it. read_chunk() is that
 * sequence; cache_read() cuts a request into chunks, cache_fill() makes
 * sure chunks are stored. A pass-through cache reads an object of up to
 * CACHE_UNCACHED_WHOLE_MAX bytes whole through the engine (one checked
 * copy serves every read of it: cache.h), a larger one straight through.
 *
 * Over 700 lines because every path here (a chunk's steps, replies
 * without copies, coalesced small chunks, pass-through) shares the
 * read_chunk naming and read_lookup(); the pass-through and coalesced
 * paths are the first to move out if it grows.
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
	char kb[LOG_KEY_MAX];
	if (cache_obj_chunk_ok(c, obj))
		return 0;
	log_msg(LOG_ERR,
		"cache: %s: chunk size %llu is not a multiple of %llu up to "
		"the cache's %llu; failing the read",
		log_key(kb, obj->key, obj->key_len),
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
 * buffers and descriptor behind it. */
struct read_hold {
	struct cache_piece piece;
	void *buf; /* accounted (fetch_buffer_*), buf_len bytes */
	size_t buf_len;
	void *scratch; /* accounted, scratch_len bytes */
	size_t scratch_len;
	int fd; /* -1: none */
};

static void hold_release(struct cache *c, struct read_hold *h)
{
	fetch_buffer_free(c->fetch, h->buf, h->buf_len);
	fetch_buffer_free(c->fetch, h->scratch, h->scratch_len);
	if (h->fd >= 0)
		close(h->fd);
	h->buf = h->scratch = NULL;
	h->fd = -1;
}

/* Steps 2 and 3: serves [off, off + len) of chunk ch from the queue or the
 * index into dst. A bad entry (CRC mismatch, short blob) is dropped and
 * counted. With hold, a blob's bytes are not copied to dst: hold->piece
 * points at them, in a buffer hold keeps, or in the blob's descriptor (see
 * above). Returns LOOKUP_HIT or LOOKUP_MISS (or LOOKUP_BAD: a miss). */
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
	uint64_t start = 0, end = 0;
	uint8_t *scratch = NULL;
	char *path = NULL;
	int rc, fd, ret = LOOKUP_MISS;
	struct stat st;
	bool have_st = false;
	ssize_t got;

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
	/* A blob: read the whole CRC blocks that cover the range. */
	start = (uint64_t)b0 * CACHE_CRC_BLOCK;
	end = (uint64_t)(b1 + 1) * CACHE_CRC_BLOCK;
	if (end > chunk_len)
		end = chunk_len;
	path = entry_blob_path(c, hash, e.h.blob_id);
	if (path == NULL)
		goto out;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* Evicted by another process, or removed: a miss. */
		if (errno == ENOENT) {
			store_pending_drop(c, hash);
			index_entry_drop(c, hash, id, id_len);
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
	/* With hold, the checked blocks are what the reply points into. */
	scratch = hold != NULL ? fetch_buffer_alloc(c->fetch, end - start)
			       : malloc(end - start);
	if (scratch == NULL) {
		close(fd);
		goto out;
	}
	got = pread(fd, scratch, end - start, (off_t)start);
	close(fd);
	if (got != (ssize_t)(end - start) ||
	    !entry_crcs_ok(scratch, start, chunk_len, e.crcs, b0, b1)) {
		ret = LOOKUP_BAD;
		goto out;
	}
	if (hold != NULL) {
		if (have_st)
			verified_mark(c, &st, b0, b1);
		hold->scratch = scratch;
		hold->scratch_len = end - start;
		hold->piece = (struct cache_piece){
			.mem = scratch + (off - start), .fd = -1, .len = len
		};
		scratch = NULL;
	} else {
		memcpy(dst, scratch + (off - start), len);
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
		index_entry_drop(c, hash, id, id_len);
	}
	if (ret == LOOKUP_HIT)
		evict_touch(c, hash);
	if (hold != NULL)
		fetch_buffer_free(c->fetch, scratch, end - start);
	else
		free(scratch);
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

static ssize_t read_through(struct cache *c, const struct cache_object *obj,
			    uint64_t offset, size_t len, void *buf)
{
	char kb[LOG_KEY_MAX];
	size_t nread = 0;
	int rc;

	rc = fetch_slot_acquire(c->fetch);
	if (rc < 0) {
		log_msg(LOG_ERR,
			"cache: %s: no backend connection came free in time; "
			"failing the read at offset %llu",
			log_key(kb, obj->key, obj->key_len),
			(unsigned long long)offset);
		return rc;
	}
	rc = fetch_backend_read(c->fetch, obj->key, obj->key_len, obj->etag,
				obj->etag_len, offset, len, buf, &nread, NULL);
	fetch_slot_release(c->fetch);
	if (rc < 0)
		return rc;
	if (nread != len) {
		/* Exactly the bytes asked for, or an error. */
		log_msg(LOG_ERR,
			"cache: %s: the backend returned %zu of %zu bytes at "
			"offset %llu; failing the read",
			log_key(kb, obj->key, obj->key_len), nread, len,
			(unsigned long long)offset);
		return -EIO;
	}
	return (ssize_t)len;
}

/* Counts a fetch_join() that answered: a hit if the chunk was ready. */
static void read_join_count(struct cache *c, bool ready, ssize_t got)
{
	if (ready && got >= 0) {
		stat_add(&c->hits, 1);
		stat_add(&c->bytes_from_cache, (uint64_t)got);
	} else {
		stat_add(&c->misses, 1);
	}
}

/* The engine and the store serve whole ranges: a short count is a bug,
 * never a shorter file. Returns got, or -EIO (logged) when it is short. */
static ssize_t read_whole(const char *key, size_t key_len, uint64_t n,
			  ssize_t got, size_t want)
{
	char kb[LOG_KEY_MAX];
	if (got < 0 || (size_t)got == want)
		return got;
	log_msg(LOG_ERR,
		"cache: %s: chunk %llu gave %zd of %zu bytes; failing the "
		"read",
		log_key(kb, key, key_len), (unsigned long long)n, got, want);
	return -EIO;
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

/* A pass-through read of obj, an object of at most
 * CACHE_UNCACHED_WHOLE_MAX bytes (cache.h): the engine fetches it whole,
 * as one chunk of the cache's chunk size (so one backend read, which the
 * backend checks against the store's checksum of the whole object), or
 * joins that fetch, or finds the copy retained since; [offset, offset +
 * len) is copied from there. Short of memory the engine reads just these
 * bytes instead (a direct read, unchecked: see cache.h). */
static ssize_t read_whole_uncached(struct cache *c,
				   const struct cache_object *obj,
				   uint64_t offset, size_t len, void *buf)
{
	struct cache_object whole = *obj;
	struct read_chunk ch;
	ssize_t got;
	int rc;

	whole.chunk_size = 0; /* the cache's: one chunk holds all of it */
	rc = read_chunk_name(c, &whole, 0, &ch);
	if (rc < 0)
		return rc;
	got = fetch_get(c->fetch, &ch.r, FETCH_NO_EPOCH, offset, len, buf);
	read_chunk_release(&ch);
	return read_whole(obj->key, obj->key_len, 0, got, len);
}

/* Steps 2-4 until one answers, for read_chunk():
 * [in_off, in_off + want) of chunk ch from the queue or the index into dst
 * (with hold, see read_lookup()), else from the engine. Counts the hit or
 * miss. Returns want or a negative errno. */
static ssize_t read_chunk_find(struct cache *c, const struct read_chunk *ch,
			       uint64_t in_off, size_t want, void *dst,
			       struct read_hold *hold)
{
	ssize_t got;
	int tries;

	for (tries = 0;; tries++) {
		/* Read before the lookup: see fetch_epoch(). After a few
		 * rounds (a busy table), fetch without the check. */
		uint64_t epoch = tries < 3 ? fetch_epoch(c->fetch, ch->hash)
					   : FETCH_NO_EPOCH;

		if (hold != NULL)
			hold->piece = (struct cache_piece){ .mem = dst,
							    .fd = -1,
							    .len = want };
		if (read_lookup(c, ch, in_off, want, dst, hold) == LOOKUP_HIT) {
			stat_add(&c->hits, 1);
			stat_add(&c->bytes_from_cache, want);
			return (ssize_t)want;
		}
		/* The engine fetches it (or joins a fetch in flight) and
		 * stores it; short of memory it reads just these bytes into
		 * dst (see fetch_get()). -EAGAIN: it may have been stored
		 * since epoch was read: look again. */
		got = fetch_get(c->fetch, &ch->r, epoch, in_off, want, dst);
		if (got != -EAGAIN) {
			stat_add(&c->misses, 1);
			return read_whole(ch->r.key, ch->r.key_len, ch->n, got,
					  want);
		}
	}
}

/* Step 1, then 2-4 until one answers, for [in_off, in_off + want) of chunk
 * n of obj (once, however many readers want it at once): copied into dst
 * if dst is set; else handed to fn in place, a chunk in memory pinned and
 * a blob's bytes not copied (read_lookup() with a hold). Returns want or a
 * negative errno. */
static ssize_t read_chunk(struct cache *c, const struct cache_object *obj,
			  uint64_t n, uint64_t in_off, size_t want, void *dst,
			  cache_reply_fn fn, void *arg)
{
	struct read_hold h = { .fd = -1 };
	struct read_chunk ch;
	struct fetch_pin pin;
	bool ready;
	ssize_t got;
	int rc;

	rc = read_chunk_name(c, obj, n, &ch);
	if (rc < 0)
		return rc;
	got = fetch_join_pin(c->fetch, &ch.r, in_off, want, &ready, &pin);
	if (got != -ENOENT) {
		read_join_count(c, ready, got);
		if (got >= 0) {
			struct cache_piece p = { .mem = pin.data,
						 .fd = -1,
						 .len = pin.len };

			/* Sent before the pin goes: see fetch_join_pin(). */
			rc = dst != NULL ? (memcpy(dst, pin.data, pin.len), 0)
					 : fn(arg, &p, 1);
			fetch_unpin(c->fetch, &pin);
			if (rc < 0)
				got = rc;
		}
	} else if (dst != NULL) {
		got = read_chunk_find(c, &ch, in_off, want, dst, NULL);
	} else {
		/* Bytes copied (the committer's queue, an inline row, a
		 * fetch) land here; a blob's stay where read_lookup() read
		 * them. */
		h.buf = fetch_buffer_alloc(c->fetch, want);
		h.buf_len = want;
		got = h.buf == NULL ? -ENOMEM
				    : read_chunk_find(c, &ch, in_off, want,
						      h.buf, &h);
		if (got >= 0) {
			rc = fn(arg, &h.piece, 1);
			if (rc < 0)
				got = rc;
		}
		hold_release(c, &h);
	}
	read_chunk_release(&ch);
	return got;
}

/* The most a coalesced read fetches at once. */
#define READ_COALESCE_MAX FETCH_PART_SIZE

/* [offset, offset + len) of obj spans chunks first..last (first < last),
 * all small (the object's own chunk size): if none of them is stored or
 * in flight, fetches them as one backend read, stores each, and copies
 * the range into buf. Returns len, -ENOENT (not all missing, too long,
 * no memory: read chunk by chunk) or the read's error. Not single-flight:
 * a reader of one of these chunks meanwhile may fetch it too (the first
 * row stored wins; the bytes are the same). */
static ssize_t read_coalesced(struct cache *c, const struct cache_object *obj,
			      uint64_t offset, size_t len, void *buf)
{
	char kb[LOG_KEY_MAX];
	uint64_t unit = cache_obj_chunk(c, obj), first = offset / unit;
	uint64_t last = (offset + len - 1) / unit, n, start = first * unit;
	uint64_t span = last * unit + read_chunk_len(c, obj, last) - start;
	struct fetch_vouch v = { .object_size = obj->size };
	size_t nread = 0;
	uint8_t *all;
	int rc;

	if (span > READ_COALESCE_MAX)
		return -ENOENT;
	for (n = first; n <= last; n++) {
		struct read_chunk ch;
		bool missing;

		if (read_chunk_name(c, obj, n, &ch) < 0)
			return -ENOENT;
		missing = !fetch_in_flight(c->fetch, &ch.r) &&
			  !read_chunk_present(c, &ch);
		read_chunk_release(&ch);
		if (!missing)
			return -ENOENT;
	}
	all = fetch_buffer_alloc(c->fetch, (size_t)span);
	if (all == NULL)
		return -ENOENT;
	rc = fetch_slot_acquire(c->fetch);
	if (rc < 0) {
		log_msg(LOG_ERR,
			"cache: %s: no backend connection came free in time; "
			"failing the read at offset %llu",
			log_key(kb, obj->key, obj->key_len),
			(unsigned long long)offset);
		goto out;
	}
	rc = fetch_backend_read(c->fetch, obj->key, obj->key_len, obj->etag,
				obj->etag_len, start, (size_t)span, all, &nread,
				&v.claim);
	fetch_slot_release(c->fetch);
	if (rc == 0 && nread != span) {
		log_msg(LOG_ERR,
			"cache: %s: the backend returned %zu of %llu bytes "
			"at "
			"offset %llu; failing the read",
			log_key(kb, obj->key, obj->key_len), nread,
			(unsigned long long)span, (unsigned long long)start);
		rc = -EIO;
	}
	for (n = first; rc == 0 && n <= last; n++) {
		struct read_chunk ch;

		stat_add(&c->misses, 1);
		if (read_chunk_name(c, obj, n, &ch) < 0)
			continue; /* served, not stored */
		store_chunk(c, ch.hash, ch.id, ch.id_len,
			    all + (n - first) * unit, ch.len, NULL);
		whole_note(c, ch.id, ch.id_len, all + (n - first) * unit,
			   ch.len, &v);
		read_chunk_release(&ch);
	}
	if (rc == 0)
		memcpy(buf, all + (offset - start), len);
out:
	fetch_buffer_free(c->fetch, all, (size_t)span);
	return rc < 0 ? rc : (ssize_t)len;
}

ssize_t cache_read_raw(struct cache *c, const struct cache_object *obj,
		       uint64_t offset, size_t len, void *buf)
{
	if (obj->transform != NULL)
		return -EINVAL;
	if (offset >= obj->size)
		return 0;
	if (len > obj->size - offset)
		len = (size_t)(obj->size - offset);
	return read_through(c, obj, offset, len, buf);
}

ssize_t cache_read(struct cache *c, const struct cache_object *obj,
		   uint64_t offset, size_t len, void *buf)
{
	uint64_t unit = cache_obj_chunk(c, obj);
	size_t done = 0;
	int rc;

	rc = read_obj_check(c, obj);
	if (rc < 0)
		return rc;
	if (obj->transform != NULL && !c->disk)
		return -EOPNOTSUPP; /* derived bytes live in a disk cache */
	if (offset >= obj->size || len == 0)
		return 0;
	if (len > obj->size - offset)
		len = (size_t)(obj->size - offset);
	if (obj->transform != NULL)
		return derived_read(c, obj, offset, len, buf);
	if (!c->disk)
		return obj->size <= read_uncached_whole_max(c)
			       ? read_whole_uncached(c, obj, offset, len, buf)
			       : read_through(c, obj, offset, len, buf);
	if (unit < c->chunk_size &&
	    offset / unit != (offset + len - 1) / unit) {
		ssize_t got = read_coalesced(c, obj, offset, len, buf);

		if (got != -ENOENT)
			return got;
	}
	while (done < len) {
		uint64_t pos = offset + done, n = pos / unit;
		uint64_t clen = read_chunk_len(c, obj, n);
		uint64_t in_off = pos - n * unit;
		size_t want = clen - in_off < len - done
				      ? (size_t)(clen - in_off)
				      : len - done;
		ssize_t got;

		got = read_chunk(c, obj, n, in_off, want, (uint8_t *)buf + done,
				 NULL, NULL);
		if (got == -ENOMEM && done == 0) /* cannot even name it */
			return read_through(c, obj, offset, len, buf);
		got = read_whole(obj->key, obj->key_len, n, got, want);
		if (got < 0)
			return got;
		done += want;
	}
	return (ssize_t)done;
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

ssize_t read_reply(struct cache *c, const struct cache_object *obj,
		   uint64_t offset, size_t len, cache_reply_fn fn, void *arg)
{
	uint64_t n, in_off, unit = cache_obj_chunk(c, obj);
	void *buf;
	ssize_t got;
	int rc;

	rc = read_obj_check(c, obj);
	if (rc < 0)
		return rc;
	if (obj->transform != NULL && !c->disk)
		return -EOPNOTSUPP;
	if (offset >= obj->size || len == 0) {
		rc = fn(arg, NULL, 0);
		return rc < 0 ? rc : 0;
	}
	if (len > obj->size - offset)
		len = (size_t)(obj->size - offset);
	/* A derived object's bytes go through one buffer (derived_read()). */
	if (c->disk && obj->transform == NULL) {
		n = offset / unit;
		in_off = offset - n * unit;
		if (in_off + len <= read_chunk_len(c, obj, n)) {
			got = read_chunk(c, obj, n, in_off, len, NULL, fn, arg);
			if (got != -ENOMEM) /* else: as cache_read() does */
				return got;
		}
	}
	/* Across chunks, or without a disk cache: one buffer. */
	buf = fetch_buffer_alloc(c->fetch, len);
	if (buf == NULL)
		return -ENOMEM;
	got = cache_read(c, obj, offset, len, buf);
	return read_reply_buffer(c, buf, len, got, fn, arg);
}

int cache_fill(struct cache *c, const struct cache_object *obj,
	       uint64_t *fetched)
{
	uint64_t n, total = 0, unit = cache_obj_chunk(c, obj);
	int check;

	if (fetched != NULL)
		*fetched = 0;
	if (!c->disk)
		return 0;
	check = read_obj_check(c, obj);
	if (check < 0)
		return check;
	if (obj->transform != NULL)
		return derived_fill(c, obj, fetched);
	for (n = 0; n * unit < obj->size; n++) {
		struct read_chunk ch;
		uint64_t epoch;
		ssize_t got;
		int rc;

		rc = read_chunk_name(c, obj, n, &ch);
		if (rc < 0)
			return rc;
		do {
			epoch = fetch_epoch(c->fetch, ch.hash); /* see there */
			got = 1;
			if (read_chunk_present(c, &ch))
				break;
			got = fetch_get(c->fetch, &ch.r, epoch, 0, 0, NULL);
		} while (got == -EAGAIN);
		read_chunk_release(&ch);
		if (got == 1)
			continue;
		stat_add(&c->misses, 1);
		if (got < 0)
			return (int)got;
		total += ch.len;
	}
	if (fetched != NULL)
		*fetched = total;
	return 0;
}
