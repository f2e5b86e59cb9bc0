/*
 * fetch_fail: the ranges of objects whose backend read failed just now,
 * so that a read of them fails again at once instead of waiting out the
 * backend's deadline a second time (part of the fetch engine, cache/fetch_*.c;
 * internal to cache/: fs/ never includes this header).
 *
 * Why: after a read-ahead fails with EIO, the kernel asks again for the
 * first page of it (filemap_read() falls back to ->read_folio() for a page
 * that is not up to date), before the read() returns. Against a store that
 * does not answer, that second read would wait out read_timeout_ms again,
 * so one read() took twice the documented bound. The backends cannot tell
 * that second read from a new one; the fetch engine, through which every
 * backend read of a mount goes (fetch_backend_read()), can.
 *
 * What: a backend read that failed with -EIO or -ETIMEDOUT (no usable
 * answer: the store did not answer in time, or answered wrongly until the
 * retries ran out) is remembered with the object's key and version
 * (etag), its byte range, its errno and when it failed, for
 * FETCH_FAIL_WINDOW_MS. A read of the same key and version
 * whose range overlaps a remembered one within that time fails at once
 * with the same errno, without a request; the first such read of each
 * failure is logged ("... failed N ms ago ..."). The window runs from the
 * failure of a real read, never from a read that failed at once, so a
 * store that is back is asked again at most FETCH_FAIL_WINDOW_MS after it
 * failed: a read of that range in the window fails even if the store
 * answers again. With it, one read() of an uncached file ends within
 * read_timeout_ms of its first backend request plus the time to fail the
 * re-read (docs/RELIABILITY.md, "Deadlines and the time to EIO").
 *
 * Not remembered: an answer (-ESTALE, -ENOENT, -EACCES, ...), which comes
 * quickly and may change (an object put back is seen at once), and local
 * failures (-ENOMEM). Ranges of one object that failed apart are
 * remembered apart; the table holds FETCH_FAIL_SLOTS failures, the oldest
 * replaced first.
 *
 * Thread safety: every function may be called from any thread; one mutex,
 * taken with no other lock of the cache held (it is taken by
 * fetch_backend_read(), which runs without f->lock), guards the table. A
 * check when nothing failed within the window takes no lock.
 */
#ifndef SHARDFS_CACHE_FETCH_FAIL_H
#define SHARDFS_CACHE_FETCH_FAIL_H

#include <stddef.h>
#include <stdint.h>

/* How long a failed range fails again at once: longer than the kernel
 * takes to ask again after an EIO, even on a loaded machine, and short
 * enough that a store that is back is soon asked again. */
#define FETCH_FAIL_WINDOW_MS 2000
#define FETCH_FAIL_SLOTS 256

struct fetch_fail;

/* Creates an empty table. Returns 0 and sets *out, or -ENOMEM. */
int fetch_fail_new(struct fetch_fail **out);

/* Frees ff and what it holds. NULL is a no-op. */
void fetch_fail_free(struct fetch_fail *ff);

/* In a child after fork(): forgets every failure and re-creates the lock
 * (the parent's may have been held by a thread the child does not
 * have). Call before the child's threads use ff. */
void fetch_fail_forked(struct fetch_fail *ff);

/* Before a backend read of [offset, offset + len) of key (key_len bytes)
 * at version etag (etag_len bytes; NULL: unpinned, which matches only
 * unpinned failures): 0 if the read should go ahead, or the negative errno
 * of a failed read of the same key and version that overlaps the range and
 * failed less than FETCH_FAIL_WINDOW_MS ago (logged once per failure, with
 * the key). */
int fetch_fail_check(struct fetch_fail *ff, const char *key, size_t key_len,
		     const char *etag, size_t etag_len, uint64_t offset,
		     uint64_t len);

/* After a backend read of that range failed with err (< 0): remembers it
 * (see above for what is not). Copies what it keeps; -ENOMEM while
 * copying just forgets the failure. */
void fetch_fail_note(struct fetch_fail *ff, const char *key, size_t key_len,
		     const char *etag, size_t etag_len, uint64_t offset,
		     uint64_t len, int err);

#endif
