#!/usr/bin/env bash
# Hedged reads (issue 12, point 7; prefetch.hedge): s3rver behind the
# counting proxy (countproxy.py), which delays every request by 5 ms (a
# store with first-byte latency, so the engine has a distribution of read
# times) and holds the first GET of one object until the test releases it
# (one reply far slower than the others, as far as shardfs knows: for
# ever).
#
# Covered, each on a fresh mount and cache: a reader reading the rank's
# files in order gets every byte right and is done while the held GET is
# still held, and the mount counts one hedge issued and won (a: prefetch
# off, the reader's own read; b: prefetch on, the held GET is a prefetch
# the reader then joins); the proxy saw the object asked for twice. With
# prefetch.hedge = false (c) the reader waits for the held GET: still not
# done 3 s after it was held (far beyond any hedge threshold here), no
# hedge counted; released, it finishes with the right bytes. No pass or
# fail depends on time but for the bounded waits (60 s).
SUITE=hedge
. "$(dirname "$0")/lib.sh"
. "$HERE/s3/s3rver.sh"

s3_suite_start bkt

# --- data: 60 files of 4 to 32 KiB, read in key order ----------------------
SRC=$T/src
/usr/bin/python3 - "$SRC" <<'PY'
import os, random, sys
rnd = random.Random(12)
os.makedirs(os.path.join(sys.argv[1], "f"))
for i in range(60):
    with open(os.path.join(sys.argv[1], "f", "%03d.bin" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.randint(4096, 32768)))
PY
check "upload the dataset" aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/"
HELD=f/045.bin

# stat_now MNT NAME: a value from the mount's .shardfs/stats.
stat_now() { awk -v n="shardfs_$2" '$1 == n {v = $2} END {print v == "" ? "?" : v}' "$1/.shardfs/stats"; }

# read_order MNT OUT: reads every file of rank 0 in its order, appending
# "sha256  key" lines to OUT; touches OUT.done when finished.
read_order() {
	local mnt=$1 out=$2 k start
	start=$(date +%s.%N)
	(cd "$mnt/rank-0" && while IFS= read -r k; do sha256sum -- "$k"; done <"$mnt/.shardfs/rank-0.order") >"$out"
	echo "$start $(date +%s.%N)" | awk '{printf "%.2f", $2 - $1}' >"$out.secs"
	touch "$out.done"
}

# wait_file FILE SECONDS: true once FILE exists.
wait_file() {
	local n=$(($2 * 10))
	while [ $n -gt 0 ]; do [ -e "$1" ] && return 0; sleep 0.1; n=$((n - 1)); done
	return 1
}

# held_count LOG: GETs of the held object the proxy answered.
held_count() { grep -c "^GET /$BUCKET/ds/$HELD " "$1"; }

(cd "$SRC/f" && sha256sum -- *.bin | sed 's,  ,  f/,') >"$T/src.sha"

# phase NAME PREFETCH_FILES HEDGE: a proxy holding $HELD, a mount through
# it with its own cache, reading the rank in order in the background.
phase() {
	local n=$1 files=$2 hedge=$3
	/usr/bin/python3 "$HERE/countproxy.py" --upstream "127.0.0.1:$S3_PORT" \
		--log "$T/$n.requests" --port-file "$T/$n.port" --delay-ms 5 \
		--hold "/ds/$HELD" --release "$T/$n.release" 2>"$T/$n.proxy.err" &
	PIDS+=("$!")
	for _ in $(seq 100); do [ -s "$T/$n.port" ] && break; sleep 0.1; done
	cat >"$T/$n.conf" <<CONF
[source]
url = s3://$BUCKET/ds/
endpoint = http://127.0.0.1:$(cat "$T/$n.port")
# The held GET stays held (no stall timeout, no retry) until released.
request_timeout_ms = 120000
read_timeout_ms = 240000
[shard]
order = none
[cache]
dir = $T/$n.cache
[prefetch]
files = $files
hedge = $hedge
CONF
	mount_shardfs "$T/$n.conf" "$T/$n.mnt" || return 1
	PID_OF[$n]=$LAST_PID
	read_order "$T/$n.mnt" "$T/$n.sha" &
	READER_OF[$n]=$!
}
declare -A PID_OF READER_OF

# finish_phase NAME: releases the held GET, waits for the reader and for
# the backend to be idle, checks the bytes, unmounts.
finish_phase() {
	local n=$1
	touch "$T/$n.release"
	wait "${READER_OF[$n]}"
	for _ in $(seq 600); do [ "$(stat_now "$T/$n.mnt" backend_inflight)" = 0 ] && break; sleep 0.1; done
	check "$n: every byte of the 60 files is the source's" cmp -s "$T/$n.sha" "$T/src.sha"
	check "$n: the held GET was answered too, once released ($(held_count "$T/$n.requests") GETs of $HELD)" \
		test "$(held_count "$T/$n.requests")" -ge 1
	check "$n: unmounts" umount_shardfs "$T/$n.mnt" "${PID_OF[$n]}"
}

# --- a. prefetch off: the reader's own read is hedged ------------------------
if check "a: mounts (prefetch.files = 0, hedge = true)" phase a 0 true; then
	check "a: $HELD is the 46th file of the order" \
		test "$(sed -n 46p "$T/a.mnt/.shardfs/rank-0.order")" = "$HELD"
	check "a: the reader finished while the GET of $HELD was held" wait_file "$T/a.sha.done" 60
	echo "# a: 60 files read in $(cat "$T/a.sha.secs") s; the held GET was still held"
	check "a: the held GET is still held (the proxy answered $(held_count "$T/a.requests") GET of $HELD: the hedge's)" \
		test "$(held_count "$T/a.requests")" -eq 1
	check "a: one hedge issued ($(stat_now "$T/a.mnt" hedges_issued_total))" \
		test "$(stat_now "$T/a.mnt" hedges_issued_total)" -ge 1
	check "a: one hedge won ($(stat_now "$T/a.mnt" hedges_won_total))" \
		test "$(stat_now "$T/a.mnt" hedges_won_total)" -ge 1
	check "a: no read failed ($(stat_now "$T/a.mnt" read_errors_total))" \
		test "$(stat_now "$T/a.mnt" read_errors_total)" = 0
	finish_phase a
fi

# --- b. prefetch on: the held GET is a prefetch the reader joins -------------
if check "b: mounts (prefetch.files = 32, hedge = true)" phase b 32 true; then
	check "b: the reader finished while the GET of $HELD was held" wait_file "$T/b.sha.done" 60
	echo "# b: 60 files read in $(cat "$T/b.sha.secs") s; the held GET was still held"
	check "b: the held GET is still held ($(held_count "$T/b.requests") GET of $HELD answered)" \
		test "$(held_count "$T/b.requests")" -eq 1
	check "b: a hedge issued and won ($(stat_now "$T/b.mnt" hedges_issued_total), $(stat_now "$T/b.mnt" hedges_won_total))" \
		test "$(stat_now "$T/b.mnt" hedges_won_total)" -ge 1
	check "b: no read failed" test "$(stat_now "$T/b.mnt" read_errors_total)" = 0
	finish_phase b
fi

# --- c. hedge = false: the reader waits for the held GET ---------------------
if check "c: mounts (prefetch.files = 0, hedge = false)" phase c 0 false; then
	for _ in $(seq 600); do grep -q "^[0-9a-f]*  $HELD\$" "$T/c.sha" 2>/dev/null && break; [ "$(wc -l <"$T/c.sha")" -ge 45 ] && break; sleep 0.1; done
	sleep 3
	check "c: the reader is still waiting for $HELD 3 s later ($(wc -l <"$T/c.sha") files read)" \
		test ! -e "$T/c.sha.done" -a "$(wc -l <"$T/c.sha")" -eq 45
	check "c: no hedge issued ($(stat_now "$T/c.mnt" hedges_issued_total))" \
		test "$(stat_now "$T/c.mnt" hedges_issued_total)" = 0
	touch "$T/c.release"
	check "c: released, the reader finishes" wait_file "$T/c.sha.done" 60
	echo "# c: 60 files read in $(cat "$T/c.sha.secs") s, 3 s of it waiting for the held GET"
	check "c: one GET of $HELD in all" test "$(held_count "$T/c.requests")" -eq 1
	finish_phase c
fi

finish
