/*
 * config: one INI file per dataset mount (docs/DESIGN.md §6), plus
 * "-o section.key=value" overrides from the command line.
 *
 * Every key has a default except [source] url. Unknown sections and keys,
 * malformed values, keys outside a section and lines too long to parse are
 * errors; the message names the file, the line, the key and the value, e.g.
 *   /etc/shardfs/a.conf:7: [shard] world_size = abc: not an unsigned integer
 * and for overrides
 *   -o shard.world_size=abc: not an unsigned integer
 * Checks that involve several keys (ranks within world_size, the bytes
 * layout with balance none) run after the overrides and name the line of
 * the key they reject.
 *
 * File syntax is mount/ini.h's: '#' or ';' starts a comment line, " #" or
 * " ;" an inline comment, "..." quotes a value; a line may hold up to
 * INI_LINE_MAX (64 KiB) bytes. A key given twice in the file is an error,
 * and so is an indented line after a key (inih, used before, appended it
 * to that key's value). An empty value unsets the optional
 * string keys (endpoint, manifest, manifest_sha256, mount path) and
 * selects every rank for ranks, whose grammar is util/ranks.h's. Names are case-sensitive; booleans
 * (true/false, yes/no, on/off, 1/0) and enum values are not. Integers are
 * decimal without sign; seed and epoch also take 0x hex.
 */
#ifndef SHARDFS_CONFIG_H
#define SHARDFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "plan/shard.h"
#include "records/format.h"
#include "mount/config_transform.h"
#include "mount/config_value.h"
#include "util/ranks.h"

#define CONFIG_WORLD_SIZE_MAX 1048576

/* [shard] unit: what a rank's share is made of. */
enum config_unit {
	CONFIG_UNIT_OBJECT = 0, /* whole objects, as files (default) */
	CONFIG_UNIT_RECORD,	/* records of [records] format, as parts */
};

/* [log] target: where a mount's lines go once it serves
 * (mount/logtarget.h). */
enum config_log_target {
	CONFIG_LOG_AUTO = 0, /* file if set, else journal, syslog, a file */
	CONFIG_LOG_JOURNAL,
	CONFIG_LOG_SYSLOG,
	CONFIG_LOG_FILE,
	CONFIG_LOG_STDERR,
};

/* The parsed values. Defaults, bounds and enum names are in one place:
 * the key table in config.c (one row per key), which shardfs.conf(5)
 * follows. */
struct config {
	char *file; /* the config file's path, for messages */

	struct {
		char *url;	/* required: s3://, gs:// or absolute path */
		char *endpoint; /* NULL: backend default */
		char *region;
		enum backend_addressing addressing;
		char *manifest;	       /* pinned manifest path/URL or NULL */
		char *manifest_sha256; /* 64 lowercase hex digits or NULL */
		bool anonymous;	       /* false: use credentials */
		unsigned connect_timeout_ms;
		unsigned request_timeout_ms;
		unsigned read_timeout_ms;
		unsigned retries;
		unsigned list_timeout_ms; /* a listing's time, */
		uint64_t list_memory;	  /* and its objects' bytes */
		bool allow_empty;	  /* false: listing 0 objects fails */
	} source;

	struct {
		struct shard_spec spec;
		/* sorted, overlapping and adjacent ranges merged; NULL = all */
		struct ranks_range *ranks;
		size_t n_ranks;
		enum config_unit unit;
	} shard;

	struct {
		enum rec_format format;
		unsigned parts;	    /* part files per rank */
		char *index;	    /* pinned record index path/URL or NULL */
		char *index_sha256; /* 64 lowercase hex digits or NULL */
		uint64_t run_bytes; /* 0: records one by one; else runs */
		unsigned window;    /* runs: records shuffled within it */
	} records;

	struct {
		char *dir;
		uint64_t size_bytes;   /* 0 when given as a percentage */
		unsigned size_percent; /* 1..100 of the filesystem, 0 when
					* given in bytes */
		bool enabled;	       /* false reads through */
		uint64_t inline_max;
		uint64_t chunk_size;
		bool fsync; /* true: fsync blobs */
	} cache;

	struct {
		unsigned files; /* 0 turns prefetch off */
		uint64_t memory;
		unsigned connections;
		bool hedge;	     /* re-issue a much slower read */
		uint64_t page_cache; /* pushed ahead into the kernel; 0: off */
	} prefetch;

	struct {
		char *path; /* NULL: must come from the command line */
		bool allow_other;
		bool nonempty; /* false: refuse a non-empty dir */
	} mount;
	struct {
		enum config_log_target target;
		char *file;	   /* NULL: none named */
		char *dir;	   /* the fallback file's directory */
		uint64_t max_size; /* rotate files at this size; 0: never */
		unsigned rotate;   /* older files kept */
	} log;
	struct {
		char *listen; /* "127.0.0.1:9100" or NULL: no endpoint */
	} metrics;
	/* In the order the file declares them; every one has a command. */
	struct config_transform *transforms;
	size_t n_transforms;
};

/* Parses path, then applies overrides[0..n_overrides) ("section.key=value",
 * white space around each part ignored; a later one replaces an earlier one
 * and the file's value), then runs the cross-key checks. The overrides are
 * only read during the call.
 * Returns 0 and sets *out (free with config_free), or -EINVAL with a message
 * in err (never longer than errlen, always terminated; err may be NULL when
 * errlen is 0), the negative errno of open or read when the file cannot be
 * read (-ENOENT, -EACCES, -EISDIR...; "cannot read FILE: reason"), -ENOMEM.
 * Only the first error is reported. On failure *out is untouched. */
int config_load(const char *path, char *const *overrides, size_t n_overrides,
		struct config **out, char *err, size_t errlen);

/* Fills *opts from [source]; its strings are borrowed from cfg. */
void config_backend_options(const struct config *cfg,
			    struct backend_options *opts);

/* Frees a config; NULL is a no-op. */
void config_free(struct config *cfg);

/* True if rank r is selected by [shard] ranks (all ranks when unset); false
 * for r >= world_size. O(log n_ranks). */
bool config_rank_selected(const struct config *cfg, uint64_t r);

/* The key table (struct config_key_info in mount/config_value.h), for
 * shardfs.conf(5)'s drift check and reloads. */
size_t config_key_count(void);

/* Fills *out for key i < config_key_count(); returns 0 or -EINVAL. */
int config_key_at(size_t i, struct config_key_info *out);

/* Writes key i's value in cfg to buf (always terminated) as the config
 * spells it: strings quoted ("" when unset), booleans true or false,
 * numbers in decimal, enums by name, [cache] size as N% or bytes, ranks
 * in their grammar. Returns 0 or -EINVAL (i out of range). */
int config_key_format(const struct config *cfg, size_t i, char *buf,
		      size_t len);

/* Sets key i in dst to its value in src. Returns 0, -EINVAL (i out of
 * range) or -ENOMEM (dst unchanged then). */
int config_key_copy(struct config *dst, const struct config *src, size_t i);

/* [source] addressing's name for a ("auto", "path", "virtual"), NULL for
 * a value that has none. */
const char *config_addressing_name(enum backend_addressing a);

#endif
