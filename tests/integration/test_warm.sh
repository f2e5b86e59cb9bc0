#!/usr/bin/env bash
# Warm reads (issues 12, 25): what a read of a file the disk cache holds
# costs, counted through .shardfs/stats, over a posix source (the kernel
# path's round trips are test_kernel.sh's). Covered:
# - after a remount, every byte equal with zero backend requests;
# - a second pass over the same mount pushes nothing again and sends no
#   read request (the kernel still has the files);
# - one reader in the order: no prefetch miss;
# - an inline entry damaged in index.mdb is caught (counted as a CRC
#   failure, never pushed into the page cache) and the file reads right
#   from the source.
SUITE=warm
. "$(dirname "$0")/lib.sh"

SRC=$T/src
make_dataset "$SRC" 150
# One file larger than a CRC block (two blocks), still inline.
head -c $((100 << 10)) /dev/urandom >"$SRC/train/n00000000/big.JPEG"

M=$T/mnt
C=$T/c.conf
printf '[source]\nurl = %s\n[cache]\ndir = %s\nsize = 1G\n' "$SRC" "$T/cache" >"$C"

# readall MNT: reads every file of rank 0 whole, in the order's order, one
# file after another, and compares it with the source; prints the number
# of files that differ.
readall() {
	/usr/bin/python3 - "$1" "$SRC" <<'PY'
import os, sys
mnt, src = sys.argv[1], sys.argv[2]
bad = 0
for line in open(os.path.join(mnt, ".shardfs", "rank-0.order")):
    if "\t" in line:
        continue
    key = line.rstrip("\n")
    with open(os.path.join(mnt, "rank-0", key), "rb") as f:
        got = f.read()
    with open(os.path.join(src, key), "rb") as f:
        if f.read() != got:
            bad += 1
print(bad)
PY
}
# snap MNT FILE: the stats now.
snap() { cat "$1/.shardfs/stats" >"$2"; }
# delta A B NAME: counter NAME in B minus in A (absent: 0).
delta() {
	awk -v n="shardfs_$3" '$1 == n {v[FILENAME] = $2} END {print v[ARGV[2]] - v[ARGV[1]]}' "$1" "$2"
}

# --- a cold pass fills the cache ---------------------------------------------
mount_shardfs "$C" "$M" || fail "mount"
check "cold pass: byte-identical" test "$(readall "$M")" -eq 0
check "unmount" umount_shardfs "$M"

# --- after a remount: pushed at open, no read requests -----------------------
mount_shardfs "$C" "$M" || fail "remount"
snap "$M" "$T/s0"
bad=$(readall "$M")
snap "$M" "$T/s1"
check "after remount: byte-identical" test "$bad" -eq 0
check "after remount: zero backend requests ($(delta "$T/s0" "$T/s1" backend_requests_total))" \
	test "$(delta "$T/s0" "$T/s1" backend_requests_total)" -eq 0
check "after remount: one reader in order, no prefetch miss ($(delta "$T/s0" "$T/s1" prefetch_misses_total))" \
	test "$(delta "$T/s0" "$T/s1" prefetch_misses_total)" -eq 0

# --- a second pass: the kernel has them, nothing is pushed again ------------
bad=$(readall "$M")
snap "$M" "$T/s2"
check "second pass: byte-identical" test "$bad" -eq 0
check "second pass: nothing pushed again ($(delta "$T/s1" "$T/s2" kernel_pushes_total))" \
	test "$(delta "$T/s1" "$T/s2" kernel_pushes_total)" -eq 0
check "second pass: no read requests ($(delta "$T/s1" "$T/s2" reads_total))" \
	test "$(delta "$T/s1" "$T/s2" reads_total)" -le 4
check "unmount 2" umount_shardfs "$M"

# --- a damaged inline entry is caught at open --------------------------------
BIG=$SRC/train/n00000000/big.JPEG
/usr/bin/python3 - "$T/cache/index.mdb" "$BIG" <<'PY' >"$T/damage.out"
import sys
idx, src = sys.argv[1], sys.argv[2]
want = open(src, "rb").read()
data = bytearray(open(idx, "rb").read())
at = data.find(want[70000:70064])  # inside the second CRC block
if at < 0:
    print("not found")
    sys.exit(1)
data[at + 10] ^= 0xFF
open(idx, "r+b").write(data)
print("damaged at", at)
PY
check "damage the big file's inline bytes in index.mdb" grep -q "^damaged" "$T/damage.out"
mount_shardfs "$C" "$M" || fail "mount 3"
snap "$M" "$T/s3"
check "damaged entry: the file still reads right" cmp -s "$M/rank-0/train/n00000000/big.JPEG" "$BIG"
snap "$M" "$T/s4"
check "damaged entry: one CRC failure counted ($(delta "$T/s3" "$T/s4" cache_crc_failures_total))" \
	test "$(delta "$T/s3" "$T/s4" cache_crc_failures_total)" -eq 1
check "damaged entry: refetched from the source" \
	test "$(delta "$T/s3" "$T/s4" backend_requests_total)" -ge 1
check "unmount 3" umount_shardfs "$M"

finish
