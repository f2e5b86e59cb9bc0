# shellcheck shell=bash
# s3rver for the S3 suites: install (pinned by package-lock.json), start on
# a free 127.0.0.1 port, stop, restart. Source after lib.sh (uses T, PIDS).
#
# The npm install goes to build/s3rver/ (gitignored, reused across runs;
# `npm ci` again only when the lock file changed). s3rver runs under
# --openssl-legacy-provider: without it every truncated ListObjectsV2 page
# is HTTP 500 on Node 17+ (its continuation tokens use DES).

S3RVER_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S3RVER_DIR=${S3RVER_DIR:-$(cd "$S3RVER_SRC/../../.." && pwd)/build/s3rver}

# s3rver_install: npm ci into $S3RVER_DIR unless already current.
s3rver_install() {
	mkdir -p "$S3RVER_DIR" || return 1
	if [ -f "$S3RVER_DIR/node_modules/s3rver/bin/s3rver.js" ] &&
		cmp -s "$S3RVER_SRC/package-lock.json" "$S3RVER_DIR/package-lock.json"; then
		return 0
	fi
	cp "$S3RVER_SRC/package.json" "$S3RVER_SRC/package-lock.json" "$S3RVER_DIR/" &&
		(cd "$S3RVER_DIR" && npm ci --no-audit --no-fund --loglevel=error >"$T/npm.log" 2>&1) ||
		{ cat "$T/npm.log" >&2; return 1; }
}

free_port() {
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# s3rver_start DATA_DIR BUCKET [PORT]: starts s3rver, waits until it answers.
# Sets S3_PORT, S3_PID, S3_EP (the endpoint URL) and S3_LOG.
s3rver_start() {
	local data=$1 bucket=$2
	S3_PORT=${3:-$(free_port)}
	S3_LOG=$T/s3rver.${#PIDS[@]}.log
	mkdir -p "$data"
	node --openssl-legacy-provider "$S3RVER_DIR/node_modules/s3rver/bin/s3rver.js" \
		-d "$data" -a 127.0.0.1 -p "$S3_PORT" -s --service-endpoint localhost \
		--configure-bucket "$bucket" >"$S3_LOG" 2>&1 &
	S3_PID=$!
	PIDS+=("$S3_PID")
	S3_EP=http://127.0.0.1:$S3_PORT
	for _ in $(seq 100); do
		if curl -s -o /dev/null "$S3_EP/"; then return 0; fi
		if ! kill -0 "$S3_PID" 2>/dev/null; then
			echo "s3rver exited:" >&2; cat "$S3_LOG" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "s3rver did not answer in 10 s" >&2
	return 1
}

# s3rver_kill: SIGKILL, as a crash would; waits until it is gone.
s3rver_kill() {
	kill -9 "$S3_PID" 2>/dev/null
	wait "$S3_PID" 2>/dev/null
	return 0
}
