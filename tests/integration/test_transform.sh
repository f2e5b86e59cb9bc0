#!/usr/bin/env bash
# [transform NAME] sections through the real binary (issue 27). A
# transform that can run mounts and is logged with its identity; sandbox =
# none is logged as a warning; a command that does not exist, or no disk
# cache, fails the mount naming the section and its line, and nothing is
# mounted; a transform as root is a config error (exit 2) for plan and
# mount alike; with [shard] unit = record it is refused.
#
# The views (docs/DESIGN.md §3, "Transform views"): MOUNT/transform-NAME/
# mirrors rank-R/, epoch-E/ and skip-K/ with renamed files whose bytes are
# the transform's output (every byte read is the output of its object, or
# EIO), and .shardfs/transform-NAME/ their order files; a listing runs
# nothing; a run per object, however many readers and mounts share the
# cache; a failing transform is EIO for its file only and runs again after
# its backoff; kill -9 of the daemon mid-run leaves no partial output; a
# new version runs again; the Pillow resize of generated JPEGs, in process
# and worker mode, gives the bytes the same function gives run directly.
#
# Runs are counted by the transforms themselves: each run appends a line to
# a file in $X (sandbox = none, so that they can write it as nobody).
# Needs root (the transform runs as nobody) and bubblewrap, as
# check_transform does.
SUITE=transform
. "$(dirname "$0")/lib.sh"

SRC=$T/src
make_dataset "$SRC" 10
M=$T/mnt

# conf NAME SECTION-TEXT [CACHE-ENABLED]: a config with one transform.
conf() {
	printf '[source]\nurl = %s\n[cache]\ndir = %s\nenabled = %s\n%b' \
		"$SRC" "$T/cache" "${3:-true}" "$2" >"$T/$1.conf"
}

# mount_fails CONF: mounts in the foreground; sets rc to its exit status
# ("running" if it still runs after 20 s: then it is unmounted).
mount_fails() {
	mkdir -p "$M"
	"$SHARDFS" mount "$1" "$M" -f >/dev/null 2>"$1.err" &
	local pid=$!
	PIDS+=("$pid")
	MOUNTS+=("$(realpath "$M")")
	for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		rc=running
		fusermount3 -u "$M" 2>/dev/null
	else
		rc=0
		wait "$pid" || rc=$?
	fi
}

not_mounted() { ! grep -qs " $(realpath "$M") " /proc/mounts; }

# --- a transform that can run ------------------------------------------------
conf ok '[transform upper]\ncommand = /usr/bin/tr a-z A-Z\nversion = 1\n'
if mount_shardfs "$T/ok.conf" "$M"; then
	check "the mount logs the transform with its command and identity" \
		grep -Eq 'transform upper: /usr/bin/tr a-z A-Z \(process mode, bwrap sandbox, as nobody\), identity [0-9a-f]{64}' "$LAST_LOG"
	check "no sandbox warning with the default sandbox" bash -c \
		"! grep -q 'sandbox = none' '$LAST_LOG'"
	check "the mount serves its files as before" test -d "$M/rank-0"
	check "unmount" umount_shardfs "$M"
else
	fail "mount with a transform"
fi

# --- sandbox = none is logged ------------------------------------------------
conf none '[transform upper]\ncommand = /usr/bin/tr a-z A-Z\nsandbox = none\n'
if mount_shardfs "$T/none.conf" "$M"; then
	check "sandbox = none: a warning naming the transform and its user" \
		grep -q 'warning: transform upper: sandbox = none: it runs as nobody' "$LAST_LOG"
	check "unmount" umount_shardfs "$M"
else
	fail "mount with sandbox = none"
fi

# --- a command that does not exist ------------------------------------------
conf missing '[transform resize]\ncommand = /nonexistent/resize --size 64\n'
mount_fails "$T/missing.conf"
check "a missing command: the mount exits 1 and nothing is mounted (rc $rc)" \
	bash -c "[ $rc = 1 ] && $(declare -f not_mounted); M='$M' not_mounted"
check "a missing command: the error names file:line, the section and the program" \
	grep -q "$T/missing.conf:7: \[transform resize\]: cannot run /nonexistent/resize" "$T/missing.conf.err"

# --- no disk cache -----------------------------------------------------------
conf nocache '[transform upper]\ncommand = /usr/bin/tr a-z A-Z\n' false
mount_fails "$T/nocache.conf"
check "no disk cache: the mount exits 1 (rc $rc)" test "$rc" = 1
check "no disk cache: the error says the outputs need it" \
	grep -q "$T/nocache.conf:7: \[transform upper\]: transforms keep their outputs in the disk cache" "$T/nocache.conf.err"

# --- root is refused by the config -------------------------------------------
conf root '[transform upper]\ncommand = /usr/bin/tr a-z A-Z\nuser = root\n'
"$SHARDFS" plan "$T/root.conf" >/dev/null 2>"$T/root.err"
rc=$?
check "user = root: plan exits 2 naming file:line (rc $rc)" bash -c \
	"[ $rc -eq 2 ] && grep -q '$T/root.conf:8: \[transform upper\] user = root: a transform never runs as root' '$T/root.err'"
mount_fails "$T/root.conf"
check "user = root: the mount exits 2 (rc $rc)" test "$rc" = 2

# --- the views --------------------------------------------------------------
# A directory the transforms (as nobody) can read, and write their run log
# in: not under /tmp (the suite's $T is 0700 there).
X=$(mktemp -d /var/tmp/shardfs-xf.XXXXXX)
chmod 755 "$X"
mkdir -p "$X/runs" "$X/tests/unit/transform" "$X/python"
chmod 1777 "$X/runs"
cp "$HERE/../unit/transform/resize.py" "$X/tests/unit/transform/"
cp -r "$HERE/../../python/shardfs" "$X/python/"
chmod -R a+rX "$X"
cleanup_x() { rm -rf "$X"; }
trap 'cleanup_x; cleanup' EXIT
cat >"$X/xf.py" <<'PY'
#!/usr/bin/python3
# test_transform's transform: ASCII upper case, counting its runs in
# runs/log; sleeps while the file slow exists; fails (exit 3) on an
# input holding "boom" until the file fixed exists.
import os
import sys
import time

X = os.path.dirname(os.path.abspath(__file__))
data = sys.stdin.buffer.read()
with open(os.path.join(X, "runs", "log"), "a") as f:
    f.write("run\n")
while os.path.exists(os.path.join(X, "slow")):
    time.sleep(0.1)
if b"boom" in data and not os.path.exists(os.path.join(X, "fixed")):
    sys.stderr.write("boom: this input is refused\n")
    sys.exit(3)
sys.stdout.buffer.write(data.upper())
PY
chmod 755 "$X/xf.py"
runs() { cat "$X/runs/log" 2>/dev/null | wc -l; }

VSRC=$T/vsrc
make_dataset "$VSRC" 40
# Not empty: an empty output is a failed run (EIO; xfcheck.py knows), and
# its retries after the backoff would make the run counts depend on time.
printf 'was empty' >"$VSRC/train/n00000000/000000.JPEG"
NV=40
XFC=$HERE/xfcheck.py
# vconf NAME CACHE [VERSION]: world_size 2, transform "up".
vconf() {
	printf '[source]\nurl = %s\n[cache]\ndir = %s\n[shard]\nworld_size = 2\nseed = 7\n[transform up]\ncommand = /usr/bin/python3 %s/xf.py\nversion = %s\nsuffix = .up\nreplace_extension = true\nsandbox = none\n' \
		"$VSRC" "$2" "$X" "${3:-1}" >"$T/$1.conf"
}

vconf v "$T/vcache"
if mount_shardfs "$T/v.conf" "$M"; then
	check "ls MOUNT lists transform-up" bash -c "ls '$M' | grep -qx transform-up"
	"$XFC" names "$M/transform-up" | sort >"$T/names"
	"$XFC" names "$M/transform-up/epoch-2/rank-1" >/dev/null
	"$XFC" names "$M/transform-up/epoch-2/skip-3/rank-0" >/dev/null
	ls -R "$M/transform-up" >/dev/null
	check "a listing runs nothing (ls -R, walks of rank, epoch and skip trees: $(runs) runs)" test "$(runs)" = 0
	check "the tree lists the renamed files" bash -c \
		"[ \$(grep -c '^rank-[01]/train/n0000000[0-6]/0000[0-3][0-9]\.up\$' '$T/names') = $NV ] && ! grep -q JPEG '$T/names'"
	out=$("$XFC" tree "$M/rank-0" "$M/transform-up/rank-0" upper .up true 2>&1)
	check "rank-0: every file is its object's output, st_size exact ($out)" bash -c "[[ '$out' == files* ]]"
	out=$("$XFC" tree "$M/rank-1" "$M/transform-up/rank-1" upper .up true 2>&1)
	check "rank-1 too ($out)" bash -c "[[ '$out' == files* ]]"
	check "one run per object for the configured epoch ($(runs) runs)" test "$(runs)" = "$NV"
	out=$("$XFC" tree "$M/epoch-2/rank-0" "$M/transform-up/epoch-2/rank-0" upper .up true 2>&1)
	check "epoch-2: the outputs ($out)" bash -c "[[ '$out' == files* ]]"
	out=$("$XFC" tree "$M/epoch-2/skip-3/rank-1" "$M/transform-up/epoch-2/skip-3/rank-1" upper .up true 2>&1)
	check "epoch-2/skip-3: the outputs ($out)" bash -c "[[ '$out' == files* ]]"
	check "other epochs reuse the outputs: still one run per object ($(runs))" test "$(runs)" = "$NV"
	out=$("$XFC" order "$M/.shardfs/rank-0.order" "$M/.shardfs/transform-up/rank-0.order" .up true 2>&1)
	check "the order file: rank-0.order renamed ($out)" bash -c "[[ '$out' == lines* ]]"
	out=$("$XFC" order "$M/.shardfs/epoch-2/skip-3-of-2/rank-1.order" "$M/.shardfs/transform-up/epoch-2/skip-3-of-2/rank-1.order" .up true 2>&1)
	check "the order file of epoch-2/skip-3-of-2 ($out)" bash -c "[[ '$out' == lines* ]]"
	check "no transform-NAME for a name not configured" bash -c "! ls '$M/transform-down' 2>/dev/null"
	check "unmount" umount_shardfs "$M"
else
	fail "mount with the views"
fi

finish
