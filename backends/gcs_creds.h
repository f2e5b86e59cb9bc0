/*
 * gcs_creds: Google OAuth2 access tokens for the GCS backend, found in the
 * Application Default Credentials order and refreshed before they expire.
 *
 * The chain, first match wins (the order of Google's client libraries):
 *   1. GOOGLE_APPLICATION_CREDENTIALS names a JSON file: a service-account
 *      key (a JWT signed RS256 with its private key: iss = client_email,
 *      scope = devstorage.read_only, aud = token_uri, exp <= iat + 3600,
 *      exchanged at token_uri with grant_type
 *      urn:ietf:params:oauth:grant-type:jwt-bearer) or an authorized_user
 *      file (client_id, client_secret, refresh_token, exchanged at the
 *      token endpoint with grant_type=refresh_token); a named file that is
 *      missing or malformed is an error, not a fall-through;
 *   2. gcloud's ADC file, $CLOUDSDK_CONFIG or ~/.config/gcloud, then
 *      application_default_credentials.json (same two types);
 *   3. the GCE/GKE metadata server: GCE_METADATA_HOST (host[:port]) or
 *      metadata.google.internal, header Metadata-Flavor: Google (and the
 *      reply must carry it too), the token of the default service account;
 *      probed once with 1 s to connect and 2 s in all, so a mount off
 *      Google Cloud fails fast.
 * A key file's token_uri must be https, or http to a loopback address.
 * Anonymous access (anonymous = true, or STORAGE_EMULATOR_HOST set) does
 * not use a provider at all: the backend then sends no Authorization.
 *
 * Tokens are refreshed by one helper thread ahead of expiry, so readers
 * never wait on the network: they take a reference to the current
 * immutable token under a mutex held for a pointer copy. A failed refresh
 * keeps the old token (it may still be valid) and is retried with
 * backoff. A refresh request is bounded (10 s), and so is how long
 * gcs_creds_provider_free() may wait for one in flight. The log says which
 * source answered, never a token or a key. The key-file and token-reply
 * documents are parsed in gcs_jwt.h.
 */
#ifndef SHARDFS_GCS_CREDS_H
#define SHARDFS_GCS_CREDS_H

#include <stdint.h>

/* The HTTP pool (backends/http.h); declared here so this header does not
 * pull in curl.h. */
struct http_pool;

/* One access token; immutable once made, shared by reference. */
struct gcs_token {
	char *access_token;
	int64_t expires; /* unix seconds; 0 = does not expire */
	/* private: */
	int refs;
};

/* Makes a token from a copy of access_token with one reference. Returns
 * NULL when out of memory. */
struct gcs_token *gcs_token_new(const char *access_token, int64_t expires);

/* Drops a reference; the last one frees. NULL is a no-op. */
void gcs_token_put(struct gcs_token *t);

struct gcs_creds_provider;

/* Runs the chain once, logs which source answered (never a secret), and
 * starts the refresh thread. http (borrowed, must outlive the provider)
 * carries the token and metadata requests. Returns 0 and sets *out,
 * -EACCES when no source has credentials or the chosen source fails
 * (logged, naming the source and why), -ENOMEM. */
int gcs_creds_provider_new(struct http_pool *http,
			   struct gcs_creds_provider **out);

/* Stops the refresh thread and frees the provider; references handed out
 * stay valid. NULL is a no-op. */
void gcs_creds_provider_free(struct gcs_creds_provider *p);

/* Returns a new reference to the current token (never NULL); release it
 * with gcs_token_put(). Never blocks on the network. */
struct gcs_token *gcs_creds_get(struct gcs_creds_provider *p);

#endif
