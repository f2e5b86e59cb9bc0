#!/usr/bin/env bash
# Record views ([shard] unit = record) over real files, read through a real
# FUSE mount and checked by independent readers (tests/integration/
# records.py: TFRecord with both CRC32Cs, Python's tarfile in stream mode
# with the WebDataset key rule, a JSON parser per line) against the spec's
# reference plan (shardspec.py).
#
# Covered, for tfrecord, tfrecord.gz, jsonl, jsonl.gz and tar:
#   - `shardfs index` writes an index and prints its sha256; a mount that
#     pins both serves every rank's parts: every part parses, is byte for
#     byte the reference's records, .shardfs/rank-R.order lists them, and
#     the ranks together hold every source record once;
#   - part sizes are exact at mount with no read of any object (stat);
#   - without a pinned index the mount builds one (warning that it reads
#     all the data), keeps it in the cache dir, and the next mount reuses it;
#   - a pinned index_sha256 that does not match refuses the mount, naming
#     both digests;
#   - gzip sources are decompressed once per node into the cache: a second
#     pass and a remount read no source byte;
#   - balance = pad (pads are duplicate records) and layout contiguous;
#   - bad input: a flipped CRC byte, a truncated last record, a gzip member
#     cut short, a corrupt tar header: `shardfs index` fails naming the
#     object, the offset and what was wrong, and writes no index; a mount
#     without a pinned index refuses to start.
SUITE=records
. "$(dirname "$0")/lib.sh"

R="/usr/bin/python3 $HERE/records.py"

stat_of() { # stat_of MNT NAME: a counter from .shardfs/stats
	awk -v n="shardfs_$2" '$1 == n {print $2}' "$1/.shardfs/stats"
}

# conf FILE FORMAT SRC CACHE [EXTRA [records] LINES...]
conf() {
	local f=$1 fmt=$2 src=$3 cache=$4; shift 4
	{
		printf '[source]\nurl = %s\n[shard]\nunit = record\nworld_size = 4\nseed = 42\n' "$src"
		printf '[cache]\ndir = %s\n' "$cache"
		printf '[records]\nformat = %s\nparts = 3\n' "$fmt"
		for l in "$@"; do printf '%s\n' "$l"; done
	} >"$f"
}

for fmt in tfrecord tfrecord.gz jsonl jsonl.gz tar; do
	S=$T/src-$fmt
	$R make "$fmt" "$S" --objects 7 --seed 11
	conf "$T/$fmt.conf" "$fmt" "$S" "$T/cache-$fmt"
	check "$fmt: shardfs index writes an index and its digest" \
		bash -c "'$SHARDFS' index '$T/$fmt.conf' --output '$T/$fmt.idx' -q >'$T/$fmt.index.out'"
	sha=$(awk '$1 == "sha256" {print $2}' "$T/$fmt.index.out")
	check "$fmt: the digest is 64 hex digits" bash -c "[[ '$sha' =~ ^[0-9a-f]{64}$ ]]"
	conf "$T/$fmt.pinned.conf" "$fmt" "$S" "$T/cache-$fmt" \
		"index = $T/$fmt.idx" "index_sha256 = $sha"
	M=$T/mnt-$fmt
	if ! mount_shardfs "$T/$fmt.pinned.conf" "$M"; then
		fail "$fmt: mount with the pinned index"
		continue
	fi
	ok "$fmt: mount with the pinned index"
	check "$fmt: each rank directory holds records/ with 3 parts" \
		test "$(ls "$M/rank-2/records" | wc -l)" -eq 3
	sizes=$(stat -c %s "$M"/rank-*/records/* | awk '{s += $1} END {print s}')
	check "$fmt: part sizes known at mount, no object read (stat of every part, $sizes bytes)" \
		test "$(stat_of "$M" backend_requests_total)" -eq 0
	check "$fmt: every part of every rank parses and matches the reference" \
		$R check "$fmt" "$S" "$M" --world 4 --seed 42 --parts 3
	# The object plan of a record view is empty: its rank lines
	# ("rank 0 items 0 pad 0 bytes 0") and aggregates said nothing.
	check "$fmt: .shardfs/plan has record rank lines only" bash -c \
		"[ \"\$(grep -c '^rank [0-9]* records ' '$M/.shardfs/plan')\" = 4 ] && ! grep -Eq '^(rank [0-9]+ items|dropped_items|imbalance_items)' '$M/.shardfs/plan'"
	check "$fmt: shardfs plan prints the same text" \
		bash -c "'$SHARDFS' plan '$T/$fmt.pinned.conf' 2>/dev/null | cmp -s - '$M/.shardfs/plan'"
	check "$fmt: the plan digest (status, stats) is sha256 of .shardfs/plan" bash -c \
		"[ \"\$('$SHARDFS' status '$M' --json --interval 0 | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[\"plan_sha256\"])')\" = \"\$(sha256sum <'$M/.shardfs/plan' | cut -d' ' -f1)\" ]"
	if [[ $fmt == *.gz ]]; then
		runs=$(stat_of "$M" cache_derived_runs_total)
		check "$fmt: each gzip object decompressed once ($runs runs)" \
			test "$runs" -ge 1 -a "$runs" -le 7
		reads=$(stat_of "$M" backend_requests_total)
		cat "$M"/rank-*/records/* >/dev/null
		check "$fmt: a second pass reads no source byte" \
			test "$(stat_of "$M" backend_requests_total)" -eq "$reads"
	fi
	umount_shardfs "$M" || fail "$fmt: unmount"
	if [[ $fmt == *.gz ]]; then
		mount_shardfs "$T/$fmt.pinned.conf" "$M"
		cat "$M"/rank-*/records/* >/dev/null
		check "$fmt: after a remount, the decompressed records come from the cache (0 source reads, 0 runs)" \
			test "$(stat_of "$M" backend_requests_total)" -eq 0 -a "$(stat_of "$M" cache_derived_runs_total)" -eq 0
		umount_shardfs "$M" || fail "$fmt: unmount after remount"
	fi
done

# --- -o means config overrides, as for mount, plan and warm ------------------
# (it named the output file here, and a second -o KEY=VALUE replaced it)
rc=0
(cd "$T" && "$SHARDFS" index "$T/tfrecord.conf" --output "$T/o1.idx" -o shard.world_size=2 -q) \
	>"$T/o1.out" 2>&1 || rc=$?
check "index --output FILE -o KEY=VALUE: exit 0 (got $rc), FILE written" \
	bash -c "[ $rc -eq 0 ] && cmp -s '$T/o1.idx' '$T/tfrecord.idx'"
check "... the override is an override, not a file" test ! -e "$T/shard.world_size=2"
rc=0
"$SHARDFS" index "$T/tfrecord.conf" -o "$T/o2.idx" -q >"$T/o2.out" 2>&1 || rc=$?
check "index -o FILE (the older form): a usage error (exit 2, got $rc) naming --output" \
	bash -c "[ $rc -eq 2 ] && grep -q -- '--output $T/o2.idx' '$T/o2.out' && [ ! -e '$T/o2.idx' ]"
rc=0
"$SHARDFS" index "$T/tfrecord.conf" -q >"$T/o3.out" 2>&1 || rc=$?
check "index without --output: a usage error (exit 2, got $rc)" \
	bash -c "[ $rc -eq 2 ] && grep -q -- '--output FILE missing' '$T/o3.out'"

# --- a cache smaller than the decompressed records: warned at mount ---------
M=$T/mnt-small
mount_shardfs "$T/tfrecord.gz.pinned.conf" "$M" -o cache.size=1M
check "a cache budget below the decompressed size is warned about at mount" \
	grep -q 'decompress to [0-9]* bytes, more than the cache' "$LAST_LOG"
umount_shardfs "$M"

# --- no pinned index: built at mount, kept, reused ---------------------------
S=$T/src-tfrecord
conf "$T/build.conf" tfrecord "$S" "$T/cache-build"
M=$T/mnt-build
mount_shardfs "$T/build.conf" "$M"
check "without a pinned index the mount builds one and warns" \
	grep -q 'no pinned \[records\] index: building one' "$LAST_LOG"
check "the index it built is kept in the cache dir (0600)" \
	bash -c "[ \"\$(stat -c %a '$T'/cache-build/records/*-tfrecord.f1.idx)\" = 600 ]"
check "the built index is the one shardfs index wrote" \
	cmp -s "$T"/cache-build/records/*-tfrecord.f1.idx "$T/tfrecord.idx"
check "the mount serves the reference plan" \
	$R check tfrecord "$S" "$M" --world 4 --seed 42 --parts 3 --ranks 0,3
umount_shardfs "$M"
mount_shardfs "$T/build.conf" "$M"
check "the next mount reuses the kept index (no warning)" \
	bash -c "! grep -q 'building one' '$LAST_LOG'"
umount_shardfs "$M"

# --- a pinned digest that does not match -------------------------------------
conf "$T/wrong.conf" tfrecord "$S" "$T/cache-build" "index = $T/tfrecord.idx" \
	"index_sha256 = $(printf '0%.0s' $(seq 64))"
mkdir -p "$T/mnt-wrong"
"$SHARDFS" mount "$T/wrong.conf" "$T/mnt-wrong" -f >"$T/wrong.log" 2>&1
rc=$?
check "a mismatching index_sha256 refuses the mount (exit $rc)" test "$rc" -ne 0
check "... naming both digests" bash -c "grep -q '0000000000000000' '$T/wrong.log' && grep -q '$(awk '$1 == "sha256" {print $2}' "$T/tfrecord.index.out")' '$T/wrong.log'"
check "... and nothing is mounted" bash -c "! grep -qs ' $T/mnt-wrong ' /proc/mounts"

# --- a record object rewritten in place, its mtime put back ------------------
# Same size, same inode, same mtime, one byte of a record changed (so its
# CRC no longer matches): before the etag held the ctime, the part holding
# it was served with the bad record in it.
RS=$T/src-restored
cp -r "$T/src-tfrecord" "$RS"
find "$RS" -type f -exec touch -d @1500000000 {} +
# Manifest and index pinned, as a cluster does (a listing after the
# rewrite is another manifest, which the index would not match).
"$SHARDFS" manifest "$RS" -o "$T/restored.tsv" 2>/dev/null
conf "$T/restored.conf" tfrecord "$RS" "$T/cache-restored"
sed -i "/^url = /a manifest = $T/restored.tsv" "$T/restored.conf"
"$SHARDFS" index "$T/restored.conf" --output "$T/restored.idx" -q >"$T/restored.index.out" 2>&1 ||
	fail "restored: shardfs index"
victim=$(find "$RS" -name '*.tfrecord*' -type f | sort | head -1)
/usr/bin/python3 - "$victim" <<'PY'
import os, sys, time
p = sys.argv[1]
before = os.stat(p).st_ctime_ns
with open(p, "r+b") as f:  # the last byte: the last record's data CRC
    f.seek(-1, os.SEEK_END)
    b = f.read(1)
    f.seek(-1, os.SEEK_END)
    f.write(bytes([b[0] ^ 0x40]))
for _ in range(400):
    os.utime(p, ns=(1500000000 * 10**9, 1500000000 * 10**9))
    if os.stat(p).st_ctime_ns != before:
        sys.exit(0)
    time.sleep(0.005)
sys.exit("the ctime never moved")
PY
conf "$T/restored.pinned.conf" tfrecord "$RS" "$T/cache-restored" "index = $T/restored.idx"
sed -i "/^url = /a manifest = $T/restored.tsv" "$T/restored.pinned.conf"
M=$T/mnt-restored
mount_shardfs "$T/restored.pinned.conf" "$M" || fail "restored: mount"
check "a record object rewritten with its mtime put back: reading every part fails with EIO" \
	bash -c "! cat '$M'/rank-*/records/* >/dev/null 2>'$T/restored.err' && grep -q 'Input/output error' '$T/restored.err'"
# Every part that reads is valid TFRecord (both CRCs); the ones holding
# the changed object's records give EIO.
bad_parts=0
for part in "$M"/rank-*/records/*; do
	if cat "$part" >"$T/restored.part" 2>/dev/null; then
		$R tfrecord-check "$T/restored.part" || bad_parts=$((bad_parts + 1))
	fi
done
check "... never a record with a bad CRC ($bad_parts parts read with one)" test "$bad_parts" -eq 0
check "... logged with the key" grep -q "$(basename "$victim"): changed since the manifest was made" "$LAST_LOG"
umount_shardfs "$M"

# --- pads and the contiguous layout -------------------------------------------
conf "$T/pad.conf" jsonl "$T/src-jsonl" "$T/cache-pad" "index = $T/jsonl.idx"
M=$T/mnt-pad
mount_shardfs "$T/pad.conf" "$M" -o shard.balance=pad,shard.layout=contiguous,shard.world_size=5
check "balance = pad, layout = contiguous, world 5: every rank matches the reference" \
	$R check jsonl "$T/src-jsonl" "$M" --world 5 --seed 42 --parts 3 --balance pad --layout contiguous
umount_shardfs "$M"

# --- a reload (SIGHUP) replans the records ------------------------------------
conf "$T/reload.conf" jsonl "$T/src-jsonl" "$T/cache-reload" "index = $T/jsonl.idx"
M=$T/mnt-reload
mount_shardfs "$T/reload.conf" "$M"
sed -i 's/^seed = 42/seed = 43/' "$T/reload.conf"
kill -HUP "$LAST_PID"
for _ in $(seq 100); do grep -q 'reloaded: generation 1' "$LAST_LOG" && break; sleep 0.1; done
check "SIGHUP with a new seed: the mount serves the new seed's record plan" \
	$R check jsonl "$T/src-jsonl" "$M" --world 4 --seed 43 --parts 3
umount_shardfs "$M"

# --- bad input -----------------------------------------------------------------
# bad NAME FORMAT PYTHON-MUTATION EXPECTED-MESSAGE-PATTERN
bad() {
	local name=$1 fmt=$2 mutate=$3 pattern=$4
	local d=$T/bad-$name
	$R make "$fmt" "$d" --objects 3 --seed 5
	local victim
	victim=$(find "$d" -name "part001*" | head -1)
	/usr/bin/python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); $mutate; open(p,'wb').write(b)" "$victim"
	conf "$T/bad-$name.conf" "$fmt" "$d" "$T/cache-bad-$name"
	"$SHARDFS" index "$T/bad-$name.conf" --output "$T/bad-$name.idx" -q >"$T/bad-$name.out" 2>&1
	local rc=$?
	check "$name: shardfs index fails (exit $rc)" test "$rc" -eq 1
	check "$name: the error names the object and what was wrong" \
		bash -c "grep -q '$(basename "$victim")' '$T/bad-$name.out' && grep -Eqi '$pattern' '$T/bad-$name.out'"
	check "$name: no index file is left" test ! -e "$T/bad-$name.idx"
	mkdir -p "$T/mnt-bad-$name"
	"$SHARDFS" mount "$T/bad-$name.conf" "$T/mnt-bad-$name" -f >"$T/bad-$name.mount.log" 2>&1
	rc=$?
	check "$name: a mount without a pinned index refuses (exit $rc)" test "$rc" -ne 0
}
bad flipped-crc tfrecord "b[13] ^= 0x40" 'crc'
bad truncated-record tfrecord "del b[-3:]" 'truncat'
bad gzip-cut tfrecord.gz "del b[len(b)//2:]" 'gzip|cut|truncat'
bad tar-header tar "b[100] ^= 0x01" 'checksum|header'

# A sample with an empty key (a member ".x": WebDataset readers drop it),
# first in its tar: shardfs index crashed on it (exit 139) before.
mkdir -p "$T/emptykey"
/usr/bin/python3 - "$T/emptykey" <<'PY'
import io, sys, tarfile
for name, members in (("a.tar", [".x"]), ("b.tar", ["c.txt", "d.txt"])):
    with tarfile.open("%s/%s" % (sys.argv[1], name), "w") as t:
        for m in members:
            ti = tarfile.TarInfo(m)
            ti.size = 3
            t.addfile(ti, io.BytesIO(b"abc"))
PY
conf "$T/emptykey.conf" tar "$T/emptykey" "$T/cache-emptykey"
"$SHARDFS" index "$T/emptykey.conf" --output "$T/emptykey.idx" -q >"$T/emptykey.out" 2>&1
rc=$?
check "a tar sample with an empty key: shardfs index fails cleanly (exit $rc)" test "$rc" -eq 1
check "... naming the tar and the empty key" \
	bash -c "grep -q 'a.tar' '$T/emptykey.out' && grep -q 'empty key' '$T/emptykey.out'"

# A pinned index of another format whose digest is not the pinned one: the
# refusal names both digests first (it named only the format before).
conf "$T/otherfmt.conf" tfrecord "$T/src-tfrecord" "$T/cache-otherfmt" \
	"index = $T/jsonl.idx" "index_sha256 = $(awk '$1 == "sha256" {print $2}' "$T/tfrecord.index.out")"
mkdir -p "$T/mnt-otherfmt"
"$SHARDFS" mount "$T/otherfmt.conf" "$T/mnt-otherfmt" -f >"$T/otherfmt.log" 2>&1
check "an index that is not the pinned one is named by both digests, whatever else is wrong with it" \
	bash -c "grep -q '$(awk '$1 == "sha256" {print $2}' "$T/tfrecord.index.out")' '$T/otherfmt.log' && grep -q '$(awk '$1 == "sha256" {print $2}' "$T/jsonl.index.out")' '$T/otherfmt.log'"

finish
