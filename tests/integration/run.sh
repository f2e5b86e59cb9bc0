#!/usr/bin/env bash
# Runs the integration suites (test_*.sh), SUITE_JOBS at a time (default 2),
# each under a timeout (SUITE_TIMEOUT s, default 600), and prints the
# totals as a closing "integration: N passed, N failed" line.
#
# Each suite has its own temp dir, free ports (free_port.py) and servers,
# so two can share the machine. A suite that cannot (it measures memory
# or time, or changes something machine-wide) says so with a line
# "# exclusive: WHY" and runs alone, before the others.
#
# The output of suites that run side by side never interleaves: each
# suite's goes to a file and is printed whole when it ends, under
# "== NAME" and over "# time NAME: S s" (its wall time). With one suite
# at a time (SUITE_JOBS=1, or ONLY= selects one) it is shown as it comes.
# A suite counts as failed if it ends without its "NAME: N passed, N
# failed" line, exits non-zero with 0 failed, or printed "command not
# found" (a command it needs is not installed: add it to
# scripts/install-deps.sh).
#
#   ONLY=TEXT       only the suites whose file name contains TEXT (or
#                   any of several TEXTs, space-separated)
#   SUITE_JOBS=N    suites at a time (default 2)
#   SUITE_TIMEOUT=S each suite's bound (default 600)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${SHARDFS:?SHARDFS must point at the shardfs binary}"
export SHARDFS
JOBS=${SUITE_JOBS:-2}
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || {
	echo "run.sh: SUITE_JOBS must be a number >= 1, not '$JOBS'" >&2
	exit 2
}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-600}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-suites.XXXXXX")
# Ports the suites' free_port.py handed out during this run: never twice,
# so a server restarted on its own port never finds another suite's there.
export SHARDFS_PORTS_FILE=$WORK/ports
: >"$SHARDFS_PORTS_FILE"

# The longest suites first (measured two at a time on 2 cores: 110 s down
# to 15 s), so the last ones to end are short and both job slots stay
# busy to the end; the rest in name order. A suite missing here still
# runs, in name order. Exclusive suites go before all others: one that
# comes later waits for the running ones to end, a slot idle meanwhile.
LONG_FIRST="test_faults test_gcs test_cache_gcs test_cache test_daemon
test_records_s3 test_gcs_creds test_s3 test_corrupt test_reload test_slurm
test_nfs test_posix test_cache_nfs test_status test_hedge test_twonode"

suites=()
for n in $LONG_FIRST; do
	[ -f "$HERE/$n.sh" ] && suites+=("$HERE/$n.sh")
done
for t in "$HERE"/test_*.sh; do
	[[ " $(echo $LONG_FIRST) " == *" $(basename "$t" .sh) "* ]] && continue
	suites+=("$t")
done
ordered=()
for t in "${suites[@]}"; do
	grep -q '^# exclusive' "$t" && ordered+=("$t")
done
for t in "${suites[@]}"; do
	grep -q '^# exclusive' "$t" || ordered+=("$t")
done
suites=("${ordered[@]}")
selected=()
for t in "${suites[@]}"; do
	if [ -n "${ONLY:-}" ]; then
		keep=0
		for o in $ONLY; do [[ "$(basename "$t")" == *"$o"* ]] && keep=1; done
		[ "$keep" -eq 1 ] || continue
	fi
	selected+=("$t")
done
[ "${#selected[@]}" -eq 1 ] && JOBS=1

passed=0
failed=0
declare -A NAME_OF=() START_OF=() # running suites, by PID

secs_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}'; }

# report PID RC: the suite's output (unless already shown), its time,
# and its counts added to the totals.
report() {
	local pid=$1 rc=$2 name=${NAME_OF[$1]} out="$WORK/${NAME_OF[$1]}.out"
	local line p f
	[ "$JOBS" -gt 1 ] && { echo "== $name"; cat "$out"; }
	[ "$rc" -eq 124 ] && echo "FAIL - $name timed out after $SUITE_TIMEOUT s (SUITE_TIMEOUT)"
	echo "# time $name: $(secs_since "${START_OF[$pid]}") s"
	line=$(grep -E '^[a-z_0-9-]+: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -1)
	if [ -z "$line" ]; then
		echo "FAIL - $name ended without a result line (exit $rc)"
		failed=$((failed + 1))
	else
		p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/')
		f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/')
		passed=$((passed + p))
		failed=$((failed + f))
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			echo "FAIL - $name exited $rc"
			failed=$((failed + 1))
		fi
	fi
	if grep -qE ': (command )?not found$' "$out"; then
		echo "FAIL - $name: a command it runs is not installed (add it to scripts/install-deps.sh):"
		grep -E ': (command )?not found$' "$out" | sort -u | head -5 | sed 's/^/#   /'
		failed=$((failed + 1))
	fi
	unset "NAME_OF[$pid]" "START_OF[$pid]"
}

# start SUITE: runs it in the background under its timeout.
start() {
	local t=$1 name out
	name=$(basename "$t")
	out="$WORK/$name.out"
	if [ "$JOBS" -gt 1 ]; then
		timeout -k 10 "$SUITE_TIMEOUT" bash "$t" >"$out" 2>&1 &
	else
		echo "== $name"
		timeout -k 10 "$SUITE_TIMEOUT" bash "$t" > >(tee "$out") 2>&1 &
	fi
	NAME_OF[$!]=$name
	START_OF[$!]=$EPOCHREALTIME
}

# wait_one: waits for any running suite to end and reports it.
wait_one() {
	local pid rc
	while :; do
		rc=0
		wait -n -p pid "${!NAME_OF[@]}" || rc=$?
		[ -n "${pid:-}" ] && [ -n "${NAME_OF[$pid]+x}" ] && break
	done
	# tee (SUITE_JOBS=1) may still be writing the last lines.
	[ "$JOBS" -eq 1 ] && wait 2>/dev/null
	report "$pid" "$rc"
}

# Interrupted: each suite's timeout passes the signal on, and the suite's
# own trap unmounts and stops what it started.
stop_all() {
	local pid
	for pid in "${!NAME_OF[@]}"; do kill -TERM "$pid" 2>/dev/null; done
	wait
	rm -rf "$WORK"
	exit 130
}
trap stop_all INT TERM

run_start=$EPOCHREALTIME
for t in "${selected[@]}"; do
	if grep -q '^# exclusive' "$t"; then
		while [ "${#NAME_OF[@]}" -gt 0 ]; do wait_one; done
		start "$t"
		wait_one
		continue
	fi
	while [ "${#NAME_OF[@]}" -ge "$JOBS" ]; do wait_one; done
	start "$t"
done
while [ "${#NAME_OF[@]}" -gt 0 ]; do wait_one; done
rm -rf "$WORK"
echo "# time integration: $(secs_since "$run_start") s, ${#selected[@]} suites, $JOBS at a time"
echo "integration: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
