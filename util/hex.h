/*
 * hex: hexadecimal both ways. Lowercase hex of bytes, as digests and cache
 * names are written (SHA-256 in manifests, plans and blob names); the
 * value of hex digits, in either case, as ETags, %XX escapes and digests
 * are read; and a byte as an RFC 3986 %XX escape (uppercase, as S3's
 * signature, GCS's form bodies and key escapes in logs want it). The one
 * place a hex digit is written or read.
 */
#ifndef SHARDFS_UTIL_HEX_H
#define SHARDFS_UTIL_HEX_H

#include <stddef.h>

/* Writes the 2 * n lowercase hex digits of p[0..n) to out, then a NUL:
 * out holds 2 * n + 1 bytes. Cannot fail. */
void hex_encode(const void *p, size_t n, char *out);

/* The value (0-15) of hex digit c, '0'-'9', 'a'-'f' or 'A'-'F'; -1 for
 * anything else (including EOF and bytes above 0x7f). */
int hex_digit(int c);

/* The byte (0-255) the two hex digits s[0] s[1] stand for; -1 if either
 * is not a hex digit. Reads s[1] only if s[0] is a digit, so a NUL at s[0]
 * is safe at the end of a string. */
int hex_pair(const char *s);

/* Decodes the 2 * n hex digits at s (either case) into n bytes at out.
 * Returns 0, or -EINVAL at the first byte that is not a hex digit (out
 * may then be partly written). */
int hex_decode(const char *s, size_t n, void *out);

/* Writes the escape of byte c, '%' and two uppercase hex digits, to
 * out[0..3); no NUL. Cannot fail. */
void hex_percent(unsigned char c, char *out);

#endif
