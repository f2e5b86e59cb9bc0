/* format: record file formats by name and key suffix (records/format.h). */
#include "records/format.h"

#include <string.h>

const char *const rec_format_names[] = {
	[REC_FORMAT_TFRECORD] = "tfrecord",
	[REC_FORMAT_TFRECORD_GZ] = "tfrecord.gz",
	[REC_FORMAT_JSONL] = "jsonl",
	[REC_FORMAT_JSONL_GZ] = "jsonl.gz",
	[REC_FORMAT_TAR] = "tar",
	[REC_FORMAT_COUNT] = NULL,
};

/* Suffixes per format, NULL-terminated; the first that matches wins. */
static const char *const rec_suffixes[REC_FORMAT_COUNT][3] = {
	[REC_FORMAT_TFRECORD] = { ".tfrecord", ".tfrecords", NULL },
	[REC_FORMAT_TFRECORD_GZ] = { ".tfrecord.gz", ".tfrecords.gz", NULL },
	[REC_FORMAT_JSONL] = { ".jsonl", NULL, NULL },
	[REC_FORMAT_JSONL_GZ] = { ".jsonl.gz", NULL, NULL },
	[REC_FORMAT_TAR] = { ".tar", NULL, NULL },
};

const char *rec_format_name(enum rec_format f)
{
	return (unsigned)f < REC_FORMAT_COUNT ? rec_format_names[f] : NULL;
}

bool rec_format_gzip(enum rec_format f)
{
	return f == REC_FORMAT_TFRECORD_GZ || f == REC_FORMAT_JSONL_GZ;
}

enum rec_format rec_format_base(enum rec_format f)
{
	if (f == REC_FORMAT_TFRECORD_GZ)
		return REC_FORMAT_TFRECORD;
	if (f == REC_FORMAT_JSONL_GZ)
		return REC_FORMAT_JSONL;
	return f;
}

const char *rec_format_ext(enum rec_format f)
{
	return rec_format_name(rec_format_base(f));
}

bool rec_format_selects(enum rec_format f, const char *key, size_t key_len)
{
	if ((unsigned)f >= REC_FORMAT_COUNT)
		return false;
	for (const char *const *s = rec_suffixes[f]; *s; s++) {
		size_t n = strlen(*s);
		/* A key that is only the suffix (".tar") is a hidden file,
		 * not a record file with an empty name. */
		if (key_len > n && memcmp(key + key_len - n, *s, n) == 0 &&
		    key[key_len - n - 1] != '/')
			return true;
	}
	return false;
}
