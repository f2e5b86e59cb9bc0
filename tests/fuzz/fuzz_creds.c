/*
 * fuzz_creds: the credential documents shardfs parses
 * (backends/s3_creds.c, backends/s3_xml.c): the JSON that container
 * credentials and EC2 instance metadata serve, the shared credentials
 * file (INI), and the STS AssumeRoleWithWebIdentity answer (XML).
 *
 * Whatever parses has a non-empty key id and secret, and an expiry that is
 * 0 or positive; nothing leaks either way.
 */
#include <string.h>

#include "backends/s3_creds.h"
#include "backends/s3_xml.h"
#include "tests/fuzz/fuzz.h"

static void check_creds(struct s3_creds *c)
{
	FUZZ_CHECK(c->access_key != NULL && c->access_key[0] != '\0');
	FUZZ_CHECK(c->secret_key != NULL && c->secret_key[0] != '\0');
	FUZZ_CHECK(c->expires >= 0);
	s3_creds_put(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const profiles[] = { "default", "p" };
	const char *text = (const char *)data;
	struct s3_creds *c = NULL;
	struct s3_xml_sts sts;
	size_t i;

	if (s3_creds_parse_json(text, size, &c) == 0)
		check_creds(c);
	for (i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
		c = NULL;
		if (s3_creds_parse_ini(text, size, profiles[i], &c) == 0)
			check_creds(c);
	}
	if (s3_xml_sts_parse(text, size, &sts) == 0) {
		FUZZ_CHECK(sts.access_key != NULL && sts.secret_key != NULL &&
			   sts.session_token != NULL && sts.expiration != NULL);
		s3_xml_sts_fini(&sts);
	}
	return 0;
}
