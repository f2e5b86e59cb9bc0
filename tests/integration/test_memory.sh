#!/usr/bin/env bash
# Memory-pressure suite (issue 9, finding 4; docs/RELIABILITY.md, "The fetch
# engine's memory budget"): prefetch.memory budgets × concurrent readers ×
# chunk sizes, each cell a fresh mount reading 24 MiB files with O_DIRECT
# (memreaders.py: reader r reads file r % F whole, starting at a different
# chunk, so readers want different chunks at once; every byte compared).
#
# Per cell: every reader finishes (a hang is a failure: memreaders.py exits
# at its timeout whatever its threads do), no byte differs, no read fails,
# the engine's accounted high water stays within the budget plus one reply
# buffer per reader (and a push buffer per file pushed, up to 2), the
# daemon's peak RSS (VmHWM) within that plus its RSS before the reads plus
# 8 MiB (not under AddressSanitizer, whose quarantine keeps freed memory
# resident), and after `fusermount3 -u` the daemon exits by itself within
# 30 s.
#
# make check runs four representative cells (posix, and one on s3rver);
# STRESS=1 in the environment runs the whole matrix: 32M/64M/128M × 16/32/64
# readers × 8M/32M chunks on posix, and three cells on s3rver. Timings are
# printed as figures, never asserted.
#
# exclusive: the peak RSS bound is the daemon's own, but another suite's
# load on the same cores changes how many buffers are in flight at once.
SUITE=memory
. "$(dirname "$0")/lib.sh"

MIB=$((1 << 20))
RSS_SLACK=$((8 * MIB))
FILE_MB=${FILE_MB:-24}
NFILES=16
SRC=$T/src
mkdir -p "$SRC/d"
/usr/bin/python3 - "$SRC/d" "$NFILES" "$FILE_MB" <<'PY'
import os, random, sys
d, n, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    rnd = random.Random(i)
    with open(os.path.join(d, "%02d.bin" % i), "wb") as f:
        # A few bytes past whole MiBs: the last chunk is short.
        f.write(rnd.randbytes(mb * (1 << 20) + 4096 * i + 17))
PY
check "dataset: $NFILES files of $FILE_MB MiB" test -s "$SRC/d/$(printf %02d $((NFILES - 1))).bin"
FILES=()
for i in $(seq 0 $((NFILES - 1))); do FILES+=("d/$(printf %02d "$i").bin"); done

ASAN=0
# ThreadSanitizer's shadow memory inflates RSS the same way.
ldd "$SHARDFS" 2>/dev/null | grep -Eq 'lib(asan|tsan)' && ASAN=1

# conf FILE URL CACHEDIR MEMORY CHUNK [EXTRA source lines...]
conf() {
	local f=$1 url=$2 dir=$3 mem=$4 chunk=$5; shift 5
	{
		echo "[source]"
		echo "url = $url"
		local l
		for l in "$@"; do echo "$l"; done
		echo "[cache]"
		echo "dir = $dir"
		echo "size = 4G"
		echo "chunk_size = $chunk"
		echo "[prefetch]"
		echo "memory = $mem"
	} >"$f"
}
# stat_of FILE NAME: a value from a copy of .shardfs/stats ("?" if none).
stat_of() { awk -v n="shardfs_$2" '$1 == n {v = $2} END {print v == "" ? "?" : v}' "$1"; }

# wait_exit PID SECONDS: true once PID has exited (reaped), false if it is
# still running after SECONDS.
wait_exit() {
	local pid=$1 n=$(($2 * 10))
	while [ $n -gt 0 ]; do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

CELL=0
# cell SOURCE MEMORY READERS CHUNK: one mount, READERS readers, checks.
cell() {
	local src=$1 mem=$2 readers=$3 chunk=$4
	local name="$src memory=$mem readers=$readers chunk=$chunk"
	local c=$T/cell$CELL.conf m=$T/mnt$CELL out=$T/cell$CELL.out
	local budget=$(($(numfmt --from=iec "$mem")))
	CELL=$((CELL + 1))
	if [ "$src" = s3 ]; then
		conf "$c" "s3://$BUCKET/ds/" "$T/cache$CELL" "$mem" "$chunk" \
			"endpoint = $S3_EP" "manifest = $T/s3.tsv"
	else
		conf "$c" "$SRC" "$T/cache$CELL" "$mem" "$chunk"
	fi
	if ! mount_shardfs "$c" "$m"; then
		fail "$name: mount"
		return
	fi
	local pid=$LAST_PID log=$LAST_LOG
	# The daemon's own part of RSS, before any read: binary, libraries,
	# the index's mapped pages, the threads started so far.
	local base
	base=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$pid/status" 2>/dev/null)
	base=${base:-0}
	local t0=$SECONDS
	if /usr/bin/python3 "$HERE/memreaders.py" --mount "$m" --src "$SRC" \
		--readers "$readers" --chunk "$(numfmt --from=iec "$chunk")" \
		--timeout "${READ_TIMEOUT:-300}" "${FILES[@]}" >"$out" 2>&1; then
		ok "$name: every reader finished, every byte right"
	else
		fail "$name: readers" "$(tr '\n' ' ' <"$out")"
	fi
	local hwm st=$T/cell$CELL.stats
	hwm=$(awk '/^VmHWM:/ {print $2 * 1024}' "/proc/$pid/status" 2>/dev/null)
	hwm=${hwm:-0}
	# Bounded: a daemon whose threads all hang would not answer.
	timeout 10 cat "$m/.shardfs/stats" >"$st" 2>/dev/null
	echo "# $name: $(tail -1 "$out"); fuse reads $(stat_of "$st" reads_total)," \
		"backend requests $(stat_of "$st" backend_requests_total)," \
		"direct reads $(stat_of "$st" direct_reads_total)," \
		"engine high water $(stat_of "$st" memory_high_water_bytes) B," \
		"VmHWM $((hwm / MIB)) MiB, baseline RSS $((base / MIB)) MiB," \
		"kernel pushes $(stat_of "$st" kernel_pushes_total), $((SECONDS - t0)) s"
	# The bound docs/RELIABILITY.md states ("The fetch engine's memory
	# budget"): the budget, plus one reply buffer per read being answered
	# (each reader here has one read at a time, of at most max_read =
	# 1 MiB; never more than the 64 FUSE threads), plus a push buffer (a
	# whole file of at most a chunk) per pusher thread (2) that pushed.
	# RSS adds the daemon's own part, measured before the reads, and
	# RSS_SLACK for what the reads grow outside buffers (thread stacks,
	# allocator arenas: 1-2 MiB measured).
	local replies=$((readers < 64 ? readers : 64)) pushes
	pushes=$(stat_of "$st" kernel_pushes_total)
	case $pushes in '' | *[!0-9]*) pushes=2 ;; esac
	[ "$pushes" -gt 2 ] && pushes=2
	local bound=$((budget + replies * MIB + pushes * $(numfmt --from=iec "$chunk")))
	local ehw
	ehw=$(stat_of "$st" memory_high_water_bytes)
	check "$name: engine high water $((${ehw/\?/0} / MIB)) MiB <= budget + $replies replies + $pushes pushes ($((bound / MIB)) MiB)" \
		test "$ehw" != "?" -a "${ehw/\?/0}" -le "$bound"
	if [ "$ASAN" = 1 ]; then
		ok "$name: VmHWM not compared under a sanitizer"
	else
		check "$name: VmHWM $((hwm / MIB)) MiB <= baseline $((base / MIB)) MiB + $((bound / MIB)) MiB + $((RSS_SLACK / MIB)) MiB" \
			test "$hwm" -gt 0 -a "$base" -gt 0 -a "$hwm" -le $((base + bound + RSS_SLACK))
	fi
	fusermount3 -u "$m" 2>/dev/null || fail "$name: fusermount3 -u"
	if wait_exit "$pid" 30; then
		ok "$name: the daemon exits by itself after fusermount3 -u"
	else
		fail "$name: daemon still running 30 s after fusermount3 -u" \
			"$(tail -5 "$log" | tr '\n' ' ')"
	fi
	rm -rf "$T/cache$CELL"
}

# --- posix ---------------------------------------------------------------------
if [ "${STRESS:-0}" = 1 ]; then
	for mem in 32M 64M 128M; do
		for readers in 16 32 64; do
			for chunk in 8M 32M; do cell posix "$mem" "$readers" "$chunk"; done
		done
	done
else
	cell posix 32M 64 8M
	cell posix 64M 32 32M
	cell posix 128M 16 8M
fi

# --- s3rver ----------------------------------------------------------------------
. "$HERE/s3/s3rver.sh"
s3_suite_start bkt
check "upload the dataset" aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/"
"$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$S3_EP" -o "$T/s3.tsv" \
	>/dev/null 2>"$T/manifest.err"
check "manifest of the s3 dataset" test -s "$T/s3.tsv"
if [ "${STRESS:-0}" = 1 ]; then
	cell s3 32M 64 8M
	cell s3 64M 32 32M
	cell s3 128M 16 8M
else
	cell s3 64M 32 8M
fi

finish
