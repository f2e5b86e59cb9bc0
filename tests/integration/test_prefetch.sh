#!/usr/bin/env bash
# The fetch engine and the prefetcher (docs/DESIGN.md §8) with evidence from
# the server: s3rver (with SOURCE=gcs, as test_prefetch_gcs.sh runs it, the
# GCS emulator; see source.sh) behind the counting proxy (countproxy.py),
# which logs every request with the bytes it answered.
#
# Covered: ten concurrent readers of one cold large file fetch each byte
# once (single-flight); a reader walking rank 0 in its order finds the next
# files fetched before it opens them (prefetch hits) over at most
# prefetch.connections kept-alive connections, and a prefetched file is
# in the page cache when opened (no read request); a reader off the
# order makes the prefetcher back off (depth 0, few prefetches); a
# sequential reader of a large file has chunks fetched ahead of it and a
# growing window, which reaches into the next file of its order; 64
# concurrent readers with prefetch.memory = 64M keep the daemon's peak RSS
# (VmHWM) within 64 MiB + 64 MiB of an idle mount's (not under
# AddressSanitizer, whose quarantine keeps freed memory resident).
# No timing is asserted: a wait for something asynchronous (a prefetch)
# polls for it, up to a bound, and only the outcome counts.
SUITE=prefetch
. "$(dirname "$0")/lib.sh"
. "$HERE/source.sh"

# The server behind the counting proxy.
src_suite_start bkt
reset_gets() { : >"$GETLOG"; }
gets_of() { reqlog | grep -c "^GET /$BUCKET/ds/$1 "; }
# Bytes the server sent for object GETs of one key.
get_bytes_of() {
	reqlog | awk -v p="/$BUCKET/ds/$1" '$1 == "GET" && $2 == p {s += $4} END {print s + 0}'
}

# --- data ----------------------------------------------------------------------
SRC=$T/src
mkdir -p "$SRC/s" "$SRC/m" "$SRC/l"
head -c $((40 << 20)) /dev/urandom >"$SRC/big.bin"
for i in 0 1 2; do head -c $((6 << 20)) /dev/urandom >"$SRC/l/$i.bin"; done
for i in $(seq -w 0 47); do head -c 65536 /dev/urandom >"$SRC/s/$i.bin"; done
for i in $(seq -w 0 63); do head -c $((1 << 20)) /dev/urandom >"$SRC/m/$i.bin"; done
check "upload the dataset" src_upload "$SRC" ds
src_manifest ds/ -o "$T/m.tsv" >/dev/null 2>"$T/manifest.err"
check "manifest through the proxy" test -s "$T/m.tsv"
src_manifest ds/s/ -o "$T/ms.tsv" >/dev/null 2>"$T/manifest.err"
check "manifest of the small files" test -s "$T/ms.tsv"
src_manifest ds/l/ -o "$T/ml.tsv" >/dev/null 2>"$T/manifest.err"
check "manifest of the large files" test -s "$T/ml.tsv"

# conf FILE CACHEDIR [section.key=value...]: pinned manifest, so every GET
# the proxy counts is a data GET.
conf() {
	local f=$1 dir=$2; shift 2
	local kv sec
	{
		echo "[source]"
		src_conf "${PREFIX:-ds/}"
		echo "manifest = ${MANIFEST:-$T/m.tsv}"
		for sec in shard cache prefetch; do
			echo "[$sec]"
			[ $sec = cache ] && echo "dir = $dir" && echo "size = 2G"
			for kv in "$@"; do
				case $kv in $sec.*) kv=${kv#$sec.}; echo "${kv%%=*} = ${kv#*=}" ;; esac
			done
		done
	} >"$f"
}
stat_of() { awk -v n="shardfs_$2" '$1 == n {print $2}' "$1/.shardfs/stats"; }
# wait_for SECONDS CMD...: polls CMD until it succeeds or the bound passes.
wait_for() {
	local n=$(($1 * 10)); shift
	while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.1; n=$((n - 1)); done
	"$@"
}
# A reader that bypasses the page cache, so every read reaches the daemon
# (falls back to a buffered read where O_DIRECT is refused).
direct_read() {
	dd if="$1" of=/dev/null bs=1M iflag=direct status=none 2>/dev/null ||
		cat "$1" >/dev/null
}

M=$T/mnt
C=$T/c.conf
SIZE=$((40 << 20))

# --- a. single-flight: ten readers of one cold large file -----------------------
conf "$C" "$T/cache-a" prefetch.files=0
mount_shardfs "$C" "$M" || fail "mount a"
reset_gets
pids=()
for i in $(seq 10); do direct_read "$M/rank-0/big.bin" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
check "a: ten concurrent readers finish" test $rc -eq 0
check "a: the file is byte-identical" cmp -s "$M/rank-0/big.bin" "$SRC/big.bin"
b=$(get_bytes_of big.bin)
check "a: the server sent each byte once ($b bytes for a $SIZE-byte file, $(gets_of big.bin) GETs)" \
	test "$b" -eq "$SIZE"
echo "# a: singleflight_waits_total $(stat_of "$M" singleflight_waits_total)"
check "a: nothing in flight afterwards" test "$(stat_of "$M" backend_inflight)" -eq 0
check "unmount a" umount_shardfs "$M"

# --- b. order prefetch: a reader that follows rank 0's order ----------------------
# A source of only the small files, so one GET is one whole file and
# positions in rank-0.order are the prefetcher's positions.
PREFIX=ds/s/ MANIFEST=$T/ms.tsv conf "$C" "$T/cache-b" prefetch.files=8 \
	prefetch.connections=4
mount_shardfs "$C" "$M" || fail "mount b"
mapfile -t ORDER <"$M/.shardfs/rank-0.order"
check "b: rank-0.order lists the 48 small files" test "${#ORDER[@]}" -eq 48
reset_gets
ahead_fetched() { # ahead_fetched P: a file after position P, not yet opened, was fetched
	local q
	for q in $(seq $(($1 + 1)) $(($1 + 3))); do
		[ "$q" -lt "${#ORDER[@]}" ] || continue
		[ "$(gets_of "s/${ORDER[$q]}")" -gt 0 ] && return 0
	done
	return 1
}
seen_ahead=0
bad=0
for p in $(seq 0 $((${#ORDER[@]} - 1))); do
	cmp -s "$M/rank-0/${ORDER[$p]}" "$SRC/s/${ORDER[$p]}" || bad=$((bad + 1))
	if [ "$p" -lt 5 ] && wait_for 10 ahead_fetched "$p"; then
		seen_ahead=$((seen_ahead + 1))
	fi
done
check "b: every file byte-identical" test $bad -eq 0
check "b: after opening file p, the server had sent files p+1.. before they were opened ($seen_ahead of 5)" \
	test $seen_ahead -eq 5
hits=$(stat_of "$M" prefetch_hits_total)
check "b: prefetch hits counted ($hits)" test "$hits" -gt 0
# A hedge (a read much slower than the recent ones, re-issued: a loaded
# machine makes some) is a second GET of its file, counted in the stats.
hedges=$(stat_of "$M" hedges_issued_total)
check "b: each small file fetched at most once, but for hedges ($hedges)" \
	test "$(reqlog | grep -c "^GET /$BUCKET/ds/s/")" -le $((48 + hedges))
# Keep-alive: connections are reused, never one per GET. An HTTP
# connection rests HTTP_REUSE_AFTER_MS (20 ms) between two requests, so a
# stray reply shows before it is reused (backends/http.h): over s3:// and
# gs:// more connections than prefetch.connections may be open, each
# serving one request at a time; nfs:// keeps at most that many.
ngets=$(grep -c '^GET ' "$GETLOG")
nconn=$(reqlog | awk '$1 == "GET" {print $5}' | sort -u | wc -l)
if [ "$SOURCE" = nfs ]; then
	check "b: $ngets GETs came over $nconn connections (prefetch.connections = 4)" \
		test "$nconn" -ge 1 -a "$nconn" -le 4
else
	check "b: $ngets GETs came over $nconn connections, reused (not one per GET)" \
		test "$nconn" -ge 1 -a "$nconn" -lt "$ngets"
fi
check "unmount b" umount_shardfs "$M"

# --- b1. a prefetched small file goes into the page cache at its open ----------
# Once the next file of the order is fetched, opening it stores its bytes
# in the kernel's page cache: reading it sends no read request to the
# daemon (reads_total moves only by the reads of the stats file itself,
# measured first: it is a direct-I/O file).
PREFIX=ds/s/ MANIFEST=$T/ms.tsv conf "$C" "$T/cache-b1" prefetch.files=8
mount_shardfs "$C" "$M" || fail "mount b1"
cat "$M/rank-0/${ORDER[0]}" >/dev/null
fetched_idle() {
	[ "$(gets_of "s/${ORDER[1]}")" -gt 0 ] &&
		[ "$(stat_of "$M" backend_inflight)" -eq 0 ]
}
check "b1: file 1 of the order fetched after file 0 was opened" wait_for 10 fetched_idle
r0=$(stat_of "$M" reads_total)
r1=$(stat_of "$M" reads_total)
check "b1: file 1 byte-identical" cmp -s "$M/rank-0/${ORDER[1]}" "$SRC/s/${ORDER[1]}"
r2=$(stat_of "$M" reads_total)
check "b1: reading it sent no read request (reads_total $r0, $r1, $r2: only the stats file's own)" \
	test $((r2 - r1)) -eq $((r1 - r0))
check "unmount b1" umount_shardfs "$M"

# --- b2. a reader off the order: the prefetcher backs off --------------------------
PREFIX=ds/s/ MANIFEST=$T/ms.tsv conf "$C" "$T/cache-b2" prefetch.files=8
mount_shardfs "$C" "$M" || fail "mount b2"
k=0
for _ in $(seq 0 47); do
	cat "$M/rank-0/${ORDER[$k]}" >/dev/null
	k=$(((k + 17) % 48)) # never the next file in the order
done
issued=$(stat_of "$M" prefetch_issued_total)
check "b2: prefetches stay few off the order ($issued <= 4 + 2 + 1 + 48 / 8 + 1)" \
	test "$issued" -le 14
check "b2: depth backed off to 0" test "$(stat_of "$M" prefetch_depth_files)" -eq 0
check "b2: misses counted, hits low ($(stat_of "$M" prefetch_hits_total))" bash -c \
	"test $(stat_of "$M" prefetch_misses_total) -gt 0 && test $(stat_of "$M" prefetch_hits_total) -le 2"
check "unmount b2" umount_shardfs "$M"

# --- c. read-ahead in a large file -------------------------------------------------
conf "$C" "$T/cache-c" prefetch.files=0
mount_shardfs "$C" "$M" || fail "mount c"
reset_gets
dd if="$M/rank-0/big.bin" of="$T/head12" bs=1M count=12 status=none
check "c: what was read is byte-identical" cmp -s "$T/head12" <(head -c $((12 << 20)) "$SRC/big.bin")
# The reader touched chunks 0 and 1 (16 MiB); read-ahead goes further.
ahead_of_reader() { test "$(get_bytes_of big.bin)" -gt $((16 << 20)); }
wait_for 10 ahead_of_reader
check "c: the server sent bytes ahead of the reader ($(get_bytes_of big.bin) > $((16 << 20)))" ahead_of_reader
w=$(stat_of "$M" readahead_window_bytes)
check "c: the window grew past 1 MiB ($w)" test "$w" -gt $((1 << 20))
check "c: prefetched bytes counted" test "$(stat_of "$M" prefetch_bytes_total)" -gt 0
check "c: the whole file byte-identical" cmp -s "$M/rank-0/big.bin" "$SRC/big.bin"
check "unmount c" umount_shardfs "$M"

# --- c2. read-ahead across files: large files read in their order -----------------
# Files of 6 chunks (cache.chunk_size = 1M) and prefetch.files = 1: the
# order prefetcher asks for the first chunk of the next file only. The
# window of a sequential reader reaches past the end of its file, into the
# next one of its order: the server sends more of that file than its first
# chunk before it is opened (before: exactly its first chunk, and the
# reader's pipeline drained at every file's end).
PREFIX=ds/l/ MANIFEST=$T/ml.tsv conf "$C" "$T/cache-c2" prefetch.files=1 \
	cache.chunk_size=1M
mount_shardfs "$C" "$M" || fail "mount c2"
mapfile -t LORDER <"$M/.shardfs/rank-0.order"
check "c2: rank-0.order lists the 3 large files" test "${#LORDER[@]}" -eq 3
reset_gets
dd if="$M/rank-0/${LORDER[0]}" of="$T/l0" bs=1M status=none
check "c2: file 0 byte-identical" cmp -s "$T/l0" "$SRC/l/${LORDER[0]}"
next_ahead() { test "$(get_bytes_of "l/${LORDER[1]}")" -gt $((1 << 20)); }
wait_for 10 next_ahead
check "c2: before file 1 was opened, the server sent more of it than its first chunk ($(get_bytes_of "l/${LORDER[1]}") > $((1 << 20)))" \
	next_ahead
check "c2: file 1 byte-identical" cmp -s "$M/rank-0/${LORDER[1]}" "$SRC/l/${LORDER[1]}"
check "c2: file 2 byte-identical" cmp -s "$M/rank-0/${LORDER[2]}" "$SRC/l/${LORDER[2]}"
check "unmount c2" umount_shardfs "$M"

# --- d. memory: 64 readers, prefetch.memory = 64M -----------------------------------
conf "$C" "$T/cache-d" prefetch.memory=64M prefetch.files=32
mount_shardfs "$C" "$M" || fail "mount d"
PD=$LAST_PID
ls -R "$M/rank-0" >/dev/null
cat "$M/.shardfs/stats" >/dev/null
base=$(awk '/^VmHWM:/ {print $2 * 1024}' "/proc/$PD/status")
# Each reader reads 8 of the 64 one-MiB files, from a different start.
for r in $(seq 0 63); do
	for j in $(seq 0 7); do
		printf '%s/rank-0/m/%02d.bin\n' "$M" $(((r + j * 8) % 64))
	done >"$T/list.$r"
done
seq 0 63 | xargs -P 64 -I{} sh -c \
	'while read -r f; do dd if="$f" of=/dev/null bs=1M iflag=direct status=none 2>/dev/null || cat "$f" >/dev/null; done <"$1"' \
	_ "$T/list.{}"
check "d: 64 readers done, files byte-identical" bash -c \
	"for i in \$(seq -w 0 63); do cmp -s '$M/rank-0/m/'\$i.bin '$SRC/m/'\$i.bin || exit 1; done"
hwm=$(awk '/^VmHWM:/ {print $2 * 1024}' "/proc/$PD/status")
limit=$((base + (64 << 20) + (64 << 20)))
echo "# d: idle VmHWM $base, after $hwm, limit $limit, memory_high_water_bytes $(stat_of "$M" memory_high_water_bytes)"
# Under AddressSanitizer (make SAN=1) freed memory sits in its quarantine
# and RSS says nothing about our buffers; the engine's own count still does.
if ldd "$SHARDFS" 2>/dev/null | grep -Eq 'lib(asan|tsan)'; then
	ok "d: VmHWM not compared under a sanitizer (quarantine, shadow memory)"
else
	check "d: VmHWM $hwm <= idle $base + 64 MiB + 64 MiB" test "$hwm" -le "$limit"
fi
check "d: the engine's high-water mark is within the budget plus reply buffers" \
	test "$(stat_of "$M" memory_high_water_bytes)" -le $(((64 << 20) + (16 << 20)))
check "unmount d" umount_shardfs "$M" "$PD"

finish
