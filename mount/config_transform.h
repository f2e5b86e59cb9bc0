/*
 * config_transform: the [transform NAME] sections of a config (issue 27),
 * for mount/config.c only; users of a config read struct config_transform
 * in mount/config.h. config.c routes every key of a section whose name
 * starts with "transform" here and formats the messages (file, line,
 * section, key, value, reason) as for any other key.
 */
#ifndef SHARDFS_CONFIG_TRANSFORM_H
#define SHARDFS_CONFIG_TRANSFORM_H

#include <stddef.h>

#include "mount/config.h"

/* Sets key = value in the section named section ("transform NAME"),
 * creating the transform at its first key (line is the key's line).
 * Returns 0, -EINVAL with the reason in why (a bad section name, too many
 * sections, an unknown key, a bad value, a key already set: its line), or
 * -ENOMEM. */
int config_transform_set(struct config *cfg, const char *section, unsigned line,
			 const char *key, const char *value, char *why,
			 size_t whylen);

/* The checks over a whole section, after the file: every transform has a
 * command. Returns 0, or -EINVAL with *bad the transform's index and the
 * reason in why. */
int config_transform_check(const struct config *cfg, size_t *bad, char *why,
			   size_t whylen);

/* Frees cfg's transforms (cfg itself stays). */
void config_transforms_free(struct config *cfg);

#endif
