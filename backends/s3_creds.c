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

int s3_creds_parse_ini(const char *text, size_t len, const char *profile,
		       struct s3_creds **out)
{
	const char *p = text, *end = text + len;
	char *ak = NULL, *sk = NULL, *tok = NULL;
	int in_profile = 0, found = 0, rc;

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
			char **dst = NULL;

			str_trim_span(&ks, &ke);
			str_trim_span(&vs, &ve);
			if ((size_t)(ke - ks) == 17 &&
			    strncasecmp(ks, "aws_access_key_id", 17) == 0)
				dst = &ak;
			else if ((size_t)(ke - ks) == 21 &&
				 strncasecmp(ks, "aws_secret_access_key", 21) ==
					 0)
				dst = &sk;
			else if ((size_t)(ke - ks) == 17 &&
				 strncasecmp(ks, "aws_session_token", 17) == 0)
				dst = &tok;
			if (dst == NULL)
				continue;
			objstore_wipe_free(*dst);
			*dst = strndup(vs, (size_t)(ve - vs));
			if (*dst == NULL) {
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	if (!found) {
		rc = -ENOENT;
		goto out;
	}
	if (ak == NULL || sk == NULL || ak[0] == '\0' || sk[0] == '\0') {
		rc = -EINVAL;
		goto out;
	}
	*out = s3_creds_new(ak, sk, tok, 0);
	rc = *out ? 0 : -ENOMEM;
out:
	objstore_wipe_free(ak);
	objstore_wipe_free(sk);
	objstore_wipe_free(tok);
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
	if (ak == NULL || sk == NULL || ak[0] == '\0' || sk[0] == '\0')
		goto out;
	if (exp != NULL) {
		expires = s3_creds_parse_expiry(exp);
		if (expires < 0)
			goto out;
	}
	*out = s3_creds_new(ak, sk, tok, expires);
	rc = *out ? 0 : -ENOMEM;
out:
	json_decref(root);
	return rc;
}
