#!/usr/bin/env bash
# Record views over s3rver, two nodes of one job (ranks 0-3 and 4-7 of
# world_size 8), each through its own counting proxy (countproxy.py), over
# uncompressed TFRecord files whose records are scattered over every object
# by the global shuffle.
#
# Covered: both nodes plan the same record views (.shardfs/plan equal);
# each node's parts parse and match the reference (records.py); and no
# download amplification: each node's backend bytes (everything its proxy
# relayed, the listing included) are at most 1.1x the bytes of its own
# ranks' records. The view fetches record extents in 64 KiB cache blocks,
# not whole 8 MiB chunks (fs/recview.h).
SUITE=records_s3
. "$(dirname "$0")/lib.sh"
. "$HERE/s3/s3rver.sh"

s3_suite_start bkt
R="/usr/bin/python3 $HERE/records.py"

SRC=$T/src
$R make tfrecord "$SRC" --objects 6 --seed 3 --big
rm -f "$SRC/README.txt" "$SRC/a/x.tfrecord.bak"
check "upload the dataset ($(du -sm "$SRC" | cut -f1) MiB)" aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/"

cat >"$T/index.conf" <<CONF
[source]
url = s3://$BUCKET/ds/
endpoint = $S3_EP
[shard]
unit = record
world_size = 8
seed = 99
[records]
format = tfrecord
parts = 2
CONF
check "shardfs index over S3" bash -c "'$SHARDFS' index '$T/index.conf' -o '$T/ds.idx' -q >'$T/index.out'"
SHA=$(awk '$1 == "sha256" {print $2}' "$T/index.out")

node_start() {
	local n=$1 ranks=$2
	/usr/bin/python3 "$HERE/countproxy.py" --upstream "127.0.0.1:$S3_PORT" \
		--log "$T/$n.requests" --port-file "$T/$n.port" 2>"$T/$n.proxy.err" &
	PIDS+=("$!")
	for _ in $(seq 100); do [ -s "$T/$n.port" ] && break; sleep 0.1; done
	cat >"$T/$n.conf" <<CONF
[source]
url = s3://$BUCKET/ds/
endpoint = http://127.0.0.1:$(cat "$T/$n.port")
[shard]
unit = record
world_size = 8
seed = 99
ranks = $ranks
[records]
format = tfrecord
parts = 2
index = $T/ds.idx
index_sha256 = $SHA
[cache]
dir = $T/$n.cache
CONF
	mount_shardfs "$T/$n.conf" "$T/$n.mnt"
}
check "node A (ranks 0-3) mounts through its own proxy" node_start A 0-3
PID_A=$LAST_PID
check "node B (ranks 4-7) mounts through its own proxy" node_start B 4-7
PID_B=$LAST_PID
check "the two nodes' plans are identical" cmp -s "$T/A.mnt/.shardfs/plan" "$T/B.mnt/.shardfs/plan"

check "node A: every part parses and matches the reference" \
	$R check tfrecord "$SRC" "$T/A.mnt" --world 8 --seed 99 --parts 2 --ranks 0,1,2,3
check "node B: every part parses and matches the reference" \
	$R check tfrecord "$SRC" "$T/B.mnt" --world 8 --seed 99 --parts 2 --ranks 4,5,6,7

for n in A B; do
	own=$(awk '$1 == "rank" && $3 == "records" {print $2, $8}' "$T/$n.mnt/.shardfs/plan" |
		while read -r r b; do [ -d "$T/$n.mnt/rank-$r" ] && echo "$b"; done | awk '{s += $1} END {print s + 0}')
	got=$(awk '{s += $4} END {print s + 0}' "$T/$n.requests")
	echo "# node $n: own ranks' records $own bytes, backend $got bytes in $(grep -c '^GET ' "$T/$n.requests") GETs ($(awk -v g="$got" -v o="$own" 'BEGIN {printf "%.3f", g / o}')x)"
	check "node $n: backend bytes $got <= 1.1 x its records' $own" \
		awk -v g="$got" -v o="$own" 'BEGIN {exit !(o > 0 && g <= 1.1 * o)}'
done
check "node A unmounts" umount_shardfs "$T/A.mnt" "$PID_A"
check "node B unmounts" umount_shardfs "$T/B.mnt" "$PID_B"
finish
