/*
 * gcs_json: the JSON API's answers (gcs.h): list pages, object metadata,
 * error bodies, and the crc32c encodings, parsed with jansson.
 *
 * Every number the manifest and the reads depend on arrives as a JSON
 * string (size, generation: int64 values that JavaScript could not hold),
 * so they are checked strictly here: decimal digits only, no sign, no
 * space, within int64. A page with anything wrong is rejected whole with a
 * reason, never half-used: a manifest built from a guessed size or a
 * generation that pins nothing would serve wrong bytes later.
 */
#include "backends/gcs.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/s3_xml.h"

static int gcs_why(char *why, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int gcs_why(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (cap > 0) {
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

/* A JSON string of 1 to 19 decimal digits whose value fits an int64. */
static int gcs_decimal(const json_t *v, uint64_t *out)
{
	const char *s;
	size_t n, i;
	uint64_t x = 0;

	if (!json_is_string(v))
		return -EINVAL;
	s = json_string_value(v);
	n = json_string_length(v);
	if (n == 0 || n > 19)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	if (x > (uint64_t)INT64_MAX)
		return -EINVAL;
	*out = x;
	return 0;
}

int gcs_crc32c_decode(const char *b64, size_t len, uint32_t *out)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklm"
				       "nopqrstuvwxyz0123456789+/";
	uint64_t bits = 0;
	size_t i;
	const char *c;

	/* 4 bytes are 6 characters and "==". */
	if (len != 8 || b64[6] != '=' || b64[7] != '=')
		return -EINVAL;
	for (i = 0; i < 6; i++) {
		if (b64[i] == '\0' || (c = strchr(alphabet, b64[i])) == NULL)
			return -EINVAL;
		bits = (bits << 6) | (uint64_t)(c - alphabet);
	}
	/* 36 bits carried 32: the last 4 must be zero (canonical form). */
	if (bits & 0xf)
		return -EINVAL;
	*out = (uint32_t)(bits >> 4);
	return 0;
}

int gcs_hash_crc32c(const char *value, uint32_t *out)
{
	const char *p = value, *end;
	size_t n;

	while (*p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		end = p + strcspn(p, ",");
		n = (size_t)(end - p);
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n > 7 && strncmp(p, "crc32c=", 7) == 0)
			return gcs_crc32c_decode(p + 7, n - 7, out);
		p = end;
	}
	return -ENOENT;
}

/* One item of a list page, or a metadata reply. */
static int gcs_item_parse(const json_t *it, size_t idx, struct gcs_object *o,
			  char *why, size_t cap)
{
	const json_t *name, *size, *gen, *upd, *crc;
	uint64_t g;

	memset(o, 0, sizeof(*o));
	if (!json_is_object(it))
		return gcs_why(why, cap, "item %zu is not an object", idx);
	name = json_object_get(it, "name");
	if (!json_is_string(name) || json_string_length(name) == 0)
		return gcs_why(why, cap, "item %zu has no name", idx);
	size = json_object_get(it, "size");
	if (gcs_decimal(size, &o->size) < 0)
		return gcs_why(why, cap,
			       "item %zu: size is not a decimal string within "
			       "int64",
			       idx);
	gen = json_object_get(it, "generation");
	if (gcs_decimal(gen, &g) < 0)
		return gcs_why(why, cap,
			       "item %zu: generation is not a decimal string "
			       "within int64",
			       idx);
	snprintf(o->generation, sizeof(o->generation), "%s",
		 json_string_value(gen));
	upd = json_object_get(it, "updated");
	if (upd != NULL) {
		if (!json_is_string(upd) ||
		    s3_parse_iso8601(json_string_value(upd), &o->mtime_ns) < 0)
			return gcs_why(why, cap,
				       "item %zu: updated is not an RFC 3339 "
				       "time",
				       idx);
	}
	crc = json_object_get(it, "crc32c");
	if (crc != NULL) {
		if (!json_is_string(crc) ||
		    gcs_crc32c_decode(json_string_value(crc),
				      json_string_length(crc), &o->crc32c) < 0)
			return gcs_why(why, cap,
				       "item %zu: crc32c is not base64 of 4 "
				       "bytes",
				       idx);
		o->has_crc32c = true;
	}
	o->name_len = json_string_length(name);
	o->name = malloc(o->name_len + 1);
	if (o->name == NULL)
		return -ENOMEM;
	memcpy(o->name, json_string_value(name), o->name_len + 1);
	return 0;
}

static json_t *gcs_load(const char *body, size_t len, char *why, size_t cap)
{
	json_error_t err;
	json_t *root;

	if (body == NULL || len == 0) {
		gcs_why(why, cap, "empty body");
		return NULL;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
	if (root == NULL) {
		gcs_why(why, cap, "not JSON (line %d: %s)", err.line, err.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		gcs_why(why, cap, "not a JSON object");
		return NULL;
	}
	return root;
}

void gcs_list_page_fini(struct gcs_list_page *page)
{
	size_t i;

	for (i = 0; i < page->count; i++)
		free(page->objects[i].name);
	free(page->objects);
	free(page->next_token);
	memset(page, 0, sizeof(*page));
}

int gcs_list_parse(const char *body, size_t len, struct gcs_list_page *page,
		   char *why, size_t why_cap)
{
	struct gcs_list_page pg = { 0 };
	json_t *root, *items, *tok;
	size_t i, n;
	int rc = -EBADMSG;

	if (why_cap > 0)
		why[0] = '\0';
	root = gcs_load(body, len, why, why_cap);
	if (root == NULL)
		return -EBADMSG;
	items = json_object_get(root, "items");
	if (items != NULL && !json_is_array(items)) {
		gcs_why(why, why_cap, "items is not an array");
		goto out;
	}
	tok = json_object_get(root, "nextPageToken");
	if (tok != NULL && !json_is_string(tok)) {
		gcs_why(why, why_cap, "nextPageToken is not a string");
		goto out;
	}
	if (tok != NULL && json_string_length(tok) > 0) {
		if (strlen(json_string_value(tok)) != json_string_length(tok)) {
			gcs_why(why, why_cap, "nextPageToken holds a NUL");
			goto out;
		}
		pg.next_token = strdup(json_string_value(tok));
		if (pg.next_token == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	n = items ? json_array_size(items) : 0;
	if (n > 0) {
		pg.objects = calloc(n, sizeof(*pg.objects));
		if (pg.objects == NULL) {
			rc = -ENOMEM;
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		rc = gcs_item_parse(json_array_get(items, i), i, &pg.objects[i],
				    why, why_cap);
		if (rc < 0)
			goto out;
		pg.count++;
	}
	*page = pg;
	memset(&pg, 0, sizeof(pg));
	rc = 0;
out:
	gcs_list_page_fini(&pg);
	json_decref(root);
	return rc;
}

int gcs_object_parse(const char *body, size_t len, struct gcs_object *obj,
		     char *why, size_t why_cap)
{
	json_t *root;
	int rc;

	if (why_cap > 0)
		why[0] = '\0';
	root = gcs_load(body, len, why, why_cap);
	if (root == NULL)
		return -EBADMSG;
	rc = gcs_item_parse(root, 0, obj, why, why_cap);
	if (rc < 0) {
		free(obj->name);
		obj->name = NULL;
	}
	json_decref(root);
	return rc;
}

static void gcs_copy(char *dst, size_t cap, const char *src)
{
	if (cap > 0)
		snprintf(dst, cap, "%s", src ? src : "");
}

void gcs_error_parse(const char *body, size_t len, char *reason,
		     size_t reason_cap, char *msg, size_t msg_cap)
{
	json_t *root = NULL, *err, *first;
	const char *r = NULL, *m = NULL;
	json_error_t jerr;

	gcs_copy(reason, reason_cap, "");
	gcs_copy(msg, msg_cap, "");
	if (body == NULL || len == 0)
		return;
	root = json_loadb(body, len, 0, &jerr);
	err = json_object_get(root, "error");
	if (json_is_object(err)) {
		first = json_array_get(json_object_get(err, "errors"), 0);
		r = json_string_value(json_object_get(first, "reason"));
		if (r == NULL || r[0] == '\0')
			r = json_string_value(json_object_get(err, "status"));
		m = json_string_value(json_object_get(err, "message"));
		gcs_copy(reason, reason_cap, r);
		gcs_copy(msg, msg_cap, m);
	} else if (root == NULL && body[0] != '<' && body[0] != '{') {
		/* Not JSON: a proxy's or the emulator's plain text ("No
		 * such object: b/k"); its first line is the message. HTML
		 * pages say nothing worth a log line. */
		size_t n = 0;

		while (n < len && body[n] != '\r' && body[n] != '\n')
			n++;

		if (n > 0 && msg_cap > 0) {
			if (n >= msg_cap)
				n = msg_cap - 1;
			memcpy(msg, body, n);
			msg[n] = '\0';
		}
	}
	/* Only printable ASCII reaches the log: the body is the server's. */
	for (; reason_cap > 0 && *reason; reason++)
		if (*reason < 0x20 || *reason > 0x7e)
			*reason = '?';
	for (; msg_cap > 0 && *msg; msg++)
		if (*msg < 0x20 || *msg > 0x7e)
			*msg = '?';
	json_decref(root);
}
