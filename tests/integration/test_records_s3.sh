#!/usr/bin/env bash
# Record views over s3rver, two nodes of one job (ranks 0-3 and 4-7 of
# world_size 8), each through its own counting proxy (countproxy.py), over
# uncompressed TFRecord files whose records the global shuffle scatters
# over every object.
#
# Covered, for two datasets:
#   - large records (100-900 KiB), dealt one by one: the view fetches record
#     extents in 64 KiB cache blocks (fs/recview.h), not whole 8 MiB chunks,
#     each record's blocks in one GET (a run: cache/fetch.h), not one GET per
#     block (measured before: about 7 per record);
#   - small records (2-6 KiB), dealt in runs ([records] run_bytes = 1M):
#     one by one, every 64 KiB block would hold records of every rank and
#     each node would download the whole dataset (measured: 2.0x); in runs
#     a rank reads whole runs, many records per GET (the records of a
#     window sorted into extents: fs/recview.c);
# both nodes plan the same record views (.shardfs/plan equal); each node's
# parts parse and match the reference (records.py, shardspec.py); and no
# download amplification: each node's backend bytes (everything its proxy
# relayed, the listing included) are at most 1.1x its ranks' records.
SUITE=records_s3
. "$(dirname "$0")/lib.sh"
. "$HERE/s3/s3rver.sh"

s3_suite_start bkt
R="/usr/bin/python3 $HERE/records.py"

# node_start DS NODE RANKS RUN_BYTES: its own counting proxy, cache dir and
# mountpoint, the pinned index of dataset DS.
node_start() {
	local ds=$1 n=$2 ranks=$3 run=$4
	/usr/bin/python3 "$HERE/countproxy.py" --upstream "127.0.0.1:$S3_PORT" \
		--log "$T/$ds.$n.requests" --port-file "$T/$ds.$n.port" 2>"$T/$ds.$n.proxy.err" &
	PIDS+=("$!")
	for _ in $(seq 100); do [ -s "$T/$ds.$n.port" ] && break; sleep 0.1; done
	cat >"$T/$ds.$n.conf" <<CONF
[source]
url = s3://$BUCKET/$ds/
endpoint = http://127.0.0.1:$(cat "$T/$ds.$n.port")
[shard]
unit = record
world_size = 8
seed = 99
ranks = $ranks
[records]
format = tfrecord
parts = 2
run_bytes = $run
index = $T/$ds.idx
index_sha256 = $(awk '$1 == "sha256" {print $2}' "$T/$ds.index.out")
[cache]
dir = $T/$ds.$n.cache
CONF
	mount_shardfs "$T/$ds.$n.conf" "$T/$ds.$n.mnt"
}

# dataset DS MAKE-FLAG RUN_BYTES
dataset() {
	local ds=$1 flag=$2 run=$3 n pid_a pid_b
	local src=$T/$ds.src
	$R make tfrecord "$src" --objects 6 --seed 3 "$flag"
	rm -f "$src/README.txt" "$src/a/x.tfrecord.bak"
	check "$ds: upload ($(du -sm "$src" | cut -f1) MiB)" aws_s3 cp --recursive "$src" "s3://$BUCKET/$ds/"
	printf '[source]\nurl = s3://%s/%s/\nendpoint = %s\n[shard]\nunit = record\nworld_size = 8\n[records]\nformat = tfrecord\n' \
		"$BUCKET" "$ds" "$S3_EP" >"$T/$ds.index.conf"
	check "$ds: shardfs index over S3" bash -c "'$SHARDFS' index '$T/$ds.index.conf' --output '$T/$ds.idx' -q >'$T/$ds.index.out'"
	check "$ds: node A (ranks 0-3) mounts through its own proxy" node_start "$ds" A 0-3 "$run"
	pid_a=$LAST_PID
	check "$ds: node B (ranks 4-7) mounts through its own proxy" node_start "$ds" B 4-7 "$run"
	pid_b=$LAST_PID
	check "$ds: the two nodes' plans are identical" cmp -s "$T/$ds.A.mnt/.shardfs/plan" "$T/$ds.B.mnt/.shardfs/plan"
	check "$ds: node A's parts parse and match the reference" \
		$R check tfrecord "$src" "$T/$ds.A.mnt" --world 8 --seed 99 --parts 2 --ranks 0,1,2,3 --run-bytes "$run"
	check "$ds: node B's parts parse and match the reference" \
		$R check tfrecord "$src" "$T/$ds.B.mnt" --world 8 --seed 99 --parts 2 --ranks 4,5,6,7 --run-bytes "$run"
	for n in A B; do
		local own got
		own=$(awk '$1 == "rank" && $3 == "records" {print $2, $8}' "$T/$ds.$n.mnt/.shardfs/plan" |
			while read -r r b; do [ -d "$T/$ds.$n.mnt/rank-$r" ] && echo "$b"; done | awk '{s += $1} END {print s + 0}')
		got=$(awk '{s += $4} END {print s + 0}' "$T/$ds.$n.requests")
		echo "# $ds node $n: own ranks' records $own bytes, backend $got bytes in $(grep -c '^GET ' "$T/$ds.$n.requests") GETs ($(awk -v g="$got" -v o="$own" 'BEGIN {printf "%.3f", g / o}')x)"
		check "$ds: node $n: backend bytes $got <= 1.1 x its records' $own" \
			awk -v g="$got" -v o="$own" 'BEGIN {exit !(o > 0 && g <= 1.1 * o)}'
		local recs gets
		gets=$(grep -c "^GET /$BUCKET/$ds/" "$T/$ds.$n.requests")
		if [ "$run" = 0 ]; then
			recs=$(awk '$1 == "rank" && $3 == "records" {print $2, $4}' "$T/$ds.$n.mnt/.shardfs/plan" |
				while read -r r c; do [ -d "$T/$ds.$n.mnt/rank-$r" ] && echo "$c"; done | awk '{s += $1} END {print s + 0}')
			# One GET per record; the margin is for a chunk whose
			# fetch was stored just as a run was asked (fetch.h).
			check "$ds: node $n: $gets GETs of objects for its $recs records (at most 1.5 per record)" \
				awk -v g="$gets" -v r="$recs" 'BEGIN {exit !(r > 0 && g <= 1.5 * r)}'
		else
			# Runs of records next to each other: a GET brings many
			# (measured: 1 MiB on average; before, 64 KiB).
			check "$ds: node $n: $gets GETs of objects for $own bytes (256 KiB or more each on average)" \
				awk -v g="$gets" -v o="$own" 'BEGIN {exit !(g > 0 && g * 262144 <= o)}'
		fi
	done
	check "$ds: node A unmounts" umount_shardfs "$T/$ds.A.mnt" "$pid_a"
	check "$ds: node B unmounts" umount_shardfs "$T/$ds.B.mnt" "$pid_b"
}

dataset big --big 0
dataset small --small 1048576
finish
