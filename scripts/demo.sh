#!/usr/bin/env bash
# make demo: generates a small ImageNet-like dataset, mounts it as 4 ranks,
# shows what each rank sees, reads every file back through the mount and
# compares it with the source, then unmounts. Leaves nothing behind.
set -euo pipefail
: "${SHARDFS:?SHARDFS must point at the shardfs binary}"

T=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-demo.XXXXXX")
PID=""
cleanup() {
	if grep -qs " $T/mnt " /proc/mounts; then fusermount3 -u "$T/mnt" || true; fi
	if [ -n "$PID" ]; then wait "$PID" 2>/dev/null || true; fi
	rm -rf "$T"
}
trap cleanup EXIT

echo "== generating a demo dataset in $T/imagenet"
/usr/bin/python3 - "$T/imagenet" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(2026)
classes = ["n01440764", "n01443537", "n01484850", "n01491361", "n01494475",
           "n01496331", "n01498041", "n01514668"]
for i in range(400):
    d = os.path.join(root, "train", classes[i % len(classes)])
    os.makedirs(d, exist_ok=True)
    # ImageNet JPEGs are ~110 KiB on average, from a few KiB up.
    size = int(min(400_000, max(2_000, rnd.lognormvariate(11.4, 0.6))))
    with open(os.path.join(d, "%s_%05d.JPEG" % (os.path.basename(d), i)), "wb") as f:
        f.write(rnd.randbytes(size))
PY
n_src=$(find "$T/imagenet" -type f | wc -l)
b_src=$(find "$T/imagenet" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
echo "   $n_src files, $b_src bytes"

cat >"$T/demo.conf" <<CONF
[source]
url = $T/imagenet
[shard]
world_size = 4
seed = 42
[cache]
dir = $T/cache
CONF
mkdir -p "$T/mnt"
echo "== shardfs mount $T/demo.conf $T/mnt"
"$SHARDFS" mount "$T/demo.conf" "$T/mnt" -f 2>"$T/shardfs.log" &
PID=$!
for _ in $(seq 100); do
	grep -qs " $T/mnt fuse" /proc/mounts && break
	kill -0 "$PID" 2>/dev/null || { cat "$T/shardfs.log"; exit 1; }
	sleep 0.1
done
grep -qs " $T/mnt fuse" /proc/mounts || { echo "mount did not come up"; cat "$T/shardfs.log"; exit 1; }

echo "== what each rank sees"
printf '   %-8s %7s %12s\n' rank files bytes
for r in 0 1 2 3; do
	n=$(find "$T/mnt/rank-$r" -type f | wc -l)
	b=$(find "$T/mnt/rank-$r" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	printf '   %-8s %7d %12d\n' "rank-$r" "$n" "$b"
done
echo "   plan digest (manifest sha256): $(awk '$1 == "manifest_sha256" {print $2}' "$T/mnt/.shardfs/plan")"
echo "   rank-0 reads first: $(head -3 "$T/mnt/.shardfs/rank-0.order" | tr '\n' ' ')..."

echo "== reading every file through the mount and comparing with the source"
start=$(date +%s.%N)
checked=0
bad=0
for r in 0 1 2 3; do
	while IFS= read -r -d '' f; do
		rel=${f#"$T/mnt/rank-$r/"}
		if cmp -s "$f" "$T/imagenet/$rel"; then
			checked=$((checked + 1))
		else
			echo "   MISMATCH: rank-$r/$rel"
			bad=$((bad + 1))
		fi
	done < <(find "$T/mnt/rank-$r" -type f -print0)
done
end=$(date +%s.%N)
echo "   $checked of $n_src files byte-identical, $bad mismatched ($(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') s)"

fusermount3 -u "$T/mnt"
wait "$PID"
PID=""
echo "== unmounted cleanly"
if [ "$checked" -ne "$n_src" ] || [ "$bad" -ne 0 ]; then
	echo "demo FAILED"
	exit 1
fi
echo "demo OK"
