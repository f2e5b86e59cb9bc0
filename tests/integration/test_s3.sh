#!/usr/bin/env bash
# The S3 backend against a real S3-compatible server (s3rver, pinned, on
# 127.0.0.1): listings and manifests (several pages, odd keys), the rank
# views of the foundation checked as for posix (union, disjoint,
# byte-identical, listing = plan = reference implementation), pinned
# manifests stored in S3, error mapping and logging, path and
# virtual-hosted addressing, anonymous requests, the credential chain
# against small local endpoints that answer as IMDSv2, container
# credentials and STS (with refresh), and a server killed or frozen
# mid-read: EIO within a bound, then data again once it is back.
SUITE=s3
. "$(dirname "$0")/lib.sh"
. "$HERE/s3/s3rver.sh"

# Nothing from the machine's own AWS setup may leak in, and no test may
# ever reach a real metadata service: each credential test names its own
# local endpoint.
for v in $(env | sed -n 's/^\(AWS_[A-Z_0-9]*\)=.*/\1/p'); do unset "$v"; done
export AWS_EC2_METADATA_DISABLED=true
export AWS_SHARED_CREDENTIALS_FILE=$T/no-credentials-file
export AWS_CONFIG_FILE=$T/aws-config
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export AWS_DEFAULT_REGION=us-east-1
printf '[default]\ns3 =\n  max_concurrent_requests = 16\n' >"$AWS_CONFIG_FILE"

BUCKET=bkt
if ! command -v node >/dev/null || ! s3rver_install; then
	fail "s3rver install (npm ci)"
	finish
fi
if ! s3rver_start "$T/s3data" "$BUCKET"; then
	fail "s3rver start"
	finish
fi
EP=$S3_EP
aws_s3() { /usr/bin/aws --endpoint-url "$EP" s3 "$@" --only-show-errors; }

# --- data -----------------------------------------------------------------
SRC=$T/src
make_dataset "$SRC" 200
mkdir -p "$SRC/odd dir"
printf 'space' >"$SRC/odd dir/sp ace.bin"
printf 'unicode' >"$SRC/odd dir/ünï cødé.bin"
printf 'plus' >"$SRC/odd dir/a+b.bin"
printf 'percent' >"$SRC/odd dir/100%.txt"
printf 'equals' >"$SRC/odd dir/k=v&x.bin"
printf 'mix' >"$SRC/odd dir/%2F+ =~é.bin"
head -c 3000000 /dev/urandom >"$SRC/odd dir/big.bin"
check "upload the dataset with awscli" aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/"

# --- manifests -------------------------------------------------------------
"$SHARDFS" manifest "$SRC" -o "$T/posix.tsv" >/dev/null 2>&1
"$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$EP" -o "$T/s3.tsv" \
	>"$T/s3.out" 2>"$T/s3.err"
check "manifest s3:// exits 0" test $? -eq 0
check "s3:// manifest has the source's keys and sizes" bash -c \
	"cmp -s <(tail -n +2 '$T/posix.tsv' | cut -f1,2) <(tail -n +2 '$T/s3.tsv' | cut -f1,2)"
check "s3:// manifest carries S3 ETags" bash -c \
	"! tail -n +2 '$T/s3.tsv' | cut -f3 | grep -qvE '^\"[0-9a-f]{32}\"\$'"
check "odd keys are listed decoded (space, unicode, +, %, =)" bash -c \
	"grep -qF 'odd dir/sp ace.bin' '$T/s3.tsv' && grep -qF 'odd dir/ünï cødé.bin' '$T/s3.tsv' && grep -qF 'odd dir/a+b.bin' '$T/s3.tsv' && grep -qF 'odd dir/100%25.txt' '$T/s3.tsv' && grep -qF 'odd dir/%252F+ =~é.bin' '$T/s3.tsv'"
check "manifest to stdout equals -o FILE" bash -c \
	"'$SHARDFS' manifest s3://$BUCKET/ds --endpoint '$EP' 2>/dev/null | cmp -s - '$T/s3.tsv'"
AWS_ENDPOINT_URL=$EP "$SHARDFS" manifest "s3://$BUCKET/ds/" -o "$T/env.tsv" >/dev/null 2>&1
check "AWS_ENDPOINT_URL is used when no endpoint is given" cmp -s "$T/env.tsv" "$T/s3.tsv"
"$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "http://s3.localhost:$S3_PORT" \
	--addressing virtual -o "$T/virt.tsv" >/dev/null 2>"$T/virt.err"
check "virtual-hosted addressing lists the same" cmp -s "$T/virt.tsv" "$T/s3.tsv"
"$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$EP" --anonymous \
	-o "$T/anon.tsv" >/dev/null 2>"$T/anon.err"
check "anonymous (unsigned) requests work on a public bucket" bash -c \
	"cmp -s '$T/anon.tsv' '$T/s3.tsv' && ! grep -q 'credentials from' '$T/anon.err'"
"$SHARDFS" manifest "s3://My_Bucket/ds/" --endpoint "$EP" >/dev/null 2>"$T/badbkt.err"
rc=$?
check "a bucket name AWS refuses fails at once (exit 2), naming the bucket and the rule" bash -c \
	"test $rc -eq 2 && grep -q \"source url 's3://My_Bucket/ds/': bucket 'My_Bucket' may hold only lowercase letters, digits\" '$T/badbkt.err'"
"$SHARDFS" manifest "s3://$BUCKET/ds/odd dir/" --endpoint "$EP" -o "$T/sub.tsv" >/dev/null 2>&1
check "a prefix with a space lists only its keys, relative to it" test \
	"$(tail -n +2 "$T/sub.tsv" | cut -f1 | LC_ALL=C sort | tr '\n' '|')" = \
	"$(cd "$SRC/odd dir" && ls | sed 's/%/%25/g' | LC_ALL=C sort | tr '\n' '|')"

# More than 1,000 keys: several ListObjectsV2 pages.
MANY=$T/many
mkdir -p "$MANY"
/usr/bin/python3 - "$MANY" <<'PY'
import os, sys
for i in range(2345):
    with open(os.path.join(sys.argv[1], "k%05d.bin" % i), "wb") as f:
        f.write(b"x" * (i % 7))
PY
aws_s3 cp --recursive "$MANY" "s3://$BUCKET/many/"
"$SHARDFS" manifest "s3://$BUCKET/many/" --endpoint "$EP" -o "$T/many.tsv" >"$T/many.out" 2>&1
check "2,345 keys over 3 pages: all listed once" bash -c \
	"grep -q '^objects 2345\$' '$T/many.out' && test \"\$(tail -n +2 '$T/many.tsv' | cut -f1 | tr '\n' ' ')\" = \"\$(cd '$MANY' && ls | LC_ALL=C sort | tr '\n' ' ')\""

# --- mounts: the foundation's properties over s3:// --------------------------
conf() { # conf FILE [section.key=value...]
	local f=$1; shift
	{
		echo "[source]"
		echo "url = s3://$BUCKET/ds/"
		echo "endpoint = $EP"
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
for c in "4 shuffle strided pad 0 0" "3 none contiguous none 0 0" "4 shuffle bytes none 5 1"; do
	read -r W ORDER LAYOUT BALANCE SEED EPOCH <<<"$c"
	name="s3 W=$W $ORDER $LAYOUT $BALANCE seed=$SEED epoch=$EPOCH"
	conf "$C" world_size=$W order=$ORDER layout=$LAYOUT balance=$BALANCE \
		seed=$SEED epoch=$EPOCH
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
	check "$name: manifest.tsv = shardfs manifest s3://" cmp -s "$M/.shardfs/manifest.tsv" "$T/s3.tsv"
	check "$name: clean unmount" umount_shardfs "$M"
done

conf "$C" world_size=2
mount_shardfs "$C" "$M" || fail "mount for reads"
check "odd names read back byte-identical" bash -c \
	"for f in '$SRC/odd dir/'*; do b=\$(basename \"\$f\"); g=\$(ls -d '$M'/rank-*/'odd dir'/\"\$b\" 2>/dev/null); [ -n \"\$g\" ] && cmp -s \"\$f\" \"\$g\" || exit 1; done"
check "8 parallel readers get identical bytes" bash -c \
	"cd '$M' && find rank-* -type f -print0 | xargs -0 -P 8 -n 16 sh -c 'for f; do cmp -s \"\$f\" \"$SRC/\${f#rank-*/}\" || exit 1; done' _"
big=$(cd "$M" && ls -d rank-*/"odd dir"/big.bin)
check "unaligned ranged reads (dd skip/count) are exact" bash -c \
	"dd if='$M/$big' bs=4097 skip=123 count=77 status=none | cmp -s - <(dd if='$SRC/odd dir/big.bin' bs=4097 skip=123 count=77 status=none)"
check "files carry the object's last-modified time" bash -c \
	"t=\$(stat -c %Y '$M/$big'); now=\$(date +%s); [ \$t -gt \$((now - 600)) ] && [ \$t -le \$((now + 5)) ]"
check "unmount" umount_shardfs "$M"

# --- a pinned manifest stored in S3 ----------------------------------------
digest=$(awk '$1 == "sha256" {print $2}' "$T/s3.out")
aws_s3 cp "$T/s3.tsv" "s3://$BUCKET/pins/ds v1.tsv"
conf "$C" world_size=3 "source.manifest=s3://$BUCKET/pins/ds v1.tsv" \
	"source.manifest_sha256=$digest"
"$SHARDFS" plan "$C" >"$T/pplan" 2>"$T/pplan.err"
check "plan loads a manifest from s3:// and checks its pin" \
	grep -q "^manifest_sha256 $digest\$" "$T/pplan"
if mount_shardfs "$C" "$M"; then
	check "mount from an s3:// manifest verifies" \
		/usr/bin/python3 "$HERE/verify_mount.py" "$M" "$SRC"
	check "unmount" umount_shardfs "$M"
else
	fail "mount from an s3:// manifest"
fi
conf "$C" world_size=3 "source.manifest=s3://$BUCKET/pins/missing.tsv"
"$SHARDFS" plan "$C" >/dev/null 2>"$T/err"
check "a missing s3:// manifest fails and names it" bash -c \
	"test $? -ne 0 && grep -q 'pins/missing.tsv' '$T/err'"

# --- errors: mapped and logged once, never with a secret ---------------------
{
	head -1 "$T/s3.tsv"
	tail -n +2 "$T/s3.tsv"
	printf 'zz-ghost.bin\t5\t"00000000000000000000000000000000"\t0\n'
} >"$T/ghost.tsv"
conf "$C" world_size=1 "source.manifest=$T/ghost.tsv"
mount_shardfs "$C" "$M" -v || fail "mount with a ghost key"
cat "$M/rank-0/zz-ghost.bin" >/dev/null 2>"$T/ghost.err"
# The backend maps NoSuchKey to ENOENT; the filesystem shows every store
# fault to readers as EIO.
check "a key missing from the bucket reads as EIO" grep -q 'Input/output error' "$T/ghost.err"
errors=$(awk '$1 == "shardfs_read_errors_total" {print $2}' "$M/.shardfs/stats")
# The kernel reads the file's first page again after a failed
# read-ahead: one failure, one log line, however many failed reads.
check "NoSuchKey is logged with key, status and code, once ($errors failed reads)" test \
	"$(grep -c "s3://$BUCKET/ds/zz-ghost.bin: read: HTTP 404 NoSuchKey" "$LAST_LOG")" -eq 1 -a "${errors:-0}" -ge 1
check "unmount" umount_shardfs "$M"

# An object replaced after the manifest was made: s3rver ignores If-Match,
# so this exercises shardfs' own check of the answer's ETag.
conf "$C" world_size=1
# A fresh cache: the first read of the victim goes to the server.
mount_shardfs "$C" "$M" -o "cache.dir=$T/cache-change" || fail "mount for a changed object"
victim="train/n00000003/000003.JPEG"
printf 'new content' | aws_s3 cp - "s3://$BUCKET/ds/$victim"
check "an object changed since the manifest reads as EIO, not new bytes" bash -c \
	"! cat '$M/rank-0/$victim' >/dev/null 2>'$T/stale.err' && grep -q 'Input/output error' '$T/stale.err'"
check "the change is logged with the key and both ETags" \
	grep -q "s3://$BUCKET/ds/$victim: changed since the manifest was made (etag \"" "$LAST_LOG"
aws_s3 cp "$SRC/$victim" "s3://$BUCKET/ds/$victim"
check "the original object (same ETag) reads again" cmp -s "$M/rank-0/$victim" "$SRC/$victim"
check "unmount" umount_shardfs "$M"

SECRET=never-log-this-secret-$RANDOM$RANDOM
AWS_ACCESS_KEY_ID=WRONGKEY AWS_SECRET_ACCESS_KEY=$SECRET \
	"$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$EP" >/dev/null 2>"$T/denied.err"
check "a rejected key id exits 1" test $? -eq 1
check "AccessDenied-type errors are logged with status and code" \
	grep -q "s3://$BUCKET/ds/: list: HTTP 403 InvalidAccessKeyId" "$T/denied.err"
"$SHARDFS" manifest "s3://no-such-bucket/x/" --endpoint "$EP" >/dev/null 2>"$T/nob.err"
check "a missing bucket exits 1 with NoSuchBucket" bash -c \
	"test $? -eq 1 && grep -q 'HTTP 404 NoSuchBucket' '$T/nob.err'"
conf "$C" world_size=1
AWS_SECRET_ACCESS_KEY=$SECRET mount_shardfs "$C" "$M" -v || fail "debug mount"
cat "$M/rank-0/odd dir"/* >/dev/null
check "unmount" umount_shardfs "$M"
check "no secret and no signature in any log, even at debug level" bash -c \
	"! grep -l -e '$SECRET' -e 'Signature=' -e 'X-Amz-Signature' '$T'/*.err '$LAST_LOG'"

# --- the credential chain, against local endpoints ----------------------------
CS_LOG=$T/creds.log
/usr/bin/python3 "$HERE/s3/creds_server.py" "$T/creds.port" "$CS_LOG" \
	--key-id S3RVER --lifetime 6 --container-token "Bearer ctok" \
	--web-token "jwt.header.payload" --role-arn "arn:aws:iam::1:role/shardfs" &
PIDS+=("$!")
for _ in $(seq 50); do [ -s "$T/creds.port" ] && break; sleep 0.1; done
CP=$(cat "$T/creds.port" 2>/dev/null)
printf 'Bearer ctok\n' >"$T/ctok"
printf 'jwt.header.payload\n' >"$T/jwt"
printf '[default]\naws_access_key_id = NOTTHIS\naws_secret_access_key = x\n[test]\naws_access_key_id = S3RVER\naws_secret_access_key = from-profile\n' >"$T/credentials"

# chain NAME ENV...: runs `shardfs manifest` with only the given AWS
# variables; leaves the log in $T/chain.err and the exit status in $rc.
chain() {
	: >"$CS_LOG"
	env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_EC2_METADATA_DISABLED \
		AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1 "$@" \
		"$SHARDFS" manifest "s3://$BUCKET/ds/" --endpoint "$EP" -o "$T/chain.tsv" \
		>/dev/null 2>"$T/chain.err"
	rc=$?
}
chain AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$CP
# The credentials live 6 s: a listing slowed by a loaded machine may
# refresh them, which repeats the sequence after the first one.
check "IMDSv2: token PUT, role, credentials, then the listing" bash -c \
	"test $rc -eq 0 && cmp -s <(cut -f1-3 '$T/chain.tsv') <(cut -f1-3 '$T/s3.tsv') && grep -q 'from EC2 instance metadata' '$T/chain.err' && \
	 [[ \"\$(cut -d' ' -f1,2 '$CS_LOG' | tr '\n' '|')\" == 'PUT /latest/api/token|GET /latest/meta-data/iam/security-credentials/|GET /latest/meta-data/iam/security-credentials/shardfs-test-role|'* ]]"
chain AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$CP/container/creds \
	AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=$T/ctok \
	AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:$CP
check "container credentials (full URI + token file) come before IMDS" bash -c \
	"test $rc -eq 0 && grep -q 'from container credentials' '$T/chain.err' && test \"\$(cut -d' ' -f1,2,4 '$CS_LOG')\" = 'GET /container/creds 200'"
chain AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$CP/container/creds \
	AWS_CONTAINER_AUTHORIZATION_TOKEN="Bearer wrong"
check "container credentials with a wrong token fail (exit 1)" test "$rc" -eq 1
chain AWS_WEB_IDENTITY_TOKEN_FILE=$T/jwt AWS_ROLE_ARN=arn:aws:iam::1:role/shardfs \
	AWS_ROLE_SESSION_NAME=sess1 AWS_ENDPOINT_URL_STS=http://127.0.0.1:$CP/sts/ \
	AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$CP/container/creds
check "web identity through STS comes before container credentials" bash -c \
	"test $rc -eq 0 && grep -q 'from web identity' '$T/chain.err' && grep -q '^POST /sts/ -> 200 issued [0-9]* session=sess1' '$CS_LOG' && ! grep -q container '$CS_LOG'"
chain AWS_SHARED_CREDENTIALS_FILE=$T/credentials AWS_PROFILE=test \
	AWS_WEB_IDENTITY_TOKEN_FILE=$T/jwt AWS_ROLE_ARN=arn:aws:iam::1:role/shardfs \
	AWS_ENDPOINT_URL_STS=http://127.0.0.1:$CP/sts/
check "AWS_PROFILE in the shared credentials file comes before web identity" bash -c \
	"test $rc -eq 0 && grep -q 'from shared credentials file' '$T/chain.err' && test ! -s '$CS_LOG'"
chain AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=x AWS_SHARED_CREDENTIALS_FILE=$T/credentials \
	AWS_PROFILE=test AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$CP/container/creds
check "environment variables come first" bash -c \
	"test $rc -eq 0 && grep -q 'from environment' '$T/chain.err' && test ! -s '$CS_LOG'"
chain AWS_SHARED_CREDENTIALS_FILE=$T/credentials AWS_PROFILE=nosuch
check "a missing AWS_PROFILE is an error, not a fall-through" bash -c \
	"test $rc -eq 1 && grep -q 'AWS_PROFILE=nosuch: no such profile in $T/credentials' '$T/chain.err'"
chain AWS_SHARED_CREDENTIALS_FILE=$T/no-such-file AWS_PROFILE=nosuch
check "AWS_PROFILE without a credentials file: the error says the file does not exist" bash -c \
	"test $rc -eq 1 && grep -q 'AWS_PROFILE=nosuch: no credentials file to look in ($T/no-such-file does not exist)' '$T/chain.err'"
chain AWS_EC2_METADATA_DISABLED=true
check "no credentials anywhere: exit 1 with advice" bash -c \
	"test $rc -eq 1 && grep -q 'no AWS credentials' '$T/chain.err'"

# Temporary credentials (6 s lifetime here) are refreshed ahead of expiry
# while the mount keeps serving.
: >"$CS_LOG"
conf "$C" world_size=1
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
export AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:$CP/container/creds
export AWS_CONTAINER_AUTHORIZATION_TOKEN="Bearer ctok"
if mount_shardfs "$C" "$M"; then
	sleep 8
	# 8 s idle is also past s3rver's 5 s keep-alive: the pooled
	# connections it closed must not fail these reads.
	check "reads work across credential refreshes and idle-closed connections" bash -c \
		"cd '$M' && find rank-0 -type f | head -50 | while read -r f; do cmp -s \"\$f\" \"$SRC/\${f#rank-0/}\" || exit 1; done"
	check "credentials were refreshed before they expired" bash -c \
		"test \$(grep -c 'container/creds -> 200' '$CS_LOG') -ge 3 && grep -q 'credentials refreshed from container' '$LAST_LOG'"
	check "unmount" umount_shardfs "$M"
else
	fail "mount with container credentials"
fi
unset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER

# --- retries: 5xx, 429 and SlowDown, through a fault-injecting proxy -----
FP_LOG=$T/proxy.log
mkdir -p "$T/faults"
printf 'flaky bytes' >"$T/faults/flaky.bin"
printf 'busy bytes' >"$T/faults/busy.bin"
printf 'broken bytes' >"$T/faults/broken.bin"
printf 'fine' >"$T/faults/fine.bin"
aws_s3 cp --recursive "$T/faults" "s3://$BUCKET/faults/"
/usr/bin/python3 "$HERE/s3/fault_proxy.py" "$T/proxy.port" "$FP_LOG" "$S3_PORT" &
PIDS+=("$!")
for _ in $(seq 50); do [ -s "$T/proxy.port" ] && break; sleep 0.1; done
PX=http://127.0.0.1:$(cat "$T/proxy.port" 2>/dev/null)
"$SHARDFS" manifest "s3://$BUCKET/faults/" --endpoint "$PX" -o "$T/faults.tsv" >/dev/null 2>"$T/faults.err"
check "a listing answered 503 SlowDown is retried and completes" bash -c \
	"test \$(tail -n +2 '$T/faults.tsv' | wc -l) -eq 4 && test \$(grep -c 'list-type=2.* -> 503' '$FP_LOG') -eq 1 && test \$(grep -c 'list-type=2.* -> 200' '$FP_LOG') -eq 1"
cat >"$C" <<EOF
[source]
url = s3://$BUCKET/faults/
endpoint = $PX
retries = 3
manifest = $T/faults.tsv
[shard]
world_size = 1
[cache]
enabled = false
EOF
if mount_shardfs "$C" "$M"; then
	check "503 SlowDown twice, then the read succeeds" cmp -s "$M/rank-0/flaky.bin" "$T/faults/flaky.bin"
	check "429 once, then the read succeeds" cmp -s "$M/rank-0/busy.bin" "$T/faults/busy.bin"
	cat "$M/rank-0/broken.bin" >/dev/null 2>"$T/broken.err"
	check "a persistent 500 gives EIO once the retries are spent" grep -q 'Input/output error' "$T/broken.err"
	# The kernel's re-read of the page right after fails at once, without
	# a request (cache/fetch_fail.h), not after another round of retries
	# (one more request only if it came more than FETCH_FAIL_WINDOW_MS
	# later).
	check "the failed read made 1 + retries tries (not another round for the kernel's re-read) and was logged once, with status and code" bash -c \
		"test \$(grep -c 'broken.bin: read: HTTP 500 InternalError: We encountered an internal error. (after 4 tries)' '$LAST_LOG') -eq 1 && g=\$(grep -c 'GET /$BUCKET/faults/broken.bin -> 500' '$FP_LOG') && test \$g -ge 4 -a \$g -le 5"
	check "unmount" umount_shardfs "$M"
else
	fail "mount through the fault proxy"
fi

# --- the server dies or freezes mid-read ----------------------------------------
head -c $((48 << 20)) /dev/urandom >"$T/blob.bin"
aws_s3 cp "$T/blob.bin" "s3://$BUCKET/fault/blob.bin"
cat >"$C" <<EOF
[source]
url = s3://$BUCKET/fault/
endpoint = $EP
connect_timeout_ms = 1000
request_timeout_ms = 2000
retries = 2
[shard]
world_size = 1
[cache]
enabled = false
EOF
# reader FILE GO_FILE: reads 4 MiB, says so, waits for GO_FILE, then reads
# on; prints "EIO <seconds since GO>" or "OK".
reader() {
	/usr/bin/python3 - "$1" "$2" "$T/reader.ready" <<'PY'
import errno, os, sys, time
path, go, ready = sys.argv[1:4]
fd = os.open(path, os.O_RDONLY)
os.read(fd, 4 << 20)
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
t0 = time.monotonic()
try:
    while os.read(fd, 1 << 20):
        pass
    print("OK")
except OSError as e:
    print("%s %.1f" % (errno.errorcode[e.errno], time.monotonic() - t0))
PY
}
fault_round() { # fault_round NAME ACTION UNDO
	local name=$1 action=$2 undo=$3
	rm -f "$T/go" "$T/reader.ready"
	mount_shardfs "$C" "$M" || { fail "$name: mount"; return; }
	reader "$M/rank-0/blob.bin" "$T/go" >"$T/reader.out" &
	local rpid=$!
	for _ in $(seq 100); do [ -e "$T/reader.ready" ] && break; sleep 0.1; done
	$action
	touch "$T/go"
	wait "$rpid"
	read -r what secs <"$T/reader.out"
	check "$name: the read fails with EIO within 30 s, not a hang (took ${secs:-?} s)" \
		bash -c "test '$what' = EIO && awk 'BEGIN {exit !($secs < 30)}'"
	$undo
	# A range whose read just failed after a wait fails at once for
	# FETCH_FAIL_WINDOW_MS (2 s, cache/fetch_fail.h); the server is
	# asked again after that.
	sleep 2.5
	check "$name: reads succeed again once the server is back" \
		cmp -s "$M/rank-0/blob.bin" "$T/blob.bin"
	check "$name: unmount" umount_shardfs "$M"
}
s3_restart() { s3rver_start "$T/s3data" "$BUCKET" "$S3_PORT" >/dev/null; }
s3_stop() { kill -STOP "$S3_PID"; }
s3_cont() { kill -CONT "$S3_PID"; }
fault_round "server killed" s3rver_kill s3_restart
fault_round "server frozen (SIGSTOP)" s3_stop s3_cont

finish
