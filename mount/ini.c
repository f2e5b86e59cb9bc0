/*
 * ini: see ini.h. One line at a time into a buffer of INI_LINE_MAX + 1
 * bytes, so memory is bounded whatever the file holds; the line is cut in
 * place (NULs written over separators) and handed to the handler.
 */
#include "mount/ini.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

struct ini_reader {
	FILE *fp;
	const char *file;
	char *buf;
	unsigned line;
	char *err;
	size_t errlen;
};

static int ini_fail(struct ini_reader *r, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int ini_fail(struct ini_reader *r, int rc, const char *fmt, ...)
{
	va_list ap;

	if (r->errlen) {
		va_start(ap, fmt);
		vsnprintf(r->err, r->errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Reads the next line into r->buf without its '\n'. Returns 1 with *len
 * set, 0 at the end of the file, or a negative errno (reported). */
static int ini_read_line(struct ini_reader *r, size_t *len)
{
	size_t n = 0;
	int c;

	while ((c = getc(r->fp)) != EOF && c != '\n') {
		if (n == INI_LINE_MAX)
			return ini_fail(r, -EINVAL,
					"%s:%u: line too long (more than %d "
					"bytes)",
					r->file, r->line + 1, INI_LINE_MAX);
		r->buf[n++] = (char)c;
	}
	if (c == EOF && ferror(r->fp)) {
		int e = errno ? errno : EIO;

		return ini_fail(r, -e, "cannot read %s: %s", r->file,
				strerror(e));
	}
	if (c == EOF && !n)
		return 0;
	r->buf[n] = '\0';
	r->line++;
	*len = n;
	return 1;
}

static bool is_comment(char c)
{
	return c == '#' || c == ';';
}

/* Cuts s at an inline comment: '#' or ';' after a blank. at_blank says
 * whether the character before s counts as a blank. */
static void cut_comment(char *s, bool at_blank)
{
	for (; *s; s++) {
		if (at_blank && is_comment(*s)) {
			*s = '\0';
			return;
		}
		at_blank = isspace((unsigned char)*s);
	}
}

/* Nothing, or only a comment, left in s. */
static bool only_comment(const char *s)
{
	s = str_skip_space((char *)s);
	return !*s || is_comment(*s);
}

int ini_parse(FILE *fp, const char *file, ini_handler on_key, void *user,
	      char *err, size_t errlen)
{
	struct ini_reader r = {
		.fp = fp, .file = file, .err = err, .errlen = errlen
	};
	char *section = NULL, *prev_name = NULL;
	size_t len = 0;
	int rc;

	if (errlen)
		err[0] = '\0';
	r.buf = malloc(INI_LINE_MAX + 1);
	section = strdup("");
	if (!r.buf || !section) {
		rc = ini_fail(&r, -ENOMEM, "out of memory");
		goto out;
	}
	while ((rc = ini_read_line(&r, &len)) == 1) {
		char *line = r.buf, *s, *name, *value, *sep, *end;
		bool indented;

		if (memchr(line, '\0', len)) {
			rc = ini_fail(&r, -EINVAL,
				      "%s:%u: line contains a NUL byte", file,
				      r.line);
			goto out;
		}
		if (r.line == 1 && !strncmp(line, "\xEF\xBB\xBF", 3))
			line += 3;
		indented = isspace((unsigned char)line[0]);
		s = str_skip_space(line);
		str_rstrip(s);
		if (!*s || is_comment(*s))
			continue;
		if (indented && prev_name) {
			cut_comment(s, false);
			str_rstrip(s);
			rc = ini_fail(&r, -EINVAL,
				      "%s:%u: %s: indented line would "
				      "continue the value of [%s] %s; remove "
				      "the indentation",
				      file, r.line, s, section, prev_name);
			goto out;
		}
		if (*s == '[') {
			end = strchr(s, ']');
			if (!end || !only_comment(end + 1))
				goto syntax;
			*end = '\0';
			name = str_skip_space(s + 1);
			str_rstrip(name);
			if (!*name)
				goto syntax;
			free(section);
			section = strdup(name);
			free(prev_name);
			prev_name = NULL;
			if (!section) {
				rc = ini_fail(&r, -ENOMEM, "out of memory");
				goto out;
			}
			continue;
		}
		sep = s + strcspn(s, "=:");
		if (!*sep)
			goto syntax;
		value = sep + 1;
		*sep = '\0';
		name = s;
		str_rstrip(name);
		if (!*name)
			goto syntax;
		/* A comment right after '=' needs a blank first, as in inih:
		 * "manifest =; x" keeps "; x" (and fails as a manifest). */
		value = str_skip_space(value);
		if (*value == '"') {
			end = strchr(value + 1, '"');
			if (end == NULL || !only_comment(end + 1)) {
				rc = ini_fail(
					&r, -EINVAL, "%s:%u: [%s] %s = %s: %s",
					file, r.line, section, name, value,
					end ? "text after the closing quote"
					    : "no closing quote");
				goto out;
			}
			*end = '\0';
			value++;
		} else {
			cut_comment(value, value > sep + 1);
			str_rstrip(value);
		}
		free(prev_name);
		prev_name = strdup(name);
		if (!prev_name) {
			rc = ini_fail(&r, -ENOMEM, "out of memory");
			goto out;
		}
		rc = on_key(user, r.line, section, name, value);
		if (rc)
			goto out;
	}
	goto out;
syntax:
	rc = ini_fail(&r, -EINVAL, "%s:%u: syntax error", file, r.line);
out:
	free(prev_name);
	free(section);
	free(r.buf);
	return rc;
}
