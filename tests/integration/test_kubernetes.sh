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
# daemon exits 0; the trainer Job's command reads every file of its rank on
# a mount whose keys need the order file's %XX escapes and that has pads;
# the DaemonSet tolerates GPU nodes' taints; the Dockerfile builds shardfs
# in a build stage from the repository's sources with Debian's -dev
# packages (no engine runs here: the suite copies what the stage copies and
# runs its commands) and its runtime stage installs exactly the packages of
# the libraries the binary links, fuse3 and ca-certificates; and the checker
# notices a broken DaemonSet.
SUITE=kubernetes
. "$(dirname "$0")/lib.sh"
K8S=$(cd "$HERE/../../contrib/kubernetes" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

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

# --- the trainer's command on a real mount -------------------------------------------
# Keys that need the order file's escapes (%, TAB, a byte that is not
# UTF-8) and pads (balance = pad): the trainer must read every file of its
# rank, unescaping the keys and skipping the pads.
SRC2=$T/src2
cp -r "$SRC" "$SRC2"
mkdir -p "$SRC2/odd"
printf 'percent' >"$SRC2/odd/100%.bin"
printf 'tab' >"$SRC2/odd/a"$'\t'"b.bin"
printf 'latin1' >"$SRC2/odd/caf"$'\xe9'".bin"
printf 'escape-lookalike' >"$SRC2/odd/%41.bin"
printf 'newline' >"$SRC2/odd/new"$'\n'"line.bin" # 65 files on 4 ranks: 3 pads
if [ -s "$OUT/trainer.json" ] &&
	mount_shardfs "$CONF" "$M" -o "source.url=$SRC2,cache.dir=$T/cache2,shard.balance=pad"; then
	world=$(sed -n 's/^world_size //p' "$M/.shardfs/plan")
	check "the trainer test has pads (balance = pad)" grep -q $'\tpad$' "$M"/.shardfs/rank-*.order
	troot=$(cat "$OUT/trainer_root")
	total=0
	for ((r = 0; r < world; r++)); do
		want=$(find "$M/rank-$r" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
		got=$(RANK=$r /usr/bin/python3 - "$OUT/trainer.json" "$troot" "$M" <<'PY' 2>"$T/trainer.err"
import json, subprocess, sys
cmd = [a.replace(sys.argv[2], sys.argv[3]) for a in json.load(open(sys.argv[1]))]
r = subprocess.run(cmd, timeout=120, stdout=subprocess.PIPE)
sys.stdout.write(r.stdout.decode().strip())
sys.exit(r.returncode)
PY
		)
		rc=$?
		check "the trainer's command reads every byte of rank $r's files (got ${got:-nothing}, want $want, exit $rc)" \
			test "$rc" -eq 0 -a "$got" = "$want"
		[ "$rc" -eq 0 ] || sed 's/^/#   /' "$T/trainer.err" | tail -5
		total=$((total + want))
	done
	check "... and the ranks' files are the whole dataset ($total bytes)" \
		test "$total" -eq "$(find "$SRC2" -type f -printf '%s\n' | awk '{s += $1} END {print s}')"
	umount_shardfs "$M" || fail "unmount (trainer)"
else
	fail "the trainer's command was not extracted, or the mount for it failed"
fi

# --- the image: built from the repository, only the runtime libraries it needs ------
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
	*)
		echo "$pkg" >>"$T/needed-packages"
		grep -qsx "$pkg" "$OUT/docker-packages" || missing="$missing $pkg"
		;;
	esac
done
check "the Dockerfile installs every library the binary links${missing:+ (missing:$missing)}" test -z "$missing"
# And nothing else: the packages of those libraries, fusermount3 (fuse3) and
# the CA certificates for TLS to S3 and GCS.
extra=""
for pkg in $(cat "$OUT/docker-packages" 2>/dev/null); do
	case $pkg in
	ca-certificates | fuse3) continue ;;
	esac
	grep -qx "$pkg" "$T/needed-packages" || extra="$extra $pkg"
done
check "the Dockerfile's runtime stage installs no package the binary does not need${extra:+ (extra:$extra)}" \
	test -s "$OUT/docker-packages" -a -z "$extra"

# The build stage's packages provide every pkg-config module the Makefile
# builds with (the .pc file's package).
mods=$(printf 'print-pkgs:\n\t@echo $(PKGS)\n' |
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$ROOT" -f Makefile -f - print-pkgs)
nopc=""
for mod in $mods; do
	pc=$(pkg-config --path "$mod" 2>/dev/null)
	pkg=$(dpkg -S "$(realpath "$pc" 2>/dev/null)" 2>/dev/null || dpkg -S "$pc" 2>/dev/null)
	pkg=${pkg%%:*}
	grep -qx "${pkg:-?}" "$OUT/docker-build-packages" 2>/dev/null || nopc="$nopc $mod(${pkg:-no package})"
done
check "the build stage installs the -dev package of every pkg-config module ($(echo $mods))${nopc:+ (missing:$nopc)}" \
	test -n "$mods" -a -z "$nopc"

# No container engine runs here: do what the build stage does, in a
# directory holding only what it copies from the repository.
CTX=$T/ctx
mkdir -p "$CTX"
copied=1
while IFS= read -r p; do
	[ -n "$p" ] || continue
	case $p in "!"*) copied=0; continue ;; esac
	(cd "$ROOT" && cp -r --parents "${p%/}" "$CTX/") || copied=0
done < <(cat "$OUT/docker-build-copies" 2>/dev/null)
check "the build stage's COPY sources exist in the repository" test "$copied" -eq 1 -a -s "$OUT/docker-build-copies"
if [ "$copied" -eq 1 ] && [ -s "$OUT/docker-build-run" ]; then
	(cd "$CTX" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL nice -n 10 sh -e "$OUT/docker-build-run") \
		>"$T/ctx-build.log" 2>&1
	rc=$?
	check "the build stage's commands build shardfs from those sources alone (exit $rc)" \
		test "$rc" -eq 0 -a -x "$CTX/build/shardfs"
	[ "$rc" -eq 0 ] || tail -n 20 "$T/ctx-build.log" | sed 's/^/#   /'
	check "... and that binary runs (--version)" "$CTX/build/shardfs" --version
else
	fail "the build stage's commands were not extracted"
fi

# --- the checker is not blind ---------------------------------------------------------
mkdir -p "$T/broken" "$T/broken.out"
cp "$K8S"/*.yaml "$T/broken/"
sed -i 's/mountPropagation: Bidirectional/mountPropagation: HostToContainer/' "$T/broken/shardfs-daemonset.yaml"
/usr/bin/python3 "$HERE/cluster/check_k8s.py" "$T/broken" "$T/broken.out" >"$T/broken.log" 2>&1
check "the checker fails a DaemonSet without Bidirectional" bash -c \
	"test $? -ne 0 && grep -q '^FAIL - DaemonSet: the config.s mount path' '$T/broken.log'"
# Without the GPU tolerations, and with the host's binary copied in one stage.
mkdir -p "$T/broken2" "$T/broken2.out"
cp "$K8S"/*.yaml "$T/broken2/"
sed -i '/^      tolerations:/,/^      [a-z]/{/^      tolerations:/d;/^        /d}' "$T/broken2/shardfs-daemonset.yaml"
printf 'FROM debian:12-slim\nRUN apt-get install -y fuse3 libinih1\nCOPY build/shardfs /usr/local/bin/shardfs\n' \
	>"$T/broken2/Dockerfile"
/usr/bin/python3 "$HERE/cluster/check_k8s.py" "$T/broken2" "$T/broken2.out" >"$T/broken2.log" 2>&1
check "the checker fails a DaemonSet without tolerations for GPU nodes" bash -c \
	"test $? -ne 0 && grep -q '^FAIL - DaemonSet: runs on GPU nodes tainted nvidia.com/gpu' '$T/broken2.log'"
check "the checker fails a one-stage Dockerfile" \
	grep -q '^FAIL - Dockerfile: two stages' "$T/broken2.log"

finish
