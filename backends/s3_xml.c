/*
 * s3_xml: see s3_xml.h. One small expat driver keeps the path of local
 * element names and the text of the current element, and hands each
 * closed element to a document-specific handler.
 */
#include "backends/s3_xml.h"

#include <errno.h>
#include <expat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/hex.h"
#include "util/str.h"

#define XML_DEPTH_MAX 16
#define XML_NS_SEP '\x01'

struct xml_doc;
typedef int (*xml_end_cb)(struct xml_doc *d, int depth, const char *name,
			  const char *text, size_t len);
typedef int (*xml_start_cb)(struct xml_doc *d, int depth, const char *name);

struct xml_doc {
	XML_Parser parser;
	int depth;
	char names[XML_DEPTH_MAX][32]; /* local names, truncated */
	char *text;
	size_t text_len, text_cap;
	int rc; /* first handler error */
	xml_start_cb on_start;
	xml_end_cb on_end;
	void *arg;
};

static const char *local_name(const char *name)
{
	const char *sep = strrchr(name, XML_NS_SEP);

	return sep ? sep + 1 : name;
}

static void on_xml_start(void *arg, const XML_Char *name,
			 const XML_Char **attrs)
{
	struct xml_doc *d = arg;
	int rc;

	(void)attrs;
	d->depth++;
	if (d->depth <= XML_DEPTH_MAX) {
		strncpy(d->names[d->depth - 1], local_name(name),
			sizeof(d->names[0]) - 1);
		d->names[d->depth - 1][sizeof(d->names[0]) - 1] = '\0';
	}
	d->text_len = 0;
	if (d->on_start != NULL && d->depth <= XML_DEPTH_MAX && d->rc == 0) {
		rc = d->on_start(d, d->depth, d->names[d->depth - 1]);
		if (rc < 0) {
			d->rc = rc;
			XML_StopParser(d->parser, XML_FALSE);
		}
	}
}

static void on_xml_end(void *arg, const XML_Char *name)
{
	struct xml_doc *d = arg;
	int rc;

	(void)name;
	if (d->depth <= XML_DEPTH_MAX && d->rc == 0) {
		rc = d->on_end(d, d->depth, d->names[d->depth - 1],
			       d->text ? d->text : "", d->text_len);
		if (rc < 0) {
			d->rc = rc;
			XML_StopParser(d->parser, XML_FALSE);
		}
	}
	d->depth--;
	d->text_len = 0;
}

static void on_xml_text(void *arg, const XML_Char *s, int len)
{
	struct xml_doc *d = arg;
	size_t cap;
	char *p;

	if (d->rc != 0 || len <= 0)
		return;
	if (d->text_len + (size_t)len + 1 > d->text_cap) {
		cap = d->text_cap ? d->text_cap * 2 : 256;
		while (cap < d->text_len + (size_t)len + 1)
			cap *= 2;
		p = realloc(d->text, cap);
		if (p == NULL) {
			d->rc = -ENOMEM;
			XML_StopParser(d->parser, XML_FALSE);
			return;
		}
		d->text = p;
		d->text_cap = cap;
	}
	memcpy(d->text + d->text_len, s, (size_t)len);
	d->text_len += (size_t)len;
	d->text[d->text_len] = '\0';
}

/* Runs the parser over the whole document. Returns 0, the first handler
 * error, -EBADMSG for malformed XML, -ENOMEM. */
static int xml_run(const char *xml, size_t len, xml_start_cb on_start,
		   xml_end_cb on_end, void *arg)
{
	struct xml_doc d = { .on_start = on_start,
			     .on_end = on_end,
			     .arg = arg };
	int rc = 0;

	if (len > (size_t)1 << 30)
		return -EBADMSG;
	d.parser = XML_ParserCreateNS(NULL, XML_NS_SEP);
	if (d.parser == NULL)
		return -ENOMEM;
	XML_SetUserData(d.parser, &d);
	XML_SetElementHandler(d.parser, on_xml_start, on_xml_end);
	XML_SetCharacterDataHandler(d.parser, on_xml_text);
	if (XML_Parse(d.parser, xml, (int)len, XML_TRUE) != XML_STATUS_OK)
		rc = d.rc ? d.rc : -EBADMSG;
	else if (d.rc != 0)
		rc = d.rc;
	XML_ParserFree(d.parser);
	free(d.text);
	return rc;
}

/* True if the element at depth is name and its parent is parent. */
static int at(const struct xml_doc *d, int depth, const char *parent,
	      const char *name)
{
	return depth >= 2 && depth <= XML_DEPTH_MAX &&
	       strcmp(d->names[depth - 1], name) == 0 &&
	       strcmp(d->names[depth - 2], parent) == 0;
}

/* Decodes %XX (and '+' as space, as S3's url encoding writes it) in
 * place. Returns the new length or -EBADMSG. */
static long url_decode(char *s, size_t len)
{
	size_t i, o = 0;
	int v;

	for (i = 0; i < len; i++) {
		if (s[i] == '%') {
			if (i + 2 >= len)
				return -EBADMSG;
			v = hex_pair(s + i + 1);
			if (v < 0)
				return -EBADMSG;
			s[o++] = (char)v;
			i += 2;
		} else if (s[i] == '+') {
			s[o++] = ' ';
		} else {
			s[o++] = s[i];
		}
	}
	s[o] = '\0';
	return (long)o;
}

int s3_parse_iso8601(const char *s, int64_t *ns)
{
	struct tm tm = { 0 };
	int64_t frac = 0, scale = 100000000, v;
	const char *p;
	time_t t;

	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (p == NULL)
		return -EINVAL;
	if (*p == '.') {
		/* Digits past the ninth add nothing (scale reaches 0). */
		for (p++; *p >= '0' && *p <= '9'; p++) {
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0 && *p != '\0')
		return -EINVAL;
	/* -1 is also 1969-12-31T23:59:59Z: only errno tells them apart. */
	errno = 0;
	t = timegm(&tm);
	if (t == (time_t)-1 && errno != 0)
		return -EINVAL;
	/* Borrow a second before 1970 so the product may reach INT64_MIN;
	 * outside 1677-09-21 .. 2262-04-11 int64 ns cannot hold the time. */
	if (t < 0 && frac > 0) {
		t += 1;
		frac -= 1000000000;
	}
	if (__builtin_mul_overflow((int64_t)t, (int64_t)1000000000, &v) ||
	    __builtin_add_overflow(v, frac, &v))
		return -EINVAL;
	*ns = v;
	return 0;
}

/* ListObjectsV2 */

struct list_state {
	struct s3_xml_list_page *page;
	struct s3_xml_object cur; /* the open <Contents>: its strings */
	int in_contents, have_key, have_size, root_ok;
};

/* A <Contents> is a child of the root and holds no other: one anywhere
 * else is malformed (it used to reset cur and leak its key). */
static int list_start(struct xml_doc *d, int depth, const char *name)
{
	struct list_state *st = d->arg;

	if (depth == 1 && strcmp(name, "ListBucketResult") == 0)
		st->root_ok = 1;
	if (strcmp(name, "Contents") == 0) {
		if (depth != 2 || st->in_contents)
			return -EBADMSG;
		st->in_contents = 1;
		st->have_key = st->have_size = 0;
	}
	return 0;
}

/* True for a field of the open <Contents> (depth 3, under it). */
static int in_contents(const struct xml_doc *d, int depth, const char *name)
{
	const struct list_state *st = d->arg;

	return st->in_contents && depth == 3 && at(d, depth, "Contents", name);
}

static int list_end(struct xml_doc *d, int depth, const char *name,
		    const char *text, size_t len)
{
	struct list_state *st = d->arg;
	struct s3_xml_list_page *pg = st->page;
	char *end;

	if (depth == 2 && strcmp(name, "IsTruncated") == 0) {
		pg->truncated = len == 4 && strncmp(text, "true", 4) == 0;
	} else if (depth == 2 && strcmp(name, "NextContinuationToken") == 0) {
		free(pg->next_token);
		pg->next_token = str_memdup(text, len);
		if (pg->next_token == NULL)
			return -ENOMEM;
	} else if (depth == 2 && strcmp(name, "EncodingType") == 0) {
		pg->url_encoded = len == 3 && strncmp(text, "url", 3) == 0;
	} else if (in_contents(d, depth, "Key")) {
		free(st->cur.key);
		st->cur.key = str_memdup(text, len);
		if (st->cur.key == NULL)
			return -ENOMEM;
		st->cur.key_len = len;
		st->have_key = 1;
	} else if (in_contents(d, depth, "Size")) {
		if (len == 0 || text[0] < '0' || text[0] > '9')
			return -EBADMSG;
		errno = 0;
		st->cur.size = strtoull(text, &end, 10);
		if (errno != 0 || *end != '\0')
			return -EBADMSG;
		st->have_size = 1;
	} else if (in_contents(d, depth, "ETag")) {
		free(st->cur.etag);
		st->cur.etag = str_memdup(text, len);
		if (st->cur.etag == NULL)
			return -ENOMEM;
	} else if (in_contents(d, depth, "LastModified")) {
		if (s3_parse_iso8601(text, &st->cur.mtime_ns) < 0)
			st->cur.mtime_ns = 0;
	} else if (depth == 2 && strcmp(name, "Contents") == 0) {
		struct s3_xml_object *objs;

		st->in_contents = 0;
		if (!st->have_key || !st->have_size) {
			free(st->cur.key);
			free(st->cur.etag);
			memset(&st->cur, 0, sizeof(st->cur));
			return -EBADMSG;
		}
		if (st->cur.etag == NULL) {
			st->cur.etag = str_memdup("", 0);
			if (st->cur.etag == NULL)
				return -ENOMEM;
		}
		objs = realloc(pg->objects, (pg->count + 1) * sizeof(*objs));
		if (objs == NULL)
			return -ENOMEM;
		pg->objects = objs;
		pg->objects[pg->count++] = st->cur;
		memset(&st->cur, 0, sizeof(st->cur));
	}
	return 0;
}

int s3_xml_list_parse(const char *xml, size_t len,
		      struct s3_xml_list_page *page)
{
	struct list_state st = { .page = page };
	size_t i;
	long n;
	int rc;

	memset(page, 0, sizeof(*page));
	rc = xml_run(xml, len, list_start, list_end, &st);
	free(st.cur.key);
	free(st.cur.etag);
	if (rc == 0 && !st.root_ok)
		rc = -EBADMSG;
	/* EncodingType may come after the keys, so decode at the end. */
	for (i = 0; rc == 0 && page->url_encoded && i < page->count; i++) {
		n = url_decode(page->objects[i].key, page->objects[i].key_len);
		if (n < 0)
			rc = (int)n;
		else
			page->objects[i].key_len = (size_t)n;
	}
	return rc;
}

void s3_xml_list_page_fini(struct s3_xml_list_page *page)
{
	size_t i;

	for (i = 0; i < page->count; i++) {
		free(page->objects[i].key);
		free(page->objects[i].etag);
	}
	free(page->objects);
	free(page->next_token);
	memset(page, 0, sizeof(*page));
}

/* <Error> */

struct error_state {
	char *code, *message;
	size_t code_cap, message_cap;
	int root_ok;
};

static void copy_trunc(char *dst, size_t cap, const char *src, size_t len)
{
	if (cap == 0)
		return;
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

static int error_start(struct xml_doc *d, int depth, const char *name)
{
	struct error_state *st = d->arg;

	if (depth == 1 && strcmp(name, "Error") == 0)
		st->root_ok = 1;
	return 0;
}

static int error_end(struct xml_doc *d, int depth, const char *name,
		     const char *text, size_t len)
{
	struct error_state *st = d->arg;

	if (at(d, depth, "Error", "Code") && depth == 2)
		copy_trunc(st->code, st->code_cap, text, len);
	else if (at(d, depth, "Error", "Message") && depth == 2)
		copy_trunc(st->message, st->message_cap, text, len);
	(void)name;
	return 0;
}

int s3_xml_error_parse(const char *xml, size_t len, char *code, size_t code_cap,
		       char *message, size_t message_cap)
{
	struct error_state st = { .code = code,
				  .message = message,
				  .code_cap = code_cap,
				  .message_cap = message_cap };
	int rc;

	copy_trunc(code, code_cap, "", 0);
	copy_trunc(message, message_cap, "", 0);
	if (xml == NULL || len == 0)
		return -EBADMSG;
	rc = xml_run(xml, len, error_start, error_end, &st);
	if (rc == 0 && !st.root_ok)
		rc = -EBADMSG;
	if (rc < 0) {
		copy_trunc(code, code_cap, "", 0);
		copy_trunc(message, message_cap, "", 0);
		return -EBADMSG;
	}
	return 0;
}

/* STS */

static int sts_end(struct xml_doc *d, int depth, const char *name,
		   const char *text, size_t len)
{
	struct s3_xml_sts *sts = d->arg;
	char **dst = NULL;

	if (!at(d, depth, "Credentials", name))
		return 0;
	if (strcmp(name, "AccessKeyId") == 0)
		dst = &sts->access_key;
	else if (strcmp(name, "SecretAccessKey") == 0)
		dst = &sts->secret_key;
	else if (strcmp(name, "SessionToken") == 0)
		dst = &sts->session_token;
	else if (strcmp(name, "Expiration") == 0)
		dst = &sts->expiration;
	if (dst == NULL)
		return 0;
	free(*dst);
	*dst = str_memdup(text, len);
	return *dst ? 0 : -ENOMEM;
}

int s3_xml_sts_parse(const char *xml, size_t len, struct s3_xml_sts *out)
{
	struct s3_xml_sts sts = { 0 };
	int rc = xml_run(xml, len, NULL, sts_end, &sts);

	if (rc == 0 && (sts.access_key == NULL || sts.secret_key == NULL ||
			sts.session_token == NULL || sts.expiration == NULL ||
			sts.access_key[0] == '\0' || sts.secret_key[0] == '\0'))
		rc = -EBADMSG;
	if (rc < 0) {
		s3_xml_sts_fini(&sts);
		return rc;
	}
	*out = sts;
	return 0;
}

void s3_xml_sts_fini(struct s3_xml_sts *sts)
{
	free(sts->access_key);
	free(sts->secret_key);
	free(sts->session_token);
	free(sts->expiration);
	memset(sts, 0, sizeof(*sts));
}
