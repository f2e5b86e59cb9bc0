#!/usr/bin/env bash
# make bench: every benchmark. Not part of make check. About 35 minutes on
# 2 cores. BENCH_PHASES (comma list of scale, cache, records, nfs, peers,
# latency, gcs, epochs, transform; default all) runs a subset,
# BENCH_LATENCIES (ms, default 0,20,50) the latency phases at fewer
# delays, e.g.
#   BENCH_PHASES=latency BENCH_LATENCIES=20 make bench
# (more knobs at the top of bench.py and latency.py).
#
# BENCH_QUICK=1: a quick iteration of whatever phases are chosen, on small
# sizes (300 small files, 2 large ones, latency 0 only, one run of each
# nfs/cache figure, a 100,000-record index, 300 JPEGs for the transform
# phase, 1 GiB pre-faulted), writing no docs/BENCHMARKS*.md (its figures
# say nothing about the code); any knob set explicitly still wins. E.g.
# BENCH_QUICK=1 BENCH_PHASES=latency make bench.
# Where the docs go: BENCH_OUT (bench.py), BENCH_GCS_OUT, BENCH_RECORDS_OUT,
# BENCH_EPOCHS_OUT, BENCH_NFS_OUT ("-": none written).
#
# First, once: guest memory is pre-faulted (prefault.py, BENCH_PREFAULT_GIB,
# default 16, 0 skips), so that no phase pays this VM's first touch of a
# page. The phases that feed the targets table of docs/BENCHMARKS.md
# (records, nfs) run before bench.py and leave their figures in a results
# dir of this run (BENCH_RESULTS), which bench.py reads.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ALL=scale,cache,records,nfs,peers,latency,gcs,epochs,transform
PHASES=",${BENCH_PHASES:-$ALL},"
for p in ${PHASES//,/ }; do
	case ",$ALL," in *",$p,"*) ;;
	*) echo "run.sh: unknown phase '$p' in BENCH_PHASES ($ALL)" >&2; exit 2 ;;
	esac
done
want() { [[ $PHASES == *",$1,"* ]]; }

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	export BENCH_SMALL_FILES=${BENCH_SMALL_FILES:-300} BENCH_LARGE_FILES=${BENCH_LARGE_FILES:-2}
	export BENCH_LAT_LARGE_FILES=${BENCH_LAT_LARGE_FILES:-2} BENCH_SLOW_FILES=${BENCH_SLOW_FILES:-50}
	export BENCH_LATENCIES=${BENCH_LATENCIES:-0} BENCH_PREFAULT_GIB=${BENCH_PREFAULT_GIB:-1}
	export BENCH_RECORDS_N=${BENCH_RECORDS_N:-100000} BENCH_RECORDS_OBJECTS=${BENCH_RECORDS_OBJECTS:-8}
	export BENCH_EPOCHS_N=${BENCH_EPOCHS_N:-300} BENCH_EPOCHS_SMALL=${BENCH_EPOCHS_SMALL:-0}
	export BENCH_TRANSFORM_N=${BENCH_TRANSFORM_N:-300}
	export BENCH_OUT=${BENCH_OUT:--} BENCH_GCS_OUT=${BENCH_GCS_OUT:--}
	export BENCH_RECORDS_OUT=${BENCH_RECORDS_OUT:--} BENCH_EPOCHS_OUT=${BENCH_EPOCHS_OUT:--}
	# scale.sh, cache.sh and nfs.sh take N, L, RUNS and OUT (nfs.sh's doc).
	scale_env=(N=100000)
	cache_env=(N="$BENCH_SMALL_FILES" RUNS=1)
	nfs_env=(N="$BENCH_SMALL_FILES" L=1 RUNS=1 OUT="${BENCH_NFS_OUT:--}")
else
	scale_env=() cache_env=() nfs_env=()
	if [ -n "${BENCH_NFS_OUT:-}" ]; then nfs_env=(OUT="$BENCH_NFS_OUT"); fi
fi

own_results=
if [ -z "${BENCH_RESULTS:-}" ]; then
	BENCH_RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-bench-results.XXXXXX")
	own_results=1
fi
export BENCH_RESULTS
trap 'if [ -n "$own_results" ]; then rm -rf "$BENCH_RESULTS"; fi' EXIT

/usr/bin/python3 "$HERE/prefault.py"
if want scale; then env "${scale_env[@]}" "$HERE/scale.sh"; fi
if want cache; then env "${cache_env[@]}" "$HERE/cache.sh"; fi
# Record views (issue 13): a 1M-record index at mount, index build rate,
# a rank's parts read cold vs raw curl fetching the same record extents;
# writes docs/BENCHMARKS-records.md and records.json for the targets.
if want records; then "$HERE/records.sh"; fi
# nfs:// through libnfs on nfs-ganesha vs raw libnfs, nfs-cp and local disk;
# writes docs/BENCHMARKS-nfs.md and nfs.json for the targets.
if want nfs; then env "${nfs_env[@]}" "$HERE/nfs.sh"; fi
# Reads through shardfs, s3fs, rclone, squashfuse_ll, raw curl, a PyTorch
# DataLoader and local disk on one s3rver, without (peers) and with
# (latency) a delay before every request; writes docs/BENCHMARKS.md with
# the targets table of issue 25.
if want peers || want latency; then
	BENCH_PHASES=$(echo "$PHASES" | tr ',' '\n' | grep -xE 'peers|latency' | paste -sd, -) \
		/usr/bin/python3 "$HERE/bench.py"
fi
# The peers phases on the GCS emulator, with raw curl and rclone's GCS
# backend as peers; writes docs/BENCHMARKS-gcs.md.
if want gcs; then /usr/bin/python3 "$HERE/bench_gcs.py"; fi
# Epoch views (issue 14): two simulated nodes read 3 epochs under
# reshuffle = global and local; backend bytes and cache hit rates per
# epoch; writes docs/BENCHMARKS-epochs.md.
if want epochs; then "$HERE/epochs.sh"; fi
# Transforms (issue 27): a PyTorch DataLoader over a [transform]'s outputs
# (Pillow resize to 64x64 PNG in worker mode) vs decoding and resizing in
# the DataLoader itself and vs local PNGs, 3 epochs each; prints its table
# (writes no docs). Its JPEGs stay in BENCH_DATA_DIR between runs.
if want transform; then "$HERE/transform.sh"; fi
