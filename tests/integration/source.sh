# shellcheck shell=bash
# The store under the suites that run over s3://, gs:// and nfs:// alike
# (test_cache.sh, test_prefetch.sh): SOURCE=s3 (the default) is s3rver,
# SOURCE=gcs the GCS emulator (test_cache_gcs.sh and test_prefetch_gcs.sh
# set it); either sits behind the counting proxy (countproxy.py), so the
# suites count what the server was asked for. SOURCE=nfs (the *_nfs.sh
# suites) is nfs-ganesha exporting a directory of $T (BUCKET is "export",
# the export's pseudo path); there the nfs backend itself logs each read
# it makes, in the proxy's form (SHARDFS_NFS_TRACE, backends/nfs.c).
# Source after lib.sh.
#
#   src_suite_start BUCKET   installs and starts the server and the proxy;
#                            sets SCHEME (s3 or gs), EP (the proxy's URL) and
#                            GETLOG; records a failure and ends the suite if
#                            the server cannot start
#   src_upload DIR PREFIX    every file under DIR as PREFIX/RELATIVE_PATH
#   src_upload_file FILE KEY one file
#   src_manifest PREFIX ARGS shardfs manifest SCHEME://BUCKET/PREFIX ARGS
#                            through the proxy
#   src_conf PREFIX          the [source] lines naming the store (url, and
#                            for s3 the endpoint)
#   reqlog                   the proxy's log, one request a line, "METHOD
#                            PATH STATUS BYTES CONN"; an object's media GET
#                            reads "GET /BUCKET/KEY ..." for both stores
#
# Over gs:// shardfs reaches the emulator through STORAGE_EMULATOR_HOST (the
# proxy's host:port), which also means no credentials; every other Google
# variable is cleared, and the metadata server is pointed at a closed port,
# so nothing can reach a real account.

SOURCE=${SOURCE:-s3}
case $SOURCE in
s3) SCHEME=s3 ;;
gcs) SCHEME=gs SUITE=${SUITE}_gcs ;;
nfs) SCHEME=nfs SUITE=${SUITE}_nfs ;;
*)
	echo "SOURCE=$SOURCE: not s3, gcs or nfs" >&2
	exit 2
	;;
esac
. "$HERE/s3/s3rver.sh"
. "$HERE/gcs/gcs_emulator.sh"
. "$HERE/nfs/ganesha.sh"

src_suite_start() {
	local v
	if [ "$SOURCE" = s3 ]; then
		s3_suite_start "$1"
		countproxy_start
		return
	fi
	if [ "$SOURCE" = nfs ]; then
		BUCKET=export
		NFS_EXPORT=$T/export
		if ! ganesha_start "$NFS_EXPORT"; then
			fail "ganesha start"
			finish
		fi
		GETLOG=$T/requests.log
		: >"$GETLOG"
		export SHARDFS_NFS_TRACE=$GETLOG
		return
	fi
	BUCKET=$1
	for v in $(env | sed -n 's/^\(GOOGLE_[A-Z_0-9]*\|GCE_[A-Z_0-9]*\|CLOUDSDK_[A-Z_0-9]*\|STORAGE_EMULATOR_HOST\)=.*/\1/p'); do
		unset "$v"
	done
	export CLOUDSDK_CONFIG=$T/no-gcloud-config
	export GCE_METADATA_HOST=127.0.0.1:9 # discard: nothing answers there
	if ! command -v node >/dev/null || ! gcs_install; then
		fail "gcs emulator install (npm ci)"
		finish
	fi
	if ! gcs_start "$T/gcsdata"; then
		fail "gcs emulator start"
		finish
	fi
	GETLOG=$T/requests.log
	: >"$GETLOG"
	/usr/bin/python3 "$HERE/countproxy.py" --upstream "127.0.0.1:$GCS_PORT" \
		--log "$GETLOG" --port-file "$T/proxy.port" 2>"$T/proxy.err" &
	PIDS+=("$!")
	for _ in $(seq 100); do [ -s "$T/proxy.port" ] && break; sleep 0.1; done
	EP=http://127.0.0.1:$(cat "$T/proxy.port")
	export STORAGE_EMULATOR_HOST=${EP#http://}
}

# Uploads go to the server directly: the proxy counts only what shardfs asks.
src_upload() {
	local dir=$1 prefix=${2%/}
	if [ "$SOURCE" = s3 ]; then
		aws_s3 cp --recursive "$dir" "s3://$BUCKET/$prefix/"
		return
	fi
	if [ "$SOURCE" = nfs ]; then
		mkdir -p "$NFS_EXPORT/$prefix" && cp -a "$dir/." "$NFS_EXPORT/$prefix/"
		return
	fi
	# One process, one kept-alive connection: a curl per file costs seconds
	# for a few hundred files.
	/usr/bin/python3 - "$GCS_PORT" "$BUCKET" "$dir" "$prefix" <<'PY'
import http.client, os, sys, urllib.parse
port, bucket, root, prefix = sys.argv[1:]
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
n = 0
for d, _, files in os.walk(root):
    for f in sorted(files):
        p = os.path.join(d, f)
        name = prefix + "/" + os.path.relpath(p, root)
        with open(p, "rb") as fh:
            body = fh.read()
        q = urllib.parse.quote(name.encode("utf-8", "surrogateescape"), safe="-._~")
        c.request("POST", "/upload/storage/v1/b/%s/o?uploadType=media&name=%s" % (bucket, q),
                  body=body, headers={"Content-Type": "application/octet-stream"})
        r = c.getresponse()
        out = r.read()
        if r.status != 200:
            sys.exit("upload %s: HTTP %d: %s" % (name, r.status, out[:300]))
        n += 1
if n == 0:
    sys.exit("upload: no file under " + root)
PY
}

src_upload_file() {
	if [ "$SOURCE" = nfs ]; then
		mkdir -p "$(dirname "$NFS_EXPORT/$2")" && cp "$1" "$NFS_EXPORT/$2"
	elif [ "$SOURCE" = s3 ]; then
		aws_s3 cp "$1" "s3://$BUCKET/$2"
	else
		gcs_upload "$BUCKET" "$2" "$1"
	fi
}

src_manifest() {
	local prefix=$1
	shift
	if [ "$SOURCE" = s3 ]; then
		"$SHARDFS" manifest "s3://$BUCKET/$prefix" --endpoint "$EP" "$@"
	elif [ "$SOURCE" = nfs ]; then
		"$SHARDFS" manifest "$NFS_URL/$prefix" "$@"
	else
		"$SHARDFS" manifest "gs://$BUCKET/$prefix" "$@"
	fi
}

src_conf() {
	if [ "$SOURCE" = nfs ]; then
		echo "url = $NFS_URL/$1"
		return 0
	fi
	echo "url = $SCHEME://$BUCKET/$1"
	[ "$SOURCE" = s3 ] && echo "endpoint = $EP"
	return 0
}

# The GCS JSON API names an object in its path, fully percent-encoded
# (/storage/v1/b/B/o/ds%2Fa.bin?alt=media&generation=G, or /download/...);
# reqlog rewrites such a media GET as "GET /B/ds/a.bin", the form the S3
# paths have (percent-encoded but for "/"), and leaves listings and
# metadata requests as they are.
reqlog() {
	if [ "$SOURCE" = s3 ] || [ "$SOURCE" = nfs ]; then
		cat "$GETLOG"
		return
	fi
	/usr/bin/python3 -c '
import re, sys, urllib.parse
media = re.compile(r"^(?:/download)?/storage/v1/b/([^/?]+)/o/([^?]+)\?(.*)$")
for line in open(sys.argv[1], encoding="utf-8", errors="surrogateescape"):
    f = line.rstrip("\n").split(" ")
    m = media.match(f[1]) if len(f) > 1 else None
    if m and "alt=media" in m.group(3).split("&"):
        name = urllib.parse.unquote(m.group(2), errors="surrogateescape")
        f[1] = "/%s/%s" % (m.group(1), urllib.parse.quote(name, safe="/-._~", errors="surrogateescape"))
    print(" ".join(f))
' "$GETLOG"
}
