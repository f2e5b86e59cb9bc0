/*
 * protocol: the frames a worker-mode transform speaks on stdin and stdout
 * (transform.h, TRANSFORM_MODE_WORKER). This is a user-facing contract;
 * python/shardfs/transform.py implements the worker side.
 *
 * The worker reads requests from stdin and answers each one, in order, on
 * stdout, before it reads the next:
 *
 *   request: u64 length (little-endian), then length bytes: one object
 *   reply:   u8 status, u64 length (little-endian), then length bytes
 *            status 0: ok, the bytes are the output (length >= 1; 0 is an
 *                      "empty output" failure)
 *            status 1: error, the bytes are a message (UTF-8, at most
 *                      TRANSFORM_PROTO_ERROR_MAX bytes) shown in the log
 *
 * End of file on stdin means stop: the worker exits (it also gets SIGTERM
 * when the daemon closes the transform). Any other status, an ok reply
 * longer than output_max, an error message too long, a reply cut short, a
 * byte written with no request pending, or no reply within the timeout:
 * the worker is killed and replaced, and the object in flight fails.
 * stderr is free text for the log (its tail is kept); nothing else may go
 * to stdout.
 */
#ifndef SHARDFS_TRANSFORM_PROTOCOL_H
#define SHARDFS_TRANSFORM_PROTOCOL_H

#include <stdint.h>

#include "util/le.h" /* the lengths: le_put64(), le_get64() */

#define TRANSFORM_PROTO_REQ_HDR 8   /* u64 length */
#define TRANSFORM_PROTO_REPLY_HDR 9 /* u8 status, u64 length */
#define TRANSFORM_PROTO_OK 0
#define TRANSFORM_PROTO_ERROR 1
#define TRANSFORM_PROTO_ERROR_MAX 65536u

#endif
