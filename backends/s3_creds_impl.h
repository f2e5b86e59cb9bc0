/*
 * s3_creds_impl: what s3_creds.c (credentials, their documents, the
 * provider and its refresh thread) shares with s3_creds_source.c (asking
 * each source of the chain). Private to those two (everyone else uses
 * s3_creds.h).
 */
#ifndef SHARDFS_S3_CREDS_IMPL_H
#define SHARDFS_S3_CREDS_IMPL_H

#include <stdint.h>

#include "backends/s3_creds.h"

/* The chain's sources, in the order they are asked (s3_creds.h). */
enum s3_creds_source {
	CREDS_ENV = 0,
	CREDS_PROFILE,
	CREDS_WEB_IDENTITY,
	CREDS_CONTAINER,
	CREDS_IMDS,
};

/* The Unix time (s) an ISO 8601 expiry names (STS and the credential
 * endpoints write it so), or -1 for NULL or a malformed time. */
int64_t s3_creds_parse_expiry(const char *s);

/* Asks source s for credentials (region for STS, http for the sources
 * that are asked over HTTP; chosen: s already answered once, so it is
 * retried and its failure is an error rather than "not here"). Returns 0
 * with a new reference in *out; -ENOENT when s is not configured here
 * (try the next); -EACCES when it is but gave none (logged once); or
 * -ENOMEM. */
int s3_creds_from_source(enum s3_creds_source s, const char *region,
			 struct http_pool *http, int chosen,
			 struct s3_creds **out);

#endif
