/*
 * s3_creds_source: the AWS credential chain (s3_creds.h gives the order)
 * and the provider that runs it. Each source (the environment, the shared
 * credentials file, STS web identity, the container endpoint, EC2
 * instance metadata) returns -ENOENT when it is not configured here, so
 * the chain tries the next, and logs its own failure once. The provider
 * resolves the chain once at open; the source that answered is remembered
 * and asked again by the refresh thread, so a refresh never switches to a
 * different identity. The credentials and the documents they come in are
 * s3_creds.c's: this file calls it, never the other way.
 */
#include "backends/s3_creds_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "backends/http.h"
#include "backends/objstore.h"
#include "backends/s3_creds.h"
#include "backends/s3_sign.h"
#include "backends/s3_xml.h"
#include "util/log.h"
#include "util/str.h"

#define CREDS_FILE_MAX (1024 * 1024)
#define CREDS_REFRESH_AHEAD_S 300

/* The chain's sources, in the order they are asked (s3_creds.h). */
enum s3_creds_source {
	CREDS_ENV = 0,
	CREDS_PROFILE,
	CREDS_WEB_IDENTITY,
	CREDS_CONTAINER,
	CREDS_IMDS,
};

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

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Reads a whole small file into a NUL-terminated buffer. */
static int read_file(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (f == NULL)
		return -errno;
	buf = malloc(CREDS_FILE_MAX + 1);
	if (buf == NULL) {
		fclose(f);
		return -ENOMEM;
	}
	n = fread(buf, 1, CREDS_FILE_MAX, f);
	if (ferror(f) || !feof(f)) {
		int rc = ferror(f) ? -EIO : -EFBIG;

		fclose(f);
		free(buf);
		return rc;
	}
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static int from_env(struct s3_creds **out)
{
	const char *ak = env("AWS_ACCESS_KEY_ID");
	const char *sk = env("AWS_SECRET_ACCESS_KEY");

	if (ak == NULL || sk == NULL)
		return -ENOENT;
	*out = s3_creds_new(ak, sk, env("AWS_SESSION_TOKEN"), 0);
	return *out ? 0 : -ENOMEM;
}

static int from_profile(struct s3_creds **out)
{
	const char *explicit_profile = env("AWS_PROFILE");
	const char *profile = explicit_profile ? explicit_profile
			      : env("AWS_DEFAULT_PROFILE")
				      ? env("AWS_DEFAULT_PROFILE")
				      : "default";
	const char *file = env("AWS_SHARED_CREDENTIALS_FILE");
	char *path = NULL, *text = NULL;
	bool no_file;
	size_t len;
	int rc;

	if (file != NULL) {
		path = strdup(file);
	} else if (env("HOME") != NULL) {
		if (asprintf(&path, "%s/.aws/credentials", env("HOME")) < 0)
			path = NULL;
	} else {
		if (explicit_profile == NULL)
			return -ENOENT;
		log_msg(LOG_ERR,
			"AWS_PROFILE=%s: no credentials file to look in "
			"(neither AWS_SHARED_CREDENTIALS_FILE nor HOME is "
			"set)",
			profile);
		return -EACCES;
	}
	if (path == NULL)
		return -ENOMEM;
	rc = read_file(path, &text, &len);
	no_file = rc == -ENOENT;
	if (rc == 0) {
		rc = s3_creds_parse_ini(text, len, profile, out);
		if (rc == -EINVAL)
			log_msg(LOG_ERR,
				"%s: profile [%s] lacks aws_access_key_id or "
				"aws_secret_access_key",
				path, profile);
	}
	/* Name only a file that was read: a message pointing at a file
	 * that does not exist sends the reader looking in the wrong
	 * place. */
	if (rc == -ENOENT && explicit_profile != NULL && no_file) {
		log_msg(LOG_ERR,
			"AWS_PROFILE=%s: no credentials file to look in (%s "
			"does not exist)",
			profile, path);
		rc = -EACCES;
	} else if (rc == -ENOENT && explicit_profile != NULL) {
		log_msg(LOG_ERR, "AWS_PROFILE=%s: no such profile in %s",
			profile, path);
		rc = -EACCES;
	} else if (rc == -EINVAL) {
		rc = -EACCES;
	} else if (rc < 0 && rc != -ENOENT && rc != -ENOMEM) {
		log_msg(LOG_ERR, "cannot read %s: %s", path, strerror(-rc));
		rc = -EACCES;
	}
	if (text != NULL) {
		explicit_bzero(text, len);
		free(text);
	}
	free(path);
	return rc;
}

static int form_add(FILE *f, const char *name, const char *value, int first)
{
	char *v = s3_uri_encode(value, strlen(value), 0);

	if (v == NULL)
		return -ENOMEM;
	fprintf(f, "%s%s=%s", first ? "" : "&", name, v);
	free(v);
	return 0;
}

static int from_web_identity(const char *region, struct http_pool *http,
			     struct s3_creds **out)
{
	const char *token_file = env("AWS_WEB_IDENTITY_TOKEN_FILE");
	const char *role = env("AWS_ROLE_ARN");
	const char *session = env("AWS_ROLE_SESSION_NAME");
	const char *endpoint = env("AWS_ENDPOINT_URL_STS");
	char *token = NULL, *body = NULL, *url = NULL, session_buf[64];
	size_t token_len, body_len = 0;
	struct http_request req = { 0 };
	struct http_response resp = { 0 };
	struct s3_xml_sts sts;
	char code[128], msg[256];
	FILE *f;
	int rc;

	if (token_file == NULL || role == NULL)
		return -ENOENT;
	rc = read_file(token_file, &token, &token_len);
	if (rc < 0) {
		log_msg(LOG_ERR, "AWS_WEB_IDENTITY_TOKEN_FILE %s: %s",
			token_file, strerror(-rc));
		return -EACCES;
	}
	while (token_len > 0 &&
	       (token[token_len - 1] == '\n' || token[token_len - 1] == '\r'))
		token[--token_len] = '\0';
	if (session == NULL) {
		snprintf(session_buf, sizeof(session_buf), "shardfs-%ld",
			 (long)time(NULL));
		session = session_buf;
	}
	/* The form's fields in name order, like every AWS query API. */
	f = open_memstream(&body, &body_len);
	if (f == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	rc = form_add(f, "Action", "AssumeRoleWithWebIdentity", 1);
	if (rc == 0)
		rc = form_add(f, "RoleArn", role, 0);
	if (rc == 0)
		rc = form_add(f, "RoleSessionName", session, 0);
	if (rc == 0)
		rc = form_add(f, "Version", "2011-06-15", 0);
	if (rc == 0)
		rc = form_add(f, "WebIdentityToken", token, 0);
	if (fclose(f) != 0 && rc == 0)
		rc = -ENOMEM;
	if (rc < 0)
		goto out;
	if (endpoint != NULL)
		rc = asprintf(&url, "%s", endpoint);
	else
		rc = asprintf(&url, "https://sts.%s.amazonaws.com/", region);
	if (rc < 0) {
		url = NULL;
		rc = -ENOMEM;
		goto out;
	}
	req.method = "POST";
	req.url = url;
	req.what = "STS AssumeRoleWithWebIdentity";
	req.body = body;
	req.body_len = body_len;
	req.max_body = 1024 * 1024;
	req.retries = -1;
	rc = http_perform(http, &req, &resp);
	if (rc < 0) {
		rc = -EACCES;
		goto out;
	}
	if (resp.status != 200) {
		s3_xml_error_parse(resp.body, resp.body_len, code, sizeof(code),
				   msg, sizeof(msg));
		log_msg(LOG_ERR,
			"STS AssumeRoleWithWebIdentity for %s: HTTP %ld %s %s",
			role, resp.status, code, msg);
		rc = -EACCES;
		goto out;
	}
	rc = s3_xml_sts_parse(resp.body, resp.body_len, &sts);
	if (rc < 0) {
		log_msg(LOG_ERR,
			"STS AssumeRoleWithWebIdentity for %s: "
			"malformed answer",
			role);
		rc = -EACCES;
		goto out;
	}
	*out = s3_creds_new(sts.access_key, sts.secret_key, sts.session_token,
			    s3_creds_parse_expiry(sts.expiration) > 0
				    ? s3_creds_parse_expiry(sts.expiration)
				    : 0);
	rc = *out ? 0 : -ENOMEM;
	s3_xml_sts_fini(&sts);
out:
	http_response_fini(&resp);
	if (body != NULL) {
		explicit_bzero(body, body_len);
		free(body);
	}
	if (token != NULL) {
		explicit_bzero(token, token_len);
		free(token);
	}
	free(url);
	return rc;
}

struct auth_header {
	const char *name;
	const char *value;
};

static int add_header(void *arg, struct curl_slist **headers)
{
	const struct auth_header *h = arg;

	if (h == NULL || h->value == NULL)
		return 0;
	return objstore_header(headers, "%s: %s", h->name, h->value);
}

/* GETs url (with one optional header) and returns the 200 body. */
static int source_get(struct http_pool *http, const char *method,
		      const char *url, const char *what,
		      const struct auth_header *h, unsigned connect_ms,
		      int retries, struct http_response *resp)
{
	struct http_request req = {
		.method = method,
		.url = url,
		.what = what,
		.prepare = add_header,
		.prepare_arg = (void *)h,
		.max_body = 1024 * 1024,
		.connect_timeout_ms = connect_ms,
		.total_timeout_ms = connect_ms ? 4 * connect_ms : 0,
		.retries = retries,
	};
	int rc = http_perform(http, &req, resp);

	if (rc < 0)
		return rc;
	if (resp->status != 200) {
		log_msg(LOG_ERR, "%s: HTTP %ld", what, resp->status);
		return -EACCES;
	}
	return 0;
}

/* Plain http is only acceptable to hosts that cannot be on the network:
 * loopback and the link-local ECS/EKS agents (the SDKs' rule). */
static int container_url_ok(const char *url)
{
	static const char *const ok[] = {
		"http://127.",
		"http://localhost:",
		"http://localhost/",
		"http://[::1]",
		"http://169.254.170.2/",
		"http://169.254.170.2:",
		"http://169.254.170.23/",
		"http://169.254.170.23:",
	};
	size_t i;

	if (strncasecmp(url, "https://", 8) == 0)
		return 1;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strncasecmp(url, ok[i], strlen(ok[i])) == 0)
			return 1;
	return 0;
}

static int from_container(struct http_pool *http, struct s3_creds **out)
{
	const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *token_file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
	struct auth_header h = { "Authorization",
				 env("AWS_CONTAINER_AUTHORIZATION_TOKEN") };
	struct http_response resp = { 0 };
	char *url = NULL, *token = NULL;
	size_t token_len = 0;
	int rc;

	if (rel != NULL) {
		if (asprintf(&url, "http://169.254.170.2%s", rel) < 0)
			return -ENOMEM;
	} else if (full != NULL) {
		if (!container_url_ok(full)) {
			log_msg(LOG_ERR,
				"AWS_CONTAINER_CREDENTIALS_FULL_URI: plain "
				"http only to a loopback or the ECS/EKS "
				"address");
			return -EACCES;
		}
		url = strdup(full);
		if (url == NULL)
			return -ENOMEM;
	} else {
		return -ENOENT;
	}
	if (token_file != NULL) {
		rc = read_file(token_file, &token, &token_len);
		if (rc < 0) {
			log_msg(LOG_ERR,
				"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s: %s",
				token_file, strerror(-rc));
			rc = -EACCES;
			goto out;
		}
		while (token_len > 0 && (token[token_len - 1] == '\n' ||
					 token[token_len - 1] == '\r'))
			token[--token_len] = '\0';
		h.value = token;
	}
	rc = source_get(http, "GET", url, "container credentials", &h, 2000, 2,
			&resp);
	if (rc == 0) {
		rc = s3_creds_parse_json(resp.body, resp.body_len, out);
		if (rc == -EBADMSG)
			log_msg(LOG_ERR, "container credentials: malformed "
					 "answer");
	}
	if (rc < 0 && rc != -ENOMEM)
		rc = -EACCES;
out:
	http_response_fini(&resp);
	if (token != NULL) {
		explicit_bzero(token, token_len);
		free(token);
	}
	free(url);
	return rc;
}

static int from_imds(struct http_pool *http, int chosen, struct s3_creds **out)
{
	const char *disabled = env("AWS_EC2_METADATA_DISABLED");
	const char *base = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	struct http_response resp = { 0 };
	struct auth_header h = { "X-aws-ec2-metadata-token-ttl-seconds",
				 "21600" };
	char *url = NULL, *token = NULL, *role = NULL;
	size_t blen;
	int rc;

	if (disabled != NULL && strcasecmp(disabled, "true") == 0)
		return -ENOENT;
	if (base == NULL)
		base = "http://169.254.169.254";
	blen = strlen(base);
	while (blen > 0 && base[blen - 1] == '/')
		blen--;
	/* IMDSv2: a session token first. Off EC2 nothing answers; one
	 * short try keeps a laptop's failed chain quick. */
	if (asprintf(&url, "%.*s/latest/api/token", (int)blen, base) < 0)
		return -ENOMEM;
	rc = source_get(http, "PUT", url, "instance metadata token", &h, 1000,
			chosen ? 2 : 0, &resp);
	free(url);
	url = NULL;
	if (rc < 0)
		goto out;
	token = resp.body ? strdup(resp.body) : NULL;
	http_response_fini(&resp);
	if (token == NULL) {
		rc = -EACCES;
		goto out;
	}
	h.name = "X-aws-ec2-metadata-token";
	h.value = token;
	if (asprintf(&url, "%.*s/latest/meta-data/iam/security-credentials/",
		     (int)blen, base) < 0) {
		url = NULL;
		rc = -ENOMEM;
		goto out;
	}
	rc = source_get(http, "GET", url, "instance metadata role", &h, 1000, 2,
			&resp);
	free(url);
	url = NULL;
	if (rc < 0)
		goto out;
	if (resp.body == NULL || resp.body[0] == '\0') {
		log_msg(LOG_ERR, "instance metadata: no IAM role attached");
		rc = -EACCES;
		goto out;
	}
	role = strndup(resp.body, strcspn(resp.body, "\r\n"));
	http_response_fini(&resp);
	if (role == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (asprintf(&url, "%.*s/latest/meta-data/iam/security-credentials/%s",
		     (int)blen, base, role) < 0) {
		url = NULL;
		rc = -ENOMEM;
		goto out;
	}
	rc = source_get(http, "GET", url, "instance metadata credentials", &h,
			1000, 2, &resp);
	if (rc == 0) {
		rc = s3_creds_parse_json(resp.body, resp.body_len, out);
		if (rc == -EBADMSG)
			log_msg(LOG_ERR, "instance metadata credentials: "
					 "malformed answer");
	}
out:
	if (rc < 0 && rc != -ENOMEM)
		rc = chosen ? -EACCES : -ENOENT;
	http_response_fini(&resp);
	if (token != NULL) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	free(role);
	free(url);
	return rc;
}

/* Asks source s for credentials (region for STS, http for the sources
 * that are asked over HTTP; chosen: s already answered once, so it is
 * retried and its failure is an error rather than "not here"). Returns 0
 * with a new reference in *out; -ENOENT when s is not configured here
 * (try the next); -EACCES when it is but gave none (logged once); or
 * -ENOMEM. */
static int from_source(enum s3_creds_source s, const char *region,
		       struct http_pool *http, int chosen,
		       struct s3_creds **out)
{
	switch (s) {
	case CREDS_ENV:
		return from_env(out);
	case CREDS_PROFILE:
		return from_profile(out);
	case CREDS_WEB_IDENTITY:
		return from_web_identity(region, http, out);
	case CREDS_CONTAINER:
		return from_container(http, out);
	case CREDS_IMDS:
		return from_imds(http, chosen, out);
	}
	return -ENOENT;
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
		rc = from_source(p->source, p->region, p->http, 1, &c);
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
		rc = from_source((enum s3_creds_source)s, p->region, p->http, 0,
				 &c);
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
