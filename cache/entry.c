/*
 * entry: a chunk's identity and its hash, the blob file name, the idx row
 * format and its CRC32 blocks. Pure functions of their arguments, but for
 * entry_blob_read(), which reads a blob's range through its descriptor,
 * and entry_blob_unlink(), which removes a blob file by its name.
 */
#include "cache/cache_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/crc32.h"
#include "util/hex.h"
#include "util/le.h"
#include "util/sha256.h"

/* The identity of chunk n of obj, and its hash. *id is malloc'd. */
int entry_ident_build(const struct cache *c, const struct cache_object *obj,
		      uint64_t n, uint8_t **id, size_t *id_len,
		      uint8_t hash[HASH_LEN])
{
	size_t t_len = obj->transform != NULL ? strlen(obj->transform) : 0;
	size_t len = 8 + c->backend_id_len + 8 + obj->key_len + 8 +
		     obj->etag_len + (obj->transform != NULL ? 8 + t_len : 0) +
		     16;
	uint8_t *p, *buf = malloc(len);

	if (buf == NULL)
		return -ENOMEM;
	p = buf;
	le_put64(p, c->backend_id_len);
	memcpy(p + 8, c->backend_id, c->backend_id_len);
	p += 8 + c->backend_id_len;
	le_put64(p, obj->key_len);
	memcpy(p + 8, obj->key, obj->key_len);
	p += 8 + obj->key_len;
	le_put64(p, obj->etag_len);
	memcpy(p + 8, obj->etag, obj->etag_len);
	p += 8 + obj->etag_len;
	if (obj->transform != NULL) {
		/* A derived object's own part: its chunks can never be the
		 * raw object's (entry_ident_parse() tells them apart). */
		le_put64(p, t_len);
		memcpy(p + 8, obj->transform, t_len);
		p += 8 + t_len;
	}
	le_put64(p, cache_obj_chunk(c, obj));
	le_put64(p + 8, n);
	if (sha256(buf, len, hash) < 0) {
		free(buf);
		return -ENOMEM;
	}
	*id = buf;
	*id_len = len;
	return 0;
}

/* Splits an identity into its parts (pointers into id); false if it is
 * malformed. A derived object's transform part, after the etag, is
 * skipped. */
bool entry_ident_parse(const uint8_t *id, size_t len, const uint8_t *part[3],
		       size_t part_len[3], uint64_t *chunk)
{
	size_t pos = 0;
	int i;

	for (i = 0; i < 3; i++) {
		uint64_t l;

		if (len - pos < 8)
			return false;
		l = le_get64(id + pos);
		pos += 8;
		if (l > len - pos)
			return false;
		part[i] = id + pos;
		part_len[i] = (size_t)l;
		pos += (size_t)l;
	}
	if (len - pos != 16) { /* a transform's name, then 16 bytes */
		uint64_t l;

		if (len - pos < 8 + 16)
			return false;
		l = le_get64(id + pos);
		if (l != len - pos - 8 - 16)
			return false;
		pos += 8 + (size_t)l;
	}
	*chunk = le_get64(id + pos + 8);
	return true;
}

void entry_hash_hex(const uint8_t hash[HASH_LEN], char out[2 * HASH_LEN + 1])
{
	hex_encode(hash, HASH_LEN, out);
}

int entry_hex_parse(const char *s, uint8_t hash[HASH_LEN])
{
	int i;

	for (i = 0; i < 2 * HASH_LEN; i++) {
		int v;

		if (s[i] >= '0' && s[i] <= '9')
			v = s[i] - '0';
		else if (s[i] >= 'a' && s[i] <= 'f')
			v = s[i] - 'a' + 10;
		else
			return -EINVAL;
		if (i % 2 == 0)
			hash[i / 2] = (uint8_t)(v << 4);
		else
			hash[i / 2] |= (uint8_t)v;
	}
	return 0;
}

/* A blob's file is named by its hash and its blob id, and only the row
 * holding that id refers to it: a chunk evicted and stored again gets a new
 * file, so unlinking the old one can never take the new one with it. */
char *entry_blob_path(const struct cache *c, const uint8_t hash[HASH_LEN],
		      uint64_t blob_id)
{
	char hex[2 * HASH_LEN + 1], *p;

	entry_hash_hex(hash, hex);
	if (asprintf(&p, "%s/blobs/%.2s/%s.%016" PRIx64, c->dir, hex, hex,
		     blob_id) < 0)
		return NULL;
	return p;
}

void entry_blob_unlink(const struct cache *c, const uint8_t hash[HASH_LEN],
		       uint64_t blob_id)
{
	char *path = entry_blob_path(c, hash, blob_id);

	if (path != NULL)
		unlink(path);
	free(path);
}

uint32_t entry_n_blocks(uint64_t length)
{
	return (uint32_t)((length + CACHE_CRC_BLOCK - 1) / CACHE_CRC_BLOCK);
}

uint32_t entry_block_crc(const uint8_t *data, uint64_t length, uint32_t b)
{
	uint64_t start = (uint64_t)b * CACHE_CRC_BLOCK;
	uint64_t n = length - start < CACHE_CRC_BLOCK ? length - start
						      : CACHE_CRC_BLOCK;

	return crc32_update(0, data + start, (size_t)n);
}

/* Parses an idx value. With id, the stored identity must equal it.
 * Returns 0, -ENOENT (another identity: a collision), -EBADMSG
 * (malformed), -ENOMEM. */
int entry_parse(const void *val, size_t val_len, const uint8_t *id,
		size_t id_len, struct entry *e)
{
	const uint8_t *p = val;
	size_t crc_bytes;

	if (val_len < sizeof(e->h))
		return -EBADMSG;
	memcpy(&e->h, p, sizeof(e->h));
	crc_bytes = (size_t)e->h.n_crcs * 4;
	if (e->h.version != ENTRY_VERSION ||
	    val_len != sizeof(e->h) + crc_bytes + e->h.id_len ||
	    e->h.n_crcs != entry_n_blocks(e->h.length))
		return -EBADMSG;
	if (id != NULL && (e->h.id_len != id_len ||
			   memcmp(p + sizeof(e->h) + crc_bytes, id, id_len)))
		return -ENOENT;
	e->crcs = malloc(crc_bytes ? crc_bytes : 1);
	if (e->crcs == NULL)
		return -ENOMEM;
	memcpy(e->crcs, p + sizeof(e->h), crc_bytes);
	return 0;
}

bool entry_crcs_ok(const uint8_t *data, uint64_t data_start, uint64_t length,
		   const uint32_t *crcs, uint32_t b0, uint32_t b1)
{
	uint32_t b;

	for (b = b0; b <= b1; b++) {
		uint64_t start = (uint64_t)b * CACHE_CRC_BLOCK;
		uint64_t n = length - start < CACHE_CRC_BLOCK ? length - start
							      : CACHE_CRC_BLOCK;

		if (crc32_update(0, data + (start - data_start), (size_t)n) !=
		    crcs[b])
			return false;
	}
	return true;
}

bool entry_blob_edges(uint64_t length, uint64_t off, size_t len)
{
	uint64_t end = off + len;

	return off % CACHE_CRC_BLOCK != 0 ||
	       (end % CACHE_CRC_BLOCK != 0 && end != length);
}

bool entry_blob_read(int fd, uint64_t length, const uint32_t *crcs,
		     uint64_t off, size_t len, uint8_t *dst, uint8_t *edge)
{
	uint64_t end = off + len, pos = off;

	while (pos < end) {
		uint32_t b = (uint32_t)(pos / CACHE_CRC_BLOCK);
		uint64_t bs = (uint64_t)b * CACHE_CRC_BLOCK;
		uint64_t be = length - bs < CACHE_CRC_BLOCK
				      ? length
				      : bs + CACHE_CRC_BLOCK;
		uint64_t to, n;

		if (bs == pos && be <= end) {
			/* The run of whole blocks from here: one pread. */
			to = end == length
				     ? end
				     : end / CACHE_CRC_BLOCK * CACHE_CRC_BLOCK;
			n = to - pos;
			if (pread(fd, dst + (pos - off), (size_t)n,
				  (off_t)pos) != (ssize_t)n ||
			    !entry_crcs_ok(
				    dst + (pos - off), pos, length, crcs, b,
				    (uint32_t)((to - 1) / CACHE_CRC_BLOCK)))
				return false;
			pos = to;
			continue;
		}
		/* A block the range covers part of: checked whole in edge. */
		if (edge == NULL ||
		    pread(fd, edge, (size_t)(be - bs), (off_t)bs) !=
			    (ssize_t)(be - bs) ||
		    !entry_crcs_ok(edge, bs, length, crcs, b, b))
			return false;
		n = (be < end ? be : end) - pos;
		memcpy(dst + (pos - off), edge + (pos - bs), (size_t)n);
		pos += n;
	}
	return true;
}
