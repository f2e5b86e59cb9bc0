/*
 * s3_creds_impl: what s3_creds.c (credentials and their documents) gives
 * s3_creds_source.c (the chain, the provider and its refresh thread)
 * beyond s3_creds.h. Private to those two (everyone else uses
 * s3_creds.h).
 */
#ifndef SHARDFS_S3_CREDS_IMPL_H
#define SHARDFS_S3_CREDS_IMPL_H

#include <stdint.h>

#include "backends/s3_creds.h"

/* The Unix time (s) an ISO 8601 expiry names (STS and the credential
 * endpoints write it so), or -1 for NULL or a malformed time. */
int64_t s3_creds_parse_expiry(const char *s);

#endif
