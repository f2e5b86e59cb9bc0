#!/usr/bin/env bash
# Crash and corruption suite for the cache directory (docs/RELIABILITY.md,
# "The cache directory"), over a posix source and a warm cache:
#
# - index.mdb truncated (to 0, to half, to one page), its meta pages and
#   its branch and leaf pages damaged (corrupt_mdb.py), or overwritten with
#   garbage: `cache stat|verify|clear`, `warm`, and a mount with a full
#   read all survive (no exit by a signal), reads are byte-identical, and
#   the message names index.mdb;
# - index.mdb truncated while a mount serves from it: the daemon survives
#   and reads stay correct;
# - permissions: the cache is 0700/0600 after warm and mount, another user
#   cannot read a blob, and an old world-readable cache is tightened;
# - owners.lock held by another process: commands give up with a message
#   naming it instead of waiting forever;
# - a warm cache on a read-only bind mount serves every read with no
#   backend request.
SUITE=corrupt
. "$(dirname "$0")/lib.sh"

RO=$T/ro
corrupt_cleanup() {
	if grep -qs " $RO " /proc/mounts; then umount -l "$RO" 2>/dev/null || true; fi
}
trap 'corrupt_cleanup; cleanup' EXIT

SRC=$T/src
make_dataset "$SRC" 60
head -c $((3 << 20)) /dev/urandom >"$SRC/big.bin"
head -c $((700 << 10)) /dev/urandom >"$SRC/mid.bin"

conf() { # conf FILE CACHEDIR
	cat >"$1" <<EOF
[source]
url = $SRC
[cache]
dir = $2
size = 1G
EOF
}
stat_of() { # stat_of MNT NAME: a counter from .shardfs/stats
	awk -v n="shardfs_$2" '$1 == n {print $2}' "$1/.shardfs/stats"
}
# not_signal RC: the command ended by itself, not by a signal.
not_signal() { [ "$1" -lt 128 ]; }
# bounded CMD...: CMD under a 120 s timeout, its output in $T/out and
# $T/err (a damaged index once made `cache verify` loop, printing).
bounded() { timeout 120 "$@" >"$T/out" 2>"$T/err"; }

W=$T/warm
C=$T/c.conf
conf "$C" "$W"
check "warm a cache" bounded "$SHARDFS" warm "$C" -q
CD=$T/cache
conf "$C" "$CD"
M=$T/mnt

# --- 1. damaged index.mdb: every command survives ---------------------------
modes=(trunc0 trunc-mid trunc-page meta0 meta-both meta-root branch-hdr
	leaf-hdr leaf-ptrs garbage)
damage() { # damage MODE: a fresh copy of the warm cache, damaged
	rm -rf "$CD"
	cp -a "$W" "$CD"
	/usr/bin/python3 "$HERE/corrupt_mdb.py" "$CD/index.mdb" "$1" >/dev/null
}
for m in "${modes[@]}"; do
	# trunc0 is an empty file, which LMDB initialises: nothing to name.
	named=1
	[ $m = trunc0 ] && named=0
	for a in stat verify; do
		damage $m
		rc=0
		timeout 60 "$SHARDFS" cache $a "$CD" >"$T/out" 2>"$T/err" || rc=$?
		if not_signal $rc && [ $rc -ne 124 ]; then
			ok "$m: cache $a exits $rc"
		else
			fail "$m: cache $a" "exit $rc: $(head -3 "$T/err")"
		fi
		if [ $named = 1 ]; then
			check "$m: cache $a names index.mdb" grep -q "index.mdb is damaged" "$T/err"
		fi
	done

	damage $m
	rc=0
	timeout 60 "$SHARDFS" cache clear "$CD" >"$T/out" 2>"$T/err" || rc=$?
	check "$m: cache clear exits 0" test $rc -eq 0
	rc=0
	timeout 60 "$SHARDFS" cache stat "$CD" >"$T/out" 2>"$T/err" || rc=$?
	check "$m: cache stat after clear: 0 entries" \
		grep -qx 'entries 0' "$T/out"
	check "$m: clear removed every blob" \
		test "$(find "$CD/blobs" -type f | wc -l)" -eq 0

	damage $m
	rc=0
	timeout 120 "$SHARDFS" warm "$C" -q 2>"$T/err" || rc=$?
	check "$m: warm exits 0" test $rc -eq 0
	if [ $named = 1 ]; then
		check "$m: warm names index.mdb" grep -q "index.mdb is damaged" "$T/err"
	fi
	check "$m: verify after warm" bounded "$SHARDFS" cache verify "$CD"

	damage $m
	if mount_shardfs "$C" "$M"; then
		check "$m: mount reads byte-identical" diff -r "$M/rank-0" "$SRC"
		check "$m: no read errors" test "$(stat_of "$M" read_errors_total)" -eq 0
		rc=0
		umount_shardfs "$M" || rc=$?
		check "$m: daemon exits 0" test $rc -eq 0
		if [ $named = 1 ]; then
			check "$m: mount log names index.mdb" grep -q "index.mdb is damaged" "$LAST_LOG"
		fi
	else
		fail "$m: mount"
	fi
done

# --- 2. truncated while a mount serves ---------------------------------------
rm -rf "$CD"
cp -a "$W" "$CD"
if mount_shardfs "$C" "$M"; then
	pid=$LAST_PID
	# Read a third: served from the cache, so the daemon maps the index.
	find "$M/rank-0/train" -type f | sort | head -50 | xargs cat >/dev/null
	truncate -s 8192 "$CD/index.mdb"
	check "truncated while serving: reads byte-identical" diff -r "$M/rank-0" "$SRC"
	check "truncated while serving: the daemon lives" kill -0 "$pid"
	check "truncated while serving: stats answer" test -n "$(stat_of "$M" reads_total)"
	check "truncated while serving: no read errors" test "$(stat_of "$M" read_errors_total)" -eq 0
	check "truncated while serving: logged, naming index.mdb" \
		grep -q "index.mdb is damaged (SIGBUS" "$LAST_LOG"
	rc=0
	umount_shardfs "$M" || rc=$?
	check "truncated while serving: daemon exits 0" test $rc -eq 0
	rc=0
	bounded "$SHARDFS" warm "$C" -q || rc=$?
	check "truncated while serving: the next warm starts afresh" test $rc -eq 0
	check "... and verifies" bounded "$SHARDFS" cache verify "$CD"
else
	fail "truncated while serving: mount"
fi

# --- 3. permissions -----------------------------------------------------------
chmod 755 "$T" # others may reach the cache dir: only its own mode stops them
rm -rf "$CD"
bounded "$SHARDFS" warm "$C" -q
if mount_shardfs "$C" "$M"; then
	cat "$M/rank-0/big.bin" >/dev/null
	umount_shardfs "$M"
fi
check "new cache: nothing readable by others" test -z "$(find "$CD" -perm /077)"
BLOB=$(find "$CD/blobs" -type f | head -1)
check "new cache: has a blob" test -n "$BLOB"
if setpriv --reuid=nobody --regid=nogroup --clear-groups cat "$BLOB" >/dev/null 2>&1; then
	fail "new cache: user nobody reads a blob"
else
	ok "new cache: user nobody cannot read a blob"
fi
if setpriv --reuid=nobody --regid=nogroup --clear-groups \
	flock -n "$CD/owners.lock" true 2>/dev/null; then
	fail "new cache: user nobody can lock owners.lock"
else
	ok "new cache: user nobody cannot lock owners.lock"
fi
(umask 0; chmod -R go+rwX "$CD")
bounded "$SHARDFS" cache stat "$CD"
check "old world-readable cache: tightened" test -z "$(find "$CD" -perm /077)"
check "old world-readable cache: said so" grep -q "readable by other users" "$T/err"

# --- 4. owners.lock held by someone else --------------------------------------
# One process holds it (flock(1) would leave its command running).
/usr/bin/python3 -c 'import fcntl, sys, time
f = open(sys.argv[1])
fcntl.flock(f, fcntl.LOCK_EX)
time.sleep(300)' "$CD/owners.lock" >/dev/null 2>&1 &
HOLDER=$!
PIDS+=("$HOLDER")
sleep 0.5
for cmd in "cache stat $CD" "warm $C -q"; do
	rc=0
	# shellcheck disable=SC2086
	timeout 60 "$SHARDFS" $cmd >/dev/null 2>"$T/err" || rc=$?
	check "owners.lock held: '${cmd%% /*}' gives up (exit $rc)" \
		test $rc -ne 0 -a $rc -ne 124 -a $rc -lt 128
	check "owners.lock held: '${cmd%% /*}' names the lock" grep -q "owners.lock" "$T/err"
done
rc=0
timeout 60 "$SHARDFS" mount "$C" "$M" -f >/dev/null 2>"$T/err" || rc=$?
check "owners.lock held: mount gives up (exit $rc)" test $rc -eq 1
check "owners.lock held: mount names the lock" grep -q "owners.lock" "$T/err"
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null

# --- 5. a read-only cache ------------------------------------------------------
rm -rf "$CD"
cp -a "$W" "$CD"
mkdir -p "$RO"
if mount --bind "$CD" "$RO" && mount -o remount,bind,ro "$RO"; then
	conf "$T/ro.conf" "$RO"
	if mount_shardfs "$T/ro.conf" "$M"; then
		check "read-only cache: reads byte-identical" diff -r "$M/rank-0" "$SRC"
		check "read-only cache: 0 backend reads" \
			test "$(stat_of "$M" backend_requests_total)" -eq 0
		check "read-only cache: said so" grep -q "is read-only" "$LAST_LOG"
		umount_shardfs "$M"
	else
		fail "read-only cache: mount"
	fi
	rc=0
	bounded "$SHARDFS" cache verify "$RO" || rc=$?
	check "read-only cache: verify" test $rc -eq 0
	umount "$RO"
else
	echo "skip - read-only cache: cannot make a read-only bind mount here"
fi

finish
