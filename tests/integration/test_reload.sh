#!/usr/bin/env bash
# Reload without unmount (SIGHUP), on a real mount of a local directory,
# under 8 busy readers that check every byte against the source:
#   (a) an unchanged config, (b) world_size 2 -> 4 and changed ranks (rank
#   directories appear and disappear; held descriptors of vanished files
#   keep reading), (c) a config with a syntax error (old tree kept, error
#   logged), (d) a changed cache dir (a warning names the key; the old
#   cache stays), (e) a new pinned manifest, (f) a digest that does not
#   match the pinned manifest (old tree kept); then over s3rver with no
#   pinned manifest: a reload lists the bucket again (new objects appear)
#   and takes a new world_size, under 8 readers again.
# After each reload .shardfs/plan must be `shardfs plan` of the config in
# force; the mount must never go away (same daemon, same mount), the
# readers must see 0 errors and 0 wrong bytes, and once they stop every
# old generation must be freed.
SUITE=reload
. "$(dirname "$0")/lib.sh"

SRC=$T/src
make_dataset "$SRC" 300
"$SHARDFS" manifest "$SRC" -o "$T/mA.tsv" >"$T/mA.out" 2>&1 ||
	{ fail "manifest A" "$(cat "$T/mA.out")"; finish; }
DIGEST_A=$(awk '$1 == "sha256" {print $2}' "$T/mA.out")

C=$T/c.conf
M=$T/mnt
# conf WORLD_SIZE RANKS MANIFEST DIGEST [CACHE_DIR]
conf() {
	cat >"$C.tmp" <<EOF
[source]
url = $SRC
manifest = $3
manifest_sha256 = $4
[shard]
world_size = $1
ranks = $2
seed = 7
[cache]
dir = ${5:-$T/cache}
EOF
	mv "$C.tmp" "$C"
}
conf 2 "" "$T/mA.tsv" "$DIGEST_A"

# -v: the log says when a generation is freed.
if ! mount_shardfs "$C" "$M" -v; then
	fail "mount"
	finish
fi
PID=$LAST_PID
LOG=$LAST_LOG
MOUNTLINE=$(grep " $(realpath "$M") fuse" /proc/mounts)

/usr/bin/python3 "$HERE/reload_readers.py" "$M" "$SRC" 8 "$T/stop" \
	"$T/readers.json" >"$T/readers.out" 2>&1 &
READERS=$!
PIDS+=("$READERS")
for _ in $(seq 600); do
	grep -q ready "$T/readers.out" && break
	kill -0 "$READERS" 2>/dev/null || break
	sleep 0.1
done
check "8 readers started" grep -q ready "$T/readers.out"

GEN=0
# reload NAME: SIGHUP, then waits (up to 60 s) for the daemon to log the
# outcome; sets OUTCOME to "reloaded" or "failed".
reload() {
	local before
	before=$(grep -c -E 'reloaded: generation|reload failed' "$LOG")
	sleep 0.5 # let the readers get going on the current tree
	kill -HUP "$PID"
	OUTCOME=timeout
	for _ in $(seq 600); do
		if [ "$(grep -c -E 'reloaded: generation|reload failed' "$LOG")" -gt "$before" ]; then
			if grep -E 'reloaded: generation|reload failed' "$LOG" | tail -1 | grep -q 'reloaded'; then
				OUTCOME=reloaded
			else
				OUTCOME=failed
			fi
			break
		fi
		sleep 0.1
	done
	sleep 0.5 # readers on the new tree
}

# plan_matches NAME: .shardfs/plan is `shardfs plan` of the config now.
plan_matches() {
	"$SHARDFS" plan "$C" >"$T/plan.want" 2>/dev/null
	if cmp -s "$T/plan.want" "$M/.shardfs/plan"; then
		ok "$1: .shardfs/plan is the new plan"
	else
		fail "$1: .shardfs/plan" "$(diff "$T/plan.want" "$M/.shardfs/plan" | head -5)"
	fi
}

ranks_are() { # ranks_are NAME "rank-0 rank-1"
	local got
	got=$(cd "$M" && ls -d rank-* | tr '\n' ' ')
	if [ "$got" = "$2 " ]; then ok "$1: rank directories $2"; else fail "$1: rank directories" "got '$got', want '$2'"; fi
}

# (a) unchanged
reload
GEN=$((GEN + 1))
check "(a) unchanged config reloads" test "$OUTCOME" = reloaded
check "(a) log names generation $GEN, objects, digest, ranks" \
	grep -qE "reloaded: generation $GEN, 300 objects, manifest sha256 $DIGEST_A, plan digest [0-9a-f]{64}, ranks 0-1 of 2" "$LOG"
plan_matches "(a)"
ranks_are "(a)" "rank-0 rank-1"
check "(a) stats count the generation" grep -qx "shardfs_generation $GEN" "$M/.shardfs/stats"

# (b) world_size 2 -> 4, rank 0 goes away
conf 4 "1-3" "$T/mA.tsv" "$DIGEST_A"
reload
GEN=$((GEN + 1))
check "(b) world_size 4, ranks 1-3 reloads" test "$OUTCOME" = reloaded
check "(b) log names the ranks" grep -q "reloaded: generation $GEN, .*ranks 1-3 of 4" "$LOG"
plan_matches "(b)"
ranks_are "(b)" "rank-1 rank-2 rank-3"
conf 4 "0,2" "$T/mA.tsv" "$DIGEST_A"
reload
GEN=$((GEN + 1))
check "(b) ranks 0,2 reloads" test "$OUTCOME" = reloaded
plan_matches "(b2)"
ranks_are "(b2)" "rank-0 rank-2"
# The files of rank 0 are rank 0's of the new plan, read through the mount.
if /usr/bin/python3 - "$M" "$SRC" <<'PY'
import os, sys
mnt, src = sys.argv[1:3]
order = [l.rstrip("\n") for l in open(os.path.join(mnt, ".shardfs/rank-0.order"))]
files = sorted(os.path.relpath(os.path.join(d, n), os.path.join(mnt, "rank-0"))
               for d, _, ns in os.walk(os.path.join(mnt, "rank-0")) for n in ns)
assert sorted(order) == files, (len(order), len(files))
for rel in files:
    assert open(os.path.join(mnt, "rank-0", rel), "rb").read() == \
        open(os.path.join(src, rel), "rb").read(), rel
PY
then ok "(b2) rank-0/ holds the new plan's rank 0, byte-identical"; else fail "(b2) rank-0 content"; fi

# (c) a syntax error: the old tree stays
cp "$M/.shardfs/plan" "$T/plan.before"
conf 4 "0,2" "$T/mA.tsv" "$DIGEST_A"
echo "this line is not ini" >>"$C"
reload
check "(c) broken config: reload fails" test "$OUTCOME" = failed
check "(c) the error names the file and line" grep -q "reload: $C:11: syntax error" "$LOG"
check "(c) the log says the old tree stays" grep -q "still serving the previous tree" "$LOG"
check "(c) .shardfs/plan unchanged" cmp -s "$T/plan.before" "$M/.shardfs/plan"
ranks_are "(c)" "rank-0 rank-2"

# (d) a changed cache dir: warned about, not used; the rest reloads
conf 4 "0-3" "$T/mA.tsv" "$DIGEST_A" "$T/cache2"
printf '[prefetch]\nfiles = 3\n' >>"$C"
reload
GEN=$((GEN + 1))
check "(d) changed cache dir: reload goes on" test "$OUTCOME" = reloaded
check "(d) the warning names the key and the kept value" \
	grep -q "reload: cache.dir changed: needs a restart; keeping \"$T/cache\"" "$LOG"
check "(d) every changed restart key is named" \
	grep -q "reload: prefetch.files changed: needs a restart; keeping 256" "$LOG"
check "(d) the new cache dir is not used" test ! -e "$T/cache2"
plan_matches "(d)"
ranks_are "(d)" "rank-0 rank-1 rank-2 rank-3"

# (e) a new pinned manifest (40 more files)
mkdir -p "$SRC/extra"
for i in $(seq 40); do head -c $((i * 997)) /dev/urandom >"$SRC/extra/e$i.bin"; done
"$SHARDFS" manifest "$SRC" -o "$T/mB.tsv" >"$T/mB.out" 2>&1
DIGEST_B=$(awk '$1 == "sha256" {print $2}' "$T/mB.out")
conf 4 "0-3" "$T/mB.tsv" "$DIGEST_B" "$T/cache2"
reload
GEN=$((GEN + 1))
check "(e) new pinned manifest reloads" test "$OUTCOME" = reloaded
check "(e) log names 340 objects and the new digest" \
	grep -q "reloaded: generation $GEN, 340 objects, manifest sha256 $DIGEST_B" "$LOG"
plan_matches "(e)"
n=$(find "$M"/rank-* -type f | wc -l)
check "(e) 340 files in the tree" test "$n" -eq 340

# (f) a pin that does not match: the old tree stays
conf 4 "0-3" "$T/mA.tsv" "$DIGEST_B" "$T/cache2"
cp "$M/.shardfs/plan" "$T/plan.before"
reload
check "(f) digest mismatch: reload fails" test "$OUTCOME" = failed
check "(f) the log names the mismatch" grep -q "manifest digest mismatch" "$LOG"
check "(f) .shardfs/plan unchanged" cmp -s "$T/plan.before" "$M/.shardfs/plan"

# --- the readers ----------------------------------------------------------
sleep 1
touch "$T/stop"
for _ in $(seq 600); do kill -0 "$READERS" 2>/dev/null || break; sleep 0.1; done
wait "$READERS" 2>/dev/null
if [ -s "$T/readers.json" ]; then
	read -r errs wrong files held passes vanished bytes < <(/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(len(r["errors"]), len(r["wrong"]), r["files"], r["held"], r["held_passes"], r["vanished"], r["reads_bytes"])
for e in r["errors"][:10] + r["wrong"][:10]: print(e, file=sys.stderr)
' "$T/readers.json")
	echo "# readers: $files files verified, $bytes bytes, $held held descriptors x $passes passes, $vanished listed-then-reloaded opens"
	check "readers: 0 errors" test "$errs" -eq 0
	check "readers: 0 wrong bytes" test "$wrong" -eq 0
	check "readers read files across the reloads" test "$files" -gt 100
	check "held descriptors (incl. vanished files) read on" test "$held" -gt 0 -a "$passes" -gt 10
else
	fail "readers" "no result: $(tail -5 "$T/readers.out")"
fi

# --- the mount never went away --------------------------------------------
check "daemon still running (same pid)" kill -0 "$PID"
check "same mount in /proc/mounts" test "$(grep " $(realpath "$M") fuse" /proc/mounts)" = "$MOUNTLINE"
check "one mount at the mountpoint" test "$(grep -c " $(realpath "$M") fuse" /proc/mounts)" -eq 1
check "generation counter in the log" test "$(grep -c 'reloaded: generation' "$LOG")" -eq "$GEN"

# Readers gone, descriptors closed, root entries invalidated: the kernel
# forgets the old inodes and every old generation is freed.
freed_all() {
	local g
	for ((g = 0; g < GEN; g++)); do
		grep -q "generation $g freed" "$LOG" || return 1
	done
}
for _ in $(seq 100); do freed_all && break; sleep 0.1; done
if ! freed_all; then
	# Unused dentries may linger until memory pressure; ask for it.
	echo 2 >/proc/sys/vm/drop_caches 2>/dev/null
	for _ in $(seq 100); do freed_all && break; sleep 0.1; done
fi
check "old generations 0..$((GEN - 1)) freed" freed_all
check "current generation $GEN not freed" bash -c "! grep -q 'generation $GEN freed' '$LOG'"

if umount_shardfs "$M" "$PID"; then
	ok "unmount"
else
	fail "unmount" "daemon alive: $(kill -0 "$PID" 2>/dev/null && echo yes || echo no); $(grep -v debug "$LOG" | tail -5; grep " $(realpath "$M") " /proc/mounts)"
fi
check "no error or sanitizer report in the log" bash -c \
	"! grep -E 'ERROR: (Address|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error' '$LOG'"

# --- S3 (s3rver), no pinned manifest: a reload lists the bucket again ------
. "$HERE/s3/s3rver.sh"
for v in $(env | sed -n 's/^\(AWS_[A-Z_0-9]*\)=.*/\1/p'); do unset "$v"; done
export AWS_EC2_METADATA_DISABLED=true
export AWS_SHARED_CREDENTIALS_FILE=$T/no-credentials-file
export AWS_CONFIG_FILE=$T/no-aws-config
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export AWS_DEFAULT_REGION=us-east-1
if ! command -v node >/dev/null || ! s3rver_install || ! s3rver_start "$T/s3data" bkt; then
	fail "s3rver"
	finish
fi
aws_s3() { /usr/bin/aws --endpoint-url "$S3_EP" s3 "$@" --only-show-errors; }
S3SRC=$T/s3src
make_dataset "$S3SRC" 120
check "s3: upload" aws_s3 cp --recursive "$S3SRC" "s3://bkt/ds/"
s3conf() { # s3conf WORLD_SIZE
	cat >"$C.tmp" <<EOF
[source]
url = s3://bkt/ds/
endpoint = $S3_EP
[shard]
world_size = $1
[cache]
dir = $T/s3cache
EOF
	mv "$C.tmp" "$C"
}
s3conf 2
M=$T/s3mnt
if ! mount_shardfs "$C" "$M" -v; then
	fail "s3 mount"
	finish
fi
PID=$LAST_PID
LOG=$LAST_LOG
MOUNTLINE=$(grep " $(realpath "$M") fuse" /proc/mounts)
rm -f "$T/stop"
/usr/bin/python3 "$HERE/reload_readers.py" "$M" "$S3SRC" 8 "$T/stop" \
	"$T/s3readers.json" >"$T/s3readers.out" 2>&1 &
READERS=$!
PIDS+=("$READERS")
for _ in $(seq 600); do
	grep -q ready "$T/s3readers.out" && break
	kill -0 "$READERS" 2>/dev/null || break
	sleep 0.1
done
check "s3: 8 readers started" grep -q ready "$T/s3readers.out"

# New objects in the bucket: the reload's listing finds them.
mkdir -p "$S3SRC/more"
for i in $(seq 30); do head -c $((i * 1499)) /dev/urandom >"$S3SRC/more/m$i.bin"; done
aws_s3 cp --recursive "$S3SRC/more" "s3://bkt/ds/more/"
reload
check "s3: reload after an upload" test "$OUTCOME" = reloaded
check "s3: the new listing has 150 objects" grep -q "reloaded: generation 1, 150 objects" "$LOG"
plan_matches "s3"
n=$(find "$M"/rank-* -type f | wc -l)
check "s3: 150 files in the tree" test "$n" -eq 150
s3conf 3
reload
check "s3: world_size 2 -> 3 reloads" test "$OUTCOME" = reloaded
plan_matches "s3 world_size 3"
ranks_are "s3 world_size 3" "rank-0 rank-1 rank-2"
sleep 1
touch "$T/stop"
for _ in $(seq 600); do kill -0 "$READERS" 2>/dev/null || break; sleep 0.1; done
wait "$READERS" 2>/dev/null
if [ -s "$T/s3readers.json" ]; then
	read -r errs wrong files < <(/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(len(r["errors"]), len(r["wrong"]), r["files"])
for e in r["errors"][:10] + r["wrong"][:10]: print(e, file=sys.stderr)
' "$T/s3readers.json")
	echo "# s3 readers: $files files verified"
	check "s3 readers: 0 errors" test "$errs" -eq 0
	check "s3 readers: 0 wrong bytes" test "$wrong" -eq 0
	check "s3 readers read files across the reloads" test "$files" -gt 50
else
	fail "s3 readers" "no result: $(tail -5 "$T/s3readers.out")"
fi
check "s3: same daemon, same mount" test "$(grep " $(realpath "$M") fuse" /proc/mounts)" = "$MOUNTLINE"
check "s3: unmount" umount_shardfs "$M" "$PID"
check "s3: no sanitizer report in the log" bash -c \
	"! grep -E 'ERROR: (Address|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error' '$LOG'"
finish
