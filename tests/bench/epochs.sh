#!/usr/bin/env bash
# Epochs bench (issue 14), part of `make bench` (phase "epochs"): a
# trainer on each of two simulated nodes reads its rank's epoch-E/rank-R/
# for E = 0, 1, 2, under `reshuffle = global` and under `local`, and the
# backend bytes and cache hits each node's epochs cost are recorded.
#
# One s3rver on 127.0.0.1 holds an ImageNet-like dataset (N files of
# 80-140 KiB). Two shardfs daemons mount the same bucket, each with its own
# cache dir: world_size = 2, node A `ranks = 0`, node B `ranks = 1`. In
# each epoch both trainers run at once (tests/bench/epochs.py: open, read
# whole, close every file of .shardfs/epoch-E/rank-R.order in order, each
# file's bytes checked against the source); after each epoch each node's
# .shardfs/stats gives the epoch's deltas. Runs: both modes with a cache
# that holds the whole dataset, then (BENCH_EPOCHS_SMALL=0 skips it) both
# modes with a cache of ~60% of the dataset per node.
#
# Prints a table and writes docs/BENCHMARKS-epochs.md (BENCH_EPOCHS_OUT=-
# leaves it alone). Knobs: BENCH_EPOCHS_N [1500] files, BENCH_EPOCHS_E [3]
# epochs. Exits non-zero if a mount fails, a daemon exits badly or a read
# returns wrong bytes. Only 127.0.0.1 is contacted; everything started is
# stopped by PID.
set -uo pipefail
SUITE=bench-epochs
BDIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BDIR/../.." && pwd)
if [ -z "${SHARDFS:-}" ]; then
	nice make -C "$ROOT" --no-print-directory build/shardfs >&2 || exit 1
	SHARDFS=$ROOT/build/shardfs
fi
. "$ROOT/tests/integration/lib.sh"
. "$ROOT/tests/integration/s3/s3rver.sh"
N=${BENCH_EPOCHS_N:-1500}
EPOCHS=${BENCH_EPOCHS_E:-3}
SMALL=${BENCH_EPOCHS_SMALL:-1}
OUT=${BENCH_EPOCHS_OUT:-$ROOT/docs/BENCHMARKS-epochs.md}
D="/usr/bin/python3 $BDIR/epochs.py"
die() { echo "bench-epochs: $*" >&2; exit 1; }

s3_suite_start bkt
SRC=$T/src
$D make "$SRC" "$N" || die "dataset"
aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/" || die "upload"
total=$(du -sb "$SRC/train" | cut -f1)
[ "$(/usr/bin/aws --endpoint-url "$S3_EP" s3 ls --recursive "s3://$BUCKET/ds/train/" | wc -l)" = "$N" ] || die "upload: not $N objects"

conf() { # conf FILE RANK RESHUFFLE CACHE_DIR CACHE_SIZE
	cat >"$1" <<CONF
[source]
url = s3://$BUCKET/ds/train/
endpoint = $S3_EP
[shard]
world_size = 2
ranks = $2
seed = 42
reshuffle = $3
[cache]
dir = $4
size = $5
CONF
}

# run LABEL RESHUFFLE CACHE_SIZE: both nodes mounted with fresh caches,
# EPOCHS epochs, results appended to $T/LABEL.jsonl; both unmounted (each
# daemon must exit 0).
run() {
	local label=$1 mode=$2 size=$3 pa pb
	conf "$T/$label-a.conf" 0 "$mode" "$T/cache-$label-a" "$size"
	conf "$T/$label-b.conf" 1 "$mode" "$T/cache-$label-b" "$size"
	mount_shardfs "$T/$label-a.conf" "$T/mnt-$label-a" || die "$label: node A did not mount"
	pa=$LAST_PID
	mount_shardfs "$T/$label-b.conf" "$T/mnt-$label-b" || die "$label: node B did not mount"
	pb=$LAST_PID
	$D run --label "$label" --epochs "$EPOCHS" --src "$SRC/train" \
		"A:$T/mnt-$label-a:0" "B:$T/mnt-$label-b:1" >"$T/$label.jsonl" ||
		die "$label: a trainer failed (above)"
	umount_shardfs "$T/mnt-$label-a" "$pa" || die "$label: node A's daemon failed"
	umount_shardfs "$T/mnt-$label-b" "$pb" || die "$label: node B's daemon failed"
	RESULTS+=("$T/$label.jsonl")
	echo "bench-epochs: $label done" >&2
}

RESULTS=()
run global global 4G
run local local 4G
if [ "$SMALL" = 1 ]; then
	# ~60% of the dataset per node, in MiB.
	small=$((total * 6 / 10 / 1048576))M
	run global-60 global "$small"
	run local-60 local "$small"
fi

note="Written by \`make bench\` (\`tests/bench/epochs.sh\`, phase \`epochs\`); do not edit by hand, rerun.
Run of $(date -u '+%Y-%m-%d %H:%M UTC'), shardfs commit \`$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)\`, on a shared 2-core machine (other jobs ran at the same time: files/s are noisy; bytes and hit rates are not), s3rver on 127.0.0.1, one round.

Dataset: $N ImageNet-like files of 80-140 KiB ($total bytes) in one s3rver bucket. Two simulated nodes: two shardfs daemons on the same bucket, each with its own cache dir and mountpoint, \`world_size = 2\`, node A \`ranks = 0\`, node B \`ranks = 1\`, \`seed = 42\`, order shuffle, layout strided, prefetch at its defaults. Runs \`global\` and \`local\`: cache \`size = 4G\` (the whole dataset fits); \`global-60\` and \`local-60\`: cache \`size = ${small:-}\` per node (~60% of the dataset). Each run starts with empty caches. In each epoch both nodes' trainers run at once, each opening, reading whole and closing every file of \`.shardfs/epoch-E/rank-R.order\` in order from \`epoch-E/rank-R/\` (every file's bytes compared with the source); the next epoch starts when both are done.

Columns, per node and epoch (deltas of the node's \`.shardfs/stats\` from the end of its previous epoch, or the mount, to the end of this one):
- **backend MB**: \`shardfs_backend_bytes_total\`; **from backend**: that ÷ the bytes the trainer read in the epoch.
- **expected (plans)**: the bytes of the node's epoch files it had not read in an earlier epoch ÷ the epoch's bytes, from the order files: what an unlimited cache must fetch. **expected 1-(1-1/W)^k cached**: the cached share docs/DESIGN.md §5 predicts for \`global\` (W = 2: 0, .5, .75; for \`local\`, 1 from epoch 1 on); from-backend should be about 1 minus it.
- **file hit rate**: files served without a backend read ÷ files read, counted as 1 - \`shardfs_backend_requests_total\` ÷ files read (every file is below \`chunk_size\`, 8 MiB, so a fetched file is one GET).
- **chunk hit rate**: \`shardfs_cache_hits_total\` ÷ (hits + \`shardfs_cache_misses_total\`). These count chunk lookups: a hit is a chunk found in the disk cache *or already in memory*, so a file the prefetcher fetched ahead of the reader in this very epoch counts as a hit although its bytes came from the backend; it measures how well the reader is hidden from the backend, not how much the cache saves. The file hit rate above is the cache's figure.
- **prefetch hits**: \`shardfs_prefetch_hits_total\` (opens of files the prefetcher had asked for).
- **files/s**: files read ÷ the trainer's wall time for the epoch.

In the \`-60\` runs the expected columns are still those of an unlimited cache: the gap is what the evictions cost. The summary's "expected" is 1, 0.5, 0.25 for \`global\` (a node's share of new items, (1-1/W)^k) and 1, 0, 0 for \`local\`, both nodes together.

Near the end of an epoch the prefetcher walks into the next epoch's order, so a few of epoch E+1's files are fetched (and counted) in epoch E: the last epoch's row includes some of epoch $EPOCHS's head, and global's epoch E row is slightly above its share, E+1's slightly below."
$D report "$OUT" "${RESULTS[@]}" --note "$note" || die "report"
ok "epochs bench"
finish
