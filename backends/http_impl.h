/*
 * http_impl: what http.c (the retry loop) shares with http_pool.c (the
 * pool of easy handles and the rule for reusing their connections);
 * private to those two (everyone else uses http.h).
 */
#ifndef SHARDFS_HTTP_IMPL_H
#define SHARDFS_HTTP_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/http.h"

/* Idle handles kept; more are freed. Enough for the fetch engine's 64
 * connections plus what HTTP_REUSE_AFTER_MS keeps resting at its rate. */
#define HTTP_IDLE_MAX 256
/* An idle handle and the one connection it keeps. */
struct idle_handle {
	CURL *h;
	curl_socket_t sock; /* CURL_SOCKET_BAD: none kept */
	bool h1;	    /* HTTP/1.x: a stray reply can sit on it */
	uint64_t since_ms;  /* when it came back (CLOCK_MONOTONIC) */
};

struct http_pool {
	struct http_pool_options opts;
	char *ca_bundle;
	pthread_mutex_t lock; /* protects idle, n_idle */
	/* Oldest first; since_ms never decreases along it. */
	struct idle_handle idle[HTTP_IDLE_MAX];
	size_t n_idle;
};

/* A handle for a request: the most recently returned one that has rested
 * HTTP_REUSE_AFTER_MS with nothing arriving on its connection, or a new
 * one (a new connection) when none has. NULL if none can be made. */
CURL *http_pool_get(struct http_pool *pool);

/* Takes h back after a request named what (for the log). A handle whose
 * connection holds anything already is freed, not kept. */
void http_pool_put(struct http_pool *pool, CURL *h, const char *what);

/* True when h's one connection may serve another request now: it is
 * HTTP/2, or gone, or has nothing to read (see http.h, "Stray replies").
 * what names the request for the log. */
bool http_conn_clean(CURL *h, const char *what);

#endif
