/*
 * config: the INI file of one dataset mount, then "-o section.key=value"
 * overrides, then the checks that involve several keys (docs/DESIGN.md §6).
 *
 * One table, keys[], describes every key in one row: section, name, value
 * type, field, bounds, default, enum names and whether a reload applies
 * it (redis' config table is the model). The enum names of [shard] are the
 * plan's own (plan/shard.c); config_free(), reloads (config_key_format(),
 * config_key_copy()) and `shardfs manifest --addressing` work from the
 * table too, so nothing about a key is written twice. The file's handler and the overrides both go through
 * config_apply(), so a value is checked the same way wherever it comes
 * from. Each key remembers where it was last set (a line, an override or
 * the default), so that a cross-key check can name the key it rejects.
 *
 * The table also holds each key's default as text, applied through the
 * same parser when a config is created: the defaults a user reads in
 * shardfs.conf(5) are the ones config_key_at() reports (a unit test checks
 * the page against it), so they cannot drift apart.
 *
 * The file syntax is mount/ini.h's (it replaced inih, whose 199-byte lines
 * were too short for real paths).
 *
 * Only the first error is reported; on any error nothing is kept.
 *
 * Longer than 700 lines because the key table, its one parser per value
 * type and the cross-key checks are one unit: splitting them would put a
 * key's description and its checks in different files.
 */
#include "mount/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>

#include "backends/nfs.h"
#include "mount/ini.h"
#include "util/ranks.h"
#include "util/str.h"

#define GIB (UINT64_C(1) << 30)
#define MIB (UINT64_C(1) << 20)

enum value_type {
	VAL_SOURCE_URL, /* absolute path, s3://bucket[/prefix], gs://... */
	VAL_MANIFEST,	/* absolute path, s3://bucket/key, gs://bucket/key */
	VAL_HTTP_URL,
	VAL_REGION,
	VAL_SHA256,
	VAL_PATH,   /* absolute path */
	VAL_LISTEN, /* IPv4 literal or [IPv6 literal] ":" port 1..65535 */
	VAL_BOOL,
	VAL_UINT, /* unsigned field */
	VAL_U64,  /* uint64_t field */
	VAL_SIZE, /* uint64_t field, bytes */
	VAL_CACHE_SIZE,
	VAL_RANKS,
	VAL_ENUM, /* an int-sized enum field; value v is named names[v] */
};

struct key {
	const char *section;
	const char *name;
	enum value_type type;
	size_t offset;	   /* of the field, for the types that name one */
	uint64_t min, max; /* VAL_UINT, VAL_U64, VAL_SIZE */
	bool hex;	   /* VAL_U64: "0x" digits allowed too */
	bool optional;	   /* string keys: an empty value unsets the key */
	const char *def;   /* the default, as a user would write it; NULL:
			    * unset (url is required, ranks means all) */
	const char *const *names; /* VAL_ENUM: NULL-terminated */
	bool restart;		  /* a reload keeps the running value */
};

/* Indices into keys[]; also the order in which messages list them. */
enum {
	KEY_URL,
	KEY_ENDPOINT,
	KEY_REGION,
	KEY_ADDRESSING,
	KEY_MANIFEST,
	KEY_MANIFEST_SHA256,
	KEY_ANONYMOUS,
	KEY_CONNECT_TIMEOUT_MS,
	KEY_REQUEST_TIMEOUT_MS,
	KEY_READ_TIMEOUT_MS,
	KEY_RETRIES,
	KEY_LIST_TIMEOUT_MS,
	KEY_LIST_MEMORY,
	KEY_ALLOW_EMPTY,
	KEY_WORLD_SIZE,
	KEY_RANKS,
	KEY_SEED,
	KEY_EPOCH,
	KEY_ORDER,
	KEY_LAYOUT,
	KEY_BALANCE,
	KEY_RESHUFFLE,
	KEY_UNIT,
	KEY_RECORDS_FORMAT,
	KEY_RECORDS_PARTS,
	KEY_RECORDS_INDEX,
	KEY_RECORDS_INDEX_SHA256,
	KEY_RECORDS_RUN_BYTES,
	KEY_RECORDS_WINDOW,
	KEY_CACHE_DIR,
	KEY_CACHE_SIZE,
	KEY_CACHE_ENABLED,
	KEY_CACHE_INLINE_MAX,
	KEY_CACHE_CHUNK_SIZE,
	KEY_CACHE_FSYNC,
	KEY_PREFETCH_FILES,
	KEY_PREFETCH_MEMORY,
	KEY_PREFETCH_CONNECTIONS,
	KEY_PREFETCH_HEDGE,
	KEY_PREFETCH_PAGE_CACHE,
	KEY_MOUNT_PATH,
	KEY_ALLOW_OTHER,
	KEY_NONEMPTY,
	KEY_LOG_TARGET,
	KEY_LOG_FILE,
	KEY_LOG_DIR,
	KEY_LOG_MAX_SIZE,
	KEY_LOG_ROTATE,
	KEY_METRICS_LISTEN,
	KEY_COUNT
};

#define FIELD(f) offsetof(struct config, f)

/* Enum fields are stored as int (see key_set). */
_Static_assert(sizeof(enum backend_addressing) == sizeof(int), "enum size");
_Static_assert(sizeof(enum shard_order) == sizeof(int), "enum size");
_Static_assert(sizeof(enum shard_layout) == sizeof(int), "enum size");
_Static_assert(sizeof(enum shard_balance) == sizeof(int), "enum size");
_Static_assert(sizeof(enum shard_reshuffle) == sizeof(int), "enum size");
_Static_assert(sizeof(enum config_unit) == sizeof(int), "enum size");
_Static_assert(sizeof(enum rec_format) == sizeof(int), "enum size");
_Static_assert(sizeof(enum config_log_target) == sizeof(int), "enum size");

static const char *const addressing_names[] = { "auto", "path", "virtual",
						NULL };
static const char *const unit_names[] = {
	[CONFIG_UNIT_OBJECT] = "object", [CONFIG_UNIT_RECORD] = "record", NULL
};
static const char *const log_target_names[] = {
	[CONFIG_LOG_AUTO] = "auto",	[CONFIG_LOG_JOURNAL] = "journal",
	[CONFIG_LOG_SYSLOG] = "syslog", [CONFIG_LOG_FILE] = "file",
	[CONFIG_LOG_STDERR] = "stderr", NULL
};

/* One row per key: section, name, type, field, bounds, default, enum
 * names, and whether a reload applies it. The defaults are the ones
 * shardfs.conf(5) shows (check_config compares them). Restart keys: the
 * backend the cache reads through ([source] but the manifest, its pin and
 * allow_empty), the cache and the prefetcher (sized and opened once), the
 * mount itself, the log and the metrics endpoint (set up at start). */
static const struct key keys[KEY_COUNT] = {
	[KEY_URL] = { "source", "url", VAL_SOURCE_URL, FIELD(source.url),
		      .restart = true },
	[KEY_ENDPOINT] = { "source", "endpoint", VAL_HTTP_URL,
			   FIELD(source.endpoint), .optional = true,
			   .restart = true },
	[KEY_REGION] = { "source", "region", VAL_REGION, FIELD(source.region),
			 .def = "us-east-1", .restart = true },
	[KEY_ADDRESSING] = { "source", "addressing", VAL_ENUM,
			     FIELD(source.addressing), .def = "auto",
			     .names = addressing_names, .restart = true },
	[KEY_MANIFEST] = { "source", "manifest", VAL_MANIFEST,
			   FIELD(source.manifest), .optional = true },
	[KEY_MANIFEST_SHA256] = { "source", "manifest_sha256", VAL_SHA256,
				  FIELD(source.manifest_sha256),
				  .optional = true },
	[KEY_ANONYMOUS] = { "source", "anonymous", VAL_BOOL,
			    FIELD(source.anonymous), .def = "false",
			    .restart = true },
	[KEY_CONNECT_TIMEOUT_MS] = { "source", "connect_timeout_ms", VAL_UINT,
				     FIELD(source.connect_timeout_ms), 1,
				     UINT_MAX, .def = "5000", .restart = true },
	[KEY_REQUEST_TIMEOUT_MS] = { "source", "request_timeout_ms", VAL_UINT,
				     FIELD(source.request_timeout_ms), 1,
				     UINT_MAX, .def = "10000",
				     .restart = true },
	[KEY_READ_TIMEOUT_MS] = { "source", "read_timeout_ms", VAL_UINT,
				  FIELD(source.read_timeout_ms), 100, 3600000,
				  .def = "30000", .restart = true },
	[KEY_RETRIES] = { "source", "retries", VAL_UINT, FIELD(source.retries),
			  0, 100, .def = "5", .restart = true },
	/* Bounds of a listing (backend.h; the same defaults as
	 * BACKEND_LIST_*_DEFAULT, which check_config compares): an hour,
	 * and about 30 million objects of 100-byte keys and etags. */
	[KEY_LIST_TIMEOUT_MS] = { "source", "list_timeout_ms", VAL_UINT,
				  FIELD(source.list_timeout_ms), 1000, UINT_MAX,
				  .def = "3600000", .restart = true },
	[KEY_LIST_MEMORY] = { "source", "list_memory", VAL_SIZE,
			      FIELD(source.list_memory), 1, UINT64_MAX,
			      .def = "4G", .restart = true },
	[KEY_ALLOW_EMPTY] = { "source", "allow_empty", VAL_BOOL,
			      FIELD(source.allow_empty), .def = "false" },
	[KEY_WORLD_SIZE] = { "shard", "world_size", VAL_U64,
			     FIELD(shard.spec.world_size), 1,
			     CONFIG_WORLD_SIZE_MAX, .def = "1" },
	[KEY_RANKS] = { "shard", "ranks", VAL_RANKS },
	[KEY_SEED] = { "shard", "seed", VAL_U64, FIELD(shard.spec.seed), 0,
		       UINT64_MAX, .hex = true, .def = "0" },
	[KEY_EPOCH] = { "shard", "epoch", VAL_U64, FIELD(shard.spec.epoch), 0,
			UINT64_MAX, .hex = true, .def = "0" },
	[KEY_ORDER] = { "shard", "order", VAL_ENUM, FIELD(shard.spec.order),
			.def = "shuffle", .names = shard_order_names },
	[KEY_LAYOUT] = { "shard", "layout", VAL_ENUM, FIELD(shard.spec.layout),
			 .def = "strided", .names = shard_layout_names },
	[KEY_BALANCE] = { "shard", "balance", VAL_ENUM,
			  FIELD(shard.spec.balance), .def = "none",
			  .names = shard_balance_names },
	/* What epoch-E/ directories reshuffle (docs/DESIGN.md §5). */
	[KEY_RESHUFFLE] = { "shard", "reshuffle", VAL_ENUM,
			    FIELD(shard.spec.reshuffle), .def = "global",
			    .names = shard_reshuffle_names },
	/* What the view serves (a different tree): kept until a restart. */
	[KEY_UNIT] = { "shard", "unit", VAL_ENUM, FIELD(shard.unit),
		       .def = "object", .names = unit_names, .restart = true },
	[KEY_RECORDS_FORMAT] = { "records", "format", VAL_ENUM,
				 FIELD(records.format), .def = "tfrecord",
				 .names = rec_format_names, .restart = true },
	/* Enough files per rank for a DataLoader's workers; the names have
	 * five digits. */
	[KEY_RECORDS_PARTS] = { "records", "parts", VAL_UINT,
				FIELD(records.parts), 1, 99999, .def = "8" },
	/* The record index pairs with the manifest: both reload. */
	[KEY_RECORDS_INDEX] = { "records", "index", VAL_MANIFEST,
				FIELD(records.index), .optional = true },
	[KEY_RECORDS_INDEX_SHA256] = { "records", "index_sha256", VAL_SHA256,
				       FIELD(records.index_sha256),
				       .optional = true },
	/* 0: records dealt one by one. Runs keep a rank's reads contiguous
	 * (no download amplification with small records). */
	[KEY_RECORDS_RUN_BYTES] = { "records", "run_bytes", VAL_SIZE,
				    FIELD(records.run_bytes), 0, UINT64_MAX,
				    .def = "0" },
	[KEY_RECORDS_WINDOW] = { "records", "window", VAL_UINT,
				 FIELD(records.window), 1, UINT32_MAX,
				 .def = "1024" },
	[KEY_CACHE_DIR] = { "cache", "dir", VAL_PATH, FIELD(cache.dir),
			    .def = "/var/cache/shardfs", .restart = true },
	/* Two fields: size_bytes or size_percent. */
	[KEY_CACHE_SIZE] = { "cache", "size", VAL_CACHE_SIZE, .def = "10G",
			     .restart = true },
	[KEY_CACHE_ENABLED] = { "cache", "enabled", VAL_BOOL,
				FIELD(cache.enabled), .def = "true",
				.restart = true },
	/* Larger values belong in blob files, not in LMDB pages. */
	[KEY_CACHE_INLINE_MAX] = { "cache", "inline_max", VAL_SIZE,
				   FIELD(cache.inline_max), 0, MIB,
				   .def = "256K", .restart = true },
	/* At least one CRC block (64 KiB) per chunk. */
	[KEY_CACHE_CHUNK_SIZE] = { "cache", "chunk_size", VAL_SIZE,
				   FIELD(cache.chunk_size), 64 << 10, GIB,
				   .def = "8M", .restart = true },
	[KEY_CACHE_FSYNC] = { "cache", "fsync", VAL_BOOL, FIELD(cache.fsync),
			      .def = "false", .restart = true },
	/* 0 files ahead is how prefetch is turned off. A cap: the depth is
	 * measured (cache/prefetch.h), and at 20 ms against a store that
	 * serves a GET in 1.4 ms, 90% of its limit takes ~130 in flight. */
	[KEY_PREFETCH_FILES] = { "prefetch", "files", VAL_UINT,
				 FIELD(prefetch.files), 0, UINT_MAX,
				 .def = "256", .restart = true },
	/* Reads are buffered from the same budget, so 0 would stall them. */
	[KEY_PREFETCH_MEMORY] = { "prefetch", "memory", VAL_SIZE,
				  FIELD(prefetch.memory), 1, UINT64_MAX,
				  .def = "512M", .restart = true },
	[KEY_PREFETCH_CONNECTIONS] = { "prefetch", "connections", VAL_UINT,
				       FIELD(prefetch.connections), 1, 1024,
				       .def = "64", .restart = true },
	[KEY_PREFETCH_HEDGE] = { "prefetch", "hedge", VAL_BOOL,
				 FIELD(prefetch.hedge), .def = "true",
				 .restart = true },
	/* Bytes ahead in the kernel's page cache, all readers together:
	 * clean pages the kernel reclaims as it needs, not the daemon's
	 * memory (that is memory). 0: readers' reads come to the daemon. */
	[KEY_PREFETCH_PAGE_CACHE] = { "prefetch", "page_cache", VAL_SIZE,
				      FIELD(prefetch.page_cache), 0, UINT64_MAX,
				      .def = "1G", .restart = true },
	[KEY_MOUNT_PATH] = { "mount", "path", VAL_PATH, FIELD(mount.path),
			     .optional = true, .restart = true },
	[KEY_ALLOW_OTHER] = { "mount", "allow_other", VAL_BOOL,
			      FIELD(mount.allow_other), .def = "false",
			      .restart = true },
	[KEY_NONEMPTY] = { "mount", "nonempty", VAL_BOOL, FIELD(mount.nonempty),
			   .def = "false", .restart = true },
	/* Where lines go once the mount serves (mount/logtarget.h). */
	[KEY_LOG_TARGET] = { "log", "target", VAL_ENUM, FIELD(log.target),
			     .def = "auto", .names = log_target_names,
			     .restart = true },
	[KEY_LOG_FILE] = { "log", "file", VAL_PATH, FIELD(log.file),
			   .optional = true, .restart = true },
	/* The fallback file's directory: DIR/MOUNTNAME.log. */
	[KEY_LOG_DIR] = { "log", "dir", VAL_PATH, FIELD(log.dir),
			  .def = "/var/log/shardfs", .restart = true },
	/* 0: never rotated (logrotate's copytruncate then). */
	[KEY_LOG_MAX_SIZE] = { "log", "max_size", VAL_SIZE, FIELD(log.max_size),
			       0, UINT64_MAX, .def = "10M", .restart = true },
	[KEY_LOG_ROTATE] = { "log", "rotate", VAL_UINT, FIELD(log.rotate), 0,
			     100, .def = "3", .restart = true },
	[KEY_METRICS_LISTEN] = { "metrics", "listen", VAL_LISTEN,
				 FIELD(metrics.listen), .optional = true,
				 .restart = true },
};

static const char *const sections[] = {
	"source", "shard", "records", "cache",	       "prefetch",
	"mount",  "log",   "metrics", "transform NAME"
};

const char *config_addressing_name(enum backend_addressing a)
{
	return (unsigned)a < sizeof(addressing_names) /
					       sizeof(addressing_names[0]) -
				       1
		       ? addressing_names[a]
		       : NULL;
}

/* Where a key got its current value. */
struct origin {
	uint64_t seq;	      /* 0: the default; a later setting is larger */
	unsigned line;	      /* line in the file, 0 if not from the file */
	const char *override; /* the -o argument (borrowed), or NULL */
	char *value;	      /* the value as written, for messages */
};

struct load {
	struct config *cfg;
	uint64_t seq;
	struct origin origin[KEY_COUNT];
	int rc;		   /* first error, 0 if none so far */
	unsigned err_line; /* its line in the file, 0 if not from the file */
	char *err;
	size_t errlen;
};

static void load_fail(struct load *ld, int rc, unsigned line, const char *fmt,
		      ...) __attribute__((format(printf, 4, 5)));

static void load_fail(struct load *ld, int rc, unsigned line, const char *fmt,
		      ...)
{
	va_list ap;

	if (ld->rc)
		return;
	ld->rc = rc;
	ld->err_line = line;
	if (ld->errlen) {
		va_start(ap, fmt);
		vsnprintf(ld->err, ld->errlen, fmt, ap);
		va_end(ap);
	}
}

static void load_oom(struct load *ld)
{
	load_fail(ld, -ENOMEM, 0, "out of memory");
}

/* "where: reason" for a value set at o: a file line, an override, or (for
 * a cross-key check blaming a default) just the file. */
static void fail_value(struct load *ld, const struct origin *o,
		       const char *section, const char *name, const char *value,
		       const char *reason)
{
	const char *file = ld->cfg->file;

	if (o->override)
		load_fail(ld, -EINVAL, 0, "-o %s: %s", o->override, reason);
	else if (o->line && *section)
		load_fail(ld, -EINVAL, o->line, "%s:%u: [%s] %s = %s: %s", file,
			  o->line, section, name, value, reason);
	else if (o->line)
		load_fail(ld, -EINVAL, o->line, "%s:%u: %s = %s: %s", file,
			  o->line, name, value, reason);
	else
		load_fail(ld, -EINVAL, 0, "%s: [%s] %s: %s", file, section,
			  name, reason);
}

static void append(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* A source (object = false) or one object (object = true): an absolute
 * path, or s3:// or gs:// with a bucket and, for an object, a key. */
static bool location_valid(const char *s, bool object)
{
	const char *bucket;
	size_t i, n, len = strlen(s);

	if (s[0] == '/')
		return !object || s[len - 1] != '/';
	if (strncmp(s, "nfs://", 6) == 0)
		return nfs_url_valid(s, object);
	if (strncmp(s, "s3://", 5) && strncmp(s, "gs://", 5))
		return false;
	bucket = s + 5;
	n = strcspn(bucket, "/");
	if (!n)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)bucket[i];

		if (!isalnum(c) && c != '.' && c != '-' && c != '_')
			return false;
	}
	if (!object)
		return true;
	return bucket[n] == '/' && bucket[n + 1] && s[len - 1] != '/';
}

/* "ADDRESS:PORT" for a listening socket: an IPv4 literal or a bracketed
 * IPv6 literal (no names: a metrics port must not depend on a resolver). */
static bool listen_valid(const char *s)
{
	char host[64];
	const char *colon, *p;
	struct in6_addr a6;
	struct in_addr a4;
	unsigned long port;
	size_t n;

	if (s[0] == '[') {
		colon = strstr(s, "]:");
		if (colon == NULL ||
		    (n = (size_t)(colon - s - 1)) >= sizeof(host))
			return false;
		memcpy(host, s + 1, n);
		host[n] = '\0';
		if (inet_pton(AF_INET6, host, &a6) != 1)
			return false;
		colon++;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || (n = (size_t)(colon - s)) >= sizeof(host))
			return false;
		memcpy(host, s, n);
		host[n] = '\0';
		if (inet_pton(AF_INET, host, &a4) != 1)
			return false;
	}
	p = colon + 1;
	if (*p < '1' || *p > '9' || strlen(p) > 5)
		return false;
	port = strtoul(p, (char **)&p, 10);
	return *p == '\0' && port >= 1 && port <= 65535;
}

static bool http_url_valid(const char *s)
{
	const char *host;

	if (!strncasecmp(s, "http://", 7))
		host = s + 7;
	else if (!strncasecmp(s, "https://", 8))
		host = s + 8;
	else
		return false;
	if (!*host || *host == '/')
		return false;
	for (; *s; s++)
		if (isspace((unsigned char)*s) || iscntrl((unsigned char)*s))
			return false;
	return true;
}

/* The region goes into request signatures and host names. */
static bool region_valid(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_')
			return false;
	return true;
}

static bool sha256_valid(const char *s)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return s[64] == '\0';
}

static bool parse_name(const char *const *names, const char *s, int *out)
{
	int v;

	for (v = 0; names[v] != NULL; v++) {
		if (!strcasecmp(s, names[v])) {
			*out = v;
			return true;
		}
	}
	return false;
}

static void names_reason(const char *const *names, char *why, size_t whylen)
{
	int v;

	snprintf(why, whylen, "must be one of");
	for (v = 0; names[v] != NULL; v++)
		append(why, whylen, "%s %s",
		       !v	      ? ""
		       : names[v + 1] ? ","
				      : " or",
		       names[v]);
}

/* The types whose field is a char * (NULL: unset). */
static bool key_is_string(const struct key *k)
{
	switch (k->type) {
	case VAL_SOURCE_URL:
	case VAL_MANIFEST:
	case VAL_HTTP_URL:
	case VAL_REGION:
	case VAL_SHA256:
	case VAL_PATH:
	case VAL_LISTEN:
		return true;
	default:
		return false;
	}
}

static int store_string(char **field, const char *value)
{
	char *copy = NULL;

	if (value) {
		copy = strdup(value);
		if (!copy)
			return -ENOMEM;
	}
	free(*field);
	*field = copy;
	return 0;
}

static void range_reason(const struct key *k, int rc, char *why, size_t whylen)
{
	if (rc == -ERANGE && k->max == UINT64_MAX)
		snprintf(why, whylen, "out of range (more than 64 bits)");
	else if (k->max == UINT64_MAX)
		snprintf(why, whylen, "must be at least %" PRIu64, k->min);
	else
		snprintf(why, whylen,
			 "must be between %" PRIu64 " and %" PRIu64, k->min,
			 k->max);
}

/* "N%" of the filesystem, or a size in bytes. */
static int set_cache_size(struct config *cfg, const char *value, char *why,
			  size_t whylen)
{
	size_t len = strlen(value), i;
	uint64_t v;
	int rc;

	if (len && value[len - 1] == '%') {
		/* v stops growing past 100, so a long run of digits is out
		 * of range rather than an overflow. */
		for (i = 0, v = 0; i + 1 < len; i++) {
			if (!isdigit((unsigned char)value[i]))
				break;
			if (v <= 100)
				v = v * 10 + (uint64_t)(value[i] - '0');
		}
		if (len == 1 || i + 1 < len) {
			snprintf(why, whylen, "not a percentage");
			return -EINVAL;
		}
		if (v < 1 || v > 100) {
			snprintf(why, whylen,
				 "percentage must be between 1 and 100");
			return -EINVAL;
		}
		cfg->cache.size_bytes = 0;
		cfg->cache.size_percent = (unsigned)v;
		return 0;
	}
	rc = config_parse_bytes(value, &v);
	if (rc == -EINVAL) {
		snprintf(why, whylen,
			 "not a size (digits and an optional K, M, G or T "
			 "suffix) or a percentage (1%% to 100%%)");
		return -EINVAL;
	}
	if (rc) {
		snprintf(why, whylen, "out of range (more than 64 bits)");
		return -EINVAL;
	}
	if (!v) {
		snprintf(why, whylen, "must be at least 1");
		return -EINVAL;
	}
	cfg->cache.size_bytes = v;
	cfg->cache.size_percent = 0;
	return 0;
}

/* Checks value and stores it in cfg. Returns 0, -EINVAL with the reason in
 * why, or -ENOMEM. */
static int key_set(struct config *cfg, const struct key *k, const char *value,
		   char *why, size_t whylen)
{
	void *field = (char *)cfg + k->offset;
	uint64_t v;
	int rc;

	if (k->optional && !*value)
		return store_string(field, NULL);

	switch (k->type) {
	case VAL_SOURCE_URL:
		if (!location_valid(value, false)) {
			snprintf(why, whylen,
				 "not an absolute path, s3://bucket[/prefix], "
				 "gs://bucket[/prefix] or nfs://server/path");
			return -EINVAL;
		}
		return store_string(field, value);
	case VAL_MANIFEST:
		if (!location_valid(value, true)) {
			snprintf(why, whylen,
				 "not an absolute file path, s3://bucket/key, "
				 "gs://bucket/key or nfs://server/path/file");
			return -EINVAL;
		}
		return store_string(field, value);
	case VAL_HTTP_URL:
		if (!http_url_valid(value)) {
			snprintf(why, whylen, "not an http:// or https:// URL");
			return -EINVAL;
		}
		return store_string(field, value);
	case VAL_REGION:
		if (!region_valid(value)) {
			snprintf(why, whylen,
				 "not a region name (letters, digits, '-', "
				 "'_')");
			return -EINVAL;
		}
		return store_string(field, value);
	case VAL_SHA256: {
		char lower[65];
		size_t i;

		if (!sha256_valid(value)) {
			snprintf(why, whylen, "not 64 hex digits");
			return -EINVAL;
		}
		for (i = 0; i < 65; i++)
			lower[i] = (char)tolower((unsigned char)value[i]);
		return store_string(field, lower);
	}
	case VAL_LISTEN:
		if (!listen_valid(value)) {
			snprintf(why, whylen,
				 "not ADDRESS:PORT with an IPv4 or [IPv6] "
				 "address and a port 1..65535");
			return -EINVAL;
		}
		return store_string(field, value);
	case VAL_PATH:
		if (value[0] != '/') {
			snprintf(why, whylen, "not an absolute path");
			return -EINVAL;
		}
		return store_string(field, value);
	case VAL_BOOL:
		return config_bool_field(value, field, why, whylen);
	case VAL_UINT:
	case VAL_U64:
		rc = config_parse_u64(value, k->hex, &v);
		if (rc == -EINVAL) {
			snprintf(why, whylen, "not an unsigned integer");
			return -EINVAL;
		}
		if (rc || v < k->min || v > k->max) {
			range_reason(k, rc, why, whylen);
			return -EINVAL;
		}
		if (k->type == VAL_UINT)
			*(unsigned *)field = (unsigned)v;
		else
			*(uint64_t *)field = v;
		return 0;
	case VAL_SIZE:
		rc = config_parse_bytes(value, &v);
		if (rc == -EINVAL) {
			snprintf(why, whylen,
				 "not a size (digits and an optional K, M, G "
				 "or T suffix)");
			return -EINVAL;
		}
		if (rc || v < k->min || v > k->max) {
			range_reason(k, rc, why, whylen);
			return -EINVAL;
		}
		*(uint64_t *)field = v;
		return 0;
	case VAL_CACHE_SIZE:
		return set_cache_size(cfg, value, why, whylen);
	case VAL_RANKS: {
		struct ranks_range *r = NULL;
		size_t n = 0;

		/* Empty is every rank here; the command line has no such
		 * spelling, so ranks_parse() refuses it. */
		if (*str_skip_space(value)) {
			rc = ranks_parse(value, &r, &n, why, whylen);
			if (rc)
				return rc;
		}
		free(cfg->shard.ranks);
		cfg->shard.ranks = r;
		cfg->shard.n_ranks = n;
		return 0;
	}
	case VAL_ENUM: {
		int e;

		if (!parse_name(k->names, value, &e)) {
			names_reason(k->names, why, whylen);
			return -EINVAL;
		}
		*(int *)field = e;
		return 0;
	}
	}
	return -EINVAL;
}

/* The index of section.name in keys[], or -1 with the reason in why. */
static int key_find(const char *section, const char *name, char *why,
		    size_t whylen)
{
	bool known = false;
	size_t i;

	if (!*section) {
		snprintf(why, whylen, "key outside any section");
		return -1;
	}
	for (i = 0; i < KEY_COUNT; i++) {
		if (strcmp(keys[i].section, section))
			continue;
		known = true;
		if (!strcmp(keys[i].name, name))
			return (int)i;
	}
	if (!known) {
		snprintf(why, whylen, "unknown section (sections are");
		for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++)
			append(why, whylen, "%s %s", i ? "," : "", sections[i]);
	} else {
		snprintf(why, whylen, "unknown key (keys in [%s] are", section);
		for (i = 0, known = false; i < KEY_COUNT; i++) {
			if (strcmp(keys[i].section, section))
				continue;
			append(why, whylen, "%s %s", known ? "," : "",
			       keys[i].name);
			known = true;
		}
	}
	append(why, whylen, ")");
	return -1;
}

/* Sets section.name = value, from the file (o->line) or an override
 * (o->override). Returns 0, or the error recorded in ld. */
static int config_apply(struct load *ld, const struct origin *o,
			const char *section, const char *name,
			const char *value)
{
	struct origin *prev;
	char why[512];
	char *copy;
	int k, rc;

	if (!strncmp(section, "transform", 9)) {
		rc = -EINVAL;
		snprintf(why, sizeof(why),
			 "[transform NAME] keys are set in the file only");
		if (!o->override)
			rc = config_transform_set(&ld->cfg->transforms,
						  &ld->cfg->n_transforms,
						  section, o->line, name, value,
						  why, sizeof(why));
		if (rc == -EINVAL)
			fail_value(ld, o, section, name, value, why);
		if (rc == -ENOMEM)
			load_oom(ld);
		return ld->rc;
	}
	k = key_find(section, name, why, sizeof(why));
	if (k < 0) {
		fail_value(ld, o, section, name, value, why);
		return ld->rc;
	}
	prev = &ld->origin[k];
	if (o->line && prev->line) {
		snprintf(why, sizeof(why), "already set at line %u",
			 prev->line);
		fail_value(ld, o, section, name, value, why);
		return ld->rc;
	}
	rc = key_set(ld->cfg, &keys[k], value, why, sizeof(why));
	if (rc == -EINVAL)
		fail_value(ld, o, section, name, value, why);
	if (rc == -ENOMEM)
		load_oom(ld);
	if (rc)
		return ld->rc;

	copy = strdup(value);
	if (!copy) {
		load_oom(ld);
		return ld->rc;
	}
	free(prev->value);
	prev->value = copy;
	prev->seq = ++ld->seq;
	prev->line = o->line;
	prev->override = o->override;
	return 0;
}

/* ini_parse()'s handler. */
static int on_key(void *user, unsigned line, const char *section,
		  const char *name, const char *value)
{
	struct load *ld = user;
	struct origin o = { .line = line };

	return config_apply(ld, &o, section, name, value);
}

static int parse_file(struct load *ld, const char *path)
{
	char err[1024];
	FILE *fp;
	int rc, e;

	fp = fopen(path, "re");
	if (!fp) {
		e = errno;
		load_fail(ld, -e, 0, "cannot read %s: %s", path, strerror(e));
		return ld->rc;
	}
	rc = ini_parse(fp, path, on_key, ld, err, sizeof(err));
	fclose(fp);
	/* The handler's errors are in ld already; ini's own are in err. */
	if (rc && !ld->rc)
		load_fail(ld, rc, 0, "%s", err);
	return ld->rc;
}

static int apply_override(struct load *ld, const char *arg)
{
	struct origin o = { .override = arg };
	char *copy, *eq, *dot, *section, *name;

	copy = strdup(arg);
	if (!copy) {
		load_oom(ld);
		return ld->rc;
	}
	eq = strchr(copy, '=');
	dot = eq ? memchr(copy, '.', (size_t)(eq - copy)) : NULL;
	if (dot) {
		*eq = '\0';
		*dot = '\0';
		section = str_trim(copy);
		name = str_trim(dot + 1);
		if (*section && *name)
			config_apply(ld, &o, section, name, str_trim(eq + 1));
		else
			dot = NULL;
	}
	if (!dot)
		load_fail(ld, -EINVAL, 0, "-o %s: expected section.key=value",
			  arg);
	free(copy);
	return ld->rc;
}

static void spec_reset(struct shard_spec *spec, int k)
{
	const struct shard_spec def = { .world_size = 1 };

	switch (k) {
	case KEY_WORLD_SIZE:
		spec->world_size = def.world_size;
		break;
	case KEY_SEED:
		spec->seed = def.seed;
		break;
	case KEY_EPOCH:
		spec->epoch = def.epoch;
		break;
	case KEY_ORDER:
		spec->order = def.order;
		break;
	case KEY_LAYOUT:
		spec->layout = def.layout;
		break;
	case KEY_BALANCE:
		spec->balance = def.balance;
		break;
	case KEY_RESHUFFLE:
		spec->reshuffle = def.reshuffle;
		break;
	}
}

/* The spec check names no key, so blame the key most recently set among
 * those whose default would make the spec valid: of "layout = bytes" and
 * "balance = drop", the one written last (or given with -o) is the one
 * the user just changed. */
static void check_spec(struct load *ld)
{
	static const int spec_keys[] = { KEY_WORLD_SIZE, KEY_SEED,
					 KEY_EPOCH,	 KEY_ORDER,
					 KEY_LAYOUT,	 KEY_BALANCE,
					 KEY_RESHUFFLE };
	const struct shard_spec *spec = &ld->cfg->shard.spec;
	const char *msg = shard_spec_check(spec);
	int best = -1;
	bool best_fixes = false;
	size_t i;

	if (!msg)
		return;
	for (i = 0; i < sizeof(spec_keys) / sizeof(spec_keys[0]); i++) {
		int k = spec_keys[i];
		struct shard_spec alt = *spec;
		bool fixes;

		if (!ld->origin[k].seq)
			continue;
		spec_reset(&alt, k);
		fixes = !shard_spec_check(&alt);
		if (best < 0 || fixes > best_fixes ||
		    (fixes == best_fixes &&
		     ld->origin[k].seq > ld->origin[best].seq)) {
			best = k;
			best_fixes = fixes;
		}
	}
	if (best < 0)
		load_fail(ld, -EINVAL, 0, "%s: [shard] %s", ld->cfg->file, msg);
	else
		fail_value(ld, &ld->origin[best], "shard", keys[best].name,
			   ld->origin[best].value, msg);
}

static void check_ranks(struct load *ld)
{
	const struct config *cfg = ld->cfg;
	const struct origin *ws = &ld->origin[KEY_WORLD_SIZE];
	char why[512];

	if (!ranks_check_world(cfg->shard.ranks, cfg->shard.n_ranks,
			       cfg->shard.spec.world_size, why, sizeof(why)))
		return;
	if (ws->override)
		append(why, sizeof(why), " (set by -o %s)", ws->override);
	else if (ws->line)
		append(why, sizeof(why), " (set at %s:%u)", cfg->file,
		       ws->line);
	else
		append(why, sizeof(why), " (the default)");
	fail_value(ld, &ld->origin[KEY_RANKS], "shard", "ranks",
		   ld->origin[KEY_RANKS].value, why);
}

/* A compressed source is decompressed once per node into the disk cache
 * and read from there: without one, every read would inflate its object
 * from the start. Blame whichever of the two keys was set last. */
static void check_records(struct load *ld)
{
	const struct config *cfg = ld->cfg;
	const struct origin *fmt = &ld->origin[KEY_RECORDS_FORMAT];
	const struct origin *en = &ld->origin[KEY_CACHE_ENABLED];

	if (cfg->shard.unit != CONFIG_UNIT_RECORD ||
	    !rec_format_gzip(cfg->records.format) || cfg->cache.enabled)
		return;
	if (en->seq > fmt->seq)
		fail_value(ld, en, "cache", "enabled", en->value,
			   "[records] format is compressed: its records are "
			   "decompressed once into the disk cache, which "
			   "must be enabled");
	else
		fail_value(ld, fmt, "records", "format", fmt->value,
			   "a compressed format needs the disk cache "
			   "([cache] enabled = true): its records are "
			   "decompressed once into it");
}

/* Checks over a [transform] section as a whole, naming its first line. */
static void check_transforms(struct load *ld)
{
	char why[256];
	size_t bad;

	if (config_transform_check(ld->cfg->transforms, ld->cfg->n_transforms,
				   &bad, why, sizeof(why)))
		load_fail(ld, -EINVAL, ld->cfg->transforms[bad].line,
			  "%s:%u: [transform %s]: %s", ld->cfg->file,
			  ld->cfg->transforms[bad].line,
			  ld->cfg->transforms[bad].name, why);
}

static int check_all(struct load *ld)
{
	if (!ld->cfg->source.url) {
		load_fail(ld, -EINVAL, 0, "%s: [source] url is required",
			  ld->cfg->file);
		return ld->rc;
	}
	check_ranks(ld);
	if (!ld->rc)
		check_spec(ld);
	if (!ld->rc)
		check_records(ld);
	if (!ld->rc)
		check_transforms(ld);
	return ld->rc;
}

static struct config *config_new(const char *path)
{
	struct config *cfg = calloc(1, sizeof(*cfg));
	char why[256];
	size_t i;

	if (!cfg)
		return NULL;
	cfg->file = strdup(path);
	if (!cfg->file)
		goto oom;
	for (i = 0; i < KEY_COUNT; i++) {
		if (!keys[i].def)
			continue;
		/* Only -ENOMEM: a default that does not parse is a bug that
		 * test_defaults catches. */
		if (key_set(cfg, &keys[i], keys[i].def, why, sizeof(why)))
			goto oom;
	}
	return cfg;
oom:
	config_free(cfg);
	return NULL;
}

int config_load(const char *path, char *const *overrides, size_t n_overrides,
		struct config **out, char *err, size_t errlen)
{
	struct load ld = { .err = err, .errlen = err ? errlen : 0 };
	size_t i;

	if (ld.errlen)
		err[0] = '\0';
	if (!path || !out || (n_overrides && !overrides)) {
		load_fail(&ld, -EINVAL, 0, "config_load: invalid arguments");
		return ld.rc;
	}
	ld.cfg = config_new(path);
	if (!ld.cfg) {
		load_oom(&ld);
		return ld.rc;
	}

	if (!parse_file(&ld, path)) {
		for (i = 0; i < n_overrides && !ld.rc; i++)
			apply_override(&ld, overrides[i]);
	}
	if (!ld.rc)
		check_all(&ld);

	for (i = 0; i < KEY_COUNT; i++)
		free(ld.origin[i].value);
	if (ld.rc) {
		config_free(ld.cfg);
		return ld.rc;
	}
	*out = ld.cfg;
	return 0;
}

void config_backend_options(const struct config *cfg,
			    struct backend_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->endpoint = cfg->source.endpoint;
	opts->region = cfg->source.region;
	opts->addressing = cfg->source.addressing;
	opts->anonymous = cfg->source.anonymous;
	opts->connect_timeout_ms = cfg->source.connect_timeout_ms;
	opts->request_timeout_ms = cfg->source.request_timeout_ms;
	opts->read_timeout_ms = cfg->source.read_timeout_ms;
	opts->retries = (int)cfg->source.retries;
	opts->list_timeout_ms = cfg->source.list_timeout_ms;
	opts->list_memory = cfg->source.list_memory;
}

void config_free(struct config *cfg)
{
	size_t i;

	if (!cfg)
		return;
	for (i = 0; i < KEY_COUNT; i++)
		if (key_is_string(&keys[i]))
			free(*(char **)(void *)((char *)cfg + keys[i].offset));
	free(cfg->file);
	free(cfg->shard.ranks);
	config_transforms_free(&cfg->transforms, &cfg->n_transforms);
	free(cfg);
}

bool config_rank_selected(const struct config *cfg, uint64_t r)
{
	if (r >= cfg->shard.spec.world_size)
		return false;
	if (!cfg->shard.ranks)
		return true;
	return ranks_contains(cfg->shard.ranks, cfg->shard.n_ranks, r);
}

size_t config_key_count(void)
{
	return KEY_COUNT;
}

int config_key_at(size_t i, struct config_key_info *out)
{
	if (i >= KEY_COUNT || !out)
		return -EINVAL;
	out->section = keys[i].section;
	out->name = keys[i].name;
	out->default_text = keys[i].def;
	out->restart = keys[i].restart;
	return 0;
}

int config_key_format(const struct config *cfg, size_t i, char *buf, size_t len)
{
	const struct key *k = &keys[i < KEY_COUNT ? i : 0];
	const void *field = (const char *)cfg + k->offset;

	if (i >= KEY_COUNT || len == 0)
		return -EINVAL;
	if (key_is_string(k)) {
		const char *s = *(char *const *)field;

		snprintf(buf, len, "\"%s\"", s != NULL ? s : "");
		return 0;
	}
	switch (k->type) {
	case VAL_BOOL:
		snprintf(buf, len, "%s",
			 *(const bool *)field ? "true" : "false");
		break;
	case VAL_UINT:
		snprintf(buf, len, "%u", *(const unsigned *)field);
		break;
	case VAL_U64:
	case VAL_SIZE:
		snprintf(buf, len, "%" PRIu64, *(const uint64_t *)field);
		break;
	case VAL_CACHE_SIZE:
		if (cfg->cache.size_percent != 0)
			snprintf(buf, len, "%u%%", cfg->cache.size_percent);
		else
			snprintf(buf, len, "%" PRIu64, cfg->cache.size_bytes);
		break;
	case VAL_ENUM: {
		int v = *(const int *)field, n = 0;

		while (k->names[n] != NULL)
			n++;
		snprintf(buf, len, "%s", v >= 0 && v < n ? k->names[v] : "?");
		break;
	}
	default: /* VAL_RANKS */
		ranks_format(cfg->shard.ranks, cfg->shard.n_ranks, buf, len);
		break;
	}
	return 0;
}

int config_key_copy(struct config *dst, const struct config *src, size_t i)
{
	const struct key *k = &keys[i < KEY_COUNT ? i : 0];
	const void *from = (const char *)src + k->offset;
	void *to = (char *)dst + k->offset;

	if (i >= KEY_COUNT)
		return -EINVAL;
	if (key_is_string(k))
		return store_string(to, *(char *const *)from);
	switch (k->type) {
	case VAL_BOOL:
		*(bool *)to = *(const bool *)from;
		break;
	case VAL_UINT:
		*(unsigned *)to = *(const unsigned *)from;
		break;
	case VAL_U64:
	case VAL_SIZE:
		*(uint64_t *)to = *(const uint64_t *)from;
		break;
	case VAL_CACHE_SIZE:
		dst->cache.size_bytes = src->cache.size_bytes;
		dst->cache.size_percent = src->cache.size_percent;
		break;
	case VAL_ENUM:
		*(int *)to = *(const int *)from;
		break;
	default: { /* VAL_RANKS */
		struct ranks_range *r = NULL;
		size_t n = src->shard.n_ranks;

		if (src->shard.ranks != NULL) {
			r = malloc(n * sizeof(*r));
			if (r == NULL)
				return -ENOMEM;
			memcpy(r, src->shard.ranks, n * sizeof(*r));
		}
		free(dst->shard.ranks);
		dst->shard.ranks = r;
		dst->shard.n_ranks = n;
		break;
	}
	}
	return 0;
}
