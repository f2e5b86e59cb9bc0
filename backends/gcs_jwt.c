/*
 * gcs_jwt: see gcs_jwt.h. Signing uses OpenSSL's EVP interface (libcrypto
 * is linked for TLS anyway); JSON goes through jansson.
 */
#include "backends/gcs_jwt.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/objstore.h"
#include "util/hex.h"

void gcs_jwt_key_free(struct gcs_jwt_key *k)
{
	if (k == NULL)
		return;
	objstore_wipe_free(k->token_uri);
	objstore_wipe_free(k->client_email);
	objstore_wipe_free(k->private_key_id);
	EVP_PKEY_free(k->pkey);
	objstore_wipe_free(k->client_id);
	objstore_wipe_free(k->client_secret);
	objstore_wipe_free(k->refresh_token);
	free(k);
}

/* Copies the string field name of root into *dst. Returns 0, -EBADMSG
 * (missing, not a string, or empty when required), -ENOMEM. */
static int gcs_jwt_take(json_t *root, const char *name, int required,
			char **dst, char *why, size_t cap)
{
	json_t *v = json_object_get(root, name);

	if (v == NULL && !required)
		return 0;
	if (v == NULL || !json_is_string(v) || json_string_length(v) == 0) {
		snprintf(why, cap, "\"%s\" is %s", name,
			 v == NULL	      ? "missing"
			 : !json_is_string(v) ? "not a string"
					      : "empty");
		return -EBADMSG;
	}
	if (strlen(json_string_value(v)) != json_string_length(v)) {
		snprintf(why, cap, "\"%s\" holds a NUL", name);
		return -EBADMSG;
	}
	*dst = strdup(json_string_value(v));
	return *dst ? 0 : -ENOMEM;
}

/* A type worth naming in an error: a short identifier, not a secret. */
static int gcs_jwt_plain_word(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz_");

	return n > 0 && n <= 40 && s[n] == '\0';
}

static int gcs_jwt_load_pkey(struct gcs_jwt_key *k, const char *pem, char *why,
			     size_t cap)
{
	BIO *bio = BIO_new_mem_buf(pem, (int)strlen(pem));
	EVP_PKEY *pk;

	if (bio == NULL)
		return -ENOMEM;
	pk = PEM_read_bio_PrivateKey(bio, NULL, NULL, (void *)"");
	BIO_free(bio);
	/* A failed parse leaves errors queued; they must not surface in
	 * an unrelated TLS call of this thread later. */
	ERR_clear_error();
	if (pk == NULL) {
		snprintf(why, cap, "\"private_key\" is not a PEM private key");
		return -EBADMSG;
	}
	if (EVP_PKEY_get_base_id(pk) != EVP_PKEY_RSA) {
		EVP_PKEY_free(pk);
		snprintf(why, cap, "\"private_key\" is not an RSA key");
		return -EBADMSG;
	}
	k->pkey = pk;
	return 0;
}

int gcs_jwt_key_parse(const char *text, size_t len, struct gcs_jwt_key **out,
		      char *why, size_t cap)
{
	struct gcs_jwt_key *k;
	json_error_t err;
	json_t *root;
	const char *type;
	char *pem = NULL;
	int rc;

	snprintf(why, cap, "malformed");
	if (len > GCS_JWT_FILE_MAX) {
		snprintf(why, cap, "larger than %d bytes: not a key file",
			 GCS_JWT_FILE_MAX);
		return -EFBIG;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
	if (root == NULL || !json_is_object(root)) {
		/* err.text may quote the input: give only the place. */
		if (root == NULL)
			snprintf(why, cap, "not JSON (line %d column %d)",
				 err.line, err.column);
		else
			snprintf(why, cap, "not a JSON object");
		json_decref(root);
		return -EBADMSG;
	}
	k = calloc(1, sizeof(*k));
	if (k == NULL) {
		json_decref(root);
		return -ENOMEM;
	}
	type = json_string_value(json_object_get(root, "type"));
	if (type == NULL) {
		snprintf(why, cap, "\"type\" is missing or not a string");
		rc = -EBADMSG;
	} else if (strcmp(type, "service_account") == 0) {
		k->type = GCS_JWT_SERVICE_ACCOUNT;
		rc = gcs_jwt_take(root, "client_email", 1, &k->client_email,
				  why, cap);
		if (rc == 0)
			rc = gcs_jwt_take(root, "private_key", 1, &pem, why,
					  cap);
		if (rc == 0)
			rc = gcs_jwt_take(root, "private_key_id", 0,
					  &k->private_key_id, why, cap);
		if (rc == 0)
			rc = gcs_jwt_take(root, "token_uri", 0, &k->token_uri,
					  why, cap);
		if (rc == 0)
			rc = gcs_jwt_load_pkey(k, pem, why, cap);
	} else if (strcmp(type, "authorized_user") == 0) {
		k->type = GCS_JWT_AUTHORIZED_USER;
		rc = gcs_jwt_take(root, "client_id", 1, &k->client_id, why,
				  cap);
		if (rc == 0)
			rc = gcs_jwt_take(root, "client_secret", 1,
					  &k->client_secret, why, cap);
		if (rc == 0)
			rc = gcs_jwt_take(root, "refresh_token", 1,
					  &k->refresh_token, why, cap);
		if (rc == 0)
			rc = gcs_jwt_take(root, "token_uri", 0, &k->token_uri,
					  why, cap);
	} else {
		if (gcs_jwt_plain_word(type))
			snprintf(why, cap,
				 "type \"%s\" is not supported (only "
				 "service_account and authorized_user)",
				 type);
		else
			snprintf(why, cap,
				 "\"type\" is not service_account "
				 "or authorized_user");
		rc = -ENOTSUP;
	}
	if (rc == 0 && k->token_uri == NULL) {
		k->token_uri = strdup(GCS_JWT_TOKEN_URI);
		if (k->token_uri == NULL)
			rc = -ENOMEM;
	}
	objstore_wipe_free(pem);
	json_decref(root);
	if (rc < 0) {
		gcs_jwt_key_free(k);
		return rc;
	}
	snprintf(why, cap, "ok");
	*out = k;
	return 0;
}

char *gcs_jwt_b64url(const unsigned char *data, size_t len)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789-_";
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	size_t i;

	if (out == NULL)
		return NULL;
	for (i = 0; i + 2 < len; i += 3) {
		unsigned v = (unsigned)data[i] << 16 |
			     (unsigned)data[i + 1] << 8 | data[i + 2];

		*o++ = abc[v >> 18 & 63];
		*o++ = abc[v >> 12 & 63];
		*o++ = abc[v >> 6 & 63];
		*o++ = abc[v & 63];
	}
	if (len - i == 1) {
		unsigned v = (unsigned)data[i] << 16;

		*o++ = abc[v >> 18 & 63];
		*o++ = abc[v >> 12 & 63];
	} else if (len - i == 2) {
		unsigned v = (unsigned)data[i] << 16 | (unsigned)data[i + 1]
							       << 8;

		*o++ = abc[v >> 18 & 63];
		*o++ = abc[v >> 12 & 63];
		*o++ = abc[v >> 6 & 63];
	}
	*o = '\0';
	return out;
}

/* base64url of a JSON object's compact text. */
static char *gcs_jwt_b64_json(json_t *obj)
{
	char *text =
		obj ? json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	char *b;

	if (text == NULL)
		return NULL;
	b = gcs_jwt_b64url((const unsigned char *)text, strlen(text));
	free(text);
	return b;
}

/* RS256: an RSASSA-PKCS1-v1_5 signature over SHA-256 of input. */
static int gcs_jwt_rs256(EVP_PKEY *pk, const char *input, unsigned char **sig,
			 size_t *sig_len)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int rc = -EIO;

	*sig = NULL;
	if (ctx == NULL)
		return -ENOMEM;
	if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, pk) != 1 ||
	    EVP_DigestSign(ctx, NULL, sig_len, (const unsigned char *)input,
			   strlen(input)) != 1)
		goto out;
	*sig = malloc(*sig_len);
	if (*sig == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (EVP_DigestSign(ctx, *sig, sig_len, (const unsigned char *)input,
			   strlen(input)) != 1) {
		free(*sig);
		*sig = NULL;
		goto out;
	}
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return rc;
}

int gcs_jwt_sign(const struct gcs_jwt_key *k, const char *scope, int64_t iat,
		 char **out)
{
	json_t *head, *claims;
	char *h64 = NULL, *c64 = NULL, *input = NULL, *s64 = NULL;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	int rc = -ENOMEM;

	if (k->type != GCS_JWT_SERVICE_ACCOUNT || k->pkey == NULL)
		return -EINVAL;
	head = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
	if (head != NULL && k->private_key_id != NULL &&
	    json_object_set_new(head, "kid", json_string(k->private_key_id)) !=
		    0) {
		json_decref(head);
		head = NULL;
	}
	claims = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", k->client_email,
			   "scope", scope, "aud", k->token_uri, "iat",
			   (json_int_t)iat, "exp",
			   (json_int_t)(iat + GCS_JWT_LIFETIME_S));
	h64 = gcs_jwt_b64_json(head);
	c64 = gcs_jwt_b64_json(claims);
	json_decref(head);
	json_decref(claims);
	if (h64 == NULL || c64 == NULL ||
	    asprintf(&input, "%s.%s", h64, c64) < 0) {
		input = NULL;
		goto out;
	}
	rc = gcs_jwt_rs256(k->pkey, input, &sig, &sig_len);
	if (rc < 0)
		goto out;
	s64 = gcs_jwt_b64url(sig, sig_len);
	if (s64 == NULL || asprintf(out, "%s.%s", input, s64) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	rc = 0;
out:
	/* The signature is the secret half of the assertion: wipe every
	 * copy before it goes back to the allocator. */
	free(h64);
	free(c64);
	objstore_wipe_free(input);
	if (sig != NULL)
		explicit_bzero(sig, sig_len);
	free(sig);
	objstore_wipe_free(s64);
	return rc;
}

/* Appends name=value (after a '&' unless first), the value
 * percent-encoded (RFC 3986 unreserved characters kept), at dst + *pos;
 * with dst NULL only counts, so the body is sized before it is written
 * and never reallocated (a realloc would leave secret copies behind). */
static void gcs_jwt_form_add(char *dst, size_t *pos, const char *name,
			     const char *value)
{
	const unsigned char *v;
	size_t n = *pos;

	if (n > 0) {
		if (dst != NULL)
			dst[n] = '&';
		n++;
	}
	for (; *name != '\0'; name++, n++)
		if (dst != NULL)
			dst[n] = *name;
	if (dst != NULL)
		dst[n] = '=';
	n++;
	for (v = (const unsigned char *)value; *v != '\0'; v++) {
		if ((*v >= 'A' && *v <= 'Z') || (*v >= 'a' && *v <= 'z') ||
		    (*v >= '0' && *v <= '9') || strchr("-._~", *v) != NULL) {
			if (dst != NULL)
				dst[n] = (char)*v;
			n++;
		} else {
			if (dst != NULL)
				hex_percent(*v, dst + n);
			n += 3;
		}
	}
	*pos = n;
}

int gcs_jwt_token_request(const struct gcs_jwt_key *k, int64_t now, char **out)
{
	const char *f[8];
	char *jwt = NULL, *body;
	size_t nf = 0, len = 0, i;
	int rc;

	if (k->type == GCS_JWT_SERVICE_ACCOUNT) {
		rc = gcs_jwt_sign(k, GCS_JWT_SCOPE, now, &jwt);
		if (rc < 0)
			return rc;
		f[nf++] = "grant_type";
		f[nf++] = "urn:ietf:params:oauth:grant-type:jwt-bearer";
		f[nf++] = "assertion";
		f[nf++] = jwt;
	} else {
		f[nf++] = "grant_type";
		f[nf++] = "refresh_token";
		f[nf++] = "client_id";
		f[nf++] = k->client_id;
		f[nf++] = "client_secret";
		f[nf++] = k->client_secret;
		f[nf++] = "refresh_token";
		f[nf++] = k->refresh_token;
	}
	for (i = 0; i < nf; i += 2)
		gcs_jwt_form_add(NULL, &len, f[i], f[i + 1]);
	body = malloc(len + 1);
	if (body != NULL) {
		len = 0;
		for (i = 0; i < nf; i += 2)
			gcs_jwt_form_add(body, &len, f[i], f[i + 1]);
		body[len] = '\0';
	}
	objstore_wipe_free(jwt);
	if (body == NULL)
		return -ENOMEM;
	*out = body;
	return 0;
}

int gcs_jwt_token_parse(const char *text, size_t len, int64_t now,
			char **access_token, int64_t *expires, char *why,
			size_t cap)
{
	json_error_t err;
	json_t *root = json_loadb(text, len, 0, &err), *v;
	const char *tok, *type;
	json_int_t in;
	size_t i, n;
	int rc = -EBADMSG;

	if (root == NULL || !json_is_object(root)) {
		snprintf(why, cap, "the reply is not a JSON object");
		goto out;
	}
	v = json_object_get(root, "access_token");
	tok = json_string_value(v);
	n = json_string_length(v);
	if (tok == NULL || n == 0) {
		snprintf(why, cap, "no access_token in the reply");
		goto out;
	}
	for (i = 0; i < n; i++)
		if ((unsigned char)tok[i] <= ' ' ||
		    (unsigned char)tok[i] >= 0x7f)
			break;
	if (i < n || n > 8192) {
		snprintf(why, cap, "the access_token is not a plain token");
		goto out;
	}
	v = json_object_get(root, "expires_in");
	if (!json_is_integer(v)) {
		snprintf(why, cap, "expires_in is missing or not an integer");
		goto out;
	}
	in = json_integer_value(v);
	if (in <= 0 || in > GCS_JWT_MAX_EXPIRES_IN) {
		snprintf(why, cap, "expires_in %lld is out of range 1..%d",
			 (long long)in, GCS_JWT_MAX_EXPIRES_IN);
		goto out;
	}
	v = json_object_get(root, "token_type");
	type = json_string_value(v);
	if (v != NULL && (type == NULL || strcasecmp(type, "Bearer") != 0)) {
		snprintf(why, cap, "token_type is not Bearer");
		goto out;
	}
	*access_token = strdup(tok);
	if (*access_token == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	*expires = now + in;
	rc = 0;
out:
	json_decref(root);
	return rc;
}
