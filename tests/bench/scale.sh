#!/usr/bin/env bash
# Scale bench: load a 1,000,000-entry manifest and compute the shard plan
# (`shardfs plan`, the same code a mount runs before it serves), and report
# wall time and peak RSS per entry beyond the key bytes. Run twice: with the
# manifest in canonical order (as `shardfs manifest` writes it) and shuffled
# (a hand-made or foreign listing, which must be sorted).
set -euo pipefail
: "${SHARDFS:?SHARDFS must point at the shardfs binary}"
N=${N:-1000000}
T=$(mktemp -d "${TMPDIR:-/tmp}/shardfs-scale.XXXXXX")
trap 'rm -rf "$T"' EXIT

/usr/bin/python3 - "$T" "$N" <<'PY'
import random, sys
t, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(7)
lines = []
for i in range(n):
    key = "train/n%08d/n%08d_%07d.JPEG" % (i % 1000, i % 1000, i)
    size = rnd.randint(2000, 400000)
    mtime = 1700000000000000000 + i
    lines.append("%s\t%d\t%d:%d:%d\t%d\n" % (key, size, mtime, size, 1000000 + i, mtime))
lines.sort()
with open(t + "/sorted.tsv", "w") as f:
    f.write("# shardfs-manifest v1\n"); f.writelines(lines)
rnd.shuffle(lines)
with open(t + "/shuffled.tsv", "w") as f:
    f.write("# shardfs-manifest v1\n"); f.writelines(lines)
with open(t + "/empty.tsv", "w") as f:
    f.write("# shardfs-manifest v1\n")
with open(t + "/keybytes", "w") as f:
    f.write(str(sum(len(l.split("\t", 1)[0]) for l in lines)))
PY
keybytes=$(cat "$T/keybytes")

run() { # run MANIFEST -> "wall_s peak_kib"
	cat >"$T/scale.conf" <<CONF
[source]
url = /nonexistent
manifest = $1
# The baseline run loads an empty manifest, which a mount refuses unless
# asked (allow_empty); the key changes nothing for the full ones.
allow_empty = true
[shard]
world_size = 64
CONF
	/usr/bin/time -f '%e %M' -o "$T/time" "$SHARDFS" plan "$T/scale.conf" >"$T/plan.out"
	cat "$T/time"
}
read -r _ base_kib < <(run "$T/empty.tsv")
echo "shardfs plan, $N entries, world_size 64 (baseline RSS ${base_kib} KiB, key bytes $keybytes)"
printf '%-22s %8s %10s %22s\n' manifest wall_s peak_MiB bytes/entry_beyond_keys
for m in sorted shuffled; do
	read -r wall kib < <(run "$T/$m.tsv")
	per=$(( ((kib - base_kib) * 1024 - keybytes) / N ))
	printf '%-22s %8s %10d %22d\n' "$m" "$wall" $((kib / 1024)) "$per"
done
grep -E '^(manifest_items|imbalance_bytes)' "$T/plan.out"
