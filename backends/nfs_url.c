/*
 * nfs_url: parses nfs:// source URLs and classifies errors (see nfs.h).
 *
 * Pure: no libnfs, no I/O, so config validation and the fuzz harness can
 * use it. The URL is parsed here rather than by libnfs' nfs_parse_url_*
 * because those need a context, accept parameters silently, and do not
 * decode %XX: a path with a space or '?' could not be named.
 */
#include "backends/nfs.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hex.h"

/* Decimal in [min, max]; 0 or -EINVAL. */
static int parse_num(const char *s, size_t n, long min, long max, long *out)
{
	long v = 0;
	size_t i;

	if (n == 0 || n > 10)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	if (v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Decodes path[0..n) (%XX escapes) into a new string with the trailing
 * slashes dropped; "" becomes "/". NUL (%00) is refused: libnfs takes C
 * strings. */
static int decode_path(const char *s, size_t n, char **out)
{
	char *p = malloc(n + 2);
	size_t i, j = 0;
	int v;

	if (p == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (s[i] != '%') {
			p[j++] = s[i];
			continue;
		}
		if (i + 2 >= n)
			goto bad;
		v = hex_pair(s + i + 1);
		if (v <= 0) /* not hex, or %00 */
			goto bad;
		p[j++] = (char)v;
		i += 2;
	}
	while (j > 1 && p[j - 1] == '/')
		j--;
	if (j == 0)
		p[j++] = '/';
	p[j] = '\0';
	*out = p;
	return 0;
bad:
	free(p);
	return -EINVAL;
}

static int parse_query(const char *q, struct nfs_source *src, const char **why)
{
	while (*q) {
		size_t n = strcspn(q, "&"), klen;
		const char *eq = memchr(q, '=', n), *v;
		long val;

		if (eq == NULL) {
			*why = "a query parameter without '='";
			return -EINVAL;
		}
		klen = (size_t)(eq - q);
		v = eq + 1;
		n -= klen + 1;
#define KEY(name) (klen == strlen(name) && memcmp(q, name, klen) == 0)
		if (KEY("version")) {
			if (parse_num(v, n, 3, 4, &val) < 0) {
				*why = "version must be 3 or 4";
				return -EINVAL;
			}
			src->version = (int)val;
		} else if (KEY("nfsport") || KEY("port")) {
			if (parse_num(v, n, 1, 65535, &val) < 0) {
				*why = "nfsport must be 1..65535";
				return -EINVAL;
			}
			src->nfsport = (unsigned)val;
		} else if (KEY("mountport")) {
			if (parse_num(v, n, 1, 65535, &val) < 0) {
				*why = "mountport must be 1..65535";
				return -EINVAL;
			}
			src->mountport = (unsigned)val;
		} else if (KEY("uid") || KEY("gid")) {
			if (parse_num(v, n, 0, 2147483647L, &val) < 0) {
				*why = "uid and gid must be 0..2147483647";
				return -EINVAL;
			}
			if (KEY("uid"))
				src->uid = val;
			else
				src->gid = val;
		} else if (KEY("connections")) {
			if (parse_num(v, n, 1, NFS_CONNECTIONS_MAX, &val) < 0) {
				*why = "connections must be 1..64";
				return -EINVAL;
			}
			src->connections = (unsigned)val;
		} else {
			*why = "unknown query parameter (known: version, "
			       "nfsport, mountport, uid, gid, connections)";
			return -EINVAL;
		}
#undef KEY
		q = v + n;
		if (*q == '&')
			q++;
	}
	return 0;
}

int nfs_source_parse(const char *url, struct nfs_source *out, const char **why)
{
	struct nfs_source src = { .version = 4,
				  .uid = -1,
				  .gid = -1,
				  .connections = NFS_CONNECTIONS_DEFAULT };
	const char *dummy, *host, *hend, *p, *pend, *q;
	size_t hlen, i;
	long port;
	int rc;

	if (why == NULL)
		why = &dummy;
	if (strncmp(url, "nfs://", 6) != 0) {
		*why = "not an nfs:// URL";
		return -EINVAL;
	}
	host = url + 6;
	p = host + strcspn(host, "/?");
	if (*p != '/') {
		*why = "no path after the server (nfs://SERVER/PATH)";
		return -EINVAL;
	}
	if (host[0] == '[') {
		hend = memchr(host, ']', (size_t)(p - host));
		if (hend == NULL) {
			*why = "an IPv6 literal without ']'";
			return -EINVAL;
		}
		host++;
		hlen = (size_t)(hend - host);
		hend++;
	} else {
		hend = memchr(host, ':', (size_t)(p - host));
		if (hend == NULL)
			hend = p;
		hlen = (size_t)(hend - host);
	}
	if (hlen == 0 || hlen >= sizeof(src.host)) {
		*why = "no server name, or one too long";
		return -EINVAL;
	}
	for (i = 0; i < hlen; i++) {
		unsigned char c = (unsigned char)host[i];

		if (!isalnum(c) && c != '.' && c != '-' && c != '_' &&
		    !(c == ':' && url[6] == '[')) {
			*why = "the server must be a name or an IP address";
			return -EINVAL;
		}
	}
	memcpy(src.host, host, hlen);
	src.host[hlen] = '\0';
	if (hend < p) {
		if (*hend != ':' || parse_num(hend + 1, (size_t)(p - hend - 1),
					      1, 65535, &port) < 0) {
			*why = "the port must be 1..65535";
			return -EINVAL;
		}
		src.nfsport = (unsigned)port;
	}
	pend = p + strcspn(p, "?#");
	if (*pend == '#') {
		*why = "a fragment ('#') in the URL";
		return -EINVAL;
	}
	q = *pend == '?' ? pend + 1 : pend;
	rc = parse_query(q, &src, why);
	if (rc < 0)
		return rc;
	rc = decode_path(p, (size_t)(pend - p), &src.path);
	if (rc == -EINVAL)
		*why = "a bad %XX escape in the path";
	if (rc < 0)
		return rc;
	/* ".." would let a source name a directory above what its URL
	 * shows; libnfs would resolve it silently. */
	for (i = 0; src.path[i]; i++) {
		if (src.path[i] != '/')
			continue;
		if (strncmp(src.path + i, "/..", 3) == 0 &&
		    (src.path[i + 3] == '/' || src.path[i + 3] == '\0')) {
			free(src.path);
			*why = "'..' in the path";
			return -EINVAL;
		}
	}
	*out = src;
	return 0;
}

void nfs_source_free(struct nfs_source *src)
{
	if (src == NULL)
		return;
	free(src->path);
	src->path = NULL;
}

bool nfs_url_valid(const char *url, bool object)
{
	struct nfs_source src;
	size_t len = strlen(url);
	bool ok;

	if (nfs_source_parse(url, &src, NULL) < 0)
		return false;
	/* A manifest URL is split at its last '/' into a directory and a
	 * file name, so it can carry no query. */
	ok = !object || (strcmp(src.path, "/") != 0 && url[len - 1] != '/' &&
			 strchr(url, '?') == NULL);
	nfs_source_free(&src);
	return ok;
}

int nfs_errno_map(int status)
{
	switch (status) {
	case -ENOENT:
	case -ENOTDIR:
	case -EACCES:
	case -ESTALE:
	case -EISDIR:
	case -ENAMETOOLONG:
	case -ENOMEM:
		return status;
	case -EPERM:
		return -EACCES;
	default:
		return -EIO;
	}
}

bool nfs_errno_transient(int status)
{
	switch (status) {
	case -ENOENT:
	case -ENOTDIR:
	case -EACCES:
	case -EPERM:
	case -ESTALE:
	case -EISDIR:
	case -ENAMETOOLONG:
	case -ENOMEM:
	case -EINVAL:
	case -ENODATA: /* the file ends before the bytes asked */
		return false;
	default:
		return true;
	}
}

bool nfs_error_refused(int status, const char *msg)
{
	/* libnfs 4.0 maps NFSv4 statuses it has no errno for to -ERANGE
	 * (through its NFSv3 table on OPEN and LOOKUP) or -EIO: an expired
	 * lease as well as a security refusal. Only the message tells. */
	if (status != -ERANGE && status != -EIO)
		return false;
	return msg != NULL && strstr(msg, "NFS4ERR_WRONGSEC") != NULL;
}
