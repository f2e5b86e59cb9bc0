#!/usr/bin/env bash
# Transform bench (issue 27), part of `make bench` (phase "transform"; alone:
# BENCH_PHASES=transform make bench). What a [transform] buys a PyTorch
# trainer that decodes and resizes images in its DataLoader.
#
# BENCH_TRANSFORM_N [2000] JPEGs of a few hundred KB (800x600, transform.py
# make, fixed seeds) are generated once into the bench's data dir
# (BENCH_DATA_DIR [/var/tmp/shardfs-bench]; a rerun reuses them, and the
# local reference PNGs too) and uploaded to one s3rver on 127.0.0.1. Then,
# each on its own mount with a fresh cache dir, world_size 1:
#   transform      a DataLoader over MOUNT/transform-resize64/rank-0/,
#                  [transform resize64] = resize64.py (Pillow decode, 64x64
#                  bilinear, PNG) in worker mode, workers = 2, in the
#                  sandbox; __getitem__ decodes the PNG to a uint8 tensor
#   in-DataLoader  the same DataLoader over MOUNT/rank-0/, its __getitem__
#                  decoding and resizing the JPEG itself
#   local          the same DataLoader as transform over a local directory
#                  of the PNGs resize64.resize() writes run directly
# for BENCH_TRANSFORM_EPOCHS [3] epochs each, in the order of the view's
# rank-0.order (num_workers 2, batch 32). Epoch 1 of both mounts reads cold
# from s3rver. After the transform run its outputs are compared byte for
# byte with the local PNGs, and the transform runs are read from its
# .shardfs/stats. Prints the table (ratios reported, not asserted); writes
# no docs. Exits non-zero if a mount fails, a daemon exits badly, a loader
# fails or an output differs. BENCH_TRANSFORM_PREFETCH_FILES sets both
# mounts' [prefetch] files (0: off), for diagnosis. Only 127.0.0.1 is contacted; everything
# started is stopped by PID.
set -uo pipefail
SUITE=bench-transform
BDIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BDIR/../.." && pwd)
if [ -z "${SHARDFS:-}" ]; then
	nice make -C "$ROOT" --no-print-directory build/shardfs >&2 || exit 1
	SHARDFS=$ROOT/build/shardfs
fi
. "$ROOT/tests/integration/lib.sh"
. "$ROOT/tests/integration/s3/s3rver.sh"
N=${BENCH_TRANSFORM_N:-2000}
EPOCHS=${BENCH_TRANSFORM_EPOCHS:-3}
DATA=${BENCH_DATA_DIR:-/var/tmp/shardfs-bench}
JPG=$DATA/transform-jpeg-$N
PNG=$DATA/transform-png-$N
D=(/usr/bin/python3 "$BDIR/transform.py")
die() { echo "bench-transform: $*" >&2; exit 1; }
say() { echo "bench-transform: $*" >&2; }
now() { date +%s.%N; }
since() { echo "$1" "$(now)" | awk '{ printf "%.1f", $2 - $1 }'; }

# step STAMP WHAT CMD...: runs CMD unless STAMP says an earlier run did.
step() {
	local stamp=$1 what=$2 t
	shift 2
	if [ -e "$stamp" ]; then
		say "$what: kept from an earlier run"
		return 0
	fi
	t=$(now)
	"$@" || die "$what failed"
	say "$what: written in $(since "$t") s"
}
step "$JPG/.done-$N" "$N JPEGs in $JPG" "${D[@]}" make "$JPG" "$N"
step "$PNG/img/.done" "the local PNGs in $PNG" "${D[@]}" local "$JPG/img" "$PNG/img"

s3_suite_start bkt
t=$(now)
aws_s3 cp --recursive "$JPG/img" "s3://$BUCKET/ds/img/" || die "upload"
[ "$(/usr/bin/aws --endpoint-url "$S3_EP" s3 ls --recursive "s3://$BUCKET/ds/img/" | wc -l)" = "$N" ] ||
	die "upload: not $N objects"
jbytes=$(du -sb "$JPG/img" | cut -f1)
say "uploaded $N objects, $jbytes bytes ($(since "$t") s)"

# The transform's code where the sandboxed worker (as nobody) can read it:
# not under $T (0700 under /tmp).
X=$(mktemp -d /var/tmp/shardfs-bench-xf.XXXXXX)
chmod 755 "$X"
mkdir -p "$X/tests/bench" "$X/python"
cp "$BDIR/resize64.py" "$X/tests/bench/"
cp -r "$ROOT/python/shardfs" "$X/python/"
chmod -R a+rX "$X"
trap 'rm -rf "$X"; cleanup' EXIT

# BENCH_TRANSFORM_PREFETCH_FILES (unset: the default) sets both mounts'
# [prefetch] files, for diagnosis: 0 turns the prefetcher off.
PREFETCH=
if [ -n "${BENCH_TRANSFORM_PREFETCH_FILES:-}" ]; then
	PREFETCH="[prefetch]
files = $BENCH_TRANSFORM_PREFETCH_FILES
"
	say "both mounts with [prefetch] files = $BENCH_TRANSFORM_PREFETCH_FILES"
fi
conf() { # conf FILE CACHE_DIR [TRANSFORM_SECTION]
	printf '[source]\nurl = s3://%s/ds/\nendpoint = %s\n[shard]\nworld_size = 1\n[cache]\ndir = %s\nsize = 4G\n%s%s' \
		"$BUCKET" "$S3_EP" "$2" "$PREFETCH" "${3:-}" >"$1"
}

# The transform run.
conf "$T/xf.conf" "$T/cache-xf" "[transform resize64]
command = /usr/bin/python3 $X/tests/bench/resize64.py
mode = worker
workers = 2
suffix = .png
replace_extension = true
"
mount_shardfs "$T/xf.conf" "$T/mnt-xf" || die "the transform mount failed"
pxf=$LAST_PID
XORDER=$T/mnt-xf/.shardfs/transform-resize64/rank-0.order
[ "$(grep -vc $'\tpad$' "$XORDER")" = "$N" ] || die "transform rank-0.order: not $N paths"
cp "$XORDER" "$T/xf.order"
"${D[@]}" load --mode png --root "$T/mnt-xf/transform-resize64/rank-0" --order "$T/xf.order" \
	--epochs "$EPOCHS" --stats "$T/mnt-xf" >"$T/xf.jsonl" || die "the transform loader failed"
grep -E '^shardfs_(transform_runs|cache_derived_runs_total|transform_)' "$T/mnt-xf/.shardfs/stats" >"$T/xf.stats"
"${D[@]}" compare "$T/mnt-xf/transform-resize64/rank-0" "$PNG" "$T/xf.order" >&2 ||
	die "a transform output differs from the local PNG"
umount_shardfs "$T/mnt-xf" "$pxf" || die "the transform mount's daemon failed"
say "transform done"

# The in-DataLoader run: the raw view, decoding and resizing in __getitem__.
conf "$T/raw.conf" "$T/cache-raw"
mount_shardfs "$T/raw.conf" "$T/mnt-raw" || die "the raw mount failed"
praw=$LAST_PID
"${D[@]}" load --mode jpeg --root "$T/mnt-raw/rank-0" --order "$T/mnt-raw/.shardfs/rank-0.order" \
	--epochs "$EPOCHS" --stats "$T/mnt-raw" >"$T/raw.jsonl" || die "the in-DataLoader loader failed"
umount_shardfs "$T/mnt-raw" "$praw" || die "the raw mount's daemon failed"
say "in-DataLoader done"

# Local: the same PNGs, in the transform view's order.
"${D[@]}" load --mode png --root "$PNG" --order "$T/xf.order" --epochs "$EPOCHS" >"$T/local.jsonl" ||
	die "the local loader failed"
say "local done"

/usr/bin/python3 - "$T" "$N" "$jbytes" >"$T/results.json" <<'PY' || die "results"
import json, sys
t, n, jb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rows(name):
    with open("%s/%s.jsonl" % (t, name)) as f:
        return [json.loads(ln) for ln in f if ln.strip()]
def secs(name):
    return [r["seconds"] for r in rows(name)]
stats = {}
with open(t + "/xf.stats") as f:
    for ln in f:
        k, v = ln.split()
        stats[k.split("{")[0]] = int(float(v))  # one transform: its label dropped
json.dump({"n": n, "jpeg_bytes": jb, "transform": secs("xf"), "jpeg": secs("raw"),
           "local": secs("local"), "stats": stats,
           "transform_stats": [r.get("stats", {}) for r in rows("xf")],
           "jpeg_stats": [r.get("stats", {}) for r in rows("raw")]}, sys.stdout)
PY
"${D[@]}" report "$T/results.json" || die "report"
ok "transform bench"
finish
