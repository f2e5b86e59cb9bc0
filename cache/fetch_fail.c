/*
 * fetch_fail: see fetch_fail.h. A fixed table of recent failures under
 * one mutex, scanned whole: FETCH_FAIL_SLOTS is small next to what a
 * backend read costs, and the scan is skipped, without the lock, when
 * nothing failed within the window (the common case), through the time of
 * the latest failure kept in an atomic.
 */
#include "cache/fetch_fail.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/fnv.h"
#include "util/log.h"

struct fail_slot {
	uint64_t hash; /* of key and version; 0: free */
	char *key, *etag;
	size_t key_len, etag_len;
	bool pinned;	     /* etag given */
	uint64_t start, end; /* the failed range, [start, end) */
	uint64_t at_ms;	     /* when it failed (CLOCK_MONOTONIC) */
	int err;
	bool logged; /* a read that failed at once was logged */
};

struct fetch_fail {
	pthread_mutex_t lock; /* protects slot */
	uint64_t last_ms;     /* atomic: the latest failure noted; 0: none */
	struct fail_slot slot[FETCH_FAIL_SLOTS];
};

static uint64_t ident_hash(const char *key, size_t key_len, const char *etag,
			   size_t etag_len)
{
	uint64_t h = fnv_add(FNV_OFFSET, key, key_len);

	/* The separator keeps ("ab", "c") and ("a", "bc") apart; an
	 * unpinned read hashes apart from one pinned to "". */
	h = fnv_add(h, etag != NULL ? "\n" : "\r", 1);
	if (etag != NULL)
		h = fnv_add(h, etag, etag_len);
	return h ? h : 1;
}

static bool same_ident(const struct fail_slot *s, const char *key,
		       size_t key_len, const char *etag, size_t etag_len)
{
	if (s->key_len != key_len || memcmp(s->key, key, key_len) != 0 ||
	    s->pinned != (etag != NULL))
		return false;
	return etag == NULL || (s->etag_len == etag_len &&
				memcmp(s->etag, etag, etag_len) == 0);
}

static void slot_clear(struct fail_slot *s)
{
	free(s->key);
	free(s->etag);
	memset(s, 0, sizeof(*s));
}

int fetch_fail_new(struct fetch_fail **out)
{
	struct fetch_fail *ff = calloc(1, sizeof(*ff));

	if (ff == NULL)
		return -ENOMEM;
	pthread_mutex_init(&ff->lock, NULL);
	*out = ff;
	return 0;
}

void fetch_fail_free(struct fetch_fail *ff)
{
	size_t i;

	if (ff == NULL)
		return;
	for (i = 0; i < FETCH_FAIL_SLOTS; i++)
		slot_clear(&ff->slot[i]);
	pthread_mutex_destroy(&ff->lock);
	free(ff);
}

void fetch_fail_forked(struct fetch_fail *ff)
{
	size_t i;

	/* The parent's strings are ours to free (the child has a copy of
	 * its heap); its lock is not ours to take. */
	pthread_mutex_init(&ff->lock, NULL);
	for (i = 0; i < FETCH_FAIL_SLOTS; i++)
		slot_clear(&ff->slot[i]);
	__atomic_store_n(&ff->last_ms, 0, __ATOMIC_RELAXED);
}

int fetch_fail_check(struct fetch_fail *ff, const char *key, size_t key_len,
		     const char *etag, size_t etag_len, uint64_t offset,
		     uint64_t len)
{
	uint64_t now = clock_now_ms(), last, h, start = 0, end = 0, ago = 0;
	bool log_it = false;
	int rc = 0;
	size_t i;

	last = __atomic_load_n(&ff->last_ms, __ATOMIC_ACQUIRE);
	if (last == 0 || (now > last && now - last >= FETCH_FAIL_WINDOW_MS))
		return 0;
	h = ident_hash(key, key_len, etag, etag_len);
	pthread_mutex_lock(&ff->lock);
	now = clock_now_ms(); /* no slot is newer than this */
	for (i = 0; i < FETCH_FAIL_SLOTS; i++) {
		struct fail_slot *s = &ff->slot[i];

		if (s->hash != h || now - s->at_ms >= FETCH_FAIL_WINDOW_MS ||
		    offset >= s->end || offset + len <= s->start ||
		    !same_ident(s, key, key_len, etag, etag_len))
			continue;
		rc = s->err;
		if (!s->logged) {
			s->logged = log_it = true;
			start = s->start;
			end = s->end;
			ago = now - s->at_ms;
		}
		break;
	}
	pthread_mutex_unlock(&ff->lock);
	if (log_it) {
		char kb[LOG_KEY_MAX];

		log_msg(LOG_WARNING,
			"fetch: %s: bytes %llu-%llu failed %llu ms ago (%s): "
			"a read of them fails at once for %u ms after such a "
			"failure, not after another wait for the store",
			log_key(kb, key, key_len), (unsigned long long)start,
			(unsigned long long)end - 1, (unsigned long long)ago,
			strerror(-rc), FETCH_FAIL_WINDOW_MS);
	}
	return rc;
}

void fetch_fail_note(struct fetch_fail *ff, const char *key, size_t key_len,
		     const char *etag, size_t etag_len, uint64_t offset,
		     uint64_t len, int err)
{
	struct fail_slot n = { 0 }, old, *s, *same = NULL, *spare = NULL;
	struct fail_slot *oldest = NULL, *pick;
	uint64_t now;
	size_t i;

	if ((err != -EIO && err != -ETIMEDOUT) || len == 0)
		return;
	n.key = malloc(key_len + 1);
	n.etag = malloc(etag != NULL ? etag_len + 1 : 1);
	if (n.key == NULL || n.etag == NULL) {
		slot_clear(&n);
		return;
	}
	memcpy(n.key, key, key_len);
	n.key[key_len] = '\0';
	if (etag != NULL)
		memcpy(n.etag, etag, etag_len);
	n.etag[etag != NULL ? etag_len : 0] = '\0';
	n.key_len = key_len;
	n.etag_len = etag != NULL ? etag_len : 0;
	n.pinned = etag != NULL;
	n.hash = ident_hash(key, key_len, etag, etag_len);
	n.start = offset;
	n.end = offset + len;
	n.err = err;

	pthread_mutex_lock(&ff->lock);
	now = clock_now_ms();
	n.at_ms = now;
	/* The same range failing again takes its slot; else a free or
	 * expired one, else the oldest. */
	for (i = 0; i < FETCH_FAIL_SLOTS && same == NULL; i++) {
		s = &ff->slot[i];
		if (s->hash == 0 || now - s->at_ms >= FETCH_FAIL_WINDOW_MS) {
			if (spare == NULL)
				spare = s;
		} else if (s->hash == n.hash && s->start == n.start &&
			   s->end == n.end &&
			   same_ident(s, key, key_len, etag, etag_len)) {
			same = s;
		} else if (oldest == NULL || s->at_ms < oldest->at_ms) {
			oldest = s;
		}
	}
	pick = same != NULL ? same : spare != NULL ? spare : oldest;
	old = *pick;
	*pick = n;
	__atomic_store_n(&ff->last_ms, now, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ff->lock);
	free(old.key);
	free(old.etag);
}
