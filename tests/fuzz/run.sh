#!/usr/bin/env bash
# Runs every libFuzzer harness built in DIR (build/fuzz/fuzz_*) for SECONDS
# each, from its committed seeds (tests/fuzz/corpus/NAME) plus what earlier
# runs found (DIR/corpus/NAME, never committed), and prints one line per
# harness: "fuzz NAME: N execs, K findings". A finding (crash, leak,
# timeout, out of memory) is saved under DIR/artifacts/NAME/ with the log
# beside it; reproduce one with `DIR/fuzz_NAME ARTIFACT`. Exits non-zero if
# any harness found anything.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: run.sh BUILD_DIR SECONDS}
secs=${2:?usage: run.sh BUILD_DIR SECONDS}
found=0
for bin in "$dir"/fuzz_*; do
	[ -x "$bin" ] && [ -f "$bin" ] || continue
	name=${bin##*/fuzz_}
	work="$dir/corpus/$name"
	art="$dir/artifacts/$name"
	log="$dir/$name.log"
	mkdir -p "$work" "$art"
	before=$(find "$art" -type f | wc -l)
	# -close_fd_mask=2: the parsers log every malformed input to stderr;
	# libFuzzer keeps its own copy for its stats and sanitizer reports.
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-close_fd_mask=2 -print_final_stats=1 \
		-artifact_prefix="$art/" "$work" "$HERE/corpus/$name" \
		>"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	n=$(( $(find "$art" -type f | wc -l) - before ))
	[ "$rc" -ne 0 ] && [ "$n" -eq 0 ] && n=1
	echo "fuzz $name: ${execs:-0} execs, $n findings"
	if [ "$n" -ne 0 ]; then
		found=1
		echo "  log: $log"
		find "$art" -type f -newer "$work" -printf '  artifact: %p\n' 2>/dev/null
		grep -m1 -E 'ERROR|fuzz check failed|runtime error' "$log" | sed 's/^/  /'
	fi
done
exit $found
