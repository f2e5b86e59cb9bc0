#!/usr/bin/env bash
# Operating transforms (issue 27 items 5 and 7) through the real binary:
# `shardfs warm --transform NAME` stores every output of the selected
# ranks, so that a second warm (and a mount reading transform-NAME/, where
# the views exist) runs the transform 0 times; an unknown NAME is a usage
# error; the mount's .shardfs/stats has the shardfs_transform_* families
# labelled transform="NAME", and `shardfs status` shows them (text, JSON).
# Needs root (the transform runs as nobody) and bubblewrap.
SUITE=transform_ops
. "$(dirname "$0")/lib.sh"

SRC=$T/src
M=$T/mnt
mkdir -p "$SRC/d" "$M"
for i in $(seq 0 11); do
	printf 'object %d: the quick brown fox %0*d\n' "$i" $((i * 37 + 1)) 0 >"$SRC/d/$i.txt"
done
printf '[source]\nurl = %s\n[cache]\ndir = %s\n[shard]\nworld_size = 2\n[transform upper]\ncommand = /usr/bin/tr a-z A-Z\nversion = 1\nsuffix = .up\nverify = 100\n' \
	"$SRC" "$T/cache" >"$T/x.conf"

# --- warm --transform --------------------------------------------------------
"$SHARDFS" warm "$T/x.conf" --transform upper >"$T/w1.out" 2>"$T/w1.err"
rc=$?
check "warm --transform: exit 0 (rc $rc)" test "$rc" = 0
check "warm --transform: 12 runs, none failed" \
	grep -q 'warm: transform upper: 12 runs, 0 failed' "$T/w1.err"
"$SHARDFS" warm "$T/x.conf" --transform upper --rank 1 >"$T/w2.out" 2>"$T/w2.err"
rc=$?
check "warm again: exit 0 (rc $rc)" test "$rc" = 0
check "warm again: the outputs are stored, 0 runs" \
	grep -q 'warm: transform upper: 0 runs, 0 failed' "$T/w2.err"
"$SHARDFS" warm "$T/x.conf" --transform nosuch >/dev/null 2>"$T/w3.err"
rc=$?
check "warm --transform nosuch: usage error (rc $rc)" test "$rc" = 2
check "warm --transform nosuch: names the transform and the config" \
	grep -q "warm: --transform nosuch: $T/x.conf has no \[transform nosuch\]" "$T/w3.err"

# --- digests -----------------------------------------------------------------
# The list of the warmed cache is the transform's output of every object.
"$SHARDFS" digests "$T/x.conf" --transform upper >"$T/d1" 2>"$T/d1.err"
rc=$?
check "digests: exit 0 (rc $rc)" test "$rc" = 0
check "digests: KEY, SHA-256 and size of each output, in the manifest's order" /usr/bin/python3 -c '
import hashlib, os, sys
src, got = sys.argv[1], open(sys.argv[2]).read().splitlines()
keys = sorted("d/%s" % n for n in os.listdir(os.path.join(src, "d")))
want = []
for k in keys:
    out = open(os.path.join(src, k), "rb").read().upper()
    want.append("%s\t%s\t%d" % (k, hashlib.sha256(out).hexdigest(), len(out)))
sys.exit(0 if got == want else 1)
' "$SRC" "$T/d1"
# A second node (another cache) with --run gives the same list.
sed "s|^dir = .*|dir = $T/cache2|" "$T/x.conf" >"$T/x2.conf"
"$SHARDFS" digests "$T/x2.conf" --transform upper --rank 0 >"$T/d2a" 2>/dev/null
check "digests of a cache without outputs: '-' for each, nothing run" bash -c \
	"[ -s '$T/d2a' ] && ! grep -qv \$'\t-\t-\$' '$T/d2a'"
"$SHARDFS" digests "$T/x2.conf" --transform upper --run >"$T/d2" 2>"$T/d2.err"
rc=$?
check "digests --run on another cache: exit 0 (rc $rc)" test "$rc" = 0
check "two caches of a deterministic transform: identical lists" cmp -s "$T/d1" "$T/d2"
"$SHARDFS" digests "$T/x2.conf" --transform upper --check "$T/d1" >/dev/null 2>"$T/c.err"
rc=$?
check "digests --check against the other node's list: exit 0 (rc $rc)" test "$rc" = 0
# A transform that is not deterministic: two caches differ, --check names keys.
for n in 3 4; do
	printf '[source]\nurl = %s\n[cache]\ndir = %s\n[transform clock]\ncommand = /bin/sh -c "cat >/dev/null; date +%%s%%N"\n' \
		"$SRC" "$T/cache$n" >"$T/x$n.conf"
	"$SHARDFS" digests "$T/x$n.conf" --transform clock --run >"$T/d$n" 2>/dev/null
done
check "two caches of a transform that is not deterministic: the lists differ" \
	bash -c "! cmp -s '$T/d3' '$T/d4'"
"$SHARDFS" digests "$T/x4.conf" --transform clock --check "$T/d3" >/dev/null 2>"$T/c4.err"
rc=$?
check "digests --check with another node's list: exit 1 (rc $rc)" test "$rc" = 1
check "digests --check names a differing key" grep -q '^shardfs: digests: d/0.txt: differs' "$T/c4.err"
"$SHARDFS" digests "$T/x.conf" >/dev/null 2>"$T/u.err"
rc=$?
check "digests without --transform: usage error (rc $rc)" test "$rc" = 2

# --- stats and status --------------------------------------------------------
if mount_shardfs "$T/x.conf" "$M"; then
	if [ -d "$M/transform-upper" ]; then
		# The views (another branch of issue 27): reading the whole
		# tree after warm runs the transform 0 times.
		ok=1
		for f in "$SRC"/d/*.txt; do
			for r in 0 1; do
				g="$M/transform-upper/rank-$r/d/$(basename "$f").up"
				[ -e "$g" ] || continue
				cmp -s "$g" <(tr a-z A-Z <"$f") || ok=0
			done
		done
		check "after warm, the tree reads the transform's outputs" test "$ok" = 1
		check "after warm, reading the tree ran the transform 0 times" \
			grep -qx 'shardfs_transform_runs_total{transform="upper"} 0' "$M/.shardfs/stats"
	else
		echo "# no transform-upper/ view in this build: the read-after-warm check is skipped"
	fi
	cp "$M/.shardfs/stats" "$T/stats"
	for m in runs_total failures_total timeouts_total refused_total cpu_us_total \
		bytes_in_total bytes_out_total verify_runs_total verify_mismatches_total queued ahead_runs_total; do
		check "stats: shardfs_transform_$m{transform=\"upper\"} with # TYPE" bash -c \
			"grep -q '^# TYPE shardfs_transform_$m ' '$T/stats' && grep -Eq '^shardfs_transform_$m\{transform=\"upper\"\} [0-9]+$' '$T/stats'"
	done
	"$SHARDFS" status "$M" --interval 0 >"$T/s.txt" 2>&1
	check "status: a transform line" \
		grep -Eq '^transform +upper: [0-9]+ runs, 0 failed \(0 timeouts\), 0 refused, [0-9.]+ s CPU, .* in, .* out, [0-9]+ queued, [0-9]+ run ahead; verify [0-9]+ runs, 0 mismatches$' "$T/s.txt"
	"$SHARDFS" status "$M" --json --interval 0 >"$T/s.json" 2>&1
	check "status --json: transforms.upper has every counter" /usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["transforms"]["upper"]
keys = ["runs", "failures", "timeouts", "refused", "cpu_us", "bytes_in",
        "bytes_out", "verify_runs", "verify_mismatches", "queued", "ahead_runs"]
sys.exit(0 if all(isinstance(t[k], int) for k in keys) and t["failures"] == 0 else 1)
' "$T/s.json"
	check "unmount" umount_shardfs "$M"
else
	fail "mount with a transform"
fi

finish
