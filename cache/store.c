/*
 * store: fetched chunks into the cache. A blob is written under a tmp name
 * and renamed into place at once; its row (and an inline chunk's bytes)
 * waits in a queue that the committer thread indexes in one transaction
 * per batch, evicting first when the budget would be exceeded.
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/log.h"
#include "util/thread.h"

/* The longest a store waits for room in the queue of the committer. */
#define STORE_WAIT_MS 10000
#define STORE_WAIT_TEXT "10 s"
#define COMMIT_BATCH 64	   /* chunks that make the committer start now */
#define COMMIT_DELAY_MS 20 /* else it waits this long for a batch */

/* What O_DIRECT wants aligned: the buffer, the length and the offset. */
#define STORE_DIRECT_ALIGN 4096

void store_failed(struct cache *c, int rc)
{
	stat_add(&c->store_failures, 1);
	cache_warn_limited(c, "cannot store a chunk", rc);
}

static int store_write_all(int fd, const uint8_t *p, uint64_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (uint64_t)w;
	}
	return 0;
}

/* Writes a blob's bytes to fd. Its page-aligned part goes around the
 * page cache (O_DIRECT): the chunk stays in the fetch engine's memory for
 * its readers anyway, and a buffered write copies every byte into newly
 * allocated page-cache pages, which was more than half the daemon's CPU
 * in a cold large sequential read (perf, issue 12). The rest, and all of
 * it where the file system refuses O_DIRECT (tmpfs), is written as
 * before. */
static int store_blob_write_data(int fd, const uint8_t *data, uint64_t len)
{
	uint64_t direct = len & ~(uint64_t)(STORE_DIRECT_ALIGN - 1);
	int fl = fcntl(fd, F_GETFL), rc = 0;

	if (fl >= 0 && direct > 0 &&
	    (uintptr_t)data % STORE_DIRECT_ALIGN == 0 &&
	    fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
		rc = store_write_all(fd, data, direct);
		if (fcntl(fd, F_SETFL, fl) != 0 && rc == 0)
			rc = -errno;
		if (rc == -EINVAL) { /* refused after all: start over */
			if (lseek(fd, 0, SEEK_SET) != 0)
				return -errno;
			rc = 0;
		} else {
			data += direct;
			len -= direct;
		}
	}
	return rc == 0 ? store_write_all(fd, data, len) : rc;
}

/* Writes the blob under a temporary name and renames it into place. */
static int store_blob_write(struct cache *c, const uint8_t *hash,
			    uint64_t blob_id, const uint8_t *data, uint64_t len)
{
	char hex[2 * HASH_LEN + 1], *tmp = NULL, *dir = NULL, *path = NULL;
	int fd = -1, rc;

	entry_hash_hex(hash, hex);
	if (asprintf(&tmp, "%s/blobs/tmp/%s.%d.%" PRIu64, c->dir, hex,
		     (int)getpid(),
		     __atomic_add_fetch(&c->tmp_seq, 1, __ATOMIC_RELAXED)) <
		    0 ||
	    asprintf(&dir, "%s/blobs/%.2s", c->dir, hex) < 0 ||
	    asprintf(&path, "%s/%s.%016" PRIx64, dir, hex, blob_id) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	fd = store_file_open(tmp, O_WRONLY | O_CREAT | O_EXCL);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	rc = store_blob_write_data(fd, data, len);
	if (rc == 0 && c->fsync && fdatasync(fd) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	fd = -1;
	if (rc == 0)
		rc = store_dir_make(dir);
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc != 0)
		unlink(tmp);
out:
	free(path);
	free(dir);
	free(tmp);
	return rc;
}

/* Writes the rows of pending chunks batch[0..n) in one transaction (one
 * sync for all of them), making room first. Returns the LMDB error, if
 * any; on error nothing of the batch is indexed. */
struct store_put_args {
	struct pending **batch;
	size_t n;
	bool *orphan;
};

static int store_batch_run(struct cache *c, void *arg)
{
	struct store_put_args *a = arg;
	struct pending **batch = a->batch;
	bool *orphan = a->orphan;
	struct index_txn *t;
	size_t i;
	int rc;

	rc = index_begin(c, true, &t);
	if (rc != 0)
		return rc;
	for (i = 0; rc == 0 && i < a->n; i++) {
		struct pending *p = batch[i];
		const void *v;
		size_t v_len;

		if (__atomic_load_n(&p->dropped, __ATOMIC_ACQUIRE)) {
			orphan[i] = p->data == NULL;
			continue;
		}
		rc = index_get(t, INDEX_ROWS, p->hash, &v, &v_len);
		if (rc == 0) {
			/* Stored first by another thread or process (same
			 * identity, same bytes), or a collision we leave
			 * alone: our blob file belongs to nobody. */
			orphan[i] = p->data == NULL;
			continue;
		}
		if (rc != -ENOENT)
			break;
		rc = index_put(t, INDEX_ROWS, p->hash, p->val, p->val_len);
		if (rc == 0 && p->data != NULL)
			rc = index_put(t, INDEX_DATA, p->hash, p->data,
				       (size_t)p->len);
		if (rc == 0)
			rc = index_live_add(t, (int64_t)p->len);
	}
	if (rc == 0)
		rc = index_end(t, true);
	else
		index_end(t, false);
	return rc;
}

static int store_batch_put(struct cache *c, struct pending **batch, size_t n)
{
	bool *orphan = calloc(n ? n : 1, sizeof(*orphan));
	uint64_t total = 0, target = c->budget / 10 * 9;
	struct store_put_args a = { batch, n, orphan };
	size_t i;
	int rc;

	if (orphan == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		total += batch[i]->len;
	if (index_live_bytes(c) + total > c->budget)
		evict_to(c, target > total ? target - total : 0);
	rc = index_guarded(c, store_batch_run, &a);
	for (i = 0; i < n; i++)
		if (batch[i]->data == NULL && (rc != 0 || orphan[i]))
			entry_blob_unlink(c, batch[i]->hash, batch[i]->blob_id);
	free(orphan);
	if (rc == 0 && index_live_bytes(c) > c->budget)
		evict_to(c, target); /* other processes stored meanwhile */
	return rc;
}

/* Whether DIR's filesystem is (nearly) full: LMDB reports a write cut
 * short by a full disk as EIO. */
static bool store_disk_full(const struct cache *c)
{
	struct statvfs sv;

	return statvfs(c->dir, &sv) == 0 &&
	       (uint64_t)sv.f_bavail * sv.f_frsize < 2 * c->chunk_size;
}

/* Indexes first..last (a run of the queue) in batches of at most half the
 * budget, so eviction can always make room for one. */
static void store_batch_commit(struct cache *c, struct pending *first,
			       struct pending *last)
{
	struct pending *p, **batch;
	size_t n = 0, i, start;
	uint64_t sum;
	int rc;

	for (p = first;; p = p->next) {
		n++;
		if (p == last)
			break;
	}
	batch = malloc(n * sizeof(*batch));
	if (batch == NULL) {
		stat_add(&c->store_failures, n);
		cache_warn_limited(c, "cannot store chunks", -ENOMEM);
		return;
	}
	/* Not p = p->next after last: last->next is the tail's link, which
	 * store_chunk() writes under q.lock (see struct pending). */
	for (p = first, i = 0; i < n; i++) {
		batch[i] = p;
		if (p != last)
			p = p->next;
	}
	for (start = 0; start < n; start = i) {
		for (i = start, sum = 0;
		     i < n &&
		     (i == start || sum + batch[i]->len <= c->budget / 2);
		     i++)
			sum += batch[i]->len;
		rc = store_batch_put(c, batch + start, i - start);
		if (rc == -EIO && store_disk_full(c))
			rc = -ENOSPC; /* LMDB's word for a short write */
		if (rc != 0) {
			stat_add(&c->store_failures, i - start);
			if (rc != INDEX_BROKEN) /* logged once already */
				cache_warn_limited(c, "cannot store chunks",
						   rc);
		}
	}
	free(batch);
}

static void store_pending_free(struct cache *c, struct pending *p)
{
	free(p->val);
	if (p->owned)
		free((void *)p->data);
	fetch_unpin(c->fetch, &p->pin);
	free(p);
}

/* Caller holds q.lock: is the queue worth a transaction now? */
static bool store_batch_full(const struct cache *c)
{
	return c->q.count >= COMMIT_BATCH || c->q.bytes >= c->q.max / 2;
}

/* The committer thread: indexes what store_chunk() queued, everything
 * queued so far in each round (waiting up to COMMIT_DELAY_MS for a batch
 * to gather), until cache_free() stops it. */
static void *store_committer_main(void *arg)
{
	struct cache *c = arg;

	pthread_setname_np(pthread_self(), "shardfs-commit");
	pthread_mutex_lock(&c->q.lock);
	for (;;) {
		struct pending *first, *last, *p, *next;
		uint64_t bytes = 0;
		unsigned count = 0;
		struct timespec deadline;

		while (c->q.head == NULL && !c->q.stop)
			pthread_cond_wait(&c->q.work, &c->q.lock);
		if (c->q.head == NULL)
			break;
		/* Let a batch gather: one transaction for many chunks, and
		 * one wake-up of this thread instead of one per chunk. */
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_nsec += COMMIT_DELAY_MS * 1000000L;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
		while (!c->q.stop && c->q.drainers == 0 && !store_batch_full(c))
			if (pthread_cond_timedwait(&c->q.work, &c->q.lock,
						   &deadline) == ETIMEDOUT)
				break;
		first = c->q.head;
		last = (struct pending *)((char *)c->q.tail -
					  offsetof(struct pending, next));
		c->q.busy = true;
		pthread_mutex_unlock(&c->q.lock);

		/* Items stay queued (and served from the queue) until
		 * their rows are committed. */
		store_batch_commit(c, first, last);

		pthread_mutex_lock(&c->q.lock);
		c->q.head = last->next;
		if (c->q.head == NULL)
			c->q.tail = &c->q.head;
		for (p = first;; p = p->next) {
			bytes += p->len;
			count++;
			if (p == last)
				break;
		}
		c->q.bytes -= bytes;
		c->q.count -= count;
		c->q.stalled = false;
		pthread_cond_broadcast(&c->q.idle);
		pthread_mutex_unlock(&c->q.lock);
		for (p = first;; p = next) {
			bool end = p == last;

			next = end ? NULL : p->next; /* see struct pending */
			store_pending_free(c, p);
			if (end)
				break;
		}
		pthread_mutex_lock(&c->q.lock);
		c->q.busy = false;
		pthread_cond_broadcast(&c->q.idle);
	}
	pthread_mutex_unlock(&c->q.lock);
	return NULL;
}

/* Waits until every chunk this process queued is indexed, and the
 * committer is done with them (idle: a process may fork right after, and
 * a thread in the allocator at a fork can leave its locks held in the
 * child under some allocators, e.g. AddressSanitizer's). Bounded: at most
 * STORE_WAIT_MS, and not at all once the committer is known to be stuck
 * behind another process's write lock (see store_wait_room());
 * store_close(), which must not free
 * the engine under the queue's pins, waits for as long as it takes. */
static void store_drain_for(struct cache *c, bool bounded)
{
	struct timespec deadline;

	if (!index_ours(c))
		return; /* nothing was queued in this process */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += STORE_WAIT_MS / 1000;
	pthread_mutex_lock(&c->q.lock);
	c->q.drainers++;
	while ((c->q.head != NULL || c->q.busy) && c->q.running) {
		if (bounded && c->q.stalled)
			break; /* known to be stuck: do not wait again */
		pthread_cond_signal(&c->q.work);
		if (!bounded)
			pthread_cond_wait(&c->q.idle, &c->q.lock);
		else if (pthread_cond_timedwait(&c->q.idle, &c->q.lock,
						&deadline) == ETIMEDOUT)
			break;
	}
	c->q.drainers--;
	pthread_mutex_unlock(&c->q.lock);
}

void store_drain(struct cache *c)
{
	store_drain_for(c, true);
}

void store_forked(struct cache *c)
{
	pthread_mutex_init(&c->q.lock, NULL);
	pthread_cond_init(&c->q.work, NULL);
	pthread_cond_init(&c->q.idle, NULL);
	c->q.head = NULL;
	c->q.tail = &c->q.head;
	c->q.bytes = 0;
	c->q.count = 0;
	c->q.drainers = 0;
	c->q.busy = false;
	c->q.running = false;
}

/* Caller holds q.lock: waits while the queue is over q.max, at most
 * STORE_WAIT_MS, and not at all while the committer is known to be stuck
 * (q.stalled: it made no progress through a whole wait, e.g. another
 * process holds the index's write lock). Returns false if there is no
 * room: the chunk is not stored (it was served; a later read fetches it
 * again), rather than a reader's thread waiting on another process. */
static bool store_wait_room(struct cache *c)
{
	struct timespec deadline;

	if (c->q.bytes <= c->q.max || !c->q.running)
		return true;
	if (c->q.stalled)
		return false;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += STORE_WAIT_MS / 1000;
	while (c->q.bytes > c->q.max && c->q.running)
		if (pthread_cond_timedwait(&c->q.idle, &c->q.lock, &deadline) ==
		    ETIMEDOUT) {
			c->q.stalled = c->q.bytes > c->q.max;
			return !c->q.stalled;
		}
	return true;
}

/* Stores a fetched chunk: writes its blob (large chunks) now, and queues
 * its row for the committer thread, so the reader never waits for a
 * transaction's sync. Failures are counted and logged, never returned. */
void store_chunk(struct cache *c, const uint8_t *hash, const uint8_t *id,
		 size_t id_len, const uint8_t *data, uint64_t len,
		 struct fetch_pin *keep)
{
	bool inl = len <= c->inline_max;
	struct entry_hdr h = { .version = ENTRY_VERSION,
			       .flags = inl ? ENTRY_INLINE : 0,
			       .length = len,
			       .n_crcs = entry_n_blocks(len),
			       .id_len = (uint32_t)id_len };
	size_t crc_bytes = (size_t)h.n_crcs * 4;
	struct pending *p;
	uint32_t b;
	int rc;

	/* No chunk may flush half the cache; a read-only one stores none. */
	if (c->budget == 0 || len > c->budget / 2 || c->readonly)
		return;
	if (!index_ok(c)) {
		stat_add(&c->store_failures, 1); /* logged when it broke */
		return;
	}
	if (!index_available(c)) {
		store_failed(c, -ENXIO);
		return;
	}
	h.atime = h.ctime = now_seconds();
	if (!inl)
		h.blob_id = c->blob_seed + __atomic_add_fetch(&c->tmp_seq, 1,
							      __ATOMIC_RELAXED);
	p = calloc(1, sizeof(*p));
	if (p == NULL ||
	    (p->val = malloc(sizeof(h) + crc_bytes + id_len)) == NULL) {
		free(p);
		store_failed(c, -ENOMEM);
		return;
	}
	memcpy(p->hash, hash, HASH_LEN);
	p->val_len = sizeof(h) + crc_bytes + id_len;
	p->len = len;
	p->blob_id = h.blob_id;
	memcpy(p->val, &h, sizeof(h));
	for (b = 0; b < h.n_crcs; b++) {
		uint32_t crc = entry_block_crc(data, len, b);

		memcpy(p->val + sizeof(h) + (size_t)b * 4, &crc, 4);
	}
	memcpy(p->val + sizeof(h) + crc_bytes, id, id_len);
	p->pin.fl = NULL;
	if (inl && keep == NULL) {
		uint8_t *copy = malloc(len ? len : 1);

		if (copy == NULL) {
			store_pending_free(c, p);
			store_failed(c, -ENOMEM);
			return;
		}
		memcpy(copy, data, len);
		p->data = copy;
		p->owned = true;
	} else if (inl) {
		/* Borrowed until queued: then the queue keeps the pin. */
		p->data = data != NULL ? data : (const uint8_t *)"";
	} else {
		rc = store_blob_write(c, hash, h.blob_id, data, len);
		if (rc != 0) {
			store_pending_free(c, p);
			store_failed(c, rc);
			return;
		}
	}

	pthread_mutex_lock(&c->q.lock);
	if (!store_wait_room(c)) {
		pthread_mutex_unlock(&c->q.lock);
		if (!inl)
			entry_blob_unlink(c, hash, h.blob_id);
		store_pending_free(c, p);
		stat_add(&c->store_failures, 1);
		cache_warn_limited(
			c,
			"cannot store a chunk: the committer indexed "
			"nothing for " STORE_WAIT_TEXT " (does another "
			"process hold the index's write lock?)",
			-ETIMEDOUT);
		return;
	}
	if (!c->q.running && !c->q.closing &&
	    thread_start(&c->q.thread, store_committer_main, c) == 0)
		c->q.running = true;
	if (c->q.running && !c->q.closing) {
		bool first = c->q.head == NULL;

		if (inl && !p->owned) {
			p->pin = *keep;
			keep->fl = NULL;
		}
		*c->q.tail = p;
		c->q.tail = &p->next;
		c->q.bytes += len;
		c->q.count++;
		if (first || store_batch_full(c))
			pthread_cond_signal(&c->q.work);
		p = NULL;
	}
	pthread_mutex_unlock(&c->q.lock);
	if (p != NULL) { /* no thread, or closing: index it here */
		store_batch_commit(c, p, p);
		store_pending_free(c, p);
	}
}

void store_close(struct cache *c)
{
	if (!index_ours(c))
		return; /* nothing was queued in this process */
	pthread_mutex_lock(&c->q.lock);
	c->q.closing = true;
	pthread_mutex_unlock(&c->q.lock);
	store_drain_for(c, false);
}

/* Serves [off, off + len) of a chunk still queued for indexing. Returns
 * LOOKUP_HIT (copied), LOOKUP_MISS (not queued), or LOOKUP_BLOB with e
 * filled for the caller to read the blob. */
int store_pending_find(struct cache *c, const uint8_t *hash, const uint8_t *id,
		       size_t id_len, uint64_t chunk_len, uint64_t off,
		       size_t len, void *dst, struct entry *e)
{
	struct pending *p;
	int ret = LOOKUP_MISS;

	pthread_mutex_lock(&c->q.lock);
	for (p = c->q.head; p != NULL; p = p->next) {
		if (memcmp(p->hash, hash, HASH_LEN) != 0 ||
		    p->len != chunk_len ||
		    __atomic_load_n(&p->dropped, __ATOMIC_ACQUIRE))
			continue;
		if (entry_parse(p->val, p->val_len, id, id_len, e) != 0)
			continue;
		if (p->data != NULL) {
			memcpy(dst, p->data + off, len);
			free(e->crcs);
			e->crcs = NULL;
			ret = LOOKUP_HIT;
		} else {
			ret = LOOKUP_BLOB;
		}
		break;
	}
	pthread_mutex_unlock(&c->q.lock);
	return ret;
}

/* A chunk found bad (missing blob, CRC) may still be queued: keeps the
 * committer from indexing it after the caller dropped its row. */
void store_pending_drop(struct cache *c, const uint8_t *hash)
{
	struct pending *p;

	pthread_mutex_lock(&c->q.lock);
	for (p = c->q.head; p != NULL; p = p->next)
		if (memcmp(p->hash, hash, HASH_LEN) == 0)
			__atomic_store_n(&p->dropped, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->q.lock);
}

/* Makes path 0700, exactly (umask-independent); an existing one is left
 * alone (maint_perms_tighten() handles it). */
int store_dir_make(const char *path)
{
	if (mkdir(path, 0700) == 0)
		return chmod(path, 0700) == 0 ? 0 : -errno;
	return errno == EEXIST ? 0 : -errno;
}

/* Creates path's missing parents (0755: they are not the cache's) and
 * path itself (0700). */
int store_mkdir_p(const char *path)
{
	char *p = strdup(path), *s;
	int rc = 0;

	if (p == NULL)
		return -ENOMEM;
	for (s = p + 1; *s != '\0' && rc == 0; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			rc = -errno;
		*s = '/';
	}
	if (rc == 0)
		rc = store_dir_make(p);
	free(p);
	return rc;
}

/* Opens (creating 0600) a file of the cache; an existing one keeps its
 * mode (maint_perms_tighten() handles it). */
int store_file_open(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	return fd;
}
