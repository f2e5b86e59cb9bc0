# shellcheck shell=bash
# The Firebase Storage emulator's GCS JSON API for the GCS suites: install
# (firebase-tools pinned by package-lock.json), start on a free 127.0.0.1
# port, upload, stop. Source after lib.sh (uses T, PIDS).
#
# The npm install goes to build/gcs-emulator/ (gitignored, reused across
# runs; `npm ci` again only when the lock file changed). The emulator is
# started by emulator.js, not by `firebase emulators:start`, which needs
# Java and downloads a jar; see docs/TEST-SERVERS.md. npm runs no install
# scripts (--ignore-scripts): the only one that matters here is re2's,
# which tries to download a prebuilt binary and then compiles re2 from C++
# for minutes, and the storage emulator never loads re2.

GCS_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GCS_DIR=${GCS_DIR:-$(cd "$GCS_SRC/../../.." && pwd)/build/gcs-emulator}

# The Node that runs the emulator: firebase-tools 15 needs Node >= 20, and
# Debian 12's nodejs is 18. With an older node on PATH, gcs_install fetches
# Node 20 from the npm registry (package node-linux-<arch>, pinned) into
# $GCS_DIR/node20 and the emulator runs under it; the system node is left
# alone.
GCS_NODE=node
GCS_NODE_VERSION=20.20.2

# gcs_node: sets GCS_NODE to a Node >= 20, fetching one if needed.
gcs_node() {
	local major arch
	major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
	if [ "${major:-0}" -ge 20 ]; then
		GCS_NODE=node
		return 0
	fi
	case $(uname -m) in
	x86_64) arch=x64 ;;
	aarch64) arch=arm64 ;;
	*)
		echo "gcs emulator: Node >= 20 needed (found ${major:-none}) and none on npm for $(uname -m)" >&2
		return 1
		;;
	esac
	GCS_NODE=$GCS_DIR/node20/node_modules/node-linux-$arch/bin/node
	[ -x "$GCS_NODE" ] && [ "$("$GCS_NODE" --version)" = "v$GCS_NODE_VERSION" ] && return 0
	echo "gcs emulator: node is ${major:-absent}, firebase-tools 15 needs >= 20: fetching node-linux-$arch@$GCS_NODE_VERSION from npm" >&2
	mkdir -p "$GCS_DIR/node20" &&
		(cd "$GCS_DIR/node20" && npm install --no-save --ignore-scripts --no-audit --no-fund \
			--loglevel=error "node-linux-$arch@$GCS_NODE_VERSION" >"$T/gcs-node.log" 2>&1) &&
		[ -x "$GCS_NODE" ] || { cat "$T/gcs-node.log" >&2; return 1; }
}

# gcs_install: a Node >= 20 (gcs_node), then npm ci into $GCS_DIR unless
# already current. Suites running side by side (run.sh) share the
# directory: one installs at a time, the others then find it current.
# GCS_NODE is set by gcs_node in this shell, not in the locked subshell.
gcs_install() {
	mkdir -p "$GCS_DIR" || return 1
	(flock 9 && gcs_node && gcs_install_locked) 9>"$GCS_DIR/.install.lock" &&
		gcs_node
}
gcs_install_locked() {
	if [ -f "$GCS_DIR/node_modules/firebase-tools/lib/emulator/storage/index.js" ] &&
		cmp -s "$GCS_SRC/package-lock.json" "$GCS_DIR/package-lock.json"; then
		return 0
	fi
	cp "$GCS_SRC/package.json" "$GCS_SRC/package-lock.json" "$GCS_DIR/" &&
		(cd "$GCS_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >"$T/gcs-npm.log" 2>&1) ||
		{ cat "$T/gcs-npm.log" >&2; return 1; }
}

gcs_free_port() { /usr/bin/python3 "$GCS_SRC/../free_port.py"; }

# gcs_start DATA_DIR [PORT]: starts the emulator, waits until it answers.
# Sets GCS_PORT, GCS_PID, GCS_EP (the endpoint URL) and GCS_LOG. Buckets are
# created by the first upload into them. DATA_DIR is the launcher's working
# directory (the emulator keeps objects in memory and under the system temp
# dir; TMPDIR is pointed into DATA_DIR so nothing is left behind).
gcs_start() {
	local data=$1
	GCS_PORT=${2:-$(gcs_free_port)}
	GCS_LOG=$T/gcs-emulator.${#PIDS[@]}.log
	mkdir -p "$data/tmp"
	(cd "$data" && TMPDIR=$data/tmp NODE_PATH=$GCS_DIR/node_modules \
		exec "$GCS_NODE" "$GCS_SRC/emulator.js" "$GCS_PORT") >"$GCS_LOG" 2>&1 &
	GCS_PID=$!
	PIDS+=("$GCS_PID")
	GCS_EP=http://127.0.0.1:$GCS_PORT
	for _ in $(seq 300); do
		if curl -s -o /dev/null "$GCS_EP/storage/v1/b/probe/o"; then return 0; fi
		if ! kill -0 "$GCS_PID" 2>/dev/null; then
			echo "gcs emulator exited:" >&2; cat "$GCS_LOG" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "gcs emulator did not answer in 30 s" >&2
	return 1
}

# gcs_urlencode STRING: every byte but A-Za-z0-9-._~ as %XX ('/' too).
gcs_urlencode() {
	/usr/bin/python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1].encode("utf-8", "surrogateescape"), safe="-._~"))' "$1"
}

# gcs_upload BUCKET NAME FILE: one media upload; fails unless HTTP 200.
gcs_upload() {
	local code
	code=$(curl -s -o "$T/gcs-upload.out" -w '%{http_code}' -X POST \
		-H 'Content-Type: application/octet-stream' --data-binary "@$3" \
		"$GCS_EP/upload/storage/v1/b/$1/o?uploadType=media&name=$(gcs_urlencode "$2")")
	if [ "$code" != 200 ]; then
		echo "gcs_upload $1 $2: HTTP $code: $(head -c 300 "$T/gcs-upload.out")" >&2
		return 1
	fi
}

# gcs_kill: SIGKILL, as a crash would; waits until it is gone.
gcs_kill() {
	kill -9 "$GCS_PID" 2>/dev/null
	wait "$GCS_PID" 2>/dev/null
	return 0
}
