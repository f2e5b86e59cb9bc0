/*
 * check_view: the view tree (DESIGN.md §3), tested through fs/view.h on
 * manifests and shard plans built through their own headers.
 *
 * One checker, check_view(), walks a whole tree and asserts every invariant
 * the header promises (stable inodes, byte-ordered children that lookup
 * finds, nlink, the .shardfs files, each rank's non-pad items as exactly one
 * file at the path its key names); the hand-written cases pin exact trees,
 * and a randomized case (fixed seed) runs the checker over random key trees,
 * world sizes, layouts and rank filters.
 */
#include "fs/view.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/manifest.h"
#include "plan/shard.h"
#include "tests/unit/unit.h"
#include "util/log.h"

/* Assertions for the hot loops of check_view(): Check's ck_assert_*
 * report every passing check to the parent process, which dominates the
 * run time of the randomized case; these only speak up on failure. */
#define Q_MSG(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond))                                                   \
			ck_abort_msg(__VA_ARGS__);                             \
	} while (0)
#define Q_TRUE(cond) Q_MSG(cond, "assertion '%s' failed", #cond)
#define Q_EQ(a, b)                                                             \
	do {                                                                   \
		intmax_t a_ = (intmax_t)(a), b_ = (intmax_t)(b);               \
		Q_MSG(a_ == b_, "assertion '%s == %s' failed: %jd != %jd", #a, \
		      #b, a_, b_);                                             \
	} while (0)

/* A set of selected ranks, as the filter's context; NULL filter = all. */
struct rank_set {
	uint64_t bits; /* ranks 0..63 */
};

static bool rank_filter(const void *ctx, uint64_t r)
{
	const struct rank_set *set = ctx;

	return r < 64 && (set->bits >> r & 1);
}

static bool selected(const struct rank_set *set, uint64_t r)
{
	return set == NULL || rank_filter(set, r);
}

/* xorshift64*: fixed seed, local to the test. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return rng_next(s) % n;
}

static struct manifest *manifest_of(const char *const *keys, size_t n)
{
	struct manifest *m = manifest_new();
	size_t i;

	ck_assert_ptr_nonnull(m);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(manifest_add(m, keys[i], strlen(keys[i]),
					      100 + i, "e", 1, 0),
				 0);
	ck_assert_int_eq(manifest_finish(m), 0);
	return m;
}

static struct shard_plan *plan_of(const struct manifest *m, uint64_t world,
				  uint64_t seed, enum shard_order order,
				  enum shard_layout layout,
				  enum shard_balance balance)
{
	struct shard_spec spec = {
		.world_size = world,
		.seed = seed,
		.order = order,
		.layout = layout,
		.balance = balance,
	};
	struct shard_plan *plan = NULL;

	ck_assert_int_eq(
		shard_plan_build(&spec, m->count, manifest_weight, m, &plan),
		0);
	return plan;
}

static struct view *view_of(const struct manifest *m,
			    const struct shard_plan *plan,
			    const struct rank_set *set)
{
	struct view *v = NULL;

	ck_assert_int_eq(
		view_build(m, plan, NULL, set ? rank_filter : NULL, set, &v),
		0);
	ck_assert_ptr_nonnull(v);
	return v;
}

static const struct view_node *root_of(const struct view *v)
{
	const struct view_node *root = view_node(v, 1);

	ck_assert_ptr_nonnull(root);
	return root;
}

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return (alen > blen) - (alen < blen);
}

static int name_is(const struct view_node *n, const char *name)
{
	return n->name_len == strlen(name) &&
	       memcmp(n->name, name, n->name_len) == 0;
}

/* Looks up name in dir; asserts it exists and returns the node. */
static const struct view_node *
lookup(const struct view *v, const struct view_node *dir, const char *name)
{
	uint64_t ino = 0;
	int rc = view_lookup(v, dir, name, strlen(name), &ino);

	Q_MSG(rc == 0, "lookup '%s' gave %d", name, rc);
	Q_TRUE(view_node(v, ino) != NULL);
	return view_node(v, ino);
}

static int lookup_rc(const struct view *v, const struct view_node *dir,
		     const char *name)
{
	uint64_t ino = 12345;
	int rc = view_lookup(v, dir, name, strlen(name), &ino);

	if (rc < 0)
		Q_EQ(ino, 12345);
	return rc;
}

/* Asserts dir's children are exactly names[], in that order. */
static void expect_children(const struct view *v, const struct view_node *dir,
			    const char *const *names, size_t n)
{
	size_t i;

	Q_EQ(dir->kind, VIEW_DIR);
	Q_EQ(dir->u.dir.count, n);
	for (i = 0; i < n; i++) {
		const struct view_node *c = view_child(v, dir, (uint32_t)i);

		Q_MSG(name_is(c, names[i]), "child %zu is '%.*s', want '%s'", i,
		      (int)c->name_len, c->name, names[i]);
	}
}

/* Rebuilds the key of a file node from its path below its rank dir. */
static size_t node_path(const struct view *v, const struct view_node *n,
			char *buf, size_t cap)
{
	const struct view_node *chain[256];
	size_t depth = 0, len = 0, i;

	for (;;) {
		const struct view_node *p =
			view_node(v, (uint64_t)n->parent + 1);

		Q_TRUE(p != NULL);
		Q_TRUE(depth < ARRAY_LEN(chain));
		chain[depth++] = n;
		/* Stop below rank-R, whose parent is the root. */
		if (p->parent == 0 && view_ino(v, p) != 1)
			break;
		Q_TRUE(view_ino(v, p) != 1);
		n = p;
	}
	for (i = depth; i-- > 0;) {
		Q_TRUE(len + chain[i]->name_len + 1 <= cap);
		memcpy(buf + len, chain[i]->name, chain[i]->name_len);
		len += chain[i]->name_len;
		if (i > 0)
			buf[len++] = '/';
	}
	return len;
}

/* Collects, for the tree under dir, how often each item is a file. */
static void count_files(const struct view *v, const struct manifest *m,
			const struct view_node *dir, unsigned *seen)
{
	uint32_t i;

	/* Directories exist only to hold files. */
	Q_TRUE(dir->u.dir.count > 0);
	for (i = 0; i < dir->u.dir.count; i++) {
		const struct view_node *c = view_child(v, dir, i);

		if (c->kind == VIEW_DIR) {
			count_files(v, m, c, seen);
			continue;
		}
		Q_EQ(c->kind, VIEW_FILE);
		Q_TRUE(c->u.item < m->count);
		seen[c->u.item]++;
	}
}

/* Every invariant of the header, for a view of m and plan with the ranks
 * of set (NULL: all). */
static void check_view(const struct view *v, const struct manifest *m,
		       const struct shard_plan *plan,
		       const struct rank_set *set)
{
	size_t count = view_node_count(v), shown = 0, i;
	uint64_t ino, r;
	unsigned *parents = calloc(count + 1, sizeof(*parents));
	unsigned *seen = calloc(m->count + 1, sizeof(*seen));
	const struct view_node *root = root_of(v), *ctl;
	char name[64], key[4096];

	Q_TRUE(parents != NULL);
	Q_TRUE(seen != NULL);

	/* Inodes: 1..count, stable, nothing outside. */
	Q_TRUE(view_node(v, 0) == NULL);
	Q_TRUE(view_node(v, count + 1) == NULL);
	Q_TRUE(view_node(v, UINT64_MAX) == NULL);
	Q_EQ(root->kind, VIEW_DIR);
	Q_EQ(root->parent, 0);
	Q_EQ(root->name_len, 0);
	for (ino = 1; ino <= count; ino++) {
		const struct view_node *n = view_node(v, ino);
		uint32_t k, subdirs = 0;

		Q_TRUE(n != NULL);
		Q_EQ(view_ino(v, n), ino);
		Q_TRUE(n->parent < count);
		if (ino > 1) {
			const struct view_node *dir =
				view_node(v, (uint64_t)n->parent + 1);
			int64_t pos = view_child_pos(v, n);

			Q_EQ(dir->kind, VIEW_DIR);
			/* Its readdir position leads back to it. */
			Q_TRUE(pos >= 0 && pos < dir->u.dir.count);
			Q_TRUE(view_child(v, dir, (uint32_t)pos) == n);
		} else {
			Q_EQ(view_child_pos(v, n), -ENOENT);
		}
		if (n->kind != VIEW_DIR) {
			Q_EQ(n->nlink, 1);
			Q_EQ(lookup_rc(v, n, "x"), -ENOTDIR);
			continue;
		}
		for (k = 0; k < n->u.dir.count; k++) {
			const struct view_node *c = view_child(v, n, k);
			uint64_t cino = view_ino(v, c), got = 0;

			Q_TRUE(cino >= 2);
			Q_TRUE(cino <= count);
			Q_EQ(c->parent, ino - 1);
			parents[cino]++;
			subdirs += c->kind == VIEW_DIR;
			/* Byte order of names, no duplicates. */
			if (k > 0) {
				const struct view_node *b =
					view_child(v, n, k - 1);

				Q_TRUE(name_cmp(b->name, b->name_len, c->name,
						c->name_len) < 0);
			}
			Q_EQ(view_lookup(v, n, c->name, c->name_len, &got), 0);
			Q_EQ(got, cino);
		}
		Q_EQ(n->nlink, 2 + subdirs);
	}
	/* Every node but the root is the child of exactly one directory. */
	for (ino = 2; ino <= count; ino++)
		Q_EQ(parents[ino], 1);

	/* The root: .shardfs and the selected ranks. */
	ctl = lookup(v, root, ".shardfs");
	Q_EQ(ctl->kind, VIEW_DIR);
	Q_TRUE(view_child(v, root, 0) == ctl);
	Q_EQ(lookup(v, ctl, "manifest.tsv")->ctrl, VIEW_CTRL_MANIFEST);
	Q_EQ(lookup(v, ctl, "plan")->ctrl, VIEW_CTRL_PLAN);
	Q_EQ(lookup(v, ctl, "stats")->ctrl, VIEW_CTRL_STATS);
	Q_EQ(lookup(v, ctl, "log")->ctrl, VIEW_CTRL_LOG);
	for (r = 0; r < plan->world_size; r++) {
		const struct view_node *dir, *ord;
		const uint32_t *items;
		size_t n, npad, k;

		snprintf(name, sizeof(name), "rank-%" PRIu64 ".order", r);
		if (!selected(set, r)) {
			Q_EQ(lookup_rc(v, ctl, name), -ENOENT);
			snprintf(name, sizeof(name), "rank-%" PRIu64, r);
			Q_EQ(lookup_rc(v, root, name), -ENOENT);
			continue;
		}
		shown++;
		ord = lookup(v, ctl, name);
		Q_EQ(ord->kind, VIEW_CTRL);
		Q_EQ(ord->ctrl, VIEW_CTRL_ORDER);
		Q_EQ(ord->u.rank, r);
		snprintf(name, sizeof(name), "rank-%" PRIu64, r);
		dir = lookup(v, root, name);
		Q_EQ(dir->kind, VIEW_DIR);

		/* Rank r's files are exactly its non-pad items, once each,
		 * each at the path its key names. */
		memset(seen, 0, (m->count + 1) * sizeof(*seen));
		for (k = 0; k < dir->u.dir.count; k++) {
			const struct view_node *c = view_child(v, dir, k);

			if (c->kind == VIEW_DIR)
				count_files(v, m, c, seen);
			else
				seen[c->u.item]++;
		}
		shard_plan_rank(plan, r, &items, &n, &npad);
		for (k = 0; k < n - npad; k++) {
			Q_MSG(seen[items[k]] == 1,
			      "rank %" PRIu64 " item %" PRIu32 " is %u files",
			      r, items[k], seen[items[k]]);
			seen[items[k]] = 0;
		}
		for (k = 0; k < m->count; k++)
			Q_MSG(seen[k] == 0,
			      "rank %" PRIu64 ": item %zu is a file "
			      "but not the rank's non-pad item",
			      r, k);

		/* Lookup walks to each of them. */
		for (k = 0; k < n - npad; k++) {
			const struct manifest_entry *e = &m->entries[items[k]];
			const struct view_node *cur = dir;
			const char *p = e->key, *end = e->key + e->key_len;
			uint64_t got;
			size_t len;

			for (;;) {
				const char *slash =
					memchr(p, '/', (size_t)(end - p));
				size_t clen = slash ? (size_t)(slash - p)
						    : (size_t)(end - p);

				Q_EQ(view_lookup(v, cur, p, clen, &got), 0);
				cur = view_node(v, got);
				if (slash == NULL)
					break;
				Q_EQ(cur->kind, VIEW_DIR);
				p = slash + 1;
			}
			Q_EQ(cur->kind, VIEW_FILE);
			Q_EQ(cur->u.item, items[k]);
			Q_EQ(cur->nlink, 1);
			len = node_path(v, cur, key, sizeof(key));
			Q_EQ(len, e->key_len);
			Q_EQ(memcmp(key, e->key, len), 0);
		}
	}
	Q_EQ(root->u.dir.count, 1 + shown);
	Q_EQ(ctl->u.dir.count, 4 + shown); /* manifest.tsv, plan, stats, log */
	Q_EQ(root->nlink, 2 + 1 + shown);
	Q_EQ(ctl->nlink, 2);
	for (i = 0; i < ctl->u.dir.count; i++)
		Q_EQ(view_child(v, ctl, (uint32_t)i)->kind, VIEW_CTRL);
	free(parents);
	free(seen);
}

START_TEST(test_root_and_ctrl)
{
	static const char *const keys[] = { "x", "y/z" };
	static const char *const want_root[] = {
		".shardfs", "rank-0", "rank-1", "rank-10", "rank-11",
		"rank-2",   "rank-3", "rank-4", "rank-5",  "rank-6",
		"rank-7",   "rank-8", "rank-9",
	};
	static const char *const want_ctl[] = {
		"log",		 "manifest.tsv", "plan",
		"rank-0.order",	 "rank-1.order", "rank-10.order",
		"rank-11.order", "rank-2.order", "rank-3.order",
		"rank-4.order",	 "rank-5.order", "rank-6.order",
		"rank-7.order",	 "rank-8.order", "rank-9.order",
		"stats",
	};
	struct manifest *m = manifest_of(keys, ARRAY_LEN(keys));
	struct shard_plan *plan =
		plan_of(m, 12, 7, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			SHARD_BALANCE_NONE);
	struct view *v = view_of(m, plan, NULL);
	const struct view_node *root = root_of(v);

	expect_children(v, root, want_root, ARRAY_LEN(want_root));
	expect_children(v, lookup(v, root, ".shardfs"), want_ctl,
			ARRAY_LEN(want_ctl));
	ck_assert_uint_eq(root->nlink, 2 + 13);
	check_view(v, m, plan, NULL);
	view_free(v);
	view_free(NULL);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_rank_filter)
{
	static const char *const keys[] = { "a", "b", "c/d", "c/e", "f" };
	static const char *const want_root[] = { ".shardfs", "rank-1",
						 "rank-4" };
	static const char *const want_ctl[] = {
		"log",		"manifest.tsv", "plan",
		"rank-1.order", "rank-4.order", "stats",
	};
	struct rank_set set = { .bits = (1u << 1) | (1u << 4) };
	struct rank_set none = { .bits = 0 };
	struct manifest *m = manifest_of(keys, ARRAY_LEN(keys));
	struct shard_plan *plan =
		plan_of(m, 6, 3, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_CONTIGUOUS,
			SHARD_BALANCE_NONE);
	struct view *v = view_of(m, plan, &set);
	const struct view_node *root = root_of(v);

	expect_children(v, root, want_root, ARRAY_LEN(want_root));
	expect_children(v, lookup(v, root, ".shardfs"), want_ctl,
			ARRAY_LEN(want_ctl));
	ck_assert_int_eq(lookup_rc(v, root, "rank-0"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, root, "rank-5"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, root, "rank-6"), -ENOENT);
	check_view(v, m, plan, &set);
	view_free(v);

	/* No rank selected: just the control files. */
	v = view_of(m, plan, &none);
	root = root_of(v);
	ck_assert_uint_eq(root->u.dir.count, 1);
	ck_assert_uint_eq(view_node_count(v), 6);
	check_view(v, m, plan, &none);
	view_free(v);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_name_order)
{
	static const char *const keys[] = {
		"a/x",	"a-b",	  "a.c",   "d/\xc3\xa9", "d/z",
		"d/Z",	"d/a/x",  "d/a-b", "d/a.c",	 "d/a0/y",
		"d/ab", "d/\x7f", "d/ a",  "e/%",	 "e/%25",
	};
	static const char *const want_rank[] = { "a", "a-b", "a.c", "d", "e" };
	static const char *const want_d[] = {
		" a", "Z",  "a", "a-b",	 "a.c",
		"a0", "ab", "z", "\x7f", "\xc3\xa9",
	};
	static const char *const want_e[] = { "%", "%25" };
	struct manifest *m = manifest_of(keys, ARRAY_LEN(keys));
	struct shard_plan *plan =
		plan_of(m, 1, 0, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			SHARD_BALANCE_NONE);
	struct view *v = view_of(m, plan, NULL);
	const struct view_node *rank = lookup(v, root_of(v), "rank-0");
	const struct view_node *d = lookup(v, rank, "d");

	expect_children(v, rank, want_rank, ARRAY_LEN(want_rank));
	expect_children(v, lookup(v, rank, "a"), (const char *const[]){ "x" },
			1);
	expect_children(v, d, want_d, ARRAY_LEN(want_d));
	expect_children(v, lookup(v, rank, "e"), want_e, ARRAY_LEN(want_e));
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_lookup)
{
	static const char *const keys[] = { "a/bc", "a/bd/e", "f" };
	struct manifest *m = manifest_of(keys, ARRAY_LEN(keys));
	struct shard_plan *plan =
		plan_of(m, 1, 0, SHARD_ORDER_NONE, SHARD_LAYOUT_STRIDED,
			SHARD_BALANCE_NONE);
	struct view *v = view_of(m, plan, NULL);
	const struct view_node *root = root_of(v);
	const struct view_node *rank = lookup(v, root, "rank-0");
	const struct view_node *a = lookup(v, rank, "a");
	const struct view_node *f = lookup(v, rank, "f");
	const struct view_node *bc = lookup(v, a, "bc");
	const struct view_node *e = lookup(v, lookup(v, a, "bd"), "e");
	const struct view_node *ctl = lookup(v, root, ".shardfs");
	uint64_t ino = 0;

	ck_assert_int_eq(f->kind, VIEW_FILE);
	ck_assert_str_eq(m->entries[f->u.item].key, "f");
	ck_assert_str_eq(m->entries[bc->u.item].key, "a/bc");
	ck_assert_str_eq(m->entries[e->u.item].key, "a/bd/e");
	/* Missing: a prefix, an extension, other case, empty, dot names,
	 * a full key as one name. */
	ck_assert_int_eq(lookup_rc(v, a, "b"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, a, "bcd"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, a, "BC"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, a, ""), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, a, "."), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, a, ".."), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, rank, "a/bc"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, root, "f"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, root, "rank-1"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, ctl, "rank-1.order"), -ENOENT);
	ck_assert_int_eq(lookup_rc(v, ctl, "plans"), -ENOENT);
	/* The length counts, not a NUL. */
	ck_assert_int_eq(view_lookup(v, a, "bcX", 2, &ino), 0);
	ck_assert_ptr_eq(view_node(v, ino), bc);
	/* Not a directory: files and control files. */
	ck_assert_int_eq(lookup_rc(v, f, "x"), -ENOTDIR);
	ck_assert_int_eq(lookup_rc(v, bc, ""), -ENOTDIR);
	ck_assert_int_eq(lookup_rc(v, lookup(v, ctl, "plan"), "x"), -ENOTDIR);
	ck_assert_int_eq(lookup_rc(v, lookup(v, ctl, "rank-0.order"), "x"),
			 -ENOTDIR);
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_nlink)
{
	static const char *const keys[] = { "a/b/c", "a/d/e", "a/f", "g",
					    "h/i/j/k" };
	struct manifest *m = manifest_of(keys, ARRAY_LEN(keys));
	struct shard_plan *plan =
		plan_of(m, 1, 0, SHARD_ORDER_NONE, SHARD_LAYOUT_STRIDED,
			SHARD_BALANCE_NONE);
	struct view *v = view_of(m, plan, NULL);
	const struct view_node *rank = lookup(v, root_of(v), "rank-0");
	const struct view_node *a = lookup(v, rank, "a");
	const struct view_node *h = lookup(v, rank, "h");

	ck_assert_uint_eq(root_of(v)->nlink, 4);
	ck_assert_uint_eq(rank->nlink, 4);
	ck_assert_uint_eq(a->nlink, 4);
	ck_assert_uint_eq(lookup(v, a, "b")->nlink, 2);
	ck_assert_uint_eq(lookup(v, a, "f")->nlink, 1);
	ck_assert_uint_eq(lookup(v, rank, "g")->nlink, 1);
	ck_assert_uint_eq(h->nlink, 3);
	ck_assert_uint_eq(lookup(v, h, "i")->nlink, 3);
	ck_assert_uint_eq(lookup(v, root_of(v), ".shardfs")->nlink, 2);
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_pad_items)
{
	/* DESIGN §5 vector: N=10, seed 42, W=4, strided, pad:
	 * r0 [8,6,5], r1 [2,0,1], r2 [4,7,8*], r3 [3,9,2*]. */
	static const char *const keys[] = { "k0", "k1", "k2", "k3", "k4",
					    "k5", "k6", "k7", "k8", "k9" };
	static const char *const want[4][3] = {
		{ "k5", "k6", "k8" },
		{ "k0", "k1", "k2" },
		{ "k4", "k7" },
		{ "k3", "k9" },
	};
	static const size_t want_n[4] = { 3, 3, 2, 2 };
	struct manifest *m = manifest_of(keys, ARRAY_LEN(keys));
	struct shard_plan *plan =
		plan_of(m, 4, 42, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			SHARD_BALANCE_PAD);
	struct view *v = view_of(m, plan, NULL);
	const struct view_node *root = root_of(v);
	char name[32];
	int r;

	for (r = 0; r < 4; r++) {
		snprintf(name, sizeof(name), "rank-%d", r);
		expect_children(v, lookup(v, root, name), want[r], want_n[r]);
	}
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);
	manifest_free(m);

	/* One item, three ranks: ranks 1 and 2 hold only a pad. */
	m = manifest_of(keys, 1);
	plan = plan_of(m, 3, 42, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
		       SHARD_BALANCE_PAD);
	v = view_of(m, plan, NULL);
	root = root_of(v);
	expect_children(v, lookup(v, root, "rank-0"), keys, 1);
	ck_assert_uint_eq(lookup(v, root, "rank-1")->u.dir.count, 0);
	ck_assert_uint_eq(lookup(v, root, "rank-2")->u.dir.count, 0);
	ck_assert_uint_eq(lookup(v, root, "rank-2")->nlink, 2);
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);

	/* Contiguous pad as well. */
	plan = plan_of(m, 2, 1, SHARD_ORDER_NONE, SHARD_LAYOUT_CONTIGUOUS,
		       SHARD_BALANCE_PAD);
	v = view_of(m, plan, NULL);
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_inodes_stable)
{
	static const char *const keys[] = { "a/b", "a/c/d", "e", "f/g", "h" };
	struct rank_set set = { .bits = 0x5 };
	struct manifest *m = manifest_of(keys, ARRAY_LEN(keys));
	struct shard_plan *plan =
		plan_of(m, 3, 9, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			SHARD_BALANCE_NONE);
	struct view *v = view_of(m, plan, &set);
	struct view *w = view_of(m, plan, &set);
	size_t count = view_node_count(v);
	uint64_t ino;

	ck_assert_ptr_null(view_node(v, 0));
	ck_assert_ptr_null(view_node(v, count + 1));
	ck_assert_ptr_eq(view_node(v, 1), root_of(v));
	for (ino = 1; ino <= count; ino++)
		ck_assert_uint_eq(view_ino(v, view_node(v, ino)), ino);
	/* The same inputs give the same inode numbers. */
	ck_assert_uint_eq(view_node_count(w), count);
	for (ino = 1; ino <= count; ino++) {
		const struct view_node *a = view_node(v, ino);
		const struct view_node *b = view_node(w, ino);

		ck_assert_uint_eq(a->name_len, b->name_len);
		ck_assert_int_eq(memcmp(a->name, b->name, a->name_len), 0);
		ck_assert_uint_eq(a->parent, b->parent);
		ck_assert_int_eq(a->kind, b->kind);
		if (a->kind == VIEW_FILE)
			ck_assert_uint_eq(a->u.item, b->u.item);
	}
	check_view(v, m, plan, &set);
	view_free(v);
	view_free(w);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_empty_manifest)
{
	struct manifest *m = manifest_of(NULL, 0);
	struct shard_plan *plan =
		plan_of(m, 3, 0, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
			SHARD_BALANCE_PAD);
	struct view *v = view_of(m, plan, NULL);

	/* root, .shardfs, 4 control files, 3 order files, 3 rank dirs */
	ck_assert_uint_eq(view_node_count(v), 12);
	ck_assert_uint_eq(lookup(v, root_of(v), "rank-2")->u.dir.count, 0);
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);
	manifest_free(m);
}
END_TEST

START_TEST(test_deep_tree)
{
	/* Deeper than any small fixed stack, with siblings at every
	 * depth, so directories open and close many times. */
	enum { DEPTH = 70 };
	char *keys[3 * DEPTH];
	size_t n = 0, d, i;
	struct manifest *m;
	struct shard_plan *plan;
	struct view *v;

	for (d = 1; d <= DEPTH; d++) {
		char buf[3 * DEPTH + 8];
		size_t len = 0;

		for (i = 0; i < d; i++)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len,
						"%c/", 'a' + (int)(i % 3));
		snprintf(buf + len, sizeof(buf) - len, "0");
		keys[n++] = strdup(buf);
		snprintf(buf + len, sizeof(buf) - len, "1");
		keys[n++] = strdup(buf);
		buf[len - 2] = 'z';
		snprintf(buf + len, sizeof(buf) - len, "2");
		keys[n++] = strdup(buf);
	}
	m = manifest_of((const char *const *)keys, n);
	ck_assert_uint_eq(m->count, n);
	plan = plan_of(m, 2, 5, SHARD_ORDER_SHUFFLE, SHARD_LAYOUT_STRIDED,
		       SHARD_BALANCE_NONE);
	v = view_of(m, plan, NULL);
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);
	plan = plan_of(m, 1, 0, SHARD_ORDER_NONE, SHARD_LAYOUT_STRIDED,
		       SHARD_BALANCE_NONE);
	v = view_of(m, plan, NULL);
	check_view(v, m, plan, NULL);
	view_free(v);
	shard_plan_free(plan);
	manifest_free(m);
	for (i = 0; i < n; i++)
		free(keys[i]);
}
END_TEST

START_TEST(test_random_trees)
{
	/* Names chosen to collide in interesting orders: prefixes, '-' and
	 * '.' (below '/'), '0' (above), bytes >= 0x80, '%', spaces. */
	static const char *const names[] = {
		"a",  "a-b", "a.c",  "a0",	 "ab",	 "b",	"Z",
		"%x", " s",  "\x7f", "\xc3\xa9", "\xff", "é-1",
	};
	uint64_t rng = 0x7e57;
	int round;

	for (round = 0; round < 1000; round++) {
		size_t n = rng_below(&rng, 120), i, j, added = 0;
		static char keys[120][32];
		static size_t lens[120];
		struct manifest *m = manifest_new();
		struct shard_plan *plan;
		struct rank_set set;
		struct view *v;
		uint64_t world = 1 + rng_below(&rng, 9);
		enum shard_layout layout =
			(enum shard_layout)rng_below(&rng, 3);
		enum shard_balance balance =
			layout == SHARD_LAYOUT_BYTES
				? SHARD_BALANCE_NONE
				: (enum shard_balance)rng_below(&rng, 3);
		enum shard_order order = (enum shard_order)rng_below(&rng, 2);
		int all = rng_below(&rng, 4) == 0;

		for (i = 0; i < n; i++) {
			char *key = keys[added];
			size_t len = 0, depth = 1 + rng_below(&rng, 5), d;

			for (d = 0; d < depth; d++) {
				const char *c = names[rng_below(
					&rng, ARRAY_LEN(names))];

				if (d > 0)
					key[len++] = '/';
				memcpy(key + len, c, strlen(c));
				len += strlen(c);
			}
			/* Random keys repeat; the manifest would refuse. */
			for (j = 0; j < added; j++)
				if (lens[j] == len &&
				    memcmp(keys[j], key, len) == 0)
					break;
			if (j < added)
				continue;
			lens[added++] = len;
			ck_assert_int_eq(manifest_add(m, key, len,
						      rng_below(&rng, 1000),
						      "e", 1, 0),
					 0);
		}
		ck_assert_int_eq(manifest_finish(m), 0);
		plan = plan_of(m, world, rng_next(&rng), order, layout,
			       balance);
		set.bits = rng_next(&rng);
		v = view_of(m, plan, all ? NULL : &set);
		check_view(v, m, plan, all ? NULL : &set);
		view_free(v);
		shard_plan_free(plan);
		manifest_free(m);
	}
}
END_TEST

static Suite *view_suite(void)
{
	Suite *s = suite_create("view");
	struct {
		const char *name;
		const TTest *test;
	} cases[] = {
		{ "root_and_ctrl", test_root_and_ctrl },
		{ "rank_filter", test_rank_filter },
		{ "name_order", test_name_order },
		{ "lookup", test_lookup },
		{ "nlink", test_nlink },
		{ "pad_items", test_pad_items },
		{ "inodes_stable", test_inodes_stable },
		{ "empty_manifest", test_empty_manifest },
		{ "deep_tree", test_deep_tree },
		{ "random_trees", test_random_trees },
	};
	size_t i;

	for (i = 0; i < ARRAY_LEN(cases); i++) {
		TCase *tc = tcase_create(cases[i].name);

		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	/* Random trees skip file-vs-directory keys, logging each. */
	log_set_level(LOG_ERR - 1);
	return unit_run(view_suite());
}
