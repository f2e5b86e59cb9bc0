/*
 * gcs_jwt: the documents of Google's OAuth2 flows, without any I/O: the
 * credential files of the Application Default Credentials chain (a
 * service-account key or an authorized_user file), the RS256-signed JWT a
 * service account exchanges for an access token, the form bodies POSTed to
 * the token endpoint, and the token endpoint's (or the metadata server's)
 * JSON reply. Pure functions (the clock is a parameter), so the unit tests
 * and the fuzz harness reach every branch; backends/gcs_creds.c does the
 * files, the HTTP and the refresh thread.
 *
 * Secrets (the private key, client_secret, refresh_token, the signed JWT,
 * access tokens) never reach a log line or an error message from here: a
 * parse error says which field is missing or wrong, never its value.
 */
#ifndef SHARDFS_GCS_JWT_H
#define SHARDFS_GCS_JWT_H

#include <stddef.h>
#include <stdint.h>

/* The only scope shardfs asks for: it never writes. */
#define GCS_JWT_SCOPE "https://www.googleapis.com/auth/devstorage.read_only"
/* Google's token endpoint, for authorized_user files that name none. */
#define GCS_JWT_TOKEN_URI "https://oauth2.googleapis.com/token"
/* A JWT's life: Google rejects exp > iat + 3600. */
#define GCS_JWT_LIFETIME_S 3600
/* The longest expires_in a token reply may claim (Google's tokens live
 * 1 h, 12 h at most with an org policy); more is a broken endpoint. */
#define GCS_JWT_MAX_EXPIRES_IN 86400
/* Credential files are small; a bigger one is not a key file. */
#define GCS_JWT_FILE_MAX (64 * 1024)

enum gcs_jwt_key_type {
	GCS_JWT_SERVICE_ACCOUNT = 1,
	GCS_JWT_AUTHORIZED_USER,
};

/* A parsed credential file. All strings are owned and wiped on free. */
struct gcs_jwt_key {
	enum gcs_jwt_key_type type;
	char *token_uri; /* always set (authorized_user: the default) */
	/* service_account: */
	char *client_email;
	char *private_key_id; /* may be NULL: then the JWT has no kid */
	void *pkey;	      /* the RSA private key, an EVP_PKEY */
	/* authorized_user: */
	char *client_id;
	char *client_secret;
	char *refresh_token;
};

/* Parses the text of a credential file (len bytes, need not be
 * NUL-terminated). A service_account needs client_email, private_key (an
 * RSA key in PEM) and may give private_key_id and token_uri (default
 * GCS_JWT_TOKEN_URI); an authorized_user needs client_id, client_secret
 * and refresh_token. Returns 0 and sets *out (free with gcs_jwt_key_free),
 * -EBADMSG when it is not a JSON object or lacks a field or has a wrong
 * one, -ENOTSUP for another "type", -EFBIG over GCS_JWT_FILE_MAX,
 * -ENOMEM. On error why (cap bytes) says what is wrong, never a value. */
int gcs_jwt_key_parse(const char *text, size_t len, struct gcs_jwt_key **out,
		      char *why, size_t cap);

/* Wipes and frees. NULL is a no-op. */
void gcs_jwt_key_free(struct gcs_jwt_key *k);

/* Builds the signed assertion of a service account key: header
 * {"alg":"RS256","typ":"JWT","kid":private_key_id}, claims iss =
 * client_email, scope, aud = token_uri, iat, exp = iat +
 * GCS_JWT_LIFETIME_S, each part base64url without padding, signed RS256.
 * Returns 0 and sets *out (malloc'd; a secret until it expires: wipe it),
 * -EINVAL for a key that is not a service account, -EIO when signing
 * fails, -ENOMEM. */
int gcs_jwt_sign(const struct gcs_jwt_key *k, const char *scope, int64_t iat,
		 char **out);

/* The application/x-www-form-urlencoded body that exchanges k at its
 * token_uri: for a service account grant_type=urn:ietf:params:oauth:
 * grant-type:jwt-bearer&assertion=JWT (signed now), for an authorized
 * user grant_type=refresh_token with client_id, client_secret and
 * refresh_token. Returns 0 and sets *out (malloc'd, a secret: wipe it),
 * or the errors of gcs_jwt_sign. */
int gcs_jwt_token_request(const struct gcs_jwt_key *k, int64_t now, char **out);

/* Base64url without padding of len bytes. Returns a malloc'd string or
 * NULL when out of memory. */
char *gcs_jwt_b64url(const unsigned char *data, size_t len);

/* Parses a token reply {"access_token", "expires_in", "token_type"}:
 * access_token a non-empty string of visible ASCII (it goes into a
 * header), expires_in an integer in 1..GCS_JWT_MAX_EXPIRES_IN, token_type
 * "Bearer" when present. Sets *access_token (malloc'd; a secret) and
 * *expires = now + expires_in. Returns 0, -EBADMSG (why says which field;
 * never a value), -ENOMEM. */
int gcs_jwt_token_parse(const char *text, size_t len, int64_t now,
			char **access_token, int64_t *expires, char *why,
			size_t cap);

#endif
