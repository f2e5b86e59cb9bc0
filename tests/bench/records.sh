#!/usr/bin/env bash
# Record views bench (issue 13), part of `make bench` (phase "records"):
#   1. scale: a mount with a pinned record index of N (1,000,000) records:
#      time until it serves, and the daemon's RAM per record (its peak RSS
#      beside the same manifest mounted as objects);
#   2. on s3rver, an uncompressed TFRecord dataset of large records:
#      `shardfs index` build rate vs raw curl reading the same objects
#      (1 and 8 connections); then rank 0 of 4 reads its parts one after
#      the other, cold, vs raw curl fetching the same record extents in the
#      same order (ranged GETs on one connection, and on 8).
# Prints a table and writes docs/BENCHMARKS-records.md (BENCH_RECORDS_OUT=-
# leaves it alone) and, with BENCH_RESULTS set (run.sh), records.json there
# for the targets table of docs/BENCHMARKS.md. Knobs: BENCH_RECORDS_N
# [1000000], BENCH_RECORDS_OBJECTS [24]. Only 127.0.0.1 is contacted; everything started is stopped by PID.
set -uo pipefail
SUITE=bench-records
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$ROOT/tests/integration/lib.sh"
. "$ROOT/tests/integration/s3/s3rver.sh"
N=${BENCH_RECORDS_N:-1000000}
OBJS=${BENCH_RECORDS_OBJECTS:-24}
OUT=${BENCH_RECORDS_OUT:-$ROOT/docs/BENCHMARKS-records.md}
R="/usr/bin/python3 $ROOT/tests/integration/records.py"
now() { date +%s.%N; }
rate() { awk -v b="$1" -v s="$2" 'BEGIN {printf "%.1f", b / 1e6 / s}'; }
daemon_kib() { # daemon_kib MOUNTPOINT FIELD: VmHWM/VmRSS of its daemon
	local pid
	pid=$(pgrep -f "shardfs mount $T/.*$1" | head -1)
	awk -v f="$2:" '$1 == f {print $2}' "/proc/$pid/status"
}

# --- 1. scale -----------------------------------------------------------------
mkdir -p "$T/empty"
/usr/bin/python3 - "$T" "$N" <<'PY'
import hashlib, random, sys
t, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(5)
objs = 100
per = n // objs
with open(t + "/m.tsv", "w") as f:
    f.write("# shardfs-manifest v1\n")
    lens = []
    for o in range(objs):
        l = [rnd.randint(100, 2000) for _ in range(per)]
        lens.append(l)
        f.write("o%03d.tfrecord\t%d\te%d\t%d\n" % (o, sum(l), o, 1700000000000000000))
with open(t + "/lens", "w") as f:
    for l in lens:
        f.write(" ".join(map(str, l)) + "\n")
PY
cat >"$T/scale-obj.conf" <<CONF
[source]
url = $T/empty
manifest = $T/m.tsv
[shard]
world_size = 8
[cache]
enabled = false
CONF
MD=$("$SHARDFS" plan "$T/scale-obj.conf" | awk '$1 == "manifest_sha256" {print $2}')
/usr/bin/python3 - "$T" "$MD" <<'PY'
import hashlib, sys
t, md = sys.argv[1], sys.argv[2]
lens = [list(map(int, l.split())) for l in open(t + "/lens")]
out = ["# shardfs-records v1\n", "format tfrecord\n", "manifest %s\n" % md,
       "objects %d records %d skipped 0\n" % (len(lens), sum(map(len, lens)))]
for o, l in enumerate(lens):
    out.append("o o%03d.tfrecord\te%d\t%d\t%d\t%d\t-\n" % (o, o, sum(l), sum(l), len(l)))
    out.extend("%d\n" % x for x in l)
body = "".join(out).encode()
with open(t + "/scale.idx", "wb") as f:
    f.write(body + b"end " + hashlib.sha256(body).hexdigest().encode() + b"\n")
PY
sed 's/^world_size = 8/world_size = 8\nunit = record/' "$T/scale-obj.conf" >"$T/scale-rec.conf"
printf '[records]\nformat = tfrecord\nindex = %s\n' "$T/scale.idx" >>"$T/scale-rec.conf"
scale() { # scale CONF MNT -> "seconds hwm_kib rss_kib"
	mkdir -p "$2"
	local t0 t1
	t0=$(now)
	"$SHARDFS" mount "$1" "$2" >"$T/scale.log" 2>&1 || { cat "$T/scale.log" >&2; return 1; }
	t1=$(now)
	MOUNTS+=("$2")
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') $(daemon_kib "$2" VmHWM) $(daemon_kib "$2" VmRSS)"
	fusermount3 -u "$2"
}
read -r obj_s obj_hwm obj_rss < <(scale "$T/scale-obj.conf" "$T/mnt-scale-obj")
read -r rec_s rec_hwm rec_rss < <(scale "$T/scale-rec.conf" "$T/mnt-scale-rec")
per_hwm=$(( (rec_hwm - obj_hwm) * 1024 / N ))
per_rss=$(( (rec_rss - obj_rss) * 1024 / N ))
echo "scale: $N records: mount ${rec_s} s (objects: ${obj_s} s); peak RSS $((rec_hwm / 1024)) MiB vs $((obj_hwm / 1024)) MiB: $per_hwm B/record at peak, $per_rss B/record resident"

# --- 2. s3rver ------------------------------------------------------------------
s3_suite_start bkt
SRC=$T/src
$R make tfrecord "$SRC" --objects "$OBJS" --seed 21 --big
rm -f "$SRC/README.txt" "$SRC/a/x.tfrecord.bak"
aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/"
total=$(du -sb "$SRC" | cut -f1)
AUTH=(--aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
(cd "$SRC" && find . -type f -printf '%P\n' | LC_ALL=C sort) >"$T/keys"
curl_objects() { # curl_objects CONNS -> seconds
	local cfg=$T/objs.cfg t0 t1
	: >"$cfg"
	while read -r k; do printf 'url = "%s/%s/ds/%s"\noutput = "/dev/null"\n' "$S3_EP" "$BUCKET" "$k" >>"$cfg"; done <"$T/keys"
	local par=()
	[ "$1" -gt 1 ] && par=(--parallel --parallel-immediate --parallel-max "$1")
	t0=$(now)
	curl -sS --no-progress-meter "${par[@]}" "${AUTH[@]}" -K "$cfg" || return 1
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}'
}
raw1=$(curl_objects 1)
raw8=$(curl_objects 8)
cat >"$T/rec.conf" <<CONF
[source]
url = s3://$BUCKET/ds/
endpoint = $S3_EP
[shard]
unit = record
world_size = 4
seed = 5
ranks = 0
[cache]
dir = $T/cache
[records]
format = tfrecord
parts = 4
CONF
t0=$(now)
"$SHARDFS" index "$T/rec.conf" --output "$T/ds.idx" -q >"$T/index.out"
t1=$(now)
idx_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
printf 'index = %s\n' "$T/ds.idx" >>"$T/rec.conf"
mount_shardfs "$T/rec.conf" "$T/mnt" || { cat "$LAST_LOG"; exit 1; }
parts=("$T/mnt/rank-0/records"/part-*)
pbytes=$(cat "${parts[@]}" | wc -c) # warms nothing twice: measured below on a fresh cache
umount_shardfs "$T/mnt"
rm -rf "$T/cache"
mount_shardfs "$T/rec.conf" "$T/mnt"
t0=$(now)
for p in "${parts[@]}"; do cat "$p" >/dev/null; done
t1=$(now)
view_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
gets=$(awk '$1 == "shardfs_backend_requests_total" {print $2}' "$T/mnt/.shardfs/stats")
fetched=$(awk '$1 == "shardfs_backend_bytes_total" {print $2}' "$T/mnt/.shardfs/stats")
# The same record extents, in the parts' order, as ranged GETs (.order
# names object and record; the index gives offset and length). Each is its
# own operation (`next`), which resets every option before it: the SigV4
# options are repeated in each, so every GET is signed as shardfs' are
# (s3rver would serve them unsigned too), and each reports its status and
# size, checked below.
/usr/bin/python3 - "$T/ds.idx" "$T/mnt/.shardfs/rank-0.order" "$S3_EP/$BUCKET/ds" >"$T/ranges.cfg" <<'PY'
import sys
idx, order, base = sys.argv[1:]
auth = ('aws-sigv4 = "aws:amz:us-east-1:s3"\nuser = "S3RVER:S3RVER"\n'
        'header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\n')
objs, cur, pos = {}, None, 0
for line in open(idx, "rb"):
    line = line.rstrip(b"\n")
    if line.startswith(b"o "):
        f = line[2:].split(b"\t")
        cur = f[0].decode(); objs[cur] = []; pos = 0
    elif cur is not None and line and not line.startswith(b"end "):
        if line.startswith(b"@"):
            off, ln = map(int, line[1:].split()); pos = off
        else:
            ln = int(line)
        objs[cur].append((pos, ln)); pos += ln
sep = ""
for line in open(order):
    k, r = line.rstrip("\n").split("\t")[:2]
    off, ln = objs[k][int(r)]
    sys.stdout.write('%surl = "%s/%s"\noutput = "/dev/null"\nrange = "%d-%d"\n%s'
                     'write-out = "%%{http_code} %%{size_download} %d\\n"\n'
                     % (sep, base, k, off, off + ln - 1, auth, ln))
    sep = "next\n"
PY
curl_ranges() { # curl_ranges CONNS -> seconds; every reply a 206 of the extent's length
	local t0 t1 par=()
	[ "$1" -gt 1 ] && par=(--parallel --parallel-immediate --parallel-max "$1")
	t0=$(now)
	curl -sS --no-progress-meter "${par[@]}" -K "$T/ranges.cfg" >"$T/ranges.out" || return 1
	t1=$(now)
	if awk '$1 != 206 || $2 != $3 {bad++} END {exit !(bad || NR == 0)}' "$T/ranges.out"; then
		echo "records bench: raw curl ranged GETs: a reply is not a 206 of the extent's length" >&2
		return 1
	fi
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}'
}
rr1=$(curl_ranges 1) || exit 1
rr8=$(curl_ranges 8) || exit 1
umount_shardfs "$T/mnt"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
view_mb=$(rate "$pbytes" "$view_s")
rr1_mb=$(rate "$pbytes" "$rr1")
rr8_mb=$(rate "$pbytes" "$rr8")
idx_mb=$(rate "$total" "$idx_s")
raw1_mb=$(rate "$total" "$raw1")
raw8_mb=$(rate "$total" "$raw8")
table=$(cat <<TXT
| measure | value | vs | ratio | goal |
|---|---|---|---|---|
| mount with a pinned index of $N records | ${rec_s} s | (same manifest as objects: ${obj_s} s) | | ≤ 2 s |
| daemon RAM per record (peak RSS beyond the object mount) | $per_hwm B | (resident after mount: $per_rss B) | | ≤ 40 B |
| \`shardfs index\` build, $((total >> 20)) MiB in $(wc -l <"$T/keys") objects | $idx_mb MB/s | raw curl whole objects 1 conn $raw1_mb MB/s, 8 conn $raw8_mb MB/s | $(ratio "$idx_mb" "$raw8_mb") of 8 conn | |
| rank 0 of 4, its $(( pbytes >> 20 )) MiB of parts read one after the other, cold | $view_mb MB/s ($gets GETs, $fetched bytes fetched) | raw curl, the same record extents as ranged GETs: 1 conn $rr1_mb MB/s | $(ratio "$view_mb" "$rr1_mb") | ≥ 0.9 |
| the same | | raw curl ranged, 8 conn $rr8_mb MB/s | $(ratio "$view_mb" "$rr8_mb") | |
TXT
)
echo "$table"
if [ -n "${BENCH_RESULTS:-}" ]; then
	printf '{"view_mb": %s, "rr1_mb": %s, "rr8_mb": %s, "gets": %s, "fetched": %s, "pbytes": %s}\n' \
		"$view_mb" "$rr1_mb" "$rr8_mb" "$gets" "$fetched" "$pbytes" >"$BENCH_RESULTS/records.json"
fi
if [ "$OUT" != - ]; then
	{
		echo "# Benchmarks: record views"
		echo
		echo "Written by \`make bench\` (\`tests/bench/records.sh\`, phase \`records\`); do not edit by hand, rerun."
		echo "Run of $(date -u '+%Y-%m-%d %H:%M UTC'), shardfs commit \`$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)\`, s3rver on 127.0.0.1, one round."
		echo
		echo "Dataset for the s3rver rows: $(wc -l <"$T/keys") uncompressed TFRecord objects of 4-12 records of 100-900 KiB ($total bytes), world_size 4, seed 5, 4 parts per rank. Scale rows: a synthetic manifest of 100 objects and a pinned index of $N TFRecord records (100-2000 bytes), mounted with the cache off."
		echo
		echo "$table"
	} >"$OUT"
	echo "records bench: wrote $OUT"
fi
finish
