/*
 * check_posix: the posix backend (DESIGN.md §9), tested through
 * backends/backend.h on real directories.
 *
 * Each test builds its own tree under one mkdtemp directory that main()
 * removes whatever the outcome. Expected sizes, times and etags come from
 * stat(2) on the same files, and a few mtimes are set to known values with
 * utimensat(2), so the checks do not depend on the clock.
 */
#include "backends/backend.h"
#include "backends/posix.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/unit/unit.h"
#include "util/log.h"

#define SENTINEL ((struct backend *)&tmpdir)
#define KNOWN_MTIME_NS INT64_C(1600000000123456789)

static char tmpdir[64];

static const struct backend_options default_opts;

/* A directory of its own for one test, as an absolute path. */
static const char *test_root(const char *name)
{
	static char root[256];

	snprintf(root, sizeof(root), "%s/%s", tmpdir, name);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	return root;
}

static void join(char *buf, size_t cap, const char *root, const char *rel)
{
	int n = snprintf(buf, cap, "%s/%s", root, rel);

	ck_assert(n > 0 && (size_t)n < cap);
}

/* Writes root/rel, creating its parent directories. */
static void put_file(const char *root, const char *rel, const void *data,
		     size_t len)
{
	char path[1024], *slash;
	int fd;

	join(path, sizeof(path), root, rel);
	for (slash = strchr(path + strlen(root) + 1, '/'); slash != NULL;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		ck_assert(mkdir(path, 0755) == 0 || errno == EEXIST);
		*slash = '/';
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}

static void put_text(const char *root, const char *rel, const char *text)
{
	put_file(root, rel, text, strlen(text));
}

static void set_mtime(const char *root, const char *rel, int64_t ns)
{
	char path[1024];
	struct timespec ts[2];

	join(path, sizeof(path), root, rel);
	ts[0].tv_sec = ts[1].tv_sec = ns / 1000000000;
	ts[0].tv_nsec = ts[1].tv_nsec = ns % 1000000000;
	if (ts[1].tv_nsec < 0) {
		ts[0].tv_sec = --ts[1].tv_sec;
		ts[0].tv_nsec = ts[1].tv_nsec += 1000000000;
	}
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* What the backend should report for root/rel, from stat (following a
 * symlink, as a listed link reports its target). */
struct expect {
	uint64_t size;
	int64_t mtime_ns;
	char etag[96];
};

static void expect_of(const char *root, const char *rel, struct expect *e)
{
	char path[1024];
	struct stat st;

	join(path, sizeof(path), root, rel);
	ck_assert_int_eq(stat(path, &st), 0);
	e->size = (uint64_t)st.st_size;
	e->mtime_ns =
		(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	snprintf(e->etag, sizeof(e->etag),
		 "%" PRId64 ":%" PRIu64 ":%" PRIu64 ":%" PRId64, e->mtime_ns,
		 e->size, (uint64_t)st.st_ino,
		 (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec);
}

static struct backend *open_ok(const char *root)
{
	struct backend *be = SENTINEL;

	ck_assert_int_eq(backend_open(root, &default_opts, &be), 0);
	ck_assert_ptr_ne(be, SENTINEL);
	ck_assert_ptr_nonnull(be);
	ck_assert_str_eq(be->ops->name, "posix");
	return be;
}

/* Everything list() reported, copied. */
struct listed {
	struct {
		char *key;
		size_t key_len;
		uint64_t size;
		int64_t mtime_ns;
		char *etag;
		size_t etag_len;
	} obj[64];
	size_t n;
	size_t stop_after; /* 0: never */
	int stop_rc;
};

static int collect(void *arg, const struct backend_object *o)
{
	struct listed *l = arg;

	ck_assert_uint_lt(l->n, ARRAY_LEN(l->obj));
	l->obj[l->n].key = malloc(o->key_len + 1);
	ck_assert_ptr_nonnull(l->obj[l->n].key);
	memcpy(l->obj[l->n].key, o->key, o->key_len);
	l->obj[l->n].key[o->key_len] = '\0';
	l->obj[l->n].key_len = o->key_len;
	l->obj[l->n].size = o->size;
	l->obj[l->n].mtime_ns = o->mtime_ns;
	l->obj[l->n].etag = strndup(o->etag, o->etag_len);
	l->obj[l->n].etag_len = o->etag_len;
	l->n++;
	if (l->stop_after != 0 && l->n == l->stop_after)
		return l->stop_rc;
	return 0;
}

static void listed_free(struct listed *l)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		free(l->obj[i].key);
		free(l->obj[i].etag);
	}
	l->n = 0;
}

/* The index of key in l, asserting it was listed exactly once. */
static size_t listed_find(const struct listed *l, const char *key)
{
	size_t i, found = SIZE_MAX;

	for (i = 0; i < l->n; i++)
		if (l->obj[i].key_len == strlen(key) &&
		    memcmp(l->obj[i].key, key, l->obj[i].key_len) == 0) {
			ck_assert_msg(found == SIZE_MAX, "'%s' listed twice",
				      key);
			found = i;
		}
	ck_assert_msg(found != SIZE_MAX, "'%s' not listed", key);
	return found;
}

static void expect_listed(const struct listed *l, const char *root,
			  const char *key)
{
	size_t i = listed_find(l, key);
	struct expect e;

	expect_of(root, key, &e);
	ck_assert_uint_eq(l->obj[i].size, e.size);
	ck_assert_int_eq(l->obj[i].mtime_ns, e.mtime_ns);
	ck_assert_uint_eq(l->obj[i].etag_len, strlen(e.etag));
	ck_assert_str_eq(l->obj[i].etag, e.etag);
}

START_TEST(test_open_errors)
{
	const char *root = test_root("open");
	struct backend *be = SENTINEL;
	char path[512];

	snprintf(path, sizeof(path), "%s/missing", root);
	ck_assert_int_eq(backend_open(path, &default_opts, &be), -ENOENT);
	ck_assert_ptr_eq(be, SENTINEL);

	put_text(root, "file", "x");
	snprintf(path, sizeof(path), "%s/file", root);
	ck_assert_int_eq(backend_open(path, &default_opts, &be), -ENOTDIR);
	ck_assert_ptr_eq(be, SENTINEL);
	snprintf(path, sizeof(path), "%s/file/below", root);
	ck_assert_int_eq(backend_open(path, &default_opts, &be), -ENOTDIR);
	ck_assert_ptr_eq(be, SENTINEL);

	/* Relative paths are no source at all. */
	ck_assert_int_lt(backend_open("relative/dir", &default_opts, &be), 0);
	ck_assert_int_lt(backend_open(".", &default_opts, &be), 0);
	ck_assert_int_lt(backend_open("", &default_opts, &be), 0);
	ck_assert_ptr_eq(be, SENTINEL);
	ck_assert_int_eq(backend_posix_ops.open("relative", &default_opts, &be),
			 -EINVAL);
	ck_assert_int_eq(
		backend_posix_ops.open("file://relative", &default_opts, &be),
		-EINVAL);
	ck_assert_ptr_eq(be, SENTINEL);
	ck_assert_int_eq(backend_posix_ops.handles("/abs"), 1);
	ck_assert_int_eq(backend_posix_ops.handles("relative"), 0);
	ck_assert_int_eq(backend_posix_ops.handles("s3://bucket/"), 0);

	/* And the good cases. */
	be = open_ok(root);
	backend_close(be);
	snprintf(path, sizeof(path), "file://%s", root);
	be = open_ok(path);
	backend_close(be);
	backend_close(NULL);
}
END_TEST

static const char *const tree_files[] = {
	"top.txt",
	"dir/a",
	"dir/sub/b",
	"dir/sub/deeper/c",
	"with space.bin",
	"tab\there",
	"new\nline",
	"cr\rret",
	"\xc3\xbcn\xc3\xaf/\xe3\x83\x95\xe3\x82\xa1\xe3\x82\xa4\xe3\x83\xab",
	"%25 percent",
	".hidden",
	"dir/.x/y",
};

/* Builds the tree of tree_files, plus links, an empty dir, a fifo. */
static void make_tree(const char *root)
{
	char path[1024], target[1024];
	size_t i;

	for (i = 0; i < ARRAY_LEN(tree_files); i++) {
		char data[64];
		int n;

		memset(data, '.', sizeof(data));
		n = snprintf(data, sizeof(data), "data of %zu:", i);

		/* Different sizes, one empty. */
		put_file(root, tree_files[i], data, i == 1 ? 0 : (size_t)n + i);
	}
	set_mtime(root, "top.txt", KNOWN_MTIME_NS);
	set_mtime(root, "dir/sub/b", -1500000000);
	join(path, sizeof(path), root, "empty_dir");
	ck_assert_int_eq(mkdir(path, 0755), 0);
	join(path, sizeof(path), root, "link_to_file");
	ck_assert_int_eq(symlink("dir/sub/b", path), 0);
	join(path, sizeof(path), root, "link_to_dir");
	ck_assert_int_eq(symlink("dir", path), 0);
	join(path, sizeof(path), root, "dangling");
	ck_assert_int_eq(symlink("nowhere", path), 0);
	join(target, sizeof(target), root, "top.txt");
	join(path, sizeof(path), root, "dir/abs_link");
	ck_assert_int_eq(symlink(target, path), 0);
	join(path, sizeof(path), root, "dir/fifo");
	ck_assert_int_eq(mkfifo(path, 0644), 0);
}

START_TEST(test_list_tree)
{
	const char *root = test_root("list");
	struct listed l = { .n = 0 };
	struct backend *be;
	size_t i;

	make_tree(root);
	be = open_ok(root);
	ck_assert_int_eq(be->ops->list(be, "", collect, &l), 0);
	/* Every regular file, the two links to files; nothing else. */
	ck_assert_uint_eq(l.n, ARRAY_LEN(tree_files) + 2);
	for (i = 0; i < ARRAY_LEN(tree_files); i++)
		expect_listed(&l, root, tree_files[i]);
	expect_listed(&l, root, "link_to_file");
	expect_listed(&l, root, "dir/abs_link");
	for (i = 0; i < l.n; i++) {
		ck_assert_msg(strncmp(l.obj[i].key, "link_to_dir", 11) != 0,
			      "descended into a linked dir: %s", l.obj[i].key);
		ck_assert_int_ne(l.obj[i].key[0], '/');
		ck_assert_uint_eq(strlen(l.obj[i].key), l.obj[i].key_len);
	}
	/* A link reports its target: same size, time and inode. */
	ck_assert_str_eq(l.obj[listed_find(&l, "link_to_file")].etag,
			 l.obj[listed_find(&l, "dir/sub/b")].etag);
	/* Known times, to the nanosecond, before 1970 too. */
	ck_assert_int_eq(l.obj[listed_find(&l, "top.txt")].mtime_ns,
			 KNOWN_MTIME_NS);
	ck_assert_int_eq(l.obj[listed_find(&l, "dir/sub/b")].mtime_ns,
			 -1500000000);
	ck_assert_uint_eq(l.obj[listed_find(&l, "dir/a")].size, 0);
	listed_free(&l);
	backend_close(be);
}
END_TEST

START_TEST(test_etag_format)
{
	const char *root = test_root("etag");
	struct listed l = { .n = 0 };
	struct backend *be;
	struct stat st;
	char path[512], want[96];

	put_text(root, "f", "12345");
	set_mtime(root, "f", KNOWN_MTIME_NS);
	join(path, sizeof(path), root, "f");
	ck_assert_int_eq(stat(path, &st), 0);
	snprintf(want, sizeof(want),
		 "1600000000123456789:5:%" PRIu64 ":%" PRId64,
		 (uint64_t)st.st_ino,
		 (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec);
	be = open_ok(root);
	ck_assert_int_eq(be->ops->list(be, "", collect, &l), 0);
	ck_assert_uint_eq(l.n, 1);
	ck_assert_str_eq(l.obj[0].key, "f");
	ck_assert_str_eq(l.obj[0].etag, want);
	ck_assert_uint_eq(l.obj[0].size, 5);
	ck_assert_int_eq(l.obj[0].mtime_ns, KNOWN_MTIME_NS);
	listed_free(&l);
	backend_close(be);
}
END_TEST

START_TEST(test_list_prefix_and_stop)
{
	const char *root = test_root("prefix");
	struct listed l = { .n = 0 };
	struct backend *be;

	make_tree(root);
	be = open_ok(root);
	/* A prefix names a directory; keys stay relative to the root. */
	ck_assert_int_eq(be->ops->list(be, "dir/sub", collect, &l), 0);
	ck_assert_uint_eq(l.n, 2);
	expect_listed(&l, root, "dir/sub/b");
	expect_listed(&l, root, "dir/sub/deeper/c");
	listed_free(&l);
	/* A prefix nothing starts with reports nothing (the header allows
	 * no other outcome; the return code is left open here). */
	(void)be->ops->list(be, "nope", collect, &l);
	ck_assert_uint_eq(l.n, 0);

	/* A non-zero callback return stops the walk and is returned. */
	l.stop_after = 3;
	l.stop_rc = 42;
	ck_assert_int_eq(be->ops->list(be, "", collect, &l), 42);
	ck_assert_uint_eq(l.n, 3);
	listed_free(&l);
	l.stop_after = 1;
	l.stop_rc = -ENOMEM;
	ck_assert_int_eq(be->ops->list(be, "", collect, &l), -ENOMEM);
	ck_assert_uint_eq(l.n, 1);
	listed_free(&l);

	/* An empty source lists nothing. */
	backend_close(be);
	be = open_ok(test_root("prefix_empty"));
	ck_assert_int_eq(be->ops->list(be, "", collect, &l), 0);
	ck_assert_uint_eq(l.n, 0);
	backend_close(be);
}
END_TEST

static void stat_expect(struct backend *be, const char *root, const char *key)
{
	struct backend_stat st;
	struct expect e;

	memset(&st, 0xa5, sizeof(st));
	ck_assert_int_eq(be->ops->stat(be, key, strlen(key), &st), 0);
	expect_of(root, key, &e);
	ck_assert_uint_eq(st.size, e.size);
	ck_assert_int_eq(st.mtime_ns, e.mtime_ns);
	ck_assert_uint_eq(st.etag_len, strlen(e.etag));
	ck_assert_int_eq(memcmp(st.etag, e.etag, st.etag_len), 0);
}

START_TEST(test_stat)
{
	const char *root = test_root("stat");
	struct listed l = { .n = 0 };
	struct backend_stat st;
	struct backend *be;
	size_t i;

	make_tree(root);
	be = open_ok(root);
	for (i = 0; i < ARRAY_LEN(tree_files); i++)
		stat_expect(be, root, tree_files[i]);
	stat_expect(be, root, "link_to_file");
	/* stat agrees with list. */
	ck_assert_int_eq(be->ops->list(be, "", collect, &l), 0);
	for (i = 0; i < l.n; i++) {
		ck_assert_int_eq(
			be->ops->stat(be, l.obj[i].key, l.obj[i].key_len, &st),
			0);
		ck_assert_uint_eq(st.size, l.obj[i].size);
		ck_assert_int_eq(st.mtime_ns, l.obj[i].mtime_ns);
		ck_assert_uint_eq(st.etag_len, l.obj[i].etag_len);
		ck_assert_int_eq(memcmp(st.etag, l.obj[i].etag, st.etag_len),
				 0);
	}
	listed_free(&l);
	/* Not objects. */
	ck_assert_int_eq(be->ops->stat(be, "missing", 7, &st), -ENOENT);
	ck_assert_int_eq(be->ops->stat(be, "dir/missing", 11, &st), -ENOENT);
	ck_assert_int_eq(be->ops->stat(be, "dir", 3, &st), -ENOENT);
	ck_assert_int_eq(be->ops->stat(be, "empty_dir", 9, &st), -ENOENT);
	ck_assert_int_eq(be->ops->stat(be, "dangling", 8, &st), -ENOENT);
	ck_assert_int_eq(be->ops->stat(be, "dir/fifo", 8, &st), -ENOENT);
	backend_close(be);
}
END_TEST

static void fill_pattern(unsigned char *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)((i * 7 + seed) % 251);
}

/* Reads [off, off + len) of the file "f" under st's etag (NULL: any
 * version). */
static int read_f(struct backend *be, const struct backend_stat *st,
		  uint64_t off, size_t len, void *buf, size_t *nread)
{
	struct backend_read r = {
		.key = "f", .key_len = 1, .offset = off, .len = len, .buf = buf
	};

	if (st != NULL) {
		r.etag = st->etag;
		r.etag_len = st->etag_len;
	}
	return be->ops->read(be, &r, nread);
}

/* Reads and checks the bytes against data (the file's content): exactly
 * len bytes, or -EIO and nothing when the file ends before off + len. */
static void read_expect(struct backend *be, const char *key, const char *etag,
			const unsigned char *data, size_t size, uint64_t off,
			size_t len)
{
	unsigned char *buf = malloc(len + 1);
	size_t nread = SIZE_MAX;
	int past_end = off > size || len > size - (size_t)off;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(
		be->ops->read(be,
			      &(struct backend_read){
				      .key = key,
				      .key_len = strlen(key),
				      .etag = etag,
				      .etag_len = etag ? strlen(etag) : 0,
				      .offset = off,
				      .len = len,
				      .buf = buf },
			      &nread),
		past_end ? -EIO : 0);
	if (past_end) {
		ck_assert_uint_eq(nread, SIZE_MAX);
	} else {
		ck_assert_msg(nread == len,
			      "read %s at %" PRIu64 " len %zu: %zu bytes", key,
			      off, len, nread);
		ck_assert_int_eq(memcmp(buf, data + off, len), 0);
	}
	free(buf);
}

START_TEST(test_read_offsets)
{
	const char *root = test_root("read");
	enum { SMALL = 1000, BIG = 3 << 20 };
	unsigned char *small = malloc(SMALL), *big = malloc(BIG);
	struct backend_stat st;
	struct backend *be;
	uint64_t off;

	ck_assert_ptr_nonnull(small);
	ck_assert_ptr_nonnull(big);
	fill_pattern(small, SMALL, 3);
	fill_pattern(big, BIG, 11);
	put_file(root, "d/small", small, SMALL);
	put_file(root, "big", big, BIG);
	put_file(root, "new\nline key", small, 10);
	put_file(root, "empty", "", 0);
	be = open_ok(root);
	ck_assert_int_eq(be->ops->stat(be, "d/small", 7, &st), 0);

	read_expect(be, "d/small", st.etag, small, SMALL, 0, SMALL);
	read_expect(be, "d/small", st.etag, small, SMALL, 100, 50);
	read_expect(be, "d/small", NULL, small, SMALL, 999, 1);
	read_expect(be, "d/small", st.etag, small, SMALL, 990, 10);
	/* Past the end: an error, never a short read. */
	read_expect(be, "d/small", st.etag, small, SMALL, 990, 100);
	read_expect(be, "d/small", st.etag, small, SMALL, 0, SMALL + 1);
	read_expect(be, "d/small", st.etag, small, SMALL, SMALL, 10);
	read_expect(be, "d/small", st.etag, small, SMALL, SMALL + 1, 10);
	read_expect(be, "d/small", NULL, small, SMALL, 1ULL << 40, 10);
	read_expect(be, "empty", NULL, (const unsigned char *)"", 0, 0, 10);
	read_expect(be, "new\nline key", NULL, small, 10, 3, 100);
	/* Nothing asked: nothing read, at the end too. */
	read_expect(be, "d/small", NULL, small, SMALL, 5, 0);
	read_expect(be, "d/small", NULL, small, SMALL, SMALL, 0);
	read_expect(be, "empty", NULL, (const unsigned char *)"", 0, 0, 0);
	read_expect(be, "new\nline key", NULL, small, 10, 3, 7);
	/* Through a link. */
	{
		char path[512], target[512];

		join(path, sizeof(path), root, "link");
		join(target, sizeof(target), root, "d/small");
		ck_assert_int_eq(symlink(target, path), 0);
		read_expect(be, "link", NULL, small, SMALL, 10, 20);
	}
	/* A large file in odd-sized pieces, the last one clamped. */
	for (off = 0; off < BIG; off += 131071)
		read_expect(be, "big", NULL, big, BIG, off,
			    BIG - off < 131071 + 13 ? BIG - off : 131071 + 13);
	read_expect(be, "big", NULL, big, BIG, 0, BIG);
	backend_close(be);
	free(small);
	free(big);
}
END_TEST

/* A read that must fail with rc and leave buf and *nread alone. */
static void read_fails(struct backend *be, const char *key, const char *etag,
		       size_t etag_len, int rc)
{
	unsigned char buf[64], zero[64];
	size_t nread = 777;

	memset(buf, 0xaa, sizeof(buf));
	memset(zero, 0xaa, sizeof(zero));
	ck_assert_int_eq(
		be->ops->read(be,
			      &(struct backend_read){ .key = key,
						      .key_len = strlen(key),
						      .etag = etag,
						      .etag_len = etag_len,
						      .offset = 0,
						      .len = sizeof(buf),
						      .buf = buf },
			      &nread),
		rc);
	ck_assert_uint_eq(nread, 777);
	ck_assert_int_eq(memcmp(buf, zero, sizeof(buf)), 0);
}

START_TEST(test_read_stale)
{
	const char *root = test_root("stale");
	struct backend_stat st, now;
	struct backend *be;
	char path[512], tmp[512];
	unsigned char buf[16];
	size_t nread;

	put_text(root, "f", "version-1");
	set_mtime(root, "f", KNOWN_MTIME_NS);
	be = open_ok(root);
	ck_assert_int_eq(be->ops->stat(be, "f", 1, &st), 0);
	read_expect(be, "f", st.etag, (const unsigned char *)"version-1", 9, 0,
		    9);

	/* Rewritten in place, same size, another mtime. */
	put_text(root, "f", "version-2");
	set_mtime(root, "f", KNOWN_MTIME_NS + 1);
	read_fails(be, "f", st.etag, st.etag_len, -ESTALE);
	/* The etag compares whole: a prefix of it is no match either. */
	ck_assert_int_eq(be->ops->stat(be, "f", 1, &now), 0);
	read_fails(be, "f", now.etag, now.etag_len - 1, -ESTALE);
	read_expect(be, "f", now.etag, (const unsigned char *)"version-2", 9, 0,
		    9);
	/* Without an etag, whatever is there. */
	read_expect(be, "f", NULL, (const unsigned char *)"version-2", 9, 0, 9);

	/* Replaced by rename (new inode), same size and mtime. */
	st = now;
	put_text(root, "f.tmp", "version-3");
	set_mtime(root, "f.tmp", KNOWN_MTIME_NS + 1);
	join(path, sizeof(path), root, "f");
	join(tmp, sizeof(tmp), root, "f.tmp");
	ck_assert_int_eq(rename(tmp, path), 0);
	read_fails(be, "f", st.etag, st.etag_len, -ESTALE);

	/* Grown, same mtime. */
	ck_assert_int_eq(be->ops->stat(be, "f", 1, &st), 0);
	put_text(root, "f", "version-4 longer");
	set_mtime(root, "f", KNOWN_MTIME_NS + 1);
	read_fails(be, "f", st.etag, st.etag_len, -ESTALE);
	ck_assert_int_eq(be->ops->stat(be, "f", 1, &now), 0);
	nread = 0;
	ck_assert_int_eq(read_f(be, &now, 10, 6, buf, &nread), 0);
	ck_assert_uint_eq(nread, 6);
	ck_assert_int_eq(memcmp(buf, "longer", 6), 0);
	backend_close(be);
}
END_TEST

/* Rewrites root/rel in place (same inode) with data and puts its mtime
 * back to mtime_ns, as `cp --preserve`, rsync --inplace or a careless
 * tool would; returns once its ctime differs from before_ns (ctime moves
 * with the kernel's coarse clock, so within one tick it would not: the
 * documented limit), so the test never depends on timing. */
static void rewrite_keep_mtime(const char *root, const char *rel,
			       const char *data, int64_t mtime_ns,
			       int64_t before_ns)
{
	char path[1024];
	struct stat st;
	int fd, tries;

	join(path, sizeof(path), root, rel);
	fd = open(path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, data, strlen(data), 0),
			 (ssize_t)strlen(data));
	ck_assert_int_eq(close(fd), 0);
	for (tries = 0; tries < 400; tries++) {
		set_mtime(root, rel, mtime_ns); /* sets ctime to now */
		ck_assert_int_eq(stat(path, &st), 0);
		if ((int64_t)st.st_ctim.tv_sec * 1000000000 +
			    st.st_ctim.tv_nsec !=
		    before_ns)
			return;
		usleep(5000);
	}
	ck_abort_msg("the ctime of %s never moved", path);
}

static int64_t ctime_ns_of(const char *root, const char *rel)
{
	char path[1024];
	struct stat st;

	join(path, sizeof(path), root, rel);
	ck_assert_int_eq(stat(path, &st), 0);
	return (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
}

/* The text logged since log_to() truncated the file. */
static char *logged(const char *file)
{
	static char buf[8192];
	ssize_t n;
	int fd = open(file, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	close(fd);
	return buf;
}

static void log_to(const char *file)
{
	ck_assert_int_eq(log_file_open(file), 0);
	log_set_sink(LOG_SINK_FILE);
	log_set_level(LOG_INFO);
	ck_assert_int_eq(truncate(file, 0), 0);
}

/* A file rewritten in place, same size, its mtime put back afterwards:
 * size, inode and mtime are the manifest's, only the ctime moved. Served
 * the new bytes before ctime was part of the etag. */
START_TEST(test_read_rewrite_mtime_restored)
{
	const char *root = test_root("restored");
	struct backend_stat st, now;
	struct backend *be;
	char legacy[BACKEND_ETAG_MAX], logf[512], *colon, buf[16];
	size_t nread;
	int i;

	snprintf(logf, sizeof(logf), "%s/restored.log", tmpdir);
	log_to(logf);
	put_text(root, "f", "version-1");
	set_mtime(root, "f", KNOWN_MTIME_NS);
	be = open_ok(root);
	ck_assert_int_eq(be->ops->stat(be, "f", 1, &st), 0);
	read_expect(be, "f", st.etag, (const unsigned char *)"version-1", 9, 0,
		    9);
	rewrite_keep_mtime(root, "f", "version-2", KNOWN_MTIME_NS,
			   ctime_ns_of(root, "f"));
	memset(buf, 0, sizeof(buf));
	nread = 777;
	ck_assert_msg(read_f(be, &st, 0, 9, buf, &nread) == -ESTALE,
		      "read under the manifest's etag gave '%.9s'", buf);
	ck_assert_uint_eq(nread, 777);
	ck_assert_msg(strstr(logged(logf), "f: changed since the manifest was "
					   "made") != NULL,
		      "not logged: %s", logged(logf));
	/* The new version reads under its own etag. */
	ck_assert_int_eq(be->ops->stat(be, "f", 1, &now), 0);
	ck_assert_str_ne(now.etag, st.etag);
	read_expect(be, "f", now.etag, (const unsigned char *)"version-2", 9, 0,
		    9);

	/* A manifest made before ctime was in the etag (mtime:size:ino):
	 * still served, with one warning saying what it cannot see. */
	snprintf(legacy, sizeof(legacy), "%s", now.etag);
	colon = strrchr(legacy, ':');
	ck_assert_ptr_nonnull(colon);
	*colon = '\0';
	ck_assert_int_eq(truncate(logf, 0), 0);
	for (i = 0; i < 3; i++)
		read_expect(be, "f", legacy, (const unsigned char *)"version-2",
			    9, 0, 9);
	ck_assert_msg(strstr(logged(logf), "etags have no ctime") != NULL,
		      "no warning: %s", logged(logf));
	ck_assert_ptr_null(
		strstr(strstr(logged(logf), "etags have no ctime") + 1,
		       "etags have no ctime"));
	/* ... and a legacy etag still catches what it always caught. */
	put_text(root, "f", "version-3");
	set_mtime(root, "f", KNOWN_MTIME_NS + 1);
	read_fails(be, "f", legacy, strlen(legacy), -ESTALE);
	backend_close(be);
}
END_TEST

START_TEST(test_read_missing)
{
	const char *root = test_root("missing");
	struct backend *be;

	put_text(root, "d/f", "x");
	be = open_ok(root);
	read_fails(be, "nope", NULL, 0, -ENOENT);
	read_fails(be, "d/nope", NULL, 0, -ENOENT);
	read_fails(be, "nope/f", NULL, 0, -ENOENT);
	read_fails(be, "nope", "1:1:1", 5, -ENOENT);
	/* Removed after listing. */
	{
		char path[512];

		join(path, sizeof(path), root, "d/f");
		ck_assert_int_eq(unlink(path), 0);
	}
	read_fails(be, "d/f", NULL, 0, -ENOENT);
	backend_close(be);
}
END_TEST

START_TEST(test_read_outside_root)
{
	const char *root = test_root("outside");
	struct backend_stat st;
	struct backend *be;

	put_text(root, "d/f", "x");
	be = open_ok(root);
	/* Each names a real file, but none is a key below the root. */
	read_fails(be, "../outside/d/f", NULL, 0, -EINVAL);
	read_fails(be, "d/../d/f", NULL, 0, -EINVAL);
	read_fails(be, "./d/f", NULL, 0, -EINVAL);
	read_fails(be, "d//f", NULL, 0, -EINVAL);
	read_fails(be, "/etc/hostname", NULL, 0, -EINVAL);
	ck_assert_int_eq(be->ops->stat(be, "/etc/hostname", 13, &st), -EINVAL);
	ck_assert_int_eq(be->ops->stat(be, "d/f", 3, &st), 0);
	backend_close(be);
}
END_TEST

/* ---- nothing but a regular file beneath the root is ever opened ------- */

struct fifo_writer {
	const char *path;
	atomic_int opened; /* the writer's open returned: a reader opened it */
};

static void *fifo_writer_main(void *arg)
{
	struct fifo_writer *w = arg;
	int fd = open(w->path, O_WRONLY); /* blocks until someone reads */

	atomic_store(&w->opened, 1);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* Reads key, which leads to the FIFO at fifo, while a writer waits on
 * it: the read must fail without opening the FIFO, or the writer would
 * get through (opening a device or FIFO can have effects of its own). */
static void read_leaves_fifo_alone(struct backend *be, const char *key,
				   const char *fifo)
{
	struct fifo_writer w = { .path = fifo };
	char buf[16];
	size_t nread = 0;
	pthread_t t;
	int fd;

	ck_assert_int_eq(pthread_create(&t, NULL, fifo_writer_main, &w), 0);
	usleep(100 * 1000); /* let the writer block in open */
	ck_assert_int_lt(
		be->ops->read(be,
			      &(struct backend_read){ .key = key,
						      .key_len = strlen(key),
						      .offset = 0,
						      .len = 4,
						      .buf = buf },
			      &nread),
		0);
	usleep(300 * 1000); /* a reader's open would have let it through */
	ck_assert_msg(atomic_load(&w.opened) == 0,
		      "reading %s opened the FIFO it leads to", key);
	fd = open(fifo, O_RDONLY | O_NONBLOCK); /* let the writer go */
	pthread_join(t, NULL);
	if (fd >= 0)
		close(fd);
}

START_TEST(test_read_never_opens_fifo)
{
	const char *root = test_root("fifo");
	char outside[512], inside[512], link[512];
	struct backend *be;

	put_text(root, "f", "x");
	snprintf(outside, sizeof(outside), "%s/fifo_outside", tmpdir);
	ck_assert_int_eq(mkfifo(outside, 0600), 0);
	snprintf(inside, sizeof(inside), "%s/inpipe", root);
	ck_assert_int_eq(mkfifo(inside, 0600), 0);
	snprintf(link, sizeof(link), "%s/outpipe", root);
	ck_assert_int_eq(symlink(outside, link), 0); /* absolute: fallback */
	be = open_ok(root);
	read_leaves_fifo_alone(be, "outpipe", outside);
	read_leaves_fifo_alone(be, "inpipe", inside);
	backend_close(be);
}
END_TEST

/* ---- a file rewritten in place while it is read ------------------------ */

enum { RACE_SIZE = 4 << 20, RACE_PIECE = 256 << 10, RACE_TRIALS = 100 };

struct race {
	int fd;			   /* the file, open for writing */
	const unsigned char *next; /* the version the writer puts in place */
	atomic_int reads;	   /* reads started by the reader */
	atomic_int written;	   /* set once the whole rewrite is in place */
};

/* Rewrites the file in place (same inode, same size) back to front, so a
 * read running front to back meets new bytes at its end: once the reader
 * has started, the rewrite overlaps some read. */
static void *race_writer(void *arg)
{
	struct race *r = arg;
	size_t off = RACE_SIZE;

	while (atomic_load(&r->reads) < 2)
		sched_yield();
	while (off > 0) {
		off -= RACE_PIECE;
		if (pwrite(r->fd, r->next + off, RACE_PIECE, (off_t)off) !=
		    RACE_PIECE)
			abort();
	}
	atomic_store(&r->written, 1);
	return NULL;
}

START_TEST(test_read_rewrite_in_place)
{
	const char *root = test_root("rewrite");
	unsigned char *v0 = malloc(RACE_SIZE), *v1 = malloc(RACE_SIZE);
	unsigned char *buf = malloc(RACE_SIZE);
	int trial, mixed = 0, good = 0, stale = 0, other = 0;
	struct backend *be;

	ck_assert_ptr_nonnull(v0);
	ck_assert_ptr_nonnull(v1);
	ck_assert_ptr_nonnull(buf);
	/* Every byte differs between the versions. */
	fill_pattern(v0, RACE_SIZE, 0);
	fill_pattern(v1, RACE_SIZE, 1);
	be = open_ok(root);
	for (trial = 0; trial < RACE_TRIALS; trial++) {
		struct race r = { .next = v1 };
		struct backend_stat st;
		pthread_t writer;
		char key[32], path[512];
		size_t nread;
		int rc, after = 0;

		/* A fresh inode each trial; an mtime in the past, so the
		 * rewrite's first write moves it whatever the clock's tick. */
		snprintf(key, sizeof(key), "f%d", trial);
		put_file(root, key, v0, RACE_SIZE);
		set_mtime(root, key, KNOWN_MTIME_NS);
		ck_assert_int_eq(be->ops->stat(be, key, strlen(key), &st), 0);
		join(path, sizeof(path), root, key);
		r.fd = open(path, O_WRONLY);
		ck_assert_int_ge(r.fd, 0);
		ck_assert_int_eq(pthread_create(&writer, NULL, race_writer, &r),
				 0);
		/* Read until one read started after the rewrite ended. */
		while (after == 0) {
			after = atomic_load(&r.written);
			atomic_fetch_add(&r.reads, 1);
			nread = 0;
			rc = be->ops->read(
				be,
				&(struct backend_read){ .key = key,
							.key_len = strlen(key),
							.etag = st.etag,
							.etag_len = st.etag_len,
							.offset = 0,
							.len = RACE_SIZE,
							.buf = buf },
				&nread);
			if (rc == 0 && nread == RACE_SIZE &&
			    memcmp(buf, v0, RACE_SIZE) == 0)
				good++;
			else if (rc == 0)
				mixed++;
			else if (rc == -ESTALE)
				stale++;
			else
				other++;
			/* The rewrite is complete: never a success. */
			ck_assert_msg(!after || rc == -ESTALE,
				      "trial %d: read after the rewrite: %d",
				      trial, rc);
		}
		ck_assert_int_eq(pthread_join(writer, NULL), 0);
		ck_assert_int_eq(close(r.fd), 0);
	}
	/* Every read that succeeded returned the version the etag names,
	 * all of it; every other read said the file changed. */
	ck_assert_msg(mixed == 0 && other == 0,
		      "%d of %d reads returned mixed bytes, %d failed "
		      "otherwise (%d good, %d stale, %d trials)",
		      mixed, mixed + good + stale + other, other, good, stale,
		      RACE_TRIALS);
	ck_assert_int_ge(stale, RACE_TRIALS);
	backend_close(be);
	free(v0);
	free(v1);
	free(buf);
}
END_TEST

/* A read returns exactly the bytes asked for, or an error: a file shorter
 * than the caller expects (truncated, or a stale size) is never a short
 * success. */
START_TEST(test_read_exact)
{
	const char *root = test_root("exact");
	unsigned char data[1000], buf[200];
	struct backend_stat st;
	struct backend *be;
	char path[512];
	size_t nread;

	fill_pattern(data, sizeof(data), 5);
	put_file(root, "f", data, sizeof(data));
	set_mtime(root, "f", KNOWN_MTIME_NS);
	be = open_ok(root);
	ck_assert_int_eq(be->ops->stat(be, "f", 1, &st), 0);
	read_expect(be, "f", st.etag, data, sizeof(data), 900, 100);
	/* Past the end, without and with an etag. */
	nread = 777;
	ck_assert_int_eq(read_f(be, NULL, 990, 100, buf, &nread), -EIO);
	ck_assert_uint_eq(nread, 777);
	ck_assert_int_eq(read_f(be, &st, 1000, 1, buf, &nread), -EIO);
	ck_assert_uint_eq(nread, 777);
	/* Truncated in place, its mtime put back: the etag differs by the
	 * size alone. */
	join(path, sizeof(path), root, "f");
	ck_assert_int_eq(truncate(path, 950), 0);
	set_mtime(root, "f", KNOWN_MTIME_NS);
	ck_assert_int_eq(read_f(be, &st, 900, 100, buf, &nread), -ESTALE);
	ck_assert_int_eq(read_f(be, NULL, 900, 100, buf, &nread), -EIO);
	ck_assert_uint_eq(nread, 777);
	/* Rewritten in place after the stat, same size and inode, its
	 * mtime left to the clock: the new bytes are never returned. */
	ck_assert_int_eq(be->ops->stat(be, "f", 1, &st), 0);
	fill_pattern(data, sizeof(data), 6);
	{
		int fd = open(path, O_WRONLY);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, data, 950, 0), 950);
		ck_assert_int_eq(close(fd), 0);
	}
	memset(buf, 0xaa, sizeof(buf));
	ck_assert_int_eq(read_f(be, &st, 0, 100, buf, &nread), -ESTALE);
	ck_assert_uint_eq(nread, 777);
	backend_close(be);
}
END_TEST

/* ---- symlinks ------------------------------------------------------------ */

/* Outside every test root: a private file whose bytes must never be
 * served. */
static const char secret_text[] = "SECRET-outside-the-root";

static void links_outside_root(const char *name)
{
	const char *root = test_root(name);
	char outside[512], secret[512], path[512], target[512];
	struct listed l = { .n = 0 };
	struct backend_stat st;
	struct backend *be;
	size_t i;
	static const char *const refused[] = {
		"up_rel", "abs_secret",	   "passwd",
		"chain",  "d/via_dirlink", "d/up_and_out",
	};

	snprintf(outside, sizeof(outside), "%s/%s_outside", tmpdir, name);
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	put_text(outside, "secret", secret_text);
	join(secret, sizeof(secret), outside, "secret");
	ck_assert_int_eq(chmod(secret, 0600), 0);

	put_text(root, "d/f", "inside");
	/* Links that leave the root. */
	join(path, sizeof(path), root, "up_rel");
	snprintf(target, sizeof(target), "../%s_outside/secret", name);
	ck_assert_int_eq(symlink(target, path), 0);
	join(path, sizeof(path), root, "abs_secret");
	ck_assert_int_eq(symlink(secret, path), 0);
	join(path, sizeof(path), root, "passwd");
	ck_assert_int_eq(symlink("/etc/passwd", path), 0);
	join(path, sizeof(path), root, "chain"); /* to a link that leaves */
	ck_assert_int_eq(symlink("up_rel", path), 0);
	join(path, sizeof(path), root, "dirlink");
	ck_assert_int_eq(symlink(outside, path), 0);
	join(path, sizeof(path), root, "d/via_dirlink");
	ck_assert_int_eq(symlink("../dirlink/secret", path), 0);
	join(path, sizeof(path), root, "d/up_and_out"); /* in, then out */
	snprintf(target, sizeof(target), "../../%s/../%s_outside/secret", name,
		 name);
	ck_assert_int_eq(symlink(target, path), 0);
	/* Links that stay inside: relative, absolute, up and down again. */
	join(path, sizeof(path), root, "in_rel");
	ck_assert_int_eq(symlink("d/f", path), 0);
	join(path, sizeof(path), root, "in_abs");
	join(target, sizeof(target), root, "d/f");
	ck_assert_int_eq(symlink(target, path), 0);
	join(path, sizeof(path), root, "d/in_up");
	ck_assert_int_eq(symlink("../d/f", path), 0);

	be = open_ok(root);
	ck_assert_int_eq(be->ops->list(be, "", collect, &l), 0);
	for (i = 0; i < l.n; i++)
		ck_assert_msg(strcmp(l.obj[i].key, "d/f") == 0 ||
				      strcmp(l.obj[i].key, "in_rel") == 0 ||
				      strcmp(l.obj[i].key, "in_abs") == 0 ||
				      strcmp(l.obj[i].key, "d/in_up") == 0,
			      "listed '%s'", l.obj[i].key);
	ck_assert_uint_eq(l.n, 4);
	listed_free(&l);
	/* Counted (dirlink too: a link to a directory outside), per listing. */
	ck_assert_uint_eq(backend_posix_links_refused(be), 7);
	ck_assert_int_eq(be->ops->list(be, "", collect, &l), 0);
	listed_free(&l);
	ck_assert_uint_eq(backend_posix_links_refused(be), 14);
	ck_assert_uint_eq(backend_posix_links_refused(NULL), 0);

	/* Asked by key, they are refused too: no byte, no stat. */
	for (i = 0; i < ARRAY_LEN(refused); i++) {
		size_t len = strlen(refused[i]);

		read_fails(be, refused[i], NULL, 0, -EACCES);
		ck_assert_int_eq(be->ops->stat(be, refused[i], len, &st),
				 -EACCES);
	}
	read_expect(be, "in_abs", NULL, (const unsigned char *)"inside", 6, 0,
		    6);
	read_expect(be, "d/in_up", NULL, (const unsigned char *)"inside", 6, 0,
		    6);

	/* A link planted after the listing, in place of a listed file. */
	ck_assert_int_eq(be->ops->stat(be, "d/f", 3, &st), 0);
	join(path, sizeof(path), root, "d/f");
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(symlink(secret, path), 0);
	read_fails(be, "d/f", NULL, 0, -EACCES);
	read_fails(be, "d/f", st.etag, st.etag_len, -EACCES);
	read_fails(be, "in_rel", NULL, 0, -EACCES);
	backend_close(be);
}

START_TEST(test_links_outside_root)
{
	links_outside_root("links");
}
END_TEST

/* The same where openat2 is missing (kernels before 5.6, or a seccomp
 * filter, as in some containers): a real filter makes it fail with ENOSYS
 * in this test's process, and the fallback must refuse the same links. */
START_TEST(test_links_outside_root_without_openat2)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = ARRAY_LEN(code), .filter = code };

	ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	ck_assert_int_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
	ck_assert_int_eq(syscall(SYS_openat2, AT_FDCWD, ".", NULL, 0), -1);
	ck_assert_int_eq(errno, ENOSYS);
	links_outside_root("links_noat2");
}
END_TEST

static Suite *posix_suite(void)
{
	const struct unit_case cases[] = {
		{ "open_errors", test_open_errors },
		{ "list_tree", test_list_tree },
		{ "etag_format", test_etag_format },
		{ "list_prefix_and_stop", test_list_prefix_and_stop },
		{ "stat", test_stat },
		{ "read_offsets", test_read_offsets },
		{ "read_stale", test_read_stale },
		{ "read_rewrite_mtime_restored",
		  test_read_rewrite_mtime_restored },
		{ "read_missing", test_read_missing },
		{ "read_outside_root", test_read_outside_root },
		{ "read_never_opens_fifo", test_read_never_opens_fifo },
		{ "read_rewrite_in_place", test_read_rewrite_in_place },
		{ "read_exact", test_read_exact },
		{ "links_outside_root", test_links_outside_root },
		{ "links_outside_root_without_openat2",
		  test_links_outside_root_without_openat2 },
	};
	return unit_suite("posix", cases, ARRAY_LEN(cases));
}

int main(void)
{
	/* The error paths log each failure once; the tests check them. */
	log_set_level(LOG_ERR - 1);
	return unit_run_in_tmpdir(posix_suite(), "/tmp/check_posix.XXXXXX",
				  tmpdir, sizeof(tmpdir));
}
