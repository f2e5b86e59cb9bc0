/*
 * check_gen: the generations of a mount (fs/gen.c, fs/swap.c and
 * fs/order.c through fs/fs_impl.h and fs_swap() from fs/fs.h), without
 * the kernel: lookups, opens and requests are the references the FUSE
 * handlers take, taken here by hand.
 *
 * What must hold: a swap makes the new tree current at once; a retired
 * generation stays reachable by its inode numbers while anything holds it
 * and is freed (its release called once) by the last reference; a freed
 * generation's inodes and prefetch orders resolve to nothing, never to
 * another tree; and many threads taking and dropping references while the
 * main thread swaps leave every retired generation freed exactly once
 * (run under TSan by `make SAN=thread`). And a transform tree's names
 * (fs/xfview.c): the rule renames file names only, and an item whose new
 * name collides is left out of the tree's plan, pads included.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "cache/cache.h"
#include "fs/fs.h"
#include "fs/fs_impl.h"
#include "unit.h"

/* One generation's data, owned by the test. */
struct tree {
	struct manifest *m;
	struct shard_spec spec;
	struct shard_plan *plan;
	struct view *view;
	int released; /* set by release() */
};

struct fixture {
	char dir[64];
	struct backend *be;
	struct cache *cache;
	struct fs fs;
};

static uint64_t weight(const void *ctx, size_t i)
{
	const struct manifest *m = ctx;

	return m->entries[i].size;
}

/* n files "d/fNNN" in a plan of world ranks. */
static struct tree *tree_new(size_t n, uint64_t world)
{
	struct tree *t = calloc(1, sizeof(*t));
	char key[32];

	ck_assert_ptr_nonnull(t);
	t->m = manifest_new();
	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "d/f%03zu", i);
		ck_assert_int_eq(
			manifest_add(t->m, key, strlen(key), 10 + i, "e", 1, 0),
			0);
	}
	ck_assert_int_eq(manifest_finish(t->m), 0);
	t->spec.world_size = world;
	ck_assert_int_eq(
		shard_plan_build(&t->spec, t->m->count, weight, t->m, &t->plan),
		0);
	ck_assert_int_eq(view_build(t->m, t->plan, NULL, NULL, NULL, &t->view),
			 0);
	return t;
}

static void tree_free(struct tree *t)
{
	view_free(t->view);
	shard_plan_free(t->plan);
	manifest_free(t->m);
	free(t);
}

static void tree_data(struct fixture *fx, struct tree *t, struct fs_data *d)
{
	d->manifest = t->m;
	d->spec = &t->spec;
	d->plan = t->plan;
	d->view = t->view;
	d->cache = fx->cache;
}

/* release callback: counts (atomically: any thread may free). */
static void release(void *owner)
{
	struct tree *t = owner;

	__atomic_add_fetch(&t->released, 1, __ATOMIC_RELAXED);
}

static void fixture_init(struct fixture *fx, struct tree *t0)
{
	struct backend_options opts = { 0 };
	struct fs_data d;

	strcpy(fx->dir, "/tmp/check_gen.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fx->dir));
	ck_assert_int_eq(backend_open(fx->dir, &opts, &fx->be), 0);
	ck_assert_int_eq(cache_new(fx->be, &fx->cache), 0);
	tree_data(fx, t0, &d);
	ck_assert_int_eq(fs_state_init(&fx->fs, &d), 0);
}

static void fixture_done(struct fixture *fx)
{
	fs_state_destroy(&fx->fs);
	cache_free(fx->cache);
	backend_close(fx->be);
	rmdir(fx->dir);
}

/* A file node's inode in generation g: the first file under d/ of rank
 * 0's directory. */
static uint64_t some_file_ino(struct fs_gen *g)
{
	const struct view_node *root = view_node(g->d.view, 1), *n = root;
	uint64_t ino = 0;

	/* rank-0/d/<first file> */
	ck_assert_int_eq(view_lookup(g->d.view, n, "rank-0", 6, &ino), 0);
	n = view_node(g->d.view, ino);
	ck_assert_int_eq(view_lookup(g->d.view, n, "d", 1, &ino), 0);
	n = view_node(g->d.view, ino);
	n = view_child(g->d.view, n, 0);
	return FS_INO(g->id, view_ino(g->d.view, n));
}

START_TEST(test_ino_encoding)
{
	ck_assert_uint_eq(FS_INO(0, 1), FUSE_ROOT_ID);
	ck_assert_uint_eq(FS_INO(7, 1), FUSE_ROOT_ID);
	ck_assert_uint_eq(FS_INO(0, 5), 5);
	ck_assert_uint_eq(FS_INO(3, 5), (UINT64_C(3) << 32) | 5);
	ck_assert_uint_eq(FS_INO_GEN(FS_INO(3, 5)), 3);
	ck_assert_uint_eq(FS_INO_VIEW(FS_INO(3, 5)), 5);
	ck_assert_uint_eq(FS_INO_VIEW(FS_INO(UINT32_MAX, UINT32_MAX)),
			  UINT32_MAX);
}
END_TEST

START_TEST(test_swap_keeps_referenced_generation)
{
	struct tree *t0 = tree_new(20, 2), *t1 = tree_new(30, 4);
	struct fixture fx;
	struct fs_data d;
	struct fs_gen *g0, *g, *root;
	uint64_t ino0;

	fixture_init(&fx, t0);
	g0 = fs_gen_current(&fx.fs);
	ck_assert_uint_eq(g0->id, 0);
	ino0 = some_file_ino(g0);
	/* The kernel looked up ino0 twice and has it open once. */
	fs_gen_ref(g0, 3);
	fs_gen_put(&fx.fs, g0, 1);

	tree_data(&fx, t1, &d);
	ck_assert_int_eq(fs_swap(&fx.fs, &d, release, t1), 0);
	ck_assert_uint_eq(fs_generation(&fx.fs), 1);
	root = fs_gen_of_ino(&fx.fs, FUSE_ROOT_ID);
	ck_assert_uint_eq(root->id, 1);
	ck_assert_ptr_eq(root->d.view, t1->view);
	fs_gen_put(&fx.fs, root, 1);

	/* Old inodes still name the old tree. */
	g = fs_gen_of_ino(&fx.fs, ino0);
	ck_assert_ptr_eq(g, g0);
	ck_assert_ptr_eq(g->d.view, t0->view);
	ck_assert_ptr_nonnull(view_node(g->d.view, FS_INO_VIEW(ino0)));
	fs_gen_put(&fx.fs, g, 1);
	ck_assert_uint_eq(fs_gen_count(&fx.fs), 2);

	/* release, then forget of both lookups: gone. */
	fs_gen_put(&fx.fs, g0, 1);
	ck_assert_uint_eq(fs_gen_count(&fx.fs), 2);
	fs_gen_put(&fx.fs, g0, 2);
	ck_assert_uint_eq(fs_gen_count(&fx.fs), 1);
	ck_assert_ptr_null(fs_gen_of_ino(&fx.fs, ino0));
	ck_assert_ptr_null(fs_gen_get(&fx.fs, 0));

	ck_assert_int_eq(t1->released, 0);
	fixture_done(&fx);
	/* What is left is freed at the end, released once. */
	ck_assert_int_eq(t1->released, 1);
	tree_free(t0);
	tree_free(t1);
}
END_TEST

START_TEST(test_unreferenced_generation_freed_at_swap)
{
	struct tree *t0 = tree_new(5, 1), *t1 = tree_new(6, 1),
		    *t2 = tree_new(7, 1);
	struct fixture fx;
	struct fs_data d;

	fixture_init(&fx, t0);
	tree_data(&fx, t1, &d);
	ck_assert_int_eq(fs_swap(&fx.fs, &d, release, t1), 0);
	ck_assert_uint_eq(fs_gen_count(&fx.fs), 1); /* gen 0 had no refs */
	tree_data(&fx, t2, &d);
	ck_assert_int_eq(fs_swap(&fx.fs, &d, release, t2), 0);
	ck_assert_int_eq(t1->released, 1);
	ck_assert_int_eq(t2->released, 0);
	ck_assert_uint_eq(fs_generation(&fx.fs), 2);
	fixture_done(&fx);
	ck_assert_int_eq(t1->released, 1);
	ck_assert_int_eq(t2->released, 1);
	tree_free(t0);
	tree_free(t1);
	tree_free(t2);
}
END_TEST

START_TEST(test_order_follows_generation)
{
	struct tree *t0 = tree_new(10, 2), *t1 = tree_new(40, 4);
	struct fixture fx;
	struct cache_object obj;
	struct fs_data d;
	struct fs_gen *g0;
	const uint32_t *items;
	size_t count, npad;

	fixture_init(&fx, t0);
	g0 = fs_gen_current(&fx.fs); /* an open file of gen 0 */
	tree_data(&fx, t1, &d);
	ck_assert_int_eq(fs_swap(&fx.fs, &d, release, t1), 0);

	shard_plan_rank(t0->plan, 1, &items, &count, &npad);
	ck_assert(fs_order_object(&fx.fs, FS_ORDER(0, 1), 0, &obj));
	ck_assert_ptr_eq(obj.key, t0->m->entries[items[0]].key);
	ck_assert(!fs_order_object(&fx.fs, FS_ORDER(0, 1), count - npad, &obj));
	ck_assert(!fs_order_object(&fx.fs, FS_ORDER(0, 3), 0, &obj));

	shard_plan_rank(t1->plan, 3, &items, &count, &npad);
	ck_assert(fs_order_object(&fx.fs, FS_ORDER(1, 3), 0, &obj));
	ck_assert_ptr_eq(obj.key, t1->m->entries[items[0]].key);

	fs_gen_put(&fx.fs, g0, 1); /* gen 0 freed: its orders end */
	ck_assert(!fs_order_object(&fx.fs, FS_ORDER(0, 1), 0, &obj));
	fixture_done(&fx);
	tree_free(t0);
	tree_free(t1);
}
END_TEST

#define RACE_THREADS 4
#define RACE_SWAPS 300

struct race {
	struct fixture *fx;
	int stop;
	uint64_t taken;
};

/* What the FUSE workers do: resolve the root or an inode of some recent
 * generation, hold it a moment, count a lookup and forget it. */
static void *race_worker(void *arg)
{
	struct race *r = arg;
	uint64_t n = 0;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		struct fs_gen *g = fs_gen_of_ino(&r->fx->fs, FUSE_ROOT_ID);
		uint64_t ino = some_file_ino(g), id = g->id;
		struct fs_gen *h;

		fs_gen_ref(g, 1); /* a lookup reply */
		fs_gen_put(&r->fx->fs, g, 1);
		h = fs_gen_of_ino(&r->fx->fs, ino); /* a later getattr */
		ck_assert_ptr_nonnull(h);
		ck_assert_uint_eq(h->id, id);
		ck_assert_ptr_nonnull(view_node(h->d.view, FS_INO_VIEW(ino)));
		fs_gen_put(&r->fx->fs, h, 2); /* the request and a forget */
		n++;
	}
	__atomic_add_fetch(&r->taken, n, __ATOMIC_RELAXED);
	return NULL;
}

START_TEST(test_swap_under_concurrent_references)
{
	struct tree *t0 = tree_new(8, 1), *trees[RACE_SWAPS];
	pthread_t thr[RACE_THREADS];
	struct fixture fx;
	struct race r = { &fx, 0, 0 };
	struct fs_data d;
	int i;

	fixture_init(&fx, t0);
	for (i = 0; i < RACE_THREADS; i++)
		ck_assert_int_eq(pthread_create(&thr[i], NULL, race_worker, &r),
				 0);
	for (i = 0; i < RACE_SWAPS; i++) {
		trees[i] = tree_new(8 + (size_t)i % 5, 1 + (uint64_t)i % 3);
		tree_data(&fx, trees[i], &d);
		ck_assert_int_eq(fs_swap(&fx.fs, &d, release, trees[i]), 0);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < RACE_THREADS; i++)
		pthread_join(thr[i], NULL);
	ck_assert_uint_gt(r.taken, 0);
	/* Every reference was dropped: only the current one is left. */
	ck_assert_uint_eq(fs_gen_count(&fx.fs), 1);
	for (i = 0; i < RACE_SWAPS - 1; i++)
		ck_assert_int_eq(trees[i]->released, 1);
	ck_assert_int_eq(trees[RACE_SWAPS - 1]->released, 0);
	fixture_done(&fx);
	ck_assert_int_eq(trees[RACE_SWAPS - 1]->released, 1);
	for (i = 0; i < RACE_SWAPS; i++)
		tree_free(trees[i]);
	tree_free(t0);
}
END_TEST

/* The name rule and its collisions (docs/DESIGN.md §3, "Transform
 * views"). */
START_TEST(test_xf_names)
{
	static const char *const keys[] = {
		"a.b/x.jpg",  /* a.b/x.png (a directory's dot stays) */
		"a.b/x.jpeg", /* a.b/x.png too: the two collide... */
		"c/.hidden",  /* no extension (the first byte's dot) */
		"c/y.jpg",    /* c/y.png, a directory's name: skipped */
		"c/y.png/z",  /* c/y.png/z.png */
		"d",	      /* d.png */
	};
	struct fs_transform t = { .name = "t",
				  .suffix = ".png",
				  .replace_extension = true };
	struct manifest *m = manifest_new();
	struct fs_xf_names *n = NULL;
	struct shard_spec spec = { .world_size = 2 };
	struct shard_plan *plan = NULL, *f = NULL;
	size_t i, kept = 0;
	long x;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		ck_assert_int_eq(
			manifest_add(m, keys[i], strlen(keys[i]), 1, "e", 1, 0),
			0);
	ck_assert_int_eq(manifest_finish(m), 0);
	ck_assert_int_eq(fs_xf_names_build(m, &t, &n), 0);
	ck_assert_uint_eq(n->m.count, m->count);
	/* ... the first in manifest order ("a.b/x.jpeg" < "a.b/x.jpg")
	 * keeps the name. */
	x = manifest_find(m, "a.b/x.jpeg", 10);
	ck_assert_str_eq(n->m.entries[x].key, "a.b/x.png");
	ck_assert_int_eq(n->skip[x], 0);
	x = manifest_find(m, "a.b/x.jpg", 9);
	ck_assert_str_eq(n->m.entries[x].key, "a.b/x.png");
	ck_assert_int_eq(n->skip[x], 1);
	x = manifest_find(m, "c/.hidden", 9);
	ck_assert_str_eq(n->m.entries[x].key, "c/.hidden.png");
	ck_assert_int_eq(n->skip[x], 0);
	x = manifest_find(m, "c/y.jpg", 7);
	ck_assert_int_eq(n->skip[x], 1);
	x = manifest_find(m, "c/y.png/z", 9);
	ck_assert_str_eq(n->m.entries[x].key, "c/y.png/z.png");
	x = manifest_find(m, "d", 1);
	ck_assert_str_eq(n->m.entries[x].key, "d.png");
	ck_assert_uint_eq(n->n_skipped, 2);
	/* Sizes and etags are the source's. */
	ck_assert_uint_eq(n->m.entries[x].size, m->entries[x].size);
	ck_assert_str_eq(n->m.entries[x].etag, "e");

	/* The tree's plan: every position but the skipped items'. */
	ck_assert_int_eq(shard_plan_build(&spec, m->count, weight, m, &plan),
			 0);
	ck_assert_int_eq(fs_xf_plan_filter(plan, n->skip, &f), 0);
	for (uint64_t r = 0; r < 2; r++) {
		const uint32_t *items, *fitems;
		size_t count, npad, fcount, fnpad, j, k = 0, pads = 0;

		shard_plan_rank(plan, r, &items, &count, &npad);
		shard_plan_rank(f, r, &fitems, &fcount, &fnpad);
		for (j = 0; j < count; j++) {
			if (n->skip[items[j]])
				continue;
			ck_assert_uint_lt(k, fcount);
			ck_assert_uint_eq(fitems[k], items[j]);
			k++;
			pads += j >= count - npad;
		}
		ck_assert_uint_eq(k, fcount);
		ck_assert_uint_eq(fnpad, pads);
		kept += fcount - fnpad;
	}
	ck_assert_uint_eq(kept, m->count - 2);
	shard_plan_free(f);
	shard_plan_free(plan);
	fs_xf_names_free(n);
	manifest_free(m);
}
END_TEST

int main(void)
{
	const struct unit_case cases[] = {
		{ "ino_encoding", test_ino_encoding },
		{ "swap_keeps_referenced_generation",
		  test_swap_keeps_referenced_generation },
		{ "unreferenced_generation_freed_at_swap",
		  test_unreferenced_generation_freed_at_swap },
		{ "order_follows_generation", test_order_follows_generation },
		{ "swap_under_concurrent_references",
		  test_swap_under_concurrent_references },
		{ "xf_names", test_xf_names },
	};

	return unit_run(
		unit_suite("gen", cases, sizeof(cases) / sizeof(cases[0])));
}
