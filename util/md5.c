/*
 * md5: see md5.h. OpenSSL's EVP interface; struct md5 is its EVP_MD_CTX
 * under our own name, so no caller sees an OpenSSL type.
 */
#include "util/md5.h"

#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

struct md5 *md5_new(void)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		ctx = NULL;
	}
	return (struct md5 *)ctx;
}

int md5_update(struct md5 *m, const void *p, size_t n)
{
	return EVP_DigestUpdate((EVP_MD_CTX *)m, p, n) == 1 ? 0 : -EIO;
}

int md5_final(struct md5 *m, uint8_t out[MD5_LEN])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (EVP_DigestFinal_ex((EVP_MD_CTX *)m, md, &len) != 1 ||
	    len != MD5_LEN)
		return -EIO;
	memcpy(out, md, MD5_LEN);
	return 0;
}

void md5_free(struct md5 *m)
{
	EVP_MD_CTX_free((EVP_MD_CTX *)m);
}
