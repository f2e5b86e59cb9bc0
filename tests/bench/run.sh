#!/usr/bin/env bash
# make bench: every benchmark. Not part of make check. About 30 minutes on
# 2 cores. BENCH_PHASES (comma list of scale, cache, peers, latency, gcs,
# records, epochs, nfs; default all) runs a subset, BENCH_LATENCIES (ms,
# default 0,20,50) the latency phases at fewer delays, e.g.
#   BENCH_PHASES=latency BENCH_LATENCIES=20 make bench
# (more knobs at the top of bench.py).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PHASES=",${BENCH_PHASES:-scale,cache,peers,latency,gcs,records,epochs,nfs},"
for p in ${PHASES//,/ }; do
	case $p in scale | cache | peers | latency | gcs | records | epochs | nfs) ;;
	*) echo "run.sh: unknown phase '$p' in BENCH_PHASES (scale, cache, peers, latency, gcs, records, epochs, nfs)" >&2; exit 2 ;;
	esac
done
want() { [[ $PHASES == *",$1,"* ]]; }
if want scale; then "$HERE/scale.sh"; fi
if want cache; then "$HERE/cache.sh"; fi
# Reads through shardfs, s3fs, rclone, raw curl and local disk on one s3rver,
# without (peers) and with (latency) a delay before every request; writes
# docs/BENCHMARKS.md.
if want peers || want latency; then
	BENCH_PHASES=$(echo "$PHASES" | tr ',' '\n' | grep -xE 'peers|latency' | paste -sd, -) \
		/usr/bin/python3 "$HERE/bench.py"
fi
# The peers phases on the GCS emulator, with raw curl and rclone's GCS
# backend as peers; writes docs/BENCHMARKS-gcs.md.
if want gcs; then /usr/bin/python3 "$HERE/bench_gcs.py"; fi
# Record views (issue 13): a 1M-record index at mount, index build rate,
# a rank's parts read cold vs raw curl; writes docs/BENCHMARKS-records.md.
if want records; then "$HERE/records.sh"; fi
# Epoch views (issue 14): two simulated nodes read 3 epochs under
# reshuffle = global and local; backend bytes and cache hit rates per
# epoch; writes docs/BENCHMARKS-epochs.md.
if want epochs; then "$HERE/epochs.sh"; fi
# nfs:// through libnfs on nfs-ganesha vs raw libnfs, nfs-cp and local disk;
# writes docs/BENCHMARKS-nfs.md.
if want nfs; then "$HERE/nfs.sh"; fi
