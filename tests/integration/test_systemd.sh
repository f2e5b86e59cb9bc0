#!/usr/bin/env bash
# The systemd unit, without systemd as PID 1: the template is generated for a
# PREFIX, checked with `systemd-analyze verify` and for directives that would
# give the service a private mount namespace (its mount would be invisible to
# the host), and then its ExecStartPre=, ExecStart= and ExecReload= lines are
# run as systemd would (%i and $MAINPID substituted) with NOTIFY_SOCKET at a
# listener (notify_listener.py) that records what the daemon reports:
# READY=1 only once the mount answers, STATUS=, WATCHDOG=1, RELOADING=1 with
# MONOTONIC_USEC= then READY=1 on SIGHUP, STOPPING=1 and exit 0 on SIGTERM;
# and the recovery after kill -9: ExecStartPre clears the dead mount and
# ExecStart mounts again.
SUITE=systemd
. "$(dirname "$0")/lib.sh"

ROOT=$(cd "$HERE/../.." && pwd)
TEMPLATE=$ROOT/systemd/shardfs@.service.in
PREFIX=$T/prefix
mkdir -p "$PREFIX/bin" "$T/units"
ln -s "$SHARDFS" "$PREFIX/bin/shardfs"
# What `make install PREFIX=...` does with the template.
sed "s|@BINDIR@|$PREFIX/bin|g" "$TEMPLATE" >"$T/units/shardfs@.service"
cp "$T/units/shardfs@.service" "$T/units/shardfs@test.service"
UNIT=$T/units/shardfs@test.service

# systemd.exec(5): each of these sets up a mount namespace for the service.
NS_DIRECTIVES="ProtectSystem ProtectHome PrivateTmp PrivateDevices PrivateMounts
ReadOnlyPaths ReadWritePaths InaccessiblePaths ExecPaths NoExecPaths
TemporaryFileSystem BindPaths BindReadOnlyPaths MountAPIVFS ProtectKernelTunables
ProtectKernelModules ProtectKernelLogs ProtectControlGroups ProtectProc ProcSubset
RootDirectory RootImage MountImages DynamicUser LogNamespace PrivateUsers
MountFlags ReadOnlyDirectories ReadWriteDirectories InaccessibleDirectories"
# --- the unit file ---------------------------------------------------------
check "no @PLACEHOLDER@ left after generation" bash -c "! grep -q '@[A-Z]*@' '$UNIT'"
check "no hard-coded /usr/local" bash -c "! grep -v '^#' '$UNIT' | grep -q /usr/local"
if command -v systemd-analyze >/dev/null; then
	# The unit's Documentation= names man pages: verify looks them up
	# with man(1), here in the repository's pages as make install would
	# place them. A clean verify prints nothing.
	mkdir -p "$T/man/man8" "$T/man/man5"
	cp "$HERE/../../man/shardfs.8" "$T/man/man8/"
	cp "$HERE/../../man/shardfs.conf.5" "$T/man/man5/"
	MANPATH=$T/man systemd-analyze verify "$UNIT" >"$T/verify.out" 2>&1
	rc=$?
	check "systemd-analyze verify passes, man pages included (got $rc)" \
		bash -c "test $rc -eq 0 && ! test -s '$T/verify.out'"
	[ "$rc" -eq 0 ] && ! test -s "$T/verify.out" || cat "$T/verify.out"
	sed "s|@BINDIR@|$T/nonexistent|g" "$TEMPLATE" >"$T/units/shardfs@bad.service"
	check "verify fails for a missing binary (the check is real)" bash -c \
		"! systemd-analyze verify --man=no '$T/units/shardfs@bad.service' >/dev/null 2>&1"
	score=$(systemd-analyze security --offline=yes "$UNIT" 2>/dev/null |
		sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
	echo "# systemd-analyze security --offline=yes: ${score:-?}"
	check "security exposure at most 5.0 (got ${score:-?})" \
		awk -v s="${score:-99}" 'BEGIN { exit !(s <= 5.0) }'
	# The drop-in for transforms (systemd/shardfs@.service.d/): on an
	# instance of its own, so the checks above saw the unit alone.
	XUNIT=$T/units/shardfs@xf.service
	cp "$UNIT" "$XUNIT"
	mkdir -p "$XUNIT.d"
	cp "$ROOT/systemd/shardfs@.service.d/transforms.conf" "$XUNIT.d/"
	MANPATH=$T/man systemd-analyze verify "$XUNIT" >"$T/xverify.out" 2>&1
	rc=$?
	check "unit + transforms drop-in: systemd-analyze verify passes (got $rc)" \
		bash -c "test $rc -eq 0 && ! test -s '$T/xverify.out'"
	systemd-analyze security --offline=yes "$UNIT" >"$T/sec.base" 2>/dev/null
	systemd-analyze security --offline=yes "$XUNIT" >"$T/sec.xf" 2>/dev/null
	# allowed KEY FILE: security lists KEY as allowed (a cross) in FILE.
	allowed() { grep -qF "✗ $1 " "$2"; }
	for k in "RestrictNamespaces=~user" "RestrictNamespaces=~mnt" \
		"RestrictNamespaces=~net" "RestrictNamespaces=~pid" \
		"RestrictAddressFamilies=~AF_NETLINK" \
		"CapabilityBoundingSet=~CAP_KILL" \
		"CapabilityBoundingSet=~CAP_SET(UID|GID|PCAP)"; do
		check "the unit alone forbids $k" bash -c \
			"grep -qF '✓ $k ' '$T/sec.base'"
	done
	for k in "RestrictNamespaces=~user" "RestrictNamespaces=~mnt" \
		"RestrictNamespaces=~net" "RestrictNamespaces=~pid" \
		"RestrictAddressFamilies=~AF_NETLINK" \
		"CapabilityBoundingSet=~CAP_KILL" \
		"CapabilityBoundingSet=~CAP_SET(UID|GID|PCAP)"; do
		check "the drop-in allows $k (bwrap, the user switch, a timeout's kill)" \
			allowed "$k" "$T/sec.xf"
	done
	# Nothing else moves: every line the unit alone passes but the
	# drop-in fails is one of the three directives the drop-in names.
	extra=$(diff <(grep '^✓' "$T/sec.base" | awk '{print $2}' | sort) \
		<(grep '^✓' "$T/sec.xf" | awk '{print $2}' | sort) |
		sed -n 's/^< //p' | grep -vE '^(RestrictNamespaces|RestrictAddressFamilies|CapabilityBoundingSet)=' | tr '\n' ' ')
	check "the drop-in changes only RestrictNamespaces, RestrictAddressFamilies and CapabilityBoundingSet${extra:+ (also: $extra)}" \
		test -z "$extra"
	found=""
	for d in $NS_DIRECTIVES; do
		grep -qE "^[[:space:]]*$d=" "$XUNIT.d/transforms.conf" && found="$found $d"
	done
	check "the drop-in creates no mount namespace${found:+ (found:$found)}" test -z "$found"
	xscore=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p' "$T/sec.xf")
	echo "# systemd-analyze security with the transforms drop-in: ${xscore:-?}"
else
	echo "# skipped systemd-analyze: not installed"
fi
found=""
for d in $NS_DIRECTIVES; do
	grep -qE "^[[:space:]]*$d=" "$UNIT" && found="$found $d"
done
check "no directive that creates a mount namespace${found:+ (found:$found)}" test -z "$found"
for want in "Type=notify" "NotifyAccess=main" "Restart=on-failure" \
	"ExecReload=/bin/kill -HUP \$MAINPID" "NoNewPrivileges=yes" \
	"CapabilityBoundingSet=CAP_SYS_ADMIN" "DeviceAllow=/dev/fuse rw"; do
	check "unit has $want" grep -qxF "$want" "$UNIT"
done
check "ExecStartPre recovers a stale mount" grep -qx \
	"ExecStartPre=$PREFIX/bin/shardfs unmount --stale-only /etc/shardfs/%i.conf" "$UNIT"
check "Restart can recover: RestartSec and a start limit" bash -c \
	"grep -q '^RestartSec=' '$UNIT' && grep -q '^StartLimitBurst=' '$UNIT'"

# --- running its command lines ----------------------------------------------
SRC=$T/src
make_dataset "$SRC" 40
M=$T/mnt
mkdir -p "$M" "$T/etc/shardfs"
cat >"$T/etc/shardfs/test.conf" <<EOF
[source]
url = $SRC
[shard]
world_size = 2
[cache]
dir = $T/cache
[mount]
path = $M
EOF
MOUNTS+=("$(realpath "$M")")

# cmdline KEY: the unit's KEY= command line as systemd would run it for
# instance "test", with /etc/shardfs/ moved under $T.
cmdline() {
	grep "^$1=" "$UNIT" | head -1 | cut -d= -f2- |
		sed -e "s|%i|test|g" -e "s|/etc/shardfs/|$T/etc/shardfs/|g" \
			-e "s|\$MAINPID|${MAINPID:-0}|g"
}
SOCK=$T/notify.sock
NLOG=$T/notify.log
: >"$NLOG"
/usr/bin/python3 "$HERE/notify_listener.py" "$SOCK" "$M" "$NLOG" &
PIDS+=("$!")
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done

# wait_for REGEX [N]: up to 60 s for the N-th (default 1st) matching line.
wait_for() {
	local n=${2:-1}
	for _ in $(seq 600); do
		[ "$(grep -cE "$1" "$NLOG")" -ge "$n" ] && return 0
		sleep 0.1
	done
	return 1
}
# start_service: ExecStartPre, then ExecStart in the background with the
# environment systemd gives a Type=notify service with WatchdogSec=2s.
start_service() {
	local pre
	read -ra pre <<<"$(cmdline ExecStartPre)"
	"${pre[@]}" >"$T/pre.out" 2>&1
	PRE_RC=$?
	local start
	read -ra start <<<"$(cmdline ExecStart)"
	NOTIFY_SOCKET=$SOCK WATCHDOG_USEC=2000000 "${start[@]}" >"$T/svc.log" 2>&1 &
	MAINPID=$!
	PIDS+=("$MAINPID")
}

start_service
check "ExecStartPre on a clean path exits 0 (got $PRE_RC)" test "$PRE_RC" -eq 0
check "READY=1 arrives" wait_for 'READY=1'
# The listener writes its CHECK line after an ls of the mount that follows
# READY=1: wait for that line, not just for READY.
check "READY=1 came only once the mount answered" wait_for '^CHECK READY serving=1'
check "no READY=1 before the mount answered" bash -c "! grep -q '^CHECK READY serving=0' '$NLOG'"
check "STATUS= a human can read: objects, ranks, cache hit rate" grep -qE \
	'^MSG READY=1\|STATUS=serving 40 objects .*ranks 0-1 of 2; cache hit rate' "$NLOG"
# A dataset of a few MiB is not "0.0 GiB": sizes in the unit that fits.
want_size=$(find "$SRC" -type f -printf "%s\n" | awk '{t += $1} END {b = t; split("B KiB MiB GiB", u); i = 1; while (b >= 1024 && i < 4) {b /= 1024; i++}; printf(i > 1 ? "%.1f %s" : "%d %s", b, u[i])}')
check "STATUS= the dataset's size in the unit that fits ($want_size), not 0.0 GiB" grep -qE \
	"^MSG READY=1\\|STATUS=serving 40 objects \\($want_size\\), .*; 0 B read from the source" "$NLOG"
check "WATCHDOG=1 pings with WatchdogSec set" wait_for '^MSG WATCHDOG=1$'
check "STATUS= refreshed after READY" wait_for '^MSG STATUS=serving' 2
cat "$M"/rank-0/train/*/* >/dev/null

read -ra reload <<<"$(cmdline ExecReload)"
"${reload[@]}"
check "ExecReload: RELOADING=1 with MONOTONIC_USEC" wait_for '^MSG RELOADING=1\|MONOTONIC_USEC=[0-9]+\|'
check "ExecReload: READY=1 again after it" wait_for 'READY=1' 2
check "the reload is logged (not silently ignored)" grep -q 'SIGHUP' "$T/svc.log"
check "still serving after SIGHUP" test -d "$M/rank-1"

kill -TERM "$MAINPID"
rc=0
wait "$MAINPID" || rc=$?
check "SIGTERM: exit 0 (got $rc)" test "$rc" -eq 0
check "SIGTERM: STOPPING=1 sent" grep -q '^MSG STOPPING=1' "$NLOG"
check "SIGTERM: the mount is gone" bash -c "! grep -qs ' $(realpath "$M") ' /proc/mounts"

# --- Restart=on-failure after kill -9 -------------------------------------------
: >"$NLOG"
start_service
check "second start: READY=1" wait_for 'READY=1'
kill -9 "$MAINPID"
wait "$MAINPID" 2>/dev/null
stat "$M" >/dev/null 2>"$T/dead.err"
check "kill -9 left a dead mount (ENOTCONN)" grep -q 'Transport endpoint is not connected' "$T/dead.err"
: >"$NLOG"
start_service
check "ExecStartPre cleans the dead mount (exit $PRE_RC)" bash -c \
	"test $PRE_RC -eq 0 && grep -q 'dead FUSE mount' '$T/pre.out'"
check "ExecStart mounts again: READY=1 and serving" bash -c \
	"$(declare -f wait_for); NLOG='$NLOG'; wait_for '^CHECK READY serving=1'"
check "one mount on the path" test "$(grep -c " $(realpath "$M") " /proc/mounts)" -eq 1
if [ "$FAILED" -gt 0 ]; then
	echo "# ExecStartPre said:"; cat "$T/pre.out"
	echo "# the daemon said:"; cat "$T/svc.log"
	echo "# the listener got:"; cat "$NLOG"
fi
kill -TERM "$MAINPID"
rc=0
wait "$MAINPID" || rc=$?
check "final stop: exit 0 (got $rc)" test "$rc" -eq 0

finish
