/*
 * s3_xml: the XML the S3 backend reads, parsed with expat: ListObjectsV2
 * pages, <Error> bodies and STS AssumeRoleWithWebIdentity answers.
 *
 * Elements are matched by local name only, never by namespace URI (S3
 * emulators use other namespaces than AWS). expat decodes entities
 * (ETags arrive as &quot;...&quot;) and character references. Pure: no I/O,
 * no globals; safe from any thread.
 */
#ifndef SHARDFS_S3_XML_H
#define SHARDFS_S3_XML_H

#include <stddef.h>
#include <stdint.h>

/* One <Contents> of a listing page. Strings are owned by the page. */
struct s3_xml_object {
	char *key; /* decoded when the page says EncodingType url */
	size_t key_len;
	char *etag;
	uint64_t size;
	int64_t mtime_ns; /* LastModified; 0 if absent or malformed */
};

struct s3_xml_list_page {
	struct s3_xml_object *objects;
	size_t count;
	int truncated;	  /* IsTruncated was true */
	char *next_token; /* NextContinuationToken, or NULL */
	int url_encoded;  /* EncodingType was url (keys were decoded) */
};

/* Parses one ListObjectsV2 page into *page (zeroed first; release with
 * s3_xml_list_page_fini, also after a failure). Returns 0, -EBADMSG for
 * malformed XML, a <Contents> without Key or Size, a <Contents> that is not
 * a child of the root or is inside another, a bad %XX in a url-encoded key,
 * or a document that is not a ListBucketResult, or -ENOMEM. */
int s3_xml_list_parse(const char *xml, size_t len,
		      struct s3_xml_list_page *page);

/* Frees what page owns; safe to call twice. */
void s3_xml_list_page_fini(struct s3_xml_list_page *page);

/* Reads <Error><Code>...<Message>... into code and message (each always
 * NUL-terminated, truncated to fit, "" when absent). Returns 0 if the body
 * is an <Error> document, else -EBADMSG (both strings then ""). */
int s3_xml_error_parse(const char *xml, size_t len, char *code, size_t code_cap,
		       char *message, size_t message_cap);

/* Temporary credentials from STS. Strings owned; free with
 * s3_xml_sts_fini. */
struct s3_xml_sts {
	char *access_key;
	char *secret_key;
	char *session_token;
	char *expiration; /* ISO 8601, as sent */
};

/* Parses an AssumeRoleWithWebIdentity (or AssumeRole) response. Returns 0
 * with all four strings set, -EBADMSG if the document is malformed or lacks
 * one, -ENOMEM. On failure *out holds nothing. */
int s3_xml_sts_parse(const char *xml, size_t len, struct s3_xml_sts *out);

/* Frees what sts owns; safe to call twice. */
void s3_xml_sts_fini(struct s3_xml_sts *sts);

/* Parses an ISO 8601 UTC time as S3 and STS write it
 * ("2024-05-01T12:34:56.789Z", fraction optional, "Z" or "+00:00") into
 * ns since the epoch. Returns 0, or -EINVAL when malformed or outside
 * what int64 ns hold (1677-09-21T00:12:43.145224192Z ..
 * 2262-04-11T23:47:16.854775807Z); *ns is then untouched. */
int s3_parse_iso8601(const char *s, int64_t *ns);

#endif
