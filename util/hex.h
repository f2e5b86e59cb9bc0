/*
 * hex: lowercase hexadecimal of bytes, as digests and cache names are
 * written (SHA-256 in manifests, plans and blob names).
 */
#ifndef SHARDFS_UTIL_HEX_H
#define SHARDFS_UTIL_HEX_H

#include <stddef.h>

/* Writes the 2 * n lowercase hex digits of p[0..n) to out, then a NUL:
 * out holds 2 * n + 1 bytes. Cannot fail. */
void hex_encode(const void *p, size_t n, char *out);

#endif
