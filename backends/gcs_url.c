/*
 * gcs_url: the pure parts of the GCS backend that build requests (gcs.h):
 * source URLs, the endpoint, object paths, the listing query, and the
 * error map. No I/O.
 */
#include "backends/gcs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/http.h"
#include "backends/objstore.h"

static int gcs_bucket_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_' || c == '.';
}

/* 3 to 222 of a-z 0-9 - _ ., starting and ending with a letter or
 * digit. */
static int gcs_bucket_ok(const char *b, size_t len)
{
	size_t i;

	if (len < 3 || len > 222)
		return 0;
	for (i = 0; i < len; i++)
		if (!gcs_bucket_char(b[i]))
			return 0;
	return b[0] != '-' && b[0] != '_' && b[0] != '.' && b[len - 1] != '-' &&
	       b[len - 1] != '_' && b[len - 1] != '.';
}

int gcs_url_parse(const char *url, char **bucket, char **prefix)
{
	return objstore_url_split(url, "gs://", gcs_bucket_ok, bucket, prefix);
}

void gcs_endpoint_fini(struct gcs_endpoint *ep)
{
	free(ep->base);
	memset(ep, 0, sizeof(*ep));
}

/* "http(s)://authority[/]" -> malloc'd "scheme://authority" in *base. */
static int gcs_base_url(const char *s, char **base)
{
	const char *auth, *end, *p;

	if (strncasecmp(s, "http://", 7) == 0)
		auth = s + 7;
	else if (strncasecmp(s, "https://", 8) == 0)
		auth = s + 8;
	else
		return -EINVAL;
	end = auth + strcspn(auth, "/?#");
	if (end == auth || (end[0] != '\0' && strcmp(end, "/") != 0))
		return -EINVAL;
	if (memchr(auth, '@', (size_t)(end - auth)) != NULL)
		return -EINVAL; /* credentials never go in a URL */
	for (p = auth; p < end; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return -EINVAL;
	*base = strndup(s, (size_t)(end - s));
	return *base == NULL ? -ENOMEM : 0;
}

int gcs_endpoint_resolve(const char *endpoint, const char *emulator_host,
			 struct gcs_endpoint *out)
{
	struct gcs_endpoint ep = { 0 };
	char *url = NULL;
	int rc;

	ep.emulator = emulator_host != NULL && emulator_host[0] != '\0';
	if (endpoint != NULL && endpoint[0] != '\0') {
		rc = gcs_base_url(endpoint, &ep.base);
	} else if (ep.emulator) {
		/* "host:port" as the Go and Python clients take it, or a
		 * URL as the Node and Java ones do. */
		if (strstr(emulator_host, "://") == NULL) {
			if (asprintf(&url, "http://%s", emulator_host) < 0)
				return -ENOMEM;
			emulator_host = url;
		}
		rc = gcs_base_url(emulator_host, &ep.base);
	} else {
		rc = gcs_base_url(GCS_DEFAULT_ENDPOINT, &ep.base);
	}
	free(url);
	if (rc < 0)
		return rc;
	*out = ep;
	return 0;
}

char *gcs_encode(const char *s, size_t len)
{
	return objstore_uri_encode(s, len, 0);
}

char *gcs_object_path(const char *bucket, const char *prefix, const char *key,
		      size_t key_len)
{
	size_t plen = strlen(prefix);
	char *full = malloc(plen + key_len + 1), *b, *n = NULL, *path = NULL;

	if (full == NULL)
		return NULL;
	memcpy(full, prefix, plen);
	memcpy(full + plen, key, key_len);
	full[plen + key_len] = '\0';
	b = gcs_encode(bucket, strlen(bucket));
	if (b != NULL)
		n = gcs_encode(full, plen + key_len);
	if (n != NULL && asprintf(&path, "/storage/v1/b/%s/o/%s", b, n) < 0)
		path = NULL;
	free(n);
	free(b);
	free(full);
	return path;
}

char *gcs_list_query(const char *prefix, const char *token,
		     unsigned max_results)
{
	static const char fields[] =
		"items(name,size,generation,updated,crc32c),nextPageToken";
	char *f = gcs_encode(fields, strlen(fields));
	char *p = gcs_encode(prefix, strlen(prefix));
	char *t = token ? gcs_encode(token, strlen(token)) : NULL;
	char *q = NULL;

	if (f != NULL && p != NULL && (token == NULL || t != NULL) &&
	    asprintf(&q, "fields=%s&maxResults=%u%s%s&prefix=%s", f,
		     max_results, t ? "&pageToken=" : "", t ? t : "", p) < 0)
		q = NULL;
	free(f);
	free(p);
	free(t);
	return q;
}

int gcs_error_errno(long status, const char *reason)
{
	static const struct objstore_code reasons[] = {
		{ "notFound", -ENOENT },
		{ "NOT_FOUND", -ENOENT },
		{ "forbidden", -EACCES },
		{ "accessDenied", -EACCES },
		{ "authError", -EACCES },
		{ "required", -EACCES },
		{ "unauthorized", -EACCES },
		{ "userProjectMissing", -EACCES },
		{ "PERMISSION_DENIED", -EACCES },
		{ "UNAUTHENTICATED", -EACCES },
		{ "conditionNotMet", -ESTALE },
		{ "FAILED_PRECONDITION", -ESTALE },
		{ "requestedRangeNotSatisfiable", -ERANGE },
		{ "rateLimitExceeded", -EIO },
		{ "backendError", -EIO },
		{ "internalError", -EIO },
	};

	return objstore_error_errno(status, reason, reasons,
				    sizeof(reasons) / sizeof(reasons[0]));
}

/* Whether host[0..len) is a literal loopback address or "localhost".
 * Only literal forms: a name (say 127.0.0.1.nip.io) resolves wherever
 * its owner likes, and 0x7f.1 or 2130706433 are not worth the doubt. */
static bool gcs_host_loopback(const char *host, size_t len)
{
	char h[64];
	struct in6_addr a6;
	struct in_addr a4;

	if (len == 0 || len >= sizeof(h))
		return false;
	memcpy(h, host, len);
	h[len] = '\0';
	if (strcasecmp(h, "localhost") == 0)
		return true;
	if (h[0] == '[') {
		if (h[len - 1] != ']')
			return false;
		h[len - 1] = '\0';
		return inet_pton(AF_INET6, h + 1, &a6) == 1 &&
		       IN6_IS_ADDR_LOOPBACK(&a6);
	}
	return inet_pton(AF_INET, h, &a4) == 1 &&
	       (ntohl(a4.s_addr) >> 24) == 127;
}

bool gcs_endpoint_token_ok(const char *url)
{
	const char *auth, *end, *port;

	if (strncasecmp(url, "https://", 8) == 0)
		return true;
	if (strncasecmp(url, "http://", 7) != 0)
		return false;
	auth = url + 7;
	end = auth + strcspn(auth, "/?#");
	/* User info would make the host whatever follows the '@'; it is
	 * never needed here, so any '@' is refused. */
	if (memchr(auth, '@', (size_t)(end - auth)) != NULL)
		return false;
	if (auth[0] == '[') {
		port = memchr(auth, ']', (size_t)(end - auth));
		if (port == NULL)
			return false;
		port++;
	} else {
		port = memchr(auth, ':', (size_t)(end - auth));
		if (port == NULL)
			port = end;
	}
	if (port != end) {
		const char *p;

		if (port[0] != ':' || port + 1 == end)
			return false;
		for (p = port + 1; p < end; p++)
			if (*p < '0' || *p > '9')
				return false;
	}
	return gcs_host_loopback(auth, (size_t)(port - auth));
}
