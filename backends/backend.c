/*
 * backend: picks the backend for a URL. The table is the only place that
 * names every backend.
 */
#include "backends/backend.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "util/log.h"

static const struct backend_ops *const backend_table[] = {
	&backend_posix_ops,
	&backend_s3_ops,
	&backend_gcs_ops,
	&backend_nfs_ops,
};

int backend_open(const char *url, const struct backend_options *opts,
		 struct backend **out)
{
	size_t i;

	for (i = 0; i < sizeof(backend_table) / sizeof(backend_table[0]); i++)
		if (backend_table[i]->handles(url))
			return backend_table[i]->open(url, opts, out);
	log_msg(LOG_ERR,
		"source url '%s': not an absolute path, s3://, gs:// or nfs:// "
		"URL",
		url);
	return -EPROTONOSUPPORT;
}

bool backend_claim_same(const struct backend_claim *a,
			const struct backend_claim *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case BACKEND_CLAIM_CRC32C:
		return a->crc32c == b->crc32c;
	case BACKEND_CLAIM_MD5:
		return memcmp(a->md5, b->md5, BACKEND_MD5_LEN) == 0;
	default:
		return true;
	}
}

void backend_close(struct backend *be)
{
	if (be != NULL)
		be->ops->close(be);
}

int backend_read_unclaimed(struct backend *be, const struct backend_read *r,
			   size_t *nread)
{
	return be->ops->read_claim(be, r, nread, NULL);
}

int backend_key_relative(const char *key, size_t key_len)
{
	size_t start = 0, i;

	if (key_len == 0 || memchr(key, '\0', key_len) != NULL)
		return -EINVAL;
	for (i = 0; i <= key_len; i++) {
		if (i < key_len && key[i] != '/')
			continue;
		if (i == start || (i - start == 1 && key[start] == '.') ||
		    (i - start == 2 && key[start] == '.' &&
		     key[start + 1] == '.'))
			return -EINVAL;
		start = i + 1;
	}
	return 0;
}
