/*
 * whole_check: the check of an object the checker (whole.c) holds whole:
 * what its cached bytes give (a CRC-32C combined from its chunks' CRCs,
 * reading back only those not noted; an MD5 over every chunk read back in
 * order), compared with what the store vouched for, and on a mismatch
 * every chunk of the object dropped, at every chunk size it is cached at,
 * and one line logged. Runs in the checker thread only. Also what whole.c
 * asks of an object's chunks and of the clock while it checks: a chunk's
 * name (whole_obj_chunk()) and whether the close has waited long enough
 * (whole_closing_late()), so that whole.c calls down into this file only.
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/crc32c.h"
#include "util/hex.h"
#include "util/le.h"
#include "util/log.h"
#include "util/md5.h"
#include "util/sha256.h"

bool whole_closing_late(struct cache *c)
{
	uint64_t until = __atomic_load_n(&c->whole.close_ns, __ATOMIC_RELAXED);

	return until != 0 && clock_now_ns() >= until;
}

int whole_obj_chunk(const struct whole_obj *o, uint64_t n,
		    struct read_chunk *ch)
{
	memset(ch, 0, sizeof(*ch));
	ch->id = malloc(o->prefix_len + 8);
	if (ch->id == NULL)
		return -ENOMEM;
	memcpy(ch->id, o->prefix, o->prefix_len);
	le_put64(ch->id + o->prefix_len, n);
	ch->id_len = o->prefix_len + 8;
	if (sha256(ch->id, ch->id_len, ch->hash) < 0) {
		read_chunk_release(ch);
		return -ENOMEM;
	}
	ch->n = n;
	ch->len = o->object_size - n * o->chunk_size < o->chunk_size
			  ? o->object_size - n * o->chunk_size
			  : o->chunk_size;
	return 0;
}

/* Reads chunk n of o back from the cache in pieces of WHOLE_PIECE into
 * buf, adding them to *crc (a CRC-32C from 0) if crc, and to md if md. */
static int obj_read_back(struct cache *c, const struct whole_obj *o, uint64_t n,
			 uint8_t *buf, uint32_t *crc, struct md5 *md)
{
	struct read_chunk ch;
	uint64_t off;
	int ret = WHOLE_DONE;

	if (whole_obj_chunk(o, n, &ch) < 0)
		return WHOLE_MISSING;
	for (off = 0; off < ch.len; off += WHOLE_PIECE) {
		size_t len = ch.len - off < WHOLE_PIECE ? (size_t)(ch.len - off)
							: WHOLE_PIECE;

		if (whole_closing_late(c)) {
			ret = WHOLE_STOPPED;
			break;
		}
		if (read_stored_uncounted(c, &ch, off, len, buf) !=
		    (ssize_t)len) {
			ret = WHOLE_MISSING;
			break;
		}
		if (crc != NULL)
			*crc = crc32c_update(*crc, buf, len);
		if (md != NULL && md5_update(md, buf, len) < 0) {
			ret = WHOLE_STOPPED;
			break;
		}
	}
	read_chunk_release(&ch);
	return ret;
}

/* What o's bytes give, in got (the claim's kind). Returns WHOLE_*, with
 * *missing the chunk not stored. */
static int obj_compute(struct cache *c, const struct whole_obj *o, uint8_t *buf,
		       struct backend_claim *got, uint64_t *missing)
{
	uint64_t n, last = o->n_chunks - 1;
	uint64_t last_len = o->object_size - last * o->chunk_size;
	struct md5 *md = NULL;
	uint32_t op = 0, total = 0;
	int ret = WHOLE_DONE;

	memset(got, 0, sizeof(*got));
	got->kind = o->claim.kind;
	if (o->claim.kind == BACKEND_CLAIM_MD5) {
		md = md5_new();
		if (md == NULL)
			return WHOLE_STOPPED;
	} else {
		op = crc32c_shift_op(o->chunk_size);
	}
	for (n = 0; n <= last && ret == WHOLE_DONE; n++) {
		uint32_t crc = 0;

		if (md == NULL && whole_bit(o->noted, n))
			crc = o->crc[n];
		else
			ret = obj_read_back(c, o, n, buf,
					    md == NULL ? &crc : NULL, md);
		if (ret != WHOLE_DONE) {
			*missing = n;
			break;
		}
		if (md != NULL)
			continue;
		if (n == 0)
			total = crc;
		else if (n < last)
			total = crc32c_combine_op(total, crc, op);
		else
			total = crc32c_combine(total, crc, last_len);
	}
	if (md != NULL) {
		if (ret == WHOLE_DONE && md5_final(md, got->md5) < 0)
			ret = WHOLE_STOPPED;
		md5_free(md);
	} else {
		got->crc32c = total;
	}
	return ret;
}

/* "MD5 <hex>" or "crc32c <hex>" of a claim, into out. */
static void claim_text(const struct backend_claim *cl, char *out, size_t cap)
{
	char hex[2 * BACKEND_MD5_LEN + 1];

	if (cl->kind == BACKEND_CLAIM_MD5) {
		hex_encode(cl->md5, BACKEND_MD5_LEN, hex);
		snprintf(out, cap, "MD5 %s", hex);
	} else if (cl->kind == BACKEND_CLAIM_CRC32C) {
		snprintf(out, cap, "crc32c %08x", cl->crc32c);
	} else {
		snprintf(out, cap, "nothing");
	}
}

struct drop_scan {
	const struct whole_obj *o;
	struct drop_row {
		uint8_t hash[HASH_LEN];
		uint8_t *id;
		size_t id_len;
	} * rows;
	size_t n, cap;
};

/* Collects the rows of o's object cut at another chunk size (an
 * index_scan() callback): a raw identity that is o's prefix up to the
 * chunk size, and as long as o's. */
static int drop_scan_row(void *arg, const uint8_t *key, size_t key_len,
			 const void *val, size_t val_len)
{
	struct drop_scan *d = arg;
	const struct whole_obj *o = d->o;
	struct entry_hdr h;
	const uint8_t *id;
	size_t at;

	if (key_len != HASH_LEN || val_len < sizeof(h))
		return 0;
	memcpy(&h, val, sizeof(h));
	at = sizeof(h) + (size_t)h.n_crcs * 4;
	if (h.id_len != o->prefix_len + 8 || val_len != at + h.id_len)
		return 0;
	id = (const uint8_t *)val + at;
	if (memcmp(id, o->prefix, o->prefix_len - 8) != 0 ||
	    le_get64(id + o->prefix_len - 8) == o->chunk_size)
		return 0;
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 16;
		struct drop_row *r = realloc(d->rows, cap * sizeof(*r));

		if (r == NULL)
			return -ENOMEM;
		d->rows = r;
		d->cap = cap;
	}
	d->rows[d->n].id = malloc(h.id_len);
	if (d->rows[d->n].id == NULL)
		return -ENOMEM;
	memcpy(d->rows[d->n].hash, key, HASH_LEN);
	memcpy(d->rows[d->n].id, id, h.id_len);
	d->rows[d->n].id_len = h.id_len;
	d->n++;
	return 0;
}

static int drop_scan_run(struct cache *c, void *arg)
{
	struct index_txn *txn;
	int rc;

	rc = index_begin(c, false, &txn);
	if (rc != 0)
		return rc;
	rc = index_scan(txn, drop_scan_row, arg);
	index_end(txn, false);
	return rc;
}

/* Drops one chunk from the committer's queue, the index and the engine's
 * memory. */
static void drop_chunk(struct cache *c, const uint8_t *hash, const uint8_t *id,
		       size_t id_len)
{
	store_pending_drop(c, hash);
	evict_entry_drop(c, hash, id, id_len);
	fetch_forget(c->fetch, hash, id, id_len);
}

/* Drops every chunk of o's object: at o's chunk size, then at any other
 * it is cached at (a scan of the index, after the queue is indexed).
 * Returns the chunks dropped at other sizes. */
static uint64_t obj_purge(struct cache *c, const struct whole_obj *o)
{
	struct drop_scan d = { .o = o };
	uint64_t n;
	size_t i;

	for (n = 0; n < o->n_chunks; n++) {
		struct read_chunk ch;

		if (whole_obj_chunk(o, n, &ch) < 0)
			continue;
		drop_chunk(c, ch.hash, ch.id, ch.id_len);
		read_chunk_release(&ch);
	}
	store_drain(c);
	/* A scan cut short (out of memory, a damaged index: logged there)
	 * still drops what it found. */
	(void)index_guarded(c, drop_scan_run, &d);
	for (i = 0; i < d.n; i++) {
		drop_chunk(c, d.rows[i].hash, d.rows[i].id, d.rows[i].id_len);
		free(d.rows[i].id);
	}
	free(d.rows);
	return d.n;
}

int whole_check(struct cache *c, const struct whole_obj *o, uint8_t *buf,
		uint64_t *missing)
{
	struct backend_claim got;
	const uint8_t *part[3];
	size_t part_len[3];
	struct read_chunk ch0;
	char said[96], gave[96], text[64], kb[LOG_KEY_MAX];
	uint64_t chunk0, others;
	int ret;

	if (!o->conflict) {
		ret = obj_compute(c, o, buf, &got, missing);
		if (ret != WHOLE_DONE)
			return ret;
		if (backend_claim_same(&got, &o->claim)) {
			stat_add(&c->whole.checked, 1);
			return WHOLE_DONE;
		}
	}
	others = obj_purge(c, o);
	claim_text(&o->claim, text, sizeof(text));
	snprintf(said, sizeof(said), "%s (%s)", text,
		 o->claim.source != NULL ? o->claim.source : "the store");
	if (o->conflict) {
		snprintf(gave, sizeof(gave), "another reply something else");
	} else {
		claim_text(&got, text, sizeof(text));
		snprintf(gave, sizeof(gave), "the bytes give %s", text);
	}
	if (whole_obj_chunk(o, 0, &ch0) == 0 &&
	    entry_ident_parse(ch0.id, ch0.id_len, part, part_len, &chunk0))
		log_msg(LOG_ERR,
			"cache %s: %s (etag %.*s): the %llu bytes cached in "
			"%llu chunks do not match what the store vouches for "
			"the object: %s, %s; dropped its chunks (and %llu at "
			"other chunk sizes), to be fetched again",
			c->dir, log_key(kb, (const char *)part[1], part_len[1]),
			(int)part_len[2], (const char *)part[2],
			(unsigned long long)o->object_size,
			(unsigned long long)o->n_chunks, said, gave,
			(unsigned long long)others);
	read_chunk_release(&ch0);
	/* Counted last: whoever sees the count sees the chunks gone and
	 * the line logged. */
	stat_add(&c->whole.mismatches, 1);
	return WHOLE_DONE;
}
