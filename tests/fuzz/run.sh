#!/usr/bin/env bash
# Runs every libFuzzer harness built in DIR (build/fuzz/fuzz_*) for SECONDS
# each, from its committed seeds (tests/fuzz/corpus/NAME) plus what earlier
# runs found (DIR/corpus/NAME, never committed), and prints one line per
# harness: "fuzz NAME: N execs, K findings". A finding (crash, leak,
# timeout, out of memory) is saved under DIR/artifacts/NAME/ with the log
# beside it; reproduce one with `DIR/fuzz_NAME ARTIFACT`. Exits non-zero if
# any harness found anything.
#
# FUZZ_JOBS harnesses run at a time (default 1; make check's fuzz-smoke
# runs 2): each is one process on one core, and its lines are printed
# whole when it ends.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: run.sh BUILD_DIR SECONDS}
secs=${2:?usage: run.sh BUILD_DIR SECONDS}
JOBS=${FUZZ_JOBS:-1}
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || {
	echo "fuzz/run.sh: FUZZ_JOBS must be a number >= 1, not '$JOBS'" >&2
	exit 2
}

# fuzz_one BIN: runs one harness; prints its lines; exit 1 on a finding.
fuzz_one() {
	local bin=$1 name work art log before rc execs n
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
		echo "  log: $log"
		find "$art" -type f -newer "$work" -printf '  artifact: %p\n' 2>/dev/null
		grep -m1 -E 'ERROR|fuzz check failed|runtime error' "$log" | sed 's/^/  /'
		return 1
	fi
	return 0
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-fuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
found=0
running=() # "PID OUTFILE", oldest first
# wait_first: waits for the oldest running harness, prints its lines.
wait_first() {
	local pid=${running[0]% *} out=${running[0]#* }
	wait "$pid" || found=1
	cat "$out"
	running=("${running[@]:1}")
}
i=0
for bin in "$dir"/fuzz_*; do
	[ -x "$bin" ] && [ -f "$bin" ] || continue
	[ "${#running[@]}" -ge "$JOBS" ] && wait_first
	i=$((i + 1))
	fuzz_one "$bin" >"$WORK/$i.out" 2>&1 &
	running+=("$! $WORK/$i.out")
done
while [ "${#running[@]}" -gt 0 ]; do wait_first; done
exit $found
