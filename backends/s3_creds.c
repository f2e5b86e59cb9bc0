/*
 * s3_creds: see s3_creds.h. Credentials themselves, the documents they
 * come in (the shared credentials file, the JSON of the container and
 * instance-metadata endpoints), and the provider: the chain is resolved
 * once at open; the source that answered is remembered and asked again by
 * the refresh thread, so a refresh never switches to a different identity.
 * How each source is asked is s3_creds_source.c's job.
 */
#include "backends/s3_creds.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "backends/http.h"
#include "backends/objstore.h"
#include "backends/s3_creds_impl.h"
#include "util/str.h"
#include "backends/s3_sign.h"
#include "backends/s3_xml.h"
#include "util/log.h"

#define CREDS_REFRESH_AHEAD_S 300
static const char *const source_names[] = {
	"environment",
	"shared credentials file",
	"web identity (STS)",
	"container credentials",
	"EC2 instance metadata (IMDSv2)",
};

struct s3_creds_provider {
	struct http_pool *http; /* borrowed */
	char *region;
	enum s3_creds_source source;
	/* The refresh thread, if the credentials expire; its lock (the
	 * only one) protects cur, and its cond waits on CLOCK_REALTIME. */
	struct objstore_worker w;
	struct s3_creds *cur; /* protected by w.lock */
};

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

struct s3_creds *s3_creds_get(struct s3_creds_provider *p)
{
	struct s3_creds *c;

	pthread_mutex_lock(&p->w.lock);
	c = p->cur;
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&p->w.lock);
	return c;
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

/* When to refresh: 5 minutes ahead, or halfway for short lifetimes. */
static int64_t refresh_at(const struct s3_creds *c, int64_t now)
{
	int64_t left = c->expires - now;

	if (left <= 1)
		return now + 1;
	return left > 2 * CREDS_REFRESH_AHEAD_S
		       ? c->expires - CREDS_REFRESH_AHEAD_S
		       : now + left / 2;
}

static void *refresh_main(void *arg)
{
	struct s3_creds_provider *p = arg;
	unsigned failures = 0, retry_s;
	int64_t when = 0;
	struct s3_creds *c;
	int rc;

	pthread_setname_np(pthread_self(), "shardfs-creds");
	pthread_mutex_lock(&p->w.lock);
	when = refresh_at(p->cur, time(NULL));
	for (;;) {
		struct timespec ts = { .tv_sec = (time_t)when };

		while (!p->w.stop && time(NULL) < when)
			if (pthread_cond_timedwait(&p->w.cond, &p->w.lock,
						   &ts) == ETIMEDOUT)
				break;
		if (p->w.stop)
			break;
		if (time(NULL) < when)
			continue;
		pthread_mutex_unlock(&p->w.lock);
		c = NULL;
		rc = s3_creds_from_source(p->source, p->region, p->http, 1, &c);
		pthread_mutex_lock(&p->w.lock);
		if (rc == 0) {
			struct s3_creds *old = p->cur;

			p->cur = c;
			log_msg(LOG_INFO,
				"AWS credentials refreshed from %s, valid "
				"for %lld s",
				source_names[p->source],
				(long long)(c->expires - time(NULL)));
			s3_creds_put(old);
			failures = 0;
			when = c->expires ? refresh_at(c, time(NULL))
					  : INT64_MAX / 2;
		} else {
			retry_s = objstore_refresh_retry_s(++failures);
			log_msg(LOG_WARNING,
				"AWS credentials refresh from %s failed; "
				"keeping the current ones, retrying in %u s",
				source_names[p->source], retry_s);
			when = time(NULL) + retry_s;
		}
	}
	pthread_mutex_unlock(&p->w.lock);
	return NULL;
}

int s3_creds_provider_new(struct http_pool *http, const char *region,
			  struct s3_creds_provider **out)
{
	struct s3_creds_provider *p = calloc(1, sizeof(*p));
	struct s3_creds *c = NULL;
	int rc = -ENOENT, s;

	if (p == NULL)
		return -ENOMEM;
	p->http = http;
	p->region = strdup(region);
	if (p->region == NULL) {
		free(p);
		return -ENOMEM;
	}
	for (s = CREDS_ENV; s <= CREDS_IMDS && rc == -ENOENT; s++) {
		rc = s3_creds_from_source((enum s3_creds_source)s, p->region,
					  p->http, 0, &c);
		if (rc == 0)
			p->source = (enum s3_creds_source)s;
	}
	if (rc < 0) {
		if (rc == -ENOENT)
			log_msg(LOG_ERR,
				"no AWS credentials: tried the environment, "
				"the shared credentials file, web identity, "
				"container credentials and instance "
				"metadata; set anonymous = true in [source] "
				"for a public bucket");
		free(p->region);
		free(p);
		return rc == -ENOMEM ? rc : -EACCES;
	}
	log_msg(LOG_INFO, "AWS credentials from %s (key id %.4s...)%s",
		source_names[p->source], c->access_key,
		c->expires ? ", temporary" : "");
	p->cur = c;
	objstore_worker_init(&p->w, CLOCK_REALTIME);
	if (c->expires != 0 &&
	    objstore_worker_start(&p->w, refresh_main, p) < 0) {
		log_msg(LOG_ERR, "cannot start the credentials "
				 "refresh thread");
		s3_creds_provider_free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void s3_creds_provider_free(struct s3_creds_provider *p)
{
	if (p == NULL)
		return;
	objstore_worker_fini(&p->w);
	s3_creds_put(p->cur);
	free(p->region);
	free(p);
}
