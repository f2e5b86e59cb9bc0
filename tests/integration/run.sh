#!/usr/bin/env bash
# Runs every integration suite (test_*.sh), each under a timeout, and prints
# the totals as a closing "N passed, N failed" line.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${SHARDFS:?SHARDFS must point at the shardfs binary}"
export SHARDFS
passed=0
failed=0
for t in "$HERE"/test_*.sh; do
	[ -n "${ONLY:-}" ] && [[ "$(basename "$t")" != *"$ONLY"* ]] && continue
	echo "== $(basename "$t")"
	out=$(mktemp)
	start=$EPOCHREALTIME
	timeout -k 10 "${SUITE_TIMEOUT:-600}" bash "$t" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	echo "# time $(basename "$t"): $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}') s"
	line=$(grep -E '^[a-z_0-9-]+: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -1)
	if [ -z "$line" ]; then
		echo "FAIL - $(basename "$t") ended without a result line (exit $rc)"
		failed=$((failed + 1))
	else
		p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/')
		f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/')
		passed=$((passed + p))
		failed=$((failed + f))
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			echo "FAIL - $(basename "$t") exited $rc"
			failed=$((failed + 1))
		fi
	fi
	rm -f "$out"
done
echo "integration: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
