/*
 * s3_creds: see s3_creds.h. Credentials themselves (made, shared by
 * reference, wiped when the last goes) and the documents they come in:
 * the shared credentials file, the JSON of the container and
 * instance-metadata endpoints, an ISO 8601 expiry. No I/O, no thread:
 * the chain and the provider that runs it are s3_creds_source.c's, which
 * builds on this file; this file calls nothing there.
 */
#include "backends/s3_creds.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/objstore.h"
#include "backends/s3_creds_impl.h"
#include "backends/s3_xml.h"
#include "util/str.h"

struct s3_creds *s3_creds_new(const char *access_key, const char *secret_key,
			      const char *session_token, int64_t expires)
{
	struct s3_creds *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->refs = 1;
	c->expires = expires;
	c->access_key = strdup(access_key);
	c->secret_key = strdup(secret_key);
	if (session_token != NULL && session_token[0] != '\0')
		c->session_token = strdup(session_token);
	if (c->access_key == NULL || c->secret_key == NULL ||
	    (session_token != NULL && session_token[0] != '\0' &&
	     c->session_token == NULL)) {
		c->refs = 1;
		s3_creds_put(c);
		return NULL;
	}
	return c;
}

void s3_creds_put(struct s3_creds *c)
{
	if (c == NULL)
		return;
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	objstore_wipe_free(c->access_key);
	objstore_wipe_free(c->secret_key);
	objstore_wipe_free(c->session_token);
	free(c);
}

/* Parsing */

/* Credentials from a document's fields: both keys there and not empty
 * (else bad, the document's own error), the token optional. 0 and *out,
 * bad, or -ENOMEM. */
static int creds_from_fields(const char *ak, const char *sk, const char *tok,
			     int64_t expires, int bad, struct s3_creds **out)
{
	if (ak == NULL || sk == NULL || ak[0] == '\0' || sk[0] == '\0')
		return bad;
	*out = s3_creds_new(ak, sk, tok, expires);
	return *out != NULL ? 0 : -ENOMEM;
}

/* The keys of a profile that credentials are made of (case-insensitive,
 * as the AWS SDKs read them); any other key is passed over. */
enum { INI_KEY_ID, INI_SECRET, INI_TOKEN, INI_KEYS };
static const char *const ini_keys[INI_KEYS] = {
	[INI_KEY_ID] = "aws_access_key_id",
	[INI_SECRET] = "aws_secret_access_key",
	[INI_TOKEN] = "aws_session_token",
};

int s3_creds_parse_ini(const char *text, size_t len, const char *profile,
		       struct s3_creds **out)
{
	const char *p = text, *end = text + len;
	char *val[INI_KEYS] = { NULL };
	int in_profile = 0, found = 0, rc;
	size_t i;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *s = p, *e = le, *eq;

		p = nl ? nl + 1 : end;
		str_trim_span(&s, &e);
		if (s == e || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			const char *ns = s + 1, *ne = e;

			if (ne > ns && ne[-1] == ']')
				ne--;
			str_trim_span(&ns, &ne);
			in_profile =
				strlen(profile) == (size_t)(ne - ns) &&
				strncmp(ns, profile, (size_t)(ne - ns)) == 0;
			found |= in_profile;
			continue;
		}
		if (!in_profile)
			continue;
		eq = memchr(s, '=', (size_t)(e - s));
		if (eq == NULL)
			continue;
		{
			const char *ks = s, *ke = eq, *vs = eq + 1, *ve = e;

			str_trim_span(&ks, &ke);
			str_trim_span(&vs, &ve);
			for (i = 0; i < INI_KEYS; i++)
				if (strlen(ini_keys[i]) == (size_t)(ke - ks) &&
				    strncasecmp(ks, ini_keys[i],
						(size_t)(ke - ks)) == 0)
					break;
			if (i == INI_KEYS)
				continue;
			objstore_wipe_free(val[i]);
			val[i] = strndup(vs, (size_t)(ve - vs));
			if (val[i] == NULL) {
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	rc = found ? creds_from_fields(val[INI_KEY_ID], val[INI_SECRET],
				       val[INI_TOKEN], 0, -EINVAL, out)
		   : -ENOENT;
out:
	for (i = 0; i < INI_KEYS; i++)
		objstore_wipe_free(val[i]);
	return rc;
}

int64_t s3_creds_parse_expiry(const char *s)
{
	int64_t ns;

	if (s == NULL || s3_parse_iso8601(s, &ns) < 0)
		return -1;
	return ns / 1000000000;
}

int s3_creds_parse_json(const char *text, size_t len, struct s3_creds **out)
{
	json_error_t err;
	json_t *root = json_loadb(text, len, 0, &err);
	const char *ak, *sk, *tok, *exp;
	int64_t expires = 0;
	int rc = -EBADMSG;

	if (root == NULL || !json_is_object(root))
		goto out;
	ak = json_string_value(json_object_get(root, "AccessKeyId"));
	sk = json_string_value(json_object_get(root, "SecretAccessKey"));
	tok = json_string_value(json_object_get(root, "Token"));
	exp = json_string_value(json_object_get(root, "Expiration"));
	if (exp != NULL) {
		expires = s3_creds_parse_expiry(exp);
		if (expires < 0)
			goto out;
	}
	rc = creds_from_fields(ak, sk, tok, expires, -EBADMSG, out);
out:
	json_decref(root);
	return rc;
}
