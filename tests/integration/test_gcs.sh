#!/usr/bin/env bash
# The GCS backend against a real GCS JSON API (the Firebase Storage
# emulator, pinned, on 127.0.0.1; see gcs/): listings and manifests (odd
# names, many pages, folder placeholders), the rank views of the
# foundation checked as for posix and S3 (union, disjoint, byte-identical,
# listing = plan = reference implementation) for several plans, reached
# through STORAGE_EMULATOR_HOST and through [source] endpoint + anonymous,
# pinned manifests stored at gs://, a replaced object (a new generation)
# read as EIO, never new bytes, and a missing object logged with key,
# status and reason. Through a fault proxy (gcs/fault_proxy.py): real
# paging with pages of 3, a repeated page token, a restarted listing, an
# endless run of empty pages, a listing with new names and a new token on
# every page (at its memory or time bound) and a malformed page all fail
# the listing with a clear error, as does a page out of name order; 503s
# are retried; 403, a body that is not its crc32c, a 206 naming another
# range or with a body longer or shorter than it, a 200 without
# Content-Length, a pinned reply without x-goog-generation or with two
# that disagree read as EIO, logged with the key; a second, well-formed
# reply after every real one is never read as the next request's answer;
# one read() of a file whose media requests are never answered ends with
# EIO within 1.6 x read_timeout_ms, cache off and on; an object GCS would
# transcode (stored gzip-encoded) reads byte-identical, with Range; real
# GCS's 404 for a
# replaced generation is told from a deletion. Credentials never go to a
# plain-http endpoint that is not loopback. The
# disk cache (a remount reads everything with zero GETs) and the order
# prefetcher (files fetched before they are opened) over gs:// too.
#
# Paging: the suite uploads 2,345 objects, so the listing crosses three
# pages of the 1,000 objects shardfs asks for, the page size real GCS is
# listed with; no test knob changes what the backend sends.
SUITE=gcs
. "$(dirname "$0")/lib.sh"
. "$HERE/gcs/gcs_emulator.sh"

# Nothing from the machine's own Google setup may leak in, and nothing may
# reach a real metadata server or token endpoint.
unset STORAGE_EMULATOR_HOST GOOGLE_APPLICATION_CREDENTIALS GOOGLE_CLOUD_PROJECT
export CLOUDSDK_CONFIG=$T/no-gcloud
export GCE_METADATA_HOST=127.0.0.1:1
export HOME=$T/home
mkdir -p "$HOME"

BUCKET=shardfs-test
if ! command -v node >/dev/null || ! gcs_install; then
	fail "gcs emulator install (npm ci)"
	finish
fi
if ! gcs_start "$T/gcsdata"; then
	fail "gcs emulator start"
	finish
fi
EP=$GCS_EP
EMU=127.0.0.1:$GCS_PORT
upload_tree() { /usr/bin/python3 "$HERE/gcs/gcs_upload.py" "$EP" "$BUCKET" "$1" "$2"; }

# --- data -----------------------------------------------------------------
SRC=$T/src
make_dataset "$SRC" 200
mkdir -p "$SRC/odd dir/deep/er"
printf 'space' >"$SRC/odd dir/sp ace.bin"
printf 'unicode' >"$SRC/odd dir/ünï cødé.bin"
printf 'plus' >"$SRC/odd dir/a+b.bin"
printf 'percent' >"$SRC/odd dir/100%.txt"
printf 'hash' >"$SRC/odd dir/tag#1.bin"
printf 'question' >"$SRC/odd dir/what?.bin"
printf 'equals' >"$SRC/odd dir/k=v&x.bin"
printf 'mix' >"$SRC/odd dir/%2F+ =~é#?.bin"
printf 'nested' >"$SRC/odd dir/deep/er/x y.bin"
# The emulator lists these in UTF-16 order (U+1F600 first), GCS and the
# manifest in byte order (U+FF21 first).
printf 'wide' >"$SRC/odd dir/Ａ wide.bin"
printf 'emoji' >"$SRC/odd dir/😀 emoji.bin"
head -c 3000000 /dev/urandom >"$SRC/odd dir/big.bin"
check "upload the dataset to the emulator" upload_tree ds/ "$SRC"
# A folder placeholder as the console makes them: skipped by the
# manifest, like S3's directory markers.
printf '' >"$T/empty"
check "upload a folder placeholder" gcs_upload "$BUCKET" "ds/odd dir/deep/" "$T/empty"

# --- manifests -------------------------------------------------------------
"$SHARDFS" manifest "$SRC" -o "$T/posix.tsv" >/dev/null 2>&1
STORAGE_EMULATOR_HOST=$EMU "$SHARDFS" manifest "gs://$BUCKET/ds/" \
	-o "$T/gs.tsv" >"$T/gs.out" 2>"$T/gs.err"
check "manifest gs:// (STORAGE_EMULATOR_HOST) exits 0" test $? -eq 0
check "gs:// manifest has the source's keys and sizes" bash -c \
	"cmp -s <(tail -n +2 '$T/posix.tsv' | cut -f1,2) <(tail -n +2 '$T/gs.tsv' | cut -f1,2)"
check "gs:// manifest carries generations as etags" bash -c \
	"! tail -n +2 '$T/gs.tsv' | cut -f3 | grep -qvE '^[0-9]{1,19}\$'"
check "the folder placeholder is skipped and counted" bash -c \
	"grep -q '^skipped_keys 1\$' '$T/gs.out' && ! grep -qF 'deep/	' '$T/gs.tsv'"
check "odd names are listed as they are (space, unicode, +, %, #, ?, =)" bash -c \
	"grep -qF 'odd dir/sp ace.bin' '$T/gs.tsv' && grep -qF 'odd dir/ünï cødé.bin' '$T/gs.tsv' && grep -qF 'odd dir/a+b.bin' '$T/gs.tsv' && grep -qF 'odd dir/100%25.txt' '$T/gs.tsv' && grep -qF 'odd dir/tag#1.bin' '$T/gs.tsv' && grep -qF 'odd dir/what?.bin' '$T/gs.tsv' && grep -qF 'odd dir/%252F+ =~é#?.bin' '$T/gs.tsv' && grep -qF 'odd dir/deep/er/x y.bin' '$T/gs.tsv' && grep -qF 'odd dir/Ａ wide.bin' '$T/gs.tsv' && grep -qF 'odd dir/😀 emoji.bin' '$T/gs.tsv'"
check "manifest to stdout equals -o FILE" bash -c \
	"STORAGE_EMULATOR_HOST=http://$EMU/ '$SHARDFS' manifest gs://$BUCKET/ds 2>/dev/null | cmp -s - '$T/gs.tsv'"
"$SHARDFS" manifest "gs://$BUCKET/ds/" --endpoint "$EP" --anonymous \
	-o "$T/anon.tsv" >/dev/null 2>"$T/anon.err"
check "--endpoint with --anonymous lists the same" cmp -s "$T/anon.tsv" "$T/gs.tsv"
# A plain-http loopback endpoint is never reached through an environment
# proxy (it would see a bearer token in clear; here: a closed port).
# lib.sh exports NO_PROXY for the suites; this command must not have it.
env -u NO_PROXY -u no_proxy http_proxy=http://127.0.0.1:9 ALL_PROXY=http://127.0.0.1:9 \
	"$SHARDFS" manifest "gs://$BUCKET/ds/" --endpoint "$EP" --anonymous \
	-o "$T/px.tsv" >/dev/null 2>"$T/px.err"
check "a loopback endpoint bypasses http_proxy/ALL_PROXY" cmp -s "$T/px.tsv" "$T/gs.tsv"
"$SHARDFS" manifest "gs://$BUCKET/ds/" --endpoint "$EP" >/dev/null 2>"$T/nocreds.err"
check "without credentials, anonymous or the emulator: exit 1, says why" bash -c \
	"test $? -eq 1 && grep -qi 'credentials' '$T/nocreds.err'"
# A bearer token never goes over plain http to a host that is not
# loopback: refused at open, before any request (these names resolve
# nowhere here, and nothing is asked of them).
for ep in http://127.0.0.1.nip.io:1 http://shardfs-nowhere.invalid; do
	"$SHARDFS" manifest "gs://$BUCKET/ds/" --endpoint "$ep" >/dev/null 2>"$T/clear.err"
	check "credentials with endpoint $ep: refused before any request, says use https or anonymous" bash -c \
		"test $? -ne 0 && grep -q 'endpoint' '$T/clear.err' && grep -q 'https://' '$T/clear.err' && grep -q 'anonymous = true' '$T/clear.err' && ! grep -q metadata '$T/clear.err'"
done
STORAGE_EMULATOR_HOST=$EMU "$SHARDFS" manifest "gs://$BUCKET/ds/odd dir/" \
	-o "$T/sub.tsv" >/dev/null 2>&1
check "a prefix with a space lists only its keys, relative to it" test \
	"$(tail -n +2 "$T/sub.tsv" | cut -f1 | LC_ALL=C sort | tr '\n' '|')" = \
	"$(cd "$SRC/odd dir" && find . -type f | sed 's|^\./||; s/%/%25/g' | LC_ALL=C sort | tr '\n' '|')"

# More than 1,000 objects: several pages of objects.list.
MANY=$T/many
mkdir -p "$MANY"
/usr/bin/python3 - "$MANY" <<'PY'
import os, sys
for i in range(2345):
    with open(os.path.join(sys.argv[1], "k%05d.bin" % i), "wb") as f:
        f.write(b"x" * (i % 7))
PY
check "upload 2,345 objects" upload_tree many/ "$MANY"
STORAGE_EMULATOR_HOST=$EMU "$SHARDFS" manifest "gs://$BUCKET/many/" \
	-o "$T/many.tsv" >"$T/many.out" 2>&1
check "2,345 objects over 3 pages: all listed once" bash -c \
	"grep -q '^objects 2345\$' '$T/many.out' && test \"\$(tail -n +2 '$T/many.tsv' | cut -f1 | tr '\n' ' ')\" = \"\$(cd '$MANY' && ls | LC_ALL=C sort | tr '\n' ' ')\""

# --- mounts: the foundation's properties over gs:// --------------------------
conf() { # conf FILE [section.key=value...]
	local f=$1; shift
	{
		echo "[source]"
		echo "url = gs://$BUCKET/ds/"
		local kv
		for kv in "$@"; do
			case $kv in source.*) kv=${kv#source.}; echo "${kv%%=*} = ${kv#*=}" ;; esac
		done
		echo "[shard]"
		for kv in "$@"; do
			case $kv in source.*) ;; *) echo "${kv%%=*} = ${kv#*=}" ;; esac
		done
		echo "[cache]"
		echo "dir = $T/cache"
	} >"$f"
}
M=$T/mnt
C=$T/c.conf
# The last plan reaches the emulator through [source] endpoint and
# anonymous = true instead of STORAGE_EMULATOR_HOST.
for c in "4 shuffle strided pad 0 0 env" "3 none contiguous none 0 0 env" \
	"4 shuffle bytes none 5 1 conf"; do
	read -r W ORDER LAYOUT BALANCE SEED EPOCH HOW <<<"$c"
	name="gs W=$W $ORDER $LAYOUT $BALANCE seed=$SEED epoch=$EPOCH ($HOW)"
	if [ "$HOW" = env ]; then
		conf "$C" world_size=$W order=$ORDER layout=$LAYOUT \
			balance=$BALANCE seed=$SEED epoch=$EPOCH
		export STORAGE_EMULATOR_HOST=$EMU
	else
		conf "$C" world_size=$W order=$ORDER layout=$LAYOUT \
			balance=$BALANCE seed=$SEED epoch=$EPOCH \
			"source.endpoint=$EP" source.anonymous=true
	fi
	mount_shardfs "$C" "$M"
	mrc=$?
	unset STORAGE_EMULATOR_HOST
	if [ $mrc -ne 0 ]; then
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
		/usr/bin/python3 "$HERE/shardspec.py" "$M/.shardfs/manifest.tsv" \
			--world-size "$W" --seed "$SEED" --epoch "$EPOCH" \
			--order "$ORDER" --layout "$LAYOUT" --balance "$BALANCE" \
			--rank $r >"$T/spec.$r" || bad="$bad spec$r"
		cmp -s "$T/spec.$r" "$M/.shardfs/rank-$r.order" || bad="$bad ref$r"
	done
	if [ -z "$bad" ]; then
		ok "$name: rank-R.order = reference implementation"
	else
		fail "$name: orders" "mismatch at:$bad"
	fi
	check "$name: manifest.tsv = shardfs manifest gs://" cmp -s "$M/.shardfs/manifest.tsv" "$T/gs.tsv"
	check "$name: clean unmount" umount_shardfs "$M"
done

export STORAGE_EMULATOR_HOST=$EMU
conf "$C" world_size=2
mount_shardfs "$C" "$M" -o "cache.dir=$T/cache-reads" || fail "mount for reads"
check "odd names read back byte-identical" bash -c \
	"cd '$SRC' && find 'odd dir' -type f | while IFS= read -r f; do g=\$(ls -d '$M'/rank-*/\"\$f\" 2>/dev/null); [ -n \"\$g\" ] && cmp -s \"\$f\" \"\$g\" || exit 1; done"
check "8 parallel readers get identical bytes" bash -c \
	"cd '$M' && find rank-* -type f -print0 | xargs -0 -P 8 -n 16 sh -c 'for f; do cmp -s \"\$f\" \"$SRC/\${f#rank-*/}\" || exit 1; done' _"
big=$(cd "$M" && ls -d rank-*/"odd dir"/big.bin)
check "unaligned ranged reads (dd skip/count) are exact" bash -c \
	"dd if='$M/$big' bs=4097 skip=123 count=77 status=none | cmp -s - <(dd if='$SRC/odd dir/big.bin' bs=4097 skip=123 count=77 status=none)"
check "files carry the object's updated time" bash -c \
	"t=\$(stat -c %Y '$M/$big'); now=\$(date +%s); [ \$t -gt \$((now - 600)) ] && [ \$t -le \$((now + 5)) ]"
check "unmount" umount_shardfs "$M"

# --- a pinned manifest stored at gs:// ---------------------------------------
digest=$(awk '$1 == "sha256" {print $2}' "$T/gs.out")
check "upload the manifest" gcs_upload "$BUCKET" "pins/ds v1#.tsv" "$T/gs.tsv"
conf "$C" world_size=3 "source.manifest=gs://$BUCKET/pins/ds v1#.tsv" \
	"source.manifest_sha256=$digest"
"$SHARDFS" plan "$C" >"$T/pplan" 2>"$T/pplan.err"
check "plan loads a manifest from gs:// and checks its pin" \
	grep -q "^manifest_sha256 $digest\$" "$T/pplan"
if mount_shardfs "$C" "$M"; then
	check "mount from a gs:// manifest verifies" \
		/usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC"
	check "unmount" umount_shardfs "$M"
else
	fail "mount from a gs:// manifest"
fi
conf "$C" world_size=3 "source.manifest=gs://$BUCKET/pins/missing.tsv"
"$SHARDFS" plan "$C" >/dev/null 2>"$T/err"
check "a missing gs:// manifest fails and names it" bash -c \
	"test $? -ne 0 && grep -q 'pins/missing.tsv' '$T/err'"

# --- errors: mapped and logged once ----------------------------------------
{
	head -1 "$T/gs.tsv"
	tail -n +2 "$T/gs.tsv"
	printf 'zz-ghost.bin\t5\t1700000000000000\t0\n'
} >"$T/ghost.tsv"
conf "$C" world_size=1 "source.manifest=$T/ghost.tsv"
mount_shardfs "$C" "$M" -v || fail "mount with a ghost key"
cat "$M/rank-0/zz-ghost.bin" >/dev/null 2>"$T/ghost.err"
check "an object missing from the bucket reads as EIO" grep -q 'Input/output error' "$T/ghost.err"
errors=$(awk '$1 == "shardfs_read_errors_total" {print $2}' "$M/.shardfs/stats")
# The emulator's 404 body is plain text, not the JSON API's error object:
# its first line stands in for the reason (check_gcs covers the JSON).
check "the 404 is logged with key, status and the server's reason, once ($errors failed reads)" test \
	"$(grep -c "gs://$BUCKET/ds/zz-ghost.bin: read: HTTP 404: No such object: $BUCKET/ds/zz-ghost.bin (after 1 try)" "$LAST_LOG")" -eq 1 -a "${errors:-0}" -ge 1
check "unmount" umount_shardfs "$M"

# An object replaced after the manifest was made: a new generation. The
# emulator serves the current generation whatever the request pins, so
# this exercises shardfs' own check of x-goog-generation.
conf "$C" world_size=1
mount_shardfs "$C" "$M" -o "cache.dir=$T/cache-change" || fail "mount for a replaced object"
victim="train/n00000003/000003.JPEG"
printf 'new content' >"$T/new"
gcs_upload "$BUCKET" "ds/$victim" "$T/new"
check "an object replaced since the manifest reads as EIO, not new bytes" bash -c \
	"! cat '$M/rank-0/$victim' >/dev/null 2>'$T/stale.err' && grep -q 'Input/output error' '$T/stale.err'"
check "the change is logged with the key and both generations" \
	grep -qE "gs://$BUCKET/ds/$victim: changed since the manifest was made \(generation [0-9]+, now [0-9]+\)" "$LAST_LOG"
gcs_upload "$BUCKET" "ds/$victim" "$SRC/$victim"
check "the same bytes uploaded again are still a new generation: EIO" bash -c \
	"! cat '$M/rank-0/$victim' >/dev/null 2>/dev/null"
check "other objects still read" cmp -s "$M/rank-0/odd dir/big.bin" "$SRC/odd dir/big.bin"
check "unmount" umount_shardfs "$M"
check "no Authorization header or token in any log" bash -c \
	"! grep -l -i -e 'Authorization' -e 'Bearer' '$T'/*.err '$LAST_LOG'"

# --- faults, through a proxy in front of the emulator -------------------------
FP_LOG=$T/fault.log
/usr/bin/python3 "$HERE/gcs/fault_proxy.py" "$T/fault.port" "$FP_LOG" "$GCS_PORT" \
	2>"$T/fault.err" &
PIDS+=("$!")
for _ in $(seq 100); do [ -s "$T/fault.port" ] && break; sleep 0.1; done
FEP=http://127.0.0.1:$(cat "$T/fault.port" 2>/dev/null)
unset STORAGE_EMULATOR_HOST
# fmanifest PREFIX: `shardfs manifest` through the proxy; output in
# $T/f.tsv, log in $T/f.err, exit status in $frc.
fmanifest() {
	"$SHARDFS" manifest "gs://$BUCKET/$1" --endpoint "$FEP" --anonymous \
		-o "$T/f.tsv" >"$T/f.out" 2>"$T/f.err"
	frc=$?
}
LS=$T/listsets
for d in small loop restart badpage unordered endless; do
	mkdir -p "$LS/$d"
	for i in $(seq 10); do printf '%s' "$d$i" >"$LS/$d/o$i.bin"; done
	upload_tree "$d/" "$LS/$d" || fail "upload $d/"
done
fmanifest small/
check "pages of 3 objects (4 pages): all 10 listed once, as in one page" bash -c \
	"test $frc -eq 0 && grep -q '^objects 10\$' '$T/f.out' && test \$(grep -c 'prefix=small' '$FP_LOG') -eq 4"
fmanifest loop/
check "a page token that repeats fails the listing, saying so" bash -c \
	"test $frc -eq 1 && grep -q 'gs://$BUCKET/loop/: list: page 2 repeats an earlier page token' '$T/f.err'"
fmanifest restart/
check "a listing that restarts (unknown token) fails, never duplicates keys" bash -c \
	"test $frc -eq 1 && grep -q 'gs://$BUCKET/restart/: list: page 2 starts with the name an earlier page started with' '$T/f.err'"
fmanifest unordered/
# Order is not required: the emulator sorts by UTF-16 code units, not
# bytes (see the U+FF21 / U+1F600 names above), and the manifest sorts.
check "a page whose names are out of order still lists every object once" bash -c \
	"test $frc -eq 0 && grep -q '^objects 10\$' '$T/f.out' && test \$(tail -n +2 '$T/f.tsv' | cut -f1 | sort -u | wc -l) -eq 10"
fmanifest empty/
check "pages without objects but with a token are bounded" bash -c \
	"test $frc -eq 1 && grep -q 'gs://$BUCKET/empty/: list: 1001 pages in a row without objects' '$T/f.err'"
fmanifest badpage/
check "a malformed page fails the listing, naming what was wrong" bash -c \
	"test $frc -eq 1 && grep -q 'gs://$BUCKET/badpage/: list: malformed objects.list answer (page 1): item 0: size is not a decimal string' '$T/f.err'"
# A new token and new names on every page: only the listing's bounds end
# it (60 s tells an end from none).
timeout 60 "$SHARDFS" manifest "gs://$BUCKET/endless/" --endpoint "$FEP" --anonymous \
	--list-memory 64K -o "$T/f.tsv" >/dev/null 2>"$T/f.err"
frc=$?
check "a listing that never ends fails once its objects hold --list-memory, naming it (exit $frc)" bash -c \
	"test $frc -eq 1 && grep -q 'gs://$BUCKET/endless/: list: the objects listed so far (.*) hold more than \[source\] list_memory = 65536 bytes; giving up' '$T/f.err'"
timeout 60 "$SHARDFS" manifest "gs://$BUCKET/endless/" --endpoint "$FEP" --anonymous \
	--list-timeout-ms 1000 -o "$T/f.tsv" >/dev/null 2>"$T/f.err"
frc=$?
check "and after --list-timeout-ms, naming it (exit $frc)" bash -c \
	"test $frc -eq 1 && grep -q 'gs://$BUCKET/endless/: list: still listing after \[source\] list_timeout_ms = 1000 ms' '$T/f.err'"

F=$T/faults
mkdir -p "$F"
for n in flaky denied badcrc realgen-same realgen realgen-gone ok nolength nogen dupgen; do
	head -c 5000 /dev/urandom >"$F/$n.bin"
done
for n in badrange gzipped longbody shortbody; do head -c 3000000 /dev/urandom >"$F/$n.bin"; done
upload_tree ds2/ "$F" || fail "upload ds2/"
STORAGE_EMULATOR_HOST=$EMU "$SHARDFS" manifest "gs://$BUCKET/ds2/" -o "$T/ds2.tsv" >/dev/null 2>&1
{
	echo "[source]"
	echo "url = gs://$BUCKET/ds2/"
	echo "manifest = $T/ds2.tsv"
	echo "endpoint = $FEP"
	echo "anonymous = true"
	echo "retries = 2"
	echo "[shard]"
	echo "world_size = 1"
	echo "[cache]"
	echo "dir = $T/cache-faults"
} >"$C"
# Replaced and deleted before the mount: the prefetcher may read any of
# them as soon as another is opened.
gcs_upload "$BUCKET" ds2/realgen.bin "$F/ok.bin"
curl -s -X DELETE -o /dev/null "$EP/storage/v1/b/$BUCKET/o/ds2%2Frealgen-gone.bin"
if mount_shardfs "$C" "$M"; then
	check "a pinned generation that real GCS still has reads (realgen)" \
		cmp -s "$M/rank-0/realgen-same.bin" "$F/realgen-same.bin"
	check "after a replacement, real GCS's 404 for the old generation reads as EIO" bash -c \
		"! cat '$M/rank-0/realgen.bin' >/dev/null 2>&1"
	check "and is told from a deletion by the object's metadata: logged as changed" \
		grep -qE "gs://$BUCKET/ds2/realgen.bin: changed since the manifest was made \(generation [0-9]+, now [0-9]+\)" "$LAST_LOG"
	check "a deleted object (404, and no metadata) reads as EIO" bash -c \
		"! cat '$M/rank-0/realgen-gone.bin' >/dev/null 2>&1"
	check "the deletion is logged as the read's 404 with its reason" \
		grep -q "gs://$BUCKET/ds2/realgen-gone.bin: read: HTTP 404 notFound: No such object: ds2/realgen-gone.bin#" "$LAST_LOG"
	check "503 backendError twice, then the bytes (retried)" cmp -s "$M/rank-0/flaky.bin" "$F/flaky.bin"
	check "403 forbidden reads as EIO" bash -c "! cat '$M/rank-0/denied.bin' >/dev/null 2>&1"
	check "403 is logged with key, status, reason and message" \
		grep -q "gs://$BUCKET/ds2/denied.bin: read: HTTP 403 forbidden: anonymous caller does not have storage.objects.get access" "$LAST_LOG"
	check "a body that is not its x-goog-hash crc32c reads as EIO" bash -c \
		"! cat '$M/rank-0/badcrc.bin' >/dev/null 2>&1"
	check "the crc32c mismatch is logged with the key, retried" \
		grep -qE "gs://$BUCKET/ds2/badcrc.bin.*3 tries.*crc32c [0-9a-f]{8} is not x-goog-hash's" "$LAST_LOG"
	check "a 206 naming another range reads as EIO" bash -c \
		"! cat '$M/rank-0/badrange.bin' >/dev/null 2>&1"
	check "the wrong Content-Range is logged with the key" \
		grep -q "gs://$BUCKET/ds2/badrange.bin.*Content-Range bytes 1-" "$LAST_LOG"
	# eio NAME: reading NAME fails with EIO (no bytes, wrong or right).
	eio() { ! cat "$M/rank-0/$1" >/dev/null 2>"$T/eio.err" && grep -q 'Input/output error' "$T/eio.err"; }
	check "an object stored gzip-encoded (GCS transcodes it unless asked for gzip) reads byte-identical" \
		cmp -s "$M/rank-0/gzipped.bin" "$F/gzipped.bin"
	check "gzip-encoded: unaligned ranged reads are exact" bash -c \
		"dd if='$M/rank-0/gzipped.bin' bs=4097 skip=123 count=77 status=none | cmp -s - <(dd if='$F/gzipped.bin' bs=4097 skip=123 count=77 status=none)"
	check "gzip-encoded: served as stored, with Range (206s, no transcoded 200)" bash -c \
		"grep -q 'ds2%2Fgzipped.bin?.* -> 206' '$FP_LOG' && ! grep -q 'ds2%2Fgzipped.bin?.* -> 200' '$FP_LOG'"
	check "a 200 without Content-Length reads as EIO" eio nolength.bin
	check "the 200 without Content-Length is logged with the key, retried" \
		grep -qE "gs://$BUCKET/ds2/nolength.bin.*3 tries.*200 of -1 bytes" "$LAST_LOG"
	check "a 206 body one byte longer than its range reads as EIO" eio longbody.bin
	check "the long 206 is logged with the key, retried" \
		grep -qE "gs://$BUCKET/ds2/longbody.bin.*3 tries.* body bytes for a range of" "$LAST_LOG"
	check "a 206 body one byte shorter than its range reads as EIO" eio shortbody.bin
	check "the short 206 is logged with the key, retried" \
		grep -qE "gs://$BUCKET/ds2/shortbody.bin.*3 tries.* bytes in the reply" "$LAST_LOG"
	check "a pinned read whose reply has no x-goog-generation reads as EIO" eio nogen.bin
	check "the missing x-goog-generation is logged with the key, retried" \
		grep -qE "gs://$BUCKET/ds2/nogen.bin.*3 tries.*no x-goog-generation" "$LAST_LOG"
	check "two x-goog-generation headers that disagree read as EIO (the last does not win)" eio dupgen.bin
	check "the conflict is a bad reply: retried, logged with the key, not taken for a change" \
		bash -c "grep -qE 'gs://$BUCKET/ds2/dupgen.bin.*3 tries.*given twice with different values' '$LAST_LOG' && ! grep -q 'dupgen.bin: changed since' '$LAST_LOG'"
	check "other objects read through the proxy" cmp -s "$M/rank-0/ok.bin" "$F/ok.bin"
	check "unmount" umount_shardfs "$M"
else
	fail "mount through the fault proxy"
fi

# --- a second, well-formed reply after the real one -----------------------------
# Every media reply for extra.bin is followed by a complete copy of it with
# a body of zeros (gcs/fault_proxy.py), in the same write, right after it
# or 5 ms later. Four readers read each 1 MiB range twice, in four passes
# of disjoint ranges (strayreaders.py says why) (O_DIRECT, cache
# off: each read is a ranged GET), the second time once the stray reply of
# the first is sent (strayreaders.py), so it is on its connection and
# names the range asked for: that connection must never be reused.
mkdir -p "$T/extra"
head -c $((16 << 20)) /dev/urandom >"$T/extra/extra.bin"
upload_tree ds3/ "$T/extra" || fail "upload ds3/"
STORAGE_EMULATOR_HOST=$EMU "$SHARDFS" manifest "gs://$BUCKET/ds3/" -o "$T/ds3.tsv" >/dev/null 2>&1
cat >"$C" <<EOF
[source]
url = gs://$BUCKET/ds3/
manifest = $T/ds3.tsv
endpoint = $FEP
anonymous = true
[shard]
world_size = 1
[cache]
enabled = false
[prefetch]
files = 0
EOF
if mount_shardfs "$C" "$M"; then
	out=$(/usr/bin/python3 "$HERE/strayreaders.py" "$M/rank-0/extra.bin" \
		"$T/extra/extra.bin" 4 $((1 << 20)) "$FEP/__strays" 2>"$T/extra.err")
	echo "# stray replies: $out"
	check "a stray reply after every media reply is never read as the next answer ($out)" \
		test "$out" = "reads 128 wrong 0 errors 0"
	check "the stray bytes are logged as such" grep -q "answers twice" "$LAST_LOG"
	check "unmount" umount_shardfs "$M"
else
	fail "mount for the stray replies"
fi

# --- one read() against a silent server ends within read_timeout_ms -------------
# Media requests for stall*.bin are never answered (gcs/fault_proxy.py).
# After the failed read-ahead the kernel asks again for its first page,
# which fails at once (cache/fetch_fail.h) instead of waiting out a second
# deadline. One 64 KiB read() of each of four files, cache off and on,
# read_timeout_ms = 1500: each EIO within 1.6 x read_timeout_ms.
mkdir -p "$T/stall"
for i in 0 1 2 3; do head -c 100000 /dev/urandom >"$T/stall/stall$i.bin"; done
upload_tree ds4/ "$T/stall" || fail "upload ds4/"
STORAGE_EMULATOR_HOST=$EMU "$SHARDFS" manifest "gs://$BUCKET/ds4/" -o "$T/ds4.tsv" >/dev/null 2>&1
for cache in off on; do
	cat >"$C" <<EOF
[source]
url = gs://$BUCKET/ds4/
manifest = $T/ds4.tsv
endpoint = $FEP
anonymous = true
connect_timeout_ms = 1000
request_timeout_ms = 1000
read_timeout_ms = 1500
[shard]
world_size = 1
[cache]
enabled = $([ $cache = on ] && echo true || echo false)
dir = $T/cache-stall-$cache
EOF
	if mount_shardfs "$C" "$M"; then
		out=$(timeout 120 /usr/bin/python3 "$HERE/timedread.py" "$M"/rank-0/stall[0-3].bin)
		echo "# silent server, cache $cache: one read() each: $(echo $out)"
		check "read bound (cache $cache): every read() fails with EIO" \
			test "$(echo "$out" | grep -c '^eio ')" -eq 4
		check "read bound (cache $cache): each within 1.6 x read_timeout_ms (2400 ms)" \
			test "$(echo "$out" | awk '$2 >= 2400' | wc -l)" -eq 0
		check "read bound (cache $cache): the reads that failed at once are logged" \
			grep -q "failed .* ms ago" "$LAST_LOG"
		check "unmount" umount_shardfs "$M"
	else
		fail "read bound (cache $cache): mount"
	fi
done

# --- the cache and the prefetcher over gs:// ----------------------------------
# Through the proxy (no faults for these names), whose log shows every
# request the emulator answered.
media_gets() { grep -c "^GET /storage/v1/b/$BUCKET/o/ds%2F[^ ]*alt=media" "$FP_LOG"; }
# enc_key KEY: a manifest key (escaped as in the .order files) as it
# appears, fully percent-encoded, in a request path.
enc_key() { /usr/bin/python3 -c 'import sys, urllib.parse as u; print(u.quote(u.unquote(sys.argv[1]), safe="-._~"))' "$1"; }
# The objects as they are now (one was replaced above, with its old bytes).
STORAGE_EMULATOR_HOST=$EMU "$SHARDFS" manifest "gs://$BUCKET/ds/" -o "$T/now.tsv" >/dev/null 2>&1
cconf() { # cconf CACHEDIR [prefetch.files=N]
	{
		echo "[source]"
		echo "url = gs://$BUCKET/ds/"
		echo "manifest = $T/now.tsv"
		echo "endpoint = $FEP"
		echo "anonymous = true"
		echo "[shard]"
		echo "world_size = 1"
		echo "[cache]"
		echo "dir = $1"
		echo "size = 1G"
		echo "[prefetch]"
		echo "files = ${2:-0}"
	} >"$C"
}
cconf "$T/cache-gs"
if mount_shardfs "$C" "$M"; then
	: >"$FP_LOG"
	check "cold: every file byte-identical through the cache" \
		/usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC"
	cold=$(media_gets)
	check "cold: the reads went to the store ($cold GETs)" test "$cold" -gt 0
	check "unmount" umount_shardfs "$M"
fi
cconf "$T/cache-gs"
if mount_shardfs "$C" "$M"; then
	: >"$FP_LOG"
	check "remount: every file byte-identical" \
		/usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC"
	check "remount: all from the disk cache, zero GETs ($(media_gets))" test "$(media_gets)" -eq 0
	check "unmount" umount_shardfs "$M"
fi
cconf "$T/cache-gs-prefetch" 8
if mount_shardfs "$C" "$M"; then
	mapfile -t ORDER <"$M/.shardfs/rank-0.order"
	: >"$FP_LOG"
	ahead_fetched() { # a file after position $1, not yet opened, was fetched
		local q
		for q in $(seq $(($1 + 1)) $(($1 + 3))); do
			[ "$q" -lt "${#ORDER[@]}" ] || continue
			grep -qF "GET /storage/v1/b/$BUCKET/o/ds%2F$(enc_key "${ORDER[$q]}")?" "$FP_LOG" && return 0
		done
		return 1
	}
	wait_for() { # wait_for SECONDS CMD...: polls CMD until it succeeds or the bound passes
		local n=$(($1 * 10)); shift
		while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.1; n=$((n - 1)); done
		"$@"
	}
	seen_ahead=0
	for p in 0 1 2; do
		cat "$M/rank-0/$(/usr/bin/python3 -c 'import sys, urllib.parse as u; print(u.unquote(sys.argv[1]))' "${ORDER[$p]}")" >/dev/null
		wait_for 10 ahead_fetched "$p" && seen_ahead=$((seen_ahead + 1))
	done
	check "prefetch: after opening file p, files p+1.. came from gs:// before they were opened ($seen_ahead of 3)" \
		test "$seen_ahead" -eq 3
	check "prefetch: every file byte-identical" \
		/usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC"
	check "unmount" umount_shardfs "$M"
fi

finish
