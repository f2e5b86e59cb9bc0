#!/usr/bin/env bash
# The GCS credential chain (Application Default Credentials) against real
# local servers on 127.0.0.1: the GCS emulator behind a proxy that records
# the Authorization header (the emulator ignores it), a fake OAuth token
# endpoint that verifies the service account's RS256 JWT with the public
# half of a key made here and answers refresh-token grants, and a fake
# metadata server that requires Metadata-Flavor: Google. Covered: the
# chain's order (GOOGLE_APPLICATION_CREDENTIALS, then gcloud's ADC file,
# then the metadata server), a broken named file is an error and not a
# fall-through, nothing configured is a clear error; a mount's token is
# refreshed while it serves (short-lived tokens) and the backend sends the
# current token; no secret in any log at debug level.
SUITE=gcs_creds
. "$(dirname "$0")/lib.sh"
. "$HERE/gcs/gcs_emulator.sh"

# Nothing from the machine's own Google setup may leak in, and no test may
# ever reach a real metadata server: every run names its own
# GCE_METADATA_HOST on 127.0.0.1 (port 1 is closed).
for v in $(env | sed -n 's/^\(GOOGLE_[A-Z_0-9]*\|CLOUDSDK_[A-Z_0-9]*\|GCE_METADATA_[A-Z_0-9]*\)=.*/\1/p'); do
	unset "$v"
done
unset STORAGE_EMULATOR_HOST
export GCE_METADATA_HOST=127.0.0.1:1
BUCKET=bkt
PY=/usr/bin/python3
EMAIL=sa-reader@shardfs-test.iam.gserviceaccount.com
REFRESH=1//refresh-$RANDOM$RANDOM$RANDOM
CSECRET=client-secret-$RANDOM$RANDOM$RANDOM
LIFE=6 # seconds: tokens are refreshed every 3 s during a mount

if ! $PY -c 'import jwt, cryptography' 2>/dev/null; then
	fail "python3-jwt and python3-cryptography are installed (scripts/install-deps.sh)"
	finish
fi
if ! command -v node >/dev/null || ! gcs_install; then
	fail "gcs emulator install (npm ci)"
	finish
fi
if ! gcs_start "$T/gcsdata"; then
	fail "gcs emulator start"
	finish
fi

# start_py NAME SCRIPT ARGS...: a helper server; sets PORT.
start_py() {
	local name=$1 script=$2
	shift 2
	$PY "$HERE/gcs/$script" --port-file "$T/$name.port" --log "$T/$name.log" "$@" 2>"$T/$name.stderr" &
	PIDS+=("$!")
	for _ in $(seq 100); do [ -s "$T/$name.port" ] && break; sleep 0.1; done
	PORT=$(cat "$T/$name.port" 2>/dev/null)
	[ -n "$PORT" ]
}

# --- keys and credential files -------------------------------------------
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/sa-key.pem" 2>/dev/null
openssl pkey -in "$T/sa-key.pem" -pubout -out "$T/sa-pub.pem"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/other-key.pem" 2>/dev/null
start_py token token_server.py --public-key "$T/sa-pub.pem" --email "$EMAIL" \
	--kid kid-test-1 --client-id cid.apps.googleusercontent.com \
	--client-secret "$CSECRET" --refresh-token "$REFRESH" --expires-in "$LIFE" \
	--fail-file "$T/token-outage" --hang-file "$T/token-hang" ||
	{ fail "token server start"; finish; }
TOKEN_URI=http://127.0.0.1:$PORT/token
start_py md metadata_server.py --expires-in "$LIFE" || { fail "metadata server start"; finish; }
MD=127.0.0.1:$PORT
start_py proxy auth_proxy.py --upstream "127.0.0.1:$GCS_PORT" || { fail "proxy start"; finish; }
PX=http://127.0.0.1:$PORT

# key_file OUT TYPE [PEM]: a credential file as gcloud writes them.
key_file() {
	$PY - "$@" "$EMAIL" "$TOKEN_URI" "$REFRESH" "$CSECRET" <<'PY'
import json, sys
out, kind = sys.argv[1], sys.argv[2]
pem, email, uri, refresh, secret = sys.argv[3:8]
if kind == "service_account":
    doc = {"type": kind, "project_id": "shardfs-test",
           "private_key_id": "kid-test-1", "private_key": open(pem).read(),
           "client_email": email, "client_id": "1234",
           "auth_uri": "https://accounts.google.com/o/oauth2/auth",
           "token_uri": uri}
else:
    doc = {"type": kind, "client_id": "cid.apps.googleusercontent.com",
           "client_secret": secret, "refresh_token": refresh,
           "token_uri": uri}
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
PY
}
key_file "$T/sa.json" service_account "$T/sa-key.pem"
key_file "$T/sa-other.json" service_account "$T/other-key.pem"
mkdir -p "$T/gcloud" "$T/home"
key_file "$T/gcloud/application_default_credentials.json" authorized_user -
printf '{"type": "service_account", "private_key": "NOT-A-SECRET-BUT-CHECKED' >"$T/bad.json"
printf '{"type": "external_account", "audience": "x"}' >"$T/external.json"

# --- data -------------------------------------------------------------------
SRC=$T/src
make_dataset "$SRC" 60
n_up=0
while IFS= read -r f; do
	gcs_upload "$BUCKET" "ds/$f" "$SRC/$f" && n_up=$((n_up + 1))
done < <(cd "$SRC" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
check "upload the dataset to the emulator" test "$n_up" -eq 60

# grants KIND: successful grants of that kind ("sa", "user") so far.
grants() { grep -c "\"grant\": \"$1\", \"ok\": true" "$T/token.log"; }
md_grants() { grep -c '"flavor": "Google", "token": "ya29' "$T/md.log"; }
# last_token LOG: the last token a fake server issued.
last_token() { grep -o '"token": "ya29[^"]*"' "$1" | tail -1 | cut -d'"' -f4; }
# last_auth: the Authorization of the last request the proxy relayed.
last_auth() { tail -1 "$T/proxy.log" | cut -d' ' -f4-; }

# chain NAME ENV...: `shardfs manifest` of the dataset through the proxy,
# with only the given Google variables (HOME is $T/home); the log goes to
# $T/chain-NAME.err, the exit status to $rc.
chain() {
	local name=$1
	shift
	env HOME="$T/home" "$@" "$SHARDFS" manifest "gs://$BUCKET/ds/" \
		--endpoint "$PX" -o "$T/chain.tsv" >/dev/null 2>"$T/chain-$name.err"
	rc=$?
	ERR=$T/chain-$name.err
}

# --- the chain's order --------------------------------------------------------
chain sa GOOGLE_APPLICATION_CREDENTIALS="$T/sa.json" \
	CLOUDSDK_CONFIG="$T/gcloud" GCE_METADATA_HOST="$MD"
check "GOOGLE_APPLICATION_CREDENTIALS (service account) beats gcloud's file and the metadata server" bash -c \
	"test $rc -eq 0 && test \$(tail -n +2 '$T/chain.tsv' | wc -l) -eq 60 && \
	 grep -q 'gcs: credentials from service account key $T/sa.json ($EMAIL)' '$ERR' && \
	 test $(grants sa) -eq 1 -a $(grants user) -eq 0 -a $(md_grants) -eq 0"
check "the listing carried Authorization: Bearer <the token the endpoint issued for the JWT>" \
	test "$(last_auth)" = "Bearer $(last_token "$T/token.log")"
check "the endpoint verified the JWT (RS256 with the public half, iss, scope, aud, exp - iat <= 3600)" \
	bash -c "! grep -q '\"ok\": false' '$T/token.log' && grep -q 'application/x-www-form-urlencoded' '$T/token.log'"

chain user CLOUDSDK_CONFIG="$T/gcloud" GCE_METADATA_HOST="$MD"
check "gcloud's ADC file (\$CLOUDSDK_CONFIG, authorized_user) beats the metadata server" bash -c \
	"test $rc -eq 0 && grep -q 'credentials from authorized user credentials $T/gcloud/application_default_credentials.json' '$ERR' && \
	 test $(grants user) -eq 1 -a $(md_grants) -eq 0 && test \"\$(tail -1 '$T/proxy.log' | cut -d' ' -f4-)\" = 'Bearer $(last_token "$T/token.log")'"

mkdir -p "$T/home/.config/gcloud"
cp "$T/sa.json" "$T/home/.config/gcloud/application_default_credentials.json"
chain home GCE_METADATA_HOST="$MD"
check "gcloud's ADC file under \$HOME/.config/gcloud (a service account key there too)" bash -c \
	"test $rc -eq 0 && grep -q 'credentials from service account key $T/home/.config/gcloud/application_default_credentials.json' '$ERR' && test $(md_grants) -eq 0"
rm -rf "$T/home/.config"

chain md GCE_METADATA_HOST="$MD"
check "the metadata server (Metadata-Flavor: Google) when no file is configured" bash -c \
	"test $rc -eq 0 && grep -q 'credentials from the metadata server at $MD' '$ERR' && test $(md_grants) -eq 1 && \
	 test \"\$(tail -1 '$T/proxy.log' | cut -d' ' -f4-)\" = 'Bearer $(last_token "$T/md.log")'"

before="$(grants sa) $(grants user) $(md_grants)"
chain missing GOOGLE_APPLICATION_CREDENTIALS="$T/nope.json" \
	CLOUDSDK_CONFIG="$T/gcloud" GCE_METADATA_HOST="$MD"
check "a missing named file is an error naming it, not a fall-through" bash -c \
	"test $rc -ne 0 && grep -q 'GOOGLE_APPLICATION_CREDENTIALS $T/nope.json: No such file or directory' '$ERR' && \
	 test '$before' = '$(grants sa) $(grants user) $(md_grants)'"
chain bad GOOGLE_APPLICATION_CREDENTIALS="$T/bad.json" \
	CLOUDSDK_CONFIG="$T/gcloud" GCE_METADATA_HOST="$MD"
check "a malformed named file is an error saying what is wrong, not its contents" bash -c \
	"test $rc -ne 0 && grep -q '$T/bad.json: not JSON' '$ERR' && ! grep -q NOT-A-SECRET '$ERR' && \
	 test '$before' = '$(grants sa) $(grants user) $(md_grants)'"
chain external GOOGLE_APPLICATION_CREDENTIALS="$T/external.json" GCE_METADATA_HOST="$MD"
check "an unsupported credential type is an error naming the type" bash -c \
	"test $rc -ne 0 && grep -q 'type \"external_account\" is not supported' '$ERR' && \
	 test '$before' = '$(grants sa) $(grants user) $(md_grants)'"
chain other GOOGLE_APPLICATION_CREDENTIALS="$T/sa-other.json" GCE_METADATA_HOST="$MD"
check "a key the endpoint does not know: its signature fails, the mount fails (no fall-through)" bash -c \
	"test $rc -ne 0 && grep -q 'the token endpoint said HTTP 400 invalid_grant' '$ERR' && \
	 grep -q 'Signature verification failed' '$T/token.log' && \
	 test '$before' = '$(grants sa) $(grants user) $(md_grants)'"
t0=$(date +%s)
chain none
t1=$(date +%s)
check "nothing configured: a clear error and a non-zero exit, within seconds" bash -c \
	"test $rc -ne 0 && grep -q 'gcs: no Google credentials' '$ERR' && test $((t1 - t0)) -lt 15"
# A metadata address where something accepts connections but never
# answers: the probe gives up after its 2 s bound, not a TCP timeout.
$PY -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(3600)' "$T/silent.port" &
PIDS+=("$!")
for _ in $(seq 100); do [ -s "$T/silent.port" ] && break; sleep 0.1; done
t0=$(date +%s%N)
chain silent GCE_METADATA_HOST="127.0.0.1:$(cat "$T/silent.port")"
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
echo "# a silent metadata server: the manifest failed after $ms ms"
check "a silent metadata server: a clear error and a non-zero exit within 10 s (took $ms ms)" bash -c \
	"test $rc -ne 0 && grep -q 'gcs: no Google credentials' '$ERR' && test $ms -lt 10000"

# --- refresh during a mount ----------------------------------------------------
# The daemons get HOME=$T/home too: no gcloud file of this machine's.
export HOME=$T/home
C=$T/gcs.conf
M=$T/mnt
cat >"$C" <<EOF
[source]
url = gs://$BUCKET/ds/
endpoint = $PX
[shard]
world_size = 1
[cache]
enabled = false
EOF

# read_part N: the mount lists every file, and the files of part N (every
# third one, from the N-th) equal their sources. The kernel keeps what was
# read in its page cache (and [cache] is off), so a part read later goes to
# the store again, with the token current then.
read_part() {
	(cd "$M/rank-0" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$T/files"
	test "$(wc -l <"$T/files")" -eq 60 || return 1
	awk -v n="$1" 'NR % 3 == n' "$T/files" >"$T/part"
	while IFS= read -r f; do cmp -s "$M/rank-0/$f" "$SRC/$f" || return 1; done <"$T/part"
}
# wait_grants CMD N: until CMD prints N or more (bounded: 60 s).
wait_grants() {
	for _ in $(seq 600); do
		[ "$($1)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
# auth_check FROM LOG KIND: the proxy's lines after FROM all carried
# "Bearer T" for a token T the fake server (LOG) issued, of KIND, and the
# first and last differ (the backend switched to the refreshed token).
auth_check() {
	$PY - "$T/proxy.log" "$1" "$2" "$3" <<'PY'
import json, sys
proxy, start, log, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
issued = []
for line in open(log):
    t = json.loads(line).get("token")
    if t:
        issued.append(t)
auths = [l.rstrip("\n").split(" ", 3)[3] for l in open(proxy).readlines()[start:]]
tokens = [a[len("Bearer "):] for a in auths if a.startswith("Bearer ")]
ok = (len(auths) > 0 and len(tokens) == len(auths)
      and all(t in issued and t.startswith("ya29.fake-" + kind) for t in tokens)
      and tokens[0] != tokens[-1])
print("# %d requests, %d distinct tokens" % (len(tokens), len(set(tokens))))
sys.exit(0 if ok else 1)
PY
}

# refresh_mount NAME KIND LOG GRANTS_FN: mounts (the caller exported the
# source's variables) at debug level, reads everything, waits until the
# source granted 3 more tokens (they live LIFE seconds and are refreshed
# halfway), reads everything again, checks what the emulator was sent.
refresh_mount() {
	local name=$1 kind=$2 log=$3 count=$4 p0 g0
	p0=$(wc -l <"$T/proxy.log")
	g0=$($count)
	if ! mount_shardfs "$C" "$M" -v; then
		fail "mount with $name"
		return
	fi
	check "$name: the mount serves byte-identical files" read_part 0
	check "$name: the source granted new tokens during the mount (refresh before expiry)" \
		wait_grants "$count" $((g0 + 3))
	check "$name: reads still work after the first token expired" read_part 1
	check "$name: the backend sent Authorization: Bearer <current token>, and the refreshed one after a refresh" \
		auth_check "$p0" "$log" "$kind"
	check "$name: the log says where the token came from and that it was refreshed" bash -c \
		"grep -q 'gcs: credentials from $5' '$LAST_LOG' && grep -q 'gcs: access token refreshed from $5' '$LAST_LOG'"
	check "$name: unmount" umount_shardfs "$M"
}

export GOOGLE_APPLICATION_CREDENTIALS=$T/sa.json
refresh_mount "service account" sa "$T/token.log" "grants sa" "service account key $T/sa.json"

# A token endpoint outage during a mount: the refresh fails, the current
# token stays in use (reads go on), the refresh is retried with backoff
# and takes once the endpoint is back.
wait_log() { # PATTERN FILE: until FILE has PATTERN (bounded: 60 s)
	for _ in $(seq 600); do grep -q "$1" "$2" && return 0; sleep 0.1; done
	return 1
}
if mount_shardfs "$C" "$M" -v; then
	check "outage: the mount serves" read_part 0
	touch "$T/token-outage"
	check "outage: a failed refresh is logged, keeping the current token" \
		wait_log 'refresh from service account key .* failed; keeping the current token, retrying in [0-9]* s' "$LAST_LOG"
	kept=$(last_token "$T/token.log")
	p0=$(wc -l <"$T/proxy.log")
	check "outage: reads go on during the outage" read_part 1
	check "outage: with the last token granted" bash -c \
		"test \$(tail -n +$((p0 + 1)) '$T/proxy.log' | wc -l) -gt 5 && test \"\$(tail -n +$((p0 + 1)) '$T/proxy.log' | cut -d' ' -f4- | sort -u)\" = 'Bearer $kept'"
	n_ok=$(grants sa)
	rm -f "$T/token-outage"
	check "outage: the refresh is retried and takes once the endpoint is back" \
		wait_grants "grants sa" $((n_ok + 1))
	check "outage: the daemon logs the refresh after the failure" bash -c \
		"sed -n '/keeping the current token/,\$p' '$LAST_LOG' | grep -q 'access token refreshed from service account key'"
	p0=$(wc -l <"$T/proxy.log")
	check "outage: reads after it work" read_part 2
	check "outage: and carry a new token" bash -c \
		"test \$(tail -n +$((p0 + 1)) '$T/proxy.log' | wc -l) -gt 5 && \
		 test \"\$(tail -1 '$T/proxy.log' | cut -d' ' -f4-)\" != 'Bearer $kept'"
	check "outage: unmount" umount_shardfs "$M"
else
	fail "mount for the outage"
fi

# A refresh stuck on a stalled token endpoint must not hold up an unmount
# for long: the refresh request is bounded (10 s), and so is the wait.
if mount_shardfs "$C" "$M"; then
	touch "$T/token-hang"
	check "stall: a refresh is waiting on the stalled endpoint" \
		wait_log '"why": "hang"' "$T/token.log"
	t0=$(date +%s)
	fusermount3 -u "$M"
	wait "$LAST_PID"
	drc=$?
	t1=$(date +%s)
	rm -f "$T/token-hang"
	check "stall: the daemon exits 0 within 20 s of the unmount (took $((t1 - t0)) s)" \
		test "$drc" -eq 0 -a $((t1 - t0)) -lt 20
else
	fail "mount for the stalled endpoint"
fi

unset GOOGLE_APPLICATION_CREDENTIALS
export GCE_METADATA_HOST=$MD
refresh_mount "metadata server" md "$T/md.log" md_grants "the metadata server at $MD"
export GCE_METADATA_HOST=127.0.0.1:1

# A mount with no source at all fails with the same clear error.
mkdir -p "$M"
timeout 60 "$SHARDFS" mount "$C" "$M" -f >"$T/shardfs.nocreds.log" 2>&1
rc=$?
check "a mount with no credentials anywhere exits non-zero, saying so, and mounts nothing" bash -c \
	"test $rc -ne 0 -a $rc -ne 124 && grep -q 'gcs: no Google credentials' '$T/shardfs.nocreds.log' && ! grep -qs ' $M ' /proc/mounts"

# --- no secret in any log, even at debug level ---------------------------------
# Everything secret that passed: the private key's body, the client secret,
# the refresh token, every JWT (and its signature alone) and every access
# token the fake servers issued.
$PY - "$T" "$CSECRET" "$REFRESH" >"$T/secrets" <<'PY'
import json, sys
t = sys.argv[1]
out = set(sys.argv[2:])
for line in open(t + "/sa-key.pem"):
    line = line.strip()
    if line and not line.startswith("-----"):
        out.add(line)
for log in ("token.log", "md.log"):
    for line in open(t + "/" + log):
        d = json.loads(line)
        for k in ("token", "assertion"):
            if d.get(k):
                out.add(d[k])
                if k == "assertion":
                    out.add(d[k].rsplit(".", 1)[-1])
for s in sorted(out):
    print(s)
PY
check "the secrets list holds the key, the client secret, the refresh token, JWTs and tokens" \
	test "$(wc -l <"$T/secrets")" -gt 40
check "no secret in any log (the daemons' at debug level, every manifest run's)" bash -c \
	"! grep -F -l -f '$T/secrets' '$T'/shardfs.*.log '$T'/chain-*.err"
check "the debug logs are not empty (the grep above saw real logs)" bash -c \
	"test \$(cat '$T'/shardfs.*.log | wc -l) -gt 20"

finish
