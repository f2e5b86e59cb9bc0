#!/usr/bin/env bash
# What the store vouches for (docs/RELIABILITY.md, "Whole-object checks"):
# s3rver and the GCS emulator behind fault proxies that flip a bit in a
# reply's body and leave its headers (the ETag, the object's MD5; the
# x-goog-hash crc32c) as they were, or break the checksum header itself.
#
# Covered, for S3 and GCS: with the disk cache off, small files read in
# 4 KiB O_DIRECT reads (what the kernel does after a failed read) and in
# plain reads: no read returns a wrong byte (every read of a file whose
# replies are all flipped, or whose crc32c header is wrong, fails with
# EIO), and a file read in 4 KiB pieces costs one GET, not one per piece,
# also with 4 readers at once. SSE-KMS objects (whose ETag is not their
# MD5) read as they are. With the disk cache on, a large object with one
# bit flipped in one ranged reply is checked once the node holds all of
# its chunks: the mismatch is logged with the key and both checksums,
# counted, the object's chunks are dropped, and a re-read after a
# remount fetches it again and returns the right bytes; a clean large
# object is checked, counted and kept.
SUITE=integrity
. "$(dirname "$0")/lib.sh"
. "$HERE/s3/s3rver.sh"
. "$HERE/gcs/gcs_emulator.sh"

stat_of() { # stat_of MNT NAME: a counter from .shardfs/stats
	awk -v n="shardfs_$2" '$1 == n {print $2}' "$1/.shardfs/stats"
}
# field JSON KEY: len() of a list in pagereads.py's answer.
field() { echo "$1" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)[sys.argv[1]]))' "$2"; }
show() { echo "$1" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); [print("#   ", w) for w in (d["wrong"] + d["errors"])[:5]]'; }
# wait_stat MNT NAME MIN: until the counter reaches MIN (at most 60 s: a
# bound that tells a slow check from none, not a timing assertion).
wait_stat() {
	for _ in $(seq 600); do
		[ "$(stat_of "$1" "$2")" -ge "$3" ] 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
# gets LOG PATTERN: how many GETs of objects matching PATTERN LOG has.
gets() { grep -c "^GET [^ ]*$2" "$1"; }

M=$T/mnt
C=$T/c.conf

# conf FILE URL ENDPOINT MANIFEST CACHE(on|off) [EXTRA]: a config.
conf() {
	{
		echo "[source]"
		echo "url = $2"
		echo "endpoint = $3"
		echo "manifest = $4"
		echo "retries = 1"
		echo "${6:-}"
		echo "[cache]"
		if [ "$5" = off ]; then
			echo "enabled = false"
		else
			echo "dir = $T/cache.$5"
			echo "size = 1G"
			echo "chunk_size = 1M"
		fi
	} >"$1"
}

# --- data ---------------------------------------------------------------------------
SRC=$T/src
/usr/bin/python3 - "$SRC" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(24)
files = {"small/flipped-1.bin": 100000, "small/flipped-2.bin": 577000,
         "small/plain-1.bin": 577000, "small/plain-2.bin": 300001,
         "small/plain-3.bin": 2 << 20, "small/kms-1.bin": 70000,
         "small/kms-2.bin": 1500000, "small/wronghash-1.bin": 200000,
         "small/wronghash-2.bin": 900000, "big/flipone.bin": (6 << 20) + 12345,
         "big/clean.bin": 5 << 20}
for rel, size in files.items():
    os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
    with open(os.path.join(root, rel), "wb") as f:
        f.write(rnd.randbytes(size))
PY

# ==== S3 ============================================================================
s3_suite_start bkt
check "upload the dataset to s3rver" aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/"
FP_LOG=$T/s3proxy.log
/usr/bin/python3 "$HERE/s3/fault_proxy.py" "$T/s3proxy.port" "$FP_LOG" "$S3_PORT" &
PIDS+=("$!")
for _ in $(seq 100); do [ -s "$T/s3proxy.port" ] && break; sleep 0.1; done
PX=http://127.0.0.1:$(cat "$T/s3proxy.port")
"$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$PX" -o "$T/s3.tsv" >/dev/null 2>"$T/s3m.err"
check "manifest through the proxy (11 objects)" test "$(tail -n +2 "$T/s3.tsv" | wc -l)" -eq 11

# --- the disk cache off: small files are fetched whole and checked ----------------
conf "$C" "s3://$BUCKET/ds/" "$PX" "$T/s3.tsv" off
if mount_shardfs "$C" "$M"; then
	R=$M/rank-0
	out=$(/usr/bin/python3 "$HERE/pagereads.py" --direct "$R" "$SRC" small/flipped-1.bin small/flipped-2.bin)
	show "$out"
	check "s3, cache off, a bit flipped in every reply, 4 KiB reads: no wrong byte" test "$(field "$out" wrong)" -eq 0
	check "s3, cache off, a bit flipped in every reply, 4 KiB reads: every file fails with EIO" \
		test "$(field "$out" eio)" -eq 2 -a "$(field "$out" errors)" -eq 0
	out=$(/usr/bin/python3 "$HERE/pagereads.py" --io 1048576 "$R" "$SRC" small/flipped-1.bin small/flipped-2.bin)
	show "$out"
	check "s3, cache off, a bit flipped in every reply, plain reads: no wrong byte" test "$(field "$out" wrong)" -eq 0
	check "s3, cache off: the MD5 mismatch is logged with the key" \
		grep -q "s3://$BUCKET/ds/small/flipped-2.bin.*MD5 [0-9a-f]* is not its ETag" "$LAST_LOG"
	: >"$FP_LOG"
	out=$(/usr/bin/python3 "$HERE/pagereads.py" --direct "$R" "$SRC" small/plain-1.bin small/plain-2.bin small/plain-3.bin)
	show "$out"
	g=$(gets "$FP_LOG" small/plain-)
	echo "# s3, cache off: 3 files in $(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["reads"])') reads of 4 KiB took $g GETs"
	check "s3, cache off, 4 KiB reads: every byte right" test "$(field "$out" ok)" -eq 3
	check "s3, cache off, 4 KiB reads: one GET per file, not one per read ($g for 3 files)" test "$g" -le 6
	: >"$FP_LOG"
	out=$(/usr/bin/python3 "$HERE/pagereads.py" --direct --readers 4 "$R" "$SRC" small/plain-1.bin small/plain-2.bin small/plain-3.bin)
	show "$out"
	g=$(gets "$FP_LOG" small/plain-)
	check "s3, cache off, 4 readers of each file: every byte right" test "$(field "$out" ok)" -eq 12
	check "s3, cache off, 4 readers in 4 KiB reads: a few GETs per file ($g for 3 files)" test "$g" -le 24
	out=$(/usr/bin/python3 "$HERE/pagereads.py" --io 1048576 "$R" "$SRC" small/kms-1.bin small/kms-2.bin)
	show "$out"
	check "s3, cache off: SSE-KMS objects (their ETag is not their MD5) read right" test "$(field "$out" ok)" -eq 2
	check "s3: an SSE-KMS object's ETag is not taken for its MD5" bash -c "! grep -q 'kms-.*is not its ETag' '$LAST_LOG'"
	check "s3: unmount (cache off)" umount_shardfs "$M"
else
	fail "s3: mount (cache off)"
fi

# --- the disk cache on: a large object checked once the node holds it whole ------
conf "$C" "s3://$BUCKET/ds/" "$PX" "$T/s3.tsv" s3
if mount_shardfs "$C" "$M"; then
	R=$M/rank-0
	if cmp -s "$R/big/flipone.bin" "$SRC/big/flipone.bin"; then
		echo "# s3: the first read of big/flipone.bin returned the right bytes"
	else
		echo "# s3: the first read of big/flipone.bin returned the flipped byte (served before the check)"
	fi
	check "s3: the proxy flipped a bit in one ranged reply" test "$(grep -c 'flipone.bin -> 206 flipped' "$FP_LOG")" -eq 1
	check "s3: the mismatch is detected and counted" wait_stat "$M" cache_whole_mismatches_total 1
	grep 'do not match' "$LAST_LOG" | sed 's/^/# /'
	check "s3: the mismatch is logged with the key, the ETag's MD5 and the bytes' MD5" \
		grep -qE "big/flipone.bin.*MD5 [0-9a-f]{32} \(ETag\).*MD5 [0-9a-f]{32}" "$LAST_LOG"
	check "s3: a clean large object read whole" cmp -s "$R/big/clean.bin" "$SRC/big/clean.bin"
	check "s3: the clean object is checked" wait_stat "$M" cache_whole_checked_total 2
	check "s3: only one mismatch" test "$(stat_of "$M" cache_whole_mismatches_total)" -eq 1
	check "s3: unmount (cache on)" umount_shardfs "$M"
	: >"$FP_LOG"
	if mount_shardfs "$C" "$M"; then
		check "s3: after a remount the object reads right" cmp -s "$M/rank-0/big/flipone.bin" "$SRC/big/flipone.bin"
		check "s3: its chunks were dropped: fetched again" test "$(gets "$FP_LOG" big/flipone.bin)" -ge 7
		check "s3: the clean object stayed cached (no GET)" \
			bash -c "cmp -s '$M/rank-0/big/clean.bin' '$SRC/big/clean.bin' && ! grep -q clean.bin '$FP_LOG'"
		check "s3: unmount (remount)" umount_shardfs "$M"
	else
		fail "s3: remount (cache on)"
	fi
else
	fail "s3: mount (cache on)"
fi

# ==== GCS ===========================================================================
unset STORAGE_EMULATOR_HOST GOOGLE_APPLICATION_CREDENTIALS GOOGLE_CLOUD_PROJECT
export CLOUDSDK_CONFIG=$T/no-gcloud
export GCE_METADATA_HOST=127.0.0.1:1
GBUCKET=shardfs-test
if ! command -v node >/dev/null || ! gcs_install; then
	fail "gcs emulator install (npm ci)"
	finish
fi
if ! gcs_start "$T/gcsdata"; then
	fail "gcs emulator start"
	finish
fi
check "upload the dataset to the GCS emulator" \
	/usr/bin/python3 "$HERE/gcs/gcs_upload.py" "$GCS_EP" "$GBUCKET" ds/ "$SRC"
GP_LOG=$T/gcsproxy.log
/usr/bin/python3 "$HERE/gcs/fault_proxy.py" "$T/gcsproxy.port" "$GP_LOG" "$GCS_PORT" &
PIDS+=("$!")
for _ in $(seq 100); do [ -s "$T/gcsproxy.port" ] && break; sleep 0.1; done
GX=http://127.0.0.1:$(cat "$T/gcsproxy.port")
STORAGE_EMULATOR_HOST=127.0.0.1:$GCS_PORT "$SHARDFS" manifest "gs://$GBUCKET/ds/" -o "$T/gs.tsv" >/dev/null 2>"$T/gsm.err"
check "gs manifest (11 objects)" test "$(tail -n +2 "$T/gs.tsv" | wc -l)" -eq 11

# --- the disk cache off -------------------------------------------------------------
conf "$C" "gs://$GBUCKET/ds/" "$GX" "$T/gs.tsv" off "anonymous = true"
if mount_shardfs "$C" "$M"; then
	R=$M/rank-0
	out=$(/usr/bin/python3 "$HERE/pagereads.py" --direct "$R" "$SRC" small/flipped-1.bin small/flipped-2.bin)
	show "$out"
	check "gcs, cache off, a bit flipped in every reply, 4 KiB reads: no wrong byte" test "$(field "$out" wrong)" -eq 0
	check "gcs, cache off, a bit flipped in every reply, 4 KiB reads: every file fails with EIO" \
		test "$(field "$out" eio)" -eq 2 -a "$(field "$out" errors)" -eq 0
	out=$(/usr/bin/python3 "$HERE/pagereads.py" --io 1048576 "$R" "$SRC" small/wronghash-1.bin small/wronghash-2.bin)
	show "$out"
	check "gcs, cache off: a crc32c header that is not the object's fails every read with EIO" \
		test "$(field "$out" eio)" -eq 2 -a "$(field "$out" wrong)" -eq 0
	check "gcs, cache off: the crc32c mismatch is logged with the key" \
		grep -q "gs://$GBUCKET/ds/small/wronghash-1.bin.*crc32c [0-9a-f]* is not x-goog-hash's" "$LAST_LOG"
	: >"$GP_LOG"
	out=$(/usr/bin/python3 "$HERE/pagereads.py" --direct --readers 4 "$R" "$SRC" small/plain-1.bin small/plain-2.bin small/plain-3.bin)
	show "$out"
	g=$(grep -c 'GET [^ ]*plain-' "$GP_LOG")
	check "gcs, cache off, 4 readers of each file: every byte right" test "$(field "$out" ok)" -eq 12
	check "gcs, cache off, 4 readers in 4 KiB reads: a few GETs per file ($g for 3 files)" test "$g" -le 24
	check "gcs: unmount (cache off)" umount_shardfs "$M"
else
	fail "gcs: mount (cache off)"
fi

# --- the disk cache on ------------------------------------------------------------
conf "$C" "gs://$GBUCKET/ds/" "$GX" "$T/gs.tsv" gcs "anonymous = true"
if mount_shardfs "$C" "$M"; then
	R=$M/rank-0
	cat "$R/big/flipone.bin" >/dev/null
	check "gcs: the proxy flipped a bit in one ranged reply" test "$(grep -c 'flipped ds/big/flipone.bin' "$GP_LOG")" -eq 1
	check "gcs: the mismatch is detected and counted" wait_stat "$M" cache_whole_mismatches_total 1
	grep 'do not match' "$LAST_LOG" | sed 's/^/# /'
	check "gcs: the mismatch is logged with the key and both crc32c values" \
		grep -qE "big/flipone.bin.*crc32c [0-9a-f]{8} \(x-goog-hash\).*crc32c [0-9a-f]{8}" "$LAST_LOG"
	check "gcs: a clean large object read whole" cmp -s "$R/big/clean.bin" "$SRC/big/clean.bin"
	check "gcs: the clean object is checked" wait_stat "$M" cache_whole_checked_total 2
	check "gcs: only one mismatch" test "$(stat_of "$M" cache_whole_mismatches_total)" -eq 1
	check "gcs: unmount (cache on)" umount_shardfs "$M"
	: >"$GP_LOG"
	if mount_shardfs "$C" "$M"; then
		check "gcs: after a remount the object reads right" cmp -s "$M/rank-0/big/flipone.bin" "$SRC/big/flipone.bin"
		check "gcs: its chunks were dropped: fetched again" test "$(grep -c 'GET [^ ]*flipone.bin' "$GP_LOG")" -ge 7
		check "gcs: the clean object stayed cached (no GET)" \
			bash -c "cmp -s '$M/rank-0/big/clean.bin' '$SRC/big/clean.bin' && ! grep -q clean.bin '$GP_LOG'"
		check "gcs: unmount (remount)" umount_shardfs "$M"
	else
		fail "gcs: remount (cache on)"
	fi
else
	fail "gcs: mount (cache on)"
fi

finish
