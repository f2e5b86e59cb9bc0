/*
 * evict: access times, kept in memory and written in batches, LRU
 * eviction down to a target of live bytes, and dropping one entry for a
 * cause (bad CRC, missing blob). Rows are deleted in an index
 * transaction and their blobs unlinked after it commits: the index says
 * what to unlink, this file unlinks it (entry_blob_unlink()).
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TOUCH_BATCH 1024
#define TOUCH_SECONDS 30

/* ---- access times ------------------------------------------------------- */

struct evict_touch_args {
	struct touch *t;
	size_t n;
};

static int evict_touches_run(struct cache *c, void *arg)
{
	struct evict_touch_args *a = arg;
	struct touch *t = a->t;
	size_t n = a->n, i;
	struct index_txn *txn;
	int rc;

	rc = index_begin(c, true, &txn);
	if (rc != 0)
		return rc;
	for (i = 0; i < n && rc == 0; i++) {
		struct entry_hdr h;
		const void *v;
		size_t v_len;
		void *nv;

		if (index_get(txn, INDEX_ROWS, t[i].hash, &v, &v_len) != 0 ||
		    v_len < sizeof(h))
			continue;
		memcpy(&h, v, sizeof(h));
		if (h.atime >= t[i].atime)
			continue;
		h.atime = t[i].atime;
		/* A copy: v points into the map, which the put may change
		 * under it. */
		nv = malloc(v_len);
		if (nv == NULL) {
			rc = -ENOMEM;
			break;
		}
		memcpy(nv, v, v_len);
		memcpy(nv, &h, sizeof(h));
		rc = index_put(txn, INDEX_ROWS, t[i].hash, nv, v_len);
		free(nv);
	}
	if (rc == 0)
		rc = index_end(txn, true);
	else
		index_end(txn, false);
	return rc;
}

void evict_touches_flush(struct cache *c)
{
	struct evict_touch_args a;
	struct touch *t;
	size_t n;
	int rc;

	pthread_mutex_lock(&c->evict.touch_lock);
	t = c->evict.touched;
	n = c->evict.n_touched;
	c->evict.touched = NULL;
	c->evict.n_touched = c->evict.cap_touched = 0;
	c->evict.last_flush = time(NULL);
	pthread_mutex_unlock(&c->evict.touch_lock);
	if (n == 0 || c->readonly) {
		free(t);
		return;
	}
	a.t = t;
	a.n = n;
	rc = index_guarded(c, evict_touches_run, &a);
	if (rc != 0 && rc != INDEX_BROKEN)
		cache_warn_limited(c, "cannot record access times", rc);
	free(t);
}

void evict_touch(struct cache *c, const uint8_t *hash)
{
	uint64_t now = now_seconds();
	bool flush = false;

	pthread_mutex_lock(&c->evict.touch_lock);
	if (c->evict.n_touched > 0 &&
	    memcmp(c->evict.touched[c->evict.n_touched - 1].hash, hash,
		   HASH_LEN) == 0 &&
	    c->evict.touched[c->evict.n_touched - 1].atime == now)
		goto out;
	if (c->evict.n_touched == c->evict.cap_touched) {
		size_t cap =
			c->evict.cap_touched ? 2 * c->evict.cap_touched : 64;
		struct touch *t = realloc(c->evict.touched, cap * sizeof(*t));

		if (t == NULL)
			goto out; /* an access time is a hint */
		c->evict.touched = t;
		c->evict.cap_touched = cap;
	}
	memcpy(c->evict.touched[c->evict.n_touched].hash, hash, HASH_LEN);
	c->evict.touched[c->evict.n_touched++].atime = now;
	flush = c->evict.n_touched >= TOUCH_BATCH ||
		(time_t)now - c->evict.last_flush >= TOUCH_SECONDS;
out:
	pthread_mutex_unlock(&c->evict.touch_lock);
	if (flush)
		evict_touches_flush(c);
}

/* ---- eviction ------------------------------------------------------------ */

struct victim {
	uint64_t atime;
	uint8_t hash[HASH_LEN];
};

struct blob_ref {
	uint8_t hash[HASH_LEN];
	uint64_t blob_id;
};

static int evict_victim_cmp(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;

	if (x->atime != y->atime)
		return x->atime < y->atime ? -1 : 1;
	return memcmp(x->hash, y->hash, HASH_LEN);
}

struct evict_scan_args {
	struct victim *v;
	size_t n, cap;
};

/* Collects the rows' access times (a row for index_scan()). */
static int evict_victim_add(void *arg, const uint8_t *key, size_t key_len,
			    const void *val, size_t val_len)
{
	struct evict_scan_args *a = arg;
	struct entry_hdr h;

	if (key_len != HASH_LEN || val_len < sizeof(h))
		return 0;
	if (a->n == a->cap) {
		size_t ncap = a->cap ? 2 * a->cap : 1024;
		struct victim *nv = realloc(a->v, ncap * sizeof(*nv));

		if (nv == NULL)
			return 1; /* evict among those found so far */
		a->v = nv;
		a->cap = ncap;
	}
	memcpy(&h, val, sizeof(h));
	a->v[a->n].atime = h.atime;
	memcpy(a->v[a->n].hash, key, HASH_LEN);
	a->n++;
	return 0;
}

/* Evicts least recently used entries until live bytes <= target. A full
 * scan sorted by access time: eviction frees a tenth of the budget at a
 * time, so it runs rarely, and no second index has to be kept in step. */
static int evict_run(struct cache *c, void *arg)
{
	uint64_t target = *(const uint64_t *)arg;
	struct evict_scan_args s = { NULL, 0, 0 };
	struct victim *v;
	struct blob_ref *unlink_list = NULL;
	size_t n, n_unlink = 0, i;
	uint64_t live;
	struct index_txn *txn;
	int rc;

	evict_touches_flush(c);
	if (index_live_bytes(c) <= target)
		goto out;
	rc = index_begin(c, false, &txn);
	if (rc != 0)
		goto fail;
	index_scan(txn, evict_victim_add, &s);
	index_end(txn, false);
	v = s.v;
	n = s.n;
	if (n == 0)
		goto out;
	qsort(v, n, sizeof(*v), evict_victim_cmp);
	unlink_list = malloc(n * sizeof(*unlink_list));
	if (unlink_list == NULL)
		goto out;

	rc = index_begin(c, true, &txn);
	if (rc != 0)
		goto fail;
	rc = index_meta_get(txn, "live_bytes", &live);
	for (i = 0; rc == 0 && i < n && live > target; i++) {
		bool blob;
		uint64_t blob_id = 0;

		rc = index_row_delete(txn, v[i].hash, NULL, 0, &blob, &blob_id);
		if (rc == -ENOENT) {
			rc = 0;
			continue;
		}
		if (rc != 0)
			break;
		stat_add(&c->evictions, 1);
		if (blob) {
			memcpy(unlink_list[n_unlink].hash, v[i].hash, HASH_LEN);
			unlink_list[n_unlink++].blob_id = blob_id;
		}
		rc = index_meta_get(txn, "live_bytes", &live);
	}
	if (rc == 0)
		rc = index_end(txn, true);
	else
		index_end(txn, false);
	if (rc != 0)
		goto fail;
	for (i = 0; i < n_unlink; i++)
		entry_blob_unlink(c, unlink_list[i].hash,
				  unlink_list[i].blob_id);
	goto out;
fail:
	if (rc != INDEX_BROKEN)
		cache_warn_limited(c, "cannot evict", rc);
out:
	free(unlink_list);
	free(s.v);
	return 0;
}

void evict_to(struct cache *c, uint64_t target)
{
	if (c->readonly)
		return;
	pthread_mutex_lock(&c->evict.lock);
	index_guarded(c, evict_run, &target);
	pthread_mutex_unlock(&c->evict.lock);
}

/* ---- one entry, for a cause --------------------------------------------- */

struct evict_drop_args {
	const uint8_t *hash, *id;
	size_t id_len;
	bool blob;
	uint64_t blob_id;
};

static int evict_entry_drop_run(struct cache *c, void *arg)
{
	struct evict_drop_args *a = arg;
	struct index_txn *t;
	int rc;

	rc = index_begin(c, true, &t);
	if (rc != 0)
		return rc;
	rc = index_row_delete(t, a->hash, a->id, a->id_len, &a->blob,
			      &a->blob_id);
	if (rc == 0)
		rc = index_end(t, true);
	else
		index_end(t, false);
	return rc;
}

void evict_entry_drop(struct cache *c, const uint8_t *hash, const uint8_t *id,
		      size_t id_len)
{
	struct evict_drop_args a = { .hash = hash, .id = id, .id_len = id_len };
	int rc;

	if (c->readonly)
		return;
	rc = index_guarded(c, evict_entry_drop_run, &a);
	if (rc == 0 && a.blob)
		entry_blob_unlink(c, hash, a.blob_id);
	else if (rc != 0 && rc != -ENOENT && rc != INDEX_BROKEN)
		cache_warn_limited(c, "cannot drop an entry", rc);
}
