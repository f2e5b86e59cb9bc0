#!/usr/bin/env bash
# nfs:// sources through libnfs, no kernel mount, against a real NFSv4
# server: nfs-ganesha (VFS FSAL) on 127.0.0.1 exporting a directory of
# this suite's temp dir (tests/integration/nfs/ganesha.sh).
#
# Covered: `shardfs manifest nfs://...` lists what the directory holds
# (same keys and sizes as the posix backend's listing of it), and fails,
# naming the bound, past its memory bound; rank views
# over nfs:// for several plans are byte-identical to the source files,
# disjoint, their union the dataset, in the reference order
# (verify_mount.py, shardspec.py); names with spaces, unicode, '%' and a
# TAB; a manifest pinned at an nfs:// URL; bad URLs and an unreachable
# server fail the mount with the reason; a file changed after the manifest
# gives EIO (never bytes of the new version) while others still read; a
# server stopped (SIGSTOP) mid-read gives EIO within the read deadline,
# and reads recover once it runs again; one read() of an uncached file
# while it is stopped ends with EIO within 1.6 x read_timeout_ms, cache
# off and on; a server killed mid-read gives
# EIO, and reads recover once it is restarted; a client whose NFSv4 lease
# expired while idle reconnects on its next read; a server whose READs answer
# 64 KiB at most still gives whole files; a server restarted while all 8
# pooled connections were up serves the next single read (retries = 1), no
# failed read logged; the source directory replaced under a mount
# (NFS4ERR_STALE on the old root), then a reload, reads on. Kept file
# handles (SHARDFS_NFS_TRACE counts the RPCs): a file rewritten in place
# between two ranges of one handle gives EIO; a file read in chunks costs
# one OPEN and, per range, its READs and one GETATTR; 16 readers over 2
# connections never keep more than 4 files open per connection; files
# unused for 6 s are closed on every connection; a server restart with a
# kept handle reopens it, no read failing; a file replaced by rename reads
# as its old version or EIO, never the new one, and after a reload as the
# new one. The cache and prefetch suites also run over nfs://
# (test_cache_nfs.sh, test_prefetch_nfs.sh).
# Time bounds below only tell an EIO from a hang; they are generous.
SUITE=nfs
. "$(dirname "$0")/lib.sh"
. "$HERE/nfs/ganesha.sh"

if ! command -v "$GANESHA_BIN" >/dev/null 2>&1 && [ ! -x "$GANESHA_BIN" ]; then
	fail "nfs-ganesha is not installed (scripts/install-deps.sh)"
	finish
fi

EXPORT=$T/export
SRC=$EXPORT/ds
make_dataset "$SRC" 200
mkdir -p "$SRC/odd dir"
printf 'space' >"$SRC/odd dir/with space.bin"
printf 'unicode' >"$SRC/odd dir/ünï cødé +=.bin"
printf 'percent' >"$SRC/odd dir/100%.txt"
printf 'tab' >"$SRC/odd dir/a	tab"
mkdir -p "$SRC/日本語"
head -c 70000 /dev/urandom >"$SRC/日本語/データ.bin"
# Larger than CACHE_UNCACHED_WHOLE_MAX (8 MiB): without a disk cache a
# smaller object is fetched whole at its first read, and the mid-read
# faults below need a range that was not fetched yet.
head -c $((12 << 20)) /dev/urandom >"$SRC/big.bin"
head -c $((12 << 20)) /dev/urandom >"$SRC/big2.bin"
head -c $((12 << 20)) /dev/urandom >"$SRC/kept.bin"
NOBJ=$(find "$SRC" -type f | wc -l)

if ! ganesha_start "$EXPORT"; then
	fail "ganesha start"
	finish
fi
ok "ganesha serves $EXPORT on 127.0.0.1:$GANESHA_PORT"
URL=$NFS_URL/ds

# --- the manifest ---------------------------------------------------------------
"$SHARDFS" manifest "$URL" -o "$T/m.tsv" >"$T/manifest.out" 2>"$T/manifest.err"
check "shardfs manifest nfs://... succeeds" test -s "$T/m.tsv"
check "manifest: $NOBJ objects" grep -qx "objects $NOBJ" "$T/manifest.out"
"$SHARDFS" manifest "$SRC" -o "$T/posix.tsv" >/dev/null 2>&1
check "manifest: same keys and sizes as the posix listing of the directory" bash -c \
	"cmp -s <(cut -f1,2 '$T/m.tsv') <(cut -f1,2 '$T/posix.tsv')"
check "manifest: names escaped as for posix (TAB, %)" bash -c \
	"grep -qF 'odd dir/a%09tab' '$T/m.tsv' && grep -qF 'odd dir/100%25.txt' '$T/m.tsv'"
"$SHARDFS" manifest "$URL/" -o "$T/m2.tsv" >/dev/null 2>&1
check "manifest: a trailing slash lists the same" cmp -s "$T/m.tsv" "$T/m2.tsv"
"$SHARDFS" manifest "$NFS_URL/ds/odd%20dir" -o "$T/m3.tsv" >/dev/null 2>&1
check "manifest: %20 in the URL names a directory with a space" \
	test "$(tail -n +2 "$T/m3.tsv" | wc -l)" -eq 4
# The listing's memory bound ([source] list_memory): 4 KiB is less than
# the dataset's keys and etags hold.
"$SHARDFS" manifest "$URL" --list-memory 4K -o "$T/m4.tsv" >/dev/null 2>"$T/m4.err"
rc=$?
check "manifest: a listing past --list-memory fails, naming the bound (exit $rc)" bash -c \
	"test $rc -eq 1 && grep -q '$URL/: list: the objects listed so far (.*) hold more than \[source\] list_memory = 4096 bytes; giving up' '$T/m4.err'"

conf() { # conf FILE [KEY=VALUE in [shard]...]; SRCKEYS: more [source] lines
	local f=$1; shift
	{
		echo "[source]"
		echo "url = ${CONF_URL:-$URL}"
		[ -n "${SRCKEYS:-}" ] && printf '%s\n' "$SRCKEYS"
		echo "[shard]"
		local kv
		for kv in "$@"; do echo "${kv%%=*} = ${kv#*=}"; done
		echo "[cache]"
		if [ -n "${NOCACHE:-}" ]; then
			echo "enabled = false"
		else
			echo "dir = ${CACHE:-$T/cache}"
		fi
	} >"$f"
}

# --- the views --------------------------------------------------------------------
combos=(
	"1 shuffle strided none 0 0"
	"4 shuffle strided none 0 0"
	"3 none contiguous pad 11 2"
	"5 shuffle bytes none 7 1"
	"4 shuffle strided drop 3 0"
)
M=$T/mnt
for c in "${combos[@]}"; do
	read -r W ORDER LAYOUT BALANCE SEED EPOCH <<<"$c"
	name="W=$W $ORDER $LAYOUT $BALANCE seed=$SEED epoch=$EPOCH"
	C=$T/c.conf
	CACHE=$T/cache.$W$LAYOUT conf "$C" world_size=$W order=$ORDER layout=$LAYOUT \
		balance=$BALANCE seed=$SEED epoch=$EPOCH
	if ! mount_shardfs "$C" "$M"; then
		fail "$name: mount"
		continue
	fi
	if /usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC" >"$T/verify.out"; then
		ok "$name: union = dataset, disjoint, byte-identical"
	else
		fail "$name: verify" "$(head -5 "$T/verify.out")"
	fi
	bad=""
	for ((r = 0; r < W; r++)); do
		/usr/bin/python3 "$HERE/shardspec.py" "$M/.shardfs/manifest.tsv" \
			--world-size "$W" --seed "$SEED" --epoch "$EPOCH" \
			--order "$ORDER" --layout "$LAYOUT" --balance "$BALANCE" \
			--rank $r >"$T/spec.$r" || bad="$bad spec$r"
		cmp -s "$T/spec.$r" "$M/.shardfs/rank-$r.order" || bad="$bad ref$r"
	done
	check "$name: rank-R.order = reference implementation" test -z "$bad"
	check "$name: manifest.tsv = shardfs manifest nfs://" cmp -s "$T/m.tsv" "$M/.shardfs/manifest.tsv"
	check "$name: clean unmount" umount_shardfs "$M"
done

# --- odd names, parallel readers, a manifest pinned at an nfs:// URL -------------
mkdir -p "$EXPORT/pins"
cp "$T/m.tsv" "$EXPORT/pins/m.tsv"
C=$T/pinned.conf
SRCKEYS="manifest = $NFS_URL/pins/m.tsv" CACHE=$T/cache.pin conf "$C" world_size=2
if mount_shardfs "$C" "$M"; then
	check "pinned nfs:// manifest: served as pinned" cmp -s "$T/m.tsv" "$M/.shardfs/manifest.tsv"
	check "odd names (space, unicode, %, TAB) read back byte-identical" bash -c \
		"for f in '$SRC/odd dir/'* '$SRC/日本語/データ.bin'; do k=\${f#$SRC/}; g=\$(ls -d '$M'/rank-*/\"\$k\" 2>/dev/null); [ -n \"\$g\" ] && cmp -s \"\$f\" \"\$g\" || exit 1; done"
	check "16 parallel readers get identical bytes" bash -c \
		"cd '$M' && find rank-* -type f -print0 | xargs -0 -P 16 -n 8 sh -c 'for f; do cmp -s \"\$f\" \"$SRC/\${f#rank-*/}\" || exit 1; done' _"
	check "pinned: clean unmount" umount_shardfs "$M"
else
	fail "pinned nfs:// manifest: mount"
fi

# --- bad URLs and an unreachable server -----------------------------------------
C=$T/bad.conf
CONF_URL="nfs://127.0.0.1:$GANESHA_PORT/export/ds?version=5" conf "$C"
"$SHARDFS" mount "$C" "$T/badmnt" -f >"$T/bad.out" 2>&1
check "bad URL (version=5): config error, exit 2" bash -c \
	"test $? -eq 2 && grep -q 'nfs://server/path' '$T/bad.out'"
"$SHARDFS" manifest "$NFS_URL/no-such-dir" >"$T/nodir.out" 2>&1
check "missing path: manifest fails, says so" bash -c \
	"test $? -ne 0 && grep -qi 'no such file' '$T/nodir.out'"
dead=$(ganesha_free_port)
timeout 30 "$SHARDFS" manifest "nfs://127.0.0.1:$dead/export/ds" >"$T/dead.out" 2>&1
rc=$?
check "nothing listening: manifest fails (exit $rc), not a hang" bash -c \
	"test $rc -ne 0 -a $rc -ne 124 && grep -q 'nfs://127.0.0.1' '$T/dead.out'"

# --- SHARDFS_NFS_TRACE: a symlink is not followed, the file is private ---------
ln -s "$T/trace.target" "$T/trace.lnk"
SHARDFS_NFS_TRACE=$T/trace.lnk "$SHARDFS" manifest "$URL" -o "$T/mt.tsv" >"$T/trace.out" 2>&1
check "trace: a symlinked trace file is refused, with a warning" bash -c \
	"! test -e '$T/trace.target' && grep -q 'SHARDFS_NFS_TRACE: cannot open' '$T/trace.out'"
SHARDFS_NFS_TRACE=$T/trace.log "$SHARDFS" manifest "$URL" -o "$T/mt.tsv" >"$T/trace.out" 2>&1
check "trace: the trace file is created 0600, the tracing noted" bash -c \
	"test \$(stat -c %a '$T/trace.log') = 600 && grep -q 'SHARDFS_NFS_TRACE: every nfs read' '$T/trace.out'"

# --- a file changed after the manifest ------------------------------------------
C=$T/stale.conf
SRCKEYS="manifest = $T/m.tsv" CACHE=$T/cache.stale conf "$C" world_size=1
victim=train/n00000001/000001.JPEG
other=train/n00000002/000002.JPEG
cp "$SRC/$victim" "$T/victim.old"
if mount_shardfs "$C" "$M"; then
	# Same size, new bytes: only the etag (mtime, ctime) tells.
	sleep 0.01
	head -c "$(stat -c %s "$SRC/$victim")" /dev/urandom >"$T/victim.new"
	cat "$T/victim.new" >"$SRC/$victim"
	cat "$M/rank-0/$victim" >"$T/victim.read" 2>"$T/stale.err"
	rc=$?
	check "changed after the manifest: EIO" bash -c \
		"test $rc -ne 0 && grep -q 'Input/output error' '$T/stale.err'"
	check "changed after the manifest: no byte of the new version returned" bash -c \
		"! test -s '$T/victim.read' || cmp -s '$T/victim.read' <(head -c \$(stat -c %s '$T/victim.read') '$T/victim.old')"
	check "changed after the manifest: logged with the key" grep -q "changed since the manifest" "$LAST_LOG"
	check "other files still read byte-identical" cmp -s "$M/rank-0/$other" "$SRC/$other"
	check "stale: clean unmount" umount_shardfs "$M"
else
	fail "stale: mount"
fi
cp "$T/victim.old" "$SRC/$victim"
"$SHARDFS" manifest "$URL" -o "$T/m.tsv" >/dev/null 2>&1

# --- a file changed in place between two ranges of one open handle --------------
# The backend keeps a file's NFS handle open across its ranges: the
# second range, read through the kept handle after the file was rewritten
# in place (same size, new bytes where it reads), must still fail (EIO,
# logged), never return a byte of the new version. inplace.py MOUNTFILE
# SRCFILE: reads 1 MiB at 0, rewrites 1 MiB at 4 MiB of the source file in
# place, reads 1 MiB at 4 MiB through the mount; prints "eio", "old",
# "new" or what else happened.
cat >"$T/inplace.py" <<'PY'
import errno, os, sys, time
path, src = sys.argv[1], sys.argv[2]
want = open(src, "rb").read()
fd = os.open(path, os.O_RDONLY)
if os.pread(fd, 1 << 20, 0) != want[: 1 << 20]:
    print("wrong first MiB"); sys.exit(0)
time.sleep(0.05)  # past the timestamp granularity: mtime, ctime move
new = os.urandom(1 << 20)
with open(src, "r+b") as f:
    f.seek(4 << 20)
    f.write(new)
try:
    b = os.pread(fd, 1 << 20, 4 << 20)
    print("old" if b == want[4 << 20 : 5 << 20] else "new" if b == new else "wrong")
except OSError as e:
    print("eio" if e.errno == errno.EIO else "errno %d" % e.errno)
PY
C=$T/inplace.conf
{
	echo "[source]"
	echo "url = $URL?connections=1"
	echo "manifest = $T/m.tsv"
	echo "[shard]"
	echo "world_size = 1"
	echo "[cache]"
	echo "enabled = false"
	echo "[prefetch]"
	echo "files = 0"
} >"$C"
cp "$SRC/kept.bin" "$T/kept.old"
: >"$T/inplace.trace"
if SHARDFS_NFS_TRACE=$T/inplace.trace mount_shardfs "$C" "$M"; then
	out=$(timeout 60 /usr/bin/python3 "$T/inplace.py" "$M/rank-0/kept.bin" "$SRC/kept.bin")
	check "changed in place between two ranges of one handle: EIO ($out)" test "$out" = eio
	check "changed in place between ranges: logged with the key" \
		grep -q "kept.bin: read at 4194304: changed since the manifest" "$LAST_LOG"
	check "changed in place between ranges: clean unmount" umount_shardfs "$M"
else
	fail "in place: mount"
fi
cp "$T/kept.old" "$SRC/kept.bin"
"$SHARDFS" manifest "$URL" -o "$T/m.tsv" >/dev/null 2>&1

# --- kept handles: what a range costs, how many stay open, and for how long -------
# The backend keeps files open across ranges (4 per connection at most,
# closed once unused for 5 s). SHARDFS_NFS_TRACE tells what each range
# cost ("GET ... open=N read=N getattr=N") and every handle's life: OPEN,
# CLOSE, DROP (forgotten with its connection). heldcheck.py TRACE MAX
# replays the handle lines per connection and fails if one ever kept
# more than MAX files, opened one it kept, or closed one it did not;
# it prints "max=N open=N close=N drop=N held=FILES...", held being what
# is still open at the end of the trace (or at the line STOP, if given).
cat >"$T/heldcheck.py" <<'PY'
import sys
held, most, n = {}, 0, {"OPEN": 0, "CLOSE": 0, "DROP": 0}
stop = sys.argv[3] if len(sys.argv) > 3 else None
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    f = line.split()
    if f and f[0] == stop:
        break
    if len(f) < 5 or f[0] not in n:
        continue
    verb, path, status, conn = f[0], f[1], f[2], f[4]
    s = held.setdefault(conn, set())
    if verb == "OPEN":
        if status != "200":
            continue
        if path in s:
            sys.exit("conn %s opened %s twice" % (conn, path))
        s.add(path)
        most = max(most, len(s))
    else:
        if path not in s:
            sys.exit("conn %s: %s %s, not kept" % (conn, verb, path))
        s.discard(path)
    n[verb] += 1
if most > int(sys.argv[2]):
    sys.exit("a connection kept %d files open" % most)
print("max=%d open=%d close=%d drop=%d held=%s" % (most, n["OPEN"], n["CLOSE"],
      n["DROP"], ",".join(sorted(p for s in held.values() for p in s))))
PY
# kconf FILE CONNECTIONS [LINE...]: a mount of $URL over CONNECTIONS
# connections, no file prefetch; LINEs go to [cache] (default: off).
kconf() {
	local f=$1 n=$2
	shift 2
	{
		echo "[source]"
		echo "url = $URL?connections=$n"
		echo "manifest = $T/m.tsv"
		echo "connect_timeout_ms = 5000"
		echo "request_timeout_ms = 5000"
		echo "read_timeout_ms = 30000"
		echo "retries = 3"
		echo "[shard]"
		echo "world_size = 1"
		echo "[cache]"
		if [ $# -eq 0 ]; then echo "enabled = false"; else printf '%s\n' "$@"; fi
		echo "[prefetch]"
		echo "files = 0"
	} >"$f"
}
BIGK=/export/ds/big.bin

# A large file read sequentially through the cache, one connection: the
# first range opens it, the others reuse the handle.
TR=$T/kept.trace
: >"$TR"
kconf "$T/kept.conf" 1 "dir = $T/cache.kept" "chunk_size = 1M"
if SHARDFS_NFS_TRACE=$TR mount_shardfs "$T/kept.conf" "$M"; then
	check "kept: a 5 MiB file read in 1 MiB chunks, byte-identical" \
		cmp -s "$M/rank-0/big.bin" "$SRC/big.bin"
	n=$(grep -c "^GET $BIGK 200 " "$TR")
	check "kept: the file came in $n ranges (1 MiB chunks: 5 at least)" test "$n" -ge 5
	check "kept: one OPEN for all of them" test "$(grep -c "^OPEN $BIGK " "$TR")" -eq 1
	check "kept: no range but the first sent an OPEN" \
		test "$(grep "^GET $BIGK " "$TR" | grep -c ' open=0 ')" -eq $((n - 1))
	check "kept: every range one GETATTR (after its READs), no more" \
		test "$(grep "^GET $BIGK " "$TR" | grep -c ' getattr=1$')" -eq "$n"
	check "kept: no CLOSE while the file is in use" bash -c "! grep -q '^CLOSE $BIGK ' '$TR'"
	check "kept: clean unmount" umount_shardfs "$M"
	check "kept: the handle let go at unmount, none left" bash -c \
		"/usr/bin/python3 '$T/heldcheck.py' '$TR' 4 | grep -q 'held=\$'"
else
	fail "kept: mount"
fi

# Many files, 16 readers, 2 connections: never more than 4 files kept
# open per connection; then, after 6 s without a read, the next read
# closes what both connections kept (the idle timeout), and unmount
# lets go of the rest.
TR=$T/bound.trace
: >"$TR"
kconf "$T/bound.conf" 2 "dir = $T/cache.bound"
if SHARDFS_NFS_TRACE=$TR mount_shardfs "$T/bound.conf" "$M"; then
	check "bound: 150 files by 16 readers over 2 connections, byte-identical" bash -c \
		"cd '$M/rank-0' && find train -type f | sort | head -150 | xargs -P 16 -n 4 sh -c 'for f; do cmp -s \"\$f\" \"$SRC/\$f\" || exit 1; done' _"
	out=$(/usr/bin/python3 "$T/heldcheck.py" "$TR" 4 2>&1)
	check "bound: at most 4 files open per connection, each OPEN closed once ($out)" \
		bash -c "[[ '$out' == max=4\ * ]]"
	sleep 6
	echo SLEPT >>"$TR"
	last=$(cd "$SRC" && find train -type f -size +1k | sort | tail -1)
	check "bound: a read after 6 s idle" cmp -s "$M/rank-0/$last" "$SRC/$last"
	echo MARK >>"$TR"
	out=$(/usr/bin/python3 "$T/heldcheck.py" "$TR" 4 MARK 2>&1)
	check "idle: files unused for 6 s were closed, on both connections ($out)" \
		bash -c "[[ '$out' == *\ held=/export/ds/$last ]]"
	check "idle: each closed with a CLOSE the server answered, none dropped" bash -c \
		"sed -n '/^SLEPT/,/^MARK/p' '$TR' | grep -q '^CLOSE ' && ! sed -n '/^SLEPT/,/^MARK/p' '$TR' | grep -q '^DROP \\|^CLOSE [^ ]* [^2]'"
	check "idle: no connection failed" bash -c "! grep -q reconnecting '$LAST_LOG'"
	check "bound: clean unmount" umount_shardfs "$M"
	out=$(/usr/bin/python3 "$T/heldcheck.py" "$TR" 4 2>&1)
	check "bound: nothing left open after unmount ($out)" bash -c "[[ '$out' == *\ held= ]]"
else
	fail "bound: mount"
fi

# A server restart while a handle is kept: the next range reopens it on a
# new connection; no read fails.
# range.py MOUNTFILE OFFSET FILE...: reads 1 MiB at OFFSET; prints "ok" if
# it equals the first FILE's bytes there, "versionN" if the Nth other's,
# else "wrong", or "eio".
cat >"$T/range.py" <<'PY'
import errno, os, sys
path, off, versions = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
fd = os.open(path, os.O_RDONLY)
try:
    b = os.pread(fd, 1 << 20, off)
except OSError as e:
    print("eio" if e.errno == errno.EIO else "errno %d" % e.errno)
    sys.exit(0)
for i, v in enumerate(versions):
    with open(v, "rb") as f:
        f.seek(off)
        if f.read(1 << 20) == b:
            print("ok" if i == 0 else "version%d" % i)
            sys.exit(0)
print("wrong")
PY
TR=$T/restart.trace
: >"$TR"
kconf "$T/restart.conf" 1
if SHARDFS_NFS_TRACE=$TR mount_shardfs "$T/restart.conf" "$M"; then
	check "restart: a range read, its handle kept" test \
		"$(timeout 60 /usr/bin/python3 "$T/range.py" "$M/rank-0/kept.bin" 0 "$SRC/kept.bin")" = ok
	ganesha_stop
	if ganesha_start "$EXPORT" "$GANESHA_PORT"; then
		out=$(timeout 60 /usr/bin/python3 "$T/range.py" "$M/rank-0/kept.bin" $((4 << 20)) "$SRC/kept.bin")
		check "restart with a kept handle: the next range reads ($out)" test "$out" = ok
		check "restart with a kept handle: no failed read logged" bash -c "! grep -q 'read at' '$LAST_LOG'"
		check "restart: the old handle dropped, the file opened again" bash -c \
			"grep -q '^DROP /export/ds/kept.bin ' '$TR' && test \$(grep -c '^OPEN /export/ds/kept.bin 200 ' '$TR') -eq 2"
	else
		fail "ganesha restart (kept)"
	fi
	check "restart: clean unmount" umount_shardfs "$M"
else
	fail "restart: mount"
fi

# A file replaced (a new version renamed into place) while its handle is
# kept: a range read through the old handle is EIO (the unlink set the old
# file's ctime) or, from a server that reports it unchanged, the old
# version (the one the manifest names, whole), never the new one; after a
# reload (which lists the new version), the next range opens the path
# again and reads the new bytes.
head -c $((5 << 20)) /dev/urandom >"$SRC/swapme.bin"
cp "$SRC/swapme.bin" "$T/swapme.old"
TR=$T/replace.trace
: >"$TR"
kconf "$T/replace.conf" 1
sed -i '/^manifest = /d' "$T/replace.conf"
if SHARDFS_NFS_TRACE=$TR mount_shardfs "$T/replace.conf" "$M"; then
	check "replaced: a range read, its handle kept" test \
		"$(timeout 60 /usr/bin/python3 "$T/range.py" "$M/rank-0/swapme.bin" 0 "$SRC/swapme.bin")" = ok
	head -c $((5 << 20)) /dev/urandom >"$SRC/.swapme.tmp"
	mv "$SRC/.swapme.tmp" "$SRC/swapme.bin"
	out=$(timeout 60 /usr/bin/python3 "$T/range.py" "$M/rank-0/swapme.bin" $((4 << 20)) "$T/swapme.old" "$SRC/swapme.bin")
	check "replaced under a kept handle: the old version or EIO, never the new ($out)" \
		bash -c "[ '$out' = ok ] || [ '$out' = eio ]"
	kill -HUP "$LAST_PID"
	for _ in $(seq 300); do
		grep -q 'reloaded: generation 1' "$LAST_LOG" && break
		grep -q 'reload: ' "$LAST_LOG" && break
		sleep 0.1
	done
	check "replaced: reloaded" grep -q 'reloaded: generation 1' "$LAST_LOG"
	echo RELOADED >>"$TR"
	out=$(timeout 60 /usr/bin/python3 "$T/range.py" "$M/rank-0/swapme.bin" $((2 << 20)) "$SRC/swapme.bin")
	check "replaced, reloaded: the next range is the new version ($out)" test "$out" = ok
	check "replaced, reloaded: the kept handle failed its check, the path was opened again" bash -c \
		"sed '1,/^RELOADED/d' '$TR' | grep -m1 '^GET /export/ds/swapme.bin ' | grep -q ' 200 [0-9]* 0 open=1 '"
	check "replaced: clean unmount" umount_shardfs "$M"
else
	fail "replaced: mount"
fi
rm -f "$SRC/swapme.bin"

# --- a server that stalls, then one that dies, mid-read --------------------------
# midread.py MOUNTFILE SRCFILE PID SIGNAL: reads 1 MiB, signals the server
# and waits until every thread of it has stopped (or it is gone: a signal
# takes effect after kill() returns, and a READ and a GETATTR through a
# kept handle could still be answered meanwhile), reads 1 MiB at 4 MiB
# (not fetched yet: no cache, no prefetch), and prints "eio SECONDS" or
# "ok"/"wrong".
cat >"$T/midread.py" <<'PY'
import errno, os, signal, sys, time
path, src, pid, sig = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def halted():
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return True
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in "TtZX":
                    return False
        except OSError:
            pass
    return True
fd = os.open(path, os.O_RDONLY)
first = os.pread(fd, 1 << 20, 0)
want = open(src, "rb").read()
if first != want[: 1 << 20]:
    print("wrong first MiB"); sys.exit(0)
os.kill(pid, getattr(signal, sig))
end = time.monotonic() + 10
while not halted() and time.monotonic() < end:
    time.sleep(0.01)
t0 = time.monotonic()
try:
    b = os.pread(fd, 1 << 20, 4 << 20)
    print("ok" if b == want[4 << 20 : 5 << 20] else "wrong")
except OSError as e:
    print("eio %.1f" % (time.monotonic() - t0) if e.errno == errno.EIO else "errno %d" % e.errno)
PY
C=$T/fault.conf
{
	echo "[source]"
	echo "url = $URL"
	echo "manifest = $T/m.tsv"
	echo "connect_timeout_ms = 1000"
	echo "request_timeout_ms = 1000"
	echo "read_timeout_ms = 4000"
	echo "retries = 3"
	echo "[shard]"
	echo "world_size = 1"
	echo "[cache]"
	echo "enabled = false"
	echo "chunk_size = 1M"
	echo "[prefetch]"
	echo "files = 0"
} >"$C"
if mount_shardfs "$C" "$M"; then
	out=$(timeout 60 /usr/bin/python3 "$T/midread.py" "$M/rank-0/big.bin" "$SRC/big.bin" "$GANESHA_PID" SIGSTOP)
	secs=${out#eio }
	check "server stalled mid-read: EIO ($out), within the 4 s deadline + 6 s" bash -c \
		"[[ '$out' == eio* ]] && awk -v s='$secs' 'BEGIN {exit !(s < 10)}'"
	check "stall: the failure is logged with the key" grep -q "big.bin: read at" "$LAST_LOG"
	check "stall: the reconnect warning gives the reason, not the cancelled call's" bash -c \
		"grep -q 'reconnecting' '$LAST_LOG' && ! grep 'reconnecting' '$LAST_LOG' | grep -qi 'cancelled'"
	ganesha_resume
	# The range that just failed fails at once for FETCH_FAIL_WINDOW_MS
	# (2 s, cache/fetch_fail.h): a store that is back is asked again
	# after that.
	sleep 2.5
	check "server running again: the file reads byte-identical" bash -c \
		"timeout 60 cat '$M/rank-0/big.bin' | cmp -s - '$SRC/big.bin'"
	# Another file: big.bin is in the kernel's page cache now.
	out=$(timeout 60 /usr/bin/python3 "$T/midread.py" "$M/rank-0/big2.bin" "$SRC/big2.bin" "$GANESHA_PID" SIGKILL)
	secs=${out#eio }
	check "server killed mid-read: EIO ($out), within the deadline" bash -c \
		"[[ '$out' == eio* ]] && awk -v s='$secs' 'BEGIN {exit !(s < 10)}'"
	ganesha_wait_gone
	check "server down: .shardfs/stats still answers" bash -c "timeout 10 cat '$M/.shardfs/stats' >/dev/null"
	if ganesha_start "$EXPORT" "$GANESHA_PORT"; then
		sleep 2.5 # past the failure window, as above
		fails=$(grep -c 'read at' "$LAST_LOG")
		check "server restarted on its port: reads recover, byte-identical" bash -c \
			"timeout 60 cat '$M/rank-0/big2.bin' | cmp -s - '$SRC/big2.bin'"
		check "server restarted: no read failed once it was up (not even a retried readahead)" \
			test "$(grep -c 'read at' "$LAST_LOG")" -eq "$fails"
		check "recovery: reconnect logged" grep -q "connected again" "$LAST_LOG"
	else
		fail "ganesha restart"
	fi
	check "faults: clean unmount" umount_shardfs "$M"
else
	fail "faults: mount"
fi

# --- one read() against a stalled server ends within read_timeout_ms ------------
# After the failed read-ahead the kernel asks again for its first page,
# which fails at once (cache/fetch_fail.h) instead of waiting out a second
# deadline (before: 2 x read_timeout_ms every time). One 64 KiB read() of
# each of four files while the server is stopped (SIGSTOP), cache off and
# on, read_timeout_ms = 1500: each EIO within 1.6 x read_timeout_ms.
for cache in off on; do
	{
		echo "[source]"
		echo "url = $URL"
		echo "manifest = $T/m.tsv"
		echo "connect_timeout_ms = 1000"
		echo "request_timeout_ms = 1000"
		echo "read_timeout_ms = 1500"
		echo "[shard]"
		echo "world_size = 1"
		echo "[cache]"
		if [ $cache = on ]; then echo "dir = $T/cache-bound"; else echo "enabled = false"; fi
	} >"$T/bound.conf"
	if mount_shardfs "$T/bound.conf" "$M"; then
		if [ $cache = off ]; then set -- 1 2 3 4; else set -- 5 6 7 8; fi
		files=()
		for i in "$@"; do files+=("$M/rank-0/train/n0000000$((i % 7))/00000$i.JPEG"); done
		ganesha_pause
		out=$(timeout 120 /usr/bin/python3 "$HERE/timedread.py" "${files[@]}")
		ganesha_resume
		echo "# stalled server, cache $cache: one read() each: $(echo $out)"
		check "read bound (cache $cache): every read() fails with EIO" \
			test "$(echo "$out" | grep -c '^eio ')" -eq 4
		check "read bound (cache $cache): each within 1.6 x read_timeout_ms (2400 ms)" \
			test "$(echo "$out" | awk '$2 >= 2400' | wc -l)" -eq 0
		check "read bound (cache $cache): the reads that failed at once are logged" \
			grep -q "failed .* ms ago" "$LAST_LOG"
		check "read bound (cache $cache): clean unmount" umount_shardfs "$M"
	else
		fail "read bound (cache $cache): mount"
	fi
done

# --- an idle client whose NFSv4 lease expired ----------------------------------------
# With a 2 s lease, the daemon's client ids expire while it idles; the next
# read finds NFS4ERR_EXPIRED, reconnects and succeeds.
ganesha_stop
if GANESHA_LEASE=2 ganesha_start "$EXPORT" "$GANESHA_PORT"; then
	if mount_shardfs "$C" "$M"; then
		check "lease: a read before the idle time" cmp -s "$M/rank-0/$other" "$SRC/$other"
		sleep 8
		check "lease expired while idle: the next read reconnects and succeeds" \
			timeout 60 cmp -s "$M/rank-0/$victim" "$SRC/$victim"
		check "lease expired: no read failed" bash -c "! grep -q 'read at' '$LAST_LOG'"
		# A kept handle whose open state the server let go with the
		# lease (2 s, less than the handle's 5 s idle timeout): the
		# next range is read on a new connection, through a new handle.
		check "lease: a range of big.bin read, its handle kept" test \
			"$(timeout 60 /usr/bin/python3 "$T/range.py" "$M/rank-0/big.bin" 0 "$SRC/big.bin")" = ok
		sleep 3.5
		out=$(timeout 60 /usr/bin/python3 "$T/range.py" "$M/rank-0/big.bin" $((4 << 20)) "$SRC/big.bin")
		check "lease expired under a kept handle: the next range reads ($out)" test "$out" = ok
		check "lease expired under a kept handle: no read failed" bash -c "! grep -q 'read at' '$LAST_LOG'"
		check "lease: clean unmount" umount_shardfs "$M"
	else
		fail "lease: mount"
	fi
else
	fail "ganesha start with Lease_Lifetime = 2"
fi

# --- a server that answers less than each READ asks -------------------------------
ganesha_stop
if GANESHA_MAXREAD=65536 ganesha_start "$EXPORT" "$GANESHA_PORT"; then
	if mount_shardfs "$C" "$M"; then
		check "64 KiB READs from the server: a 5 MiB file reads byte-identical" bash -c \
			"timeout 60 cat '$M/rank-0/big.bin' | cmp -s - '$SRC/big.bin'"
		check "64 KiB READs: small files byte-identical" bash -c \
			"for f in '$SRC/日本語/データ.bin' '$SRC/$other'; do timeout 30 cmp -s \"\$f\" '$M/rank-0/'\"\${f#$SRC/}\" || exit 1; done"
		check "short READs: clean unmount" umount_shardfs "$M"
	else
		fail "short READs: mount"
	fi
	ganesha_stop
else
	fail "ganesha start with MaxRead = 65536"
fi

# --- a restart while every pooled connection is warm -----------------------------
# All 8 connections were up when the server went away: they share its fate,
# so one failure must not leave the others to use up the retries. One
# pread(2) of a file not read before, so no kernel readahead retry hides a
# failed first read; the log must show no failed read either.
cat >"$T/oneread.py" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
want = open(sys.argv[2], "rb").read()
try:
    b = os.pread(fd, len(want), 0)
    print("ok" if b == want else "wrong")
except OSError as e:
    print("errno %d" % e.errno)
PY
C=$T/pool.conf
{
	echo "[source]"
	echo "url = $URL?connections=8"
	echo "manifest = $T/m.tsv"
	echo "connect_timeout_ms = 1000"
	echo "request_timeout_ms = 1000"
	echo "read_timeout_ms = 8000"
	echo "retries = 1"
	echo "[shard]"
	echo "world_size = 1"
	echo "[cache]"
	echo "enabled = false"
	echo "[prefetch]"
	echo "files = 0"
} >"$C"
if ganesha_start "$EXPORT" "$GANESHA_PORT" && mount_shardfs "$C" "$M"; then
	(cd "$M/rank-0" && find train -type f | sort | head -96 |
		xargs -P 16 -n 2 sh -c 'for f; do cat "$f" >/dev/null; done' _)
	fresh=$(cd "$SRC" && find train -type f -size +1k | sort | tail -1)
	ganesha_stop
	if ganesha_start "$EXPORT" "$GANESHA_PORT"; then
		out=$(timeout 60 /usr/bin/python3 "$T/oneread.py" "$M/rank-0/$fresh" "$SRC/$fresh")
		check "restart with 8 warm connections, retries = 1: one read succeeds ($out)" \
			test "$out" = ok
		check "restart with 8 warm connections: no failed read logged" \
			bash -c "! grep -q 'read at' '$LAST_LOG'"
	else
		fail "ganesha restart (pool)"
	fi
	check "pool: clean unmount" umount_shardfs "$M"
else
	fail "pool: ganesha start or mount"
fi

# --- the source directory replaced under a mount, then a reload --------------------
# The backend's mount of /export/ds now names a directory that is gone
# (NFS4ERR_STALE): the reload must list the new one, and reads must go on.
NOCACHE=1 conf "$T/swap.conf" world_size=1
if mount_shardfs "$T/swap.conf" "$M"; then
	check "swap: a read before" cmp -s "$M/rank-0/$other" "$SRC/$other"
	cp -a "$SRC" "$SRC.new" && rm -rf "$SRC" && mv "$SRC.new" "$SRC"
	kill -HUP "$LAST_PID"
	for _ in $(seq 300); do
		grep -q 'reloaded: generation 1' "$LAST_LOG" && break
		grep -q 'reload: ' "$LAST_LOG" && break
		sleep 0.1
	done
	check "swap: the reload lists the new directory" grep -q 'reloaded: generation 1' "$LAST_LOG"
	check "swap: files read byte-identical after the reload" bash -c \
		"for f in '$victim' '$other' big.bin 'odd dir/with space.bin'; do timeout 30 cmp -s \"$SRC/\$f\" \"$M/rank-0/\$f\" || exit 1; done"
	check "swap: clean unmount" umount_shardfs "$M"
else
	fail "swap: mount"
fi
ganesha_stop
check "no sanitizer report in any daemon's log" bash -c \
	"! grep -lE 'ERROR: (Address|Thread|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error' '$T'/shardfs.*.log"
finish
