/*
 * s3_creds: AWS credentials in the standard order, refreshed before they
 * expire.
 *
 * The chain, first match wins (the order of the AWS SDKs):
 *   1. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
 *      (+ AWS_SESSION_TOKEN);
 *   2. the shared credentials file: AWS_SHARED_CREDENTIALS_FILE or
 *      ~/.aws/credentials, profile AWS_PROFILE (else AWS_DEFAULT_PROFILE,
 *      else "default"); a profile named in AWS_PROFILE that the file lacks
 *      is an error, not a fall-through;
 *   3. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN
 *      (+ AWS_ROLE_SESSION_NAME) through STS AssumeRoleWithWebIdentity at
 *      AWS_ENDPOINT_URL_STS, else https://sts.REGION.amazonaws.com; the
 *      token file is re-read at every refresh (Kubernetes rotates it);
 *   4. container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI or
 *      http://169.254.170.2 + AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, with
 *      AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE) as Authorization; a full
 *      URI over plain http must name a loopback or the ECS/EKS address;
 *   5. EC2 instance metadata, IMDSv2 only (token PUT first), at
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT or http://169.254.169.254, unless
 *      AWS_EC2_METADATA_DISABLED=true.
 *
 * Temporary credentials (3-5, or 1-2 with an expiry) are refreshed by one
 * helper thread ahead of expiry: 5 minutes before, or half the remaining
 * lifetime if that is shorter. Readers take a reference to the current
 * immutable credentials under a mutex held for a pointer copy, so a refresh
 * in flight never stalls them. A failed refresh keeps the old credentials
 * (they may still be valid) and is retried with backoff.
 */
#ifndef SHARDFS_S3_CREDS_H
#define SHARDFS_S3_CREDS_H

#include <stddef.h>
#include <stdint.h>

/* The HTTP pool (backends/http.h); declared here so this header does not
 * pull in curl.h. */
struct http_pool;

/* One set of credentials; immutable once made, shared by reference. */
struct s3_creds {
	char *access_key;
	char *secret_key;
	char *session_token; /* NULL for long-term keys */
	int64_t expires;     /* unix seconds; 0 = does not expire */
	/* private: */
	int refs;
};

/* Makes a set from copies of the strings (token may be NULL) with one
 * reference. Returns NULL when out of memory. */
struct s3_creds *s3_creds_new(const char *access_key, const char *secret_key,
			      const char *session_token, int64_t expires);

/* Drops a reference; the last one frees. NULL is a no-op. */
void s3_creds_put(struct s3_creds *c);

/* Finds profile in the text of a shared credentials file (INI:
 * aws_access_key_id, aws_secret_access_key, aws_session_token; '#' and ';'
 * comments). Returns 0 and sets *out (one reference), -ENOENT if the
 * profile is not there, -EINVAL if it lacks a key or the secret, -ENOMEM. */
int s3_creds_parse_ini(const char *text, size_t len, const char *profile,
		       struct s3_creds **out);

/* Parses the JSON that container credentials and IMDS serve
 * ({"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}). Returns 0
 * and sets *out, -EBADMSG if malformed or incomplete, -ENOMEM. */
int s3_creds_parse_json(const char *text, size_t len, struct s3_creds **out);

struct s3_creds_provider;

/* Runs the chain once, logs which source answered (never a secret), and
 * starts the refresh thread when the credentials expire. http (borrowed,
 * must outlive the provider) carries the STS, container and IMDS requests;
 * region picks the STS endpoint. Returns 0 and sets *out, -EACCES when no
 * source has credentials or the chosen source fails (logged), -ENOMEM. */
int s3_creds_provider_new(struct http_pool *http, const char *region,
			  struct s3_creds_provider **out);

/* Stops the refresh thread and frees the provider; references handed out
 * stay valid. NULL is a no-op. */
void s3_creds_provider_free(struct s3_creds_provider *p);

/* Returns a new reference to the current credentials (never NULL); release
 * it with s3_creds_put(). Never blocks on the network. */
struct s3_creds *s3_creds_get(struct s3_creds_provider *p);

#endif
