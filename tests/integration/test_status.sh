#!/usr/bin/env bash
# `shardfs status` and the Prometheus endpoint on real FUSE mounts of a local
# directory: status text and --json against `shardfs plan` and the tree
# (objects, bytes, ranks, plan digest), the cache hit rate after files are
# read twice, rates while a reader runs, the endpoint's text checked by
# Debian's prometheus_client parser (and equal in metric set to
# .shardfs/stats), shardfs_build_info, a last error with quotes and a
# backslash, a port in use (error logged, files served), a stalled client
# (others still served), and status on a non-mount, a dead mount (daemon
# killed) and a hung one (daemon stopped). Nothing here depends on timing:
# waits are bounded, and only outcomes count.
SUITE=status
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

SRC=$T/src
make_dataset "$SRC" 120
# An object whose error message needs escaping in a label.
printf 'quoted' >"$SRC/q\"uo\\te.bin"

# wait_log PATTERN FILE: the ready hook (which starts the endpoint) runs
# once the mount answers, a moment after it shows in /proc/mounts.
wait_log() {
	for _ in $(seq 200); do
		grep -q "$1" "$2" && return 0
		sleep 0.1
	done
	return 1
}

free_port() { $PY "$HERE/free_port.py"; }
PORT=$(free_port)

C=$T/c.conf
cat >"$C" <<EOF
[source]
url = $SRC
[shard]
world_size = 4
[cache]
dir = $T/cache
[metrics]
listen = 127.0.0.1:$PORT
EOF
# Serve two adjacent ranks, one holding the quoted object (so its read
# error is this mount's last error).
QR=""
for r in 0 1 2 3; do
	"$SHARDFS" plan "$C" --rank $r | grep -q '^q"uo\\te.bin$' && QR=$r
done
[ -n "$QR" ] || { fail "find the quoted object's rank"; finish; }
R1=$((QR == 3 ? 2 : QR))
R2=$((R1 + 1))
# The rank read for the hit rate and the rates: not the quoted object's,
# which must stay out of the disk cache.
OTHER=$((QR == R1 ? R2 : R1))
sed -i "/^world_size = 4\$/a ranks = $R1-$R2" "$C"
M=$T/mnt
mount_shardfs "$C" "$M" || { fail "mount"; finish; }
PID_A=$LAST_PID
LOG_A=$LAST_LOG
check "log says where the metrics are" \
	wait_log "metrics: serving http://127.0.0.1:$PORT/metrics" "$LOG_A"

# --- status --json against the plan and the tree -----------------------------
"$SHARDFS" plan "$C" >"$T/plan.txt"
if "$SHARDFS" status "$M" --json --interval 0 >"$T/s.json"; then
	ok "status --json exits 0"
else
	fail "status --json exits 0"
fi
"$SHARDFS" --version >"$T/version.txt"
if $PY - "$T/s.json" "$T/plan.txt" "$M" "$T/version.txt" "$R1" "$R2" <<'PY'; then
import hashlib, json, os, sys
s = json.load(open(sys.argv[1]))
plan_bytes = open(sys.argv[2], "rb").read()
mnt = sys.argv[3]
version = open(sys.argv[4]).read().split()[1]
ranks = [int(sys.argv[5]), int(sys.argv[6])]
plan = dict(l.split(" ", 1) for l in plan_bytes.decode().splitlines()
            if not l.startswith("rank "))
want_objects = want_bytes = 0
for r in ranks:
    for root, _, files in os.walk(os.path.join(mnt, "rank-%d" % r)):
        for f in files:
            want_objects += 1
            want_bytes += os.path.getsize(os.path.join(root, f))
errs = []
def eq(what, got, want):
    if got != want:
        errs.append("%s: got %r want %r" % (what, got, want))
eq("plan_sha256", s["plan_sha256"], hashlib.sha256(plan_bytes).hexdigest())
eq("manifest_sha256", s["manifest_sha256"], plan["manifest_sha256"])
eq("world_size", s["world_size"], int(plan["world_size"]))
eq("ranks", s["ranks"], ranks)
eq("objects", s["objects"], want_objects)
eq("bytes", s["bytes"], want_bytes)
eq("manifest_objects", s["manifest_objects"], int(plan["manifest_items"]))
eq("manifest_bytes", s["manifest_bytes"], int(plan["manifest_bytes"]))
eq("version", s["version"], version)
eq("rates", s["rates"], None)
eq("cache.enabled", s["cache"]["enabled"], True)
for k in ("mountpoint", "shard_spec", "uptime_seconds", "requests", "kernel", "reads",
          "backend", "cache", "prefetch", "memory", "errors"):
    if k not in s:
        errs.append("no field " + k)
for k in ("in_use_bytes", "budget_bytes", "high_water_bytes"):
    if not isinstance(s["memory"].get(k), int):
        errs.append("memory." + k)
if s["memory"]["budget_bytes"] <= 0:
    errs.append("memory budget 0")
for k in ("depth_files", "hits", "misses", "hit_rate"):
    if k not in s["prefetch"]:
        errs.append("prefetch." + k)
if errs:
    print("\n".join(errs))
    sys.exit(1)
PY
	ok "status --json: plan digest = sha256(shardfs plan), ranks $R1-$R2, objects and bytes = the tree, manifest = the plan's"
else
	fail "status --json fields"
fi
# The plan's own rank lines agree too: items - pad of the two ranks.
want_obj=$(awk -v a="$R1" -v b="$R2" '$1 == "rank" && ($2 == a || $2 == b) {n += $4 - $6} END {print n}' "$T/plan.txt")
got_obj=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["objects"])' "$T/s.json")
check "objects = the plan's items - pads of ranks $R1, $R2 ($want_obj)" test "$want_obj" = "$got_obj"

"$SHARDFS" status "$M" --interval 0 >"$T/s.txt"
digest=$(sha256sum "$T/plan.txt" | cut -d' ' -f1)
check "status text: plan digest" grep -q "^plan *$digest\$" "$T/s.txt"
check "status text: ranks" grep -q "^ranks *$R1-$R2 of world_size 4\$" "$T/s.txt"
check "status text: objects" grep -q "^objects *$want_obj files" "$T/s.txt"
for f in mount manifest reads backend cache prefetch memory errors; do
	grep -q "^$f " "$T/s.txt" || fail "status text: no $f line" "$(cat "$T/s.txt")"
done
check "status text: no rates line with --interval 0" bash -c "! grep -q '^rates ' '$T/s.txt'"

# --- the cache hit rate after reading files twice ------------------------------
# The second pass drops each file's pages first (POSIX_FADV_DONTNEED), so
# its reads reach the daemon and are served from the disk cache.
read_rank() { # read_rank DIR [drop]
	$PY - "$@" <<'PY'
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for f in sorted(files):
        fd = os.open(os.path.join(root, f), os.O_RDONLY)
        try:
            if len(sys.argv) > 2:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while os.read(fd, 1 << 20):
                pass
        except OSError:
            pass
        os.close(fd)
PY
}
read_rank "$M/rank-$OTHER"
read_rank "$M/rank-$OTHER" drop
"$SHARDFS" status "$M" --json --interval 0 >"$T/s2.json"
if $PY - "$T/s2.json" "$M/.shardfs/stats" <<'PY'; then
import json, sys
s = json.load(open(sys.argv[1]))
c = s["cache"]
st = {}
for l in open(sys.argv[2]):
    if not l.startswith("#") and "{" not in l:
        k, v = l.split()
        st[k] = int(v)
assert c["hits"] > 0 and c["misses"] > 0, c
assert abs(c["hit_rate"] - c["hits"] / (c["hits"] + c["misses"])) < 1e-9, c
assert c["bytes_from_cache"] > 0, c
# Counters only grow: the stats read after status has at least as many.
assert st["shardfs_cache_hits_total"] >= c["hits"], (st, c)
PY
	ok "cache hit rate after reading rank-$OTHER twice: $($PY -c 'import json,sys; c=json.load(open(sys.argv[1]))["cache"]; print("%d hits, %d misses, %.3f" % (c["hits"], c["misses"], c["hit_rate"]))' "$T/s2.json")"
else
	fail "cache hit rate after reading twice" "$(cat "$T/s2.json")"
fi
grep -q "^cache *hit rate [0-9.]*% " <("$SHARDFS" status "$M" --interval 0) &&
	ok "status text: cache hit rate" || fail "status text: cache hit rate"

# --- rates while a reader runs -------------------------------------------------
# The reader loops over a rank dropping pages, so reads keep reaching the
# daemon (from the disk cache) for as long as it runs; it is stopped after.
reader_loop() {
	$PY - "$1" <<'PY' &
import os, sys, time
end = time.time() + 120
while time.time() < end:
    for root, _, files in os.walk(sys.argv[1]):
        for f in files:
            try:
                fd = os.open(os.path.join(root, f), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                while os.read(fd, 1 << 20):
                    pass
            except OSError:
                pass
            os.close(fd)
PY
	READER=$!
	PIDS+=("$READER")
}
reader_loop "$M/rank-$OTHER"
"$SHARDFS" status "$M" --json --interval 1 >"$T/s3.json"
"$SHARDFS" status "$M" --interval 0.5 >"$T/s3.txt"
kill "$READER" 2>/dev/null
wait "$READER" 2>/dev/null
if $PY -c '
import json, sys
r = json.load(open(sys.argv[1]))["rates"]
assert r["interval_seconds"] >= 1.0, r
assert r["read_bytes_per_second"] > 0 and r["reads_per_second"] > 0, r
assert r["cache_bytes_per_second"] > 0, r
' "$T/s3.json"; then
	ok "rates > 0 while a reader runs: $(cat "$T/s3.json" | $PY -c 'import json,sys; r=json.load(sys.stdin)["rates"]; print("%.0f B/s read, %.0f B/s from cache" % (r["read_bytes_per_second"], r["cache_bytes_per_second"]))')"
else
	fail "rates while a reader runs" "$(cat "$T/s3.json")"
fi
check "status text: a rates line" grep -q "^rates .*/s from the backend, .*/s from the cache" "$T/s3.txt"

# --- a last error whose message needs escaping ---------------------------------
Q="$M/rank-$QR/q\"uo\\te.bin"
if [ ! -e "$Q" ]; then
	fail "the quoted object is not in rank-$QR"
else
	rm -f "$SRC/q\"uo\\te.bin"
	check "reading an object removed from the source fails" bash -c '! cat "$1" >/dev/null 2>&1' _ "$Q"
	"$SHARDFS" status "$M" --json --interval 0 >"$T/s4.json"
	if $PY -c '
import json, sys
e = json.load(open(sys.argv[1]))["errors"]
assert e["logged"] >= 1 and e["last_error_time"] > 0, e
assert "q\"uo\\te.bin" in e["last_error"], e
' "$T/s4.json"; then
		ok "status --json: last error (quotes, backslash) and its count"
	else
		fail "status --json: last error" "$(cat "$T/s4.json")"
	fi
fi

# --- the metrics endpoint --------------------------------------------------------
curl -sS --max-time 20 -D "$T/h.txt" -o "$T/m.txt" "http://127.0.0.1:$PORT/metrics"
check "GET /metrics: 200" grep -q "^HTTP/1.1 200" "$T/h.txt"
check "GET /metrics: text format 0.0.4 content type" \
	grep -qi "^content-type: text/plain; version=0.0.4" "$T/h.txt"
cp "$M/.shardfs/stats" "$T/stats.txt"
if $PY - "$T/m.txt" "$T/stats.txt" "$(cut -d' ' -f2 "$T/version.txt")" <<'PY'; then
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
def families(path):
    out = {}
    for fam in parse(open(path, encoding="utf-8").read()):
        out[fam.name] = (fam.type, fam.documentation,
                         sorted(tuple(sorted(s.labels.items())) + (s.name,)
                                for s in fam.samples))
    return out
m = families(sys.argv[1])
s = families(sys.argv[2])
assert m == s, (set(m) ^ set(s), [k for k in m if m[k] != s.get(k)])
bi = [x for x in parse(open(sys.argv[1]).read()) if x.name == "shardfs_build_info"]
assert len(bi) == 1 and len(bi[0].samples) == 1, bi
lab = bi[0].samples[0].labels
assert lab["version"] == sys.argv[3], lab
assert lab["shard_spec"].startswith("shardfs-shard v"), lab
assert lab["libfuse"].startswith("3.") and lab["libcurl"].startswith("7."), lab
assert bi[0].samples[0].value == 1
names = set(m)
for want in ("shardfs_plan_info", "shardfs_ranks_served", "shardfs_rank_objects",
             "shardfs_rank_bytes", "shardfs_log_errors", "shardfs_cache_hits",
             "shardfs_memory_in_use_bytes", "shardfs_prefetch_depth_files"):
    assert want in names, want
le = [x for x in parse(open(sys.argv[1]).read()) if x.name == "shardfs_last_error_info"]
if le:
    print("last error label:", le[0].samples[0].labels["message"])
PY
	ok "endpoint parsed by prometheus_client; same metric set as .shardfs/stats; shardfs_build_info version $(cut -d' ' -f2 "$T/version.txt")"
else
	fail "endpoint text / build_info" "$(head -c 2000 "$T/m.txt")"
fi
code=$(curl -s --max-time 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/")
check "GET / is 404 (got $code)" test "$code" = 404
code=$(curl -s --max-time 20 -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/metrics")
check "POST /metrics is 405 (got $code)" test "$code" = 405
# Bound to 127.0.0.1 only: 127.0.0.2 is the same loopback interface.
if curl -s --max-time 5 -o /dev/null "http://127.0.0.2:$PORT/metrics"; then
	fail "the endpoint answers on 127.0.0.2 (bound to more than the address)"
else
	ok "the endpoint does not answer on 127.0.0.2 (bound to 127.0.0.1 only)"
fi
# A client that connects and sends nothing does not hold the endpoint.
$PY -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.send(b"GET /metr")
time.sleep(60)
' "$PORT" &
STALL=$!
PIDS+=("$STALL")
sleep 0.3
code=$(curl -s --max-time 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/metrics")
check "a stalled client does not block a scrape (got $code)" test "$code" = 200
kill "$STALL" 2>/dev/null

# --- a second mount on the same port: error logged, files served ---------------
C2=$T/c2.conf
sed -e 's/^ranks = .*/ranks = 0/' -e "s|^dir = .*|dir = $T/cache2\nenabled = false|" "$C" >"$C2"
M2=$T/mnt2
f="" # a file of rank 0, set once the second mount serves
if mount_shardfs "$C2" "$M2"; then
	PID_B=$LAST_PID
	LOG_B=$LAST_LOG
	wait_log "metrics: no endpoint" "$LOG_B"
	check "port in use: the error is logged with the address" \
		grep -q "error: metrics: cannot listen on 127.0.0.1:$PORT: Address already in use" "$LOG_B"
	check "port in use: the log says files are still served" \
		grep -q "the mount serves files as usual" "$LOG_B"
	f=$(cd "$M2/rank-0" && find . -type f -size +1k | head -1)
	check "port in use: files are served ($f)" cmp -s "$M2/rank-0/$f" "$SRC/$f"
	check "port in use: the first mount's endpoint still answers" \
		curl -sf --max-time 20 -o /dev/null "http://127.0.0.1:$PORT/metrics"
	# No disk cache: reads go to the backend, so backend bytes/s > 0.
	reader_loop "$M2/rank-0"
	"$SHARDFS" status "$M2" --json --interval 1 >"$T/s5.json"
	kill "$READER" 2>/dev/null
	wait "$READER" 2>/dev/null
	if $PY -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["cache"]["enabled"] is False and s["cache"]["hit_rate"] is None, s
assert s["ranks"] == [0], s
assert s["rates"]["backend_bytes_per_second"] > 0, s["rates"]
assert s["errors"]["logged"] >= 1, s["errors"]
assert "Address already in use" in s["errors"]["last_error"], s["errors"]
' "$T/s5.json"; then
		ok "no-cache mount: backend bytes/s > 0 while a reader runs; its last error is the port"
	else
		fail "no-cache mount status" "$(cat "$T/s5.json")"
	fi
	check "unmount the second mount" umount_shardfs "$M2" "$PID_B"
else
	fail "mount with the port in use"
fi

# --- an address this host does not have; an IPv6 one ----------------------------
C3=$T/c3.conf
sed -e 's/^ranks = .*/ranks = 0/' -e 's/^listen = .*/listen = 192.0.2.1:9/' "$C" >"$C3"
if mount_shardfs "$C3" "$T/mnt3"; then
	PID_C=$LAST_PID
	wait_log "metrics: no endpoint" "$LAST_LOG"
	check "address not on this host: the error is logged" \
		grep -q "error: metrics: cannot listen on 192.0.2.1:9: Cannot assign requested address" "$LAST_LOG"
	check "address not on this host: files are served" \
		cmp -s "$T/mnt3/rank-0/$f" "$SRC/$f"
	check "unmount the third mount" umount_shardfs "$T/mnt3" "$PID_C"
else
	fail "mount with an address not on this host"
fi
if $PY -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
	P6=$($PY -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0)); print(s.getsockname()[1])')
	sed -e 's/^ranks = .*/ranks = 0/' -e "s/^listen = .*/listen = [::1]:$P6/" "$C" >"$C3"
	if mount_shardfs "$C3" "$T/mnt3"; then
		PID_C=$LAST_PID
		wait_log "metrics: serving" "$LAST_LOG"
		check "IPv6 [::1]: the endpoint answers" \
			curl -sf --max-time 20 -o /dev/null "http://[::1]:$P6/metrics"
		check "unmount the IPv6 mount" umount_shardfs "$T/mnt3" "$PID_C"
	else
		fail "mount with an IPv6 metrics address"
	fi
else
	ok "no IPv6 loopback here: IPv6 endpoint not tried"
fi

# --- a key with a newline and an ESC sequence ------------------------------------
# File names may hold both. A key went into log lines and the last error
# raw: a newline forged a second "shardfs: error:" line, an ESC sequence
# reached the log and the terminal of `shardfs status`.
IS=$T/inject
mkdir -p "$IS"
EVIL=$'evil\nshardfs: error: forged line\e[31mred'
printf 'x' >"$IS/$EVIL"
printf 'ok' >"$IS/plain.txt"
printf '[source]\nurl = %s\n[shard]\nworld_size = 1\n[cache]\ndir = %s\n' \
	"$IS" "$T/cache-inject" >"$T/inject.conf"
if mount_shardfs "$T/inject.conf" "$T/mnt-inject"; then
	PID_I=$LAST_PID
	LOG_I=$LAST_LOG
	printf 'yy' >"$IS/$EVIL" # changed since the manifest: the read fails
	check "a key with a newline and ESC: changed, its read fails" \
		bash -c '! cat "$1" >/dev/null 2>&1' _ "$T/mnt-inject/rank-0/$EVIL"
	check "... logged once, with the key escaped as in the manifest" \
		grep -qF 'evil%0Ashardfs: error: forged line%1B[31mred: changed since the manifest' "$LOG_I"
	check "... no forged log line" bash -c "! grep -q '^shardfs: error: forged' '$LOG_I'"
	check "... no ESC byte in the log" bash -c "! grep -q \$'\\e' '$LOG_I'"
	"$SHARDFS" status "$T/mnt-inject" --interval 0 >"$T/inject.txt"
	"$SHARDFS" status "$T/mnt-inject" --interval 0 --json >"$T/inject.json"
	check "... shardfs status prints no control byte" $PY -c '
import sys
b = open(sys.argv[1], "rb").read()
bad = [c for c in b if (c < 0x20 and c != 0x0a) or c == 0x7f]
assert not bad and b"%1B" in b, (bad, b)
' "$T/inject.txt"
	check "... status --json: the last error escaped, one line" $PY -c '
import json, sys
e = json.load(open(sys.argv[1]))["errors"]["last_error"]
assert "\x1b" not in e and "\n" not in e and "evil%0Ashardfs" in e, e
' "$T/inject.json"
	check "... .shardfs/stats holds no ESC byte" bash -c "! grep -q \$'\\e' '$T/mnt-inject/.shardfs/stats'"
	check "unmount the inject mount" umount_shardfs "$T/mnt-inject" "$PID_I"
else
	fail "mount of a source with a newline and ESC in a key"
fi

# --- not a mount, a dead mount, a hung mount -------------------------------------
mkdir -p "$T/plain"
"$SHARDFS" status "$T/plain" >"$T/o.txt" 2>&1
rc=$?
check "status on a plain directory: exit 2 (got $rc)" test "$rc" = 2
check "status on a plain directory: says not a shardfs mount" grep -q "not a shardfs mount" "$T/o.txt"
"$SHARDFS" status /proc >"$T/o.txt" 2>&1
rc=$?
check "status on /proc (another filesystem): exit 2 (got $rc)" test "$rc" = 2
"$SHARDFS" status >/dev/null 2>&1
rc=$?
check "status without MOUNTPOINT: exit 2 (got $rc)" test "$rc" = 2
"$SHARDFS" status "$M" --interval -1 >/dev/null 2>&1
rc=$?
check "status --interval -1: exit 2 (got $rc)" test "$rc" = 2

# Hung: the daemon stopped. status gives up after its 10 s bound.
kill -STOP "$PID_A"
timeout 60 "$SHARDFS" status "$M" --interval 0 >"$T/o.txt" 2>&1
rc=$?
kill -CONT "$PID_A"
check "status on a hung mount: exit 1 within its bound (got $rc)" test "$rc" = 1
check "status on a hung mount: says it did not answer" grep -q "did not answer within" "$T/o.txt"
"$SHARDFS" status "$M" --interval 0 >/dev/null 2>&1
rc=$?
check "the mount answers again after SIGCONT (exit $rc)" test "$rc" = 0

# Dead: the daemon killed. ENOTCONN at once, not a wait.
kill -9 "$PID_A"
wait "$PID_A" 2>/dev/null
timeout 60 "$SHARDFS" status "$M" --json >"$T/o.txt" 2>&1
rc=$?
check "status on a dead mount: exit 1 (got $rc)" test "$rc" = 1
check "status on a dead mount: the stale message" grep -q "mount is dead (stale" "$T/o.txt"
check "status on a dead mount: says how to clean up" grep -q "fusermount3 -uz" "$T/o.txt"
fusermount3 -uz "$M"

finish
