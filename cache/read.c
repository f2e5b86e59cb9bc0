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
 * the engine fetches it and stores the whole chunk (open.c's cache_fetched(): store_chunk())
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
 * join (ahead_run() in ahead.c); a fill
 * only makes chunks present; a ready read never fetches; a raw read goes
 * straight to the backend; a derived object's misses run its producer
 * (derived.c).
 *
 * A chunk's name and its lookup in the disk cache (the committer's queue,
 * the index, a blob's checked range; read_look() and read_look_present(),
 * the engine's look functions) are read_lookup.c.
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
	struct read_look_arg a = { .off = in_off, .len = want };
	struct read_chunk ch;
	struct fetch_pin pin;
	enum fetch_from from = FETCH_FROM_BACKEND;
	ssize_t got;
	int rc;

	rc = read_look_name(&a, c, obj, n, &ch);
	if (rc < 0)
		return rc;
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
		read_hold_release(&h);
	}
	read_chunk_release(&ch);
	return got;
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
		(void)ahead_run(c, obj, offset, len, true);
	while (done < len) {
		uint64_t n, in_off;
		size_t want = read_chunk_span(c, obj, offset + done, len - done,
					      &n, &in_off);
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
		struct read_look_arg a = { 0 };
		struct read_chunk ch;
		enum fetch_from from = FETCH_FROM_LOOK;
		ssize_t got = read_look_name(&a, c, obj, n, &ch);

		if (got < 0)
			return got;
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

	if (!src->disk || len > read_chunk_len(c, obj, n) - in_off)
		return -ENOENT; /* past its chunk */
	if (obj->transform == NULL)
		return read_chunk(c, src, obj, n, in_off, len, buf, NULL, NULL,
				  FETCH_READY);
	/* A derived chunk is never in the engine: only stored. */
	return derived_stored(c, obj, n, in_off, len, buf);
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
