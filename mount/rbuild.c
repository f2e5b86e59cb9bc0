/* rbuild: a record index from one read of every record object (rbuild.h). */
#include "mount/rbuild.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "records/frame.h"
#include "util/fnv.h"
#include "util/log.h"
#include "util/thread.h"

#define RBUILD_PIECE (8u << 20) /* bytes per ranged read */
#define RBUILD_THREADS_DEFAULT 8

/* What one object's scan found; filled by one worker, read after the
 * join. */
struct rb_object {
	uint32_t item; /* manifest index */
	uint64_t *off;
	uint32_t *len;
	uint32_t count, cap;
	uint64_t decoded;
	bool nl_added;
	/* tar: each sample's key, NUL-separated, in record order */
	char *keys;
	size_t keys_used, keys_cap;
};

struct rb_run {
	struct backend *be;
	const struct manifest *m;
	enum rec_format f;
	struct rb_object *objs;
	size_t n;
	atomic_size_t next;	     /* the next object to take */
	atomic_size_t done;	     /* objects finished */
	atomic_uint_least64_t bytes; /* bytes read so far */
	atomic_int rc;		     /* the first error; stops every worker */
};

/* One worker's scan of one object, as the emit callback sees it. */
struct rb_scan {
	struct rb_object *o;
	const char *key; /* the object's, for messages */
	size_t key_len;
	bool tar; /* samples have keys */
};

static int rb_grow(void **p, size_t want, size_t *cap, size_t elem)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	while (n < want)
		n *= 2;
	if (n == *cap)
		return 0;
	q = realloc(*p, n * elem);
	if (q == NULL)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

static int rb_emit(void *arg, uint64_t off, uint64_t len, const char *key,
		   size_t key_len)
{
	struct rb_scan *s = arg;
	struct rb_object *o = s->o;
	char kb[LOG_KEY_MAX];
	size_t cap;

	if (len > UINT32_MAX) {
		log_msg(LOG_ERR,
			"%s: offset %llu: record %u is %llu bytes; records "
			"of 4 GiB and more are not supported",
			log_key(kb, s->key, s->key_len),
			(unsigned long long)off, o->count,
			(unsigned long long)len);
		return -EBADMSG;
	}
	/* A member named ".x" has an empty key: WebDataset readers drop
	 * it, so it cannot be served as a sample of its own. */
	if (s->tar && key_len == 0) {
		log_msg(LOG_ERR,
			"%s: offset %llu: sample %u has an empty key (a member "
			"name whose last component starts with '.'); "
			"WebDataset readers drop such members: rename it",
			log_key(kb, s->key, s->key_len),
			(unsigned long long)off, o->count);
		return -EBADMSG;
	}
	if (o->count == UINT32_MAX) {
		log_msg(LOG_ERR, "%s: more than %u records in one object",
			log_key(kb, s->key, s->key_len), UINT32_MAX - 1);
		return -EBADMSG;
	}
	if (o->count == o->cap) {
		cap = o->cap;
		if (rb_grow((void **)&o->off, (size_t)o->count + 1, &cap,
			    sizeof(*o->off)) < 0)
			return -ENOMEM;
		cap = o->cap;
		if (rb_grow((void **)&o->len, (size_t)o->count + 1, &cap,
			    sizeof(*o->len)) < 0)
			return -ENOMEM;
		o->cap = (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap);
	}
	o->off[o->count] = off;
	o->len[o->count] = (uint32_t)len;
	o->count++;
	if (s->tar) {
		if (rb_grow((void **)&o->keys, o->keys_used + key_len + 1,
			    &o->keys_cap, 1) < 0)
			return -ENOMEM;
		memcpy(o->keys + o->keys_used, key, key_len);
		o->keys[o->keys_used + key_len] = '\0';
		o->keys_used += key_len + 1;
	}
	return 0;
}

/* Reads object o whole through the scanner. */
static int rb_scan_object(struct rb_run *run, struct rb_object *o, char *buf)
{
	const struct manifest_entry *e = &run->m->entries[o->item];
	struct rb_scan ctx = { .o = o,
			       .key = e->key,
			       .key_len = e->key_len,
			       .tar = run->f == REC_FORMAT_TAR };
	struct rec_scan_result res;
	struct rec_scan *s = NULL;
	char kb[LOG_KEY_MAX];
	uint64_t pos = 0;
	size_t got;
	int rc;

	rc = rec_scan_new(run->f, rb_emit, &ctx, &s);
	if (rc < 0)
		return rc;
	while (pos < e->size && atomic_load(&run->rc) == 0) {
		size_t want = e->size - pos > RBUILD_PIECE
				      ? RBUILD_PIECE
				      : (size_t)(e->size - pos);
		const struct backend_read r = { .key = e->key,
						.key_len = e->key_len,
						.etag = e->etag,
						.etag_len = e->etag_len,
						.offset = pos,
						.len = want,
						.buf = buf };

		rc = run->be->ops->read(run->be, &r, &got);
		if (rc == 0 && got != want)
			rc = -EIO; /* backends promise exact reads */
		if (rc < 0) {
			log_msg(LOG_ERR, "%s: cannot read (offset %llu): %s",
				log_key(kb, e->key, e->key_len),
				(unsigned long long)pos, strerror(-rc));
			goto out;
		}
		atomic_fetch_add(&run->bytes, want);
		rc = rec_scan_feed(s, buf, want);
		if (rc < 0)
			goto bad;
		pos += want;
	}
	if (atomic_load(&run->rc) != 0) {
		rc = -ECANCELED;
		goto out;
	}
	rc = rec_scan_finish(s, &res);
	if (rc < 0)
		goto bad;
	o->decoded = res.decoded_size;
	o->nl_added = res.nl_added;
	goto out;
bad:
	if (rc == -EBADMSG)
		log_msg(LOG_ERR, "%s: not a valid %s file: %s",
			log_key(kb, e->key, e->key_len),
			rec_format_name(run->f), rec_scan_error(s));
out:
	rec_scan_free(s);
	return rc;
}

static void *rb_worker(void *arg)
{
	struct rb_run *run = arg;
	char *buf = malloc(RBUILD_PIECE);
	size_t i;
	int rc, zero = 0;

	if (buf == NULL) {
		atomic_compare_exchange_strong(&run->rc, &zero, -ENOMEM);
		return NULL;
	}
	while ((i = atomic_fetch_add(&run->next, 1)) < run->n) {
		if (atomic_load(&run->rc) != 0)
			break;
		rc = rb_scan_object(run, &run->objs[i], buf);
		if (rc < 0 && rc != -ECANCELED) {
			zero = 0;
			atomic_compare_exchange_strong(&run->rc, &zero, rc);
			break;
		}
		atomic_fetch_add(&run->done, 1);
	}
	free(buf);
	return NULL;
}

/* A key and where it is, for the duplicate check. */
struct rb_key {
	uint64_t hash;
	const char *key;
	uint32_t obj; /* into run->objs */
	uint32_t rec; /* within the object */
};

static int rb_key_cmp(const void *a, const void *b)
{
	const struct rb_key *x = a, *y = b;
	int c;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	c = strcmp(x->key, y->key);
	if (c)
		return c;
	if (x->obj != y->obj)
		return x->obj < y->obj ? -1 : 1;
	return x->rec < y->rec ? -1 : x->rec > y->rec;
}

/* WebDataset groups consecutive members by key, so two samples with one
 * key must never be adjacent in a part; a shuffle can put any two next
 * to each other, so every key must be unique (rbuild.h). */
static int rb_check_keys(const struct rb_run *run)
{
	struct rb_key *k;
	size_t total = 0, n = 0, i;
	uint32_t j;
	int rc = 0;

	for (i = 0; i < run->n; i++)
		total += run->objs[i].count;
	if (total < 2)
		return 0;
	k = malloc(total * sizeof(*k));
	if (k == NULL)
		return -ENOMEM;
	for (i = 0; i < run->n; i++) {
		const char *p = run->objs[i].keys;

		for (j = 0; j < run->objs[i].count; j++) {
			size_t len = strlen(p);

			k[n].hash = fnv_hash(p, len);
			k[n].key = p;
			k[n].obj = (uint32_t)i;
			k[n].rec = j;
			n++;
			p += len + 1;
		}
	}
	qsort(k, n, sizeof(*k), rb_key_cmp);
	for (i = 1; i < n; i++) {
		const struct manifest_entry *a, *b;
		char kk[LOG_KEY_MAX], ka[LOG_KEY_MAX], kb[LOG_KEY_MAX];

		if (k[i].hash != k[i - 1].hash ||
		    strcmp(k[i].key, k[i - 1].key) != 0)
			continue;
		a = &run->m->entries[run->objs[k[i - 1].obj].item];
		b = &run->m->entries[run->objs[k[i].obj].item];
		log_msg(LOG_ERR,
			"tar sample key \"%s\" is used twice (%s sample %u, "
			"%s sample %u): WebDataset readers merge adjacent "
			"samples with one key, and a shuffled part can put "
			"them next to each other; make the keys unique "
			"(e.g. prefix each with its tar's name)",
			log_key(kk, k[i].key, strlen(k[i].key)),
			log_key(ka, a->key, a->key_len), k[i - 1].rec,
			log_key(kb, b->key, b->key_len), k[i].rec);
		rc = -EBADMSG;
		break;
	}
	free(k);
	return rc;
}

static void rb_progress(const struct rb_run *run, uint64_t total, bool last)
{
	uint64_t b = atomic_load(&run->bytes);

	fprintf(stderr, "\rindexing: %zu/%zu objects, %llu/%llu MiB%s",
		atomic_load(&run->done), run->n, (unsigned long long)(b >> 20),
		(unsigned long long)(total >> 20), last ? "\n" : "");
	fflush(stderr);
}

static void rb_objects_free(struct rb_object *objs, size_t n)
{
	size_t i;

	for (i = 0; objs && i < n; i++) {
		free(objs[i].off);
		free(objs[i].len);
		free(objs[i].keys);
	}
	free(objs);
}

int rbuild_run(struct backend *be, const struct manifest *m, enum rec_format f,
	       const struct rbuild_options *o, struct rindex **out)
{
	struct rb_run run = { .be = be, .m = m, .f = f };
	unsigned nthreads =
		o && o->threads ? o->threads : RBUILD_THREADS_DEFAULT;
	pthread_t *t = NULL;
	struct rindex *ri = NULL;
	uint64_t total = 0;
	unsigned started = 0, u;
	size_t i;
	int rc;

	run.objs = calloc(m->count ? m->count : 1, sizeof(*run.objs));
	if (run.objs == NULL)
		return -ENOMEM;
	for (i = 0; i < m->count; i++) {
		const struct manifest_entry *e = &m->entries[i];

		if (!rec_format_selects(f, e->key, e->key_len))
			continue;
		run.objs[run.n++].item = (uint32_t)i;
		total += e->size;
	}
	atomic_init(&run.next, 0);
	atomic_init(&run.done, 0);
	atomic_init(&run.bytes, 0);
	atomic_init(&run.rc, 0);
	if (nthreads > run.n)
		nthreads = run.n ? (unsigned)run.n : 1;
	t = calloc(nthreads, sizeof(*t));
	if (t == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (u = 0; u < nthreads && run.n > 0; u++) {
		rc = thread_start(&t[u], rb_worker, &run);
		if (rc < 0) {
			int zero = 0;

			atomic_compare_exchange_strong(&run.rc, &zero, rc);
			break;
		}
		started++;
	}
	/* Every read ends by its backend's deadline, so this loop ends. */
	while (started > 0 && atomic_load(&run.done) < run.n &&
	       atomic_load(&run.rc) == 0) {
		struct timespec ts = { 0, 200 * 1000 * 1000 };

		if (o && o->progress)
			rb_progress(&run, total, false);
		nanosleep(&ts, NULL);
	}
	for (u = 0; u < started; u++)
		pthread_join(t[u], NULL);
	if (o && o->progress)
		rb_progress(&run, total, true);
	rc = atomic_load(&run.rc);
	if (rc == 0 && run.n > 0 && atomic_load(&run.done) < run.n)
		rc = -EIO; /* a worker that could not start left work */
	if (rc < 0)
		goto out;
	if (f == REC_FORMAT_TAR) {
		rc = rb_check_keys(&run);
		if (rc < 0)
			goto out;
	}
	rc = rindex_new(f, m, &ri);
	for (i = 0; rc == 0 && i < run.n; i++) {
		struct rb_object *ob = &run.objs[i];

		rc = rindex_add_object(ri, ob->item, ob->decoded, ob->nl_added,
				       ob->off, ob->len, ob->count);
	}
	if (rc == 0)
		rc = rindex_finish(ri);
	if (rc < 0) {
		if (rc == -ENOMEM)
			log_msg(LOG_ERR, "record index: out of memory");
		rindex_free(ri);
		goto out;
	}
	*out = ri;
out:
	free(t);
	rb_objects_free(run.objs, m->count);
	return rc;
}
