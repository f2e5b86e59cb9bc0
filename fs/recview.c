/* recview: part files of a record view, read through the cache (recview.h). */
#include "fs/recview.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "records/gunzip.h"
#include "util/log.h"

/* Bytes of the part queued ahead of each read: a part's records are
 * scattered over many objects, so neither the kernel's read-ahead nor the
 * cache's (both sequential in one object) would find them. */
#define RECVIEW_AHEAD (UINT64_C(4) << 20)
#define RECVIEW_SEGS 64		 /* segments mapped per round */
#define RECVIEW_PIECE (8u << 20) /* compressed bytes read per step */

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

/* Queues the record extents of the RECVIEW_AHEAD bytes of the part after
 * from into the disk cache (a part is read in its order: what follows is
 * what the reader wants next). Stops when prefetching has no memory. */
static void recview_ahead(const struct fs_data *d, uint32_t r, uint32_t p,
			  uint64_t from)
{
	struct rplan_seg segs[RECVIEW_SEGS];
	const struct rindex_object *last = NULL;
	uint64_t done = 0, last_block = 0;
	size_t n, i;

	/* A gzip source is inflated whole by its first reader: nothing to
	 * queue. */
	if (rec_format_gzip(d->rindex->format))
		return;
	while (done < RECVIEW_AHEAD) {
		n = rplan_map(d->rplan, r, p, from + done, RECVIEW_AHEAD - done,
			      segs, RECVIEW_SEGS);
		if (n == 0)
			return;
		for (i = 0; i < n; i++) {
			const struct rindex_object *o;
			struct cache_object obj;
			uint64_t at, end;

			done += segs[i].len;
			if (segs[i].kind != RPLAN_SEG_RECORD)
				continue;
			o = rindex_object_of(d->rindex, segs[i].rec);
			at = d->rindex->rec_off[segs[i].rec] + segs[i].in_off;
			end = at + segs[i].len;
			/* Small records in a run share blocks: ask for each
			 * block once (every ask costs an index lookup). */
			if (o == last && at / RECVIEW_CHUNK == last_block)
				at = (last_block + 1) * RECVIEW_CHUNK;
			if (at >= end)
				continue;
			last = o;
			last_block = (end - 1) / RECVIEW_CHUNK;
			recview_object(d, o, &obj);
			if (cache_prefetch_range(d->cache, &obj, at, end - at) <
			    0)
				return;
		}
	}
}

ssize_t recview_read(const struct fs_data *d, uint32_t r, uint32_t p,
		     uint64_t off, size_t len, void *buf)
{
	struct rplan_seg segs[RECVIEW_SEGS];
	uint64_t size = rplan_part_size(d->rplan, r, p);
	size_t done = 0, n, i;
	char *dst = buf;

	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
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
	recview_ahead(d, r, p, off + len);
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
