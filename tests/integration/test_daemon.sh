#!/usr/bin/env bash
# The daemon's life outside the FUSE handlers: where it logs (journal stream
# detection, [log] file, the fallback file without a log daemon, said at
# mount, the recent warnings and errors in .shardfs/log and `shardfs
# status`, [log] target = stderr kept once detached), the mount point checks (an
# existing mount, a non-empty directory, a dead mount left by kill -9),
# `shardfs unmount`, a background mount that returns once it serves and lets
# go of the caller's stdout and stderr, the options and flags mount(8)
# passes to a helper, and allow_other for users other than the daemon's.
SUITE=daemon
. "$(dirname "$0")/lib.sh"

SRC=$T/src
make_dataset "$SRC" 60
printf 'hello\n' >"$SRC/hello.txt"

conf() { # conf FILE [KEY = VALUE lines for [mount]...]
	local f=$1; shift
	{
		echo "[source]"
		echo "url = $SRC"
		echo "[shard]"
		echo "world_size = 2"
		echo "[cache]"
		echo "dir = $T/cache"
		echo "[mount]"
		local l
		for l in "$@"; do echo "$l"; done
	} >"$f"
}
C=$T/c.conf
conf "$C"
M=$T/mnt
mkdir -p "$M"

# The PID of a background daemon of ours, by the unique mountpoint in its
# command line.
daemon_pid() {
	local p
	for p in $(pgrep -f "shardfs.*$1" || true); do
		[ "$p" != $$ ] && echo "$p"
	done | head -1
}
# wait_gone PID: up to 10 s for a process to end.
wait_gone() {
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}

# --- journald: only a stderr that is the journal stream gets <N> prefixes --
# systemd.exec(5): JOURNAL_STREAM is "DEV:INODE" of the stream; a child that
# inherited the variable but writes elsewhere must log plain lines.
JOURNAL_STREAM=1:2 "$SHARDFS" mount "$C" "$T/nowhere" -f 2>"$T/j1.err"
check "a JOURNAL_STREAM that is not stderr: plain lines" \
	grep -q '^shardfs: error: mountpoint .*nowhere' "$T/j1.err"
: >"$T/j2.err"
js=$(stat -c '%d:%i' "$T/j2.err")
JOURNAL_STREAM=$js "$SHARDFS" mount "$C" "$T/nowhere" -f 2>>"$T/j2.err"
check "stderr is the journal stream ($js): <3> priority prefixes" \
	grep -q '^<3>mountpoint .*nowhere' "$T/j2.err"

# --- an existing mount on the same path -----------------------------------
mount_shardfs "$C" "$M" || fail "first mount"
first=$LAST_PID
timeout 30 "$SHARDFS" mount "$C" "$M" -f >"$T/dup.out" 2>&1
rc=$?
check "a second mount on a mounted path is refused (exit 1, got $rc)" test "$rc" -eq 1
check "the refusal says what to do" grep -q "already a mount point.*shardfs unmount $M" "$T/dup.out"
check "the first mount still serves" test -f "$M/rank-0/hello.txt" -o -f "$M/rank-1/hello.txt"
check "one mount on the path" test "$(grep -c " $(realpath "$M") " /proc/mounts)" -eq 1
# Leave no stacked mount behind if the old code mounted twice.
while [ "$(grep -c " $(realpath "$M") " /proc/mounts)" -gt 1 ]; do fusermount3 -u "$M"; done

# --- shardfs unmount ------------------------------------------------------
"$SHARDFS" unmount --stale-only "$M" 2>"$T/so.err"
rc=$?
check "unmount --stale-only leaves a serving mount alone (exit 0, got $rc)" \
	bash -c "test $rc -eq 0 && grep -qs ' $(realpath "$M") ' /proc/mounts"
"$SHARDFS" unmount "$M" 2>"$T/um.err"
rc=$?
check "unmount MOUNTPOINT (exit 0, got $rc)" test "$rc" -eq 0
rc=0
wait_gone "$first" && wait "$first" || rc=$?
check "the daemon exits 0 after shardfs unmount (got $rc)" test "$rc" -eq 0
check "unmounted" bash -c "! grep -qs ' $(realpath "$M") ' /proc/mounts"
conf "$C" "path = $M"
mount_shardfs "$C" "$M" || fail "mount for unmount CONFIG"
"$SHARDFS" unmount "$C" 2>"$T/um2.err"
rc=$?
check "unmount CONFIG uses [mount] path (exit 0, got $rc)" bash -c \
	"test $rc -eq 0 && ! grep -qs ' $(realpath "$M") ' /proc/mounts"
wait_gone "$LAST_PID"
"$SHARDFS" unmount "$M" 2>"$T/um3.err"
rc=$?
check "unmount of a path that is not mounted: exit 0, says so (got $rc)" bash -c \
	"test $rc -eq 0 && grep -q 'not mounted' '$T/um3.err'"
"$SHARDFS" unmount / 2>"$T/um4.err"
rc=$?
check "unmount refuses what is not a shardfs mount (got $rc)" bash -c \
	"test $rc -eq 1 && grep -q 'not a shardfs mount' '$T/um4.err'"

# A busy mount: unmount fails and says what to do; --lazy detaches it.
mount_shardfs "$C" "$M" || fail "mount for the busy unmount"
busy=$(ls "$M"/rank-*/hello.txt | head -1)
exec 9<"$busy"
"$SHARDFS" unmount "$M" 2>"$T/busy.err"
rc=$?
check "unmount of a busy mount fails (exit 1, got $rc) naming --lazy" bash -c \
	"test $rc -eq 1 && grep -q 'busy.*--lazy' '$T/busy.err' && grep -qs ' $(realpath "$M") ' /proc/mounts"
"$SHARDFS" unmount --lazy "$M" 2>"$T/lazy.err"
rc=$?
check "unmount --lazy detaches it (exit 0, got $rc)" bash -c \
	"test $rc -eq 0 && ! grep -qs ' $(realpath "$M") ' /proc/mounts"
check "an open file still reads after the lazy unmount" bash -c "cat <&9 | grep -q hello"
exec 9<&-
rc=0
wait_gone "$LAST_PID" && wait "$LAST_PID" || rc=$?
check "the daemon exits 0 once its last user left (got $rc)" test "$rc" -eq 0

# --- a dead mount left by kill -9 -----------------------------------------
conf "$C"
mount_shardfs "$C" "$M" || fail "mount for kill -9"
kill -9 "$LAST_PID"
wait "$LAST_PID" 2>/dev/null
stat "$M" >/dev/null 2>"$T/dead.err"
check "kill -9 leaves a dead mount (ENOTCONN)" grep -q 'Transport endpoint is not connected' "$T/dead.err"
# mount_shardfs returns as soon as a mount is listed, and the dead one is:
# wait (bounded) for the new one to serve.
mount_shardfs "$C" "$M" 2>/dev/null || fail "mount over the dead mount"
for _ in $(seq 600); do [ -d "$M/rank-0" ] && break; sleep 0.1; done 2>/dev/null
check "a mount over a dead mount recovers it: serves" test -d "$M/rank-0"
check "the recovery is logged" grep -q "dead FUSE mount.*unmounted it lazily" "$LAST_LOG"
check "one mount on the path after the recovery" test "$(grep -c " $(realpath "$M") " /proc/mounts)" -eq 1
kill -9 "$LAST_PID"
wait "$LAST_PID" 2>/dev/null
"$SHARDFS" unmount --stale-only "$M" 2>"$T/so2.err"
rc=$?
check "unmount --stale-only cleans a dead mount (exit 0, got $rc)" bash -c \
	"test $rc -eq 0 && ! grep -qs ' $(realpath "$M") ' /proc/mounts && grep -q 'dead FUSE mount' '$T/so2.err'"

# --- a hung mount: the daemon lives but does not answer (SIGSTOP) --------
# Nothing may wait on it without a deadline: realpath(), stat() and a
# forced statx() of the mount all go to the daemon. Every command runs
# under a bounded timeout; 124 is the hang.
RM=$(realpath "$M")
conf "$C"
mount_shardfs "$C" "$M" || fail "mount for the hung mount"
hung=$LAST_PID
kill -STOP "$hung"
rc=0
timeout 25 "$SHARDFS" unmount "$M" 2>"$T/hung1.err" || rc=$?
check "unmount of a hung mount refuses without hanging (exit 1, got $rc)" bash -c \
	"test $rc -eq 1 && grep -q 'does not answer.*--lazy' '$T/hung1.err' && grep -qs ' $RM ' /proc/mounts"
rc=0
timeout 25 "$SHARDFS" unmount --stale-only "$M" 2>"$T/hung2.err" || rc=$?
check "unmount --stale-only leaves a hung mount, says so (exit 1, got $rc)" bash -c \
	"test $rc -eq 1 && grep -q 'does not answer' '$T/hung2.err' && grep -qs ' $RM ' /proc/mounts"
rc=0
timeout 25 "$SHARDFS" mount "$C" "$M" -f >"$T/hung3.out" 2>&1 || rc=$?
check "mount over a hung mount refuses without hanging (exit 1, got $rc)" bash -c \
	"test $rc -eq 1 && grep -q 'already a mount point' '$T/hung3.out'"
rc=0
timeout 25 "$SHARDFS" unmount --lazy "$M" 2>"$T/hung4.err" || rc=$?
check "unmount --lazy detaches a hung mount (exit 0, got $rc)" bash -c \
	"test $rc -eq 0 && ! grep -qs ' $RM ' /proc/mounts"
kill -CONT "$hung"
grep -qs " $RM " /proc/mounts && umount -l "$RM"
wait_gone "$hung" || kill -9 "$hung"
wait "$hung" 2>/dev/null

# --- a symlink as the last component is never followed --------------------
# A user-writable directory (a Slurm epilog iterating it as root) must not
# redirect the unmount to another job's mount.
mount_shardfs "$C" "$M" || fail "mount for the symlink"
mkdir -p "$T/g"
ln -sfn "$M" "$T/g/ylink"
rc=0
timeout 25 "$SHARDFS" unmount "$T/g/ylink" 2>"$T/ylink.err" || rc=$?
check "unmount of a symlink to a mount refuses (exit 1, got $rc), mount stays" bash -c \
	"test $rc -eq 1 && grep -q 'symbolic link' '$T/ylink.err' && grep -qs ' $RM ' /proc/mounts"
check "unmount" umount_shardfs "$M"
ln -sfn "$M" "$T/g/mlink"
rc=0
timeout 25 "$SHARDFS" mount "$C" "$T/g/mlink" -f >"$T/mlink.out" 2>&1 || rc=$?
check "mount on a symlink refuses (exit 1, got $rc), mounts nothing" bash -c \
	"test $rc -eq 1 && grep -q 'symbolic link' '$T/mlink.out' && ! grep -qs ' $RM ' /proc/mounts"
grep -qs " $RM " /proc/mounts && umount -l "$RM"

# --- a dead FUSE mount that is not shardfs is not ours to recover ----------
# A raw FUSE mount of another type whose /dev/fuse is closed at once: every
# access gives ENOTCONN, as a dead sshfs would.
if [ "$(id -u)" = 0 ]; then
	/usr/bin/python3 - "$RM" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("/dev/fuse", os.O_RDWR)
opts = "fd=%d,rootmode=40000,user_id=0,group_id=0" % fd
if libc.mount(b"othersrc", sys.argv[1].encode(), b"fuse.otherfs", 0, opts.encode()) != 0:
    sys.exit("mount: " + os.strerror(ctypes.get_errno()))
os.close(fd)
PY
	check "a dead fuse.otherfs mount is set up" grep -qs " $RM fuse.otherfs " /proc/mounts
	rc=0
	timeout 25 "$SHARDFS" unmount --stale-only "$M" 2>"$T/other1.err" || rc=$?
	check "unmount --stale-only leaves a dead non-shardfs mount (exit 1, got $rc)" bash -c \
		"test $rc -eq 1 && grep -q 'fuse.otherfs.*umount -l' '$T/other1.err' && grep -qs ' $RM fuse.otherfs ' /proc/mounts"
	rc=0
	timeout 25 "$SHARDFS" unmount "$M" 2>"$T/other2.err" || rc=$?
	check "unmount leaves a dead non-shardfs mount (exit 1, got $rc)" bash -c \
		"test $rc -eq 1 && grep -qs ' $RM fuse.otherfs ' /proc/mounts"
	rc=0
	timeout 25 "$SHARDFS" mount "$C" "$M" -f >"$T/other3.out" 2>&1 || rc=$?
	check "mount over a dead non-shardfs mount refuses (exit 1, got $rc), names the type" bash -c \
		"test $rc -eq 1 && grep -q 'fuse.otherfs.*umount -l' '$T/other3.out' && grep -qs ' $RM fuse.otherfs ' /proc/mounts"
	while grep -qs " $RM " /proc/mounts; do umount -l "$RM" || break; done
else
	echo "# skipped the dead non-shardfs mount test: needs root"
fi

# --- a non-empty directory -------------------------------------------------
NE=$T/nonempty
mkdir -p "$NE"
touch "$NE/precious"
timeout 30 "$SHARDFS" mount "$C" "$NE" -f >"$T/ne.out" 2>&1
rc=$?
check "a non-empty mountpoint is refused (exit 1, got $rc)" test "$rc" -eq 1
check "the refusal names the option" grep -q "not empty.*-o nonempty.*\[mount\] nonempty = true" "$T/ne.out"
grep -qs " $NE " /proc/mounts && fusermount3 -u "$NE"
mount_shardfs "$C" "$NE" -o nonempty || fail "mount -o nonempty"
check "-o nonempty mounts over it" test -d "$NE/rank-0"
check "unmount" umount_shardfs "$NE"
conf "$T/ne.conf" "nonempty = true"
mount_shardfs "$T/ne.conf" "$NE" || fail "mount [mount] nonempty = true"
check "[mount] nonempty = true mounts over it" test -d "$NE/rank-0"
check "unmount" umount_shardfs "$NE"

# --- background mounts return once serving and let go of stdout/stderr -----
conf "$C" "path = $M"
bg_mount() { # bg_mount LABEL CMD...: runs CMD under a timeout, checks serving
	local label=$1; shift
	local rc=0
	timeout 60 bash -c "$*" >"$T/bg.out" 2>&1 || rc=$?
	local dp
	dp=$(daemon_pid "$M")
	[ -n "$dp" ] && PIDS+=("$dp")
	check "$label: returns 0 (got $rc)" test "$rc" -eq 0
	check "$label: the mount serves" test -d "$M/rank-1"
	"$SHARDFS" unmount "$M" 2>/dev/null
	[ -n "$dp" ] && wait_gone "$dp"
}
bg_mount "mount | cat" "'$SHARDFS' mount '$C' '$M' | cat"
bg_mount "mount 2>&1 | head" "'$SHARDFS' mount '$C' '$M' 2>&1 | head"
bg_mount "mount </dev/null 2>&1 | cat (ssh-like)" "'$SHARDFS' mount '$C' '$M' </dev/null 2>&1 | cat"
printf '[source]\nurl = %s/no/such/dir\n' "$T" >"$T/bad.conf"
rc=0
timeout 60 bash -c "'$SHARDFS' mount '$T/bad.conf' '$M' 2>&1 | cat" >"$T/badbg.out" || rc=$?
rc=0
timeout 60 "$SHARDFS" mount "$T/bad.conf" "$M" 2>"$T/badbg.err" || rc=$?
check "a failing background mount exits non-zero (got $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "its reason is on the caller's stderr" grep -q "no/such/dir: No such file or directory" "$T/badbg.err"
check "a failing background mount through a pipe returns with the reason" \
	grep -q "no/such/dir: No such file or directory" "$T/badbg.out"

# [log] file gets the daemon's lines once it has detached.
conf "$C" "path = $M"
printf '[log]\nfile = %s\n' "$T/daemon.log" >>"$C"
timeout 60 "$SHARDFS" mount "$C" 2>"$T/lf.err"
rc=$?
dp=$(daemon_pid "$C")
[ -n "$dp" ] && PIDS+=("$dp")
check "background mount with [log] file (exit 0, got $rc)" test "$rc" -eq 0
[ -n "$dp" ] && kill -HUP "$dp" 2>/dev/null
for _ in $(seq 100); do grep -qs SIGHUP "$T/daemon.log" && break; sleep 0.1; done
"$SHARDFS" unmount "$M" 2>/dev/null
[ -n "$dp" ] && wait_gone "$dp"
check "[log] file has the lines logged after detaching" bash -c \
	"grep -q 'SIGHUP' '$T/daemon.log' && grep -q 'unmounting' '$T/daemon.log'"
check "[log] file lines carry a time and the pid" \
	grep -qE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z shardfs\[${dp:-x}\]: info: unmounting" "$T/daemon.log"
check "[log] file is 0640" test "$(stat -c %a "$T/daemon.log")" = 640
check "nothing after detaching reached the caller's stderr" bash -c "! grep -q unmounting '$T/lf.err'"

# --- no log daemon: the fallback file, said at mount; status shows the ring --
# A container without /dev/log or a journal: a detached daemon's lines went
# to syslog(), into nothing, while status said "2 errors logged". Where
# this host has either socket, the scenario runs in a mount namespace of
# its own with /dev/null bound over them (FORCE_UNSHARE=1 forces that).
NL=$T/nolog
mkdir -p "$NL/src" "$NL/mnt" "$NL/mnt2"
printf 'first\n' >"$NL/src/a.txt"
printf 'second\n' >"$NL/src/b.txt"
printf '[source]\nurl = %s\n[shard]\nworld_size = 1\n[cache]\ndir = %s\n[log]\ndir = %s\n' \
	"$NL/src" "$NL/cache" "$NL/logs" >"$NL/c.conf"
sed 's/^dir = .*logs$/target = stderr/' "$NL/c.conf" >"$NL/stderr.conf"
cat >"$NL/run.sh" <<'EOS'
SHARDFS=$1 NL=$2
for s in /dev/log /run/systemd/journal/socket; do
	[ -e "$s" ] && mount --bind /dev/null "$s"
done
"$SHARDFS" mount "$NL/c.conf" "$NL/mnt" 2>"$NL/mount.err"
echo "mount_rc=$?" >"$NL/result"
printf 'changed!\n' >"$NL/src/a.txt"
if cat "$NL/mnt/rank-0/a.txt" >/dev/null 2>&1; then
	echo "read=ok" >>"$NL/result"
else
	echo "read=eio" >>"$NL/result"
fi
"$SHARDFS" status "$NL/mnt" --interval 0 >"$NL/status.txt" 2>&1
"$SHARDFS" status "$NL/mnt" --interval 0 --json >"$NL/status.json" 2>&1
cp "$NL/mnt/.shardfs/log" "$NL/dot-log.txt"
"$SHARDFS" unmount "$NL/mnt" >/dev/null 2>&1
echo "unmount_rc=$?" >>"$NL/result"
# [log] target = stderr: the caller's stderr, also once detached.
"$SHARDFS" mount "$NL/stderr.conf" "$NL/mnt2" 2>"$NL/stderr.err"
echo "mount2_rc=$?" >>"$NL/result"
printf 'changed again\n' >"$NL/src/a.txt"
cat "$NL/mnt2/rank-0/a.txt" >/dev/null 2>&1
"$SHARDFS" unmount "$NL/mnt2" >/dev/null 2>&1
EOS
if [ -e /dev/log ] || [ -e /run/systemd/journal/socket ] || [ -n "${FORCE_UNSHARE:-}" ]; then
	echo "# no-log-daemon scenario in a mount namespace of its own"
	timeout 120 unshare -m --propagation private bash "$NL/run.sh" "$SHARDFS" "$NL"
else
	timeout 120 bash "$NL/run.sh" "$SHARDFS" "$NL"
fi
for p in $(pgrep -f "shardfs mount $NL/" || true); do PIDS+=("$p"); wait_gone "$p"; done
nl_name=${NL#/}
nl_log=$NL/logs/${nl_name//\//-}-mnt.log
check "no log daemon: the background mount serves (exit 0)" grep -qx 'mount_rc=0' "$NL/result"
check "... and says at mount where its lines go, and why" grep -q \
	"notice: log: once serving, lines go to $nl_log (rotated at 10.0 MiB, 3 older files kept), the fallback: no journal (/run/systemd/journal/socket: .*), no syslog (/dev/log: .*)" \
	"$NL/mount.err"
check "... a changed file reads EIO" grep -qx 'read=eio' "$NL/result"
check "... the fallback file has the lines logged after detaching (0640)" bash -c \
	"grep -q 'a.txt: changed since the manifest was made' '$nl_log' && grep -q 'info: unmounting' '$nl_log' && [ \"\$(stat -c %a '$nl_log')\" = 640 ]"
check "... its first line says why it is the fallback" \
	grep -q "notice: log: $NL/mnt logs here (the fallback: no journal" "$nl_log"
check "... nothing after detaching reached the caller's stderr" \
	bash -c "! grep -q 'changed since' '$NL/mount.err'"
check "... .shardfs/log has the error, with its time" \
	grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z error: source .*a.txt: changed since the manifest' "$NL/dot-log.txt"
check "... shardfs status names the log file and shows the recent error" bash -c \
	"grep -q '^log  *file $nl_log (the fallback: no journal' '$NL/status.txt' && grep -qE '^recent  *[0-9-]+ [0-9:]+ UTC error: source .*a.txt: changed since' '$NL/status.txt'"
check "... status --json: log target and the recent error" /usr/bin/python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["log"]["target"] == "file" and s["log"]["path"] == sys.argv[2], s["log"]
r = s["errors"]["recent"]
assert r and r[-1]["level"] == "error" and "a.txt: changed since" in r[-1]["message"], r
assert isinstance(r[-1]["time"], int) and r[-1]["time"] > 0, r
' "$NL/status.json" "$nl_log"
check "... shardfs unmount (exit 0)" grep -qx 'unmount_rc=0' "$NL/result"
check "[log] target = stderr: the caller's stderr gets the lines after detaching" bash -c \
	"grep -qx 'mount2_rc=0' '$NL/result' && grep -q 'a.txt: changed since the manifest' '$NL/stderr.err' && grep -q 'info: unmounting' '$NL/stderr.err'"

# --- mount(8)'s helper conventions: spec dir [-sfnv] [-o opts] [-t type] ----
conf "$C"
timeout 30 "$SHARDFS" "$C" "$M" -n -o rw,nodev,nosuid,noatime,_netdev,nofail,x-systemd.requires=network-online.target,comment=x,defaults 2>"$T/h1.err"
rc=$?
dp=$(daemon_pid "$M")
[ -n "$dp" ] && PIDS+=("$dp")
check "helper form with mount(8)'s generic options (rw included) mounts (got $rc)" \
	bash -c "test $rc -eq 0 && test -d '$M/rank-0'"
"$SHARDFS" unmount "$M" 2>/dev/null
[ -n "$dp" ] && wait_gone "$dp"
timeout 30 "$SHARDFS" "$C" "$M" -o frobnicate 2>"$T/h2.err"
rc=$?
check "an unknown option is an error naming it (got $rc)" bash -c \
	"test $rc -eq 2 && grep -q 'frobnicate' '$T/h2.err' && ! grep -qs ' $(realpath "$M") ' /proc/mounts"
timeout 30 "$SHARDFS" "$C" "$M" -s -v -o frobnicate -t fuse.shardfs 2>"$T/h3.err"
rc=$?
dp=$(daemon_pid "$M")
[ -n "$dp" ] && PIDS+=("$dp")
check "-s (sloppy) ignores it with a warning and mounts (got $rc)" bash -c \
	"test $rc -eq 0 && grep -q 'warning.*frobnicate' '$T/h3.err' && test -d '$M/rank-0'"
"$SHARDFS" unmount "$M" 2>/dev/null
[ -n "$dp" ] && wait_gone "$dp"
timeout 30 "$SHARDFS" "$C" "$M" -f -o ro 2>"$T/h4.err"
rc=$?
check "-f (fake) checks and does not mount (got $rc)" bash -c \
	"test $rc -eq 0 && ! grep -qs ' $(realpath "$M") ' /proc/mounts"

# An fstab line with the options of examples/fstab's first line, through mount(8).
# The spec names the binary ("PROGRAM#CONFIG", mount.fuse3's form) because
# /sbin/mount.fuse.shardfs is installed by `make install`, not here.
opts=$(awk '!/^#/ && NF {print $4; exit}' "$HERE/../../examples/fstab")
printf '%s#%s %s fuse %s 0 0\n' "$SHARDFS" "$C" "$(realpath "$M")" "$opts" >"$T/fstab"
timeout 60 mount -T "$T/fstab" "$(realpath "$M")" 2>"$T/fstab.err"
rc=$?
dp=$(daemon_pid "$M")
[ -n "$dp" ] && PIDS+=("$dp")
check "mount -T FSTAB with the example's options (got $rc)" bash -c \
	"test $rc -eq 0 && test -d '$M/rank-0'"
[ "$rc" -eq 0 ] || cat "$T/fstab.err"
check "other users read it (allow_other from the line)" bash -c \
	"grep ' $(realpath "$M") ' /proc/mounts | grep -q allow_other"
umount "$M" 2>/dev/null
[ -n "$dp" ] && wait_gone "$dp"

# --- allow_other: a user other than the daemon's ---------------------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	chmod 755 "$T"
	mount_shardfs "$C" "$M" || fail "mount without allow_other"
	check "without allow_other another user cannot read" bash -c \
		"! setpriv --reuid=65534 --regid=65534 --clear-groups cat $M/rank-*/hello.txt >/dev/null 2>&1"
	check "unmount" umount_shardfs "$M"
	mount_shardfs "$C" "$M" -o allow_other || fail "mount -o allow_other"
	check "with allow_other another user reads" bash -c \
		"setpriv --reuid=65534 --regid=65534 --clear-groups cat $M/rank-*/hello.txt | grep -q hello"
	check "unmount" umount_shardfs "$M"
	chmod 700 "$T"
else
	echo "# skipped the allow_other test: needs root and setpriv"
fi

finish
