/*
 * nfs_list: the nfs backend's listing (see nfs.c): a recursive walk, one
 * READDIR (with attributes) per directory, copied out of libnfs while the
 * connection is held, so a connection is held for one directory at a time
 * and never across the recursion. Regular files and directories are
 * followed; anything else (symlinks) is skipped, the first few logged.
 */
#include <errno.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/nfs_call.h"
#include "backends/nfs_conn.h"
#include "backends/nfs_impl.h"
#include "util/log.h"
#include "util/str.h"

struct walk {
	struct nfs_backend *nb;
	backend_list_cb cb;
	void *arg;
	char *path; /* "/" + key of the directory being read, growable */
	size_t len, cap;
	char kb[LOG_KEY_MAX]; /* a key escaped for a message (log_key()) */
	struct backend_list_bound bound; /* checked per directory, file */
	char *what;			 /* "nfs://HOST/PATH/prefix" */
};

/* The path starts at the export's root "/": no separator after it. */
static int walk_push(struct walk *w, const char *name)
{
	return str_path_push(&w->path, &w->len, &w->cap, name, 1);
}

struct opendir_arg {
	const char *path;
	struct nfsdirent *ents; /* copied out, names owned */
	size_t n;
};

static void ents_free(struct nfsdirent *ents, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
}

/* Copies a directory's entries out of libnfs' nfsdir, so no context is
 * touched once the connection is given back. */
static int ents_copy(struct nfs_context *ctx, struct nfsdir *dir,
		     struct opendir_arg *a)
{
	struct nfsdirent *e, *ents = NULL;
	size_t n = 0, cap = 0;

	while ((e = nfs_readdir(ctx, dir)) != NULL) {
		if (strcmp(e->name, ".") == 0 || strcmp(e->name, "..") == 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct nfsdirent *p =
				realloc(ents, ncap * sizeof(*ents));

			if (p == NULL)
				goto nomem;
			ents = p;
			cap = ncap;
		}
		ents[n] = *e;
		ents[n].next = NULL;
		ents[n].name = strdup(e->name);
		if (ents[n].name == NULL)
			goto nomem;
		n++;
	}
	a->ents = ents;
	a->n = n;
	return 0;
nomem:
	ents_free(ents, n);
	return -ENOMEM;
}

/* Reads a whole directory (libnfs does it in this one call: READDIRPLUS,
 * or READDIR with attributes over NFSv4). */
static int opendir_op(struct nfs_backend *nb, struct nfs_conn *conn, void *arg,
		      uint64_t deadline, struct nfs_call *c)
{
	struct opendir_arg *a = arg;
	int rc = nfsb_ready(nb, conn, deadline, c);

	if (rc < 0)
		return rc;
	if (nfs_opendir_async(conn->ctx, a->path, nfsb_cb_opendir, c) != 0)
		return nfsb_unqueued(conn->ctx, c);
	rc = nfsb_finish(conn->ctx, c, deadline);
	if (rc < 0)
		return rc;
	rc = ents_copy(conn->ctx, c->dir, a);
	nfs_closedir(conn->ctx, c->dir);
	return rc;
}

static int walk_dir(struct walk *w);

static bool dirent_is(const struct nfsdirent *e, uint32_t type, mode_t fmt)
{
	return e->type == type || ((mode_t)e->mode & S_IFMT) == fmt;
}

static int walk_entry(struct walk *w, const struct nfsdirent *e)
{
	struct backend_object obj;
	char etag[96];
	int rc;

	if (dirent_is(e, NF3DIR, S_IFDIR))
		return walk_dir(w);
	if (!dirent_is(e, NF3REG, S_IFREG)) {
		backend_list_skipped(&w->nb->skipped, LOG_INFO, w->nb->display,
				     "", log_key(w->kb, w->path, w->len),
				     "not a regular file or a directory (a "
				     "symlink?)");
		return 0;
	}
	obj.key = w->path + 1;
	obj.key_len = w->len - 1;
	obj.size = e->size;
	obj.mtime_ns = (int64_t)e->mtime.tv_sec * 1000000000 + e->mtime_nsec;
	obj.etag = etag;
	obj.etag_len = nfsb_format_etag((uint64_t)obj.mtime_ns, e->size,
					(uint64_t)e->ctime.tv_sec * 1000000000 +
						e->ctime_nsec,
					etag, sizeof(etag));
	rc = backend_list_bound_check(&w->bound, &obj);
	return rc < 0 ? rc : w->cb(w->arg, &obj);
}

/* Lists the directory at w->path, then its subdirectories; a connection
 * is held for one directory at a time, never across the recursion. */
static int walk_dir(struct walk *w)
{
	struct nfs_backend *nb = w->nb;
	struct opendir_arg a = { .path = w->path };
	struct nfs_call c;
	size_t i, saved = w->len;
	int rc;

	rc = backend_list_bound_check(&w->bound, NULL);
	if (rc < 0)
		return rc;
	rc = nfsb_with_retries(nb, opendir_op, &a, NULL,
			       clock_now_ms() + nb->read_ms, &c);
	if (rc < 0) {
		log_msg(LOG_ERR, "source %s%s: readdir: %s%s%s", nb->display,
			log_key(w->kb, w->path, w->len),
			strerror(-nfs_errno_map(rc)), c.err[0] ? ": " : "",
			c.err);
		return nfs_errno_map(rc);
	}
	for (i = 0; i < a.n && rc == 0; i++) {
		rc = walk_push(w, a.ents[i].name);
		if (rc == 0)
			rc = walk_entry(w, &a.ents[i]);
		w->len = saved;
		w->path[w->len] = '\0';
	}
	ents_free(a.ents, a.n);
	return rc;
}

int nfsb_list(struct backend *be, const char *prefix, backend_list_cb cb,
	      void *arg)
{
	struct nfs_backend *nb = (struct nfs_backend *)be;
	struct walk w = { .nb = nb, .cb = cb, .arg = arg };
	size_t plen = strlen(prefix);
	int rc;

	if (asprintf(&w.what, "%s/%s", nb->display, prefix) < 0)
		return -ENOMEM;
	backend_list_bound_start(&w.bound, nb->list_timeout_ms, nb->list_memory,
				 w.what);
	w.cap = plen + 64;
	w.path = malloc(w.cap);
	if (w.path == NULL) {
		free(w.what);
		return -ENOMEM;
	}
	w.path[0] = '/';
	w.path[1] = '\0';
	w.len = 1;
	if (plen > 0) {
		char *dir = strndup(prefix, plen - (prefix[plen - 1] == '/'));

		rc = dir ? walk_push(&w, dir) : -ENOMEM;
		free(dir);
		if (rc < 0) {
			free(w.path);
			free(w.what);
			return rc;
		}
	}
	rc = walk_dir(&w);
	free(w.path);
	free(w.what);
	return rc;
}
