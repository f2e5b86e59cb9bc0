#!/usr/bin/env bash
# Cache bench: the small-file dataset (ImageNet-like, N files of ~110 KiB)
# read through a shardfs mount right after a remount, so every byte comes
# from the node-local disk cache (LMDB inline entries; the FUSE page cache
# is empty after a remount), against the same files read straight from
# local disk, and against a mount with cache.enabled = false (every read
# goes to the posix source). Files/s, 1 reader and 8 readers, median of
# RUNS runs, each shardfs run on a fresh mount. The OS page cache is warm
# for all three (the bench does not drop caches on a shared machine).
#
# The stats of each cached run are checked: zero backend requests, so the
# figure is the cache's and not the source's.
set -euo pipefail
: "${SHARDFS:?SHARDFS must point at the shardfs binary}"
N=${N:-2000}
RUNS=${RUNS:-3}
T=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-bench-cache.XXXXXX")
M=$T/mnt
PID=
cleanup() {
	if grep -qs " $M " /proc/mounts; then fusermount3 -u "$M" 2>/dev/null || fusermount3 -u -z "$M" || true; fi
	if [ -n "$PID" ]; then wait "$PID" 2>/dev/null || true; fi
	rm -rf "$T"
}
trap cleanup EXIT

/usr/bin/python3 - "$T/src" "$N" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(7)
for i in range(n):
    d = os.path.join(root, "train", "n%08d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "%07d.JPEG" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.randint(80000, 140000)))
PY
mkdir -p "$M"

# readfiles DIR READERS -> files/s over every file under DIR
cat >"$T/read.py" <<'PY'
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
root, readers = sys.argv[1], int(sys.argv[2])
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
def read(chunk):
    for p in chunk:
        with open(p, "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
t0 = time.monotonic()
with ThreadPoolExecutor(readers) as ex:
    list(ex.map(read, [files[i::readers] for i in range(readers)]))
print("%.0f" % (len(files) / (time.monotonic() - t0)))
PY
readfiles() { /usr/bin/python3 "$T/read.py" "$1" "$2"; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

conf() { # conf FILE ENABLED
	printf '[source]\nurl = %s\n[cache]\ndir = %s\nenabled = %s\nsize = 4G\n' \
		"$T/src" "$T/cache" "$2" >"$1"
}
mount_bg() {
	"$SHARDFS" mount "$1" "$M" -f -q 2>"$T/shardfs.log" &
	PID=$!
	for _ in $(seq 100); do
		grep -qs " $M fuse" /proc/mounts && return 0
		sleep 0.1
	done
	echo "mount failed:" >&2; cat "$T/shardfs.log" >&2; exit 1
}
umount_bg() { fusermount3 -u "$M"; wait "$PID"; PID=; }
stat_of() { awk -v n="shardfs_$1" '$1 == n {print $2}' "$M/.shardfs/stats"; }

conf "$T/cached.conf" true
conf "$T/uncached.conf" false
# Fill the cache once (the first epoch).
mount_bg "$T/cached.conf"
readfiles "$M/rank-0" 8 >/dev/null
umount_bg

echo "cache bench: $N files, $(du -sm "$T/src" | cut -f1) MiB, median of $RUNS runs, files/s"
printf '%-36s %10s %10s\n' target 1_reader 8_readers
for readers in 1 8; do
	for _ in $(seq "$RUNS"); do readfiles "$T/src" $readers; done | median >"$T/local.$readers"
	for _ in $(seq "$RUNS"); do
		mount_bg "$T/cached.conf"
		readfiles "$M/rank-0" $readers
		if [ "$(stat_of backend_requests_total)" != 0 ]; then
			echo "cached run made backend requests" >&2; exit 1
		fi
		umount_bg
	done | median >"$T/cached.$readers"
	for _ in $(seq "$RUNS"); do
		mount_bg "$T/uncached.conf"
		readfiles "$M/rank-0" $readers
		umount_bg
	done | median >"$T/uncached.$readers"
done
printf '%-36s %10s %10s\n' "local disk (page cache warm)" "$(cat "$T/local.1")" "$(cat "$T/local.8")"
printf '%-36s %10s %10s\n' "shardfs, disk cache, after remount" "$(cat "$T/cached.1")" "$(cat "$T/cached.8")"
printf '%-36s %10s %10s\n' "shardfs, cache.enabled = false" "$(cat "$T/uncached.1")" "$(cat "$T/uncached.8")"
awk -v c1="$(cat "$T/cached.1")" -v l1="$(cat "$T/local.1")" \
	-v c8="$(cat "$T/cached.8")" -v l8="$(cat "$T/local.8")" \
	'BEGIN {printf "disk cache / local disk: %.2f (1 reader), %.2f (8 readers)\n", c1 / l1, c8 / l8}'
