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
# runs/log; sleeps while the file slow exists, and the seconds the file
# delay holds if it exists; fails (exit 3) on an input holding "boom"
# until the file fixed exists.
import os
import sys
import time

X = os.path.dirname(os.path.abspath(__file__))
data = sys.stdin.buffer.read()
with open(os.path.join(X, "runs", "log"), "a") as f:
    f.write("run\n")
while os.path.exists(os.path.join(X, "slow")):
    time.sleep(0.1)
try:
    with open(os.path.join(X, "delay")) as f:
        time.sleep(float(f.read()))
except OSError:
    pass
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

# --- 8 readers: one run per object; a second mount on the cache: none ---------
# Readers in one daemon join one run (cache/derived.c's flights are per
# process); a second daemon on the same cache directory finds the outputs
# the first stored and runs nothing.
: >"$X/runs/log"
vconf v8 "$T/vcache8"
M2=$T/mnt2
if mount_shardfs "$T/v8.conf" "$M"; then
	P1=$LAST_PID
	# Eight readers of every file, started together.
	/usr/bin/python3 - "$M" >"$T/readers.out" 2>&1 <<'PY'
import os, sys, threading
root = sys.argv[1]
rels = []
for d, _, files in os.walk(os.path.join(root, "transform-up")):
    rels += [os.path.relpath(os.path.join(d, f), root) for f in files]
barrier = threading.Barrier(8)
results = {}
errors = []
def reader(k):
    barrier.wait()
    # Each reader its own order, so that they meet on every file.
    for rel in sorted(rels, reverse=k % 2 == 1):
        try:
            with open(os.path.join(root, rel), "rb") as f:
                results.setdefault(rel, set()).add(f.read())
        except OSError as e:
            errors.append(f"{rel}: {e}")
ts = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
bad = [r for r, v in results.items() if len(v) != 1]
print(f"files {len(results)} differing {len(bad)} errors {len(errors)}")
sys.exit(1 if bad or errors or len(results) != len(rels) else 0)
PY
	rc=$?
	check "8 readers: every reader got the same bytes ($(cat "$T/readers.out"))" test "$rc" = 0
	check "8 readers: one run per object ($(runs) runs)" test "$(runs)" = "$NV"
	out=$("$XFC" tree "$M/rank-1" "$M/transform-up/rank-1" upper .up true 2>&1)
	check "... and those bytes are the outputs ($out)" bash -c "[[ '$out' == files* ]]"
	if mount_shardfs "$T/v8.conf" "$M2"; then
		P2=$LAST_PID
		out=$("$XFC" tree "$M2/rank-0" "$M2/transform-up/rank-0" upper .up true 2>&1)
		out1=$("$XFC" tree "$M2/rank-1" "$M2/transform-up/rank-1" upper .up true 2>&1)
		check "a second mount on the cache: the outputs ($out; $out1)" \
			bash -c "[[ '$out' == files* && '$out1' == files* ]]"
		check "... stored by the first: no run ($(runs) runs in all)" test "$(runs)" = "$NV"
		check "unmount the second" umount_shardfs "$M2" "$P2"
	else
		fail "a second mount on one cache"
	fi
	check "unmount the first" umount_shardfs "$M" "$P1"
else
	fail "mount for 8 readers"
fi

# --- runs ahead of a reader ------------------------------------------------------
# A reader that looks each file up in its rank's order, slower than a run
# (0.3 s per run, the reader 1 s per file), finds the outputs made ahead
# (cache/xform_ahead.c): the lookup of the first runs it, the next ones
# are queued ahead of it at each lookup. Only bounds that hold under any
# load are checked: at least half of the runs made ahead, and the queue
# seen above 0 right after a lookup (it queued up to 2 x workers at once;
# one starts at a time per ahead thread).
: >"$X/runs/log"
printf '0.3' >"$X/delay"
chmod 644 "$X/delay"
vconf va "$T/vcachea"
if mount_shardfs "$T/va.conf" "$M"; then
	PA=$LAST_PID
	/usr/bin/python3 - "$M" >"$T/ahead.out" 2>&1 <<'PY'
import os, sys, time
root = sys.argv[1]
order = os.path.join(root, ".shardfs", "transform-up", "rank-0.order")
paths = [l.rstrip("\n") for l in open(order, encoding="utf-8")]
paths = [p for p in paths if p and not p.endswith("\tpad")][:10]
def stat(name):
    for line in open(os.path.join(root, ".shardfs", "stats")):
        if line.startswith("shardfs_transform_%s{" % name):
            return int(line.split()[-1])
    return -1
maxq = 0
for p in paths:
    with open(os.path.join(root, "transform-up", "rank-0", p), "rb") as f:
        f.read()
    maxq = max(maxq, stat("queued"))
    time.sleep(1.0)
print("files %d ahead %d runs %d maxqueued %d" % (len(paths), stat("ahead_runs_total"), stat("runs_total"), maxq))
PY
	out=$(cat "$T/ahead.out")
	read -r _ nf _ na _ nr _ mq <<<"$out"
	check "a slow reader in order: at least half its files were made ahead ($out)" \
		test "${nf:-0}" = 10 -a "${na:-0}" -ge 5
	check "the queue ahead was above 0 after a lookup ($out)" test "${mq:-0}" -gt 0
	check "runs ahead are still one run per object ($(runs) runs, $nr counted)" \
		test "$(runs)" = "${nr:--1}"
	# Unmount with runs ahead queued and one running (held by the file
	# slow): no reader is in the mount, and the daemon ends once that
	# run does (bounded by the transform's timeout), dropping the rest.
	before=$(runs)
	cat "$M/transform-up/rank-1/$(grep -v $'\tpad$' "$M/.shardfs/transform-up/rank-1.order" | head -n 1)" >/dev/null
	touch "$X/slow"
	for _ in $(seq 300); do [ "$(runs)" -gt $((before + 1)) ] && break; sleep 0.1; done
	check "a run ahead started after the lookup ($before runs before, $(runs) now)" \
		test "$(runs)" -gt $((before + 1))
	(sleep 2; rm -f "$X/slow") &
	check "unmount with a run ahead in progress: the daemon ends" umount_shardfs "$M" "$PA"
	rm -f "$X/slow"
else
	fail "mount for runs ahead"
fi
rm -f "$X/delay"

# --- two mounts and warm on one cache at once: one run per object per node -----
# Runs join across the processes of a node (cache/derived.c's node lock):
# two daemons on one cache directory, 8 readers in each started together
# on the same files, make one run per object; so do a mount's readers and
# `shardfs warm --transform` started together. Nothing here depends on who
# comes first: whatever the interleaving, every object runs once.
cat >"$T/readers.py" <<'PY'
# readers.py N ROOT...: N readers per mount root, started together, each
# reading every file of ROOT/transform-up (in its own order), all of them
# at once; every file must give the same bytes in every reader and root.
import os, sys, threading
n = int(sys.argv[1])
roots = sys.argv[2:]
rels = []
for d, _, files in os.walk(os.path.join(roots[0], "transform-up")):
    rels += [os.path.relpath(os.path.join(d, f), roots[0]) for f in files]
barrier = threading.Barrier(n * len(roots))
results = {}
errors = []
lock = threading.Lock()
def reader(root, k):
    barrier.wait()
    for rel in sorted(rels, reverse=k % 2 == 1):
        try:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
            with lock:
                results.setdefault(rel, set()).add(data)
        except OSError as e:
            with lock:
                errors.append(f"{root}/{rel}: {e}")
ts = [threading.Thread(target=reader, args=(r, k)) for r in roots for k in range(n)]
[t.start() for t in ts]
[t.join() for t in ts]
bad = [r for r, v in results.items() if len(v) != 1]
print(f"files {len(results)} differing {len(bad)} errors {len(errors)}")
for e in errors[:3]:
    print(e)
sys.exit(1 if bad or errors or len(results) != len(rels) else 0)
PY
: >"$X/runs/log"
vconf v2m "$T/vcache2m"
if mount_shardfs "$T/v2m.conf" "$M"; then
	P1=$LAST_PID
	if mount_shardfs "$T/v2m.conf" "$M2"; then
		P2=$LAST_PID
		/usr/bin/python3 "$T/readers.py" 8 "$M" "$M2" >"$T/readers2.out" 2>&1
		rc=$?
		check "two mounts, 8 readers each at once: the same bytes everywhere ($(head -n 1 "$T/readers2.out"))" test "$rc" = 0
		check "two mounts, 8 readers each at once: one run per object ($(runs) runs for $NV)" test "$(runs)" = "$NV"
		out=$("$XFC" tree "$M2/rank-0" "$M2/transform-up/rank-0" upper .up true 2>&1)
		out1=$("$XFC" tree "$M/rank-1" "$M/transform-up/rank-1" upper .up true 2>&1)
		check "... and those bytes are the outputs ($out; $out1)" \
			bash -c "[[ '$out' == files* && '$out1' == files* ]]"
		check "unmount the second" umount_shardfs "$M2" "$P2"
	else
		fail "a second mount for concurrent readers"
	fi
	check "unmount the first" umount_shardfs "$M" "$P1"
else
	fail "mount for two mounts' concurrent readers"
fi

: >"$X/runs/log"
vconf vw "$T/vcachew"
if mount_shardfs "$T/vw.conf" "$M"; then
	/usr/bin/python3 "$T/readers.py" 8 "$M" >"$T/readersw.out" 2>&1 &
	RPID=$!
	"$SHARDFS" warm "$T/vw.conf" --transform up >"$T/ww.out" 2>"$T/ww.err"
	wrc=$?
	wait "$RPID"
	rc=$?
	check "warm --transform beside a mount's readers: exit 0 (rc $wrc)" test "$wrc" = 0
	check "... the readers got the same bytes ($(head -n 1 "$T/readersw.out"))" test "$rc" = 0
	check "warm and a mount's readers at once: one run per object ($(runs) runs for $NV)" test "$(runs)" = "$NV"
	out=$("$XFC" tree "$M/rank-0" "$M/transform-up/rank-0" upper .up true 2>&1)
	check "... and the outputs are right ($out)" bash -c "[[ '$out' == files* ]]"
	check "unmount" umount_shardfs "$M"
else
	fail "mount for warm beside readers"
fi

# --- kill -9 of a daemon holding a run: the other mount's reader runs it ------
# The killed daemon's lock goes with it (an OFD lock is the open file's):
# the other daemon, waiting for it, runs the object itself and serves the
# right bytes, well within the derived wait (75 s; the cat is given 60 s).
: >"$X/runs/log"
touch "$X/slow"
vconf vk2 "$T/vcachek2"
if mount_shardfs "$T/vk2.conf" "$M"; then
	PK=$LAST_PID
	if mount_shardfs "$T/vk2.conf" "$M2"; then
		P2=$LAST_PID
		K=transform-up/$("$XFC" names "$M/transform-up" | grep '^rank-0/.*\.up$' | head -n 1)
		R=${K#transform-up/}
		cat "$M/$K" >/dev/null 2>&1 &
		CATPID=$!
		PIDS+=("$CATPID")
		for _ in $(seq 300); do [ "$(runs)" -ge 1 ] && break; sleep 0.1; done
		check "a run started in the first daemon ($(runs))" test "$(runs)" -ge 1
		timeout 60 cat "$M2/$K" >"$T/k2.out" 2>"$T/k2.err" &
		CAT2=$!
		sleep 1 # not needed for the verdict: lets the reader meet the run
		kill -9 "$PK"
		wait "$PK" 2>/dev/null
		fusermount3 -u -z "$M" 2>/dev/null
		wait "$CATPID" 2>/dev/null
		rm -f "$X/slow"
		wait "$CAT2"
		rc=$?
		RAWF=$(ls "$M2/${R%.up}".* | head -n 1)
		check "the other mount's reader of that file: its output (rc $rc, $(head -c 80 "$T/k2.err"))" \
			bash -c "[ $rc = 0 ] && [ \"\$(tr a-z A-Z <'$RAWF' | md5sum)\" = \"\$(md5sum <'$T/k2.out')\" ]"
		out=$("$XFC" tree "$M2/rank-0" "$M2/transform-up/rank-0" upper .up true 2>&1)
		check "... and every file of the other mount is right ($out)" bash -c "[[ '$out' == files* ]]"
		check "unmount the other" umount_shardfs "$M2" "$P2"
	else
		fail "a second mount for kill -9"
	fi
else
	fail "mount for kill -9 of one of two"
fi
rm -f "$X/slow"

# --- a new version runs again --------------------------------------------------
: >"$X/runs/log"
vconf v8v2 "$T/vcache8" 2
if mount_shardfs "$T/v8v2.conf" "$M"; then
	out=$("$XFC" tree "$M/rank-0" "$M/transform-up/rank-0" upper .up true 2>&1)
	check "version 2: the outputs ($out)" bash -c "[[ '$out' == files* ]]"
	check "version 2: new outputs, so runs again ($(runs) runs for rank-0)" test "$(runs)" -gt 0
	check "unmount" umount_shardfs "$M"
else
	fail "mount with version 2"
fi
: >"$X/runs/log"
if mount_shardfs "$T/v8.conf" "$M"; then
	out=$("$XFC" tree "$M/rank-0" "$M/transform-up/rank-0" upper .up true 2>&1)
	check "version 1 again after a remount: its stored outputs, no run ($out, $(runs) runs)" \
		bash -c "[[ '$out' == files* ]] && [ $(runs) = 0 ]"
	check "unmount" umount_shardfs "$M"
else
	fail "remount with version 1"
fi

# --- a failing transform: EIO for its file, and a run again after the backoff --
FSRC=$T/fsrc
mkdir -p "$FSRC/d"
for i in 1 2 3 4; do printf 'file %s\n' "$i" >"$FSRC/d/f$i.txt"; done
printf 'a boom inside\n' >"$FSRC/d/f3.txt"
printf '[source]\nurl = %s\n[cache]\ndir = %s\n[transform up]\ncommand = /usr/bin/python3 %s/xf.py\nsuffix = .up\nsandbox = none\n' \
	"$FSRC" "$T/fcache" "$X" >"$T/f.conf"
: >"$X/runs/log"
rm -f "$X/fixed"
if mount_shardfs "$T/f.conf" "$M"; then
	F=$M/transform-up/rank-0/d
	check "the failing object: EIO" bash -c "! cat '$F/f3.txt.up' 2>'$T/f.err' >/dev/null && grep -q 'Input/output error' '$T/f.err'"
	check "the failing object again: EIO (in its backoff or run again)" bash -c "! cat '$F/f3.txt.up' >/dev/null 2>&1"
	check "the other files are fine" bash -c \
		"[ \"\$(cat '$F/f1.txt.up' '$F/f2.txt.up' '$F/f4.txt.up')\" = \"\$(printf 'FILE 1\nFILE 2\nFILE 4')\" ]"
	check "the failure is logged with the key and the command's stderr" bash -c \
		"grep 'd/f3.txt' '$LAST_LOG' | grep -q 'boom: this input is refused'"
	before=$(runs)
	touch "$X/fixed"
	# The backoff after one failure is about a second: read until it
	# has passed (bounded), whatever the machine's load.
	got=
	for _ in $(seq 300); do
		got=$(cat "$F/f3.txt.up" 2>/dev/null) && break
		sleep 0.1
	done
	check "after the backoff a read runs it again and gets its output" test "$got" = "A BOOM INSIDE"
	check "... by a new run ($before runs before, $(runs) after)" test "$(runs)" -gt "$before"
	check "unmount" umount_shardfs "$M"
else
	fail "mount with a failing transform"
fi
rm -f "$X/fixed"

# --- kill -9 of the daemon mid-run, then a remount ------------------------------
: >"$X/runs/log"
touch "$X/slow"
vconf vk "$T/vcachek"
if mount_shardfs "$T/vk.conf" "$M"; then
	PK=$LAST_PID
	# A name by a listing (a stat would run the transform).
	K=transform-up/$("$XFC" names "$M/transform-up" | grep '^rank-0/.*\.up$' | head -n 1)
	cat "$M/$K" >/dev/null 2>&1 &
	CATPID=$!
	PIDS+=("$CATPID")
	for _ in $(seq 300); do [ "$(runs)" -ge 1 ] && break; sleep 0.1; done
	check "a run started ($(runs))" test "$(runs)" -ge 1
	kill -9 "$PK"
	wait "$PK" 2>/dev/null
	fusermount3 -u -z "$M" 2>/dev/null
	wait "$CATPID" 2>/dev/null
	rm -f "$X/slow"
	if mount_shardfs "$T/vk.conf" "$M"; then
		out=$("$XFC" tree "$M/rank-0" "$M/transform-up/rank-0" upper .up true 2>&1)
		check "after kill -9 and a remount every output is whole and right ($out)" bash -c "[[ '$out' == files* ]]"
		check "unmount" umount_shardfs "$M"
	else
		fail "remount after kill -9"
	fi
else
	fail "mount for kill -9"
fi
rm -f "$X/slow"

# --- the Pillow resize, process and worker mode --------------------------------
JSRC=$T/jsrc
mkdir -p "$JSRC/img/a" "$JSRC/img/b"
for i in $(seq 1 12); do
	/usr/bin/python3 "$HERE/../unit/transform/gen_jpeg.py" "$i" "$JSRC/img/$([ $((i % 2)) = 0 ] && echo a || echo b)/$i.jpg"
done
# Both in the sandbox. bwrap's mount namespace is a copy of the daemon's:
# a long-lived worker started after the mount held a copy of the FUSE
# mount, so unmounting in the daemon's namespace did not end the
# connection and the daemon never stopped (it closes the workers only once
# the session ends). The sandbox now starts in a namespace with every FUSE
# mount detached; the unmount of the worker mode's daemon is bounded here.
for mode in process worker; do
	printf '[source]\nurl = %s\n[cache]\ndir = %s\n[transform small]\ncommand = /usr/bin/python3 %s/tests/unit/transform/resize.py\nmode = %s\nsuffix = .png\nreplace_extension = true\n' \
		"$JSRC" "$T/jcache-$mode" "$X" "$mode" >"$T/j-$mode.conf"
	if ! mount_shardfs "$T/j-$mode.conf" "$M"; then
		fail "mount with the Pillow resize ($mode mode)"
		continue
	fi
	PW=$LAST_PID
	out=$("$XFC" tree "$M/rank-0" "$M/transform-small/rank-0" resize .png true 2>&1)
	check "Pillow resize to 64x64 PNG, $mode mode, in the sandbox: the bytes resize() gives run directly ($out)" \
		bash -c "[[ '$out' == 'files 12 eio 0' ]]"
	fusermount3 -u "$M"
	for _ in $(seq 600); do kill -0 "$PW" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$PW" 2>/dev/null; then
		fail "$mode mode in the sandbox: the daemon ends within 60 s of the unmount"
		kill -9 "$PW"
		fusermount3 -u -z "$M" 2>/dev/null
	else
		ok "$mode mode in the sandbox: the daemon ends after the unmount"
	fi
	wait "$PW" 2>/dev/null
done

# --- a source the node holds already is not fetched again ----------------------
# A run reads its source whole: bytes the node has (the raw view read them,
# or the prefetcher did) serve it; only a source not at hand is read from
# the store (bench: every JPEG was fetched twice, 1102 MB for 551 MB).
printf '[source]\nurl = %s\n[cache]\ndir = %s\n[prefetch]\nfiles = 0\n[transform up]\ncommand = /usr/bin/python3 %s/xf.py\nsuffix = .up\nreplace_extension = true\nsandbox = none\n' \
	"$VSRC" "$T/heldcache" "$X" >"$T/held.conf"
if mount_shardfs "$T/held.conf" "$M"; then
	xstat() { awk -v n="shardfs_$1" '$1 == n {print $2}' "$M/.shardfs/stats"; }
	find "$M/rank-0" -type f -exec cat {} + >/dev/null
	before=$(xstat backend_requests_total)
	out=$("$XFC" tree "$M/rank-0" "$M/transform-up/rank-0" upper .up true 2>&1)
	after=$(xstat backend_requests_total)
	check "outputs of held sources are right ($out)" bash -c "[[ '$out' == files* ]]"
	check "runs over sources the node holds send no backend request ($before before the runs, $after after)" \
		test "$before" = "$after"
	check "unmount" umount_shardfs "$M"
else
	fail "mount for the held-source test"
fi

# --- the sandbox's limits and the credentials it hides --------------------------
# A probe transform prints its RLIMIT_CPU (process mode: timeout_ms rounded
# up to seconds, plus one) and tries a credential file named by the
# daemon's AWS_SHARED_CREDENTIALS_FILE, made readable by everyone here on
# purpose: the sandbox shows it as an empty file; with sandbox = none (no
# namespaces) the same probe reads it, so the check can fail.
cat >"$X/probe.sh" <<'SH'
#!/bin/sh
cat >/dev/null
grep 'Max cpu time' /proc/self/limits
cat "$1" 2>/dev/null
echo end
SH
chmod 755 "$X/probe.sh"
echo "SECRET-KEY-MARKER" >"$X/creds"
chmod 644 "$X/creds"
for sb in bwrap none; do
	printf '[source]\nurl = %s\n[cache]\ndir = %s\n[transform probe]\ncommand = /bin/sh %s/probe.sh %s/creds\ntimeout_ms = 2500\nsandbox = %s\n' \
		"$SRC" "$T/pcache-$sb" "$X" "$X" "$sb" >"$T/probe-$sb.conf"
	if ! AWS_SHARED_CREDENTIALS_FILE=$X/creds mount_shardfs "$T/probe-$sb.conf" "$M"; then
		fail "mount with the probe transform ($sb)"
		continue
	fi
	f=$(cd "$M/transform-probe/rank-0" && find . -type f | head -1)
	cat "$M/transform-probe/rank-0/$f" >"$T/probe-$sb.out" 2>&1
	check "sandbox = $sb: RLIMIT_CPU is 4 s soft, 5 s hard for timeout_ms = 2500 ($(head -1 "$T/probe-$sb.out"))" \
		grep -Eq '^Max cpu time +4 +5 +seconds' "$T/probe-$sb.out"
	if [ "$sb" = bwrap ]; then
		check "the sandbox hides the credential file the daemon's environment names" bash -c \
			"grep -qx end '$T/probe-$sb.out' && ! grep -q SECRET-KEY-MARKER '$T/probe-$sb.out'"
	else
		check "without the sandbox the probe reads it (the check above can fail)" \
			grep -q SECRET-KEY-MARKER "$T/probe-$sb.out"
	fi
	check "unmount" umount_shardfs "$M"
done

# --- a full cache filesystem ------------------------------------------------------
# Outputs 64 times their sources' size into a cache on a 2 MiB tmpfs: what
# a reader gets is each object's output or EIO, never a partial or wrong
# output; the daemon goes on serving, and the cache verifies clean after.
cat >"$X/rep.py" <<'PY'
#!/usr/bin/python3
import sys
sys.stdout.buffer.write(sys.stdin.buffer.read().upper() * 64)
PY
chmod 755 "$X/rep.py"
FULL=$T/fulltmpfs
mkdir -p "$FULL"
if mount -t tmpfs -o size=2m,mode=0700 tmpfs "$FULL" 2>"$T/fulltmpfs.err"; then
	printf '[source]\nurl = %s\n[cache]\ndir = %s\nsize = 1G\n[transform rep]\ncommand = /usr/bin/python3 %s/rep.py\nsuffix = .rep\n' \
		"$VSRC" "$FULL/cache" "$X" >"$T/full.conf"
	if mount_shardfs "$T/full.conf" "$M"; then
		out=$("$XFC" tree --eio-any "$M/rank-0" "$M/transform-rep/rank-0" upper64 .rep false 2>&1)
		check "a full cache: every output read is whole and right, or EIO ($out)" \
			bash -c "[[ '$out' == files* ]]"
		out2=$("$XFC" tree --eio-any "$M/rank-0" "$M/transform-rep/rank-0" upper64 .rep false 2>&1)
		check "a full cache, read again: still whole or EIO ($out2)" bash -c "[[ '$out2' == files* ]]"
		check "a full cache: the daemon still serves the raw view" \
			cmp -s "$M/rank-0/train/n00000001/000001.JPEG" "$VSRC/train/n00000001/000001.JPEG"
		check "the cache was full: the warning is logged" \
			grep -q 'No space left on device; serving uncached' "$LAST_LOG"
		check "unmount (full cache)" umount_shardfs "$M"
		check "a full cache still verifies clean" "$SHARDFS" cache verify "$FULL/cache"
	else
		fail "mount with the cache on a full tmpfs"
	fi
	umount "$FULL"
else
	fail "mount a 2 MiB tmpfs" "$(cat "$T/fulltmpfs.err")"
fi

# --- a record view is refused ---------------------------------------------------
printf '[source]\nurl = %s\n[cache]\ndir = %s\n[shard]\nunit = record\n[records]\nformat = jsonl\n[transform up]\ncommand = /usr/bin/tr a-z A-Z\n' \
	"$FSRC" "$T/rcache" >"$T/rec.conf"
mkdir -p "$FSRC/r"
printf '{"a": 1}\n{"a": 2}\n' >"$FSRC/r/x.jsonl"
mount_fails "$T/rec.conf"
check "[transform] with unit = record: the mount exits 1 naming it (rc $rc)" bash -c \
	"[ '$rc' = 1 ] && grep -q 'rec.conf:.*\[transform up\] with \[shard\] unit = record' '$T/rec.conf.err'"

finish
