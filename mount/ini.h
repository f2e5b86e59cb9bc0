/*
 * ini: the line reader and INI syntax of shardfs config files, our own so
 * that lines may be long (NFS paths and S3 prefixes of several hundred
 * bytes are real; Debian's inih stops at 199 bytes) and '#' comments work
 * inline, not only at the start of a line.
 *
 * Syntax (shardfs.conf(5) says the same to users):
 *  - One statement per line; LF or CRLF line ends; a UTF-8 BOM at the very
 *    start is skipped. A line holds at most INI_LINE_MAX bytes (not
 *    counting its '\n'); a longer one is an error, never cut in two. A NUL
 *    byte is an error.
 *  - Blank lines and lines whose first non-blank character is '#' or ';'
 *    are comments.
 *  - "[name]" starts a section (blanks inside the brackets ignored); only
 *    blanks or a comment may follow the ']'.
 *  - "name = value" or "name : value" (the first '=' or ':' separates).
 *    Blanks around name and value are dropped. An inline comment starts at
 *    a '#' or ';' that follows a blank: "size = 10G # node SSD". A '#' or
 *    ';' right after a non-blank is part of the value ("s3://b/run#3").
 *  - A value that must contain a blank followed by '#' or ';', or leading
 *    or trailing blanks, is written between double quotes:
 *    url = "/data/run #1". The quotes are removed; there are no escapes,
 *    and only blanks or a comment may follow the closing quote.
 *  - An indented line right after a key (blank lines between included) is
 *    an error: in inih, which shardfs used before, it continued that key's
 *    value, so a file written for inih must not silently mean something
 *    else here. Indent the first key of a section, or comments, freely.
 *
 * Errors name the file and line, e.g. "/etc/shardfs/a.conf:7: syntax
 * error". Reading stops at the first error.
 */
#ifndef SHARDFS_INI_H
#define SHARDFS_INI_H

#include <stddef.h>
#include <stdio.h>

#define INI_LINE_MAX 65536

/* Called once per key, in file order: section is "" before the first
 * section line; all strings are borrowed for the call. Returns 0 to go on,
 * or a negative errno to stop (the handler reports its own error). */
typedef int (*ini_handler)(void *user, unsigned line, const char *section,
			   const char *name, const char *value);

/* Reads fp to its end (file names it in messages). Returns 0; the
 * handler's negative return, unchanged; -EINVAL with "FILE:LINE: reason"
 * in err for a syntax error, a line too long, a NUL byte, a bad quote or a
 * continuation line; the negative errno of a read error with "cannot read
 * FILE: reason"; or -ENOMEM. err (errlen bytes, always terminated; may be
 * NULL when errlen is 0) is written only for ini's own errors. */
int ini_parse(FILE *fp, const char *file, ini_handler on_key, void *user,
	      char *err, size_t errlen);

#endif
