/*
 * posix: a directory on a local or NFS-mounted filesystem.
 *
 * Keys are paths relative to the root directory. The etag is
 * "mtime_ns:size:ino", so a file replaced or rewritten in place gets a new
 * etag, and a read that finds a different etag fails with -ESTALE instead of
 * serving bytes of another version. Everything is relative to one O_PATH
 * directory descriptor opened at open(), so a root renamed or remounted
 * under us cannot redirect reads.
 *
 * Listing follows symlinks to regular files but never descends into a
 * symlinked directory (no loops); other file types are ignored.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "util/log.h"

struct posix_backend {
	struct backend base;
	int root_fd; /* O_PATH directory, read-only after open */
	char *root;  /* for messages */
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

static size_t format_etag(const struct stat *st, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%" PRId64 ":%" PRIu64 ":%" PRIu64,
			 (int64_t)st->st_mtim.tv_sec * 1000000000 +
				 st->st_mtim.tv_nsec,
			 (uint64_t)st->st_size, (uint64_t)st->st_ino);

	return n > 0 ? (size_t)n : 0;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* A growable path relative to the root, "" at the top. */
struct walk {
	struct posix_backend *pb;
	backend_list_cb cb;
	void *arg;
	char *path;
	size_t len, cap;
};

static int walk_push(struct walk *w, const char *name, size_t *saved)
{
	size_t nlen = strlen(name), need = w->len + nlen + 2;

	if (need > w->cap) {
		size_t cap = need * 2;
		char *p = realloc(w->path, cap);

		if (p == NULL)
			return -ENOMEM;
		w->path = p;
		w->cap = cap;
	}
	*saved = w->len;
	if (w->len > 0)
		w->path[w->len++] = '/';
	memcpy(w->path + w->len, name, nlen + 1);
	w->len += nlen;
	return 0;
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
		log_msg(LOG_ERR, "source %s/%s: %s", w->pb->root, w->path,
			strerror(-rc));
		return rc;
	}
	if (S_ISLNK(st.st_mode)) {
		if (fstatat(dir_fd, name, &st, 0) < 0 || !S_ISREG(st.st_mode)) {
			log_msg(LOG_INFO,
				"source %s/%s: symlink not to a regular file, "
				"ignored",
				w->pb->root, w->path);
			return 0;
		}
	}
	if (S_ISDIR(st.st_mode)) {
		sub = openat(dir_fd, name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			rc = -errno;
			log_msg(LOG_ERR, "source %s/%s: %s", w->pb->root,
				w->path, strerror(-rc));
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
	obj.etag_len = format_etag(&st, etag, sizeof(etag));
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
					w->pb->root, w->path, strerror(-rc));
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
		rc = -errno;
		log_msg(LOG_ERR, "source %s/%s: %s", pb->root, prefix,
			strerror(-rc));
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

/* Keys from a manifest passed the path rules already; checking again here
 * keeps the backend safe on its own: no key may name anything outside the
 * root ("..", or an absolute path, which openat() would take as is). */
static int key_to_path(const char *key, size_t key_len)
{
	size_t start = 0, i;

	if (key_len == 0 || memchr(key, '\0', key_len) != NULL ||
	    key[key_len] != '\0')
		return -EINVAL;
	for (i = 0; i <= key_len; i++) {
		if (i < key_len && key[i] != '/')
			continue;
		if (i == start || (i - start == 1 && key[start] == '.') ||
		    (i - start == 2 && key[start] == '.' &&
		     key[start + 1] == '.'))
			return -EINVAL;
		start = i + 1;
	}
	return 0;
}

static int posix_stat(struct backend *be, const char *key, size_t key_len,
		      struct backend_stat *st)
{
	struct posix_backend *pb = (struct posix_backend *)be;
	struct stat sb;
	int rc = key_to_path(key, key_len);

	if (rc < 0)
		return rc;
	if (fstatat(pb->root_fd, key, &sb, 0) < 0) {
		rc = -errno;
		if (rc != -ENOENT)
			log_msg(LOG_ERR, "source %s/%s: %s", pb->root, key,
				strerror(-rc));
		return rc;
	}
	if (!S_ISREG(sb.st_mode))
		return -ENOENT;
	st->size = (uint64_t)sb.st_size;
	st->mtime_ns = mtime_ns(&sb);
	st->etag_len = format_etag(&sb, st->etag, sizeof(st->etag));
	return 0;
}

static int posix_read(struct backend *be, const char *key, size_t key_len,
		      const char *etag, size_t etag_len, uint64_t offset,
		      size_t len, void *buf, size_t *nread)
{
	struct posix_backend *pb = (struct posix_backend *)be;
	char cur[96];
	struct stat sb;
	size_t done = 0, cur_len;
	ssize_t n;
	int fd, rc = key_to_path(key, key_len);

	if (rc < 0)
		return rc;
	fd = openat(pb->root_fd, key, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		log_msg(LOG_ERR, "source %s/%s: open: %s", pb->root, key,
			strerror(-rc));
		return rc;
	}
	if (etag != NULL) {
		if (fstat(fd, &sb) < 0) {
			rc = -errno;
			goto out;
		}
		cur_len = format_etag(&sb, cur, sizeof(cur));
		if (cur_len != etag_len || memcmp(cur, etag, etag_len) != 0) {
			log_msg(LOG_ERR,
				"source %s/%s: changed since the manifest was "
				"made (etag %.*s, now %s)",
				pb->root, key, (int)etag_len, etag, cur);
			rc = -ESTALE;
			goto out;
		}
	}
	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done,
			  (off_t)(offset + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			log_msg(LOG_ERR,
				"source %s/%s: read at %" PRIu64 ": %s",
				pb->root, key, offset + done, strerror(-rc));
			goto out;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*nread = done;
out:
	close(fd);
	return rc;
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
