/*
 * fs/order: the ranks' orders as the read-ahead walks them: the
 * prefetcher's view (cache_set_order's callback), where an order is gen
 * id << 32 | rank (FS_ORDER) and its objects the generation's non-pad
 * items of that rank, on past the end into the next epoch's order once
 * epoch.c has planned it; and a transform tree's runs queued ahead of its
 * reader along the same order (fs_order_xf_ahead()). Calls epoch.c and
 * xfview.c, which do not call it.
 */
#include "fs/fs.h"

#include "fs/fs_impl.h"

struct fs_gen *fs_order_item(struct fs *fs, uint64_t order, uint64_t pos,
			     uint32_t *item)
{
	struct fs_gen *g = fs_gen_get(fs, (uint32_t)(order >> 32));
	const uint32_t *items;
	size_t count, npad;

	if (g == NULL)
		return NULL;
	if ((order & UINT32_MAX) >= g->d.plan->world_size) {
		fs_gen_put(fs, g, 1);
		return NULL;
	}
	shard_plan_rank(g->d.plan, order & UINT32_MAX, &items, &count, &npad);
	if (pos >= count - npad) {
		/* Past the end: on into the next epoch's order, if it is
		 * planned (fs_epoch_opened asks for it near the end). */
		struct fs_gen *next = fs_epoch_next(fs, g);

		pos -= count - npad;
		fs_gen_put(fs, g, 1);
		g = next;
		if (g == NULL)
			return NULL;
		shard_plan_rank(g->d.plan, order & UINT32_MAX, &items, &count,
				&npad);
		if (pos >= count - npad) {
			fs_gen_put(fs, g, 1);
			return NULL;
		}
	}
	*item = items[pos];
	return g;
}

/*
 * The prefetcher's view of an order: gen id << 32 | rank, the generation's
 * non-pad items of that rank, in order, on into the next epoch's. The
 * strings put in *out are the manifest's: the caller's request holds the
 * order's generation (a read, a lookup) or the pusher reads them while
 * the kernel knows the generation's files; the reference taken here only
 * makes a call for a generation already gone answer "no more" instead of
 * touching freed memory. Every tree of a base shares its manifest (a
 * transform tree's source manifest is its base's).
 */
bool fs_order_object(void *ctx, uint64_t order, uint64_t pos,
		     struct cache_object *out)
{
	struct fs *fs = ctx;
	uint32_t item;
	struct fs_gen *g = fs_order_item(fs, order, pos, &item);

	if (g == NULL)
		return false;
	/* A transform tree's: its source object, which its transform
	 * reads whole. */
	fs_item_source(g, item, out);
	fs_gen_put(fs, g, 1);
	return true;
}

void fs_order_xf_ahead(struct fs *fs, struct fs_gen *g, uint32_t rank,
		       uint64_t pos)
{
	struct xform *x = g->xf->x;
	unsigned depth = xform_ahead_depth(x), i;

	for (i = 1; i <= depth; i++) {
		struct cache_object src;
		uint32_t item;
		struct fs_gen *h = fs_order_item(fs, FS_ORDER(g->id, rank),
						 pos + i, &item);

		if (h == NULL)
			break; /* the order's end, for now */
		fs_item_source(h, item, &src);
		xform_ahead(x, &src); /* copies what it keeps */
		fs_gen_put(fs, h, 1);
	}
}
