#!/usr/bin/env bash
# NFS bench (make bench, phase nfs): shardfs over nfs:// (libnfs, no kernel
# mount) against nfs-ganesha on 127.0.0.1, compared with the raw libnfs
# read rate (nfs_raw.c: libnfs' sync API, 1 MiB READs, one context per
# thread, no FUSE, no cache), libnfs' own `nfs-cp` (one process per file:
# what a script gets), and the same files on local disk.
#
# Small files: N ImageNet-like files of ~110 KiB, 1 and 8 readers, cold
# (a fresh shardfs cache; the server's page cache is warm, as is local
# disk's: this machine is shared and caches are not dropped) and warm
# (after a remount: from the shardfs disk cache, no NFS read). Large:
# L files of 64 MiB read one after the other by one reader, cold. Median
# of RUNS runs. Writes docs/BENCHMARKS-nfs.md (OUT overrides; OUT=- only
# prints it) and, with BENCH_RESULTS set (run.sh), nfs.json there for the
# targets table of docs/BENCHMARKS.md.
set -euo pipefail
: "${SHARDFS:?SHARDFS must point at the shardfs binary}"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
N=${N:-2000}
L=${L:-4}
RUNS=${RUNS:-3}
OUT=${OUT:-$ROOT/docs/BENCHMARKS-nfs.md}
T=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-bench-nfs.XXXXXX")
M=$T/mnt
PID=
PIDS=()
cleanup() {
	if grep -qs " $M " /proc/mounts; then fusermount3 -u "$M" 2>/dev/null || fusermount3 -u -z "$M" || true; fi
	if [ -n "$PID" ]; then wait "$PID" 2>/dev/null || true; fi
	local p
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
. "$ROOT/tests/integration/nfs/ganesha.sh"

EXPORT=$T/export
/usr/bin/python3 - "$EXPORT" "$N" "$L" <<'PY'
import os, random, sys
root, n, l = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(7)
for i in range(n):
    d = os.path.join(root, "small", "train", "n%08d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "%07d.JPEG" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.randint(80000, 140000)))
os.makedirs(os.path.join(root, "large"), exist_ok=True)
for i in range(l):
    with open(os.path.join(root, "large", "%02d.bin" % i), "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
PY
ganesha_start "$EXPORT" >/dev/null
cc -O2 -o "$T/nfs_raw" "$HERE/nfs_raw.c" $(pkg-config --cflags --libs libnfs) -lpthread
mkdir -p "$M"
# libnfs' own URLs take the port as nfsport=, not as HOST:PORT.

# readfiles DIR READERS -> "files/s MB/s" over every file under DIR
cat >"$T/read.py" <<'PY'
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
root, readers = sys.argv[1], int(sys.argv[2])
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
def read(chunk):
    n = 0
    for p in chunk:
        with open(p, "rb", buffering=0) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                n += len(b)
    return n
t0 = time.monotonic()
with ThreadPoolExecutor(readers) as ex:
    total = sum(ex.map(read, [files[i::readers] for i in range(readers)]))
dt = time.monotonic() - t0
print("%.0f %.1f" % (len(files) / dt, total / dt / 1e6))
PY
readfiles() { /usr/bin/python3 "$T/read.py" "$1" "$2"; }
# median of "files/s MB/s" lines, by the first field
median() { sort -n | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}'; }
raw() { # raw DIR THREADS -> "files/s MB/s"
	(cd "$EXPORT" && find "$1" -type f | sed 's|^|/|') >"$T/list"
	"$T/nfs_raw" "nfs://127.0.0.1/export?version=4&nfsport=$GANESHA_PORT" "$2" <"$T/list" |
		awk '{printf "%.0f %.1f\n", $1 / $3, $2 / $3 / 1e6}'
}
nfscp() { # nfscp DIR -> "files/s MB/s", one nfs-cp process per file
	(cd "$EXPORT" && find "$1" -type f) >"$T/list"
	local t0 t1 n bytes
	n=$(wc -l <"$T/list")
	bytes=$(cd "$EXPORT" && xargs -d '\n' stat -c %s <"$T/list" | awk '{s += $1} END {print s}')
	t0=$(date +%s.%N)
	while IFS= read -r f; do
		rm -f "$T/cp.out"
		nfs-cp "nfs://127.0.0.1/export/$f?version=4&nfsport=$GANESHA_PORT" "$T/cp.out" >/dev/null
	done <"$T/list"
	t1=$(date +%s.%N)
	awk -v n="$n" -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.0f %.1f\n", n / (z - a), b / (z - a) / 1e6}'
}
conf() { # conf FILE PREFIX CACHEDIR
	printf '[source]\nurl = %s/%s\n[cache]\ndir = %s\nsize = 4G\n' \
		"$NFS_URL" "$2" "$3" >"$1"
}
mount_bg() {
	"$SHARDFS" mount "$1" "$M" -f -q 2>"$T/shardfs.log" &
	PID=$!
	for _ in $(seq 200); do
		grep -qs " $M fuse" /proc/mounts && return 0
		sleep 0.1
	done
	echo "mount failed:" >&2; cat "$T/shardfs.log" >&2; exit 1
}
umount_bg() { fusermount3 -u "$M"; wait "$PID"; PID=; }
stat_of() { awk -v n="shardfs_$1" '$1 == n {print $2}' "$M/.shardfs/stats"; }

# shardfs DATASET READERS KIND(cold|warm) -> "files/s MB/s"
shardfs_run() {
	local ds=$1 readers=$2 kind=$3 cd=$T/cache.$RANDOM$RANDOM
	conf "$T/c.conf" "$ds" "$cd"
	if [ "$kind" = warm ]; then
		mount_bg "$T/c.conf"
		readfiles "$M/rank-0" 8 >/dev/null
		umount_bg
	fi
	mount_bg "$T/c.conf"
	readfiles "$M/rank-0" "$readers"
	if [ "$kind" = warm ] && [ "$(stat_of backend_requests_total)" != 0 ]; then
		echo "warm run made backend requests" >&2; exit 1
	fi
	umount_bg
	rm -rf "$cd"
}

declare -A R
load_start=$(cut -d' ' -f1 /proc/loadavg)
for _ in $(seq "$RUNS"); do readfiles "$EXPORT/small" 1; done | median >"$T/x"; R[local_s1]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do readfiles "$EXPORT/small" 8; done | median >"$T/x"; R[local_s8]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do readfiles "$EXPORT/large" 1; done | median >"$T/x"; R[local_l]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do raw small 1; done | median >"$T/x"; R[raw_s1]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do raw small 8; done | median >"$T/x"; R[raw_s8]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do raw large 1; done | median >"$T/x"; R[raw_l]=$(cat "$T/x")
R[nfscp_s1]=$(nfscp small)
for _ in $(seq "$RUNS"); do nfscp large; done | median >"$T/x"; R[nfscp_l]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do shardfs_run small 1 cold; done | median >"$T/x"; R[sfs_s1]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do shardfs_run small 8 cold; done | median >"$T/x"; R[sfs_s8]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do shardfs_run small 1 warm; done | median >"$T/x"; R[sfs_w1]=$(cat "$T/x")
for _ in $(seq "$RUNS"); do shardfs_run large 1 cold; done | median >"$T/x"; R[sfs_l]=$(cat "$T/x")

load_end=$(cut -d' ' -f1 /proc/loadavg)
f() { echo "${R[$1]}" | cut -d' ' -f1; }
mb() { echo "${R[$1]}" | cut -d' ' -f2; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
small_mb=$(du -sm "$EXPORT/small" | cut -f1)
if [ -n "${BENCH_RESULTS:-}" ]; then
	printf '{"sfs_s1": %s, "raw_s1": %s, "sfs_s8": %s, "raw_s8": %s, "sfs_l_mb": %s, "raw_l_mb": %s, "runs": %s}\n' \
		"$(f sfs_s1)" "$(f raw_s1)" "$(f sfs_s8)" "$(f raw_s8)" "$(mb sfs_l)" "$(mb raw_l)" "$RUNS" \
		>"$BENCH_RESULTS/nfs.json"
fi
report() {
	echo "# Benchmarks: nfs:// (libnfs, no kernel mount)"
	echo
	echo "Written by \`make bench\` (\`tests/bench/nfs.sh\`, phase \`nfs\`); do not edit by hand, rerun."
	echo "Run of $(date -u '+%Y-%m-%d %H:%M') UTC, shardfs commit \`$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)\`,"
	echo "nfs-ganesha $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null || echo '?') (NFSv4.0, VFS FSAL) and libnfs $(dpkg-query -W -f='${Version}' libnfs-dev 2>/dev/null || echo '?') on 127.0.0.1, median of $RUNS runs."
	echo "**A noisy machine**: 2 cores shared with other work while this ran (1-minute load average $load_start at the"
	echo "start, $load_end at the end); compare rows of one run, not across runs. The server (one ganesha process) shares"
	echo "those cores with the client and with everything else running."
	echo
	echo "Data: $N small files of 80-140 KB ($small_mb MiB) and $L files of 64 MiB. \"Cold\" is a fresh shardfs"
	echo "cache; the server's page cache is warm for every row (caches are not dropped on a shared machine), so"
	echo "the NFS rows measure the protocol path, not a disk. \"Warm\" is a second pass after a remount, served"
	echo "from shardfs' disk cache with no NFS read. Raw libnfs is \`tests/bench/nfs_raw.c\`: libnfs' sync"
	echo "API, 1 MiB READs, one context per thread, no FUSE and no cache: the limit for a libnfs client here."
	echo "\`nfs-cp\` is libnfs' own copy tool, one process (and one NFS mount) per file."
	echo
	echo "| target | small 1 reader cold | small 8 readers cold | small 1 reader warm | large seq cold |"
	echo "|---|---|---|---|---|"
	echo "| raw libnfs (1 / 8 contexts) | $(f raw_s1) files/s | $(f raw_s8) files/s | | $(mb raw_l) MB/s |"
	echo "| nfs-cp, a process per file | $(f nfscp_s1) files/s | | | $(mb nfscp_l) MB/s |"
	echo "| shardfs over nfs:// | $(f sfs_s1) files/s | $(f sfs_s8) files/s | $(f sfs_w1) files/s | $(mb sfs_l) MB/s |"
	echo "| local disk (page cache warm) | $(f local_s1) files/s | $(f local_s8) files/s | | $(mb local_l) MB/s |"
	echo
	echo "| ratio | value |"
	echo "|---|---|"
	echo "| shardfs ÷ raw libnfs, small, 1 reader cold | $(ratio "$(f sfs_s1)" "$(f raw_s1)") |"
	echo "| shardfs ÷ raw libnfs, small, 8 readers cold | $(ratio "$(f sfs_s8)" "$(f raw_s8)") |"
	echo "| shardfs ÷ raw libnfs, large sequential cold | $(ratio "$(mb sfs_l)" "$(mb raw_l)") |"
	echo "| shardfs warm ÷ local disk, small, 1 reader | $(ratio "$(f sfs_w1)" "$(f local_s1)") |"
}
if [ "$OUT" = - ]; then
	report
else
	report >"$OUT"
	cat "$OUT"
fi
