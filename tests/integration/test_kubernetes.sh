#!/usr/bin/env bash
# contrib/kubernetes/ without a cluster (none runs here): cluster/
# check_k8s.py parses every YAML document and checks the fields a shardfs
# deployment depends on (privileged, /dev/fuse CharDevice, hostPath
# DirectoryOrCreate cache and mount dirs, Bidirectional on the daemon's
# mount volume and HostToContainer on the trainer's, the preStop hook and
# the readiness probe on the config's mount path, ...). Then the real binary
# runs what the manifests would run: the ConfigMap's config plans and mounts
# (source pointed at a local directory), the readiness probe's command fails
# before the mount and passes after, the init container's command leaves a
# live mount alone and clears a dead one (a daemon killed with SIGKILL), the
# preStop hook's command unmounts it (lazily while a file is open) and the
# daemon exits 0; the Dockerfile's packages provide every library
# the binary needs; and the checker notices a broken DaemonSet.
SUITE=kubernetes
. "$(dirname "$0")/lib.sh"
K8S=$(cd "$HERE/../../contrib/kubernetes" && pwd)

if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
	fail "python3-yaml is not installed (scripts/install-deps.sh installs it)"
	finish
fi
echo "# no Kubernetes cluster runs here: the manifests are checked, not applied"
OUT=$T/k8s
mkdir -p "$OUT"
/usr/bin/python3 "$HERE/cluster/check_k8s.py" "$K8S" "$OUT" >"$T/check.out" 2>&1
while IFS= read -r line; do
	case $line in
	"ok - "*) ok "${line#ok - }" ;;
	"FAIL - "*) fail "${line#FAIL - }" ;;
	*) echo "$line" ;;
	esac
done <"$T/check.out"
if [ ! -s "$OUT/dataset.conf" ]; then
	fail "the ConfigMap's dataset.conf was not extracted"
	finish
fi

# --- the ConfigMap's config with the real binary ---------------------------------
SRC=$T/src
make_dataset "$SRC" 60
CONF=$OUT/dataset.conf
MPATH=$(cat "$OUT/mount_path")
"$SHARDFS" plan "$CONF" -o "source.url=$SRC" >"$T/plan" 2>"$T/plan.err"
check "shardfs plan accepts the ConfigMap's config (source at a local dir)" test $? -eq 0
check "its world_size is the trainer Job's completions" \
	grep -q "^world_size $(sed -n 's/^world_size = //p' "$CONF")\$" "$T/plan"

# run_hook JSON: runs a probe's or hook's command with the config's mount
# path replaced by this suite's mountpoint.
M=$T/mnt
run_hook() {
	/usr/bin/python3 - "$1" "$MPATH" "$M" <<'PY'
import json, subprocess, sys
cmd = [a.replace(sys.argv[2], sys.argv[3]) for a in json.load(open(sys.argv[1]))]
sys.exit(subprocess.run(cmd, timeout=60).returncode)
PY
}
# The image has shardfs on PATH; here it is the binary under test.
PATH=$(dirname "$SHARDFS"):$PATH
mounted() { grep -qs " $M " /proc/mounts; }
mkdir -p "$M"
run_hook "$OUT/ready.json"
check "the readiness probe fails before the mount" test $? -ne 0
if mount_shardfs "$CONF" "$M" -o "source.url=$SRC,cache.dir=$T/cache"; then
	check "the readiness probe passes once it serves" run_hook "$OUT/ready.json"
	check "the mount serves the dataset" /usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC"
	pid=$LAST_PID
	check "the init container's command (a pod start) leaves a live mount alone" run_hook "$OUT/init.json"
	check "... which still serves" /usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC"
	check "the preStop hook unmounts it" run_hook "$OUT/prestop.json"
	rc=0
	wait "$pid" || rc=$?
	check "the daemon then exits 0 (exit $rc)" test $rc -eq 0
	check "nothing is left mounted" bash -c "! grep -qs ' $M ' /proc/mounts"
else
	fail "the ConfigMap's config mounts"
fi
# A trainer still holds a file: the preStop hook's clean unmount fails,
# its fallback detaches lazily; the daemon exits once the file is closed.
if mount_shardfs "$CONF" "$M" -o "source.url=$SRC,cache.dir=$T/cache"; then
	pid=$LAST_PID
	exec 9<"$(find "$M" -type f -size +0 | head -n 1)"
	check "a busy mount: the preStop hook detaches it (clean first, then --lazy)" run_hook "$OUT/prestop.json"
	check "a busy mount: it is gone from the mount table" bash -c "$(declare -f mounted); M='$M'; ! mounted"
	exec 9<&-
	rc=0
	wait "$pid" || rc=$?
	check "a busy mount: the daemon exits 0 once the file is closed (exit $rc)" test $rc -eq 0
	if [ "$rc" -ne 0 ]; then
		echo "# the daemon's log:"
		sed 's/^/#   /' "$LAST_LOG"
	fi
else
	fail "the ConfigMap's config mounts (busy)"
fi
# A daemon killed hard leaves a dead mount (ENOTCONN): the next pod's init
# container clears it and the mountpoint is there again.
if mount_shardfs "$CONF" "$M" -o "source.url=$SRC,cache.dir=$T/cache"; then
	kill -9 "$LAST_PID"
	wait "$LAST_PID" 2>/dev/null
	check "a dead mount: stat fails on it (ENOTCONN)" bash -c "! stat '$M' >/dev/null 2>&1"
	check "a dead mount: the init container's command succeeds" run_hook "$OUT/init.json"
	check "a dead mount: cleared, the mountpoint is a directory again" bash -c \
		"$(declare -f mounted); M='$M'; ! mounted && test -d '$M'"
else
	fail "the ConfigMap's config mounts (dead)"
fi

# --- the image's packages cover the binary's libraries ------------------------------
missing=""
for lib in $(readelf -d "$SHARDFS" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
	path=$(ldd "$SHARDFS" | awk -v n="$lib" '$1 == n {print $3}')
	pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null || dpkg -S "${path#/usr}" 2>/dev/null)
	pkg=${pkg%%:*}
	case $pkg in
	libc6) ;; # in the base image
	# A sanitizer build's runtime (make SAN=1 / SAN=thread check) is not
	# what an image ships.
	libasan[0-9]* | libubsan[0-9]* | libtsan[0-9]* | liblsan[0-9]*) ;;
	'') missing="$missing $lib(no package)" ;;
	*) grep -qx "$pkg" "$OUT/docker-packages" || missing="$missing $pkg" ;;
	esac
done
check "the Dockerfile installs every library the binary links${missing:+ (missing:$missing)}" test -z "$missing"

# --- the checker is not blind ---------------------------------------------------------
mkdir -p "$T/broken" "$T/broken.out"
cp "$K8S"/*.yaml "$T/broken/"
sed -i 's/mountPropagation: Bidirectional/mountPropagation: HostToContainer/' "$T/broken/shardfs-daemonset.yaml"
/usr/bin/python3 "$HERE/cluster/check_k8s.py" "$T/broken" "$T/broken.out" >"$T/broken.log" 2>&1
check "the checker fails a DaemonSet without Bidirectional" bash -c \
	"test $? -ne 0 && grep -q '^FAIL - DaemonSet: the config.s mount path' '$T/broken.log'"

finish
