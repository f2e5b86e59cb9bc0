/*
 * view: see view.h.
 *
 * Building walks each rank's items in key order (manifest index order is
 * canonical key order), keeping the current directory path on a stack: every
 * key under a directory prefix is contiguous in that order, so each directory
 * is created exactly once. Children are first chained through a temporary
 * sibling list, then laid out contiguously per directory and sorted by name
 * (key order is not name order: "a-b" sorts before "a/x", but "a" < "a-b").
 */
#include "fs/view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

struct view {
	struct view_node *nodes;
	size_t count, cap;
	uint32_t *children; /* every node but the root, grouped by parent */
	char *names;	    /* "rank-R" and "rank-R.order" strings */
	char *part_names;   /* record views: the part file names, shared by
			     * every rank's records/ directory */
	/* Build-time only: */
	uint32_t *head, *next; /* child chains */
};

static const char ctrl_dir_name[] = ".shardfs";

static int add_node(struct view *v, uint32_t parent, const char *name,
		    size_t name_len, enum view_kind kind, uint32_t *out)
{
	struct view_node *n;
	uint32_t idx;

	if (v->count >= NONE - 1)
		return -EOVERFLOW;
	if (v->count == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 256;
		struct view_node *nodes =
			realloc(v->nodes, cap * sizeof(*nodes));
		uint32_t *head, *next;

		if (nodes == NULL)
			return -ENOMEM;
		v->nodes = nodes;
		head = realloc(v->head, cap * sizeof(*head));
		if (head == NULL)
			return -ENOMEM;
		v->head = head;
		next = realloc(v->next, cap * sizeof(*next));
		if (next == NULL)
			return -ENOMEM;
		v->next = next;
		v->cap = cap;
	}
	idx = (uint32_t)v->count++;
	n = &v->nodes[idx];
	memset(n, 0, sizeof(*n));
	n->name = name;
	n->name_len = (uint32_t)name_len;
	n->parent = parent;
	n->kind = (uint8_t)kind;
	n->nlink = kind == VIEW_DIR ? 2 : 1;
	v->head[idx] = NONE;
	v->next[idx] = NONE;
	if (idx != parent) {
		v->next[idx] = v->head[parent];
		v->head[parent] = idx;
		if (kind == VIEW_DIR)
			v->nodes[parent].nlink++;
	}
	*out = idx;
	return 0;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return (alen > blen) - (alen < blen);
}

static int node_name_cmp(const void *pa, const void *pb, void *ctx)
{
	const struct view_node *nodes = ctx;
	const struct view_node *a = &nodes[*(const uint32_t *)pa];
	const struct view_node *b = &nodes[*(const uint32_t *)pb];

	return name_cmp(a->name, a->name_len, b->name, b->name_len);
}

struct level {
	uint32_t node;
	const char *name;
	size_t len;
};

/* Adds rank r's directory and its files. */
static int add_rank(struct view *v, const struct manifest *m,
		    const struct shard_plan *plan, uint32_t under, uint64_t r,
		    const char *dir_name, uint32_t *sorted,
		    struct level **stack, size_t *stack_cap, uint32_t *dir_out)
{
	const uint32_t *items;
	size_t count, npad, i, n;
	uint32_t rank_dir, idx;
	int rc;

	rc = add_node(v, under, dir_name, strlen(dir_name), VIEW_DIR,
		      &rank_dir);
	if (rc < 0)
		return rc;
	*dir_out = rank_dir;
	shard_plan_rank(plan, r, &items, &count, &npad);
	n = count - npad;
	memcpy(sorted, items, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), u32_cmp);

	for (i = 0; i < n; i++) {
		const struct manifest_entry *e = &m->entries[sorted[i]];
		const char *p = e->key, *end = e->key + e->key_len;
		size_t depth = 0;
		uint32_t parent = rank_dir;

		for (;;) {
			const char *slash = memchr(p, '/', (size_t)(end - p));
			size_t len;

			if (slash == NULL)
				break;
			len = (size_t)(slash - p);
			if (depth >= *stack_cap) {
				size_t cap = *stack_cap ? *stack_cap * 2 : 16;
				struct level *s =
					realloc(*stack, cap * sizeof(*s));

				if (s == NULL)
					return -ENOMEM;
				/* An empty slot (name NULL) never matches. */
				for (size_t k = *stack_cap; k < cap; k++)
					s[k].name = NULL;
				*stack = s;
				*stack_cap = cap;
			}
			/* The stack holds the previous key's directories; a
			 * level that differs ends every level below it. */
			if ((*stack)[depth].name == NULL ||
			    (*stack)[depth].len != len ||
			    memcmp((*stack)[depth].name, p, len) != 0) {
				rc = add_node(v, parent, p, len, VIEW_DIR,
					      &idx);
				if (rc < 0)
					return rc;
				(*stack)[depth].node = idx;
				(*stack)[depth].name = p;
				(*stack)[depth].len = len;
				/* Levels below belonged to another directory. */
				if (depth + 1 < *stack_cap)
					(*stack)[depth + 1].name = NULL;
			}
			parent = (*stack)[depth].node;
			depth++;
			p = slash + 1;
		}
		if (depth < *stack_cap)
			(*stack)[depth].name = NULL;
		rc = add_node(v, parent, p, (size_t)(end - p), VIEW_FILE, &idx);
		if (rc < 0)
			return rc;
		v->nodes[idx].u.item = sorted[i];
	}
	if (*stack_cap > 0)
		(*stack)[0].name = NULL;
	return 0;
}

/* Lays out each directory's children contiguously, sorted by name. */
static int view_flatten(struct view *v)
{
	size_t i, pos = 0;

	v->children = malloc((v->count > 1 ? v->count - 1 : 1) *
			     sizeof(*v->children));
	if (v->children == NULL)
		return -ENOMEM;
	for (i = 0; i < v->count; i++) {
		struct view_node *n = &v->nodes[i];
		uint32_t c;

		if (n->kind != VIEW_DIR)
			continue;
		n->u.dir.first = (uint32_t)pos;
		for (c = v->head[i]; c != NONE; c = v->next[c])
			v->children[pos++] = c;
		n->u.dir.count = (uint32_t)(pos - n->u.dir.first);
		qsort_r(v->children + n->u.dir.first, n->u.dir.count,
			sizeof(uint32_t), node_name_cmp, v->nodes);
	}
	return 0;
}

static int add_ctrl(struct view *v, uint32_t dir, const char *name,
		    enum view_ctrl ctrl, uint32_t rank)
{
	uint32_t idx;
	int rc = add_node(v, dir, name, strlen(name), VIEW_CTRL, &idx);

	if (rc < 0)
		return rc;
	v->nodes[idx].ctrl = (uint8_t)ctrl;
	v->nodes[idx].u.rank = rank;
	return 0;
}

#define RANK_NAME_MAX 40 /* "rank-" + 20 digits + ".order" + NUL */
#define PART_NAME_MAX 64 /* "part-PPPPP-of-QQQQQ." + extension + NUL */

static const char records_dir_name[] = "records";

/* The part file names of rp, PART_NAME_MAX bytes each. */
static int part_names(struct view *v, const struct rplan *rp)
{
	unsigned p, n = rplan_parts(rp);

	v->part_names = malloc((size_t)n * PART_NAME_MAX);
	if (v->part_names == NULL)
		return -ENOMEM;
	for (p = 0; p < n; p++)
		if (rplan_part_name(rp, p, v->part_names + p * PART_NAME_MAX,
				    PART_NAME_MAX) < 0)
			return -ENAMETOOLONG;
	return 0;
}

/* Adds rank r's records/ directory under its rank directory. */
static int add_parts(struct view *v, const struct rplan *rp, uint32_t rank_dir,
		     uint64_t r)
{
	uint32_t dir, idx;
	unsigned p;
	int rc = add_node(v, rank_dir, records_dir_name,
			  strlen(records_dir_name), VIEW_DIR, &dir);

	for (p = 0; rc == 0 && p < rplan_parts(rp); p++) {
		const char *name = v->part_names + p * PART_NAME_MAX;

		rc = add_node(v, dir, name, strlen(name), VIEW_PART, &idx);
		if (rc == 0) {
			v->nodes[idx].u.part.rank = (uint32_t)r;
			v->nodes[idx].u.part.part = p;
		}
	}
	return rc;
}

int view_build(const struct manifest *m, const struct shard_plan *plan,
	       const struct rplan *rp, view_rank_filter filter,
	       const void *filter_ctx, struct view **out)
{
	return view_build_under(m, plan, rp, filter, filter_ctx, NULL, out);
}

int view_build_under(const struct manifest *m, const struct shard_plan *plan,
		     const struct rplan *rp, view_rank_filter filter,
		     const void *filter_ctx, const char *top, struct view **out)
{
	struct view *v = calloc(1, sizeof(*v));
	struct level *stack = NULL;
	size_t stack_cap = 0, max_rank = 0;
	uint32_t root, ctl, ranks, rank_dir, *sorted = NULL;
	uint64_t r, shown = 0;
	char *name;
	int rc;

	if (v == NULL)
		return -ENOMEM;
	for (r = 0; r < plan->world_size; r++) {
		size_t n = plan->rank_start[r + 1] - plan->rank_start[r];

		if (filter != NULL && !filter(filter_ctx, r))
			continue;
		shown++;
		if (n > max_rank)
			max_rank = n;
	}
	rc = -ENOMEM;
	v->names = malloc(shown * 2 * RANK_NAME_MAX + 1);
	sorted = malloc((max_rank ? max_rank : 1) * sizeof(*sorted));
	if (v->names == NULL || sorted == NULL)
		goto err;
	if (rp != NULL && (rc = part_names(v, rp)) < 0)
		goto err;

	if ((rc = add_node(v, 0, "", 0, VIEW_DIR, &root)) < 0 ||
	    (rc = add_node(v, root, ctrl_dir_name, strlen(ctrl_dir_name),
			   VIEW_DIR, &ctl)) < 0 ||
	    (rc = add_ctrl(v, ctl, "manifest.tsv", VIEW_CTRL_MANIFEST, 0)) <
		    0 ||
	    (rc = add_ctrl(v, ctl, "plan", VIEW_CTRL_PLAN, 0)) < 0 ||
	    (rc = add_ctrl(v, ctl, "stats", VIEW_CTRL_STATS, 0)) < 0 ||
	    (rc = add_ctrl(v, ctl, "log", VIEW_CTRL_LOG, 0)) < 0)
		goto err;
	ranks = root;
	if (top != NULL &&
	    (rc = add_node(v, root, top, strlen(top), VIEW_DIR, &ranks)) < 0)
		goto err;

	name = v->names;
	for (r = 0; r < plan->world_size; r++) {
		char *order_name;

		if (filter != NULL && !filter(filter_ctx, r))
			continue;
		snprintf(name, RANK_NAME_MAX, "rank-%llu",
			 (unsigned long long)r);
		order_name = name + RANK_NAME_MAX;
		snprintf(order_name, RANK_NAME_MAX, "rank-%llu.order",
			 (unsigned long long)r);
		rc = add_ctrl(v, ctl, order_name, VIEW_CTRL_ORDER, (uint32_t)r);
		if (rc == 0)
			rc = add_rank(v, m, plan, ranks, r, name, sorted,
				      &stack, &stack_cap, &rank_dir);
		if (rc == 0 && rp != NULL)
			rc = add_parts(v, rp, rank_dir, r);
		if (rc < 0)
			goto err;
		name += 2 * RANK_NAME_MAX;
	}
	rc = view_flatten(v);
	if (rc < 0)
		goto err;
	free(v->head);
	free(v->next);
	v->head = v->next = NULL;
	free(stack);
	free(sorted);
	*out = v;
	return 0;

err:
	free(stack);
	free(sorted);
	view_free(v);
	return rc;
}

void view_free(struct view *v)
{
	if (v == NULL)
		return;
	free(v->nodes);
	free(v->children);
	free(v->names);
	free(v->part_names);
	free(v->head);
	free(v->next);
	free(v);
}

const struct view_node *view_node(const struct view *v, uint64_t ino)
{
	if (ino == 0 || ino > v->count)
		return NULL;
	return &v->nodes[ino - 1];
}

uint64_t view_ino(const struct view *v, const struct view_node *n)
{
	return (uint64_t)(n - v->nodes) + 1;
}

/* The position of name among dir's children, or -ENOENT. */
static int64_t view_find(const struct view *v, const struct view_node *dir,
			 const char *name, size_t name_len)
{
	uint32_t lo = 0, hi = dir->u.dir.count;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct view_node *c =
			&v->nodes[v->children[dir->u.dir.first + mid]];
		int cmp = name_cmp(c->name, c->name_len, name, name_len);

		if (cmp == 0)
			return mid;
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENOENT;
}

int view_lookup(const struct view *v, const struct view_node *dir,
		const char *name, size_t name_len, uint64_t *ino)
{
	int64_t i;

	if (dir->kind != VIEW_DIR)
		return -ENOTDIR;
	i = view_find(v, dir, name, name_len);
	if (i < 0)
		return (int)i;
	*ino = view_ino(v, view_child(v, dir, (uint32_t)i));
	return 0;
}

int64_t view_child_pos(const struct view *v, const struct view_node *n)
{
	const struct view_node *dir = &v->nodes[n->parent];

	if (n == dir) /* the root */
		return -ENOENT;
	return view_find(v, dir, n->name, n->name_len);
}

const struct view_node *view_child(const struct view *v,
				   const struct view_node *dir, uint32_t i)
{
	return &v->nodes[v->children[dir->u.dir.first + i]];
}

size_t view_node_count(const struct view *v)
{
	return v->count;
}
