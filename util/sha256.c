/*
 * sha256: see sha256.h. OpenSSL's EVP interface; struct sha256 is its
 * EVP_MD_CTX under our own name, so no caller sees an OpenSSL type.
 */
#include "util/sha256.h"

#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "util/hex.h"

int sha256(const void *p, size_t n, uint8_t out[SHA256_LEN])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (EVP_Digest(p, n, md, &len, EVP_sha256(), NULL) != 1 ||
	    len != SHA256_LEN)
		return -EIO;
	memcpy(out, md, SHA256_LEN);
	return 0;
}

int sha256_hex(const void *p, size_t n, char hex[SHA256_HEX_LEN + 1])
{
	uint8_t md[SHA256_LEN];
	int rc = sha256(p, n, md);

	if (rc == 0)
		hex_encode(md, sizeof(md), hex);
	return rc;
}

struct sha256 *sha256_new(void)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		ctx = NULL;
	}
	return (struct sha256 *)ctx;
}

int sha256_update(struct sha256 *s, const void *p, size_t n)
{
	return EVP_DigestUpdate((EVP_MD_CTX *)s, p, n) == 1 ? 0 : -EIO;
}

int sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (EVP_DigestFinal_ex((EVP_MD_CTX *)s, md, &len) != 1 ||
	    len != SHA256_LEN)
		return -EIO;
	memcpy(out, md, SHA256_LEN);
	return 0;
}

void sha256_free(struct sha256 *s)
{
	EVP_MD_CTX_free((EVP_MD_CTX *)s);
}
