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
#include "transform/transform.h"
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

/* [transform NAME] sections (mount/config_transform.c): at most
 * CONFIG_TRANSFORMS_MAX, NAME of 1..CONFIG_TRANSFORM_NAME_MAX bytes of
 * [a-z0-9_-] (it becomes the directory transform-NAME). */
#define CONFIG_TRANSFORMS_MAX 16
#define CONFIG_TRANSFORM_NAME_MAX 32
#define CONFIG_TRANSFORM_SUFFIX_MAX 32
#define CONFIG_TRANSFORM_KEYS 13 /* keys a section may set */

/* One [transform NAME] section, with transform/transform.h's defaults
 * applied where a key was left out. */
struct config_transform {
	char *name;
	char *command; /* as written, for messages */
	char **argv;   /* command split into words, NULL-terminated */
	char *version; /* "" when unset */
	enum transform_mode mode;
	unsigned workers; /* 0: the number of online cores */
	unsigned timeout_ms;
	uint64_t memory;
	uint64_t output_max;
	char *user;
	enum transform_sandbox sandbox;
	/* The environment allow-list, NULL-terminated "NAME" or
	 * "NAME=VALUE" entries (possibly none: env set empty). */
	char **env;
	char *suffix; /* "" when unset */
	bool replace_extension;
	/* The percent of stored outputs re-run to check that the transform
	 * is deterministic (cache/xform.h), 0-100. */
	unsigned verify_percent;
	unsigned line; /* the line of the section's first key */
	/* Where each key was set (0: its default), for messages. */
	unsigned key_line[CONFIG_TRANSFORM_KEYS];
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

/* Parses a byte size: decimal digits with an optional K, M, G or T suffix
 * (either case; powers of 1024) and then an optional "B", or "iB" after a
 * suffix: "512", "10B", "64k", "512M", "10GiB", "1TB". No sign, space or
 * fraction. Returns 0 and sets *out, or -EINVAL (also when the result does
 * not fit in 64 bits; *out untouched). */
int config_parse_size(const char *s, uint64_t *out);

/* Parses a boolean: true/false, yes/no, on/off, 1/0, any case. Returns
 * true and sets *out, or false (*out untouched). */
bool config_parse_bool(const char *s, bool *out);

/* A key table's boolean value into *field: 0, or -EINVAL with the reason
 * every key table gives in why (both tables: config.c, config_transform.c). */
int config_bool_field(const char *value, bool *field, char *why, size_t whylen);

/* Splits a [transform] command into words: blanks separate words; a
 * double-quoted part ("...", no escapes, the quotes removed) may hold
 * blanks, and may be glued to other parts of its word (a"b c"d is one
 * word). No shell: no variables, globs, pipes or redirections. Returns 0
 * and a malloc'ed NULL-terminated *argv (free each word, then the array),
 * or -EINVAL with the reason in why (no word, a quote not closed),
 * -ENOMEM. */
int config_split_command(const char *s, char ***argv, char *why, size_t whylen);

/* The name the output of transform t gives a file of the source named
 * name (the last path component): name + suffix, or with
 * replace_extension the name's extension (from its last '.', if that is
 * not its first byte) replaced by suffix. Writes it to buf (always
 * terminated); returns 0 or -ENAMETOOLONG. */
int config_transform_output_name(const struct config_transform *t,
				 const char *name, char *buf, size_t len);

/* The key table, for shardfs.conf(5)'s drift check and reloads: every
 * key's section, name, default as a user writes it (NULL: none; url is
 * required, ranks selects all) and whether a reload keeps the running
 * value (restart: true) or applies the new one. Strings are static. */
struct config_key_info {
	const char *section;
	const char *name;
	const char *default_text;
	bool restart;
};

size_t config_key_count(void);

/* Fills *out for key i < config_key_count(); returns 0 or -EINVAL. */
int config_key_at(size_t i, struct config_key_info *out);

/* Whether a and b declare the same transforms (names, keys and values,
 * in the same order). */
bool config_transforms_equal(const struct config *a, const struct config *b);

/* Replaces dst's transforms with copies of src's. Returns 0 or -ENOMEM
 * (dst unchanged). */
int config_transforms_copy(struct config *dst, const struct config *src);

/* The keys of a [transform NAME] section, for shardfs.conf(5)'s drift
 * check: name and default as a user writes it (NULL: required). A [transform] section always needs a restart. */
size_t config_transform_key_count(void);
int config_transform_key_at(size_t i, struct config_key_info *out);

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
