/*
 * http_pool: the pool of libcurl easy handles behind http.h, and the rule
 * for reusing their connections (http.h, "Stray replies"). A
 * mutex-protected stack of idle handles, newest last. Handles are reset
 * (curl_easy_reset keeps their live connections) when they come back, so
 * no option of one request leaks into the next. Each handle keeps at most
 * one connection (http.c sets CURLOPT_MAXCONNECTS 1), so the socket
 * CURLINFO_ACTIVESOCKET names after a transfer is the only one its next
 * request can reuse: the one looked at for bytes nobody asked for when the
 * handle comes back, before a retry reuses it and when it is taken again.
 * A handle is taken again only after it rested HTTP_REUSE_AFTER_MS: the
 * newest handle that has, so few connections stay in use at a steady rate.
 */
#include "backends/backend.h"
#include "backends/http_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/clock.h"
#include "util/log.h"

int http_pool_new(const struct http_pool_options *opts, struct http_pool **out)
{
	struct http_pool *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return -ENOMEM;
	p->opts = *opts;
	if (p->opts.connect_timeout_ms == 0)
		p->opts.connect_timeout_ms = BACKEND_CONNECT_TIMEOUT_MS_DEFAULT;
	if (p->opts.request_timeout_ms == 0)
		p->opts.request_timeout_ms = BACKEND_REQUEST_TIMEOUT_MS_DEFAULT;
	if (p->opts.deadline_ms == 0)
		p->opts.deadline_ms = BACKEND_READ_TIMEOUT_MS_DEFAULT;
	if (opts->ca_bundle != NULL) {
		p->ca_bundle = strdup(opts->ca_bundle);
		if (p->ca_bundle == NULL) {
			free(p);
			return -ENOMEM;
		}
	}
	p->opts.ca_bundle = p->ca_bundle;
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void http_pool_free(struct http_pool *pool)
{
	size_t i;

	if (pool == NULL)
		return;
	for (i = 0; i < pool->n_idle; i++)
		curl_easy_cleanup(pool->idle[i].h);
	pthread_mutex_destroy(&pool->lock);
	free(pool->ca_bundle);
	free(pool);
}

/* Does the connection on sock hold anything to read: bytes, an end of
 * stream, an error? An HTTP/1 connection between two requests must hold
 * nothing: what it holds would be read as the next request's answer.
 * Logs bytes (a server or proxy that answers twice, or sends junk after
 * a reply) once in a while; an end of stream (a server that closed an
 * idle connection) is routine. */
static bool conn_has_input(curl_socket_t sock, const char *what)
{
	struct pollfd p = { .fd = sock, .events = POLLIN | POLLPRI };
	unsigned long quiet = 0;
	char c;
	int n;

	do
		n = poll(&p, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return false;
	if (n > 0 && (p.revents & (POLLIN | POLLPRI)) &&
	    recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1 &&
	    !log_limit("http stray bytes", &quiet))
		log_msg(LOG_WARNING,
			"%s: the server sent bytes after a complete reply on "
			"a kept-alive connection (a store or proxy that "
			"answers twice?): the connection is closed, never "
			"reused%s",
			what, quiet ? " (and earlier ones, not logged)" : "");
	return true;
}

/* The one connection h keeps after a transfer: its socket, or
 * CURL_SOCKET_BAD when curl closed it, and whether it speaks HTTP/1 (on
 * HTTP/2 every frame names its stream, so nothing can be misread). */
static void conn_of(CURL *h, curl_socket_t *sock, bool *h1)
{
	curl_socket_t s = CURL_SOCKET_BAD;
	long v = 0;

	if (curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK)
		s = CURL_SOCKET_BAD;
	if (curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &v) != CURLE_OK)
		v = 0;
	*sock = s;
	*h1 = s != CURL_SOCKET_BAD && v != CURL_HTTP_VERSION_2_0 &&
	      v != CURL_HTTP_VERSION_3;
}

bool http_conn_clean(CURL *h, const char *what)
{
	curl_socket_t sock;
	bool h1;

	conn_of(h, &sock, &h1);
	return !h1 || !conn_has_input(sock, what);
}

CURL *http_pool_get(struct http_pool *pool)
{
	struct idle_handle e;
	uint64_t now;
	size_t i;

	for (;;) {
		pthread_mutex_lock(&pool->lock);
		now = clock_now_ms();
		for (i = pool->n_idle; i > 0; i--) {
			e = pool->idle[i - 1];
			if (!e.h1 || now - e.since_ms >= HTTP_REUSE_AFTER_MS)
				break;
		}
		if (i == 0) {
			pthread_mutex_unlock(&pool->lock);
			return curl_easy_init();
		}
		memmove(&pool->idle[i - 1], &pool->idle[i],
			(pool->n_idle - i) * sizeof(pool->idle[0]));
		pool->n_idle--;
		pthread_mutex_unlock(&pool->lock);
		if (!e.h1 || !conn_has_input(e.sock, "http"))
			return e.h;
		curl_easy_cleanup(e.h); /* closes the connection */
	}
}

void http_pool_put(struct http_pool *pool, CURL *h, const char *what)
{
	struct idle_handle e = { .h = h };

	conn_of(h, &e.sock, &e.h1);
	if (e.h1 && conn_has_input(e.sock, what)) {
		curl_easy_cleanup(h);
		return;
	}
	curl_easy_reset(h);
	pthread_mutex_lock(&pool->lock);
	e.since_ms = clock_now_ms();
	if (pool->n_idle < HTTP_IDLE_MAX) {
		pool->idle[pool->n_idle++] = e;
		h = NULL;
	}
	pthread_mutex_unlock(&pool->lock);
	if (h != NULL)
		curl_easy_cleanup(h);
}
