#!/usr/bin/env bash
# make bench: every benchmark. Not part of make check.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/scale.sh"
"$HERE/cache.sh"
