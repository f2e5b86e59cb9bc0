/*
 * manifest: the pinned list of objects a view is computed from
 * (docs/DESIGN.md §4).
 *
 * A manifest is built by adding entries in any order (from a backend listing
 * or a manifest file) and then finished: entries are sorted by raw key bytes,
 * duplicate keys are rejected, keys that cannot be paths are skipped and
 * counted (key-to-path rules, DESIGN §3), and the SHA-256 digest is computed
 * over what remains. After manifest_finish() the manifest is immutable and
 * may be read from any number of threads.
 *
 * Memory: one 40-byte entry per object plus its key and etag bytes, kept in
 * a chunked arena; no per-entry allocation.
 */
#ifndef SHARDFS_MANIFEST_H
#define SHARDFS_MANIFEST_H

#include <stdint.h>
#include <stdio.h>

#define MANIFEST_HEADER "# shardfs-manifest v1"

/* The largest object size, and the largest total of all sizes: off_t's
 * range, so no size or sum of sizes wraps on its way to the kernel. */
#define MANIFEST_SIZE_MAX ((uint64_t)INT64_MAX)

struct manifest_entry {
	const char *key;  /* NUL-terminated copy; may contain %-decoded bytes */
	const char *etag; /* NUL-terminated copy */
	uint32_t key_len;
	uint32_t etag_len;
	uint64_t size;
	int64_t mtime_ns;
};

/* Why a key was skipped. */
enum manifest_skip {
	MANIFEST_SKIP_DIR_MARKER = 0, /* ends in '/' */
	MANIFEST_SKIP_BAD_COMPONENT,  /* empty, "." or ".." component */
	MANIFEST_SKIP_LONG_COMPONENT, /* a component over 255 bytes */
	MANIFEST_SKIP_NUL,	      /* contains a NUL byte */
	MANIFEST_SKIP_FILE_IS_DIR,    /* "a" when "a/b" exists: dir wins */
	MANIFEST_SKIP_LINK_OUTSIDE,   /* posix: a symlink out of the root */
	MANIFEST_SKIP_NREASONS
};

struct manifest {
	struct manifest_entry *entries; /* canonical order after finish */
	size_t count;
	uint64_t total_bytes;
	uint64_t skipped[MANIFEST_SKIP_NREASONS];
	char digest[65]; /* lowercase hex SHA-256, set by finish */
	/* private: */
	size_t cap;
	struct manifest_chunk *arena;
	int finished;
};

/* Short stable name for a skip reason, used in stats and the plan. */
const char *manifest_skip_name(enum manifest_skip reason);

/* Returns an empty manifest or NULL when out of memory. */
struct manifest *manifest_new(void);

/* Frees m; NULL is a no-op. */
void manifest_free(struct manifest *m);

/* Item i's weight for shard_plan_build() (a shard_weight_fn; ctx is the
 * manifest): its size in bytes. The one weight a mount, `shardfs plan`
 * and every epoch tree plan with, so they plan the same. */
uint64_t manifest_weight(const void *ctx, size_t i);

/* Adds one entry, copying key and etag. Returns 0, -ENOMEM, -E2BIG (key or
 * etag over 4 GiB), -EFBIG (size over MANIFEST_SIZE_MAX), or -EINVAL after
 * manifest_finish(). */
int manifest_add(struct manifest *m, const char *key, size_t key_len,
		 uint64_t size, const char *etag, size_t etag_len,
		 int64_t mtime_ns);

/* Sorts, rejects duplicates, skips and counts keys that break the path rules
 * (each logged once, the first 20 per reason by name), computes the digest.
 * Returns 0, -EEXIST on a duplicate key (logged with the key), -EFBIG when
 * the sizes add up to more than MANIFEST_SIZE_MAX (logged), -ENOMEM. */
int manifest_finish(struct manifest *m);

/* The end of every builder: if rc is 0, finishes m and hands it to *out;
 * else, or if finishing fails, frees m. Returns rc or manifest_finish()'s
 * error. */
int manifest_finish_into(struct manifest *m, int rc, struct manifest **out);

/* Reads a manifest file (path, or "-" for stdin) into a finished manifest.
 * Malformed input (a size over MANIFEST_SIZE_MAX included) is -EINVAL,
 * logged as "PATH:LINE: reason"; manifest_finish()'s errors pass through. Errors
 * opening the file are logged and returned as -errno. */
int manifest_load(const char *path, struct manifest **out);

/* Parses a manifest held in memory; name is used in messages. */
int manifest_parse(const char *name, const char *text, size_t len,
		   struct manifest **out);

/* Writes m in the file format. Returns 0 or -EIO (stream error). */
int manifest_write(const struct manifest *m, FILE *f);

/* Writes bytes escaped as in the manifest: %, TAB, LF, CR and bytes below
 * 0x20 as %XX (uppercase hex), everything else as is. Returns 0 or -EIO. */
int manifest_write_escaped(FILE *f, const char *s, size_t len);

/* A malloc'ed copy of s[0..len) escaped as manifest_write_escaped() does,
 * for messages that name a key. Returns NULL when out of memory. */
char *manifest_escaped_copy(const char *s, size_t len);

/* Decodes an escaped field in place; returns the new length, or -EINVAL on
 * a malformed %XX sequence. */
long manifest_unescape(char *s, size_t len);

/* Index of the entry with this key, or -1. O(log N). */
long manifest_find(const struct manifest *m, const char *key, size_t len);

#endif
