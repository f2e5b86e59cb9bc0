#!/usr/bin/env bash
# [transform NAME] sections through the real binary (issue 27, its first
# slice: the mount opens each transform and attaches it to the disk cache;
# it does not serve outputs yet). A transform that can run mounts and is
# logged with its identity; sandbox = none is logged as a warning; a
# command that does not exist, or no disk cache, fails the mount naming
# the section and its line, and nothing is mounted; a transform as root
# is a config error (exit 2) for plan and mount alike. Needs root (the
# transform runs as nobody) and bubblewrap, as check_transform does.
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

finish
