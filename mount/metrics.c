/*
 * metrics: see metrics.h.
 *
 * The socket is made and bound here rather than by libmicrohttpd, so a
 * port in use or an address the host does not have is reported with its
 * errno, and so the bind is to exactly the configured address (the
 * library's own bind takes a port and, without extra options, every
 * address). The library then owns the socket and closes it on stop.
 */
#include "mount/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "util/log.h"
#include "util/thread.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	struct MHD_Daemon *daemon;
	struct fs *fs;
};

/* "A.B.C.D:PORT" or "[v6]:PORT" into a socket address. */
static int metrics_parse(const char *listen, struct sockaddr_storage *ss,
			 socklen_t *len)
{
	char host[64];
	const char *colon;
	unsigned long port;
	char *end;
	size_t n;

	memset(ss, 0, sizeof(*ss));
	if (listen[0] == '[') {
		colon = strstr(listen, "]:");
		if (colon == NULL)
			return -EINVAL;
		n = (size_t)(colon - listen - 1);
		if (n >= sizeof(host))
			return -EINVAL;
		memcpy(host, listen + 1, n);
		colon++;
	} else {
		colon = strrchr(listen, ':');
		if (colon == NULL)
			return -EINVAL;
		n = (size_t)(colon - listen);
		if (n >= sizeof(host))
			return -EINVAL;
		memcpy(host, listen, n);
	}
	host[n] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || colon[1] == '\0' || port == 0 ||
	    port > 65535)
		return -EINVAL;
	if (listen[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
			return -EINVAL;
		*len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
			return -EINVAL;
		*len = sizeof(*a);
	}
	return 0;
}

/* A listening socket on exactly ss. Returns the fd or a negative errno. */
static int metrics_socket(const struct sockaddr_storage *ss, socklen_t len)
{
	int fd, one = 1, rc;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0)
		return -errno;
	/* A restarted daemon can bind while old connections linger in
	 * TIME_WAIT; SO_REUSEADDR never lets two live listeners share. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) != 0 ||
	    listen(fd, METRICS_MAX_CONNECTIONS) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static struct MHD_Response *metrics_text(const char *text, size_t len,
					 enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(len, (void *)text, mode);

	if (r != NULL)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/plain; charset=utf-8");
	return r;
}

static enum MHD_Result metrics_reply(struct MHD_Connection *c, unsigned status,
				     const char *body)
{
	struct MHD_Response *r =
		metrics_text(body, strlen(body), MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (r == NULL)
		return MHD_NO;
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result metrics_handle(void *cls, struct MHD_Connection *c,
				      const char *url, const char *method,
				      const char *version,
				      const char *upload_data,
				      size_t *upload_data_size, void **con_cls)
{
	struct metrics *m = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return metrics_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				     "only GET and HEAD\n");
	if (strcmp(url, "/metrics") != 0)
		return metrics_reply(
			c, MHD_HTTP_NOT_FOUND,
			"not found; the metrics are at /metrics\n");
	f = open_memstream(&buf, &len);
	if (f == NULL)
		return metrics_reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				     "out of memory\n");
	rc = fs_stats_write(m->fs, f);
	if (fclose(f) != 0 || rc < 0) {
		free(buf);
		return metrics_reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				     "cannot write the stats\n");
	}
	r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				METRICS_CONTENT_TYPE);
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* libmicrohttpd's own messages (a failed accept, a closed connection)
 * are for debugging; errors it cannot recover from surface as a failed
 * start, logged by metrics_start. */
static void metrics_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	(void)cls;
	if (LOG_DEBUG > log_threshold)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_msg(LOG_DEBUG, "metrics: %s", line);
}

int metrics_start(const char *listen, struct fs *fs, struct metrics **out)
{
	struct sockaddr_storage ss;
	sigset_t old;
	struct metrics *m;
	socklen_t len = 0;
	int fd, rc;

	rc = metrics_parse(listen, &ss, &len);
	if (rc < 0) {
		log_msg(LOG_ERR, "metrics: listen = %s: not ADDRESS:PORT",
			listen);
		return rc;
	}
	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		log_msg(LOG_ERR, "metrics: out of memory");
		return -ENOMEM;
	}
	m->fs = fs;
	fd = metrics_socket(&ss, len);
	if (fd < 0) {
		log_msg(LOG_ERR, "metrics: cannot listen on %s: %s", listen,
			strerror(-fd));
		free(m);
		return fd;
	}
	/* The library's thread inherits this mask: signals stay with the
	 * threads that handle them. */
	thread_block_signals(SIGPIPE, &old);
	m->daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			MHD_USE_ERROR_LOG |
			(ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, metrics_handle, m, MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_CONNECTION_LIMIT,
		(unsigned int)METRICS_MAX_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned int)METRICS_MAX_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)METRICS_TIMEOUT_S, MHD_OPTION_EXTERNAL_LOGGER,
		metrics_log, NULL, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (m->daemon == NULL) {
		log_msg(LOG_ERR,
			"metrics: cannot serve on %s (libmicrohttpd "
			"did not start)",
			listen);
		/* Not closed: the library may have closed it already, and a
		 * double close could hit another thread's new fd. */
		free(m);
		return -EIO;
	}
	log_msg(LOG_INFO, "metrics: serving http://%s/metrics", listen);
	*out = m;
	return 0;
}

void metrics_stop(struct metrics *m)
{
	if (m == NULL)
		return;
	MHD_stop_daemon(m->daemon);
	free(m);
}
