/*
 * s3_read: ranged reads of the S3 backend (see s3.c for the design): a GET
 * with If-Match on the manifest's ETag, the answer's ETag and
 * Content-Range checked (objstore.c) before any byte reaches the caller's
 * buffer, a whole object of a single-part ETag checked against its MD5,
 * and the claim read_claim() hands to the cache (s3_etag_claim()).
 */
#include "backends/s3_impl.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/http.h"
#include "backends/objstore.h"
#include "util/hex.h"
#include "util/log.h"

/* Whole-object reads up to this size are checked against a single-part
 * ETag (the object's MD5): cheap next to the request, and it catches a
 * byte changed in transit, which nothing else here would. */
#define S3_MD5_MAX (UINT64_C(8) << 20)

struct read_ctx {
	struct objstore_range range;
	const char *etag; /* expected, or NULL */
	size_t etag_len;
	EVP_MD_CTX *md5;    /* while the reply is a whole object to check */
	bool whole_checked; /* this attempt's body matched the MD5 */
	/* From this attempt's headers (read_header()): */
	char sse[32]; /* x-amz-server-side-encryption, "" if none */
	bool sse_customer;
};

void s3_etag_claim(const char *etag, size_t etag_len, const char *sse,
		   bool sse_customer, struct backend_claim *out)
{
	memset(out, 0, sizeof(*out));
	/* SSE-KMS, DSSE-KMS and SSE-C objects have ETags that are not an
	 * MD5 of their bytes; so may any encryption not known here. */
	if (sse_customer || (sse != NULL && strcmp(sse, "AES256") != 0))
		return;
	if (etag == NULL || etag_len != 34 || etag[0] != '"' || etag[33] != '"')
		return;
	if (hex_decode(etag + 1, BACKEND_MD5_LEN, out->md5) < 0) {
		memset(out->md5, 0, sizeof(out->md5));
		return;
	}
	out->kind = BACKEND_CLAIM_MD5;
	out->source = "ETag";
}

/* The claim of this attempt's reply under etag (the pinned one, or the
 * reply's own). */
static void read_claim_of(const struct read_ctx *rc, const char *etag,
			  size_t etag_len, struct backend_claim *out)
{
	s3_etag_claim(etag, etag_len, rc->sse[0] ? rc->sse : NULL,
		      rc->sse_customer, out);
}

/* Keeps the headers that say whether the ETag is an MD5 (see
 * s3_etag_claim()). */
static void read_header(void *arg, const char *name, size_t name_len,
			const char *value, size_t value_len)
{
	struct read_ctx *rc = arg;
	static const char sse[] = "x-amz-server-side-encryption";
	static const char cust[] =
		"x-amz-server-side-encryption-customer-algorithm";

	if (name == NULL) { /* a new reply: forget the last one */
		rc->sse[0] = '\0';
		rc->sse_customer = false;
		return;
	}
	if (name_len == sizeof(sse) - 1 &&
	    strncasecmp(name, sse, name_len) == 0) {
		/* One too long for any known value is kept as one that
		 * is not AES256. */
		if (value_len >= sizeof(rc->sse))
			value_len = sizeof(rc->sse) - 1;
		memcpy(rc->sse, value, value_len);
		rc->sse[value_len] = '\0';
		if (value_len == 0)
			strcpy(rc->sse, "?");
	} else if (name_len == sizeof(cust) - 1 &&
		   strncasecmp(name, cust, name_len) == 0) {
		rc->sse_customer = true;
	}
}

/* The checks on a reply's status line and headers, before any byte of it
 * is used: the pinned version, then the range (objstore_range_reply).
 * Returns 0, -ESTALE (another version: final) or -EAGAIN (a wrong reply:
 * retried). */
static int read_reply_check(struct read_ctx *rc, struct http_response *resp)
{
	if (rc->etag != NULL && resp->etag[0] == '\0') {
		/* Without it the version cannot be told: a server that
		 * ignores If-Match could be sending any. */
		http_response_why(resp, "no ETag in the reply");
		return -EAGAIN;
	}
	if (rc->etag != NULL && (strlen(resp->etag) != rc->etag_len ||
				 memcmp(resp->etag, rc->etag, rc->etag_len)))
		return -ESTALE;
	return objstore_range_reply(&rc->range, resp);
}

/* Starts an MD5 of the reply when it is the whole object under a
 * single-part ETag that is its MD5 (s3_etag_claim()). */
static void read_md5_start(struct read_ctx *rc)
{
	const struct objstore_range *r = &rc->range;
	struct backend_claim claim;

	EVP_MD_CTX_free(rc->md5);
	rc->md5 = NULL;
	rc->whole_checked = false;
	if (r->offset != 0 || r->total != r->len || r->len > S3_MD5_MAX ||
	    rc->etag == NULL)
		return;
	read_claim_of(rc, rc->etag, rc->etag_len, &claim);
	if (claim.kind != BACKEND_CLAIM_MD5)
		return;
	rc->md5 = EVP_MD_CTX_new();
	if (rc->md5 != NULL &&
	    EVP_DigestInit_ex(rc->md5, EVP_md5(), NULL) != 1) {
		EVP_MD_CTX_free(rc->md5);
		rc->md5 = NULL;
	}
}

static int read_body(void *arg, struct http_response *resp, const char *data,
		     size_t len)
{
	struct read_ctx *rc = arg;
	int r;

	/* A retry delivers the body again from its start. */
	if (resp->body_seen == 0) {
		r = read_reply_check(rc, resp);
		if (r < 0)
			return r;
		read_md5_start(rc);
	}
	if (rc->md5 != NULL && EVP_DigestUpdate(rc->md5, data, len) != 1) {
		EVP_MD_CTX_free(rc->md5);
		rc->md5 = NULL;
	}
	return objstore_range_body(&rc->range, resp, data, len);
}

/* The checks once a reply is complete (objstore_range_complete), and a
 * whole object against its MD5. */
static int read_check(void *arg, struct http_response *resp)
{
	struct read_ctx *rc = arg;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	int r;

	if (resp->body_seen == 0) { /* no body: only the headers to check */
		r = read_reply_check(rc, resp);
		if (r < 0)
			return r;
	}
	r = objstore_range_complete(&rc->range, resp);
	if (r < 0 || rc->md5 == NULL)
		return r;
	r = EVP_DigestFinal_ex(rc->md5, md, &md_len);
	EVP_MD_CTX_free(rc->md5);
	rc->md5 = NULL;
	if (r != 1)
		return 0; /* no digest, no verdict */
	hex_encode(md, md_len, hex);
	if (strncasecmp(hex, rc->etag + 1, 32) != 0) {
		http_response_why(resp,
				  "the body's MD5 %s is not its ETag %.*s", hex,
				  (int)rc->etag_len, rc->etag);
		return -EAGAIN;
	}
	rc->whole_checked = true;
	return 0;
}

int s3_read_claim(struct backend *be, const struct backend_read *r,
		  size_t *nread, struct backend_claim *claim)
{
	struct s3_backend *sb = (struct s3_backend *)be;
	struct http_response resp = { 0 };
	struct read_ctx ctx = { .etag = r->etag, .etag_len = r->etag_len };
	struct s3_obj_req o = { 0 };
	char *etag_z = NULL;
	struct s3_req_ctx sc = { .sb = sb, .method = "GET", .query = "" };
	struct http_request req = { .method = "GET",
				    .prepare = s3_prepare,
				    .prepare_arg = &sc,
				    .on_header = read_header,
				    .header_arg = &ctx };
	int rc = -ENOMEM;

	if (objstore_range_start(&ctx.range, r, nread, claim, &req, read_body,
				 read_check, &ctx))
		return 0;
	sc.range = ctx.range.header;
	if (r->etag != NULL) {
		etag_z = strndup(r->etag, r->etag_len);
		if (etag_z == NULL)
			return -ENOMEM;
		sc.if_match = etag_z;
	}
	rc = s3_obj_req(sb, r->key, r->key_len, &sc, &req, &o);
	if (rc == 0)
		rc = http_perform(sb->http, &req, &resp);
	if (rc == -ESTALE)
		objstore_log_stale(o.what, "etag", r->etag, r->etag_len,
				   resp.etag);
	if (rc == 0)
		rc = objstore_range_result(&ctx.range, o.what, &resp, s3_fail,
					   nread);
	if (rc == 0 && claim != NULL) {
		read_claim_of(&ctx, resp.etag, strlen(resp.etag), claim);
		claim->checked = ctx.whole_checked;
	}
	EVP_MD_CTX_free(ctx.md5);
	http_response_fini(&resp);
	s3_obj_req_fini(&o);
	free(etag_z);
	return rc;
}
