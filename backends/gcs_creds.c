/*
 * gcs_creds: see gcs_creds.h. This first part holds the shared token
 * object and reports that no credential source is configured; the chain
 * itself (key files, gcloud's ADC file, the metadata server, the refresh
 * thread) comes next.
 */
#include "backends/gcs_creds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

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
	explicit_bzero(t->access_token, strlen(t->access_token));
	free(t->access_token);
	free(t);
}

int gcs_creds_provider_new(struct http_pool *http,
			   struct gcs_creds_provider **out)
{
	(void)http;
	*out = NULL;
	log_msg(LOG_ERR, "gcs: no Google credentials found (set "
			 "GOOGLE_APPLICATION_CREDENTIALS, or anonymous = true "
			 "for a public bucket)");
	return -EACCES;
}

void gcs_creds_provider_free(struct gcs_creds_provider *p)
{
	(void)p;
}

struct gcs_token *gcs_creds_get(struct gcs_creds_provider *p)
{
	(void)p;
	return NULL;
}
