/*
 * config_transform: the [transform NAME] sections of a config (issue 27):
 * their parsed form, struct config_transform, which users of a config
 * read in struct config (mount/config.h), and the key table that parses
 * them. mount/config.c routes every key of a section whose name starts
 * with "transform" here and formats the messages (file, line, section,
 * key, value, reason) as for any other key. The functions work on a
 * config's list (cfg->transforms, cfg->n_transforms) and know nothing
 * else of struct config, so that config.c calls this file and never the
 * other way round.
 */
#ifndef SHARDFS_CONFIG_TRANSFORM_H
#define SHARDFS_CONFIG_TRANSFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mount/config_value.h"
#include "transform/transform.h"

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

/* Sets key = value in the section named section ("transform NAME") of
 * the list *list of *n transforms, creating the transform at its first key
 * (line is the key's line). Returns 0, -EINVAL with the reason in why (a
 * bad section name, too many sections, an unknown key, a bad value, a key
 * already set: its line), or -ENOMEM. */
int config_transform_set(struct config_transform **list, size_t *n,
			 const char *section, unsigned line, const char *key,
			 const char *value, char *why, size_t whylen);

/* The checks over a whole section, after the file: every transform has a
 * command. Returns 0, or -EINVAL with *bad the transform's index and the
 * reason in why. */
int config_transform_check(const struct config_transform *list, size_t n,
			   size_t *bad, char *why, size_t whylen);

/* Frees the list's transforms and the list; *list = NULL, *n = 0. */
void config_transforms_free(struct config_transform **list, size_t *n);

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

/* Whether lists a and b declare the same transforms (names, keys and
 * values, in the same order). */
bool config_transforms_equal(const struct config_transform *a, size_t na,
			     const struct config_transform *b, size_t nb);

/* Replaces the list *dst of *n_dst with copies of src[0..n). Returns 0 or
 * -ENOMEM (*dst unchanged). */
int config_transforms_copy(struct config_transform **dst, size_t *n_dst,
			   const struct config_transform *src, size_t n);

/* The keys of a [transform NAME] section, for shardfs.conf(5)'s drift
 * check: name and default as a user writes it (NULL: required). A
 * [transform] section always needs a restart. */
size_t config_transform_key_count(void);
int config_transform_key_at(size_t i, struct config_key_info *out);

#endif
