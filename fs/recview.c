/*
 * recview: part files of a record view, read through the cache
 * (recview.h). A read maps its range of the part to record segments
 * (rplan_map()) and reads each from its object through the cache; before
 * that it asks for the records ahead (recview_ask()): whole records, those
 * next to each other in their object as one extent, so that each is one
 * backend read that the reads of its records join.
 */
#include "fs/recview.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "records/gunzip.h"
#include "util/log.h"

#define RECVIEW_SEGS 64		 /* segments mapped per round */
#define RECVIEW_PIECE (8u << 20) /* compressed bytes read per step */
#define RECVIEW_SLOTS 64	 /* parts whose asks are remembered */
#define RECVIEW_BATCH 4096	 /* records sorted into extents at once */

/* How far one part was asked for ahead. */
struct recview_slot {
	uint32_t rank, part;
	bool used;
	uint64_t asked; /* the part's records up to here were asked for */
	uint64_t next;	/* the end of the furthest read of it */
	uint64_t clock; /* its last use, to replace the least recent */
};

struct recview_ahead {
	/* Protects slots and clock; never held while taking another lock
	 * or across a call into the cache. */
	pthread_mutex_t lock;
	struct recview_slot slots[RECVIEW_SLOTS];
	uint64_t clock;
};

int recview_ahead_new(struct recview_ahead **out)
{
	struct recview_ahead *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return -ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return 0;
}

void recview_ahead_free(struct recview_ahead *a)
{
	if (a == NULL)
		return;
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* The slot of part p of rank r; with make, a new one (asked 0) replacing
 * the least recently used if it has none, else NULL. Caller holds
 * a->lock. */
static struct recview_slot *recview_slot(struct recview_ahead *a, uint32_t r,
					 uint32_t p, bool make)
{
	struct recview_slot *s, *old = &a->slots[0];
	size_t i;

	for (i = 0; i < RECVIEW_SLOTS; i++) {
		s = &a->slots[i];
		if (s->used && s->rank == r && s->part == p)
			goto found;
		if (!s->used || (old->used && s->clock < old->clock))
			old = s;
	}
	if (!make)
		return NULL;
	s = old;
	*s = (struct recview_slot){ .rank = r, .part = p, .used = true };
found:
	s->clock = ++a->clock;
	return s;
}

/* The cache object record rec is read from: the source itself, or its
 * decoded stream for a gzip format. */
static void recview_object(const struct fs_data *d,
			   const struct rindex_object *o,
			   struct cache_object *obj)
{
	const struct manifest_entry *e = &d->manifest->entries[o->item];

	memset(obj, 0, sizeof(*obj));
	obj->key = e->key;
	obj->key_len = e->key_len;
	obj->etag = e->etag;
	obj->etag_len = e->etag_len;
	if (rec_format_gzip(d->rindex->format)) {
		obj->size = o->decoded_size;
		obj->transform = "gunzip";
		obj->source_size = e->size;
	} else {
		obj->size = e->size;
		obj->chunk_size = RECVIEW_CHUNK;
	}
}

uint64_t recview_part_size(const struct fs_data *d, uint32_t r, uint32_t p)
{
	return rplan_part_size(d->rplan, r, p);
}

/* An extent to ask for: bytes [at, end) of object o. */
struct recview_ext {
	const struct rindex_object *o;
	uint64_t at, end;
};

/* Records sorted by object, then offset. */
static int recview_ext_cmp(const void *pa, const void *pb)
{
	const struct recview_ext *x = pa, *y = pb;

	if (x->o != y->o)
		return x->o->item < y->o->item ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* Asks the cache for the records e[0..n-1] in extents: sorted by object
 * and offset, a record that starts at most one chunk past the extent
 * before it (the same object) joins it, so records next to each other
 * come in one backend read whatever their order in the part (runs
 * shuffled within a window). False when the cache may not take more
 * now. */
static bool recview_ask_batch(const struct fs_data *d, struct recview_ext *e,
			      size_t n)
{
	struct cache_object obj;
	size_t i, j;

	qsort(e, n, sizeof(*e), recview_ext_cmp);
	for (i = 0; i < n; i = j) {
		uint64_t end = e[i].end;

		for (j = i + 1;
		     j < n && e[j].o == e[i].o &&
		     e[j].at / RECVIEW_CHUNK <= (end - 1) / RECVIEW_CHUNK + 1;
		     j++)
			if (e[j].end > end)
				end = e[j].end;
		recview_object(d, e[i].o, &obj);
		if (cache_prefetch_range(d->cache, &obj, e[i].at,
					 end - e[i].at) < 0)
			return false;
	}
	return true;
}

/* Asks for the records of [from, to) of part p of rank r, each whole (the
 * first may start before from), RECVIEW_BATCH at a time
 * (recview_ask_batch()). Returns the part's position up to which all was
 * asked for: to, or where the cache refused. */
static uint64_t recview_queue(const struct fs_data *d, uint32_t r, uint32_t p,
			      uint64_t from, uint64_t to)
{
	struct rplan_seg segs[RECVIEW_SEGS];
	struct recview_ext one, *batch = malloc(RECVIEW_BATCH * sizeof(*batch));
	uint64_t pos = from, batch_pos = from;
	size_t n_batch = 0, cap = RECVIEW_BATCH, n, i;

	if (batch == NULL) { /* each record alone: more reads, same bytes */
		batch = &one;
		cap = 1;
	}
	while (pos < to) {
		n = rplan_map(d->rplan, r, p, pos, to - pos, segs,
			      RECVIEW_SEGS);
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			const struct rplan_seg *s = &segs[i];

			if (n_batch == cap) {
				if (!recview_ask_batch(d, batch, n_batch))
					goto refused;
				n_batch = 0;
				batch_pos = pos;
			}
			pos += s->len;
			if (s->kind != RPLAN_SEG_RECORD)
				continue;
			batch[n_batch].o = rindex_object_of(d->rindex, s->rec);
			batch[n_batch].at = d->rindex->rec_off[s->rec];
			batch[n_batch].end =
				batch[n_batch].at + d->rindex->rec_len[s->rec];
			n_batch++;
		}
	}
	if (!recview_ask_batch(d, batch, n_batch))
		goto refused;
	batch_pos = to;
refused:
	if (batch != &one)
		free(batch);
	return batch_pos;
}

/* A read of [off, end) of part p of rank r wants the part's records up to
 * want (clipped to the part) asked for: asks for those not asked yet, if
 * the reader's own bytes are among them or they are at least step bytes.
 * ahead: the window (want - end for the part the reader reads). Returns
 * whether it asked from off (for the reader's own records). */
static bool recview_ask(const struct fs_data *d, struct recview_ahead *a,
			uint32_t r, uint32_t p, uint64_t off, uint64_t end,
			uint64_t want, uint64_t ahead, uint64_t step)
{
	uint64_t size = rplan_part_size(d->rplan, r, p), from, got;
	struct recview_slot *s;

	if (want > size)
		want = size;
	pthread_mutex_lock(&a->lock);
	s = recview_slot(a, r, p, true);
	from = s->asked;
	/* New here, outrun (the cache refused), or gone back to the start or
	 * by more than a window (the part read again): from where the reader
	 * reads. A read a little behind (the kernel's reads of one file run
	 * at once) or inside what was asked in one go asks for nothing. */
	if ((off == 0 && s->next > end) || off + ahead < s->next) {
		from = off;
		s->next = 0; /* a new pass */
	} else if (from < off || from > want + ahead) {
		from = off;
	} else if (from >= want || (from >= end && want - from < step)) {
		from = want;
	}
	if (end > s->next)
		s->next = end;
	if (from >= want) {
		pthread_mutex_unlock(&a->lock);
		return false;
	}
	s->asked = want;
	pthread_mutex_unlock(&a->lock);
	got = recview_queue(d, r, p, from, want);
	if (got < want) {
		/* Refused for memory: the next read asks again from there. */
		pthread_mutex_lock(&a->lock);
		s = recview_slot(a, r, p, false);
		if (s != NULL && s->asked == want)
			s->asked = got;
		pthread_mutex_unlock(&a->lock);
	}
	return from <= off;
}

ssize_t recview_read(const struct fs_data *d, struct recview_ahead *a,
		     uint32_t r, uint32_t p, uint64_t off, size_t len,
		     void *buf)
{
	struct rplan_seg segs[RECVIEW_SEGS];
	uint64_t size = rplan_part_size(d->rplan, r, p);
	size_t done = 0, n, i;
	char *dst = buf;

	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	/* A gzip source is inflated whole by its first reader: nothing to
	 * ask for. */
	if (a != NULL && !rec_format_gzip(d->rindex->format)) {
		uint64_t end = off + len, step;
		uint64_t ahead = cache_prefetch_ahead(d->cache, end, &step);

		if (ahead > 0) {
			/* The reader's own records were asked for before,
			 * perhaps by a read still asking: again (nothing is
			 * fetched twice), so none is fetched in pieces. */
			if (!recview_ask(d, a, r, p, off, end, end + ahead,
					 ahead, step))
				recview_queue(d, r, p, off, end);
			/* A rank's parts are read one after the other. */
			if (end + ahead > size && p + 1 < rplan_parts(d->rplan))
				recview_ask(d, a, r, p + 1, 0, 0,
					    end + ahead - size, ahead, step);
		}
	}
	while (done < len) {
		n = rplan_map(d->rplan, r, p, off + done, len - done, segs,
			      RECVIEW_SEGS);
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			const struct rplan_seg *s = &segs[i];
			const struct rindex_object *o;
			struct cache_object obj;
			ssize_t got;

			switch (s->kind) {
			case RPLAN_SEG_NEWLINE:
				memset(dst + done, '\n', (size_t)s->len);
				break;
			case RPLAN_SEG_ZERO:
				memset(dst + done, 0, (size_t)s->len);
				break;
			case RPLAN_SEG_RECORD:
				o = rindex_object_of(d->rindex, s->rec);
				recview_object(d, o, &obj);
				got = cache_read(
					d->cache,
					&(struct cache_read){
						.obj = &obj,
						.offset = d->rindex->rec_off
								  [s->rec] +
							  s->in_off,
						.len = (size_t)s->len,
						.buf = dst + done,
						.order = CACHE_NO_ORDER });
				if (got < 0)
					return got;
				if ((uint64_t)got != s->len) {
					char kb[LOG_KEY_MAX];

					log_msg(LOG_ERR,
						"%s: record %llu: %zd bytes "
						"where the record index "
						"says %llu",
						log_key(kb, obj.key,
							obj.key_len),
						(unsigned long long)(s->rec -
								     o->first),
						got,
						(unsigned long long)s->len);
					return -EIO;
				}
				break;
			}
			done += (size_t)s->len;
		}
	}
	if (done != len) {
		log_msg(LOG_ERR,
			"rank %u part %u: the plan maps %zu of %zu "
			"bytes at %llu",
			r, p, done, len, (unsigned long long)off);
		return -EIO;
	}
	return (ssize_t)done;
}

/* The gunzip transform: the source read once through the engine (not
 * stored: only its decoded bytes are kept), inflated into the sink. */
struct recview_sink {
	cache_sink_fn fn;
	void *arg;
};

static int recview_out(void *arg, const void *buf, size_t len)
{
	struct recview_sink *s = arg;

	return s->fn(s->arg, buf, len);
}

static int recview_gunzip(void *ctx, struct cache *c,
			  const struct cache_object *raw, cache_sink_fn sink,
			  void *sink_arg)
{
	struct recview_sink s = { sink, sink_arg };
	struct rec_gunzip *g = NULL;
	uint64_t pos = 0;
	char *buf;
	int rc;

	(void)ctx;
	/* Counted in the memory budget like every buffer of the read path. */
	buf = cache_buffer_alloc(c, RECVIEW_PIECE);
	if (buf == NULL)
		return -ENOMEM;
	rc = rec_gunzip_new(&g);
	while (rc == 0 && pos < raw->size) {
		size_t want = raw->size - pos > RECVIEW_PIECE
				      ? RECVIEW_PIECE
				      : (size_t)(raw->size - pos);
		ssize_t got = cache_read(
			c, &(struct cache_read){ .obj = raw,
						 .offset = pos,
						 .len = want,
						 .buf = buf,
						 .flags = CACHE_READ_RAW,
						 .order = CACHE_NO_ORDER });

		if (got < 0)
			rc = (int)got;
		else if ((size_t)got != want)
			rc = -EIO;
		else
			rc = rec_gunzip_feed(g, buf, want, recview_out, &s);
		pos += want;
	}
	if (rc == 0)
		rc = rec_gunzip_finish(g);
	if (rc == -EBADMSG) {
		char kb[LOG_KEY_MAX];

		log_msg(LOG_ERR, "%s: %s", log_key(kb, raw->key, raw->key_len),
			rec_gunzip_error(g));
	}
	rec_gunzip_free(g);
	cache_buffer_free(c, buf, RECVIEW_PIECE);
	return rc;
}

int recview_register(struct cache *c)
{
	return cache_set_transform(c, "gunzip", recview_gunzip, NULL);
}

int recview_write_plan(FILE *f, const struct fs_data *d)
{
	const struct rindex *ri = d->rindex;
	const struct rplan *rp = d->rplan;
	uint64_t r, total = 0, max_bytes = 0;
	size_t max_n = 0, min_n = SIZE_MAX;
	int pass;

	fprintf(f, "unit record\n");
	fprintf(f, "records_format %s\n", rec_format_name(ri->format));
	fprintf(f, "records_index_sha256 %s\n", ri->digest);
	fprintf(f, "records %llu\n", (unsigned long long)ri->n_records);
	fprintf(f, "record_objects %zu\n", ri->n_objects);
	fprintf(f, "record_objects_skipped %llu\n",
		(unsigned long long)ri->skipped_objects);
	fprintf(f, "parts %u\n", rplan_parts(rp));
	fprintf(f, "run_bytes %llu\n", (unsigned long long)rplan_run_bytes(rp));
	fprintf(f, "window %u\n", (unsigned)rplan_window(rp));
	fprintf(f, "dropped_records %zu\n", rplan_dropped(rp));
	/* The object plan's aggregates, for the records: the largest
	 * rank's bytes over the mean and the spread of record counts. */
	for (pass = 0; pass < 2; pass++) {
		for (r = 0; r < d->spec->world_size; r++) {
			const uint32_t *recs;
			size_t count, npad;
			uint64_t bytes = 0;
			unsigned p;

			rplan_rank(rp, r, &recs, &count, &npad);
			for (p = 0; p < rplan_parts(rp); p++)
				bytes += rplan_part_size(rp, r, p);
			if (pass == 1) {
				fprintf(f,
					"rank %llu records %zu pad %zu bytes "
					"%llu\n",
					(unsigned long long)r, count, npad,
					(unsigned long long)bytes);
				continue;
			}
			total += bytes;
			max_bytes = bytes > max_bytes ? bytes : max_bytes;
			max_n = count > max_n ? count : max_n;
			min_n = count < min_n ? count : min_n;
		}
		if (pass == 0)
			fprintf(f,
				"imbalance_bytes %.4f\nimbalance_records %zu\n",
				total ? (double)max_bytes *
						(double)d->spec->world_size /
						(double)total
				      : 1.0,
				d->spec->world_size ? max_n - min_n : 0);
	}
	return ferror(f) ? -EIO : 0;
}

int recview_write_order(FILE *f, const struct fs_data *d, uint64_t rank)
{
	const uint32_t *recs;
	size_t count, npad, i;

	rplan_rank(d->rplan, rank, &recs, &count, &npad);
	for (i = 0; i < count; i++) {
		const struct rindex_object *o =
			rindex_object_of(d->rindex, recs[i]);
		const struct manifest_entry *e = &d->manifest->entries[o->item];

		if (manifest_write_escaped(f, e->key, e->key_len) < 0)
			return -EIO;
		fprintf(f, "\t%llu%s\n",
			(unsigned long long)(recs[i] - o->first),
			i >= count - npad ? "\tpad" : "");
	}
	return ferror(f) ? -EIO : 0;
}
