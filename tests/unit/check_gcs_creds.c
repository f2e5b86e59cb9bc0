/*
 * check_gcs_creds: the GCS credential documents (backends/gcs_jwt.h) and
 * the parts of the chain that need no server (backends/gcs_creds.h).
 *
 * The RSA key is generated here at test time, so no private key is ever
 * committed. The JWT is checked the way Google's token endpoint checks it:
 * split at the dots, each part base64url-decoded, the RS256 signature
 * verified with the public half, then the claims.
 */
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/gcs_creds.h"
#include "backends/gcs_jwt.h"
#include "backends/http.h"
#include "tests/unit/unit.h"
#include "util/log.h"

#define EMAIL "reader@test-project.iam.gserviceaccount.com"
#define TOKEN_URI "http://127.0.0.1:9/token"

static char tmpdir[64];

/* A fresh RSA key (or EC when ec) and its PEM text (malloc'd). */
static EVP_PKEY *new_key(int ec, char **pem)
{
	EVP_PKEY *pk = ec ? EVP_EC_gen("P-256") : EVP_RSA_gen(2048);
	BIO *bio = BIO_new(BIO_s_mem());
	char *data;
	long n;

	ck_assert_ptr_nonnull(pk);
	ck_assert_int_eq(
		PEM_write_bio_PrivateKey(bio, pk, NULL, NULL, 0, NULL, NULL),
		1);
	n = BIO_get_mem_data(bio, &data);
	*pem = strndup(data, (size_t)n);
	BIO_free(bio);
	return pk;
}

/* A service-account key file's JSON; fields NULL are left out. */
static char *sa_json(const char *type, const char *email, const char *pem,
		     const char *kid, const char *uri)
{
	json_t *o = json_object();
	char *s;

	if (type)
		json_object_set_new(o, "type", json_string(type));
	if (email)
		json_object_set_new(o, "client_email", json_string(email));
	if (pem)
		json_object_set_new(o, "private_key", json_string(pem));
	if (kid)
		json_object_set_new(o, "private_key_id", json_string(kid));
	if (uri)
		json_object_set_new(o, "token_uri", json_string(uri));
	json_object_set_new(o, "project_id", json_string("test-project"));
	s = json_dumps(o, JSON_INDENT(2));
	json_decref(o);
	return s;
}

/* base64url (no padding) to bytes; returns the length or -1. */
static long b64url_decode(const char *s, size_t n, unsigned char *out)
{
	unsigned v = 0, bits = 0;
	long len = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqr"
				  "stuvwxyz0123456789-_";
		const char *c = strchr(abc, s[i]);

		if (c == NULL || s[i] == '\0')
			return -1;
		v = v << 6 | (unsigned)(c - abc);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[len++] = (unsigned char)(v >> bits);
		}
	}
	return len;
}

static json_t *decode_part(const char *s, size_t n)
{
	unsigned char buf[4096];
	long len = b64url_decode(s, n, buf);

	ck_assert_int_gt(len, 0);
	return json_loadb((const char *)buf, (size_t)len, 0, NULL);
}

START_TEST(test_b64url)
{
	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} v[] = {
		{ "", 0, "" },
		{ "f", 1, "Zg" },
		{ "fo", 2, "Zm8" },
		{ "foo", 3, "Zm9v" },
		{ "foob", 4, "Zm9vYg" },
		{ "\xfb\xff", 2, "-_8" },
		{ "\xff\xfe\xfd", 3, "__79" },
	};
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char *s = gcs_jwt_b64url((const unsigned char *)v[i].in,
					 v[i].len);

		ck_assert_str_eq(s, v[i].out);
		free(s);
	}
}
END_TEST

START_TEST(test_jwt_signed_and_verified)
{
	char *pem, *text, *jwt, why[160];
	EVP_PKEY *pk = new_key(0, &pem);
	struct gcs_jwt_key *k;
	const char *d1, *d2;
	unsigned char sig[1024];
	long sig_len;
	json_t *head, *claims;
	EVP_MD_CTX *ctx;
	int64_t iat = 1700000000;

	text = sa_json("service_account", EMAIL, pem, "kid-123", TOKEN_URI);
	ck_assert_int_eq(
		gcs_jwt_key_parse(text, strlen(text), &k, why, sizeof(why)), 0);
	ck_assert_int_eq(k->type, GCS_JWT_SERVICE_ACCOUNT);
	ck_assert_str_eq(k->client_email, EMAIL);
	ck_assert_str_eq(k->token_uri, TOKEN_URI);
	ck_assert_int_eq(gcs_jwt_sign(k, GCS_JWT_SCOPE, iat, &jwt), 0);
	ck_assert_ptr_null(strpbrk(jwt, "=+/ \n"));

	/* Split, then verify the signature over "header.claims". */
	d1 = strchr(jwt, '.');
	ck_assert_ptr_nonnull(d1);
	d2 = strchr(d1 + 1, '.');
	ck_assert_ptr_nonnull(d2);
	ck_assert_ptr_null(strchr(d2 + 1, '.'));
	sig_len = b64url_decode(d2 + 1, strlen(d2 + 1), sig);
	ck_assert_int_eq(sig_len, 256);
	ctx = EVP_MD_CTX_new();
	ck_assert_int_eq(
		EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pk), 1);
	ck_assert_int_eq(EVP_DigestVerify(ctx, sig, (size_t)sig_len,
					  (const unsigned char *)jwt,
					  (size_t)(d2 - jwt)),
			 1);
	EVP_MD_CTX_free(ctx);
	/* A flipped bit in the claims fails the check. */
	jwt[d1 - jwt + 3] ^= 1;
	ctx = EVP_MD_CTX_new();
	ck_assert_int_eq(
		EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pk), 1);
	ck_assert_int_ne(EVP_DigestVerify(ctx, sig, (size_t)sig_len,
					  (const unsigned char *)jwt,
					  (size_t)(d2 - jwt)),
			 1);
	EVP_MD_CTX_free(ctx);
	jwt[d1 - jwt + 3] ^= 1;

	head = decode_part(jwt, (size_t)(d1 - jwt));
	ck_assert_ptr_nonnull(head);
	ck_assert_str_eq(json_string_value(json_object_get(head, "alg")),
			 "RS256");
	ck_assert_str_eq(json_string_value(json_object_get(head, "typ")),
			 "JWT");
	ck_assert_str_eq(json_string_value(json_object_get(head, "kid")),
			 "kid-123");
	claims = decode_part(d1 + 1, (size_t)(d2 - d1 - 1));
	ck_assert_ptr_nonnull(claims);
	ck_assert_str_eq(json_string_value(json_object_get(claims, "iss")),
			 EMAIL);
	ck_assert_str_eq(json_string_value(json_object_get(claims, "scope")),
			 "https://www.googleapis.com/auth/"
			 "devstorage.read_only");
	ck_assert_str_eq(json_string_value(json_object_get(claims, "aud")),
			 TOKEN_URI);
	ck_assert_int_eq(json_integer_value(json_object_get(claims, "iat")),
			 iat);
	ck_assert_int_gt(json_integer_value(json_object_get(claims, "exp")),
			 iat);
	ck_assert_int_le(json_integer_value(json_object_get(claims, "exp")),
			 iat + 3600);
	ck_assert_int_eq(json_object_size(claims), 5);
	json_decref(head);
	json_decref(claims);
	free(jwt);
	gcs_jwt_key_free(k);
	free(text);

	/* No private_key_id: no kid; no token_uri: Google's. */
	text = sa_json("service_account", EMAIL, pem, NULL, NULL);
	ck_assert_int_eq(
		gcs_jwt_key_parse(text, strlen(text), &k, why, sizeof(why)), 0);
	ck_assert_str_eq(k->token_uri, "https://oauth2.googleapis.com/token");
	ck_assert_int_eq(gcs_jwt_sign(k, GCS_JWT_SCOPE, iat, &jwt), 0);
	head = decode_part(jwt, strcspn(jwt, "."));
	ck_assert_ptr_null(json_object_get(head, "kid"));
	json_decref(head);
	free(jwt);
	gcs_jwt_key_free(k);
	free(text);
	free(pem);
	EVP_PKEY_free(pk);
}
END_TEST

START_TEST(test_token_request_bodies)
{
	char *pem, *text, *body, *jwt, why[160];
	EVP_PKEY *pk = new_key(0, &pem);
	struct gcs_jwt_key *k;
	const char *au = "{\"type\": \"authorized_user\", \"client_id\": "
			 "\"cid.apps.googleusercontent.com\", "
			 "\"client_secret\": \"s3cr&t=x\", "
			 "\"refresh_token\": \"1//r+t/x\"}";

	text = sa_json("service_account", EMAIL, pem, "k", TOKEN_URI);
	ck_assert_int_eq(
		gcs_jwt_key_parse(text, strlen(text), &k, why, sizeof(why)), 0);
	ck_assert_int_eq(gcs_jwt_token_request(k, time(NULL), &body), 0);
	ck_assert_msg(strncmp(body,
			      "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-"
			      "type%3Ajwt-bearer&assertion=ey",
			      72) == 0,
		      "body %.80s", body);
	jwt = strstr(body, "&assertion=") + 11;
	ck_assert_int_eq(strspn(jwt, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmno"
				     "pqrstuvwxyz0123456789-_."),
			 strlen(jwt));
	free(body);
	gcs_jwt_key_free(k);
	free(text);

	ck_assert_int_eq(
		gcs_jwt_key_parse(au, strlen(au), &k, why, sizeof(why)), 0);
	ck_assert_int_eq(k->type, GCS_JWT_AUTHORIZED_USER);
	ck_assert_str_eq(k->token_uri, "https://oauth2.googleapis.com/token");
	ck_assert_int_eq(gcs_jwt_sign(k, GCS_JWT_SCOPE, 1, &body), -EINVAL);
	ck_assert_int_eq(gcs_jwt_token_request(k, time(NULL), &body), 0);
	ck_assert_str_eq(body, "grant_type=refresh_token&client_id=cid.apps."
			       "googleusercontent.com&client_secret=s3cr%26t%"
			       "3Dx&refresh_token=1%2F%2Fr%2Bt%2Fx");
	free(body);
	gcs_jwt_key_free(k);
	free(pem);
	EVP_PKEY_free(pk);
}
END_TEST

/* Parses text, expecting rc; why must name want and hold no secret. */
static void bad_key(const char *text, int rc, const char *want)
{
	struct gcs_jwt_key *k = (void *)0x1;
	char why[160];

	ck_assert_int_eq(
		gcs_jwt_key_parse(text, strlen(text), &k, why, sizeof(why)),
		rc);
	ck_assert_ptr_eq(k, (void *)0x1);
	ck_assert_msg(strstr(why, want) != NULL, "why \"%s\" lacks \"%s\"", why,
		      want);
	ck_assert_ptr_null(strstr(why, "BEGIN"));
	ck_assert_ptr_null(strstr(why, "SECRET"));
}

START_TEST(test_key_file_bad)
{
	char *pem, *ecpem, *t, *huge;
	EVP_PKEY *pk = new_key(0, &pem), *ec = new_key(1, &ecpem);
	const char *au_no_rt = "{\"type\": \"authorized_user\", \"client_id\": "
			       "\"c\", \"client_secret\": \"SECRET\"}";

	bad_key("SECRET not json", -EBADMSG, "not JSON");
	bad_key("[\"SECRET\"]", -EBADMSG, "not a JSON object");
	bad_key("{\"type\": \"service_account\"", -EBADMSG, "not JSON");
	bad_key("{}", -EBADMSG, "\"type\"");
	bad_key("{\"type\": 7}", -EBADMSG, "\"type\"");
	bad_key("{\"type\": \"external_account\"}", -ENOTSUP,
		"external_account");
	bad_key("{\"type\": \"SECRET!\"}", -ENOTSUP, "not service_account");
	bad_key(au_no_rt, -EBADMSG, "\"refresh_token\" is missing");

	t = sa_json("service_account", NULL, pem, "k", NULL);
	bad_key(t, -EBADMSG, "\"client_email\" is missing");
	free(t);
	t = sa_json("service_account", EMAIL, NULL, "k", NULL);
	bad_key(t, -EBADMSG, "\"private_key\" is missing");
	free(t);
	t = sa_json("service_account", "", pem, "k", NULL);
	bad_key(t, -EBADMSG, "\"client_email\" is empty");
	free(t);
	t = sa_json("service_account", EMAIL,
		    "-----BEGIN PRIVATE KEY-----\nSECRET\n"
		    "-----END PRIVATE KEY-----\n",
		    "k", NULL);
	bad_key(t, -EBADMSG, "not a PEM private key");
	free(t);
	/* A truncated PEM. */
	pem[strlen(pem) / 2] = '\0';
	t = sa_json("service_account", EMAIL, pem, "k", NULL);
	bad_key(t, -EBADMSG, "not a PEM private key");
	free(t);
	t = sa_json("service_account", EMAIL, ecpem, "k", NULL);
	bad_key(t, -EBADMSG, "not an RSA key");
	free(t);
	bad_key("{\"type\": \"service_account\", \"client_email\": \"e\", "
		"\"private_key\": 42}",
		-EBADMSG, "\"private_key\" is not a string");

	/* Over 64 KiB: refused before parsing. */
	huge = malloc(GCS_JWT_FILE_MAX + 2);
	memset(huge, ' ', GCS_JWT_FILE_MAX + 1);
	huge[0] = '{';
	huge[GCS_JWT_FILE_MAX] = '}';
	huge[GCS_JWT_FILE_MAX + 1] = '\0';
	bad_key(huge, -EFBIG, "larger than");
	free(huge);
	free(pem);
	free(ecpem);
	EVP_PKEY_free(pk);
	EVP_PKEY_free(ec);
}
END_TEST

START_TEST(test_token_reply)
{
	static const struct {
		const char *text;
		const char *why;
	} bad[] = {
		{ "", "not a JSON object" },
		{ "ya29.SECRET", "not a JSON object" },
		{ "[1]", "not a JSON object" },
		{ "{\"expires_in\": 3600}", "no access_token" },
		{ "{\"access_token\": \"\", \"expires_in\": 3600}",
		  "no access_token" },
		{ "{\"access_token\": 5, \"expires_in\": 3600}",
		  "no access_token" },
		{ "{\"access_token\": \"ya29.SECRET\"}", "expires_in" },
		{ "{\"access_token\": \"ya29.SECRET\", \"expires_in\": 0}",
		  "out of range" },
		{ "{\"access_token\": \"ya29.SECRET\", \"expires_in\": -5}",
		  "out of range" },
		{ "{\"access_token\": \"ya29.SECRET\", \"expires_in\": "
		  "86401}",
		  "out of range" },
		{ "{\"access_token\": \"ya29.SECRET\", \"expires_in\": "
		  "\"3600\"}",
		  "not an integer" },
		{ "{\"access_token\": \"ya29.SECRET\", \"expires_in\": "
		  "3599.5}",
		  "not an integer" },
		{ "{\"access_token\": \"ya29.SECRET\", \"expires_in\": 3600, "
		  "\"token_type\": \"MAC\"}",
		  "not Bearer" },
		{ "{\"access_token\": \"ya29.SECRET\\r\\nX-Evil: 1\", "
		  "\"expires_in\": 3600}",
		  "not a plain token" },
		{ "{\"access_token\": \"ya29 SECRET\", \"expires_in\": 3600}",
		  "not a plain token" },
	};
	const char *good = "{\"access_token\": \"ya29.c.Abc-_.~+/=\", "
			   "\"expires_in\": 3599, \"token_type\": \"Bearer\", "
			   "\"scope\": \"x\"}";
	char *tok = NULL, why[128];
	int64_t exp = 0;
	size_t i;

	ck_assert_int_eq(gcs_jwt_token_parse(good, strlen(good), 1000, &tok,
					     &exp, why, sizeof(why)),
			 0);
	ck_assert_str_eq(tok, "ya29.c.Abc-_.~+/=");
	ck_assert_int_eq(exp, 1000 + 3599);
	free(tok);
	/* The metadata server's reply has the same shape; no token_type is
	 * fine too. */
	good = "{\"access_token\":\"t\",\"expires_in\":1}";
	ck_assert_int_eq(gcs_jwt_token_parse(good, strlen(good), 5, &tok, &exp,
					     why, sizeof(why)),
			 0);
	ck_assert_int_eq(exp, 6);
	free(tok);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tok = NULL;
		ck_assert_int_eq(
			gcs_jwt_token_parse(bad[i].text, strlen(bad[i].text), 0,
					    &tok, &exp, why, sizeof(why)),
			-EBADMSG);
		ck_assert_ptr_null(tok);
		ck_assert_msg(strstr(why, bad[i].why) != NULL,
			      "case %zu: why \"%s\"", i, why);
		ck_assert_ptr_null(strstr(why, "SECRET"));
	}
}
END_TEST

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* Clears the chain's environment; the metadata server is a closed port
 * on 127.0.0.1, never a real metadata address. */
static void clear_google_env(void)
{
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("CLOUDSDK_CONFIG");
	setenv("HOME", tmpdir, 1);
	setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
}

START_TEST(test_chain_errors)
{
	struct http_pool_options o = { 0 };
	struct http_pool *http;
	struct gcs_creds_provider *p = (void *)0x1;
	char path[256], gdir[128];
	time_t t0;

	ck_assert_int_eq(http_global_init(), 0);
	ck_assert_int_eq(http_pool_new(&o, &http), 0);
	clear_google_env();

	/* Nothing configured: the metadata probe fails fast, -EACCES. */
	t0 = time(NULL);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	ck_assert_int_lt(time(NULL) - t0, 10);
	ck_assert_ptr_eq(p, (void *)0x1);

	/* A named file that is missing, not JSON, or of an unknown type is
	 * an error, never a fall-through to gcloud's file. */
	snprintf(gdir, sizeof(gdir), "%s/gcloud", tmpdir);
	mkdir(gdir, 0700);
	setenv("CLOUDSDK_CONFIG", gdir, 1);
	snprintf(path, sizeof(path), "%s/application_default_credentials.json",
		 gdir);
	write_file(path, "{\"type\": \"authorized_user\", \"client_id\": "
			 "\"c\", \"client_secret\": \"s\", \"refresh_token\": "
			 "\"r\", \"token_uri\": \"http://10.1.2.3/token\"}");
	snprintf(path, sizeof(path), "%s/missing.json", tmpdir);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	snprintf(path, sizeof(path), "%s/bad.json", tmpdir);
	write_file(path, "not json");
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	write_file(path, "{\"type\": \"external_account\"}");
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	/* A directory is unreadable as a file. */
	setenv("GOOGLE_APPLICATION_CREDENTIALS", tmpdir, 1);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);

	/* gcloud's file with a plain-http token_uri off loopback is refused
	 * before anything is sent. */
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	ck_assert_ptr_eq(p, (void *)0x1);
	gcs_creds_provider_free(NULL);
	http_pool_free(http);
}
END_TEST

/* Starts one of the fake servers of tests/integration/gcs (python3, run
 * from the source root as make does) with its log in the temp dir; sets
 * *pid and returns its port. */
static int start_server(const char *script, const char *name,
			const char *const *extra, pid_t *pid)
{
	char port_file[256], log[256], path[256];
	const char *argv[24];
	size_t n = 0;
	int i, port = 0;
	FILE *f;

	snprintf(port_file, sizeof(port_file), "%s/%s.port", tmpdir, name);
	snprintf(log, sizeof(log), "%s/%s.log", tmpdir, name);
	snprintf(path, sizeof(path), "tests/integration/gcs/%s", script);
	argv[n++] = "/usr/bin/python3";
	argv[n++] = path;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	argv[n++] = "--log";
	argv[n++] = log;
	while (extra != NULL && *extra != NULL && n < 23)
		argv[n++] = *extra++;
	argv[n] = NULL;
	unlink(port_file);
	*pid = fork();
	ck_assert_int_ge(*pid, 0);
	if (*pid == 0) {
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (i = 0; i < 300 && port == 0; i++) {
		f = fopen(port_file, "r");
		if (f == NULL || fscanf(f, "%d", &port) != 1)
			usleep(50000);
		if (f != NULL)
			fclose(f);
	}
	ck_assert_msg(port > 0, "%s did not start (python3-jwt missing?)",
		      script);
	return port;
}

static void stop_server(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* Lines in a server's log holding needle. */
static int log_count(const char *name, const char *needle)
{
	char path[256], line[8192];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.log", tmpdir, name);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

/* Writes the public half of pk to path. */
static void write_pubkey(EVP_PKEY *pk, const char *path)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(PEM_write_PUBKEY(f, pk), 1);
	fclose(f);
}

/* A service-account key file at path for the token server at port. */
static void write_sa_file(const char *path, const char *pem, int port)
{
	char uri[64], *t;

	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/token", port);
	t = sa_json("service_account", EMAIL, pem, "kid-1", uri);
	write_file(path, t);
	free(t);
}

/* The chain's order against real local servers: the named key file beats
 * gcloud's file beats the metadata server; each answers with its own
 * token. A token endpoint that rejects the signature fails the open. */
START_TEST(test_chain_order_servers)
{
	struct http_pool_options o = { 0 };
	struct http_pool *http;
	struct gcs_creds_provider *p;
	struct gcs_token *t;
	char pub[256], other_pub[256], sa[256], gdir[256], adc[512], md[32];
	char *pem, *other_pem, uri[64];
	EVP_PKEY *pk = new_key(0, &pem), *other = new_key(0, &other_pem);
	const char *tok_args[] = { "--public-key",
				   pub,
				   "--email",
				   EMAIL,
				   "--kid",
				   "kid-1",
				   "--client-id",
				   "cid",
				   "--client-secret",
				   "csecret",
				   "--refresh-token",
				   "1//rtoken",
				   NULL };
	const char *noflavor[] = { "--no-flavor", NULL };
	const char *noaccount[] = { "--no-account", NULL };
	pid_t tok_pid, md_pid;
	int tok_port, md_port;

	clear_google_env();
	snprintf(pub, sizeof(pub), "%s/pub.pem", tmpdir);
	snprintf(other_pub, sizeof(other_pub), "%s/other.pem", tmpdir);
	write_pubkey(pk, pub);
	write_pubkey(other, other_pub);
	tok_port = start_server("token_server.py", "token", tok_args, &tok_pid);
	md_port = start_server("metadata_server.py", "md", NULL, &md_pid);
	ck_assert_int_eq(http_global_init(), 0);
	ck_assert_int_eq(http_pool_new(&o, &http), 0);

	snprintf(sa, sizeof(sa), "%s/sa.json", tmpdir);
	write_sa_file(sa, pem, tok_port);
	snprintf(gdir, sizeof(gdir), "%s/gcloud", tmpdir);
	mkdir(gdir, 0700);
	snprintf(adc, sizeof(adc), "%s/application_default_credentials.json",
		 gdir);
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/token", tok_port);
	{
		json_t *j = json_pack(
			"{s:s, s:s, s:s, s:s, s:s}", "type", "authorized_user",
			"client_id", "cid", "client_secret", "csecret",
			"refresh_token", "1//rtoken", "token_uri", uri);
		char *text = json_dumps(j, 0);

		write_file(adc, text);
		free(text);
		json_decref(j);
	}
	snprintf(md, sizeof(md), "127.0.0.1:%d", md_port);
	setenv("GCE_METADATA_HOST", md, 1);
	setenv("CLOUDSDK_CONFIG", gdir, 1);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);

	ck_assert_int_eq(gcs_creds_provider_new(http, &p), 0);
	t = gcs_creds_get(p);
	ck_assert_msg(strncmp(t->access_token, "ya29.fake-sa-", 13) == 0,
		      "token %s", t->access_token);
	ck_assert_int_gt(t->expires, time(NULL) + 3000);
	gcs_token_put(t);
	gcs_creds_provider_free(p);
	ck_assert_int_eq(log_count("token", "\"grant\": \"sa\", \"ok\": true"),
			 1);

	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), 0);
	t = gcs_creds_get(p);
	ck_assert_msg(strncmp(t->access_token, "ya29.fake-user-", 15) == 0,
		      "token %s", t->access_token);
	gcs_token_put(t);
	gcs_creds_provider_free(p);

	unlink(adc);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), 0);
	t = gcs_creds_get(p);
	ck_assert_msg(strncmp(t->access_token, "ya29.fake-md-", 13) == 0,
		      "token %s", t->access_token);
	gcs_token_put(t);
	gcs_creds_provider_free(p);
	ck_assert_int_eq(log_count("md", "\"flavor\": \"Google\""), 1);

	/* A key the endpoint does not know: its signature check fails and
	 * so does the open; no fall-through to the metadata server. */
	write_sa_file(sa, other_pem, tok_port);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	ck_assert_int_eq(log_count("token", "Signature verification failed"),
			 1);
	ck_assert_int_eq(log_count("md", "\"flavor\""), 1);

	/* A server that answers 200 without Metadata-Flavor: Google is not
	 * a metadata server: its token is refused. */
	stop_server(md_pid);
	md_port = start_server("metadata_server.py", "md2", noflavor, &md_pid);
	snprintf(md, sizeof(md), "127.0.0.1:%d", md_port);
	setenv("GCE_METADATA_HOST", md, 1);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	ck_assert_int_eq(log_count("md2", "\"token\": \"ya29"), 1);
	/* A metadata server without a service account: -EACCES too (an
	 * error of its own, not "no credentials"). */
	stop_server(md_pid);
	md_port = start_server("metadata_server.py", "md3", noaccount, &md_pid);
	snprintf(md, sizeof(md), "127.0.0.1:%d", md_port);
	setenv("GCE_METADATA_HOST", md, 1);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	ck_assert_int_eq(log_count("md3", "\"flavor\": \"Google\""), 1);

	http_pool_free(http);
	stop_server(tok_pid);
	stop_server(md_pid);
	free(pem);
	free(other_pem);
	EVP_PKEY_free(pk);
	EVP_PKEY_free(other);
}
END_TEST

/* Short-lived tokens are replaced in the background: the token readers
 * get changes without them asking, and the endpoint sees new grants. */
START_TEST(test_refresh_servers)
{
	struct http_pool_options o = { 0 };
	struct http_pool *http;
	struct gcs_creds_provider *p;
	struct gcs_token *first, *t;
	char pub[256], sa[256], *pem;
	EVP_PKEY *pk = new_key(0, &pem);
	const char *tok_args[] = { "--public-key", pub, "--email", EMAIL,
				   "--expires-in", "2", NULL };
	pid_t tok_pid;
	int tok_port, i, changed = 0;

	clear_google_env();
	snprintf(pub, sizeof(pub), "%s/pub.pem", tmpdir);
	write_pubkey(pk, pub);
	tok_port =
		start_server("token_server.py", "refresh", tok_args, &tok_pid);
	snprintf(sa, sizeof(sa), "%s/sa.json", tmpdir);
	write_sa_file(sa, pem, tok_port);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);
	ck_assert_int_eq(http_global_init(), 0);
	ck_assert_int_eq(http_pool_new(&o, &http), 0);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), 0);
	first = gcs_creds_get(p);
	/* Refreshed at half the 2 s lifetime; 30 s is generous. */
	for (i = 0; i < 300 && changed < 2; i++) {
		t = gcs_creds_get(p);
		if (strcmp(t->access_token, first->access_token) != 0) {
			changed++;
			gcs_token_put(first);
			first = gcs_creds_get(p);
		}
		gcs_token_put(t);
		usleep(100000);
	}
	ck_assert_int_eq(changed, 2);
	/* The free stops the thread promptly, the reference stays valid. */
	gcs_creds_provider_free(p);
	ck_assert_int_eq(strncmp(first->access_token, "ya29.fake-sa-", 13), 0);
	gcs_token_put(first);
	ck_assert_int_ge(log_count("refresh", "\"ok\": true"), 3);
	ck_assert_int_eq(log_count("refresh", "\"ok\": false"), 0);
	http_pool_free(http);
	stop_server(tok_pid);
	free(pem);
	EVP_PKEY_free(pk);
}
END_TEST

/* A token_uri that only looks like loopback: user info before the host,
 * or a DNS name starting with 127. Refused before anything is sent, with
 * an error naming the file and the key, never the value. */
START_TEST(test_token_uri_not_loopback)
{
	static const char *const bad[] = {
		"http://127.0.0.1@evil.example/token",
		"http://localhost:80@evil.example/",
		"http://127.evil.example/",
		"http://user@127.0.0.1/token",
		"http://[::1]@evil.example/",
		"ftp://127.0.0.1/token",
		"http://10.1.2.3/token",
		"not a url",
	};
	static const char *const good[] = {
		"http://127.0.0.2:9/token",
		"http://localhost:9/token",
		"http://[::1]:9/token",
		"HTTP://127.1.2.3:9/token",
	};
	struct http_pool_options o = { 0 };
	struct http_pool *http;
	struct gcs_creds_provider *p = (void *)0x1;
	struct log_errors le;
	char *pem, path[256], *t;
	EVP_PKEY *pk = new_key(0, &pem);
	size_t i;

	ck_assert_int_eq(http_global_init(), 0);
	ck_assert_int_eq(http_pool_new(&o, &http), 0);
	clear_google_env();
	snprintf(path, sizeof(path), "%s/sa-uri.json", tmpdir);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = sa_json("service_account", EMAIL, pem, "kid-1", bad[i]);
		write_file(path, t);
		free(t);
		ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
		ck_assert_ptr_eq(p, (void *)0x1);
		log_errors_get(&le);
		ck_assert_msg(strstr(le.last, path) != NULL &&
				      strstr(le.last, "token_uri") != NULL,
			      "%s: last error: %s", bad[i], le.last);
		ck_assert_msg(strstr(le.last, "evil") == NULL &&
				      strstr(le.last, "10.1.2.3") == NULL,
			      "%s: the error quotes the value: %s", bad[i],
			      le.last);
	}
	/* Real loopback forms pass the check and are asked (a closed
	 * port: the endpoint does not answer). */
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		t = sa_json("service_account", EMAIL, pem, "kid-1", good[i]);
		write_file(path, t);
		free(t);
		ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
		log_errors_get(&le);
		ck_assert_msg(strstr(le.last, "did not answer") != NULL,
			      "%s: last error: %s", good[i], le.last);
	}
	http_pool_free(http);
	free(pem);
	EVP_PKEY_free(pk);
}
END_TEST

/* Off Google Cloud with nothing configured: exactly one error line, the
 * chain's, not the HTTP layer's as well. */
START_TEST(test_no_credentials_one_error)
{
	struct http_pool_options o = { 0 };
	struct http_pool *http;
	struct gcs_creds_provider *p = (void *)0x1;
	struct log_errors before, after;

	ck_assert_int_eq(http_global_init(), 0);
	ck_assert_int_eq(http_pool_new(&o, &http), 0);
	clear_google_env();
	log_errors_get(&before);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), -EACCES);
	log_errors_get(&after);
	ck_assert_msg(after.errors - before.errors == 1,
		      "%llu error lines, the last: %s",
		      after.errors - before.errors, after.last);
	ck_assert_ptr_nonnull(strstr(after.last, "no Google credentials"));
	http_pool_free(http);
}
END_TEST

/* A FIFO as GOOGLE_APPLICATION_CREDENTIALS (no writer) must fail at once
 * with an error naming it, not block the mount forever. The chain runs in
 * a child, bounded by 30 s. */
START_TEST(test_credentials_fifo)
{
	char path[256];
	pid_t pid;
	int i, status = -1;

	clear_google_env();
	snprintf(path, sizeof(path), "%s/creds.fifo", tmpdir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct http_pool_options o = { 0 };
		struct http_pool *http;
		struct gcs_creds_provider *p;
		struct log_errors le;
		int rc;

		if (http_global_init() < 0 || http_pool_new(&o, &http) < 0)
			_exit(3);
		rc = gcs_creds_provider_new(http, &p);
		log_errors_get(&le);
		_exit(rc == -EACCES && strstr(le.last, path) != NULL &&
				      strstr(le.last, "not a regular file") !=
					      NULL
			      ? 0
			      : 1);
	}
	for (i = 0; i < 300; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		usleep(100000);
	}
	if (i == 300) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		ck_abort_msg("the chain blocked on a FIFO for 30 s");
	}
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the chain did not refuse the FIFO with a clear error "
		      "(status %d)",
		      status);
}
END_TEST

/* The machine's http_proxy must not carry a metadata or a loopback token
 * request: a proxy would see the token in clear and could answer with a
 * stranger's identity (Metadata-Flavor forwarded). curl proxies even
 * 127.0.0.1 unless told not to. */
START_TEST(test_proxy_bypassed)
{
	struct http_pool_options o = { 0 };
	struct http_pool *http;
	struct gcs_creds_provider *p;
	struct gcs_token *t;
	char pub[256], sa[256], md[32], px[64], *pem;
	EVP_PKEY *pk = new_key(0, &pem);
	const char *tok_args[] = { "--public-key", pub, "--email", EMAIL,
				   NULL };
	pid_t tok_pid, md_pid, px_pid;
	int tok_port, md_port, px_port;

	clear_google_env();
	snprintf(pub, sizeof(pub), "%s/pub.pem", tmpdir);
	write_pubkey(pk, pub);
	tok_port =
		start_server("token_server.py", "ptoken", tok_args, &tok_pid);
	md_port = start_server("metadata_server.py", "pmd", NULL, &md_pid);
	px_port = start_server("record_proxy.py", "proxy", NULL, &px_pid);
	snprintf(px, sizeof(px), "http://127.0.0.1:%d", px_port);
	setenv("http_proxy", px, 1);
	setenv("HTTPS_PROXY", px, 1);
	unsetenv("no_proxy");
	unsetenv("NO_PROXY");
	ck_assert_int_eq(http_global_init(), 0);
	ck_assert_int_eq(http_pool_new(&o, &http), 0);

	snprintf(md, sizeof(md), "127.0.0.1:%d", md_port);
	setenv("GCE_METADATA_HOST", md, 1);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), 0);
	t = gcs_creds_get(p);
	ck_assert_msg(strncmp(t->access_token, "ya29.fake-md-", 13) == 0,
		      "token %s", t->access_token);
	gcs_token_put(t);
	gcs_creds_provider_free(p);

	snprintf(sa, sizeof(sa), "%s/sa.json", tmpdir);
	write_sa_file(sa, pem, tok_port);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);
	ck_assert_int_eq(gcs_creds_provider_new(http, &p), 0);
	t = gcs_creds_get(p);
	ck_assert_msg(strncmp(t->access_token, "ya29.fake-sa-", 13) == 0,
		      "token %s", t->access_token);
	gcs_token_put(t);
	gcs_creds_provider_free(p);

	ck_assert_int_eq(log_count("proxy", "\"method\""), 0);
	ck_assert_int_eq(log_count("pmd", "\"flavor\": \"Google\""), 1);
	ck_assert_int_eq(log_count("ptoken", "\"ok\": true"), 1);
	unsetenv("http_proxy");
	unsetenv("HTTPS_PROXY");
	http_pool_free(http);
	stop_server(tok_pid);
	stop_server(md_pid);
	stop_server(px_pid);
	free(pem);
	EVP_PKEY_free(pk);
}
END_TEST

START_TEST(test_token_refs)
{
	struct gcs_token *t = gcs_token_new("abc", 42);

	ck_assert_str_eq(t->access_token, "abc");
	ck_assert_int_eq(t->expires, 42);
	__atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
	gcs_token_put(t);
	ck_assert_str_eq(t->access_token, "abc");
	gcs_token_put(t);
	gcs_token_put(NULL);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "b64url", test_b64url },
		{ "jwt_signed_and_verified", test_jwt_signed_and_verified },
		{ "token_request_bodies", test_token_request_bodies },
		{ "key_file_bad", test_key_file_bad },
		{ "token_reply", test_token_reply },
		{ "chain_errors", test_chain_errors },
		{ "token_refs", test_token_refs },
		{ "chain_order_servers", test_chain_order_servers },
		{ "refresh_servers", test_refresh_servers },
		{ "token_uri_not_loopback", test_token_uri_not_loopback },
		{ "no_credentials_one_error", test_no_credentials_one_error },
		{ "credentials_fifo", test_credentials_fifo },
		{ "proxy_bypassed", test_proxy_bypassed },
	};

	return unit_run_in_tmpdir(unit_suite("gcs_creds", cases,
					     sizeof(cases) / sizeof(cases[0])),
				  "/tmp/check_gcs_creds.XXXXXX", tmpdir,
				  sizeof(tmpdir));
}
