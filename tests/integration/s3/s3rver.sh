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

# s3rver_install: npm ci into $S3RVER_DIR unless already current. Suites
# running side by side (run.sh) share the directory: one installs at a
# time, the others then find it current.
s3rver_install() {
	mkdir -p "$S3RVER_DIR" || return 1
	(flock 9 && s3rver_install_locked) 9>"$S3RVER_DIR/.install.lock"
}
s3rver_install_locked() {
	if [ -f "$S3RVER_DIR/node_modules/s3rver/bin/s3rver.js" ] &&
		cmp -s "$S3RVER_SRC/package-lock.json" "$S3RVER_DIR/package-lock.json"; then
		return 0
	fi
	cp "$S3RVER_SRC/package.json" "$S3RVER_SRC/package-lock.json" "$S3RVER_DIR/" &&
		(cd "$S3RVER_DIR" && npm ci --no-audit --no-fund --loglevel=error >"$T/npm.log" 2>&1) ||
		{ cat "$T/npm.log" >&2; return 1; }
}

# free_port: a port no other suite of this run was given (free_port.py).
free_port() { /usr/bin/python3 "$S3RVER_SRC/../free_port.py"; }

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

# s3_suite_start BUCKET: the setup every s3rver suite shares. Clears the
# caller's AWS_* variables (nothing may reach a real account or the metadata
# address), uses s3rver's credentials, installs and starts s3rver with
# BUCKET, and defines aws_s3 (Debian's awscli against it). On failure it
# records the failure and ends the suite.
s3_suite_start() {
	local v
	for v in $(env | sed -n 's/^\(AWS_[A-Z_0-9]*\)=.*/\1/p'); do unset "$v"; done
	export AWS_EC2_METADATA_DISABLED=true
	export AWS_SHARED_CREDENTIALS_FILE=$T/no-credentials-file
	export AWS_CONFIG_FILE=$T/aws-config
	export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
	export AWS_DEFAULT_REGION=us-east-1
	printf '[default]\ns3 =\n  max_concurrent_requests = 16\n' >"$AWS_CONFIG_FILE"
	BUCKET=$1
	if ! command -v node >/dev/null || ! s3rver_install; then
		fail "s3rver install (npm ci)"
		finish
	fi
	if ! s3rver_start "$T/s3data" "$BUCKET"; then
		fail "s3rver start"
		finish
	fi
}
aws_s3() { /usr/bin/aws --endpoint-url "$S3_EP" s3 "$@" --only-show-errors; }

# countproxy_start: a request-counting proxy in front of s3rver. Sets
# GETLOG (one line per request) and EP (the endpoint to mount through).
countproxy_start() {
	GETLOG=$T/requests.log
	: >"$GETLOG"
	/usr/bin/python3 "$S3RVER_SRC/../countproxy.py" --upstream "127.0.0.1:$S3_PORT" \
		--log "$GETLOG" --port-file "$T/proxy.port" 2>"$T/proxy.err" &
	PIDS+=("$!")
	for _ in $(seq 100); do [ -s "$T/proxy.port" ] && break; sleep 0.1; done
	EP=http://127.0.0.1:$(cat "$T/proxy.port")
}
