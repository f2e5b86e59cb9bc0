/*
 * s3_sign: see s3_sign.h. The canonical request, string to sign and
 * signing key follow the SigV4 specification step by step; S3 does not
 * normalise or double-encode the path, so the path is signed as sent.
 */
#include "backends/s3_sign.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/objstore.h"
#include "util/hex.h"

#define SIGN_HEADERS_MAX 16

char *s3_uri_encode(const char *s, size_t len, int keep_slash)
{
	return objstore_uri_encode(s, len, keep_slash);
}

void s3_amz_date(time_t t, char out[17])
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int hmac(const unsigned char *key, size_t key_len, const char *msg,
		size_t msg_len, unsigned char out[32])
{
	unsigned int n = 32;

	return HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg,
		    msg_len, out, &n) != NULL
		       ? 0
		       : -ENOMEM;
}

static int cmp_header(const void *a, const void *b)
{
	const struct s3_sign_header *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

int s3_sign_v4(const struct s3_sign_request *req, char *out, size_t out_cap)
{
	const struct s3_sign_header *sorted[SIGN_HEADERS_MAX];
	unsigned char k[32], digest[SHA256_DIGEST_LENGTH];
	char date[9], scope[256], signed_names[512], cr_hash[65], sig[65];
	char *canon = NULL, *secret = NULL, *sts = NULL;
	size_t canon_len = 0, i, o = 0;
	FILE *f;
	int n, rc = -ENOMEM;

	if (req->n_headers > SIGN_HEADERS_MAX || strlen(req->amz_date) != 16)
		return -EINVAL;
	memcpy(date, req->amz_date, 8);
	date[8] = '\0';
	for (i = 0; i < req->n_headers; i++)
		sorted[i] = &req->headers[i];
	qsort(sorted, req->n_headers, sizeof(sorted[0]), cmp_header);
	signed_names[0] = '\0';
	for (i = 0; i < req->n_headers; i++) {
		n = snprintf(signed_names + o, sizeof(signed_names) - o, "%s%s",
			     i ? ";" : "", sorted[i]->name);
		if (n < 0 || (size_t)n >= sizeof(signed_names) - o)
			return -ENAMETOOLONG;
		o += (size_t)n;
	}

	/* Canonical request. */
	f = open_memstream(&canon, &canon_len);
	if (f == NULL)
		return -ENOMEM;
	fprintf(f, "%s\n%s\n%s\n", req->method, req->path, req->query);
	for (i = 0; i < req->n_headers; i++)
		fprintf(f, "%s:%s\n", sorted[i]->name, sorted[i]->value);
	fprintf(f, "\n%s\n%s", signed_names, req->payload_hash);
	if (fclose(f) != 0)
		goto out;
	SHA256((const unsigned char *)canon, canon_len, digest);
	hex_encode(digest, sizeof(digest), cr_hash);

	/* String to sign. */
	n = snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date,
		     req->region, req->service);
	if (n < 0 || (size_t)n >= sizeof(scope)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", req->amz_date, scope,
		     cr_hash) < 0) {
		sts = NULL;
		goto out;
	}

	/* Signing key: HMAC chain over date, region, service, terminator. */
	if (asprintf(&secret, "AWS4%s", req->secret_key) < 0) {
		secret = NULL;
		goto out;
	}
	if (hmac((const unsigned char *)secret, strlen(secret), date, 8, k) <
		    0 ||
	    hmac(k, 32, req->region, strlen(req->region), k) < 0 ||
	    hmac(k, 32, req->service, strlen(req->service), k) < 0 ||
	    hmac(k, 32, "aws4_request", 12, k) < 0 ||
	    hmac(k, 32, sts, strlen(sts), digest) < 0)
		goto out;
	hex_encode(digest, 32, sig);

	n = snprintf(out, out_cap,
		     "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, "
		     "Signature=%s",
		     req->access_key, scope, signed_names, sig);
	rc = n < 0 || (size_t)n >= out_cap ? -ENAMETOOLONG : 0;
out:
	if (secret != NULL) {
		OPENSSL_cleanse(secret, strlen(secret));
		free(secret);
	}
	OPENSSL_cleanse(k, sizeof(k));
	free(sts);
	free(canon);
	return rc;
}
