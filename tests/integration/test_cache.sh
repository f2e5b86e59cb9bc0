#!/usr/bin/env bash
# The node-local disk cache (docs/DESIGN.md §8) with evidence from the
# server: s3rver (with SOURCE=gcs, as test_cache_gcs.sh runs it, the GCS
# emulator; see source.sh) behind a small counting proxy (countproxy.py)
# that logs every request, so "zero GETs" means the server saw none.
#
# Covered: a remount reads the same data with zero object GETs; warm fills
# what a mount then reads; two daemons on one cache dir at once, then a
# third reusing their chunks; reading three times the budget keeps live
# bytes under it; kill -9 of `shardfs warm` ten times at random moments,
# then byte-identical files and a clean `cache verify`; a corrupted blob is
# detected, refetched and counted; an object replaced upstream is served
# whole from the new manifest and never mixed under the old one; a cache
# on a full tmpfs degrades to uncached reads with a warning, never EIO;
# cache.enabled = false; an unusable cache directory (uncached, warned); a
# background (forked) daemon sharing the directory with other processes;
# the cache CLI. Posix sources are covered by the unit suite
# (check_cache_store) and by the bench (tests/bench/cache.sh).
SUITE=cache
. "$(dirname "$0")/lib.sh"
. "$HERE/source.sh"

TMPFS=$T/tmpfs
cache_cleanup() {
	if grep -qs " $TMPFS " /proc/mounts; then umount -l "$TMPFS" 2>/dev/null || true; fi
}
trap 'cache_cleanup; cleanup' EXIT

# The server behind the counting proxy.
src_suite_start bkt
# Object GETs (not listings) the server answered since the last reset.
gets() { reqlog | grep -c "^GET /$BUCKET/ds/"; }
gets_of() { reqlog | grep -c "^GET /$BUCKET/ds/$1 "; }
reset_gets() { : >"$GETLOG"; }

# --- data: ImageNet-like small files plus a few multi-chunk ones -------------
SRC=$T/src
make_dataset "$SRC" 240
head -c $((9 << 20)) /dev/urandom >"$SRC/big1.bin"
head -c $((17 << 20)) /dev/urandom >"$SRC/big2.bin"
head -c $((3 << 20)) /dev/urandom >"$SRC/mid.bin"
check "upload the dataset" src_upload "$SRC" ds
src_manifest ds/ -o "$T/m1.tsv" >/dev/null 2>"$T/manifest.err"
check "manifest through the proxy" test -s "$T/m1.tsv"
TOTAL=$(find "$SRC" -type f -printf '%s\n' | awk '{s += $1} END {print s}')

# conf FILE CACHEDIR [section.key=value...]: a pinned manifest, so a mount
# makes no listing request: every GET counted is a data GET.
conf() {
	local f=$1 dir=$2; shift 2
	local kv sec
	{
		echo "[source]"
		src_conf ds/
		echo "manifest = ${MANIFEST:-$T/m1.tsv}"
		for sec in shard cache; do
			echo "[$sec]"
			[ $sec = cache ] && echo "dir = $dir"
			for kv in "$@"; do
				case $kv in $sec.*) kv=${kv#$sec.}; echo "${kv%%=*} = ${kv#*=}" ;; esac
			done
		done
	} >"$f"
}
stat_of() { # stat_of MNT NAME: a counter from .shardfs/stats
	awk -v n="shardfs_$2" '$1 == n {print $2}' "$1/.shardfs/stats"
}
same_tree() { diff -r "$1" "$2" >/dev/null 2>"$T/diff.err"; }

M=$T/mnt
C=$T/c.conf

# --- 1. remount: zero GETs -------------------------------------------------------
CD=$T/cache1
conf "$C" "$CD" cache.size=1G
mount_shardfs "$C" "$M" || fail "mount 1"
reset_gets
check "first read: byte-identical" same_tree "$M/rank-0" "$SRC"
g1=$(gets)
check "first read fetched from the server ($g1 GETs)" test "$g1" -gt 0
check "stats count misses and backend bytes" bash -c \
	"test $(stat_of "$M" cache_misses_total) -gt 0 && test $(stat_of "$M" cache_bytes_from_backend_total) -ge $TOTAL"
check "unmount 1" umount_shardfs "$M"
mount_shardfs "$C" "$M" || fail "remount 1"
reset_gets
check "after remount: byte-identical" same_tree "$M/rank-0" "$SRC"
check "after remount: zero GETs at the server (got $(gets))" test "$(gets)" -eq 0
check "after remount: all hits, bytes from cache" bash -c \
	"test $(stat_of "$M" cache_misses_total) -eq 0 && test $(stat_of "$M" cache_hits_total) -gt 0 && test $(stat_of "$M" cache_bytes_from_cache_total) -ge $TOTAL && test $(stat_of "$M" backend_requests_total) -eq 0"
check "unmount 1b" umount_shardfs "$M"
"$SHARDFS" cache stat "$CD" >"$T/stat.out"
check "cache stat: entries, inline and blob counts, live bytes" bash -c \
	"grep -q '^entries [1-9]' '$T/stat.out' && grep -q '^inline_entries [1-9]' '$T/stat.out' && grep -q '^blob_entries [1-9]' '$T/stat.out' && grep -q '^live_bytes $TOTAL\$' '$T/stat.out' && grep -q '^budget_bytes 1073741824\$' '$T/stat.out'"
check "cache verify: clean" "$SHARDFS" cache verify "$CD"

# Without -f the daemon forks after opening the cache: the child must use
# an LMDB environment of its own while other processes open the directory.
M2=$T/mnt-bg
mkdir -p "$M2"
MOUNTS+=("$(realpath "$M2")")
"$SHARDFS" mount "$C" "$M2" 2>"$T/bg.err"
rc=$?
dp=$(pgrep -f "shardfs mount $C $M2" | head -1)
[ -n "$dp" ] && PIDS+=("$dp")
reset_gets
check "background mount: byte-identical from the cache" bash -c \
	"test $rc -eq 0 && diff -r '$M2/rank-0' '$SRC' >/dev/null"
check "background mount: verify while it serves" "$SHARDFS" cache verify "$CD"
check "background mount: zero GETs (got $(gets))" test "$(gets)" -eq 0
fusermount3 -u "$M2"
for _ in $(seq 100); do [ -n "$dp" ] && kill -0 "$dp" 2>/dev/null || break; sleep 0.1; done
check "background daemon exited" bash -c "[ -n '$dp' ] && ! kill -0 '$dp' 2>/dev/null"

# --- 2. warm, then a mount reads without fetching ------------------------------
conf "$C" "$T/cache2" shard.world_size=3 shard.ranks=1
"$SHARDFS" warm "$C" >"$T/warm.out" 2>"$T/warm.err"
check "warm exits 0" test $? -eq 0
check "warm prints a summary, no carriage returns off a terminal" bash -c \
	"grep -q '^warm: [0-9]* files' '$T/warm.err' && ! grep -q \$'\\r' '$T/warm.err'"
script -qfec "$SHARDFS warm $C --rank 0-2" /dev/null >"$T/warm.tty" 2>&1
check "warm on a terminal draws a bar with bytes, files, rate and ETA" bash -c \
	"grep -q \$'\\r\\[' '$T/warm.tty' && grep -q 'files' '$T/warm.tty' && grep -q '/s' '$T/warm.tty' && grep -q 'ETA' '$T/warm.tty'"
"$SHARDFS" cache clear "$T/cache2" >/dev/null
check "cache clear empties it" bash -c \
	"'$SHARDFS' cache stat '$T/cache2' | grep -q '^entries 0\$'"
reset_gets
"$SHARDFS" warm "$C" --rank 1 2>/dev/null
w=$(gets)
mount_shardfs "$C" "$M" || fail "mount after warm"
reset_gets
check "after warm: rank-1 reads byte-identical" \
	/usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC" --partial
check "after warm ($w GETs): the mount made zero GETs (got $(gets))" test "$(gets)" -eq 0
check "unmount 2" umount_shardfs "$M"
"$SHARDFS" warm "$C" --rank 7 >/dev/null 2>&1
check "warm --rank out of range exits 2" test $? -eq 2

# --- 3. two daemons on one cache dir at once, a third reuses their chunks ------
CD=$T/cache3
conf "$T/a.conf" "$CD" shard.world_size=2 shard.ranks=0
conf "$T/b.conf" "$CD" shard.world_size=2 shard.ranks=1
conf "$T/all.conf" "$CD"
mount_shardfs "$T/a.conf" "$T/ma" || fail "mount A"
PA=$LAST_PID
mount_shardfs "$T/b.conf" "$T/mb" || fail "mount B"
PB=$LAST_PID
reset_gets
( /usr/bin/python3 "$HERE/verify_mount.py" "$T/ma" "$SRC" --partial >"$T/va.out" ) &
ra=$!
( /usr/bin/python3 "$HERE/verify_mount.py" "$T/mb" "$SRC" --partial >"$T/vb.out" ) &
rb=$!
wait $ra; sa=$?
wait $rb; sb=$?
check "two daemons read their ranks at once: byte-identical" test $sa -eq 0 -a $sb -eq 0
# Reading stats waits until a daemon has indexed what it fetched.
cat "$T/ma/.shardfs/stats" "$T/mb/.shardfs/stats" >"$T/ab.stats"
mount_shardfs "$T/all.conf" "$M" || fail "mount C"
reset_gets
check "a third daemon (all ranks) reads byte-identical" same_tree "$M/rank-0" "$SRC"
g=$(gets)
check "... with zero GETs: it reused both daemons' chunks (got $g)" test "$g" -eq 0
if [ "$g" -ne 0 ]; then
	reqlog | grep "^GET /$BUCKET/ds/" | sed 's/^/#   /'
	grep -E '^shardfs_(cache_|direct|hedge|backend_(requests|errors)|kernel_push)' "$T/ab.stats" | sed 's/^/#   A,B: /'
fi
check "unmount C" umount_shardfs "$M"
check "unmount B" umount_shardfs "$T/mb" "$PB"
check "unmount A" umount_shardfs "$T/ma" "$PA"
check "shared cache verifies clean" "$SHARDFS" cache verify "$CD"

# --- 4. three times the budget ---------------------------------------------------
CD=$T/cache4
BUDGET=$((TOTAL / 3))
conf "$C" "$CD" cache.size=$BUDGET cache.chunk_size=1M
mount_shardfs "$C" "$M" || fail "mount 4"
over=0
for f in big1.bin big2.bin mid.bin; do
	cmp -s "$M/rank-0/$f" "$SRC/$f" || over=$((over + 1000))
	live=$(stat_of "$M" cache_live_bytes)
	[ "$live" -le "$BUDGET" ] || over=$((over + 1))
done
check "files larger than the budget read byte-identical, live <= budget each time" test $over -eq 0
check "all the data (3x the budget) byte-identical" same_tree "$M/rank-0" "$SRC"
live=$(stat_of "$M" cache_live_bytes)
check "live bytes $live <= budget $BUDGET" test "$live" -le "$BUDGET"
check "evictions counted" test "$(stat_of "$M" cache_evictions_total)" -gt 0
check "unmount 4" umount_shardfs "$M"
check "cache stat agrees: live <= budget" bash -c \
	"test \$('$SHARDFS' cache stat '$CD' | awk '\$1 == \"live_bytes\" {print \$2}') -le $BUDGET"
check "budget cache verifies clean" "$SHARDFS" cache verify "$CD"

# --- 5. kill -9 during warm, ten times ------------------------------------------
CD=$T/cache5
conf "$C" "$CD" cache.chunk_size=1M
# Until warm has been killed mid-run ten times (at most 40 tries): a run
# that finished before its kill empties the cache, so the next has work,
# and halves the longest wait before a kill: how long a warm runs is the
# machine's (a fast one finished before most kills at up to 0.6 s).
killed=0
tries=0
hi=0.6
while [ $killed -lt 10 ] && [ $tries -lt 40 ]; do
	tries=$((tries + 1))
	# The delay is drawn before warm starts: Python's start-up would
	# add to it otherwise.
	delay=$(/usr/bin/python3 -c "import random; print(random.uniform($hi / 30, $hi))")
	"$SHARDFS" warm "$C" -q 2>>"$T/warmkill.err" &
	wp=$!
	sleep "$delay"
	if kill -9 "$wp" 2>/dev/null; then
		killed=$((killed + 1))
		wait "$wp" 2>/dev/null
	else
		wait "$wp" 2>/dev/null
		"$SHARDFS" cache clear "$CD" >/dev/null
		hi=$(/usr/bin/python3 -c "print(max($hi / 2, 0.01))")
	fi
done
check "warm was killed mid-run 10 times ($tries tries)" test $killed -eq 10
check "cache verify is clean right after the kills" "$SHARDFS" cache verify "$CD"
mount_shardfs "$C" "$M" || fail "mount after kills"
check "after the kills: every file byte-identical" same_tree "$M/rank-0" "$SRC"
check "unmount 5" umount_shardfs "$M"
check "cache verify is clean after the remount" "$SHARDFS" cache verify "$CD"
check "no tmp files left once a process opened the cache alone" bash -c \
	"test -z \"\$(ls -A '$CD/blobs/tmp')\""

# --- 6. a corrupted blob ---------------------------------------------------------
CD=$T/cache1
blob=$(find "$CD/blobs" -mindepth 2 -type f ! -path '*/blobs/tmp/*' | head -1)
size=$(stat -c %s "$blob")
printf 'X' | dd of="$blob" bs=1 seek=$((size / 2)) conv=notrunc status=none
"$SHARDFS" cache verify "$CD" >"$T/verify.out"
check "cache verify finds the corrupted blob (exit 1, listed)" bash -c \
	"test $? -eq 1 && grep -q 'crc mismatch' '$T/verify.out'"
conf "$C" "$CD" cache.size=1G
mount_shardfs "$C" "$M" || fail "mount 6"
reset_gets
check "corrupted blob: every file still byte-identical" same_tree "$M/rank-0" "$SRC"
check "corrupted blob: detected and counted" test "$(stat_of "$M" cache_crc_failures_total)" -eq 1
# The dropped chunk is fetched again (a chunk larger than 2 MiB may be split
# into several ranged GETs), so: at least one GET,
check "corrupted blob: refetched from the server ($(gets) GETs of one object)" bash -c \
	"test $(gets) -ge 1 && test $(reqlog | grep '^GET ' | cut -d' ' -f2 | sort -u | wc -l) -eq 1"
check "corrupted blob: logged" grep -q 'failed its check' "$LAST_LOG"
check "unmount 6" umount_shardfs "$M"
check "clean again after the refetch" "$SHARDFS" cache verify "$CD"

# --- 7. an object replaced upstream ---------------------------------------------
CD=$T/cache7
conf "$C" "$CD"
mount_shardfs "$C" "$M" || fail "mount 7"
head -c $((1 << 20)) "$M/rank-0/big2.bin" >/dev/null # caches chunk 0 only
check "unmount 7" umount_shardfs "$M"
cp "$SRC/big2.bin" "$T/big2.old"
head -c $((17 << 20)) /dev/urandom >"$SRC/big2.bin"
src_upload_file "$SRC/big2.bin" ds/big2.bin
MANIFEST=$T/m2.tsv
src_manifest ds/ -o "$T/m2.tsv" >/dev/null 2>&1
check "the new manifest has a new ETag (GCS: generation) for big2.bin" bash -c \
	"! cmp -s <(grep '^big2.bin' '$T/m1.tsv') <(grep '^big2.bin' '$T/m2.tsv')"
conf "$C" "$CD"
mount_shardfs "$C" "$M" || fail "mount 7 new manifest"
reset_gets
check "new manifest: the new bytes, whole" cmp -s "$M/rank-0/big2.bin" "$SRC/big2.bin"
check "new manifest: fetched from the server" test "$(gets_of big2.bin)" -gt 0
check "unmount 7b" umount_shardfs "$M"
MANIFEST=$T/m1.tsv
conf "$C" "$CD"
mount_shardfs "$C" "$M" || fail "mount 7 old manifest"
cat "$M/rank-0/big2.bin" >"$T/big2.read" 2>"$T/cat.err"
rc=$?
check "old manifest: the read fails (EIO) instead of mixing versions" bash -c \
	"test $rc -ne 0 && grep -q 'Input/output error' '$T/cat.err'"
check "old manifest: what was returned is a prefix of the old object only" bash -c \
	"cmp -s '$T/big2.read' <(head -c \$(stat -c %s '$T/big2.read') '$T/big2.old')"
check "unmount 7c" umount_shardfs "$M"
cp "$T/big2.old" "$SRC/big2.bin" # m1 and SRC agree again for the tests below
src_upload_file "$SRC/big2.bin" ds/big2.bin
src_manifest ds/ -o "$T/m1.tsv" >/dev/null 2>&1

# --- 8. a full filesystem ----------------------------------------------------------
mkdir -p "$TMPFS"
if mount -t tmpfs -o size=2m tmpfs "$TMPFS" 2>"$T/tmpfs.err"; then
	conf "$C" "$TMPFS/cache" cache.size=1G
	mount_shardfs "$C" "$M" || fail "mount 8"
	check "full cache filesystem: every file byte-identical, no EIO" same_tree "$M/rank-0" "$SRC"
	check "full cache filesystem: store failures counted" test "$(stat_of "$M" cache_store_failures_total)" -gt 0
	check "full cache filesystem: read errors 0" test "$(stat_of "$M" read_errors_total)" -eq 0
	check "full cache filesystem: a warning is logged" bash -c \
		"test \$(grep -c 'No space left on device; serving uncached' '$LAST_LOG') -ge 1"
	check "unmount 8" umount_shardfs "$M"
	check "a full cache still verifies clean" "$SHARDFS" cache verify "$TMPFS/cache"
	umount "$TMPFS"
else
	fail "mount a 2 MiB tmpfs" "$(cat "$T/tmpfs.err")"
fi

# --- 9. cache.enabled = false ---------------------------------------------------------
conf "$C" "$T/cache9" cache.enabled=false
mount_shardfs "$C" "$M" || fail "mount 9"
reset_gets
cat "$M/rank-0/mid.bin" >/dev/null
cat "$M/rank-0/mid.bin" >/dev/null
check "cache.enabled = false: stats say so" test "$(stat_of "$M" cache_enabled)" -eq 0
check "cache.enabled = false: no cache directory is made" test ! -e "$T/cache9"
check "unmount 9" umount_shardfs "$M"
mount_shardfs "$C" "$M" || fail "remount 9"
reset_gets
cat "$M/rank-0/mid.bin" >/dev/null
check "cache.enabled = false: a remount fetches again" test "$(gets_of mid.bin)" -gt 0
check "unmount 9b" umount_shardfs "$M"

# A cache directory that cannot be made: the mount reads uncached.
: >"$T/not-a-dir"
conf "$C" "$T/not-a-dir/cache"
mount_shardfs "$C" "$M" || fail "mount with an unusable cache dir"
check "unusable cache dir: the mount serves byte-identical files" same_tree "$M/rank-0" "$SRC"
check "unusable cache dir: a warning names it" grep -q "cache $T/not-a-dir/cache cannot be used" "$LAST_LOG"
check "unusable cache dir: stats say uncached" test "$(stat_of "$M" cache_enabled)" -eq 0
check "unmount 9c" umount_shardfs "$M"

# --- 10. CLI -----------------------------------------------------------------------------
"$SHARDFS" cache stat "$T/nonexistent" >/dev/null 2>&1
check "cache stat of a directory without a cache exits 1" test $? -eq 1
"$SHARDFS" cache frob "$T" >/dev/null 2>&1
check "cache with an unknown action exits 2" test $? -eq 2
check "help warm and help cache" bash -c \
	"'$SHARDFS' help warm | grep -q 'shardfs warm CONFIG' && '$SHARDFS' help cache | grep -q 'shardfs cache stat'"

finish
