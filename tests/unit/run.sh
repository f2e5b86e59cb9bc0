#!/usr/bin/env bash
# Runs the unit suites (Check binaries, build/tests/check_*) and the shard
# cross-check, UNIT_JOBS at a time (default 2), and prints the totals as a
# closing "unit: N passed, N failed" line (Check's tests, and the
# cross-check as one).
#
#   run.sh SHARD_DUMP CHECK_BINARY...
#
# Each suite's output is printed whole when it ends, under "== NAME" and
# over "# time NAME: S s" (its wall time), so suites running side by side
# never interleave. Every suite works in its own mkdtemp directory and
# its servers on ports the kernel picks, so two can share the machine. A
# suite that ends without Check's "Checks: N, Failures: F, Errors: E"
# line (a crash, a sanitizer report) counts as one failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
dump=${1:?usage: run.sh SHARD_DUMP CHECK_BINARY...}
shift
JOBS=${UNIT_JOBS:-2}
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || {
	echo "unit/run.sh: UNIT_JOBS must be a number >= 1, not '$JOBS'" >&2
	exit 2
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-unit.XXXXXX")

# The longest first (measured on 2 cores), so the last to end are short.
LONG_FIRST="check_cache_store check_cache_reply check_fetch check_gcs_creds
check_cache_derived check_posix"
jobs_list=()
for n in $LONG_FIRST; do
	for b in "$@"; do [ "${b##*/}" = "$n" ] && jobs_list+=("$b"); done
done
for b in "$@"; do
	[[ " $(echo $LONG_FIRST) " == *" ${b##*/} "* ]] || jobs_list+=("$b")
done
jobs_list+=(shard_xcheck)

passed=0
failed=0
declare -A NAME_OF=() START_OF=()

report() {
	local pid=$1 rc=$2 name=${NAME_OF[$1]} out="$WORK/${NAME_OF[$1]}.out"
	local line n f e
	echo "== $name"
	cat "$out"
	echo "# time $name: $(awk -v a="${START_OF[$pid]}" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}') s"
	if [ "$name" = shard_xcheck ]; then
		if [ "$rc" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
	else
		line=$(grep -E 'Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$out" | tail -1)
		if [ -z "$line" ]; then
			echo "FAIL - $name ended without Check's summary (exit $rc)"
			failed=$((failed + 1))
		else
			n=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
			f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
			e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
			passed=$((passed + n - f - e))
			failed=$((failed + f + e))
			if [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ]; then
				echo "FAIL - $name exited $rc"
				failed=$((failed + 1))
			fi
		fi
	fi
	unset "NAME_OF[$pid]" "START_OF[$pid]"
}

start() {
	local b=$1 name=${1##*/}
	if [ "$b" = shard_xcheck ]; then
		"$HERE/shard_xcheck.py" "$dump" >"$WORK/$name.out" 2>&1 &
	else
		"$b" >"$WORK/$name.out" 2>&1 &
	fi
	NAME_OF[$!]=$name
	START_OF[$!]=$EPOCHREALTIME
}

wait_one() {
	local pid rc
	while :; do
		rc=0
		wait -n -p pid "${!NAME_OF[@]}" || rc=$?
		[ -n "${pid:-}" ] && [ -n "${NAME_OF[$pid]+x}" ] && break
	done
	report "$pid" "$rc"
}

stop_all() {
	local pid
	for pid in "${!NAME_OF[@]}"; do kill -TERM "$pid" 2>/dev/null; done
	wait
	rm -rf "$WORK"
	exit 130
}
trap stop_all INT TERM

run_start=$EPOCHREALTIME
for b in "${jobs_list[@]}"; do
	while [ "${#NAME_OF[@]}" -ge "$JOBS" ]; do wait_one; done
	start "$b"
done
while [ "${#NAME_OF[@]}" -gt 0 ]; do wait_one; done
rm -rf "$WORK"
echo "# time unit: $(awk -v a="$run_start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}') s, ${#jobs_list[@]} suites, $JOBS at a time"
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
