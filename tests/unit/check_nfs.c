/*
 * check_nfs: the nfs backend's URL parser and errno classification
 * (backends/nfs.h), the choices of its table of kept file handles and of
 * its pool (backends/nfs_fh.h: which handle to close, which has been
 * idle too long, which connection a request takes), and its deadlines
 * against real sockets that are not NFS servers: a closed port, and a
 * port that accepts connections but never answers. Reads against a real
 * server, and what the kept handles save and guard, are in
 * tests/integration/test_nfs.sh (nfs-ganesha).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/nfs.h"
#include "backends/nfs_fh.h"
#include "tests/unit/unit.h"
#include "util/log.h"

START_TEST(test_parse_full)
{
	struct nfs_source s;
	const char *why = NULL;

	ck_assert_int_eq(
		nfs_source_parse("nfs://server.example:2050/export/data set/"
				 "?version=3&uid=1000&gid=100&mountport=635"
				 "&connections=4",
				 &s, &why),
		0);
	ck_assert_str_eq(s.host, "server.example");
	ck_assert_uint_eq(s.nfsport, 2050);
	ck_assert_uint_eq(s.mountport, 635);
	ck_assert_int_eq(s.version, 3);
	ck_assert_int_eq(s.uid, 1000);
	ck_assert_int_eq(s.gid, 100);
	ck_assert_uint_eq(s.connections, 4);
	ck_assert_str_eq(s.path, "/export/data set");
	nfs_source_free(&s);
}
END_TEST

START_TEST(test_parse_defaults)
{
	struct nfs_source s;

	ck_assert_int_eq(nfs_source_parse("nfs://127.0.0.1/export", &s, NULL),
			 0);
	ck_assert_str_eq(s.host, "127.0.0.1");
	ck_assert_uint_eq(s.nfsport, 0);
	ck_assert_int_eq(s.version, 4);
	ck_assert_int_eq(s.uid, -1);
	ck_assert_int_eq(s.gid, -1);
	ck_assert_uint_eq(s.connections, NFS_CONNECTIONS_DEFAULT);
	ck_assert_str_eq(s.path, "/export");
	nfs_source_free(&s);
	ck_assert_int_eq(nfs_source_parse("nfs://h/", &s, NULL), 0);
	ck_assert_str_eq(s.path, "/");
	nfs_source_free(&s);
	nfs_source_free(NULL);
}
END_TEST

START_TEST(test_parse_escapes_and_ipv6)
{
	struct nfs_source s;

	ck_assert_int_eq(nfs_source_parse("nfs://[::1]:2049/a%20b/%C3%A9%3F//",
					  &s, NULL),
			 0);
	ck_assert_str_eq(s.host, "::1");
	ck_assert_uint_eq(s.nfsport, 2049);
	ck_assert_str_eq(s.path, "/a b/\xc3\xa9?");
	nfs_source_free(&s);
	ck_assert_int_eq(nfs_source_parse("nfs://h/x?nfsport=9", &s, NULL), 0);
	ck_assert_uint_eq(s.nfsport, 9);
	nfs_source_free(&s);
}
END_TEST

START_TEST(test_parse_bad)
{
	static const char *const bad[] = {
		"s3://b/x",
		"nfs://",
		"nfs://host",
		"nfs:///path",
		"nfs://host:/p",
		"nfs://host:0/p",
		"nfs://host:65536/p",
		"nfs://host:12a/p",
		"nfs://ho st/p",
		"nfs://[::1/p",
		"nfs://h/p?version=2",
		"nfs://h/p?version=",
		"nfs://h/p?uid=-1",
		"nfs://h/p?connections=0",
		"nfs://h/p?connections=65",
		"nfs://h/p?frob=1",
		"nfs://h/p?version",
		"nfs://h/p#frag",
		"nfs://h/p%2",
		"nfs://h/p%zz",
		"nfs://h/p%00x",
		"nfs://h/a/../b",
		"nfs://h/..",
	};
	struct nfs_source s;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;

		ck_assert_msg(nfs_source_parse(bad[i], &s, &why) == -EINVAL,
			      "%s accepted", bad[i]);
		ck_assert_msg(why != NULL && *why, "%s: no reason", bad[i]);
	}
}
END_TEST

START_TEST(test_url_valid)
{
	ck_assert(nfs_url_valid("nfs://h/export/ds/", false));
	ck_assert(nfs_url_valid("nfs://h/export?version=3", false));
	ck_assert(nfs_url_valid("nfs://h:2049/export/m.tsv", true));
	ck_assert(!nfs_url_valid("nfs://h/export/", true));
	ck_assert(!nfs_url_valid("nfs://h/", true));
	ck_assert(!nfs_url_valid("nfs://h/export/m.tsv?version=4", true));
	ck_assert(!nfs_url_valid("nfs://h", false));
}
END_TEST

START_TEST(test_errno)
{
	ck_assert_int_eq(nfs_errno_map(-ENOENT), -ENOENT);
	ck_assert_int_eq(nfs_errno_map(-ESTALE), -ESTALE);
	ck_assert_int_eq(nfs_errno_map(-EPERM), -EACCES);
	ck_assert_int_eq(nfs_errno_map(-ETIMEDOUT), -EIO);
	ck_assert_int_eq(nfs_errno_map(-ECONNRESET), -EIO);
	ck_assert_int_eq(nfs_errno_map(-EFAULT), -EIO);
	ck_assert_int_eq(nfs_errno_map(-1000), -EIO);
	ck_assert_int_eq(nfs_errno_map(-ENODATA), -EIO);
	ck_assert(nfs_errno_transient(-ETIMEDOUT));
	ck_assert(nfs_errno_transient(-ECONNRESET));
	ck_assert(nfs_errno_transient(-EIO));
	ck_assert(!nfs_errno_transient(-ENOENT));
	ck_assert(!nfs_errno_transient(-ESTALE));
	ck_assert(!nfs_errno_transient(-EACCES));
	ck_assert(!nfs_errno_transient(-ENODATA));
	/* libnfs 4.0 maps NFSv4 statuses it has no errno for to -ERANGE:
	 * an expired lease (retried on a new connection) as well as a
	 * security refusal (not retried). */
	ck_assert(nfs_errno_transient(-ERANGE));
	ck_assert(nfs_error_refused(
		-ERANGE, "NFS4: (path /a) failed with NFS4ERR_WRONGSEC(-34)"));
	ck_assert(
		nfs_error_refused(-EIO, "LOOKUP failed with NFS4ERR_WRONGSEC"));
	ck_assert(!nfs_error_refused(
		-ERANGE, "NFS4: (path /a) failed with NFS4ERR_EXPIRED(-5)"));
	ck_assert(!nfs_error_refused(-ECONNRESET, "NFS4ERR_WRONGSEC"));
}
END_TEST

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A listening TCP socket on 127.0.0.1 (never accepted from: connects
 * complete in the backlog, then nothing answers); its port in *port. */
static int listener(unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 64), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

START_TEST(test_open_closed_port)
{
	struct backend_options o = { .connect_timeout_ms = 500,
				     .request_timeout_ms = 500,
				     .read_timeout_ms = 2000,
				     .retries = 2 };
	struct backend *be = NULL;
	unsigned port;
	char url[96];
	double t0;
	int fd = listener(&port);

	close(fd); /* nothing listens there now */
	snprintf(url, sizeof(url), "nfs://127.0.0.1:%u/export", port);
	t0 = now_s();
	ck_assert_int_eq(backend_open(url, &o, &be), -EIO);
	ck_assert_ptr_null(be);
	/* Bounded: the deadline, plus slack for a loaded machine. */
	ck_assert_double_lt(now_s() - t0, 2.0 + 10.0);
}
END_TEST

START_TEST(test_open_silent_server)
{
	struct backend_options o = { .connect_timeout_ms = 300,
				     .request_timeout_ms = 300,
				     .read_timeout_ms = 1500,
				     .retries = 10 };
	struct backend *be = NULL;
	unsigned port;
	char url[96];
	double t0;
	int fd = listener(&port);

	snprintf(url, sizeof(url), "nfs://127.0.0.1:%u/export", port);
	t0 = now_s();
	/* Connected, never answered: every attempt times out, and the
	 * whole open ends at read_timeout_ms, retries left or not. */
	ck_assert_int_eq(backend_open(url, &o, &be), -EIO);
	ck_assert_double_lt(now_s() - t0, 1.5 + 10.0);
	ck_assert_double_ge(now_s() - t0, 0.3);
	close(fd);
}
END_TEST

START_TEST(test_open_bad_url)
{
	struct backend *be = NULL;

	ck_assert_int_eq(backend_open("nfs://h/p?version=9", NULL, &be),
			 -EINVAL);
	ck_assert_ptr_null(be);
}
END_TEST

/* Fills conn's slot i with path, last used at used_ms (no handle: the
 * table's choices never touch it). */
static void kept_set(struct nfs_conn *conn, unsigned i, const char *path,
		     uint64_t used_ms)
{
	conn->kept[i].path = (char *)path;
	conn->kept[i].fh = NULL;
	conn->kept[i].used_ms = used_ms;
}

START_TEST(test_kept_find)
{
	struct nfs_conn conn;

	memset(&conn, 0, sizeof(conn));
	ck_assert_ptr_null(nfsb_kept_find(&conn, "/a"));
	kept_set(&conn, 1, "/a", 10);
	kept_set(&conn, 3, "/dir/b c", 20);
	ck_assert_ptr_eq(nfsb_kept_find(&conn, "/a"), &conn.kept[1]);
	ck_assert_ptr_eq(nfsb_kept_find(&conn, "/dir/b c"), &conn.kept[3]);
	/* Whole paths only: no prefix, no other case. */
	ck_assert_ptr_null(nfsb_kept_find(&conn, "/dir/b"));
	ck_assert_ptr_null(nfsb_kept_find(&conn, "/A"));
	ck_assert_ptr_null(nfsb_kept_find(&conn, "/a/"));
}
END_TEST

START_TEST(test_kept_victim)
{
	struct nfs_conn conn;
	unsigned i;

	ck_assert_int_eq(NFS_FH_PER_CONN, 4);
	memset(&conn, 0, sizeof(conn));
	/* A free slot: nothing has to be closed. */
	ck_assert_ptr_null(nfsb_kept_victim(&conn, NULL));
	kept_set(&conn, 0, "/a", 40);
	kept_set(&conn, 1, "/b", 10);
	kept_set(&conn, 2, "/c", 30);
	ck_assert_ptr_null(nfsb_kept_victim(&conn, NULL));
	/* Full: the least recently used, unless it is the one to keep. */
	kept_set(&conn, 3, "/d", 20);
	ck_assert_ptr_eq(nfsb_kept_victim(&conn, NULL), &conn.kept[1]);
	ck_assert_ptr_eq(nfsb_kept_victim(&conn, &conn.kept[2]), &conn.kept[1]);
	ck_assert_ptr_eq(nfsb_kept_victim(&conn, &conn.kept[1]), &conn.kept[3]);
	/* Bounded: however a full table was used, one slot is named. */
	for (i = 0; i < NFS_FH_PER_CONN; i++)
		conn.kept[i].used_ms = 7;
	ck_assert_ptr_nonnull(nfsb_kept_victim(&conn, &conn.kept[0]));
	ck_assert_ptr_ne(nfsb_kept_victim(&conn, &conn.kept[0]), &conn.kept[0]);
}
END_TEST

START_TEST(test_kept_expired)
{
	struct nfs_conn conn;
	uint64_t t = 1000000;

	memset(&conn, 0, sizeof(conn));
	ck_assert_ptr_null(nfsb_kept_expired(&conn, t));
	kept_set(&conn, 0, "/a", t);
	kept_set(&conn, 2, "/b", t - NFS_FH_IDLE_MS);
	/* Idle exactly the limit: still kept. */
	ck_assert_ptr_null(nfsb_kept_expired(&conn, t));
	ck_assert_ptr_eq(nfsb_kept_expired(&conn, t + 1), &conn.kept[2]);
	conn.kept[2].path = NULL; /* closed */
	ck_assert_ptr_null(nfsb_kept_expired(&conn, t + NFS_FH_IDLE_MS));
	ck_assert_ptr_eq(nfsb_kept_expired(&conn, t + NFS_FH_IDLE_MS + 1),
			 &conn.kept[0]);
	/* A clock that reads earlier than the last use expires nothing. */
	ck_assert_ptr_null(nfsb_kept_expired(&conn, t - 1));
}
END_TEST

START_TEST(test_pool_pick)
{
	struct nfs_conn conns[4];
	struct nfs_context *ctx = nfs_init_context();
	unsigned i;

	ck_assert_ptr_nonnull(ctx);
	memset(conns, 0, sizeof(conns));
	/* Nothing connected: the first idle one. */
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, "/a"), &conns[0]);
	conns[0].busy = true;
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, NULL), &conns[1]);
	/* A connected one before one that would have to mount. */
	conns[2].ctx = ctx;
	conns[3].ctx = ctx;
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, NULL), &conns[2]);
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, "/a"), &conns[2]);
	/* The one that keeps the file open, wherever it is. */
	kept_set(&conns[3], 2, "/a", 1);
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, "/a"), &conns[3]);
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, "/b"), &conns[2]);
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, NULL), &conns[2]);
	/* Busy, it is not waited for: another connection opens the file. */
	conns[3].busy = true;
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, "/a"), &conns[2]);
	conns[2].busy = true;
	ck_assert_ptr_eq(nfsb_pool_pick(conns, 4, "/a"), &conns[1]);
	conns[1].busy = true;
	ck_assert_ptr_null(nfsb_pool_pick(conns, 4, "/a"));
	for (i = 0; i < 4; i++)
		conns[i].ctx = NULL;
	nfs_destroy_context(ctx);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "parse_full", test_parse_full },
		{ "parse_defaults", test_parse_defaults },
		{ "parse_escapes_and_ipv6", test_parse_escapes_and_ipv6 },
		{ "parse_bad", test_parse_bad },
		{ "url_valid", test_url_valid },
		{ "errno", test_errno },
		{ "open_closed_port", test_open_closed_port },
		{ "open_silent_server", test_open_silent_server },
		{ "open_bad_url", test_open_bad_url },
		{ "kept_find", test_kept_find },
		{ "kept_victim", test_kept_victim },
		{ "kept_expired", test_kept_expired },
		{ "pool_pick", test_pool_pick },
	};

	/* The failures under test log once each; keep the output short. */
	log_set_level(LOG_ERR - 1);
	return unit_run(
		unit_suite("nfs", cases, sizeof(cases) / sizeof(cases[0])));
}
