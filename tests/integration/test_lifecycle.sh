#!/usr/bin/env bash
# A mount's life at its edges: a SIGHUP that arrives while the manifest is
# still loading (a reload for later, never the end of the process), a stop
# while a reload is running (the reload finishes, its tree is not swapped
# in, the daemon exits 0), an unmount whose device number another mount
# takes at once (not an abort: exit 0), and a background mount whose caller
# handed it more than stdio (an inherited pipe must not keep `... | cat`
# waiting).
#
# The manifest is a FIFO: the daemon blocks reading it until the test
# writes the manifest, which makes "while it loads" a state the test
# controls instead of a race.
SUITE=lifecycle
. "$(dirname "$0")/lib.sh"

SRC=$T/src
make_dataset "$SRC" 40
"$SHARDFS" manifest "$SRC" -o "$T/m.tsv" >/dev/null || fail "manifest"
mkfifo "$T/fifo"
cat >"$T/fifo.conf" <<EOF
[source]
url = $SRC
manifest = $T/fifo
[shard]
world_size = 2
[cache]
enabled = false
EOF
M=$T/mnt
mkdir -p "$M"
MOUNTS+=("$(realpath "$M")")

# feed: writes the manifest into the FIFO once a reader opened it (bounded).
feed() { timeout 30 sh -c "cat '$T/m.tsv' >'$T/fifo'"; }
# wait_log PATTERN FILE: up to 30 s for a line.
wait_log() {
	for _ in $(seq 300); do grep -q "$1" "$2" && return 0; sleep 0.1; done
	return 1
}

# --- SIGHUP while the manifest loads --------------------------------------
"$SHARDFS" mount "$T/fifo.conf" "$M" -f >"$T/early.log" 2>&1 &
pid=$!
PIDS+=("$pid")
sleep 0.5 # the daemon is now blocked opening the FIFO
kill -HUP "$pid"
sleep 0.3
check "a SIGHUP while loading does not end the process" kill -0 "$pid"
feed # the mount's own load
check "the mount comes up after it" wait_log "serving .* at" "$T/early.log"
feed # the reload the SIGHUP asked for
check "the early SIGHUP is served as a reload once the mount runs" \
	wait_log "reloaded: generation 1," "$T/early.log"
check "the mount serves rank-0" test -d "$M/rank-0"

# --- a stop while a reload is running -------------------------------------
kill -HUP "$pid"
check "the reload starts (blocked on the manifest)" \
	wait_log "SIGHUP: reloading" "$T/early.log"
sleep 0.3
kill -TERM "$pid"
sleep 0.5
check "the daemon waits for the running reload" kill -0 "$pid"
feed
rc=0
timeout 30 tail --pid="$pid" -f /dev/null || rc=$?
wait "$pid"
erc=$?
check "then exits 0 (got $erc, wait rc $rc)" test "$erc" -eq 0
check "the reload's tree is not swapped in" \
	grep -q "the mount is ending; not swapped in" "$T/early.log"
check "no reload is reported after the stop" \
	bash -c "! grep -q 'reloaded: generation 2' '$T/early.log'"
check "the mount is gone" bash -c "! grep -qs ' $(realpath "$M") ' /proc/mounts"

# --- an unmount whose device number another mount takes at once -----------
# After the loop ends, the daemon tells an unmount from an aborted
# connection by whether its mount is still listed. Its anonymous device
# number is free once unmounted, and the kernel hands out the lowest free
# one: a tmpfs mounted meanwhile gets it. The daemon is stopped across the
# unmount and the tmpfs mount so that this happens every time.
printf '[source]\nurl = %s\n[cache]\nenabled = false\n' "$SRC" >"$T/d.conf"
mount_shardfs "$T/d.conf" "$M" || fail "mount for the device test"
dpid=$LAST_PID
sleep 0.5 # serving: the ready hook ran
fdev=$(awk -v m="$(realpath "$M")" '$5 == m {print $3}' /proc/self/mountinfo)
mkdir -p "$T/tmpfs"
kill -STOP "$dpid"
fusermount3 -u "$M"
mount -t tmpfs shardfs-test "$T/tmpfs"
tdev=$(awk -v m="$(realpath "$T/tmpfs")" '$5 == m {print $3}' /proc/self/mountinfo)
kill -CONT "$dpid"
rc=0
wait "$dpid" || rc=$?
umount "$T/tmpfs"
echo "# FUSE device $fdev, then the tmpfs got $tdev"
check "an unmount is not taken for an abort when its device number is reused (exit $rc)" \
	test "$rc" -eq 0

# --- a background mount with an inherited pipe ----------------------------
cat >"$T/c.conf" <<EOF
[source]
url = $SRC
[cache]
enabled = false
EOF
rc=0
timeout 60 sh -c "'$SHARDFS' mount '$T/c.conf' '$M' 3>&1 2>/dev/null | cat >/dev/null" || rc=$?
check "mount ... 3>&1 | cat returns once serving (rc $rc)" test "$rc" -eq 0
dp=$(pgrep -f "shardfs mount $T/c.conf" | head -1)
[ -n "$dp" ] && PIDS+=("$dp")
check "and the mount serves" test -d "$M/rank-0"
if [ -n "$dp" ]; then
	fds=$(find "/proc/$dp/fd" -mindepth 1 -printf '%l\n' 2>/dev/null | grep -c '^pipe:' || true)
	check "the daemon holds no pipe it inherited ($fds)" test "$fds" -eq 0
fi
"$SHARDFS" unmount "$M" >/dev/null 2>&1 || fusermount3 -u "$M"

finish
