/*
 * fuzz_gcs_creds: the GCS credential documents (backends/gcs_jwt.c): a
 * credential file (service_account or authorized_user JSON, the PEM key
 * inside) and a token endpoint's or metadata server's reply.
 *
 * Whatever parses is whole: a key has its type's fields and a token_uri,
 * an authorized_user's form body is well-formed; a token is non-empty
 * visible ASCII and expires 1 s to a day ahead. why is always a string.
 * Nothing leaks either way.
 */
#include <string.h>

#include "backends/gcs_jwt.h"
#include "tests/fuzz/fuzz.h"

#define NOW 1700000000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct gcs_jwt_key *k = NULL;
	char why[160], *tok = NULL, *body = NULL;
	int64_t expires = 0;
	size_t i;

	if (gcs_jwt_key_parse(text, size, &k, why, sizeof(why)) == 0) {
		FUZZ_CHECK(k->token_uri != NULL && k->token_uri[0] != '\0');
		if (k->type == GCS_JWT_SERVICE_ACCOUNT) {
			FUZZ_CHECK(k->client_email != NULL && k->pkey != NULL);
		} else {
			FUZZ_CHECK(k->type == GCS_JWT_AUTHORIZED_USER);
			FUZZ_CHECK(k->client_id != NULL &&
				   k->client_secret != NULL &&
				   k->refresh_token != NULL);
			/* Signing is the RSA cost; the form is cheap. */
			FUZZ_CHECK(gcs_jwt_token_request(k, NOW, &body) == 0);
			FUZZ_CHECK(strncmp(body, "grant_type=refresh_token&",
					   25) == 0);
			FUZZ_CHECK(strpbrk(body, " \r\n") == NULL);
			free(body);
		}
		gcs_jwt_key_free(k);
	}
	FUZZ_CHECK(memchr(why, '\0', sizeof(why)) != NULL);
	if (gcs_jwt_token_parse(text, size, NOW, &tok, &expires, why,
				sizeof(why)) == 0) {
		FUZZ_CHECK(tok[0] != '\0');
		for (i = 0; tok[i] != '\0'; i++)
			FUZZ_CHECK((unsigned char)tok[i] > ' ' &&
				   (unsigned char)tok[i] < 0x7f);
		FUZZ_CHECK(expires > NOW &&
			   expires <= NOW + GCS_JWT_MAX_EXPIRES_IN);
		free(tok);
	}
	FUZZ_CHECK(memchr(why, '\0', sizeof(why)) != NULL);
	return 0;
}
