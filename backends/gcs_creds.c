/*
 * gcs_creds: see gcs_creds.h. The chain is resolved once at open; the
 * source that answered is remembered and asked again by the refresh
 * thread, so a refresh never switches to a different identity. A key file
 * is parsed once and kept in memory (the private key included): a refresh
 * does not depend on the file staying where it was.
 *
 * The metadata server is probed last and briefly: off Google Cloud nothing
 * answers at metadata.google.internal, and a mount must learn that within
 * about GCS_MD_PROBE_DEADLINE_MS, not a TCP timeout. Once it answered, its
 * refreshes get the usual retries.
 */
#include "backends/gcs_creds.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/gcs_jwt.h"
#include "backends/objstore.h"
#include "backends/http.h"
#include "util/log.h"

#define GCS_REFRESH_AHEAD_S 300
/* The metadata probe at mount: one attempt, 1 s to connect (DNS
 * included), 2 s in all. A refresh of a chosen metadata source: 2 retries
 * within 10 s. */
#define GCS_MD_CONNECT_MS 1000
#define GCS_MD_PROBE_DEADLINE_MS 2000
#define GCS_MD_REFRESH_DEADLINE_MS 10000
/* The token endpoint: 2 retries within 10 s. This also bounds how long
 * stopping the provider can wait for a refresh in flight. */
#define GCS_TOKEN_DEADLINE_MS 10000

enum gcs_creds_source {
	GCS_SRC_ENV_FILE = 0, /* GOOGLE_APPLICATION_CREDENTIALS */
	GCS_SRC_GCLOUD_FILE,  /* gcloud's application_default_credentials */
	GCS_SRC_METADATA,     /* GCE/GKE metadata server */
};

struct gcs_creds_provider {
	struct http_pool *http; /* borrowed */
	enum gcs_creds_source source;
	struct gcs_jwt_key *key; /* the file's key, or NULL: metadata */
	char *what;		 /* names the source in logs; no secret */
	bool token_no_proxy;	 /* the token_uri is loopback: no proxy */
	/* The refresh thread; its lock protects cur, and its cond waits
	 * are CLOCK_MONOTONIC seconds. */
	struct objstore_worker w;
	struct gcs_token *cur; /* protected by w.lock; never NULL */
};

struct gcs_token *gcs_token_new(const char *access_token, int64_t expires)
{
	struct gcs_token *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->access_token = strdup(access_token);
	if (t->access_token == NULL) {
		free(t);
		return NULL;
	}
	t->expires = expires;
	t->refs = 1;
	return t;
}

void gcs_token_put(struct gcs_token *t)
{
	if (t == NULL || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	objstore_wipe_free(t->access_token);
	free(t);
}

struct gcs_token *gcs_creds_get(struct gcs_creds_provider *p)
{
	struct gcs_token *t;

	pthread_mutex_lock(&p->w.lock);
	t = p->cur;
	__atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&p->w.lock);
	return t;
}

static const char *gcs_creds_env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Reads a whole small regular file. Opened non-blocking and checked
 * before any read: a FIFO, a device or a directory named as a credential
 * file must fail at once, not block the mount. Returns 0, -errno of
 * open/read, -EFBIG, -EINVAL (not a regular file). */
static int gcs_creds_read_small_file(const char *path, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	ssize_t r;
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0)
		rc = -errno;
	else if (!S_ISREG(st.st_mode))
		rc = -EINVAL;
	else if ((buf = malloc(GCS_JWT_FILE_MAX + 1)) == NULL)
		rc = -ENOMEM;
	while (rc == 0 && n <= GCS_JWT_FILE_MAX) {
		r = read(fd, buf + n, GCS_JWT_FILE_MAX + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = -errno;
		else if (r == 0)
			break;
		else
			n += (size_t)r;
	}
	if (rc == 0 && n > GCS_JWT_FILE_MAX)
		rc = -EFBIG;
	close(fd);
	if (rc < 0) {
		if (buf != NULL)
			explicit_bzero(buf, n);
		free(buf);
		return rc;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* localhost, a literal 127.0.0.0/8 address or [::1], as CURLU gives the
 * host (IPv6 in brackets). A DNS name such as 127.evil.example is not. */
static bool gcs_creds_loopback_host(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;
	char buf[64];
	size_t n = strlen(host);

	if (strcasecmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (n < 3 || n - 2 >= sizeof(buf) || host[0] != '[' ||
	    host[n - 1] != ']')
		return false;
	memcpy(buf, host + 1, n - 2);
	buf[n - 2] = '\0';
	return inet_pton(AF_INET6, buf, &a6) == 1 &&
	       memcmp(&a6, &in6addr_loopback, sizeof(a6)) == 0;
}

/* Plain http carries the assertion or the refresh token in clear: only
 * to a loopback host (a test's or a local proxy's endpoint). The URL is
 * parsed as libcurl will parse it for the request, so user info
 * (http://127.0.0.1@evil.example/) cannot hide the real host; user info
 * is refused outright. Returns 1 (ok; *loopback set), 0 (refused),
 * -ENOMEM. */
static int gcs_creds_token_uri_ok(const char *uri, bool *loopback)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *part = NULL;
	int ok = 0;

	if (u == NULL)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, uri, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
		goto out;
	if (curl_url_get(u, CURLUPART_USER, &part, 0) != CURLUE_NO_USER ||
	    curl_url_get(u, CURLUPART_PASSWORD, &part, 0) !=
		    CURLUE_NO_PASSWORD ||
	    curl_url_get(u, CURLUPART_OPTIONS, &part, 0) != CURLUE_NO_OPTIONS)
		goto out;
	*loopback = gcs_creds_loopback_host(host);
	ok = strcasecmp(scheme, "https") == 0 ||
	     (strcasecmp(scheme, "http") == 0 && *loopback);
out:
	curl_free(part);
	curl_free(host);
	curl_free(scheme);
	curl_url_cleanup(u);
	return ok;
}

/* Parses a token reply; logs why it is unusable, naming the source. */
static int gcs_creds_token_from_reply(const struct http_response *resp,
				      const char *what, struct gcs_token **out)
{
	char *tok = NULL, why[128];
	int64_t expires;
	int rc;

	rc = gcs_jwt_token_parse(resp->body ? resp->body : "", resp->body_len,
				 (int64_t)time(NULL), &tok, &expires, why,
				 sizeof(why));
	if (rc == -EBADMSG) {
		log_msg(LOG_ERR, "gcs: %s: unusable token reply: %s", what,
			why);
		return -EACCES;
	}
	if (rc < 0)
		return rc;
	*out = gcs_token_new(tok, expires);
	objstore_wipe_free(tok);
	return *out ? 0 : -ENOMEM;
}

/* The OAuth2 error code of a non-2xx token reply ({"error": "..."}),
 * which names the problem (invalid_grant, ...) without a secret. */
static void gcs_creds_oauth_error(const struct http_response *resp, char *buf,
				  size_t cap)
{
	const char *p = resp->body ? strstr(resp->body, "\"error\"") : NULL;
	size_t n = 0;

	buf[0] = '\0';
	if (p == NULL)
		return;
	p = strchr(p + 7, '"');
	if (p == NULL)
		return;
	p++;
	while (n + 1 < cap && p[n] != '\0' && p[n] != '"' &&
	       strchr("abcdefghijklmnopqrstuvwxyz_", p[n]) != NULL) {
		buf[n] = p[n];
		n++;
	}
	buf[n] = '\0';
}

static int gcs_creds_add_form_header(void *arg, struct curl_slist **headers)
{
	struct curl_slist *n;

	(void)arg;
	n = curl_slist_append(*headers, "Content-Type: "
					"application/x-www-form-urlencoded");
	if (n == NULL)
		return -ENOMEM;
	*headers = n;
	return 0;
}

/* Exchanges a key file's grant at its token_uri. */
static int gcs_creds_from_key(struct gcs_creds_provider *p,
			      struct gcs_token **out)
{
	struct http_request req = { 0 };
	struct http_response resp = { 0 };
	char *body = NULL, code[48];
	int rc;

	rc = gcs_jwt_token_request(p->key, (int64_t)time(NULL), &body);
	if (rc < 0) {
		if (rc != -ENOMEM)
			log_msg(LOG_ERR, "gcs: %s: cannot sign the JWT",
				p->what);
		return rc == -ENOMEM ? rc : -EACCES;
	}
	req.method = "POST";
	req.url = p->key->token_uri;
	req.what = "gcs token endpoint";
	req.body = body;
	req.body_len = strlen(body);
	req.prepare = gcs_creds_add_form_header;
	req.max_body = 1024 * 1024;
	req.deadline_ms = GCS_TOKEN_DEADLINE_MS;
	req.retries = 2;
	/* A loopback endpoint is reached directly: a proxy of the
	 * machine would see the grant in clear. */
	req.no_proxy = p->token_no_proxy;
	req.quiet = true; /* logged below, once */
	rc = http_perform(p->http, &req, &resp);
	objstore_wipe_free(body);
	if (rc < 0) {
		log_msg(LOG_ERR,
			"gcs: %s: the token endpoint did not answer (%s)",
			p->what, resp.why[0] ? resp.why : strerror(-rc));
		rc = rc == -ENOMEM ? rc : -EACCES;
	} else if (resp.status != 200) {
		gcs_creds_oauth_error(&resp, code, sizeof(code));
		log_msg(LOG_ERR,
			"gcs: %s: the token endpoint said HTTP %ld%s%s",
			p->what, resp.status, code[0] ? " " : "", code);
		rc = -EACCES;
	} else {
		rc = gcs_creds_token_from_reply(&resp, p->what, out);
	}
	if (resp.body != NULL)
		explicit_bzero(resp.body, resp.body_len);
	http_response_fini(&resp);
	return rc;
}

static int gcs_creds_add_metadata_flavor(void *arg, struct curl_slist **headers)
{
	struct curl_slist *n;

	(void)arg;
	n = curl_slist_append(*headers, "Metadata-Flavor: Google");
	if (n == NULL)
		return -ENOMEM;
	*headers = n;
	return 0;
}

/* Notes whether the reply says Metadata-Flavor: Google, as every reply of
 * a real metadata server does: a 200 without it is some other server (a
 * captive portal, a proxy) answering for metadata.google.internal. */
static void gcs_creds_note_flavor(void *arg, const char *name, size_t name_len,
				  const char *value, size_t value_len)
{
	int *flavor = arg;

	if (name == NULL)
		*flavor = 0;
	else if (name_len == 15 &&
		 strncasecmp(name, "Metadata-Flavor", 15) == 0)
		*flavor = value_len == 6 && strncmp(value, "Google", 6) == 0;
}

/* The default service account's token from the metadata server. chosen:
 * it answered before (a refresh), so it gets retries and every failure is
 * -EACCES; otherwise no answer (or one without Metadata-Flavor) means "not
 * on Google Cloud": -ENOENT, while a metadata server that refuses a token
 * is -EACCES. */
static int gcs_creds_from_metadata(struct gcs_creds_provider *p, int chosen,
				   struct gcs_token **out)
{
	const char *host = gcs_creds_env("GCE_METADATA_HOST");
	struct http_request req = { 0 };
	struct http_response resp = { 0 };
	char *url = NULL;
	int rc, flavor = 0;

	if (host == NULL)
		host = "metadata.google.internal";
	if (strpbrk(host, "/?#@ ") != NULL) {
		log_msg(LOG_ERR, "gcs: GCE_METADATA_HOST must be host[:port]");
		return -EACCES;
	}
	if (asprintf(&url,
		     "http://%s/computeMetadata/v1/instance/service-accounts/"
		     "default/token",
		     host) < 0)
		return -ENOMEM;
	req.method = "GET";
	req.url = url;
	req.what = "gcs metadata server";
	req.prepare = gcs_creds_add_metadata_flavor;
	req.on_header = gcs_creds_note_flavor;
	req.header_arg = &flavor;
	req.max_body = 1024 * 1024;
	req.connect_timeout_ms = GCS_MD_CONNECT_MS;
	req.total_timeout_ms = GCS_MD_PROBE_DEADLINE_MS;
	req.deadline_ms =
		chosen ? GCS_MD_REFRESH_DEADLINE_MS : GCS_MD_PROBE_DEADLINE_MS;
	req.retries = chosen ? 2 : 0;
	/* The metadata server is link-local by definition: through a proxy
	 * its answer would be the proxy's idea of this machine's identity,
	 * and the token would cross it in clear. */
	req.no_proxy = true;
	req.quiet = true; /* logged below, once */
	rc = http_perform(p->http, &req, &resp);
	free(url);
	if (rc == 0 && !flavor) {
		log_msg(chosen ? LOG_ERR : LOG_WARNING,
			"gcs: %s answered without Metadata-Flavor: Google: "
			"not a metadata server",
			host);
		rc = -ENOENT;
	} else if (rc == 0 && resp.status != 200) {
		/* A metadata server that answers but will not give a
		 * token: an error, not "not on Google Cloud". */
		log_msg(LOG_ERR,
			"gcs: the metadata server at %s said HTTP %ld%s", host,
			resp.status,
			resp.status == 404 ? " (no service account on this "
					     "instance?)"
					   : "");
		rc = -EACCES;
	} else if (rc == 0) {
		rc = gcs_creds_token_from_reply(&resp, p->what, out);
	} else if (rc != -ENOMEM) {
		log_msg(chosen ? LOG_ERR : LOG_INFO,
			"gcs: no metadata server answered at %s (%s)", host,
			resp.why[0] ? resp.why : strerror(-rc));
		rc = -ENOENT;
	}
	if (resp.body != NULL)
		explicit_bzero(resp.body, resp.body_len);
	http_response_fini(&resp);
	if (rc == -ENOENT && chosen)
		rc = -EACCES;
	return rc;
}

/* Loads the credential file at path into p->key and names the source.
 * Returns 0, -ENOENT when the file does not exist and may be absent
 * (gcloud's), -EACCES (logged, naming the file and what is wrong),
 * -ENOMEM. */
static int gcs_creds_load_file(struct gcs_creds_provider *p, const char *path,
			       const char *label, int may_be_absent)
{
	char *text = NULL, why[160];
	size_t len = 0;
	int rc;

	rc = gcs_creds_read_small_file(path, &text, &len);
	if (rc == -ENOENT && may_be_absent)
		return -ENOENT;
	if (rc == -ENOMEM)
		return rc;
	if (rc == -EFBIG) {
		log_msg(LOG_ERR,
			"gcs: %s %s: larger than %d bytes: not a "
			"credential file",
			label, path, GCS_JWT_FILE_MAX);
		return -EACCES;
	}
	if (rc == -EINVAL) {
		log_msg(LOG_ERR, "gcs: %s %s: not a regular file", label, path);
		return -EACCES;
	}
	if (rc < 0) {
		log_msg(LOG_ERR, "gcs: %s %s: %s", label, path, strerror(-rc));
		return -EACCES;
	}
	rc = gcs_jwt_key_parse(text, len, &p->key, why, sizeof(why));
	explicit_bzero(text, len);
	free(text);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		log_msg(LOG_ERR, "gcs: %s %s: %s", label, path, why);
		return -EACCES;
	}
	rc = gcs_creds_token_uri_ok(p->key->token_uri, &p->token_no_proxy);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		/* Never the value: it may hold user info. */
		log_msg(LOG_ERR,
			"gcs: %s %s: token_uri must be an https URL (plain "
			"http only to localhost, 127.0.0.0/8 or [::1]) without "
			"user info",
			label, path);
		return -EACCES;
	}
	if (p->key->type == GCS_JWT_SERVICE_ACCOUNT)
		rc = asprintf(&p->what, "service account key %s (%s)", path,
			      p->key->client_email);
	else
		rc = asprintf(&p->what, "authorized user credentials %s", path);
	if (rc < 0) {
		p->what = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* gcloud's ADC file: $CLOUDSDK_CONFIG, else ~/.config/gcloud. */
static int gcs_creds_gcloud_path(char **out)
{
	const char *dir = gcs_creds_env("CLOUDSDK_CONFIG");
	int rc;

	if (dir != NULL)
		rc = asprintf(out, "%s/application_default_credentials.json",
			      dir);
	else if (gcs_creds_env("HOME") != NULL)
		rc = asprintf(out,
			      "%s/.config/gcloud/"
			      "application_default_credentials.json",
			      gcs_creds_env("HOME"));
	else
		return -ENOENT;
	if (rc < 0) {
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Runs the chain: picks the first configured source and gets a token from
 * it. Returns 0 (p->source, p->key, p->what set), -EACCES (logged),
 * -ENOMEM. */
static int gcs_creds_resolve(struct gcs_creds_provider *p,
			     struct gcs_token **out)
{
	const char *named = gcs_creds_env("GOOGLE_APPLICATION_CREDENTIALS");
	char *path = NULL;
	int rc;

	if (named != NULL) {
		p->source = GCS_SRC_ENV_FILE;
		rc = gcs_creds_load_file(p, named,
					 "GOOGLE_APPLICATION_CREDENTIALS", 0);
		return rc < 0 ? rc : gcs_creds_from_key(p, out);
	}
	rc = gcs_creds_gcloud_path(&path);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0) {
		rc = gcs_creds_load_file(p, path, "gcloud's ADC file", 1);
		free(path);
		if (rc != -ENOENT) {
			p->source = GCS_SRC_GCLOUD_FILE;
			return rc < 0 ? rc : gcs_creds_from_key(p, out);
		}
	}
	p->source = GCS_SRC_METADATA;
	if (asprintf(&p->what, "the metadata server at %s",
		     gcs_creds_env("GCE_METADATA_HOST")
			     ? gcs_creds_env("GCE_METADATA_HOST")
			     : "metadata.google.internal") < 0) {
		p->what = NULL;
		return -ENOMEM;
	}
	rc = gcs_creds_from_metadata(p, 0, out);
	if (rc == -ENOENT) {
		log_msg(LOG_ERR,
			"gcs: no Google credentials: GOOGLE_APPLICATION_"
			"CREDENTIALS is not set, gcloud's ADC file is absent "
			"and no metadata server answered; set anonymous = "
			"true in [source] for a public bucket");
		rc = -EACCES;
	}
	return rc;
}

static int gcs_creds_refetch(struct gcs_creds_provider *p,
			     struct gcs_token **out)
{
	return p->source == GCS_SRC_METADATA
		       ? gcs_creds_from_metadata(p, 1, out)
		       : gcs_creds_from_key(p, out);
}

/* Seconds on CLOCK_MONOTONIC: refreshes are scheduled on it, so a step
 * of the wall clock (NTP, an admin) can neither delay a refresh past the
 * token's expiry nor fire a burst of them. Tokens keep expires in unix
 * seconds for reporting; only the delay is taken from it. */
static int64_t gcs_creds_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec;
}

/* Seconds from now until the refresh: 5 minutes ahead of expiry, or
 * halfway for short lifetimes. */
static int64_t gcs_creds_refresh_in(const struct gcs_token *t, int64_t now)
{
	int64_t left = t->expires - now;

	if (left <= 1)
		return 1;
	return left > 2 * GCS_REFRESH_AHEAD_S ? left - GCS_REFRESH_AHEAD_S
					      : left / 2;
}

/* The lock is held only to wait and to swap the token, never across the
 * network or a log line. */
static void *gcs_creds_refresh_main(void *arg)
{
	struct gcs_creds_provider *p = arg;
	unsigned failures = 0, retry_s;
	struct gcs_token *t, *old;
	int64_t when, valid;
	int rc, stop;

	pthread_setname_np(pthread_self(), "shardfs-gcscred");
	pthread_mutex_lock(&p->w.lock);
	when = gcs_creds_mono_s() + gcs_creds_refresh_in(p->cur, time(NULL));
	pthread_mutex_unlock(&p->w.lock);
	for (;;) {
		struct timespec ts = { .tv_sec = (time_t)when };

		pthread_mutex_lock(&p->w.lock);
		while (!p->w.stop && gcs_creds_mono_s() < when)
			if (pthread_cond_timedwait(&p->w.cond, &p->w.lock,
						   &ts) == ETIMEDOUT)
				break;
		stop = p->w.stop;
		pthread_mutex_unlock(&p->w.lock);
		if (stop)
			break;
		if (gcs_creds_mono_s() < when)
			continue;
		/* Readers keep the current token while the network works. */
		t = NULL;
		rc = gcs_creds_refetch(p, &t);
		if (rc == 0) {
			valid = t->expires - time(NULL);
			when = gcs_creds_mono_s() +
			       gcs_creds_refresh_in(t, time(NULL));
			pthread_mutex_lock(&p->w.lock);
			old = p->cur;
			p->cur = t;
			pthread_mutex_unlock(&p->w.lock);
			gcs_token_put(old);
			log_msg(LOG_INFO,
				"gcs: access token refreshed from %s, valid "
				"for %lld s",
				p->what, (long long)valid);
			failures = 0;
		} else {
			retry_s = objstore_refresh_retry_s(++failures);
			log_msg(LOG_WARNING,
				"gcs: access token refresh from %s failed; "
				"keeping the current token, retrying in %u s",
				p->what, retry_s);
			when = gcs_creds_mono_s() + retry_s;
		}
	}
	return NULL;
}

static void gcs_creds_provider_free_fields(struct gcs_creds_provider *p)
{
	gcs_jwt_key_free(p->key);
	free(p->what);
	free(p);
}

int gcs_creds_provider_new(struct http_pool *http,
			   struct gcs_creds_provider **out)
{
	struct gcs_creds_provider *p = calloc(1, sizeof(*p));
	struct gcs_token *t = NULL;
	int rc;

	if (p == NULL)
		return -ENOMEM;
	p->http = http;
	rc = gcs_creds_resolve(p, &t);
	if (rc < 0) {
		gcs_creds_provider_free_fields(p);
		return rc == -ENOMEM ? rc : -EACCES;
	}
	log_msg(LOG_INFO, "gcs: credentials from %s, token valid for %lld s",
		p->what, (long long)(t->expires - time(NULL)));
	p->cur = t;
	objstore_worker_init(&p->w, CLOCK_MONOTONIC);
	/* Every token expires, so there is always a refresh thread. */
	rc = objstore_worker_start(&p->w, gcs_creds_refresh_main, p);
	if (rc < 0) {
		log_msg(LOG_ERR, "gcs: cannot start the token refresh thread");
		gcs_creds_provider_free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void gcs_creds_provider_free(struct gcs_creds_provider *p)
{
	if (p == NULL)
		return;
	objstore_worker_fini(&p->w);
	gcs_token_put(p->cur);
	gcs_creds_provider_free_fields(p);
}
