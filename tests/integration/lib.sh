# Shared helpers for the integration suites; source it from test_*.sh.
#
# Every suite gets its own temp dir ($T), counts results with ok/fail, and
# on exit (normal, failure or signal) unmounts every mount it made and stops
# only the processes it started, by PID. End a suite with `finish`, which
# prints the closing "N passed, N failed" line and sets the exit status.

set -u

# Every server a suite talks to is on this machine: a proxy from the
# environment (curl and libcurl honour these, even for 127.0.0.1) would
# put another server between the test and what it tests.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
export NO_PROXY=127.0.0.1,localhost,::1 no_proxy=127.0.0.1,localhost,::1

: "${SHARDFS:?SHARDFS must point at the shardfs binary}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-test.XXXXXX")
PASSED=0
FAILED=0
MOUNTS=()
PIDS=()
declare -A LOG_OF # daemon PID -> its log, for a failure's report

cleanup() {
	local m p
	for m in "${MOUNTS[@]+"${MOUNTS[@]}"}"; do
		if grep -qs " $m " /proc/mounts; then
			fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null || true
		fi
	done
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do
		if kill -0 "$p" 2>/dev/null; then
			kill "$p" 2>/dev/null || true
			for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
			kill -9 "$p" 2>/dev/null || true
		fi
	done
	# Background mounts without a log daemon write the fallback file
	# [log] dir/MOUNTNAME.log (/var/log/shardfs by default; MOUNTNAME is
	# the mount point's path with '/' as '-'): this suite's, by $T's name.
	local fb=${T#/}
	rm -f /var/log/shardfs/"${fb//\//-}"-*.log /var/log/shardfs/"${fb//\//-}"-*.log.[0-9]*
	# KEEP_T=1 keeps it (daemon logs, caches) for a post-mortem.
	[ -n "${KEEP_T:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL - $1${2:+: $2}"; }

# check NAME CMD...: ok if CMD succeeds.
check() {
	local name=$1; shift
	if "$@"; then ok "$name"; else fail "$name" "command failed: $*"; fi
}

finish() {
	echo "${SUITE:-suite}: $PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
	exit $?
}

is_mounted() { grep -qs " $(realpath "$1") fuse" /proc/mounts; }

# mount_shardfs CONFIG MOUNTPOINT [ARGS...]: starts shardfs in the
# foreground (so its PID is ours), waits until the mount serves. Log in
# $T/shardfs.<n>.log. Returns non-zero if it did not come up in 20 s.
mount_shardfs() {
	local conf=$1 mnt=$2; shift 2
	local log="$T/shardfs.${#PIDS[@]}.log"
	mkdir -p "$mnt"
	local pre=()
	if [ "${1:-}" = --sigint-default ]; then
		shift
		pre=(/usr/bin/python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])')
	fi
	"${pre[@]+"${pre[@]}"}" "$SHARDFS" mount "$conf" "$mnt" -f "$@" >"$log" 2>&1 &
	local pid=$!
	PIDS+=("$pid")
	MOUNTS+=("$(realpath "$mnt")")
	LOG_OF[$pid]=$log
	LAST_PID=$pid
	LAST_LOG=$log
	for _ in $(seq 200); do
		if is_mounted "$mnt"; then
			wait_serving "$log"
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "shardfs exited early:" >&2; cat "$log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "shardfs did not mount in 20 s:" >&2; cat "$log" >&2
	return 1
}

# wait_serving LOG: waits (up to 10 s) for the "MOUNTPOINT: serving N
# objects ..." line the daemon's ready hook logs. The mount shows in
# /proc/mounts before the daemon has answered its own readiness stat() of
# the mountpoint; an unmount while that stat is in flight fails with EBUSY
# (seen under ThreadSanitizer, where the first answers are slow).
# `shardfs mount` without -f and systemd's READY=1 come after that line,
# so only suites that poll /proc/mounts need this. A daemon logging
# elsewhere ([log] file) or above info just costs the wait.
wait_serving() {
	for _ in $(seq 100); do
		grep -qs ': serving [0-9]* objects' "$1" && return 0
		sleep 0.1
	done
	return 0
}

# umount_shardfs MOUNTPOINT: unmounts and waits for the daemon to exit.
# Returns the daemon's exit status.
umount_shardfs() {
	local mnt=$1 pid=${2:-$LAST_PID}
	# The daemon's pusher lists a directory of the mount for a moment
	# after reads (fs/kernel.c): busy then, as shardfs unmount knows.
	local tries=0
	until fusermount3 -u "$mnt" 2>"$T/.umount.err"; do
		tries=$((tries + 1))
		if ! grep -q busy "$T/.umount.err" || [ "$tries" -ge 20 ]; then
			cat "$T/.umount.err" >&2
			return 1
		fi
		sleep 0.1
	done
	local rc=0
	wait "$pid" || rc=$?
	if [ "$rc" -ne 0 ]; then
		# The suite's temp dir goes at exit: show why now.
		echo "# the daemon (pid $pid) exited $rc; the end of its log:"
		tail -n 30 "${LOG_OF[$pid]:-/dev/null}" | sed 's/^/#   /'
	fi
	return $rc
}

# make_dataset DIR N: an ImageNet-like tree, train/<class>/<id>.JPEG, N
# files of 1 byte to ~64 KiB (some empty), deterministic content.
make_dataset() {
	/usr/bin/python3 - "$1" "$2" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(1234)
for i in range(n):
    cls = "n%08d" % (i % 7)
    d = os.path.join(root, "train", cls)
    os.makedirs(d, exist_ok=True)
    size = 0 if i % 50 == 0 else rnd.randint(1, 65536)
    with open(os.path.join(d, "%06d.JPEG" % i), "wb") as f:
        f.write(rnd.randbytes(size))
PY
}
