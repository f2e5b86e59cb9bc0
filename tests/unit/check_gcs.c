/*
 * check_gcs: the pure parts of the GCS backend, through backends/gcs.h:
 * source URLs, the endpoint (configured, STORAGE_EMULATOR_HOST, default),
 * the encoding of object names and the listing query, objects.list pages
 * and object metadata (well-formed and malformed), error bodies, the error
 * map, and the crc32c encodings of x-goog-hash. Nothing here touches the
 * network.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/gcs.h"
#include "unit.h"

/* --- source URLs --------------------------------------------------------- */

START_TEST(test_url_parse)
{
	static const struct {
		const char *url, *bucket, *prefix;
	} good[] = {
		{ "gs://bkt", "bkt", "" },
		{ "gs://bkt/", "bkt", "" },
		{ "gs://bkt/data", "bkt", "data/" },
		{ "gs://bkt/data/", "bkt", "data/" },
		{ "gs://my-bucket.example_1/a b/c+d/", "my-bucket.example_1",
		  "a b/c+d/" },
		{ "gs://0ab/ü/", "0ab", "ü/" },
	};
	static const char *const bad[] = {
		"s3://bkt/",  "gs://",	    "gs:///x",	  "gs://ab/",
		"gs://Bkt/",  "gs://b kt/", "gs://-bkt/", "gs://bkt-/",
		"gs://.bkt/", "gs://bkt_/", "gs://bk%t/", "gs://bkt@x/",
		"gs:/bkt",    "GS://bkt",   "/local/dir", "gs://bkt:80/",
	};
	char *b, *p, longname[240];
	size_t i;

	for (i = 0; i < ARRAY_LEN(good); i++) {
		ck_assert_int_eq(gcs_url_parse(good[i].url, &b, &p), 0);
		ck_assert_str_eq(b, good[i].bucket);
		ck_assert_str_eq(p, good[i].prefix);
		free(b);
		free(p);
	}
	for (i = 0; i < ARRAY_LEN(bad); i++) {
		b = p = (char *)"untouched";
		ck_assert_msg(gcs_url_parse(bad[i], &b, &p) == -EINVAL, "%s",
			      bad[i]);
		ck_assert_str_eq(b, "untouched");
	}
	/* 222 is the longest name GCS allows (dotted), 223 is too long. */
	memcpy(longname, "gs://", 5);
	memset(longname + 5, 'a', 223);
	longname[5 + 223] = '\0';
	ck_assert_int_eq(gcs_url_parse(longname, &b, &p), -EINVAL);
	longname[5 + 222] = '\0';
	ck_assert_int_eq(gcs_url_parse(longname, &b, &p), 0);
	ck_assert_uint_eq(strlen(b), 222);
	free(b);
	free(p);
}
END_TEST

/* --- endpoint ------------------------------------------------------------ */

static void endpoint_is(const char *endpoint, const char *emu, const char *want,
			int emulator)
{
	struct gcs_endpoint ep;

	ck_assert_msg(gcs_endpoint_resolve(endpoint, emu, &ep) == 0, "%s / %s",
		      endpoint ? endpoint : "-", emu ? emu : "-");
	ck_assert_str_eq(ep.base, want);
	ck_assert_int_eq(ep.emulator, emulator);
	gcs_endpoint_fini(&ep);
	gcs_endpoint_fini(&ep); /* twice is safe */
}

START_TEST(test_endpoint)
{
	static const char *const bad[] = {
		"ftp://h",	"http://",
		"http:///x",	"http://h/path",
		"http://h?x=1", "http://u:p@h",
		"http://h p",	"storage.googleapis.com",
	};
	struct gcs_endpoint ep = { 0 };
	size_t i;

	endpoint_is(NULL, NULL, GCS_DEFAULT_ENDPOINT, 0);
	endpoint_is("", "", GCS_DEFAULT_ENDPOINT, 0);
	endpoint_is("http://127.0.0.1:9199", NULL, "http://127.0.0.1:9199", 0);
	endpoint_is("https://h.example/", NULL, "https://h.example", 0);
	endpoint_is(NULL, "127.0.0.1:9199", "http://127.0.0.1:9199", 1);
	endpoint_is(NULL, "localhost:4443", "http://localhost:4443", 1);
	endpoint_is(NULL, "http://127.0.0.1:9199/", "http://127.0.0.1:9199", 1);
	endpoint_is(NULL, "https://[::1]:4443", "https://[::1]:4443", 1);
	/* The configured endpoint wins the URL; the emulator variable still
	 * means no credentials. */
	endpoint_is("http://10.0.0.1:80", "127.0.0.1:9199",
		    "http://10.0.0.1:80", 1);
	for (i = 0; i < ARRAY_LEN(bad); i++) {
		ck_assert_msg(gcs_endpoint_resolve(bad[i], NULL, &ep) ==
				      -EINVAL,
			      "%s", bad[i]);
		ck_assert_ptr_null(ep.base);
	}
	ck_assert_int_eq(gcs_endpoint_resolve(NULL, "h:1/path", &ep), -EINVAL);
	ck_assert_int_eq(gcs_endpoint_resolve(NULL, "u@h:1", &ep), -EINVAL);
}
END_TEST

START_TEST(test_endpoint_token_ok)
{
	static const char *const ok[] = {
		"https://storage.googleapis.com",
		"HTTPS://h.example:443/",
		"http://127.0.0.1:9199",
		"http://127.1.2.3",
		"http://127.0.0.1/",
		"http://localhost:4443",
		"HTTP://LocalHost",
		"http://[::1]:4443",
		"http://[0:0:0:0:0:0:0:1]",
	};
	static const char *const bad[] = {
		"http://10.0.0.1:80",
		"http://storage.googleapis.com",
		"http://127.evil.example",
		"http://127.0.0.1.nip.io:1",
		"http://localhost.evil.example",
		"http://localhostx",
		"http://user@127.0.0.1",
		"http://127.0.0.1@evil.example",
		"http://127.0.0.1:1@evil.example",
		"http://evil.example#@127.0.0.1",
		"http://[::2]",
		"http://[::1",
		"http://[::1]x",
		"http://[::ffff:10.0.0.1]",
		"http://127.0.0.1:80x",
		"http://127.0.0.1:",
		"http://0x7f.0.0.1",
		"http://2130706433",
		"http://127.0.0.256",
		"http://",
		"ftp://127.0.0.1",
		"127.0.0.1:9199",
		"",
	};
	size_t i;

	for (i = 0; i < ARRAY_LEN(ok); i++)
		ck_assert_msg(gcs_endpoint_token_ok(ok[i]), "%s", ok[i]);
	for (i = 0; i < ARRAY_LEN(bad); i++)
		ck_assert_msg(!gcs_endpoint_token_ok(bad[i]), "%s", bad[i]);
}
END_TEST

/* --- names and queries --------------------------------------------------- */

START_TEST(test_encode)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "", "" },
		{ "plain-._~AZaz09", "plain-._~AZaz09" },
		{ "a/b", "a%2Fb" },
		{ "sp ace", "sp%20ace" },
		{ "a+b", "a%2Bb" },
		{ "100%", "100%25" },
		{ "#?&=", "%23%3F%26%3D" },
		{ "ü", "%C3%BC" },
		{ "日本", "%E6%97%A5%E6%9C%AC" },
		{ "%2F", "%252F" },
	};
	size_t i;
	char *e;

	for (i = 0; i < ARRAY_LEN(cases); i++) {
		e = gcs_encode(cases[i].in, strlen(cases[i].in));
		ck_assert_ptr_nonnull(e);
		ck_assert_str_eq(e, cases[i].out);
		free(e);
	}
	/* A NUL inside the name is a byte like any other. */
	e = gcs_encode("a\0b", 3);
	ck_assert_str_eq(e, "a%00b");
	free(e);
}
END_TEST

START_TEST(test_object_path)
{
	static const char key[] = "odd dir/a+b %#?ü.bin";
	char *p;

	p = gcs_object_path("bkt", "ds/", key, strlen(key));
	ck_assert_str_eq(p, "/storage/v1/b/bkt/o/"
			    "ds%2Fodd%20dir%2Fa%2Bb%20%25%23%3F%C3%BC.bin");
	free(p);
	p = gcs_object_path("b.k-t", "", "k", 1);
	ck_assert_str_eq(p, "/storage/v1/b/b.k-t/o/k");
	free(p);
	/* Only key_len bytes of the key count. */
	p = gcs_object_path("bkt", "", "abcdef", 3);
	ck_assert_str_eq(p, "/storage/v1/b/bkt/o/abc");
	free(p);
}
END_TEST

START_TEST(test_list_query)
{
	char *q;

	q = gcs_list_query("ds/a b/", NULL, 1000);
	ck_assert_str_eq(
		q, "fields=items%28name%2Csize%2Cgeneration%2Cupdated%2C"
		   "crc32c%29%2CnextPageToken&maxResults=1000&prefix=ds%2F"
		   "a%20b%2F");
	free(q);
	q = gcs_list_query("", "tok+en/=", 5);
	ck_assert_str_eq(q,
			 "fields=items%28name%2Csize%2Cgeneration%2Cupdated%2C"
			 "crc32c%29%2CnextPageToken&maxResults=5&pageToken="
			 "tok%2Ben%2F%3D&prefix=");
	free(q);
}
END_TEST

/* --- list pages ---------------------------------------------------------- */

static int parse(const char *json, struct gcs_list_page *pg, char *why,
		 size_t cap)
{
	memset(pg, 0x5a, sizeof(*pg)); /* untouched on failure */
	return gcs_list_parse(json, strlen(json), pg, why, cap);
}

START_TEST(test_list_parse)
{
	static const char page[] =
		"{\"kind\":\"storage#objects\",\"nextPageToken\":\"CgRrZXkx\","
		"\"prefixes\":[\"a/\"],\"items\":["
		"{\"kind\":\"storage#object\",\"name\":\"ds/a b+%#?\\u00fc\","
		"\"size\":\"11\",\"generation\":\"1795523032701\","
		"\"updated\":\"2026-11-24T12:23:52.701Z\",\"crc32c\":"
		"\"yZRlqg==\",\"md5Hash\":\"XrY7u+Ae7tCTyyK7j1rNww==\"},"
		"{\"name\":\"ds/big\",\"size\":\"9223372036854775807\","
		"\"generation\":\"1\"}]}";
	struct gcs_list_page pg;
	char why[160];

	ck_assert_int_eq(parse(page, &pg, why, sizeof(why)), 0);
	ck_assert_uint_eq(pg.count, 2);
	ck_assert_str_eq(pg.next_token, "CgRrZXkx");
	ck_assert_str_eq(pg.objects[0].name, "ds/a b+%#?ü");
	ck_assert_uint_eq(pg.objects[0].name_len, strlen("ds/a b+%#?ü"));
	ck_assert_uint_eq(pg.objects[0].size, 11);
	ck_assert_str_eq(pg.objects[0].generation, "1795523032701");
	ck_assert_int_eq(pg.objects[0].mtime_ns, 1795523032701000000LL);
	ck_assert(pg.objects[0].has_crc32c);
	ck_assert_uint_eq(pg.objects[0].crc32c, 0xc99465aau);
	ck_assert_uint_eq(pg.objects[1].size, 9223372036854775807ULL);
	ck_assert_str_eq(pg.objects[1].generation, "1");
	ck_assert(!pg.objects[1].has_crc32c);
	ck_assert_int_eq(pg.objects[1].mtime_ns, 0);
	gcs_list_page_fini(&pg);
	gcs_list_page_fini(&pg); /* twice is safe */

	/* The last page, and an empty listing (no items at all). */
	ck_assert_int_eq(parse("{\"items\":[{\"name\":\"k\",\"size\":\"0\","
			       "\"generation\":\"5\"}]}",
			       &pg, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(pg.count, 1);
	ck_assert_ptr_null(pg.next_token);
	gcs_list_page_fini(&pg);
	ck_assert_int_eq(
		parse("{\"kind\":\"storage#objects\"}", &pg, why, sizeof(why)),
		0);
	ck_assert_uint_eq(pg.count, 0);
	ck_assert_ptr_null(pg.next_token);
	gcs_list_page_fini(&pg);
	/* No items but a token: legal (the caller bounds how many). */
	ck_assert_int_eq(parse("{\"nextPageToken\":\"t\",\"items\":[]}", &pg,
			       why, sizeof(why)),
			 0);
	ck_assert_uint_eq(pg.count, 0);
	ck_assert_str_eq(pg.next_token, "t");
	gcs_list_page_fini(&pg);
}
END_TEST

START_TEST(test_list_parse_malformed)
{
	static const struct {
		const char *json, *why;
	} cases[] = {
		{ "", "empty body" },
		{ "not json", "not JSON" },
		{ "[1,2]", "not a JSON object" },
		{ "{\"items\":{}}", "items is not an array" },
		{ "{\"items\":\"x\"}", "items is not an array" },
		{ "{\"nextPageToken\":5}", "nextPageToken is not a string" },
		{ "{\"items\":[5]}", "item 0 is not an object" },
		{ "{\"items\":[{\"size\":\"1\",\"generation\":\"1\"}]}",
		  "item 0 has no name" },
		{ "{\"items\":[{\"name\":\"\",\"size\":\"1\","
		  "\"generation\":\"1\"}]}",
		  "item 0 has no name" },
		{ "{\"items\":[{\"name\":7,\"size\":\"1\","
		  "\"generation\":\"1\"}]}",
		  "item 0 has no name" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":1,"
		  "\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"-1\","
		  "\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"+1\","
		  "\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\" 1\","
		  "\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"1x\","
		  "\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"\","
		  "\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":"
		  "\"9223372036854775808\","
		  "\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":"
		  "\"99999999999999999999999\",\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"generation\":\"1\"}]}",
		  "item 0: size" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"1\"}]}",
		  "item 0: generation" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"1\","
		  "\"generation\":\"12ab\"}]}",
		  "item 0: generation" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"1\","
		  "\"generation\":12}]}",
		  "item 0: generation" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"1\","
		  "\"generation\":\"-3\"}]}",
		  "item 0: generation" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"1\","
		  "\"generation\":\"1\",\"updated\":\"yesterday\"}]}",
		  "item 0: updated" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"1\","
		  "\"generation\":\"1\",\"crc32c\":\"AAAA\"}]}",
		  "item 0: crc32c" },
		{ "{\"items\":[{\"name\":\"a\",\"size\":\"1\","
		  "\"generation\":\"1\"},{\"name\":\"b\"}]}",
		  "item 1: size" },
		{ "{\"items\":[],\"items\":[]}", "not JSON" },
	};
	struct gcs_list_page pg;
	char why[160];
	size_t i;

	for (i = 0; i < ARRAY_LEN(cases); i++) {
		why[0] = '\0';
		ck_assert_msg(parse(cases[i].json, &pg, why, sizeof(why)) ==
				      -EBADMSG,
			      "%s", cases[i].json);
		ck_assert_msg(strstr(why, cases[i].why) != NULL,
			      "%s: why '%s', want '%s'", cases[i].json, why,
			      cases[i].why);
		/* *page is untouched on failure. */
		ck_assert_uint_eq(pg.count, 0x5a5a5a5a5a5a5a5aULL);
	}
}
END_TEST

START_TEST(test_object_parse)
{
	static const char meta[] =
		"{\"kind\":\"storage#object\",\"name\":\"ds/x/y.txt\","
		"\"bucket\":\"bkt\",\"generation\":\"1700000000000001\","
		"\"size\":\"5\",\"updated\":\"2024-05-01T00:00:00Z\","
		"\"crc32c\":\"4waSgw==\"}";
	struct gcs_object o;
	char why[160];

	ck_assert_int_eq(
		gcs_object_parse(meta, strlen(meta), &o, why, sizeof(why)), 0);
	ck_assert_str_eq(o.name, "ds/x/y.txt");
	ck_assert_uint_eq(o.size, 5);
	ck_assert_str_eq(o.generation, "1700000000000001");
	ck_assert_int_eq(o.mtime_ns, 1714521600LL * 1000000000LL);
	ck_assert_uint_eq(o.crc32c, 0xE3069283u); /* "123456789" */
	free(o.name);
	ck_assert_int_eq(
		gcs_object_parse("{\"name\":\"a\"}", 12, &o, why, sizeof(why)),
		-EBADMSG);
	ck_assert_ptr_null(o.name);
}
END_TEST

/* --- errors -------------------------------------------------------------- */

START_TEST(test_error_parse)
{
	static const char body[] =
		"{\"error\":{\"code\":404,\"message\":\"No such object: "
		"bkt/ds/a\",\"errors\":[{\"message\":\"No such object\","
		"\"domain\":\"global\",\"reason\":\"notFound\"}]}}";
	static const char body2[] =
		"{\"error\":{\"code\":403,\"message\":\"denied \\u00fc\","
		"\"status\":\"PERMISSION_DENIED\"}}";
	char reason[64], msg[128], tiny[4];

	gcs_error_parse(body, strlen(body), reason, sizeof(reason), msg,
			sizeof(msg));
	ck_assert_str_eq(reason, "notFound");
	ck_assert_str_eq(msg, "No such object: bkt/ds/a");
	gcs_error_parse(body2, strlen(body2), reason, sizeof(reason), msg,
			sizeof(msg));
	ck_assert_str_eq(reason, "PERMISSION_DENIED");
	/* Only printable ASCII reaches the log. */
	ck_assert_str_eq(msg, "denied ??");
	/* The emulator's 404s are plain text. */
	gcs_error_parse("No such object: b/k\nmore", 24, reason, sizeof(reason),
			msg, sizeof(msg));
	ck_assert_str_eq(reason, "");
	ck_assert_str_eq(msg, "No such object: b/k");
	gcs_error_parse("<html><body>502</body></html>", 29, reason,
			sizeof(reason), msg, sizeof(msg));
	ck_assert_str_eq(reason, "");
	ck_assert_str_eq(msg, "");
	gcs_error_parse("{\"error\":\"x\"}", 13, reason, sizeof(reason), msg,
			sizeof(msg));
	ck_assert_str_eq(reason, "");
	ck_assert_str_eq(msg, "");
	gcs_error_parse(NULL, 0, reason, sizeof(reason), msg, sizeof(msg));
	ck_assert_str_eq(reason, "");
	gcs_error_parse(body, strlen(body), tiny, sizeof(tiny), msg,
			sizeof(msg));
	ck_assert_str_eq(tiny, "not");
}
END_TEST

START_TEST(test_error_map)
{
	ck_assert_int_eq(gcs_error_errno(200, NULL), 0);
	ck_assert_int_eq(gcs_error_errno(206, "notFound"), 0);
	ck_assert_int_eq(gcs_error_errno(404, NULL), -ENOENT);
	ck_assert_int_eq(gcs_error_errno(404, "notFound"), -ENOENT);
	ck_assert_int_eq(gcs_error_errno(401, ""), -EACCES);
	ck_assert_int_eq(gcs_error_errno(403, "forbidden"), -EACCES);
	ck_assert_int_eq(gcs_error_errno(400, "userProjectMissing"), -EACCES);
	ck_assert_int_eq(gcs_error_errno(403, "PERMISSION_DENIED"), -EACCES);
	ck_assert_int_eq(gcs_error_errno(412, NULL), -ESTALE);
	ck_assert_int_eq(gcs_error_errno(412, "conditionNotMet"), -ESTALE);
	ck_assert_int_eq(gcs_error_errno(416, NULL), -ERANGE);
	ck_assert_int_eq(gcs_error_errno(429, "rateLimitExceeded"), -EIO);
	ck_assert_int_eq(gcs_error_errno(503, "backendError"), -EIO);
	ck_assert_int_eq(gcs_error_errno(500, NULL), -EIO);
	ck_assert_int_eq(gcs_error_errno(400, "invalid"), -EIO);
	ck_assert_int_eq(gcs_error_errno(418, "somethingNew"), -EIO);
}
END_TEST

/* --- crc32c encodings ---------------------------------------------------- */

START_TEST(test_crc32c_encodings)
{
	uint32_t c = 0;

	ck_assert_int_eq(gcs_crc32c_decode("4waSgw==", 8, &c), 0);
	ck_assert_uint_eq(c, 0xE3069283u);
	ck_assert_int_eq(gcs_crc32c_decode("AAAAAA==", 8, &c), 0);
	ck_assert_uint_eq(c, 0);
	ck_assert_int_eq(gcs_crc32c_decode("/////w==", 8, &c), 0);
	ck_assert_uint_eq(c, 0xffffffffu);
	ck_assert_int_eq(gcs_crc32c_decode("4waSgw=", 7, &c), -EINVAL);
	ck_assert_int_eq(gcs_crc32c_decode("4waSgw", 6, &c), -EINVAL);
	ck_assert_int_eq(gcs_crc32c_decode("4waSg!==", 8, &c), -EINVAL);
	/* Non-canonical: bits past the 32nd set. */
	ck_assert_int_eq(gcs_crc32c_decode("4waSgx==", 8, &c), -EINVAL);
	ck_assert_int_eq(gcs_crc32c_decode("4wa\0gw==", 8, &c), -EINVAL);

	ck_assert_int_eq(gcs_hash_crc32c("crc32c=4waSgw==", &c), 0);
	ck_assert_uint_eq(c, 0xE3069283u);
	c = 0;
	ck_assert_int_eq(
		gcs_hash_crc32c("md5=XrY7u+Ae7tCTyyK7j1rNww==, crc32c=4waSgw==",
				&c),
		0);
	ck_assert_uint_eq(c, 0xE3069283u);
	ck_assert_int_eq(gcs_hash_crc32c("crc32c=yZRlqg==,md5=XrY7u+Ae7t", &c),
			 0);
	ck_assert_uint_eq(c, 0xc99465aau);
	ck_assert_int_eq(gcs_hash_crc32c("md5=XrY7u+Ae7tCTyyK7j1rNww==", &c),
			 -ENOENT);
	ck_assert_int_eq(gcs_hash_crc32c("", &c), -ENOENT);
	ck_assert_int_eq(gcs_hash_crc32c("crc32c=bogus", &c), -EINVAL);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "url_parse", test_url_parse },
		{ "endpoint", test_endpoint },
		{ "endpoint_token_ok", test_endpoint_token_ok },
		{ "encode", test_encode },
		{ "object_path", test_object_path },
		{ "list_query", test_list_query },
		{ "list_parse", test_list_parse },
		{ "list_parse_malformed", test_list_parse_malformed },
		{ "object_parse", test_object_parse },
		{ "error_parse", test_error_parse },
		{ "error_map", test_error_map },
		{ "crc32c_encodings", test_crc32c_encodings },
	};
	return unit_run(
		unit_suite("gcs", cases, sizeof(cases) / sizeof(cases[0])));
}
