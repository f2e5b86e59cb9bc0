/*
 * str: small string and memory helpers every layer needs. "Space" is
 * isspace() in the C locale: space, \t, \n, \v, \f, \r.
 */
#ifndef SHARDFS_UTIL_STR_H
#define SHARDFS_UTIL_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A malloc'ed copy of p[0..n) followed by a NUL (so a copy of text is a
 * C string, and n == 0 still gives a pointer to free). Returns NULL when
 * out of memory. */
char *str_memdup(const void *p, size_t n);

/* s past its leading spaces (as strchr, the result is s's own memory). */
char *str_skip_space(const char *s);

/* Cuts the trailing spaces of s in place. */
void str_rstrip(char *s);

/* Both: returns s past its leading spaces, with the trailing ones cut. */
char *str_trim(char *s);

/* Trims spaces at both ends of [*s, *e) by moving *s and *e. */
void str_trim_span(const char **s, const char **e);

/* Undoes the kernel's octal escapes in place (/proc/self/mountinfo and
 * /proc/mounts write a space as \040, and so on: \ and three octal digits,
 * the first 0-3); anything else is kept as is. */
void str_unescape_octal(char *s);

/* Parses exactly the len bytes at s as a canonical decimal uint64: digits
 * only, no sign, no leading zero (but "0"), no overflow. A name such as
 * epoch-7 then has one spelling. */
bool str_u64_canon(const char *s, size_t len, uint64_t *out);

/* "K" or "K-of-W" (W >= 1, at most UINT32_MAX), as in skip-K-of-W: sets
 * *skip and *world (0 without "-of-W"). */
bool str_skip_spec(const char *s, uint64_t *skip, uint64_t *world);

/* Whether a key writes byte c as %XX: '%' and every byte below 0x20 (TAB,
 * LF and CR included). The manifest's rule (docs/DESIGN.md §4), also the
 * record index's and every log line's, so a key reads the same in all. */
bool str_key_escapes(unsigned char c);

/* s[0..len) escaped by str_key_escapes() into buf (cap >= 4 bytes, always
 * terminated). A key that does not fit is cut before an escape, never
 * inside one, and ends in "...". Returns buf. */
const char *str_escape_key(char *buf, size_t cap, const char *s, size_t len);

/* As str_escape_key(), whole, into a malloc'ed string (NULL when out of
 * memory): for a name that must stay distinct from every other key's
 * (backends' request names, which also key their failure holds). */
char *str_escape_key_dup(const char *s, size_t len);

/* s[0..len) with every byte a terminal or a log reader could take for a
 * control written as %XX: C0 controls (TAB, LF, ESC included), DEL, the
 * C1 controls U+0080..U+009F (CSI among them) and every byte that is not
 * part of valid UTF-8 (a terminal in an 8-bit mode reads 0x9B as CSI).
 * Valid UTF-8 text is copied unchanged. Writes into out (cap >= 1 bytes,
 * always terminated), cutting at a character, never inside one or an
 * escape; returns the length written. */
size_t str_printable(char *out, size_t cap, const char *s, size_t len);

/* Appends name to the NUL-terminated path *path (*len bytes, in a buffer
 * of *cap that is grown with realloc as needed; NULL with *len and *cap 0
 * is an empty path), with a '/' between them unless *len <= root_len: an
 * empty path (root_len 0) or a root "/" (root_len 1) takes no separator.
 * For the directory walks of the listings. Returns 0, or -ENOMEM with the
 * path unchanged. */
int str_path_push(char **path, size_t *len, size_t *cap, const char *name,
		  size_t root_len);

#endif
