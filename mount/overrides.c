/*
 * overrides: see overrides.h.
 */
#include "mount/overrides.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void overrides_free(struct overrides *o)
{
	size_t i;

	for (i = 0; i < o->n; i++)
		free(o->v[i]);
	free(o->v);
}

static int overrides_push(struct overrides *o, const char *s, size_t len)
{
	char **v = realloc(o->v, (o->n + 1) * sizeof(*v));

	if (v == NULL)
		return -ENOMEM;
	o->v = v;
	o->v[o->n] = strndup(s, len);
	if (o->v[o->n] == NULL)
		return -ENOMEM;
	o->n++;
	return 0;
}

/* Options mount(8), fstab and systemd pass that mean nothing here. mount(8)
 * passes "rw" whenever the line lacks "ro"; the mount is read-only anyway.
 * default_permissions is always on. */
static bool generic_mount_option(const char *s, size_t len)
{
	static const char *const names[] = {
		"ro",	      "rw",	  "dev",
		"nodev",      "suid",	  "nosuid",
		"exec",	      "noexec",	  "atime",
		"noatime",    "relatime", "strictatime",
		"nodiratime", "diratime", "sync",
		"async",      "auto",	  "noauto",
		"user",	      "nouser",	  "users",
		"defaults",   "_netdev",  "nofail",
		"owner",      "noowner",  "group",
		"nogroup",    "lazytime", "nolazytime",
		"silent",     "loud",	  "default_permissions",
	};
	size_t i;

	if (len >= 2 && strncmp(s, "x-", 2) == 0)
		return true;
	if (len >= 8 && strncmp(s, "comment=", 8) == 0)
		return true;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == len && strncmp(s, names[i], len) == 0)
			return true;
	return false;
}

static bool looks_like_ranks(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || s[0] < '0' || s[0] > '9')
		return false;
	for (i = 0; i < len; i++)
		if ((s[i] < '0' || s[i] > '9') && s[i] != '-')
			return false;
	return true;
}

/*
 * Splits one -o argument at commas. A piece that looks like a rank range
 * ("4-7") right after a key=value continues that value, so
 * "-o shard.ranks=0,2,4-7" means what it says.
 */
int overrides_parse(struct overrides *o, const char *arg)
{
	const char *p = arg;
	bool prev_value = false;

	while (*p != '\0') {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == 0) {
			/* empty piece: ",," */
		} else if (prev_value && looks_like_ranks(p, len)) {
			char *prev = o->v[o->n - 1], *joined;

			if (asprintf(&joined, "%s,%.*s", prev, (int)len, p) < 0)
				return -ENOMEM;
			free(prev);
			o->v[o->n - 1] = joined;
		} else if (generic_mount_option(p, len)) {
			/* before key=value: "x-systemd.requires=a.b" */
		} else if (memchr(p, '.', len) != NULL &&
			   memchr(p, '=', len) != NULL &&
			   (const char *)memchr(p, '.', len) <
				   (const char *)memchr(p, '=', len)) {
			if (overrides_push(o, p, len) < 0)
				return -ENOMEM;
			prev_value = true;
			p += len + (comma != NULL);
			continue;
		} else if (len == 11 && strncmp(p, "allow_other", 11) == 0) {
			o->allow_other = true;
		} else if (len == 8 && strncmp(p, "nonempty", 8) == 0) {
			o->nonempty = true;
		} else if (len == 5 && strncmp(p, "debug", 5) == 0) {
			o->debug = true;
		} else if (!generic_mount_option(p, len) && o->sloppy) {
			fprintf(stderr,
				"shardfs: warning: -o %.*s: unknown option, "
				"ignored (sloppy mount, -s)\n",
				(int)len, p);
		} else if (!generic_mount_option(p, len)) {
			fprintf(stderr,
				"shardfs: -o %.*s: unknown option (expected "
				"section.key=value, allow_other, nonempty, "
				"debug, or a generic mount option)\n",
				(int)len, p);
			return -EINVAL;
		}
		prev_value = false;
		p += len + (comma != NULL);
	}
	return 0;
}
