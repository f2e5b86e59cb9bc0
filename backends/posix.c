/*
 * posix: a directory on a local or NFS-mounted filesystem.
 *
 * Keys are paths relative to the root directory. The etag is
 * "mtime_ns:size:ino:ctime_ns", so a file replaced or rewritten in place
 * gets a new etag, even when its mtime was put back afterwards (only the
 * kernel sets a ctime), and a read that finds a different etag fails with
 * -ESTALE instead of serving bytes of another version. Manifests made
 * before the ctime was part of it hold "mtime_ns:size:ino": read() still
 * accepts those, comparing the three fields, and warns once per backend
 * that a rewrite with a restored mtime goes unseen until the manifest is
 * made again (docs/RELIABILITY.md). Everything is relative to one O_PATH
 * directory descriptor opened at open(), so a root renamed or remounted
 * under us cannot redirect reads.
 *
 * A read checks the file's identity (device, inode, size, mtime and ctime)
 * on the open descriptor before and after pread: a file rewritten in place
 * while it is read fails with -ESTALE, so bytes of two versions never reach
 * a caller. A read returns exactly the bytes asked for or an error.
 *
 * Nothing outside the root is ever opened: every key is opened with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), and a link that this
 * refuses (an absolute target, or a kernel without openat2) is resolved
 * and then checked by the path the kernel reports for the descriptor, so a
 * link to another file inside the root works and one that leaves it is
 * refused (-EACCES), however and whenever it was planted. Keys are first
 * resolved with O_PATH, which opens nothing; only a regular file beneath
 * the root is then opened for reading (no device or FIFO a link names is
 * ever opened).
 *
 * Listing follows symlinks to regular files inside the root, skips (and
 * counts) those that resolve outside it, and never descends into a
 * symlinked directory (no loops); other file types are ignored.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/posix.h"
#include "util/log.h"
#include "util/str.h"

struct posix_backend {
	struct backend base;
	int root_fd; /* O_PATH directory, read-only after open */
	char *root;  /* for messages */
	/* Symlinks list() skipped; the first few are logged. */
	atomic_uint_fast64_t links_refused;
	atomic_flag legacy_warned; /* a 3-field etag was seen */
};

static int posix_handles(const char *url)
{
	return url[0] == '/' || strncmp(url, "file://", 7) == 0;
}

static int posix_open(const char *url, const struct backend_options *opts,
		      struct backend **out)
{
	struct posix_backend *pb;
	struct stat st;
	const char *path = url;
	int rc;

	(void)opts;
	if (strncmp(path, "file://", 7) == 0)
		path += 7;
	if (path[0] != '/') {
		log_msg(LOG_ERR, "posix source '%s': not an absolute path",
			url);
		return -EINVAL;
	}
	pb = calloc(1, sizeof(*pb));
	if (pb == NULL)
		return -ENOMEM;
	pb->base.ops = &backend_posix_ops;
	atomic_flag_clear(&pb->legacy_warned);
	pb->root = strdup(path);
	if (pb->root == NULL) {
		rc = -ENOMEM;
		goto err_free;
	}
	pb->root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pb->root_fd < 0) {
		rc = -errno;
		if (rc == -ENOTDIR ||
		    (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)))
			log_msg(LOG_ERR, "source %s: not a directory", path);
		else
			log_msg(LOG_ERR, "source directory %s: %s", path,
				strerror(-rc));
		goto err_root;
	}
	*out = &pb->base;
	return 0;

err_root:
	free(pb->root);
err_free:
	free(pb);
	return rc;
}

static void posix_close(struct backend *be)
{
	struct posix_backend *pb = (struct posix_backend *)be;

	if (pb == NULL)
		return;
	close(pb->root_fd);
	free(pb->root);
	free(pb);
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* "mtime_ns:size:ino:ctime_ns"; with legacy, the first three fields only
 * (what manifests made before the ctime was in the etag hold). */
static size_t format_etag(const struct stat *st, bool legacy, char *buf,
			  size_t cap)
{
	int n = snprintf(buf, cap, "%" PRId64 ":%" PRIu64 ":%" PRIu64,
			 mtime_ns(st), (uint64_t)st->st_size,
			 (uint64_t)st->st_ino);

	if (n > 0 && !legacy && (size_t)n < cap)
		n += snprintf(buf + n, cap - (size_t)n, ":%" PRId64,
			      (int64_t)st->st_ctim.tv_sec * 1000000000 +
				      st->st_ctim.tv_nsec);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* The path the kernel reports for fd into buf; 0, or -EACCES when it
 * cannot be known (no /proc, a path over PATH_MAX). */
static int fd_path(int fd, char *buf, size_t cap)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, buf, cap);
	if (n <= 0 || (size_t)n >= cap)
		return -EACCES;
	buf[n] = '\0';
	return 0;
}

/* 0 if the file open on fd lies below the root, else -EACCES. The paths
 * come from the descriptors themselves, so what is checked is what was
 * opened, not a name that could be swapped in between. */
static int fd_beneath(const struct posix_backend *pb, int fd)
{
	char root[PATH_MAX], path[PATH_MAX];
	size_t n;

	if (fd_path(pb->root_fd, root, sizeof(root)) < 0 ||
	    fd_path(fd, path, sizeof(path)) < 0)
		return -EACCES;
	n = strlen(root);
	if (n == 1 && root[0] == '/')
		return 0;
	return strncmp(path, root, n) == 0 && path[n] == '/' ? 0 : -EACCES;
}

/* Opens key (already checked by key_to_path) below the root with flags.
 * Returns the descriptor, -EACCES if the key resolves outside the root
 * (through a symlink anywhere on its path), or another -errno. Not
 * logged: the callers know whether a failure is news. */
static int open_resolved(const struct posix_backend *pb, const char *key,
			 int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	int fd, rc, tries;

	for (tries = 0; tries < 8; tries++) {
		fd = (int)syscall(SYS_openat2, pb->root_fd, key, &how,
				  sizeof(how));
		if (fd >= 0)
			return fd;
		if (errno != EAGAIN) /* EAGAIN: a rename raced; again */
			break;
	}
	/* EXDEV: the path leaves the root or names an absolute link, which
	 * may still land inside; ENOSYS: no openat2 (kernel < 5.6, or a
	 * seccomp filter). Open as the path says, then check where it went. */
	if (errno != EXDEV && errno != ENOSYS)
		return -errno;
	fd = openat(pb->root_fd, key, flags | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = fd_beneath(pb, fd);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* As open_resolved(), but a descriptor to read from is opened only once
 * the key is known to be a regular file beneath the root: the key is
 * resolved with O_PATH (which opens nothing: no device, FIFO or tty a
 * link names is ever opened, not even for a check), then that very file
 * is reopened through /proc/self/fd. Without /proc, opens directly.
 * -ENOENT for anything but a regular file. */
static int open_beneath(const struct posix_backend *pb, const char *key,
			int flags)
{
	struct stat a, b;
	char proc[64];
	int pfd, fd, rc = 0;

	if (flags & O_PATH)
		return open_resolved(pb, key, flags);
	pfd = open_resolved(pb, key, O_PATH);
	if (pfd < 0)
		return pfd;
	if (fstat(pfd, &a) < 0)
		rc = -errno;
	else if (!S_ISREG(a.st_mode))
		rc = -ENOENT;
	if (rc < 0) {
		close(pfd);
		return rc;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, flags | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && access("/proc/self/fd", F_OK) != 0) {
		close(pfd);
		return open_resolved(pb, key, flags);
	}
	if (fd < 0)
		rc = -errno;
	else if (fstat(fd, &b) < 0 || b.st_dev != a.st_dev ||
		 b.st_ino != a.st_ino)
		rc = -ESTALE; /* cannot happen: the same open file */
	if (rc < 0 && fd >= 0)
		close(fd);
	close(pfd);
	return rc < 0 ? rc : fd;
}

/* What identifies one version of a file: any write, truncation or
 * replacement changes at least one of these (within the limits of the
 * filesystem's timestamp granularity, see docs/RELIABILITY.md). */
static int same_version(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* A growable path relative to the root, "" at the top. */
struct walk {
	struct posix_backend *pb;
	backend_list_cb cb;
	void *arg;
	char *path;
	size_t len, cap;
	char kb[LOG_KEY_MAX]; /* a key escaped for a message (log_key()) */
};

static int walk_push(struct walk *w, const char *name, size_t *saved)
{
	*saved = w->len;
	return str_path_push(&w->path, &w->len, &w->cap, name, 0);
}

static int walk_dir(struct walk *w, int dir_fd);

static int walk_entry(struct walk *w, int dir_fd, const char *name)
{
	struct backend_object obj;
	char etag[96];
	struct stat st;
	int rc, sub;

	if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = -errno;
		if (rc == -ENOENT) /* removed while we list: not an error */
			return 0;
		log_msg(LOG_ERR, "source %s/%s: %s", w->pb->root,
			log_key(w->kb, w->path, w->len), strerror(-rc));
		return rc;
	}
	if (S_ISLNK(st.st_mode)) {
		/* Resolved from the root, as a read will open it. */
		int fd = open_beneath(w->pb, w->path, O_PATH);

		if (fd == -EACCES) {
			backend_list_skipped(
				&w->pb->links_refused, LOG_WARNING, w->pb->root,
				"/", log_key(w->kb, w->path, w->len),
				"symlink leads outside the source root");
			return 0;
		}
		rc = fd < 0 ? fd : fstat(fd, &st) < 0 ? -errno : 0;
		if (fd >= 0)
			close(fd);
		if (rc < 0 || !S_ISREG(st.st_mode)) {
			log_msg(LOG_INFO,
				"source %s/%s: symlink not to a regular file, "
				"ignored",
				w->pb->root, log_key(w->kb, w->path, w->len));
			return 0;
		}
	}
	if (S_ISDIR(st.st_mode)) {
		sub = openat(dir_fd, name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			rc = -errno;
			log_msg(LOG_ERR, "source %s/%s: %s", w->pb->root,
				log_key(w->kb, w->path, w->len), strerror(-rc));
			return rc;
		}
		return walk_dir(w, sub);
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	obj.key = w->path;
	obj.key_len = w->len;
	obj.size = (uint64_t)st.st_size;
	obj.etag = etag;
	obj.etag_len = format_etag(&st, false, etag, sizeof(etag));
	obj.mtime_ns = mtime_ns(&st);
	return w->cb(w->arg, &obj);
}

/* Walks one directory; takes ownership of dir_fd. */
static int walk_dir(struct walk *w, int dir_fd)
{
	DIR *d = fdopendir(dir_fd);
	struct dirent *de;
	size_t saved = w->len;
	int rc = 0;

	if (d == NULL) {
		rc = -errno;
		close(dir_fd);
		return rc;
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (de == NULL) {
			if (errno != 0) {
				rc = -errno;
				log_msg(LOG_ERR, "source %s/%s: readdir: %s",
					w->pb->root,
					log_key(w->kb, w->path, w->len),
					strerror(-rc));
			}
			break;
		}
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		rc = walk_push(w, de->d_name, &saved);
		if (rc == 0)
			rc = walk_entry(w, dirfd(d), de->d_name);
		w->len = saved;
		if (w->path != NULL)
			w->path[w->len] = '\0';
		if (rc != 0)
			break;
	}
	closedir(d);
	return rc;
}

static int posix_list(struct backend *be, const char *prefix,
		      backend_list_cb cb, void *arg)
{
	struct posix_backend *pb = (struct posix_backend *)be;
	struct walk w = { .pb = pb, .cb = cb, .arg = arg };
	int fd, rc;

	/* The walk filters by prefix only at the top: a prefix names a
	 * directory below the root ("" for everything). */
	fd = openat(pb->root_fd, prefix[0] ? prefix : ".",
		    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		char kb[LOG_KEY_MAX];

		rc = -errno;
		log_msg(LOG_ERR, "source %s/%s: %s", pb->root,
			log_key(kb, prefix, strlen(prefix)), strerror(-rc));
		return rc;
	}
	if (prefix[0] != '\0') {
		size_t saved, len = strlen(prefix);
		char *dir = strndup(prefix, len - (prefix[len - 1] == '/'));

		rc = dir ? walk_push(&w, dir, &saved) : -ENOMEM;
		free(dir);
		if (rc < 0) {
			close(fd);
			return rc;
		}
	}
	rc = walk_dir(&w, fd);
	free(w.path);
	return rc;
}

/* backend_key_relative(), and NUL-terminated as openat() reads it (no
 * key may name anything outside the root, nor an absolute path, which
 * openat() would take as is). */
static int key_to_path(const char *key, size_t key_len)
{
	if (key_len == 0 || key[key_len] != '\0')
		return -EINVAL;
	return backend_key_relative(key, key_len);
}

/* Logs a failure of open_beneath() for key. A missing key is news to a
 * read (the manifest named it) but an answer to a stat. */
static void log_open_error(const struct posix_backend *pb, const char *key,
			   int rc, bool log_enoent)
{
	char kb[LOG_KEY_MAX];

	if (rc == -EACCES)
		log_msg(LOG_ERR,
			"source %s/%s: leads outside the source root "
			"(a symlink), refused",
			pb->root, log_key(kb, key, strlen(key)));
	else if (rc != -ENOENT || log_enoent)
		log_msg(LOG_ERR, "source %s/%s: open: %s", pb->root,
			log_key(kb, key, strlen(key)), strerror(-rc));
}

static int posix_stat(struct backend *be, const char *key, size_t key_len,
		      struct backend_stat *st)
{
	struct posix_backend *pb = (struct posix_backend *)be;
	struct stat sb;
	int fd, rc = key_to_path(key, key_len);

	if (rc < 0)
		return rc;
	fd = open_beneath(pb, key, O_PATH);
	if (fd < 0) {
		log_open_error(pb, key, fd, false);
		return fd;
	}
	rc = fstat(fd, &sb) < 0 ? -errno : 0;
	close(fd);
	if (rc < 0) {
		char kb[LOG_KEY_MAX];

		log_msg(LOG_ERR, "source %s/%s: %s", pb->root,
			log_key(kb, key, key_len), strerror(-rc));
		return rc;
	}
	if (!S_ISREG(sb.st_mode))
		return -ENOENT;
	st->size = (uint64_t)sb.st_size;
	st->mtime_ns = mtime_ns(&sb);
	st->etag_len = format_etag(&sb, false, st->etag, sizeof(st->etag));
	return 0;
}

static int posix_read(struct backend *be, const struct backend_read *r,
		      size_t *nread)
{
	struct posix_backend *pb = (struct posix_backend *)be;
	char cur[96], kb[LOG_KEY_MAX];
	struct stat before, after;
	size_t done = 0, cur_len;
	ssize_t n;
	int fd, rc = key_to_path(r->key, r->key_len);

	if (rc < 0)
		return rc;
	/* O_NONBLOCK: a FIFO planted under a key must not hang the read
	 * (regular files ignore the flag). */
	fd = open_beneath(pb, r->key, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		log_open_error(pb, r->key, fd, true);
		return fd;
	}
	if (fstat(fd, &before) < 0) {
		rc = -errno;
		log_msg(LOG_ERR, "source %s/%s: %s", pb->root,
			log_key(kb, r->key, r->key_len), strerror(-rc));
		goto out;
	}
	if (!S_ISREG(before.st_mode)) {
		log_msg(LOG_ERR, "source %s/%s: not a regular file", pb->root,
			log_key(kb, r->key, r->key_len));
		rc = -ENOENT;
		goto out;
	}
	if (r->etag != NULL) {
		bool legacy = backend_posix_etag_legacy(r->etag, r->etag_len);

		if (legacy && !atomic_flag_test_and_set(&pb->legacy_warned))
			log_msg(LOG_WARNING,
				"source %s: the manifest's etags have no ctime "
				"(mtime:size:inode, made by an older shardfs): "
				"a file rewritten in place with its mtime put "
				"back is not detected until the manifest is "
				"made again (shardfs manifest)",
				pb->root);
		cur_len = format_etag(&before, legacy, cur, sizeof(cur));
		if (cur_len != r->etag_len ||
		    memcmp(cur, r->etag, r->etag_len) != 0) {
			log_msg(LOG_ERR,
				"source %s/%s: changed since the manifest was "
				"made (etag %.*s, now %s)",
				pb->root, log_key(kb, r->key, r->key_len),
				(int)r->etag_len, r->etag, cur);
			rc = -ESTALE;
			goto out;
		}
	}
	while (done < r->len) {
		n = pread(fd, (char *)r->buf + done, r->len - done,
			  (off_t)(r->offset + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			log_msg(LOG_ERR,
				"source %s/%s: read at %" PRIu64 ": %s",
				pb->root, log_key(kb, r->key, r->key_len),
				r->offset + done, strerror(-rc));
			goto out;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	/* The etag was checked before reading; a write during pread would
	 * mix versions in buf unseen. The same descriptor, stat'ed again,
	 * tells whether any write, truncation or chmod happened meanwhile. */
	if (fstat(fd, &after) < 0) {
		rc = -errno;
		log_msg(LOG_ERR, "source %s/%s: %s", pb->root,
			log_key(kb, r->key, r->key_len), strerror(-rc));
		goto out;
	}
	if (!same_version(&before, &after)) {
		cur_len = format_etag(&after, false, cur, sizeof(cur));
		log_msg(LOG_ERR,
			"source %s/%s: changed while being read (now %s)",
			pb->root, log_key(kb, r->key, r->key_len), cur);
		rc = -ESTALE;
		goto out;
	}
	/* Callers ask only for bytes the manifest says exist: fewer is a
	 * file shorter than its manifest entry, never a short success. */
	if (done < r->len) {
		log_msg(LOG_ERR,
			"source %s/%s: %zu bytes at %" PRIu64
			" asked, the file ends at %" PRIu64,
			pb->root, log_key(kb, r->key, r->key_len), r->len,
			r->offset, (uint64_t)after.st_size);
		rc = -EIO;
		goto out;
	}
	*nread = done;
out:
	close(fd);
	return rc;
}

bool backend_posix_etag_legacy(const char *etag, size_t len)
{
	size_t i, colons = 0;

	for (i = 0; i < len; i++)
		colons += etag[i] == ':';
	return colons == 2;
}

size_t backend_posix_etag_legacy_len(const char *etag, size_t len)
{
	const char *last = memrchr(etag, ':', len);
	size_t colons = 0, i;

	for (i = 0; i < len; i++)
		colons += etag[i] == ':';
	return colons == 3 && last != NULL ? (size_t)(last - etag) : len;
}

uint64_t backend_posix_links_refused(const struct backend *be)
{
	const struct posix_backend *pb = (const struct posix_backend *)be;

	if (be == NULL || be->ops != &backend_posix_ops)
		return 0;
	return atomic_load(&pb->links_refused);
}

const struct backend_ops backend_posix_ops = {
	.name = "posix",
	.handles = posix_handles,
	.open = posix_open,
	.list = posix_list,
	.stat = posix_stat,
	.read = posix_read,
	.close = posix_close,
};
