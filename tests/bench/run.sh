#!/usr/bin/env bash
# make bench: every benchmark. Not part of make check.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/scale.sh"
"$HERE/cache.sh"
# Reads through shardfs, s3fs, rclone, raw curl and local disk on one s3rver;
# writes docs/BENCHMARKS.md (about 10 minutes).
/usr/bin/python3 "$HERE/bench.py"
# The same targets and phases on the GCS emulator, with raw curl and rclone's
# GCS backend as peers; writes docs/BENCHMARKS-gcs.md (about 10-20 minutes).
/usr/bin/python3 "$HERE/bench_gcs.py"
