#!/usr/bin/env bash
# Real FUSE mounts of generated datasets in local directories: the rank
# views for several (world_size, order, layout, balance) combinations, the
# control files, read-only behaviour, the key-to-path rules, config and
# source errors, signals and the mount(8) form.
SUITE=posix
. "$(dirname "$0")/lib.sh"

SRC=$T/src
make_dataset "$SRC" 300
# Names that need escaping in the manifest, and names that do not but are
# unusual: all must round-trip to the same bytes.
mkdir -p "$SRC/odd dir"
printf 'tab' >"$SRC/odd dir/a	tab"
printf 'newline' >"$SRC/odd dir/b
nl"
printf 'percent' >"$SRC/odd dir/100%.txt"
printf 'unicode' >"$SRC/odd dir/ünï cødé +=.bin"

conf() { # conf FILE [KEY=VALUE in section shard...]
	local f=$1; shift
	{
		echo "[source]"
		echo "url = $SRC"
		echo "[shard]"
		local kv
		for kv in "$@"; do echo "${kv%%=*} = ${kv#*=}"; done
		echo "[cache]"
		echo "dir = $T/cache"
	} >"$f"
}

# --- the views, for several plans -------------------------------------
combos=(
	"1 shuffle strided none 0 0"
	"4 shuffle strided none 0 0"
	"4 shuffle strided pad 0 0"
	"4 shuffle strided drop 0 0"
	"3 none contiguous none 0 0"
	"5 shuffle contiguous pad 11 2"
	"7 shuffle contiguous drop 3 1"
	"4 shuffle bytes none 0 0"
	"3 none bytes none 0 0"
	"8 shuffle strided none 7 3"
)
for c in "${combos[@]}"; do
	read -r W ORDER LAYOUT BALANCE SEED EPOCH <<<"$c"
	name="W=$W $ORDER $LAYOUT $BALANCE seed=$SEED epoch=$EPOCH"
	C=$T/c.conf
	conf "$C" world_size=$W order=$ORDER layout=$LAYOUT balance=$BALANCE \
		seed=$SEED epoch=$EPOCH
	M=$T/mnt
	if ! mount_shardfs "$C" "$M"; then
		fail "$name: mount"
		continue
	fi
	if /usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC" >"$T/verify.out"; then
		ok "$name: union, disjoint, byte-identical, listing = order"
	else
		fail "$name: verify" "$(head -5 "$T/verify.out")"
	fi
	bad=""
	for ((r = 0; r < W; r++)); do
		"$SHARDFS" plan "$C" --rank $r >"$T/plan.$r" || bad="$bad plan$r"
		cmp -s "$T/plan.$r" "$M/.shardfs/rank-$r.order" || bad="$bad cli$r"
		/usr/bin/python3 "$HERE/shardspec.py" "$M/.shardfs/manifest.tsv" \
			--world-size "$W" --seed "$SEED" --epoch "$EPOCH" \
			--order "$ORDER" --layout "$LAYOUT" --balance "$BALANCE" \
			--rank $r >"$T/spec.$r" || bad="$bad spec$r"
		cmp -s "$T/spec.$r" "$M/.shardfs/rank-$r.order" || bad="$bad ref$r"
	done
	if [ -z "$bad" ]; then
		ok "$name: rank-R.order = shardfs plan --rank R = reference implementation"
	else
		fail "$name: orders" "mismatch at:$bad"
	fi
	"$SHARDFS" plan "$C" >"$T/plan.txt"
	check "$name: .shardfs/plan = shardfs plan" cmp -s "$T/plan.txt" "$M/.shardfs/plan"
	n=$(ls "$M" | grep -c '^rank-')
	check "$name: $W rank directories" test "$n" -eq "$W"
	check "$name: clean unmount" umount_shardfs "$M"
done

# --- control files and manifest ----------------------------------------
C=$T/base.conf
conf "$C" world_size=4
M=$T/mnt
mount_shardfs "$C" "$M" || fail "base mount"
"$SHARDFS" manifest "$SRC" -o "$T/cli.tsv" >"$T/manifest.out"
check "manifest.tsv = shardfs manifest" cmp -s "$T/cli.tsv" "$M/.shardfs/manifest.tsv"
digest=$(awk '$1 == "sha256" {print $2}' "$T/manifest.out")
check "manifest digest printed and in plan" \
	grep -q "^manifest_sha256 $digest\$" "$M/.shardfs/plan"
check "manifest header" test "$(head -1 "$T/cli.tsv")" = "# shardfs-manifest v1"
check "manifest is in byte order" bash -c \
	"tail -n +2 '$T/cli.tsv' | cut -f1 | LC_ALL=C sort -c"
check "manifest escapes TAB, LF and %" bash -c \
	"grep -qF 'odd dir/a%09tab' '$T/cli.tsv' && grep -qF 'odd dir/b%0Anl' '$T/cli.tsv' && grep -qF 'odd dir/100%25.txt' '$T/cli.tsv'"
check "manifest to stdout equals -o FILE" bash -c \
	"'$SHARDFS' manifest '$SRC' 2>/dev/null | cmp -s - '$T/cli.tsv'"
# df: the dataset's size, nothing used, as much free (a read-only mount
# that said 100% used tripped disk-full alerts); inodes likewise.
mbytes=$(awk '$1 == "manifest_bytes" {print $2}' "$M/.shardfs/plan")
read -r sb sf sa sc sd < <(stat -f -c '%b %f %a %c %d' "$M")
check "statfs: blocks = the dataset's bytes in 4 KiB ($sb for $mbytes bytes), all free and available" \
	bash -c "[ $sb -eq $(((mbytes + 4095) / 4096)) ] && [ $sf -eq $sb ] && [ $sa -eq $sb ] && [ $sb -gt 0 ]"
check "statfs: inodes all free ($sd of $sc)" bash -c "[ $sc -gt 0 ] && [ $sd -eq $sc ]"
check "df: 0% used, 0% of inodes used" \
	bash -c "[ \"\$(df --output=pcent,ipcent '$M' | tail -1 | tr -s ' ')\" = ' 0% 0%' ]"
rc=0
(cd "$T" && "$SHARDFS" manifest "$SRC" -o source.region=x >/dev/null 2>"$T/mo.err") || rc=$?
check "manifest -o section.key=value: a usage error (exit 2, got $rc), no file of that name" \
	bash -c "[ $rc -eq 2 ] && grep -q 'takes no config overrides' '$T/mo.err' && [ ! -e '$T/source.region=x' ]"
check ".shardfs hidden from ls, shown by ls -a" bash -c \
	"! ls '$M' | grep -q shardfs && ls -a '$M' | grep -qx .shardfs"
check "stats is Prometheus text" bash -c \
	"grep -q '^# TYPE shardfs_reads_total counter' '$M/.shardfs/stats' && grep -q '^shardfs_manifest_items 304$' '$M/.shardfs/stats'"
cat "$M"/rank-*/train/n00000000/* >/dev/null
check "stats counts reads" bash -c \
	"awk '\$1 == \"shardfs_read_bytes_total\" && \$2 > 0 {f=1} END {exit !f}' '$M/.shardfs/stats'"
mt_src=$(stat -c %Y "$SRC/train/n00000000/000000.JPEG")
f=$(cd "$M" && ls -d rank-*/train/n00000000/000000.JPEG)
check "files are 0444, dirs 0555" bash -c \
	"test \$(stat -c %a '$M/rank-0/train') = 555 && test \$(stat -c %a '$M/$f') = 444"
check "files carry the source mtime" test "$(stat -c %Y "$M/$f")" = "$mt_src"
check "odd names read back byte-identical" bash -c \
	"for f in '$SRC/odd dir/'*; do b=\$(basename \"\$f\"); g=\$(ls -d '$M'/rank-*/'odd dir'/\"\$b\" 2>/dev/null); [ -n \"\$g\" ] && cmp -s \"\$f\" \"\$g\" || exit 1; done"
check "parallel readers get identical bytes" bash -c \
	"cd '$M' && find rank-* -type f -print0 | xargs -0 -P 8 -n 16 sh -c 'for f; do cmp -s \"\$f\" \"$SRC/\${f#rank-*/}\" || exit 1; done' _"
check "dd with 1 MiB blocks" bash -c \
	"dd if=\"$M/$f\" bs=1M status=none | cmp -s - '$SRC/train/n00000000/000000.JPEG'"

# --- read-only ----------------------------------------------------------
if /usr/bin/python3 - "$M" <<'PY'; then ok "every mutating call fails with EROFS"; else fail "EROFS"; fi
import errno, os, sys
m = sys.argv[1]
f = next(os.path.join(d, n) for d, _, fs in os.walk(os.path.join(m, "rank-0")) for n in fs)
d = os.path.dirname(f)
calls = {
    "open O_WRONLY": lambda: os.open(f, os.O_WRONLY),
    "open O_RDWR": lambda: os.open(f, os.O_RDWR),
    "open O_TRUNC": lambda: os.open(f, os.O_RDONLY | os.O_TRUNC),
    "create": lambda: os.open(os.path.join(d, "new"), os.O_CREAT | os.O_WRONLY, 0o644),
    "mkdir": lambda: os.mkdir(os.path.join(d, "newdir")),
    "unlink": lambda: os.unlink(f),
    "rmdir": lambda: os.rmdir(d),
    "rename": lambda: os.rename(f, f + ".x"),
    "link": lambda: os.link(f, f + ".l"),
    "symlink": lambda: os.symlink("x", os.path.join(d, "sl")),
    "chmod": lambda: os.chmod(f, 0o600),
    "truncate": lambda: os.truncate(f, 0),
    "utime": lambda: os.utime(f, (0, 0)),
    "setxattr": lambda: os.setxattr(f, "user.x", b"1"),
    "mknod": lambda: os.mkfifo(os.path.join(d, "fifo")),
}
bad = 0
for name, call in calls.items():
    try:
        call()
        print("EROFS: %s succeeded" % name); bad += 1
    except OSError as e:
        if e.errno != errno.EROFS:
            print("EROFS: %s gave %s" % (name, errno.errorcode.get(e.errno))); bad += 1
sys.exit(1 if bad else 0)
PY

check "unmount" umount_shardfs "$M"

# --- a source file changed after the manifest was made -------------------
# A fresh cache: the first read of the victim goes to the source.
mount_shardfs "$C" "$M" -o "cache.dir=$T/cache-change" || fail "mount for the change test"
victim=$(cd "$M" && ls -d rank-*/train/n00000003/* | head -1)
key=${victim#rank-*/}
printf 'changed' >>"$SRC/$key"
check "a changed source file reads as EIO, not new bytes" bash -c \
	"! cat '$M/$victim' >/dev/null 2>'$T/eio.err' && grep -q 'Input/output error' '$T/eio.err'"
check "the change is logged with the key" grep -q "$key: changed since the manifest" "$LAST_LOG"
check "read_errors counted" bash -c \
	"awk '\$1 == \"shardfs_read_errors_total\" && \$2 > 0 {f=1} END {exit !f}' '$M/.shardfs/stats'"
truncate -s -7 "$SRC/$key"

check "unmount" umount_shardfs "$M"

# --- a file rewritten in place while it is served -----------------------
# Same inode, same size, new bytes: each version's bytes carry its number
# ("V0 file03 block...") so a mix shows in the bytes and in the cache dir.
# A reader and the in-place writer start together on each file (the writer
# after a delay that grows per file), so some reads overlap a rewrite; every
# read must give version 0 whole (the manifest's) or EIO, and no byte of
# version 1 may reach the cache, then or after a remount on the same cache.
RW=$T/rwsrc
cat >"$T/rw.py" <<'PY'
import os, sys, threading, time
FILES, SIZE = 16, 16 << 20
TEMPLATE = b"".join(b"@@@@@@@@@@" + (b"block%08d" % j).ljust(53) + b"\n"
                    for j in range(SIZE // 64))
def version(i, k):
    # 64-byte lines "Vk fileii blockjjjjjjjj": every byte says its version.
    return TEMPLATE.replace(b"@@@@@@@@@@", b"V%d file%02d " % (k, i))
def rewrite(path, data, piece=256 << 10):
    # In place and back to front: a read going forward meets new bytes.
    with open(path, "r+b", buffering=0) as f:
        for off in range(SIZE - piece, -1, -piece):
            os.pwrite(f.fileno(), data[off:off + piece], off)
cmd, src = sys.argv[1], sys.argv[2]
if cmd == "make":
    os.makedirs(src)
    for i in range(FILES):
        p = os.path.join(src, "f%02d.bin" % i)
        with open(p, "wb") as f:
            f.write(version(i, 0))
        # An mtime in the past: a rewrite moves it whatever the clock tick.
        os.utime(p, (1500000000, 1500000000))
    sys.exit(0)
if cmd == "rewrite":
    rewrite(os.path.join(src, sys.argv[3]), version(int(sys.argv[3][1:3]), 1))
    sys.exit(0)
# race|check SRC MOUNTED_DIR: tally every read as v0, EIO or wrong.
mnt = sys.argv[3]
tally = {"v0": 0, "eio": 0, "wrong": 0}
lock = threading.Lock()
def read(i, start=None):
    try:
        if start:
            start.set()
        with open(os.path.join(mnt, "f%02d.bin" % i), "rb") as f:
            got = "v0" if f.read() == version(i, 0) else "wrong"
    except OSError as e:
        got = "eio" if e.errno == 5 else "wrong"
    with lock:
        tally[got] += 1
def rewrite_after(i, v1, start):
    # A delay that grows with i puts the rewrite at different points of
    # the read: before it, during it (the case that matters), after it.
    start.wait()
    time.sleep(i * 0.00025)
    rewrite(os.path.join(src, "f%02d.bin" % i), v1)
if cmd == "race":
    for i in range(1, FILES):
        start = threading.Event()
        ts = [threading.Thread(target=read, args=(i, start)),
              threading.Thread(target=rewrite_after,
                               args=(i, version(i, 1), start))]
        for t in ts: t.start()
        for t in ts: t.join()
for i in range(FILES):
    read(i)
print("v0 %(v0)d eio %(eio)d wrong %(wrong)d" % tally)
PY
/usr/bin/python3 "$T/rw.py" make "$RW"
"$SHARDFS" manifest "$RW" -o "$T/rw.tsv" 2>/dev/null
# Rewritten after the manifest, before any read.
/usr/bin/python3 "$T/rw.py" rewrite "$RW" f00.bin
# One chunk per file, no prefetch: each file's first read is one pread
# racing its rewrite.
cat >"$C" <<EOF
[source]
url = $RW
manifest = $T/rw.tsv
[shard]
world_size = 1
[cache]
dir = $T/cache-rw
chunk_size = 16M
[prefetch]
files = 0
EOF
mount_shardfs "$C" "$M" || fail "mount for the rewrite test"
rw_log=$LAST_LOG
/usr/bin/python3 "$T/rw.py" race "$RW" "$M/rank-0" >"$T/rw.out"
read -r _ _ _ _ _ rw_wrong <"$T/rw.out"
echo "# rewritten in place while read: $(cat "$T/rw.out"), changed during a read: $(grep -c 'changed while being read' "$rw_log")"
check "rewritten in place while read: every read gives version 0 or EIO" \
	test "${rw_wrong:-1}" -eq 0
check "a file rewritten before it was read gives EIO" bash -c \
	"! cat '$M/rank-0/f00.bin' >/dev/null 2>'$T/rw.err' && grep -q 'Input/output error' '$T/rw.err'"
check "the change is logged with the key" grep -q "$RW/f00.bin: changed since the manifest" "$rw_log"
check "unmount" umount_shardfs "$M"
check "no byte of the new version in the cache" bash -c "! grep -rqa 'V1 file' '$T/cache-rw'"
mount_shardfs "$C" "$M" || fail "remount for the rewrite test"
/usr/bin/python3 "$T/rw.py" check "$RW" "$M/rank-0" >"$T/rw.out"
read -r _ _ _ _ _ rw_wrong <"$T/rw.out"
echo "# after a remount on the same cache: $(cat "$T/rw.out")"
check "after a remount on the same cache: version 0 or EIO, never other bytes" \
	test "${rw_wrong:-1}" -eq 0
check "unmount" umount_shardfs "$M"
check "still no byte of the new version in the cache" bash -c "! grep -rqa 'V1 file' '$T/cache-rw'"
rm -rf "$RW" "$T/cache-rw"

# --- rewritten in place, its mtime put back -----------------------------
# (rsync --inplace -t, cp --preserve=timestamps over the file, a tool that
# restores times): inode, size and mtime are the manifest's, only the ctime
# moved. The new bytes were served before the etag held the ctime.
RM=$T/restored
mkdir -p "$RM"
printf 'version-1 of the file\n' >"$RM/a.txt"
printf 'another file\n' >"$RM/b.txt"
touch -d @1500000000 "$RM/a.txt" "$RM/b.txt"
"$SHARDFS" manifest "$RM" -o "$T/restored.tsv" 2>/dev/null
# Same size, same inode; the mtime put back until the ctime has moved
# (it moves with the kernel's coarse clock: bounded, never timing-bound).
/usr/bin/python3 - "$RM/a.txt" <<'PY'
import os, sys, time
p = sys.argv[1]
before = os.stat(p).st_ctime_ns
with open(p, "r+b") as f:
    f.write(b"version-2 of the file\n")
for _ in range(400):
    os.utime(p, ns=(1500000000 * 10**9, 1500000000 * 10**9))
    if os.stat(p).st_ctime_ns != before:
        sys.exit(0)
    time.sleep(0.005)
sys.exit("the ctime never moved")
PY
check "rewritten with the mtime put back: size and mtime as in the manifest" \
	bash -c "[ \"\$(stat -c '%s %Y' '$RM/a.txt')\" = '22 1500000000' ]"
cat >"$C" <<EOF
[source]
url = $RM
manifest = $T/restored.tsv
[shard]
world_size = 1
[cache]
dir = $T/cache-restored
EOF
mount_shardfs "$C" "$M" || fail "mount for the restored-mtime test"
check "rewritten with the mtime put back: a read gives EIO, not the new bytes" \
	bash -c "! cat '$M/rank-0/a.txt' >'$T/restored.out' 2>'$T/restored.err' && grep -q 'Input/output error' '$T/restored.err' && ! grep -q version-2 '$T/restored.out'"
check "... and is logged with the key" grep -q "$RM/a.txt: changed since the manifest was made" "$LAST_LOG"
check "... the other file still reads" grep -qx 'another file' "$M/rank-0/b.txt"
check "unmount" umount_shardfs "$M"
check "no byte of the new version in the cache" bash -c "! grep -rqa 'version-2' '$T/cache-restored'"

# Manifests and pins made before the etag held the ctime ("mtime:size:ino")
# keep working, with a warning saying what they cannot see.
printf 'version-1 of the file\n' >"$RM/a.txt"
touch -d @1500000000 "$RM/a.txt"
"$SHARDFS" manifest "$RM" -o "$T/now.tsv" 2>/dev/null
awk -F'\t' 'BEGIN {OFS = "\t"} NR > 1 {sub(/:[0-9]+$/, "", $3)} {print}' \
	"$T/now.tsv" >"$T/legacy.tsv"
check "an older manifest: three-field etags" \
	bash -c "tail -n +2 '$T/legacy.tsv' | cut -f3 | grep -qxE '[0-9]+:[0-9]+:[0-9]+'"
sed -i "s|^manifest = .*|manifest = $T/legacy.tsv|; s|^dir = .*|dir = $T/cache-legacy|" "$C"
mount_shardfs "$C" "$M" || fail "mount with an older manifest"
check "an older manifest is served" grep -qx 'version-1 of the file' "$M/rank-0/a.txt"
check "... with one warning that a restored mtime goes unseen" \
	bash -c "[ \"\$(grep -c 'etags have no ctime' '$LAST_LOG')\" = 1 ] && cat '$M/rank-0/b.txt' >/dev/null && [ \"\$(grep -c 'etags have no ctime' '$LAST_LOG')\" = 1 ]"
check "unmount" umount_shardfs "$M"
old_digest=$("$SHARDFS" plan "$C" | awk '$1 == "manifest_sha256" {print $2}')
# The same pin on a listing (no manifest file): the listing cut to the
# older etags has the pinned digest, so it is served, with a warning
# naming today's digest.
sed -i "/^manifest = /d; /^url = /a manifest_sha256 = $old_digest" "$C"
mount_shardfs "$C" "$M" || fail "mount of a listing pinned by an older shardfs"
check "a listing pinned by an older shardfs's digest is served" grep -qx 'another file' "$M/rank-0/b.txt"
check "... with a warning naming today's digest" \
	grep -q "as older shardfs listed it.*pin the digest of today's listing, $(awk '$1 == "sha256" {print $2}' <("$SHARDFS" manifest "$RM" 2>&1 >/dev/null))" "$LAST_LOG"
check "... and .shardfs/plan shows the pinned digest" grep -qx "manifest_sha256 $old_digest" "$M/.shardfs/plan"
check "unmount" umount_shardfs "$M"
sed -i "s|^manifest_sha256 = .*|manifest_sha256 = $(printf '1%.0s' $(seq 64))|" "$C"
"$SHARDFS" mount "$C" "$M" -f >"$T/badpin.log" 2>&1
check "any other pin is still refused" grep -q 'manifest digest mismatch' "$T/badpin.log"

# --- symlinks that leave the source root ----------------------------------
# A link to /etc/shadow, absolute and relative links to a 0600 file outside
# the source: none is listed, served or cached; links inside are served.
LS=$T/lsrc
OUT=$T/outside
mkdir -p "$LS/good" "$OUT"
printf 'abc' >"$LS/good/a.bin"
printf 'later' >"$LS/good/later.bin"
printf 'OUTSIDE-SECRET-MARKER' >"$OUT/secret"
chmod 600 "$OUT/secret"
ln -s /etc/shadow "$LS/shadow"
ln -s "$OUT/secret" "$LS/abs_secret"
ln -s ../outside/secret "$LS/rel_secret"
ln -s good/a.bin "$LS/in_rel"
ln -s "$LS/good/a.bin" "$LS/in_abs"
cat >"$C" <<EOF
[source]
url = $LS
[shard]
world_size = 2
[cache]
dir = $T/cache-ln
EOF
"$SHARDFS" plan "$C" >"$T/lplan" 2>"$T/lplan.err"
check "links leaving the root are skipped and counted" bash -c \
	"grep -q '^skipped_keys_link_outside_root 3$' '$T/lplan' && grep -q '^manifest_items 4$' '$T/lplan'"
check "each refused link is logged by name" bash -c \
	"test \$(grep -c 'leads outside the source root' '$T/lplan.err') -eq 3 && grep -q 'abs_secret: symlink leads outside' '$T/lplan.err'"
mount_shardfs "$C" "$M" || fail "mount for the symlink test"
check "links leaving the root are in no rank dir" bash -c \
	"test -z \"\$(cd '$M' && find rank-* -name '*secret*' -o -name shadow)\""
check "links inside the root are served" bash -c \
	"test \"\$(cat '$M'/rank-*/in_rel)\" = abc && test \"\$(cat '$M'/rank-*/in_abs)\" = abc"
check "stats counts them as skipped" grep -q \
	'shardfs_skipped_keys{reason="link_outside_root"} 3' "$M/.shardfs/stats"
# Planted after the manifest, in place of a listed file not read yet.
rm "$LS/good/later.bin"
ln -s "$OUT/secret" "$LS/good/later.bin"
check "a link planted after the manifest reads as EIO" bash -c \
	"! cat '$M'/rank-*/good/later.bin >/dev/null 2>'$T/ln.err' && grep -q 'Input/output error' '$T/ln.err'"
check "the refusal is logged with the key" grep -q \
	"good/later.bin: leads outside the source root" "$LAST_LOG"
cat "$M"/rank-*/* "$M"/rank-*/good/* >/dev/null 2>&1
check "unmount" umount_shardfs "$M"
check "no byte from outside the root in the cache" bash -c \
	"! grep -rqa -e OUTSIDE-SECRET-MARKER -e 'root:' '$T/cache-ln'"

# --- the kernel connection aborted ----------------------------------------
# echo 1 > /sys/fs/fuse/connections/N/abort kills the mount under the
# daemon: it must exit 1 and say so, not 0 as after an unmount.
if [ "$(id -u)" = 0 ] && { mountpoint -q /sys/fs/fuse/connections ||
	mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null; }; then
	conf "$C" world_size=1
	mount_shardfs "$C" "$M" || fail "mount for the abort test"
	# The connection is named by the mount's device number (the minor,
	# for major 0), read from mountinfo: a stat of the mount would do too.
	dev=$(awk -v m="$(realpath "$M")" '$5 == m {d = $3} END {print d}' /proc/self/mountinfo)
	echo 1 >"/sys/fs/fuse/connections/${dev#0:}/abort"
	# Bounded: a daemon that missed the abort fails the test, not hangs it.
	for _ in $(seq 300); do kill -0 "$LAST_PID" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$LAST_PID" 2>/dev/null && kill "$LAST_PID"
	rc=0
	wait "$LAST_PID" || rc=$?
	check "FUSE abort: the daemon exits 1" test "$rc" -eq 1
	check "FUSE abort: logged" grep -q "FUSE connection of .* was aborted" "$LAST_LOG"
	fusermount3 -u "$M" 2>/dev/null || umount -l "$M"
	mount_shardfs "$C" "$M" || fail "mount after the abort test"
	check "a clean unmount still exits 0" umount_shardfs "$M"
else
	echo "# skipped the FUSE abort test: needs root and fusectl"
fi

# --- the kernel sends 1 MiB read requests ---------------------------------
head -c $((4 << 20)) /dev/urandom >"$SRC/big.bin"
conf "$C" world_size=1
mount_shardfs "$C" "$M" -d || fail "mount with -d"
dd if="$M/rank-0/big.bin" of=/dev/null bs=1M status=none
check "reads arrive as 1 MiB requests" grep -q 'success, outsize: 1048592$' "$LAST_LOG"
check "big file byte-identical" cmp -s "$M/rank-0/big.bin" "$SRC/big.bin"
check "unmount" umount_shardfs "$M"
rm -f "$SRC/big.bin"

# --- ranks selection ----------------------------------------------------
conf "$C" world_size=4 ranks=1,3
mount_shardfs "$C" "$M" || fail "ranks mount"
check "ranks = 1,3 shows rank-1 and rank-3 only" test "$(ls "$M" | tr '\n' ' ')" = "rank-1 rank-3 "
check "ranks = 1,3 has their order files only" test \
	"$(ls "$M/.shardfs" | grep order | tr '\n' ' ')" = "rank-1.order rank-3.order "
check "ranks = 1,3 views verify" /usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC" --partial
check "unmount" umount_shardfs "$M"

# --- key-to-path rules, on a pinned manifest ----------------------------
long=$(printf 'x%.0s' $(seq 300))
mkdir -p "$T/psrc/good" "$T/psrc/conflict"
printf 'abc' >"$T/psrc/good/a.bin"
printf 'xy' >"$T/psrc/conflict/child.bin"
# The real listing (with real etags) plus keys a store could hold that no
# directory can: loading sorts them into place.
{
	"$SHARDFS" manifest "$T/psrc" 2>/dev/null
	printf 'good/\t0\te2\t0\n'           # directory marker
	printf 'bad//b.bin\t1\te3\t0\n'      # empty component
	printf 'bad/./c.bin\t1\te4\t0\n'     # "."
	printf '../escape.bin\t1\te5\t0\n'   # ".."
	printf '/abs.bin\t1\te6\t0\n'        # leading slash: empty component
	printf 'long/%s\t1\te7\t0\n' "$long" # component over 255 bytes
	printf 'nul%%00byte\t1\te8\t0\n'     # NUL
	printf 'conflict\t1\te9\t0\n'        # file and directory: dir wins
} >"$T/pinned.tsv"
cat >"$C" <<EOF
[source]
url = $T/psrc
manifest = $T/pinned.tsv
[shard]
world_size = 1
[cache]
dir = $T/cache
EOF
"$SHARDFS" plan "$C" >"$T/pplan" 2>"$T/pplan.err"
check "plan counts skipped keys" grep -q '^skipped_keys 8$' "$T/pplan"
check "plan names skip reasons" bash -c \
	"grep -q '^skipped_keys_directory_marker 1$' '$T/pplan' && grep -q '^skipped_keys_bad_component 4$' '$T/pplan' && grep -q '^skipped_keys_long_component 1$' '$T/pplan' && grep -q '^skipped_keys_nul_byte 1$' '$T/pplan' && grep -q '^skipped_keys_file_is_directory 1$' '$T/pplan'"
check "each skipped key is logged with its reason" bash -c \
	"test \$(grep -c 'skipping key' '$T/pplan.err') -eq 8 && grep -q \"skipping key 'conflict': file_is_directory\" '$T/pplan.err'"
mount_shardfs "$C" "$M" || fail "pinned mount"
check "valid keys are served" bash -c \
	"test \"\$(cat '$M/rank-0/good/a.bin')\" = abc && test \"\$(cat '$M/rank-0/conflict/child.bin')\" = xy"
check "only the valid keys are files" test \
	"$(cd "$M/rank-0" && find . -type f | LC_ALL=C sort | tr '\n' ' ')" = "./conflict/child.bin ./good/a.bin "
check "stats counts skipped keys by reason" bash -c \
	"grep -q 'shardfs_skipped_keys{reason=\"bad_component\"} 4' '$M/.shardfs/stats' && grep -q 'shardfs_skipped_keys{reason=\"file_is_directory\"} 1' '$M/.shardfs/stats'"
check "unmount" umount_shardfs "$M"

# --- pinned digest --------------------------------------------------------
good=$(awk '$1 == "manifest_sha256" {print $2}' "$T/pplan")
bad_digest=$(printf '%064d' 0)
pin() {
	cat >"$C" <<EOF2
[source]
url = $T/psrc
manifest = $T/pinned.tsv
manifest_sha256 = $1
[cache]
dir = $T/cache
EOF2
}
pin "$bad_digest"
"$SHARDFS" mount "$C" "$M" -f >"$T/mm.out" 2>&1
rc=$?
check "digest mismatch refuses to mount (exit 1)" test "$rc" -eq 1
check "digest mismatch names both digests" bash -c \
	"grep -q '$bad_digest' '$T/mm.out' && grep -q '$good' '$T/mm.out'"
check "digest mismatch left no mount" bash -c "! grep -qs ' $M fuse' /proc/mounts"
pin "$good"
check "matching digest mounts" mount_shardfs "$C" "$M"
check "unmount" umount_shardfs "$M"

# --- config and source errors --------------------------------------------
conf "$C" world_size=abc
"$SHARDFS" plan "$C" >/dev/null 2>"$T/err"
rc=$?
check "bad value exits 2" test "$rc" -eq 2
check "bad value message names file, line, key and value" \
	grep -q "$C:4: \[shard\] world_size = abc" "$T/err"
conf "$C" world_size=4 colour=blue
"$SHARDFS" mount "$C" "$M" >/dev/null 2>"$T/err"
rc=$?
check "unknown key exits 2 and names it" bash -c \
	"test $rc -eq 2 && grep -q 'colour = blue' '$T/err'"
conf "$C" world_size=4
"$SHARDFS" plan "$C" -o shard.layout=diagonal >/dev/null 2>"$T/err"
rc=$?
check "bad -o override exits 2 and names it" bash -c \
	"test $rc -eq 2 && grep -q 'shard.layout=diagonal' '$T/err'"
check "-o overrides a key" bash -c \
	"'$SHARDFS' plan '$C' -o shard.world_size=2 | grep -q '^world_size 2$'"
"$SHARDFS" plan "$T/nonexistent.conf" >/dev/null 2>"$T/err"
rc=$?
check "missing config exits 2 and names it" bash -c \
	"test $rc -eq 2 && grep -q 'nonexistent.conf' '$T/err'"
printf '[source]\nurl = %s/no/such/dir\n' "$T" >"$C"
"$SHARDFS" mount "$C" "$M" -f >/dev/null 2>"$T/err"
rc=$?
check "missing source dir exits 1 with a clear error" bash -c \
	"test $rc -eq 1 && grep -q 'source directory $T/no/such/dir: No such file or directory' '$T/err'"
check "missing source dir left no mount" bash -c "! grep -qs ' $M fuse' /proc/mounts"
"$SHARDFS" manifest "$T/no/such/dir" >/dev/null 2>"$T/err"
rc=$?
check "manifest of a missing dir exits 1" bash -c \
	"test $rc -eq 1 && grep -q 'No such file or directory' '$T/err'"
conf "$C" world_size=2
"$SHARDFS" mount "$C" "$T/no-mountpoint" -f >/dev/null 2>"$T/err"
rc=$?
check "missing mountpoint exits 1 and names it" bash -c \
	"test $rc -eq 1 && grep -q 'no-mountpoint' '$T/err'"

# --- command line ---------------------------------------------------------
check "--help exits 0" bash -c "'$SHARDFS' --help | grep -q 'usage: shardfs'"
check "help mount exits 0" bash -c "'$SHARDFS' help mount | grep -q 'shardfs mount CONFIG'"
check "--version" bash -c "'$SHARDFS' --version | grep -q '^shardfs '"
"$SHARDFS" frobnicate >/dev/null 2>&1
check "unknown command exits 2" test $? -eq 2
"$SHARDFS" plan >/dev/null 2>&1
check "plan without CONFIG exits 2" test $? -eq 2
"$SHARDFS" plan "$C" --rank 9 >/dev/null 2>&1
check "plan --rank out of range exits 2" test $? -eq 2

# --- signals --------------------------------------------------------------
conf "$C" world_size=2
for sig in TERM INT; do
	# Scripts start background jobs with SIGINT ignored, and an ignored
	# signal stays ignored across exec: restore the default, as a terminal
	# would have it.
	if [ $sig = INT ]; then
		mount_shardfs "$C" "$M" --sigint-default || fail "mount for SIG$sig"
	else
		mount_shardfs "$C" "$M" || fail "mount for SIG$sig"
	fi
	kill -$sig "$LAST_PID"
	rc=0
	wait "$LAST_PID" || rc=$?
	check "SIG$sig: exit 0" test "$rc" -eq 0
	check "SIG$sig: unmounted" bash -c "! grep -qs ' $(realpath "$M") ' /proc/mounts"
done

# --- background mode and the mount(8) form --------------------------------
# Without -f shardfs returns once the mount serves; its daemon is ours, found
# by the unique mountpoint in its command line.
daemon_pid() {
	local p
	for p in $(pgrep -f "shardfs.*$1" || true); do
		[ "$p" != $$ ] && echo "$p"
	done | head -1
}
M2=$T/mnt-bg
mkdir -p "$M2"
MOUNTS+=("$(realpath "$M2")")
"$SHARDFS" mount "$C" "$M2" 2>"$T/bg.err"
rc=$?
dp=$(daemon_pid "$M2")
[ -n "$dp" ] && PIDS+=("$dp")
check "background mount returns 0 once serving" bash -c \
	"test $rc -eq 0 && test -d '$M2/rank-1'"
fusermount3 -u "$M2"
for _ in $(seq 50); do [ -n "$dp" ] && kill -0 "$dp" 2>/dev/null || break; sleep 0.1; done
check "background daemon exits on unmount" bash -c "[ -n '$dp' ] && ! kill -0 '$dp' 2>/dev/null"

"$SHARDFS" "$C" "$M2" -o ro,nodev,nosuid,shard.world_size=3,shard.ranks=0,2 2>"$T/helper.err"
rc=$?
dp=$(daemon_pid "$M2")
[ -n "$dp" ] && PIDS+=("$dp")
check "shardfs CONFIG MOUNTPOINT -o form with overrides" bash -c \
	"test $rc -eq 0 && test \"\$(ls '$M2' | tr '\n' ' ')\" = 'rank-0 rank-2 '"
fusermount3 -u "$M2"
# mount(8) runs helpers with its own PATH, so name the binary: the
# "PROGRAM#SOURCE" form of mount.fuse3, as an fstab line may.
mount -t fuse "$SHARDFS#$C" "$M2" -o shard.world_size=2,nodev 2>"$T/mount8.err"
rc=$?
dp=$(daemon_pid "$M2")
[ -n "$dp" ] && PIDS+=("$dp")
check "mount -t fuse shardfs#CONFIG MOUNTPOINT" bash -c \
	"test $rc -eq 0 && test \"\$(ls '$M2' | tr '\n' ' ')\" = 'rank-0 rank-1 '"
umount "$M2"
for _ in $(seq 50); do [ -n "$dp" ] && kill -0 "$dp" 2>/dev/null || break; sleep 0.1; done

finish
