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

#endif
