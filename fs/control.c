/*
 * control: the plan and order texts (formats in control.h), the lowest of
 * the three control files: control_stats.c (the stats and log texts, the
 * plan digest) calls it, control_files.c (the .shardfs/ files of a
 * generation) calls both, and it calls neither.
 */
#include "fs/control.h"

#include <errno.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_impl.h"
#include "fs/recview.h"

static uint64_t rank_bytes(const struct manifest *m,
			   const struct shard_plan *plan, uint64_t r)
{
	const uint32_t *items;
	size_t count, npad, i;
	uint64_t bytes = 0;

	shard_plan_rank(plan, r, &items, &count, &npad);
	for (i = 0; i < count; i++)
		bytes += m->entries[items[i]].size;
	return bytes;
}

/* The lines every plan text starts with: the spec, the manifest and every
 * parameter of the plan. */
static void write_plan_params(FILE *f, const struct manifest *m,
			      const struct shard_spec *spec)
{
	uint64_t skipped = 0;
	int i;

	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		skipped += m->skipped[i];
	fprintf(f, "spec %s\n", SHARD_SPEC_VERSION);
	fprintf(f, "manifest_sha256 %s\n", m->digest);
	fprintf(f, "manifest_items %zu\n", m->count);
	fprintf(f, "manifest_bytes %llu\n", (unsigned long long)m->total_bytes);
	fprintf(f, "skipped_keys %llu\n", (unsigned long long)skipped);
	for (i = 0; i < MANIFEST_SKIP_NREASONS; i++)
		if (m->skipped[i] > 0)
			fprintf(f, "skipped_keys_%s %llu\n",
				manifest_skip_name(i),
				(unsigned long long)m->skipped[i]);
	fprintf(f, "world_size %llu\n", (unsigned long long)spec->world_size);
	fprintf(f, "seed %llu\n", (unsigned long long)spec->seed);
	fprintf(f, "epoch %llu\n", (unsigned long long)spec->epoch);
	fprintf(f, "order %s\n", shard_order_name(spec->order));
	fprintf(f, "layout %s\n", shard_layout_name(spec->layout));
	fprintf(f, "balance %s\n", shard_balance_name(spec->balance));
	fprintf(f, "reshuffle %s\n", shard_reshuffle_name(spec->reshuffle));
	if (spec->skip != 0 || spec->skip_world != 0)
		fprintf(f, "skip %llu\nskip_world %llu\n",
			(unsigned long long)spec->skip,
			(unsigned long long)(spec->skip_world
						     ? spec->skip_world
						     : spec->world_size));
}

int control_write_plan(FILE *f, const struct manifest *m,
		       const struct shard_spec *spec,
		       const struct shard_plan *plan)
{
	uint64_t total = 0, max_bytes = 0, r;
	size_t max_items = 0, min_items = SIZE_MAX;

	for (r = 0; r < plan->world_size; r++) {
		uint64_t b = rank_bytes(m, plan, r);
		size_t n = plan->rank_start[r + 1] - plan->rank_start[r];

		total += b;
		if (b > max_bytes)
			max_bytes = b;
		if (n > max_items)
			max_items = n;
		if (n < min_items)
			min_items = n;
	}
	write_plan_params(f, m, spec);
	if (spec->skip != 0 || spec->skip_world != 0)
		fprintf(f, "skipped_items %zu\n", plan->n_skipped);
	fprintf(f, "dropped_items %zu\n", plan->n_dropped);
	/* Largest rank over the mean: 1.0 is perfect balance. */
	fprintf(f, "imbalance_bytes %.4f\n",
		total ? (double)max_bytes * (double)plan->world_size /
				(double)total
		      : 1.0);
	fprintf(f, "imbalance_items %zu\n",
		plan->world_size ? max_items - min_items : 0);
	for (r = 0; r < plan->world_size; r++)
		fprintf(f, "rank %llu items %zu pad %zu bytes %llu\n",
			(unsigned long long)r,
			plan->rank_start[r + 1] - plan->rank_start[r],
			plan->rank_pad[r],
			(unsigned long long)rank_bytes(m, plan, r));
	return ferror(f) ? -EIO : 0;
}

int control_write_plan_of(FILE *f, const struct fs_data *d)
{
	/* A record view's object plan is empty: its rank lines and
	 * aggregates would only say so. */
	if (d->rplan == NULL)
		return control_write_plan(f, d->manifest, d->spec, d->plan);
	write_plan_params(f, d->manifest, d->spec);
	return ferror(f) ? -EIO : recview_write_plan(f, d);
}

int control_write_order(FILE *f, const struct manifest *m,
			const struct shard_plan *plan, uint64_t rank)
{
	const uint32_t *items;
	size_t count, npad, i;

	shard_plan_rank(plan, rank, &items, &count, &npad);
	for (i = 0; i < count; i++) {
		const struct manifest_entry *e = &m->entries[items[i]];

		if (manifest_write_escaped(f, e->key, e->key_len) < 0)
			return -EIO;
		fputs(i >= count - npad ? "\tpad\n" : "\n", f);
	}
	return ferror(f) ? -EIO : 0;
}
