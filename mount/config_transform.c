/*
 * config_transform: the [transform NAME] sections (issue 27). A section
 * declares one deterministic transform; several may be declared. Its keys
 * are in one table, tkeys[], the shape of config.c's keys[]: name, type,
 * field, bounds, default as a user writes it. The defaults are
 * transform/transform.h's, written here as text once so that
 * shardfs.conf(5) can be checked against them (check_config does).
 *
 * The command is an argv, never a shell line: the words of the value,
 * split at blanks, with "..." grouping blanks into a word (see
 * config_split_command() in mount/config_transform.h). No shell means no quoting
 * surprises and nothing but the named program runs.
 *
 * A section is created at its first key; two sections of the same name
 * are one section (a key given twice is an error, as in config.c). Only
 * the file declares transforms: "-o" overrides name keys as
 * section.key, and a transform's section has a blank in its name.
 */
#include "mount/config_transform.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mount/config_value.h"
#include "util/str.h"

enum tval {
	TV_COMMAND,
	TV_STRING, /* any text, possibly empty */
	TV_USER,
	TV_UINT,
	TV_SIZE,
	TV_BOOL,
	TV_MODE,
	TV_SANDBOX,
	TV_ENV,
	TV_SUFFIX,
	TV_PERCENT, /* 0-100, an optional '%' after it */
};

struct tkey {
	const char *name;
	enum tval type;
	size_t offset;
	uint64_t min, max;
	const char *def; /* NULL: required (command) */
};

#define TFIELD(f) offsetof(struct config_transform, f)

static const char *const mode_names[] = {
	[TRANSFORM_MODE_PROCESS] = "process",
	[TRANSFORM_MODE_WORKER] = "worker",
	NULL,
};
static const char *const sandbox_names[] = {
	[TRANSFORM_SANDBOX_BWRAP] = "bwrap",
	[TRANSFORM_SANDBOX_NONE] = "none",
	NULL,
};

/* Bounds: an hour per object at most (a run holds a reader's lookup);
 * at least 16 MiB of address space (less does not start an interpreter);
 * outputs are held whole in memory until stored, so at most 4 GiB. */
static const struct tkey tkeys[CONFIG_TRANSFORM_KEYS] = {
	{ "command", TV_COMMAND, TFIELD(command), 0, 0, NULL },
	{ "version", TV_STRING, TFIELD(version), 0, 0, "" },
	{ "mode", TV_MODE, TFIELD(mode), 0, 0, "process" },
	{ "workers", TV_UINT, TFIELD(workers), 0, 1024, "0" },
	{ "timeout_ms", TV_UINT, TFIELD(timeout_ms), 1, 3600000, "60000" },
	{ "memory", TV_SIZE, TFIELD(memory), 16 << 20, UINT64_MAX, "4G" },
	{ "output_max", TV_SIZE, TFIELD(output_max), 1, 4ull << 30, "64M" },
	{ "user", TV_USER, TFIELD(user), 0, 0, TRANSFORM_USER_DEFAULT },
	{ "sandbox", TV_SANDBOX, TFIELD(sandbox), 0, 0, "bwrap" },
	/* transform.h's own default list, written out so that the page
	 * shows it. */
	{ "env", TV_ENV, TFIELD(env), 0, 0,
	  "PATH LANG LC_ALL HOME=/tmp TMPDIR=/tmp" },
	{ "suffix", TV_SUFFIX, TFIELD(suffix), 0, 0, "" },
	{ "replace_extension", TV_BOOL, TFIELD(replace_extension), 0, 0,
	  "false" },
	{ "verify", TV_PERCENT, TFIELD(verify_percent), 0, 100, "0" },
};

_Static_assert(sizeof(enum transform_mode) == sizeof(int), "enum size");
_Static_assert(sizeof(enum transform_sandbox) == sizeof(int), "enum size");

static void words_free(char **w)
{
	if (!w)
		return;
	for (size_t i = 0; w[i]; i++)
		free(w[i]);
	free(w);
}

int config_split_command(const char *s, char ***argv, char *why, size_t whylen)
{
	size_t n = 0, cap = 0, len = strlen(s);
	char **w = NULL, *word = NULL;
	size_t wl;
	const char *p = s;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		/* A word is at most the rest of s, quotes removed. */
		word = malloc(len + 1);
		if (!word)
			goto oom;
		wl = 0;
		while (*p && *p != ' ' && *p != '\t') {
			if (*p != '"') {
				word[wl++] = *p++;
				continue;
			}
			const char *end = strchr(p + 1, '"');

			if (!end) {
				snprintf(why, whylen,
					 "a double quote at byte %zu is not "
					 "closed",
					 (size_t)(p - s) + 1);
				free(word);
				words_free(w);
				return -EINVAL;
			}
			memcpy(word + wl, p + 1, (size_t)(end - p - 1));
			wl += (size_t)(end - p - 1);
			p = end + 1;
		}
		word[wl] = '\0';
		if (n + 2 > cap) {
			size_t ncap = cap ? 2 * cap : 8;
			char **nw = realloc(w, ncap * sizeof(*nw));

			if (!nw)
				goto oom;
			w = nw;
			cap = ncap;
		}
		w[n++] = word;
		w[n] = NULL;
		word = NULL;
	}
	if (!n) {
		snprintf(why, whylen,
			 "no command (the program and its "
			 "arguments, separated by blanks)");
		return -EINVAL;
	}
	if (!*w[0]) {
		snprintf(why, whylen, "the program's name is empty");
		words_free(w);
		return -EINVAL;
	}
	*argv = w;
	return 0;
oom:
	free(word);
	words_free(w);
	return -ENOMEM;
}

static bool name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > CONFIG_TRANSFORM_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)name[i]) &&
		    !isdigit((unsigned char)name[i]) && name[i] != '_' &&
		    name[i] != '-')
			return false;
	return true;
}

/* An environment variable's name: [A-Za-z_][A-Za-z0-9_]*. */
static bool env_name_valid(const char *s, size_t n)
{
	if (n == 0 || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return false;
	return true;
}

/* The env allow-list: words (as a command's) of NAME or NAME=VALUE. An
 * empty value is an empty list: the environment cleared entirely. */
static int parse_env(const char *value, char ***out, char *why, size_t whylen)
{
	char **w;
	int rc;

	if (!*str_skip_space(value)) {
		w = calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		*out = w;
		return 0;
	}
	rc = config_split_command(value, &w, why, whylen);
	if (rc)
		return rc;
	for (size_t i = 0; w[i]; i++) {
		size_t n = strcspn(w[i], "=");

		if (!env_name_valid(w[i], n)) {
			snprintf(why, whylen,
				 "\"%s\" is not NAME or NAME=VALUE (NAME: "
				 "letters, digits, _)",
				 w[i]);
			words_free(w);
			return -EINVAL;
		}
	}
	*out = w;
	return 0;
}

static int parse_enum(const char *const *names, const char *s, int *out)
{
	for (int i = 0; names[i]; i++)
		if (!strcasecmp(names[i], s)) {
			*out = i;
			return 0;
		}
	return -EINVAL;
}

static int set_string(char **field, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

/* Sets one key of t from value. Returns 0, -EINVAL (why) or -ENOMEM. */
static int tkey_set(struct config_transform *t, const struct tkey *k,
		    const char *value, char *why, size_t whylen)
{
	void *field = (char *)t + k->offset;
	uint64_t v;
	char **words;
	int e, rc;

	switch (k->type) {
	case TV_COMMAND:
		rc = config_split_command(value, &words, why, whylen);
		if (rc)
			return rc;
		rc = set_string(field, value);
		if (rc) {
			words_free(words);
			return rc;
		}
		words_free(t->argv);
		t->argv = words;
		return 0;
	case TV_STRING:
		return set_string(field, value);
	case TV_USER:
		if (!*value || strchr(value, ':') || strchr(value, '/')) {
			snprintf(why, whylen, "not a user name");
			return -EINVAL;
		}
		if (!strcmp(value, "root") || !strcmp(value, "0")) {
			snprintf(why, whylen, "a transform never runs as root");
			return -EINVAL;
		}
		return set_string(field, value);
	case TV_UINT:
	case TV_SIZE:
	case TV_PERCENT:
		if (k->type == TV_PERCENT) {
			char num[8];
			size_t n = strlen(value);

			if (n && value[n - 1] == '%')
				n--;
			rc = n && n < sizeof(num) ? 0 : -EINVAL;
			if (rc == 0) {
				memcpy(num, value, n);
				num[n] = '\0';
				rc = config_parse_u64(num, false, &v);
			}
		} else {
			rc = k->type == TV_UINT
				     ? config_parse_u64(value, false, &v)
				     : config_parse_size(value, &v);
		}
		if (rc) {
			snprintf(why, whylen, "%s",
				 k->type == TV_UINT ? "not an unsigned integer"
				 : k->type == TV_SIZE
					 ? "not a size (e.g. 512M, 4G)"
					 : "not a percentage (e.g. 5 or 5%)");
			return -EINVAL;
		}
		if (v < k->min || v > k->max) {
			snprintf(why, whylen,
				 "out of range %" PRIu64 "..%" PRIu64, k->min,
				 k->max);
			return -EINVAL;
		}
		if (k->type != TV_SIZE)
			*(unsigned *)field = (unsigned)v;
		else
			*(uint64_t *)field = v;
		return 0;
	case TV_BOOL:
		return config_bool_field(value, field, why, whylen);
	case TV_MODE:
	case TV_SANDBOX:
		if (parse_enum(k->type == TV_MODE ? mode_names : sandbox_names,
			       value, &e)) {
			snprintf(why, whylen, "not one of %s",
				 k->type == TV_MODE ? "process, worker"
						    : "bwrap, none");
			return -EINVAL;
		}
		*(int *)field = e;
		return 0;
	case TV_ENV:
		rc = parse_env(value, &words, why, whylen);
		if (rc)
			return rc;
		words_free(t->env);
		t->env = words;
		return 0;
	case TV_SUFFIX:
		if (strlen(value) > CONFIG_TRANSFORM_SUFFIX_MAX ||
		    strchr(value, '/')) {
			snprintf(why, whylen,
				 "a suffix has at most %d bytes and no '/'",
				 CONFIG_TRANSFORM_SUFFIX_MAX);
			return -EINVAL;
		}
		return set_string(field, value);
	}
	return -EINVAL;
}

static void transform_free_fields(struct config_transform *t)
{
	free(t->name);
	free(t->command);
	words_free(t->argv);
	free(t->version);
	free(t->user);
	words_free(t->env);
	free(t->suffix);
}

/* A new transform named name with every default applied, at the end of
 * the list *all of *n. */
static int transform_add(struct config_transform **list, size_t *n,
			 const char *name, unsigned line,
			 struct config_transform **out, char *why,
			 size_t whylen)
{
	struct config_transform *all, *t;
	int rc;

	if (*n == CONFIG_TRANSFORMS_MAX) {
		snprintf(why, whylen, "more than %d [transform] sections",
			 CONFIG_TRANSFORMS_MAX);
		return -EINVAL;
	}
	all = realloc(*list, (*n + 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	*list = all;
	t = &all[*n];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	if (!t->name)
		return -ENOMEM;
	t->line = line;
	for (size_t i = 0; i < CONFIG_TRANSFORM_KEYS; i++) {
		if (!tkeys[i].def)
			continue;
		/* Only -ENOMEM: a default that does not parse is a bug that
		 * test_transform_defaults catches. */
		rc = tkey_set(t, &tkeys[i], tkeys[i].def, why, whylen);
		if (rc) {
			transform_free_fields(t);
			return rc;
		}
	}
	(*n)++;
	*out = t;
	return 0;
}

int config_transform_set(struct config_transform **list, size_t *n,
			 const char *section, unsigned line, const char *key,
			 const char *value, char *why, size_t whylen)
{
	struct config_transform *t = NULL;
	const char *name;
	size_t i;
	int rc;

	if (strncmp(section, "transform", 9) ||
	    (section[9] != ' ' && section[9] != '\t' && section[9])) {
		snprintf(why, whylen, "not a [transform NAME] section");
		return -EINVAL;
	}
	name = str_skip_space(section + 9);
	if (!name_valid(name)) {
		snprintf(why, whylen,
			 "a transform's section is [transform NAME], NAME "
			 "of 1 to %d characters a-z, 0-9, _ or -",
			 CONFIG_TRANSFORM_NAME_MAX);
		return -EINVAL;
	}
	for (i = 0; i < CONFIG_TRANSFORM_KEYS; i++)
		if (!strcmp(tkeys[i].name, key))
			break;
	if (i == CONFIG_TRANSFORM_KEYS) {
		snprintf(why, whylen,
			 "unknown key (keys in [transform NAME] "
			 "are");
		for (size_t j = 0; j < CONFIG_TRANSFORM_KEYS; j++) {
			size_t used = strlen(why);

			snprintf(why + used, whylen - used, "%s %s",
				 j ? "," : "", tkeys[j].name);
		}
		size_t used = strlen(why);
		snprintf(why + used, whylen - used, ")");
		return -EINVAL;
	}
	for (size_t j = 0; j < *n; j++)
		if (!strcmp((*list)[j].name, name))
			t = &(*list)[j];
	if (!t) {
		rc = transform_add(list, n, name, line, &t, why, whylen);
		if (rc)
			return rc;
	}
	if (t->key_line[i]) {
		snprintf(why, whylen, "already set at line %u", t->key_line[i]);
		return -EINVAL;
	}
	rc = tkey_set(t, &tkeys[i], value, why, whylen);
	if (rc)
		return rc;
	t->key_line[i] = line;
	return 0;
}

int config_transform_check(const struct config_transform *list, size_t n,
			   size_t *bad, char *why, size_t whylen)
{
	for (size_t i = 0; i < n; i++) {
		if (!list[i].argv) {
			*bad = i;
			snprintf(why, whylen, "command is required");
			return -EINVAL;
		}
	}
	return 0;
}

void config_transforms_free(struct config_transform **list, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		transform_free_fields(&(*list)[i]);
	free(*list);
	*list = NULL;
	*n = 0;
}

int config_transform_output_name(const struct config_transform *t,
				 const char *name, char *buf, size_t len)
{
	size_t keep = strlen(name);
	const char *dot = strrchr(name, '.');
	int n;

	if (t->replace_extension && dot && dot != name)
		keep = (size_t)(dot - name);
	n = snprintf(buf, len, "%.*s%s", (int)keep, name, t->suffix);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

size_t config_transform_key_count(void)
{
	return CONFIG_TRANSFORM_KEYS;
}

int config_transform_key_at(size_t i, struct config_key_info *out)
{
	if (i >= CONFIG_TRANSFORM_KEYS || !out)
		return -EINVAL;
	out->section = "transform";
	out->name = tkeys[i].name;
	out->default_text = tkeys[i].def;
	out->restart = true;
	return 0;
}

static bool words_equal(char *const *a, char *const *b)
{
	size_t i;

	for (i = 0; a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return !a[i] && !b[i];
}

bool config_transforms_equal(const struct config_transform *a, size_t na,
			     const struct config_transform *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++) {
		const struct config_transform *x = &a[i];
		const struct config_transform *y = &b[i];

		if (strcmp(x->name, y->name) ||
		    !words_equal(x->argv, y->argv) ||
		    strcmp(x->version, y->version) || x->mode != y->mode ||
		    x->workers != y->workers ||
		    x->timeout_ms != y->timeout_ms || x->memory != y->memory ||
		    x->output_max != y->output_max ||
		    strcmp(x->user, y->user) || x->sandbox != y->sandbox ||
		    !words_equal(x->env, y->env) ||
		    strcmp(x->suffix, y->suffix) ||
		    x->replace_extension != y->replace_extension ||
		    x->verify_percent != y->verify_percent)
			return false;
	}
	return true;
}

static char **words_dup(char *const *w)
{
	size_t n = 0;
	char **out;

	while (w[n])
		n++;
	out = calloc(n + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		out[i] = strdup(w[i]);
		if (!out[i]) {
			words_free(out);
			return NULL;
		}
	}
	return out;
}

int config_transforms_copy(struct config_transform **dst, size_t *n_dst,
			   const struct config_transform *src, size_t n)
{
	struct config_transform *all = NULL;
	size_t i;

	if (n) {
		all = calloc(n, sizeof(*all));
		if (!all)
			return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		const struct config_transform *s = &src[i];
		struct config_transform *d = &all[i];

		*d = *s;
		d->name = strdup(s->name);
		d->command = strdup(s->command);
		d->argv = words_dup(s->argv);
		d->version = strdup(s->version);
		d->user = strdup(s->user);
		d->env = words_dup(s->env);
		d->suffix = strdup(s->suffix);
		if (!d->name || !d->command || !d->argv || !d->version ||
		    !d->user || !d->env || !d->suffix) {
			for (size_t j = 0; j <= i; j++)
				transform_free_fields(&all[j]);
			free(all);
			return -ENOMEM;
		}
	}
	config_transforms_free(dst, n_dst);
	*dst = all;
	*n_dst = n;
	return 0;
}
