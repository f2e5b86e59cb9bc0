#!/usr/bin/env bash
# Never a wrong byte, never a hang (docs/RELIABILITY.md): shardfs reads
# s3rver through chaos_proxy.py, which breaks replies the ways real stores,
# proxies and networks do, and every byte read through the mount is
# compared with the source (readcheck.py).
#
# Covered: one pass per fault type (503, reset, bodies cut short with
# honest and dishonest framing, Content-Length short and long,
# Content-Range early, late, missing, with a wrong total or with junk, a
# reply without its ETag, stalls in
# headers and body, a trickle, surplus bytes on a kept-alive connection,
# a bit flipped in a whole-object reply, a 200 to a ranged request), each
# at 25% of object GETs: 0 wrong bytes, 0 EIO (retries absorb the faults),
# every file keeps its size (stalls and trickles at 10%). A mixed pass at
# 10% over more than 3,000
# reads with 8 readers, cache on and off: 0 wrong bytes, every EIO logged
# with its key. A second, well-formed reply after a real one (in the same
# write, right after, 5 ms later) is never read as the next request's
# answer, even by a request for the same range. A server that never answers gives EIO within the read
# deadline, not a hang, and .shardfs/stats answers while 16 reads wait on
# it. Listings whose continuation token repeats or whose pages repeat end
# with an error; one that never repeats itself ends at its memory or time
# bound, naming it, its memory near the bound. Timings are reported, never asserted, except as bounds
# that tell a slow answer from a hang.
SUITE=faults
. "$(dirname "$0")/lib.sh"
. "$HERE/s3/s3rver.sh"

s3_suite_start bkt

# --- data: small files (whole-object reads) and medium ones (ranges) ----------
SRC=$T/src
/usr/bin/python3 - "$SRC" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(99)
for sub, n, lo, hi in (("s", 300, 1, 120 << 10), ("m", 12, 2 << 20, 3 << 20)):
    os.makedirs(os.path.join(root, sub), exist_ok=True)
    for i in range(n):
        with open(os.path.join(root, sub, "%03d.bin" % i), "wb") as f:
            f.write(rnd.randbytes(rnd.randint(lo, hi)))
PY
check "upload the dataset" aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/"

# --- the proxy --------------------------------------------------------------------
CP_LOG=$T/chaos.log
/usr/bin/python3 "$HERE/s3/chaos_proxy.py" "$T/chaos.port" "$CP_LOG" "$S3_PORT" \
	2>"$T/chaos.err" &
PIDS+=("$!")
for _ in $(seq 100); do [ -s "$T/chaos.port" ] && break; sleep 0.1; done
EP=http://127.0.0.1:$(cat "$T/chaos.port")
# chaos FAULTS RATE [STALL]: what the proxy breaks from now on.
chaos() {
	curl -sf "$EP/__chaos/set?faults=$1&rate=$2&stall=${3:-4}" >/dev/null
}
injected() { curl -sf "$EP/__chaos/stats"; }

chaos "" 0
"$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$EP" -o "$T/m.tsv" \
	>/dev/null 2>"$T/manifest.err"
check "manifest through the proxy" test "$(tail -n +2 "$T/m.tsv" | wc -l)" -eq 312

# conf FILE CACHE(on|off): short deadlines, so a stall costs a second,
# not half a minute.
conf() {
	local f=$1 cache=$2
	{
		echo "[source]"
		echo "url = s3://$BUCKET/ds/"
		echo "endpoint = $EP"
		echo "manifest = $T/m.tsv"
		echo "connect_timeout_ms = 1000"
		echo "request_timeout_ms = 1000"
		echo "read_timeout_ms = ${READ_TIMEOUT_MS:-8000}"
		echo "retries = 8"
		echo "[cache]"
		if [ "$cache" = on ]; then
			echo "dir = $T/cache.$RANDOM$RANDOM"
			echo "size = 2G"
			echo "chunk_size = 1M"
		else
			echo "enabled = false"
		fi
	} >"$f"
}

M=$T/mnt
C=$T/c.conf
TOTAL_READS=0
TOTAL_WRONG=0
TOTAL_EIO=0

# pass NAME CACHE SUBDIR ROUNDS EXPECT_EIO(0|any): mounts, reads SUBDIR of
# the dataset ROUNDS times (a fresh mount each round, so every read
# reaches the daemon) with 8 readers, and checks the outcome.
pass() {
	local name=$1 cache=$2 sub=$3 rounds=$4 eio_ok=$5 r out wrong eio errs reads
	local allwrong=0 alleio=0 allerr=0 allreads=0 missing=0 key t0=$SECONDS
	for r in $(seq "$rounds"); do
		local c=$cache
		[ "$cache" = both ] && { [ $((r % 2)) -eq 1 ] && c=off || c=on; }
		conf "$C" "$c"
		if ! mount_shardfs "$C" "$M"; then
			fail "$name: mount (round $r)"
			return
		fi
		out=$(/usr/bin/python3 "$HERE/readcheck.py" "$M/rank-0/$sub" "$SRC/$sub" 8)
		reads=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["reads"])')
		wrong=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["wrong"]))')
		eio=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["eio"]))')
		errs=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["errors"]))')
		if [ "$wrong" -gt 0 ] || [ "$errs" -gt 0 ]; then
			echo "$out" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); [print("#   ", w) for w in (d["wrong"] + d["errors"])[:5]]'
		fi
		# Every EIO a reader saw is in the daemon's log with its key.
		for key in $(echo "$out" | /usr/bin/python3 -c 'import json,sys; [print(k) for k in json.load(sys.stdin)["eio"]]'); do
			[ "$sub" = . ] || key=$sub/$key
			grep -qF "s3://$BUCKET/ds/$key" "$LAST_LOG" || missing=$((missing + 1))
		done
		umount_shardfs "$M" || fail "$name: unmount (round $r)"
		allreads=$((allreads + reads))
		allwrong=$((allwrong + wrong))
		alleio=$((alleio + eio))
		allerr=$((allerr + errs))
	done
	TOTAL_READS=$((TOTAL_READS + allreads))
	TOTAL_WRONG=$((TOTAL_WRONG + allwrong))
	TOTAL_EIO=$((TOTAL_EIO + alleio))
	echo "# $name: $allreads reads in $((SECONDS - t0)) s, injected $(injected), $allwrong wrong, $alleio EIO, $allerr other errors"
	check "$name: 0 wrong bytes in $allreads reads" test "$allwrong" -eq 0
	check "$name: no error but EIO" test "$allerr" -eq 0
	if [ "$eio_ok" = 0 ]; then
		check "$name: no EIO (retries absorb the faults)" test "$alleio" -eq 0
	fi
	check "$name: every EIO is logged with its key" test "$missing" -eq 0
}

# --- one pass per fault, the disk cache on and off in turn ------------------------
# (STRESS=1: both for every fault). A stall costs a second or two of a
# reader's time, so those come at a lower rate.
i=0
for f in 503 reset short_honest short_dishonest cl_short cl_long cr_early \
	cr_late cr_missing cr_total cr_junk no_etag stall_headers stall_body \
	trickle surplus ignore_range; do
	i=$((i + 1))
	case $f in stall_* | trickle) chaos "$f" 0.10 ;; *) chaos "$f" 0.25 ;; esac
	if [ -n "${STRESS:-}" ]; then
		pass "$f" both . 2 0
	elif [ $((i % 2)) -eq 0 ]; then
		pass "$f" on . 1 0
	else
		pass "$f" off . 1 0
	fi
done
# A flipped bit is caught only where the store gives a checksum of what
# was read: whole objects under a single-part ETag (their MD5).
chaos flip 0.25
pass flip both s 2 0

# --- mixed, 10%, more than 3,000 reads ---------------------------------------------
chaos 503,reset,short_honest,short_dishonest,cl_short,cl_long,cr_early,cr_late,cr_missing,cr_total,cr_junk,no_etag,stall_headers,stall_body,trickle,surplus,ignore_range 0.10
pass mixed both . 10 any

chaos "" 0
echo "# all passes: $TOTAL_READS reads, $TOTAL_WRONG wrong, $TOTAL_EIO EIO"
check "mixed: over 3,000 reads in all passes" test "$TOTAL_READS" -ge 3000

# --- a second, well-formed reply after the real one --------------------------------
# A store or proxy that answers a request twice leaves a complete reply
# (same ETag, same Content-Range, a body of zeros) on the kept-alive
# connection: in the same write as the real one, in a write right after
# it, or 5 ms later. Four readers of one 40 MiB file, in four passes of
# disjoint ranges (strayreaders.py says why), read each 1 MiB
# range twice (O_DIRECT: every read reaches the daemon; cache off: every
# read is a ranged GET), the second time once the proxy has sent the
# stray reply of the first (strayreaders.py), so the stray reply is on
# its connection, and names the very range asked for again, whatever the
# machine's load: a connection with anything on it must never be reused.
# (A stray reply still on its way when the next request goes out is the
# window HTTP_REUSE_AFTER_MS narrows; see backends/http.h.)
mkdir -p "$T/big"
head -c $((40 << 20)) /dev/urandom >"$T/big/big.bin"
check "upload the 40 MiB file" aws_s3 cp "$T/big/big.bin" "s3://$BUCKET/big/big.bin"
chaos "" 0
"$SHARDFS" manifest "s3://$BUCKET/big/" --endpoint "$EP" -o "$T/big.tsv" \
	>/dev/null 2>&1
for f in extra_now extra_next extra_late; do
	cat >"$C" <<EOF
[source]
url = s3://$BUCKET/big/
endpoint = $EP
manifest = $T/big.tsv
connect_timeout_ms = 1000
request_timeout_ms = 1000
read_timeout_ms = 8000
retries = 8
[cache]
enabled = false
[prefetch]
files = 0
EOF
	mount_shardfs "$C" "$M" || { fail "$f: mount"; continue; }
	chaos "$f" 0.25
	out=$(/usr/bin/python3 "$HERE/strayreaders.py" "$M/rank-0/big.bin" \
		"$T/big/big.bin" 4 $((1 << 20)) "$EP/__chaos/strays" 2>"$T/extra.err")
	wrong=$(echo "$out" | sed -n 's/.* wrong \([0-9]*\) .*/\1/p')
	errs=$(echo "$out" | sed -n 's/.* errors \([0-9]*\)$/\1/p')
	wrong=${wrong:-1} errs=${errs:-1}
	echo "# $f: 4 readers of 40 MiB, each range read twice, injected $(injected): $out"
	[ "$errs" -eq 0 ] || sed 's/^/#   /' "$T/extra.err"
	chaos "" 0
	check "$f: a stray reply is never read as the next request's answer (0 wrong of 320 reads)" \
		test "$wrong" -eq 0
	check "$f: and no read fails (the connection is dropped, not the read)" test "$errs" -eq 0
	check "$f: the stray bytes are logged as such" grep -q "answers twice" "$LAST_LOG"
	umount_shardfs "$M" || fail "$f: unmount"
done

# --- one read() against a silent server ends within read_timeout_ms ---------------
# After a failed read-ahead the kernel asks again for its first page; a
# range that has just failed fails again at once (cache/fetch_fail.h), so
# the read() does not wait out the deadline twice (before: 2 x
# read_timeout_ms, or read_timeout_ms plus a 1 s probe). One 64 KiB
# read() of each of four uncached files, cache off and on,
# read_timeout_ms = 1500: each EIO within 1.6 x read_timeout_ms (2400 ms:
# a bound that tells one deadline from a deadline and a probe).
for cache in off on; do
	READ_TIMEOUT_MS=1500 conf "$C" "$cache"
	mount_shardfs "$C" "$M" || { fail "read bound (cache $cache): mount"; continue; }
	chaos stall_headers 1 60
	out=$(timeout 120 /usr/bin/python3 "$HERE/timedread.py" "$M"/rank-0/s/04[0-3].bin)
	chaos "" 0
	echo "# silent server, cache $cache: one read() each: $(echo $out)"
	check "read bound (cache $cache): every read() fails with EIO" \
		test "$(echo "$out" | grep -c '^eio ')" -eq 4
	check "read bound (cache $cache): each within 1.6 x read_timeout_ms (2400 ms)" \
		test "$(echo "$out" | awk '$2 >= 2400' | wc -l)" -eq 0
	check "read bound (cache $cache): the reads that failed at once are logged" \
		grep -q "failed .* ms ago" "$LAST_LOG"
	umount_shardfs "$M" || fail "read bound (cache $cache): unmount"
done

# --- a server that never answers: EIO within the deadline ---------------------------
READ_TIMEOUT_MS=5000 conf "$C" off
mount_shardfs "$C" "$M" || fail "mount (silent server)"
chaos stall_headers 1 60
t0=$(date +%s%N)
timeout 120 cat "$M/rank-0/s/007.bin" >/dev/null 2>"$T/cat.err"
rc=$?
took_ms=$((($(date +%s%N) - t0) / 1000000))
echo "# silent server: the read failed after $took_ms ms (read_timeout_ms = 5000)"
check "silent server: the read fails with EIO" grep -q "Input/output error" "$T/cat.err"
check "silent server: it is not a hang (took $took_ms ms; bound 60 s)" \
	test "$took_ms" -lt 60000 -a $rc -ne 124
check "silent server: one error line for the failed read" \
	test "$(grep -c 's/007.bin: GET failed after' "$LAST_LOG")" -eq 1

# --- 16 waiting reads do not block the control files ------------------------------
pids=()
for i in $(seq -w 10 25); do cat "$M/rank-0/s/0$i.bin" >/dev/null 2>&1 & pids+=($!); done
sleep 1
if timeout 30 cat "$M/.shardfs/stats" >"$T/stats.txt"; then
	running=0
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
	echo "# stats answered while $running of 16 reads still waited"
	check ".shardfs/stats answers while reads wait on a silent server" test "$running" -gt 0
else
	fail ".shardfs/stats answers while reads wait on a silent server" "timed out"
fi
for p in "${pids[@]}"; do wait "$p"; done
chaos "" 0
check "silent server: reads succeed once it answers again" cmp -s "$M/rank-0/s/030.bin" "$SRC/s/030.bin"
check "unmount (silent server)" umount_shardfs "$M"

# --- listings that never end --------------------------------------------------------
for f in list_loop list_spin; do
	chaos "$f" 1
	timeout 120 "$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$EP" -o "$T/loop.tsv" \
		>/dev/null 2>"$T/loop.err"
	rc=$?
	check "$f: the listing ends with an error (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
	check "$f: the error says the server repeats itself" grep -q "repeats" "$T/loop.err"
done
chaos "" 0

# A listing that never repeats itself (a new token and new names on every
# page, list_endless) is ended by its bounds only: the memory its objects
# hold ([source] list_memory, --list-memory) and its time
# (list_timeout_ms, --list-timeout-ms). Each must end it with an error
# naming the bound, the memory staying near the bound (peak RSS compared
# with a normal listing's, with a generous margin), long before the
# 60 s that tells an end from none.
# peak CMD...: prints CMD's exit status and peak RSS (KiB).
peak() {
	/usr/bin/python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
read -r rc base_kb < <(peak "$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$EP" \
	-o "$T/normal.tsv" 2>/dev/null)
chaos list_endless 1
read -r rc kb < <(timeout 60 bash -c "$(declare -f peak); peak '$SHARDFS' manifest \
	's3://$BUCKET/ds/' --endpoint '$EP' --list-memory 4M -o '$T/endless.tsv'" 2>"$T/endless.err")
echo "# list_endless, --list-memory 4M: exit ${rc:-none}, peak RSS ${kb:-?} KiB (a normal listing: $base_kb KiB)"
check "list_endless: the listing ends with an error once its objects hold 4 MiB" test "${rc:-124}" -eq 1
check "list_endless: the error names list_memory and how to raise it" \
	grep -q "hold more than \[source\] list_memory = 4194304 bytes; giving up (.*raise list_memory (shardfs manifest: --list-memory)" "$T/endless.err"
if ldd "$SHARDFS" 2>/dev/null | grep -Eq 'lib(asan|tsan)'; then
	# Their quarantine and shadow memory keep freed memory resident.
	ok "list_endless: peak RSS not compared under a sanitizer"
else
	check "list_endless: memory stays near the bound (peak under a normal listing's + 2 x 4 MiB + 32 MiB)" \
		test "${kb:-999999999}" -lt $((base_kb + 8192 + 32768))
fi
read -r rc kb < <(timeout 60 bash -c "$(declare -f peak); peak '$SHARDFS' manifest \
	's3://$BUCKET/ds/' --endpoint '$EP' --list-timeout-ms 2000 --list-memory 1T \
	-o '$T/endless.tsv'" 2>"$T/endless.err")
echo "# list_endless, --list-timeout-ms 2000: exit ${rc:-none}, peak RSS ${kb:-?} KiB"
check "list_endless: the listing ends with an error after list_timeout_ms" test "${rc:-124}" -eq 1
check "list_endless: the error names list_timeout_ms and how to raise it" \
	grep -q "still listing after \[source\] list_timeout_ms = 2000 ms (.*raise list_timeout_ms (shardfs manifest: --list-timeout-ms)" "$T/endless.err"
{
	echo "[source]"
	echo "url = s3://$BUCKET/ds/"
	echo "endpoint = $EP"
	echo "list_memory = 4M"
	echo "[cache]"
	echo "enabled = false"
} >"$C"
if mount_shardfs "$C" "$M" 2>/dev/null; then
	fail "list_endless: a mount that lists fails at start"
	umount_shardfs "$M"
else
	ok "list_endless: a mount that lists fails at start"
fi
check "list_endless: the mount's error names [source] list_memory" \
	grep -q "hold more than \[source\] list_memory = 4194304 bytes" "$LAST_LOG"
chaos "" 0

finish
