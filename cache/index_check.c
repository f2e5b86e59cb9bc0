/*
 * index_check: see index_check.h. Offsets are LMDB 0.9's (mdb.c): a page
 * starts with a 16-byte header (page number, pad, flags, lower and upper
 * bounds of the free space); a branch or leaf page then holds an array of
 * 16-bit node offsets, nodes living between upper and the page's end. A
 * node is 8 bytes (lo, hi, flags, key size) then the key, then the data
 * (leaf) or nothing (branch: lo | hi << 16 | flags << 32 is the child).
 * Everything is little-endian here (x86-64, arm64).
 */
#include "cache/index_check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE_HDR 16
#define NODE_HDR 8
#define P_BRANCH 0x01
#define P_LEAF 0x02
#define P_OVERFLOW 0x04
#define P_META 0x08
#define P_LEAF2 0x20
#define P_SUBP 0x40
#define P_KIND (P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2 | P_SUBP)
#define F_BIGDATA 0x01
#define F_SUBDATA 0x02
#define MAGIC 0xBEEFC0DEu
#define DATA_VERSION 1u
#define META_OFF PAGE_HDR /* MDB_meta inside its page */
#define META_BYTES 136	  /* through mm_txnid */
#define DB_BYTES 48	  /* MDB_db */
#define DEPTH_MAX 32	  /* LMDB's CURSOR_STACK */
#define P_INVALID UINT64_MAX

struct db {
	uint16_t depth;
	uint64_t root;
};

struct lmdb_meta {
	uint32_t magic, version, psize;
	uint16_t flags;
	uint64_t pgno, last_pg, txnid;
	struct db dbs[2]; /* free pages, main */
};

struct check_walk {
	int fd;
	uint32_t psize;
	uint64_t last_pg;
	uint8_t *seen; /* a bit per page */
	char *why;
	size_t why_len;
};

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 1; /* short: the caller checked the size */
		done += (size_t)n;
	}
	return 0;
}

static void db_parse(const uint8_t *p, struct db *db)
{
	db->depth = le16(p + 6);
	db->root = le64(p + 40);
}

static void meta_parse(const uint8_t *page, struct lmdb_meta *m)
{
	const uint8_t *p = page + META_OFF;

	m->pgno = le64(page);
	m->flags = le16(page + 10);
	m->magic = le32(p);
	m->version = le32(p + 4);
	m->psize = le32(p + 24); /* dbs[0].md_pad */
	db_parse(p + 24, &m->dbs[0]);
	db_parse(p + 24 + DB_BYTES, &m->dbs[1]);
	m->last_pg = le64(p + 24 + 2 * DB_BYTES);
	m->txnid = le64(p + 24 + 2 * DB_BYTES + 8);
}

static bool root_ok(const struct db *db, uint64_t last_pg)
{
	if (db->root == P_INVALID)
		return db->depth == 0;
	return db->root >= 2 && db->root <= last_pg && db->depth >= 1 &&
	       db->depth <= DEPTH_MAX;
}

/* Reads and checks both meta pages; *newest gets the one of the larger
 * transaction id. */
static int metas_read(int fd, uint64_t size, struct lmdb_meta m[2], int *newest,
		      char *why, size_t why_len)
{
	uint8_t buf[META_OFF + META_BYTES];
	int i, rc;

	for (i = 0; i < 2; i++) {
		uint64_t off = i == 0 ? 0 : m[0].psize;

		if (size < off + sizeof(buf)) {
			snprintf(why, why_len,
				 "the file (%" PRIu64 " bytes) is shorter "
				 "than its two meta pages",
				 size);
			return 1;
		}
		rc = read_at(fd, buf, sizeof(buf), off);
		if (rc != 0)
			return rc < 0 ? rc : -EIO;
		meta_parse(buf, &m[i]);
		if (m[i].pgno != (uint64_t)i || !(m[i].flags & P_META) ||
		    m[i].magic != MAGIC || m[i].version != DATA_VERSION) {
			snprintf(why, why_len,
				 "meta page %d is damaged (magic 0x%08" PRIx32
				 ", version %" PRIu32 ", flags 0x%x)",
				 i, m[i].magic, m[i].version, m[i].flags);
			return 1;
		}
		if (m[i].psize < 512 || m[i].psize > 65536 ||
		    (m[i].psize & (m[i].psize - 1)) != 0 ||
		    m[i].psize != m[0].psize) {
			snprintf(why, why_len,
				 "meta page %d names a page size of %" PRIu32,
				 i, m[i].psize);
			return 1;
		}
		if (m[i].last_pg < 1 || !root_ok(&m[i].dbs[0], m[i].last_pg) ||
		    !root_ok(&m[i].dbs[1], m[i].last_pg)) {
			snprintf(why, why_len,
				 "meta page %d (txn %" PRIu64
				 ") names roots %" PRIu64 " and %" PRIu64
				 " beyond its last page %" PRIu64,
				 i, m[i].txnid, m[i].dbs[0].root,
				 m[i].dbs[1].root, m[i].last_pg);
			return 1;
		}
	}
	*newest = m[1].txnid > m[0].txnid ? 1 : 0;
	return 0;
}

int index_check_meta(int fd, char *why, size_t why_len)
{
	struct lmdb_meta m[2];
	struct stat st;
	int newest, rc;
	uint64_t need;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (st.st_size == 0)
		return 0;
	rc = metas_read(fd, (uint64_t)st.st_size, m, &newest, why, why_len);
	if (rc != 0)
		return rc;
	/* The size after the metas: a writer grows the file before it
	 * writes a meta page naming the new pages. */
	if (fstat(fd, &st) != 0)
		return -errno;
	need = (m[newest].last_pg + 1) * m[newest].psize;
	/* Compared by division too: a damaged last_pg must not wrap. */
	if (m[newest].last_pg >= (uint64_t)st.st_size / m[newest].psize ||
	    (uint64_t)st.st_size < need) {
		snprintf(why, why_len,
			 "truncated: %" PRIu64 " bytes, but meta page %d "
			 "(txn %" PRIu64 ") uses %" PRIu64 " pages of %" PRIu32
			 " bytes (%" PRIu64 " bytes)",
			 (uint64_t)st.st_size, newest, m[newest].txnid,
			 m[newest].last_pg + 1, m[newest].psize, need);
		return 1;
	}
	return 0;
}

static int bad(struct check_walk *w, uint64_t pgno, const char *what)
{
	snprintf(w->why, w->why_len, "page %" PRIu64 ": %s", pgno, what);
	return 1;
}

/* Marks pages [pgno, pgno + n) as reached; 1 if one was already. */
static int mark(struct check_walk *w, uint64_t pgno, uint64_t n)
{
	uint64_t i;

	if (pgno < 2 || n == 0 || pgno > w->last_pg ||
	    n > w->last_pg - pgno + 1)
		return bad(w, pgno, "page number beyond the last page");
	for (i = pgno; i < pgno + n; i++) {
		if (w->seen[i / 8] & (1u << (i % 8)))
			return bad(w, i, "reached twice");
		w->seen[i / 8] |= (uint8_t)(1u << (i % 8));
	}
	return 0;
}

static int walk_tree(struct check_walk *w, uint64_t pgno, unsigned level,
		     unsigned depth, bool main_db);

/* Checks one leaf node's data; recurses into a named database's tree. */
static int leaf_node(struct check_walk *w, uint64_t pgno, const uint8_t *page,
		     unsigned ptr, const uint8_t *node, bool main_db)
{
	uint16_t flags = le16(node + 4), ksize = le16(node + 6);
	uint64_t dsize = le16(node) | (uint64_t)le16(node + 2) << 16;
	uint64_t end = (uint64_t)ptr + NODE_HDR + ksize;

	(void)page;
	if (flags & ~(F_BIGDATA | F_SUBDATA))
		return bad(w, pgno, "unexpected leaf node flags");
	if (flags & F_BIGDATA) {
		uint64_t ov, pages;

		if (end + 8 > w->psize)
			return bad(w, pgno, "node beyond the page");
		ov = le64(node + NODE_HDR + ksize);
		pages = (PAGE_HDR + dsize + w->psize - 1) / w->psize;
		return mark(w, ov, pages);
	}
	if (end + dsize > w->psize)
		return bad(w, pgno, "node beyond the page");
	if (flags & F_SUBDATA) {
		struct db db;

		if (!main_db || dsize != DB_BYTES)
			return bad(w, pgno, "malformed database record");
		db_parse(node + NODE_HDR + ksize, &db);
		if (!root_ok(&db, w->last_pg))
			return bad(w, pgno, "database root out of range");
		if (db.root == P_INVALID)
			return 0;
		return walk_tree(w, db.root, 1, db.depth, false);
	}
	return 0;
}

static int walk_tree(struct check_walk *w, uint64_t pgno, unsigned level,
		     unsigned depth, bool main_db)
{
	uint8_t *page;
	uint16_t flags, lower, upper;
	unsigned i, n;
	int rc;

	if (level > depth || level > DEPTH_MAX)
		return bad(w, pgno, "tree deeper than its database says");
	rc = mark(w, pgno, 1);
	if (rc != 0)
		return rc;
	page = malloc(w->psize);
	if (page == NULL)
		return -ENOMEM;
	rc = read_at(w->fd, page, w->psize, pgno * w->psize);
	if (rc != 0) {
		rc = rc < 0 ? rc : bad(w, pgno, "beyond the end of the file");
		goto out;
	}
	flags = le16(page + 10);
	lower = le16(page + 12);
	upper = le16(page + 14);
	if (le64(page) != pgno) {
		rc = bad(w, pgno, "header names another page number");
		goto out;
	}
	if ((flags & P_KIND) != (level == depth ? P_LEAF : P_BRANCH)) {
		rc = bad(w, pgno,
			 level == depth ? "not a leaf page"
					: "not a branch page");
		goto out;
	}
	if (lower < PAGE_HDR || lower > upper || upper > w->psize ||
	    (lower - PAGE_HDR) % 2 != 0) {
		rc = bad(w, pgno, "free-space bounds out of range");
		goto out;
	}
	n = (lower - PAGE_HDR) / 2u;
	if (n == 0 && level != depth) {
		rc = bad(w, pgno, "empty branch page");
		goto out;
	}
	for (i = 0; rc == 0 && i < n; i++) {
		unsigned ptr = le16(page + PAGE_HDR + 2 * i);
		const uint8_t *node = page + ptr;

		if (ptr < upper || ptr + NODE_HDR > w->psize ||
		    ptr + NODE_HDR + (unsigned)le16(node + 6) > w->psize) {
			rc = bad(w, pgno, "node offset out of range");
			break;
		}
		if (level == depth)
			rc = leaf_node(w, pgno, page, ptr, node, main_db);
		else
			rc = walk_tree(w,
				       le16(node) |
					       (uint64_t)le16(node + 2) << 16 |
					       (uint64_t)le16(node + 4) << 32,
				       level + 1, depth, main_db);
	}
out:
	free(page);
	return rc;
}

int index_check_tree(int fd, uint64_t txnid, char *why, size_t why_len)
{
	struct lmdb_meta m[2];
	struct check_walk w = { .fd = fd, .why = why, .why_len = why_len };
	struct stat st;
	const struct lmdb_meta *t;
	int newest, rc, i;

	if (fstat(fd, &st) != 0)
		return -errno;
	rc = metas_read(fd, (uint64_t)st.st_size, m, &newest, why, why_len);
	if (rc != 0)
		return rc;
	t = &m[txnid & 1];
	if (t->txnid != txnid)
		return -EAGAIN;
	if (fstat(fd, &st) != 0) /* after the metas, as above */
		return -errno;
	w.psize = t->psize;
	w.last_pg = t->last_pg;
	if (w.last_pg >= (uint64_t)st.st_size / w.psize)
		return bad(&w, w.last_pg, "beyond the end of the file");
	w.seen = calloc(w.last_pg / 8 + 1, 1);
	if (w.seen == NULL)
		return -ENOMEM;
	for (i = 0; rc == 0 && i < 2; i++)
		if (t->dbs[i].root != P_INVALID)
			rc = walk_tree(&w, t->dbs[i].root, 1, t->dbs[i].depth,
				       i == 1);
	free(w.seen);
	return rc;
}
