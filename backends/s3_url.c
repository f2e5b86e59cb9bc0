/*
 * s3_url: the pure parts of the S3 backend that name things (s3.h): source
 * URLs and bucket names, the endpoint and addressing, object paths, the
 * listing query, and the error map. No I/O, no log (s3.c says what was
 * wrong), as gcs_url.c for GCS.
 */
#include "backends/s3.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/objstore.h"
#include "backends/s3_sign.h"

const char *s3_bucket_rule(const char *b, size_t len)
{
	char ip[16];
	struct in_addr a;
	size_t i;

	if (len < 3 || len > 63)
		return "must be 3 to 63 characters long";
	for (i = 0; i < len; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') ||
		      (b[i] >= '0' && b[i] <= '9') || b[i] == '-' ||
		      b[i] == '.'))
			return "may hold only lowercase letters, digits, '.' "
			       "and '-'";
	if (b[0] == '-' || b[0] == '.' || b[len - 1] == '-' ||
	    b[len - 1] == '.')
		return "must start and end with a letter or a digit";
	for (i = 1; i < len; i++)
		if (b[i] == '.' && b[i - 1] == '.')
			return "must not hold two dots in a row";
	if (len < sizeof(ip)) {
		memcpy(ip, b, len);
		ip[len] = '\0';
		if (inet_pton(AF_INET, ip, &a) == 1)
			return "must not be an IP address";
	}
	return NULL;
}

static int s3_bucket_ok(const char *b, size_t len)
{
	return s3_bucket_rule(b, len) == NULL;
}

int s3_url_parse(const char *url, char **bucket, char **prefix)
{
	return objstore_url_split(url, "s3://", s3_bucket_ok, bucket, prefix);
}

void s3_endpoint_fini(struct s3_endpoint *ep)
{
	free(ep->base);
	free(ep->host);
	free(ep->path_prefix);
	memset(ep, 0, sizeof(*ep));
}

static int dns_bucket(const char *b)
{
	size_t i, n = strlen(b);

	if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') ||
		      (b[i] >= '0' && b[i] <= '9') || b[i] == '-'))
			return 0;
	return 1;
}

static int aws_host(const char *host, size_t len)
{
	static const char *const suffixes[] = { ".amazonaws.com",
						".amazonaws.com.cn" };
	size_t i, n;

	for (i = 0; i < 2; i++) {
		n = strlen(suffixes[i]);
		if (len > n && strncasecmp(host + len - n, suffixes[i], n) == 0)
			return 1;
	}
	return 0;
}

int s3_endpoint_resolve(const char *endpoint, const char *bucket,
			const char *region, enum backend_addressing addressing,
			struct s3_endpoint *out)
{
	struct s3_endpoint ep = { 0 };
	const char *scheme_end, *auth, *auth_end, *host_end;
	char *deflt = NULL, *enc = NULL;
	size_t alen;
	int rc = -ENOMEM, is_aws;

	if (endpoint == NULL || endpoint[0] == '\0')
		endpoint = getenv("AWS_ENDPOINT_URL_S3");
	if (endpoint == NULL || endpoint[0] == '\0')
		endpoint = getenv("AWS_ENDPOINT_URL");
	if (endpoint == NULL || endpoint[0] == '\0') {
		if (asprintf(&deflt, "https://s3.%s.amazonaws.com", region) < 0)
			return -ENOMEM;
		endpoint = deflt;
	}
	scheme_end = strstr(endpoint, "://");
	if (scheme_end == NULL || !((scheme_end - endpoint == 4 &&
				     strncasecmp(endpoint, "http", 4) == 0) ||
				    (scheme_end - endpoint == 5 &&
				     strncasecmp(endpoint, "https", 5) == 0))) {
		rc = -EINVAL;
		goto out;
	}
	auth = scheme_end + 3;
	auth_end = auth + strcspn(auth, "/?#");
	/* Only a bare "/" may follow the authority. */
	if (auth_end == auth ||
	    (auth_end[0] != '\0' && strcmp(auth_end, "/"))) {
		rc = -EINVAL;
		goto out;
	}
	alen = (size_t)(auth_end - auth);
	if (memchr(auth, '@', alen) != NULL) {
		rc = -EINVAL; /* credentials never go in a URL */
		goto out;
	}
	host_end = auth[0] == '[' ? memchr(auth, ']', alen)
				  : memchr(auth, ':', alen);
	is_aws = aws_host(auth, host_end ? (size_t)(host_end - auth) : alen);
	if (addressing == BACKEND_ADDRESSING_AUTO)
		ep.virtual_hosted = is_aws && dns_bucket(bucket);
	else
		ep.virtual_hosted = addressing == BACKEND_ADDRESSING_VIRTUAL;
	if (ep.virtual_hosted && !dns_bucket(bucket)) {
		rc = -EINVAL;
		goto out;
	}
	if (ep.virtual_hosted) {
		if (asprintf(&ep.host, "%s.%.*s", bucket, (int)alen, auth) < 0)
			ep.host = NULL;
		ep.path_prefix = strdup("");
	} else {
		ep.host = strndup(auth, alen);
		enc = s3_uri_encode(bucket, strlen(bucket), 0);
		if (enc != NULL && asprintf(&ep.path_prefix, "/%s", enc) < 0)
			ep.path_prefix = NULL;
	}
	if (ep.host != NULL &&
	    asprintf(&ep.base, "%.*s://%s", (int)(scheme_end - endpoint),
		     endpoint, ep.host) < 0)
		ep.base = NULL;
	if (ep.host == NULL || ep.path_prefix == NULL || ep.base == NULL)
		goto out;
	*out = ep;
	memset(&ep, 0, sizeof(ep));
	rc = 0;
out:
	s3_endpoint_fini(&ep);
	free(enc);
	free(deflt);
	return rc;
}

char *s3_list_query(const char *prefix, const char *token)
{
	char *p = s3_uri_encode(prefix, strlen(prefix), 0);
	char *t = token ? s3_uri_encode(token, strlen(token), 0) : NULL;
	char *q = NULL;

	if (p != NULL && (token == NULL || t != NULL)) {
		/* Sorted by name: continuation-token, encoding-type,
		 * list-type, max-keys, prefix. */
		if (asprintf(&q,
			     "%s%s%sencoding-type=url&list-type=2&max-keys=1000"
			     "&prefix=%s",
			     t ? "continuation-token=" : "", t ? t : "",
			     t ? "&" : "", p) < 0)
			q = NULL;
	}
	free(p);
	free(t);
	return q;
}

int s3_error_errno(long status, const char *code)
{
	static const struct objstore_code codes[] = {
		{ "NoSuchKey", -ENOENT },
		{ "NoSuchBucket", -ENOENT },
		{ "AccessDenied", -EACCES },
		{ "AllAccessDisabled", -EACCES },
		{ "InvalidAccessKeyId", -EACCES },
		{ "SignatureDoesNotMatch", -EACCES },
		{ "ExpiredToken", -EACCES },
		{ "InvalidToken", -EACCES },
		{ "AccountProblem", -EACCES },
		{ "PreconditionFailed", -ESTALE },
		{ "InvalidRange", -ERANGE },
		{ "SlowDown", -EIO },
		{ "InternalError", -EIO },
		{ "ServiceUnavailable", -EIO },
		{ "RequestTimeout", -EIO },
	};

	return objstore_error_errno(status, code, codes,
				    sizeof(codes) / sizeof(codes[0]));
}

char *s3_object_path(const struct s3_endpoint *ep, const char *prefix,
		     const char *key, size_t key_len)
{
	size_t plen = strlen(prefix);
	char *full = malloc(plen + key_len + 1), *enc, *path = NULL;

	if (full == NULL)
		return NULL;
	memcpy(full, prefix, plen);
	memcpy(full + plen, key, key_len);
	full[plen + key_len] = '\0';
	enc = s3_uri_encode(full, plen + key_len, 1);
	free(full);
	if (enc != NULL && asprintf(&path, "%s/%s", ep->path_prefix, enc) < 0)
		path = NULL;
	free(enc);
	return path;
}
