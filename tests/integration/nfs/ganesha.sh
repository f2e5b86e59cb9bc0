# shellcheck shell=bash
# nfs-ganesha for the NFS suites: a userspace NFSv4 server (VFS FSAL) that
# exports one directory of the suite's temp dir on 127.0.0.1, started and
# stopped by PID. Source after lib.sh (uses T, PIDS).
#
# Its config, pid file, log and NFSv4 recovery directory live under $T.
# ganesha 4.3 still reaches outside them on its own, and no option of its
# config stops it: it registers NFS V4 with rpcbind (and unregisters its
# ports when it stops), creates /var/run/ganesha (callback credentials),
# reads /etc/krb5.keytab for callbacks, and tries the D-Bus system bus. On
# a machine without rpcbind and D-Bus (the test machines) those attempts
# fail and are logged; ganesha_start refuses to run when an rpcbind answers
# on 127.0.0.1, so the host's real NFS registrations are never touched.
# NFSv4 only (no mountd, NLM, rquota or UDP), on a free port (libnfs
# reaches it with nfs://127.0.0.1:PORT/...), Graceless, so a restarted server serves at
# once instead of after a 90 s grace period. The export is read-only and
# does not squash root (the daemon under test runs as root). Attributes
# are never cached (Attr_Expiration_Time = 0): files change under the
# export while it runs, and ganesha would otherwise report a changed
# file's old attributes for up to 60 s.
#
#   ganesha_start DIR [PORT]  exports DIR as /export (GANESHA_MAXREAD: the
#                             largest READ it answers; GANESHA_LEASE: the
#                             NFSv4 lease, s); sets GANESHA_PORT,
#                             GANESHA_PID, GANESHA_LOG, NFS_URL
#                             (nfs://127.0.0.1:PORT/export); 1 if it did not
#                             answer within 20 s, or an rpcbind runs
#   ganesha_stop              SIGTERM, then SIGKILL after 5 s
#   ganesha_kill              SIGKILL (a server that vanishes)
#   ganesha_pause / _resume   SIGSTOP / SIGCONT (a server that stalls)

GANESHA_BIN=${GANESHA_BIN:-/usr/sbin/ganesha.nfsd}
[ -x "$GANESHA_BIN" ] || GANESHA_BIN=$(command -v ganesha.nfsd 2>/dev/null || echo ganesha.nfsd)

GANESHA_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ganesha_free_port() { /usr/bin/python3 "$GANESHA_SRC/../free_port.py"; }

ganesha_plugins_dir() {
	local d
	for d in /usr/lib/x86_64-linux-gnu/ganesha /usr/lib/*/ganesha /usr/lib64/ganesha /usr/lib/ganesha; do
		[ -e "$d/libfsalvfs.so" ] && { echo "$d"; return; }
	done
	echo /usr/lib/x86_64-linux-gnu/ganesha
}

# true if an rpcbind answers on 127.0.0.1 (rpcinfo, or its port 111).
ganesha_rpcbind_up() {
	if command -v rpcinfo >/dev/null 2>&1; then
		timeout 5 rpcinfo -p 127.0.0.1 >/dev/null 2>&1
	else
		(exec 3<>/dev/tcp/127.0.0.1/111) 2>/dev/null
	fi
}

ganesha_start() {
	local dir=$1
	if ganesha_rpcbind_up; then
		echo "an rpcbind answers on 127.0.0.1: nfs-ganesha 4.3 would register" \
			"with it and unregister the host's NFS service when stopped" \
			"(no option of its config prevents it); stop rpcbind or run" \
			"the nfs suites on a machine without it" >&2
		return 1
	fi
	GANESHA_PORT=${2:-${GANESHA_PORT:-$(ganesha_free_port)}}
	GANESHA_DIR=$T/ganesha
	GANESHA_LOG=$GANESHA_DIR/ganesha.${#PIDS[@]}.log
	mkdir -p "$GANESHA_DIR/recovery" "$dir"
	cat >"$GANESHA_DIR/ganesha.conf" <<CONF
NFS_CORE_PARAM {
	Bind_addr = 127.0.0.1;
	NFS_Port = $GANESHA_PORT;
	Protocols = 4;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
	Plugins_Dir = "$(ganesha_plugins_dir)";
}
NFS_KRB5 { Active_krb5 = false; }
NFSv4 {
	Graceless = true;
	${GANESHA_LEASE:+Lease_Lifetime = $GANESHA_LEASE;}
	RecoveryRoot = "$GANESHA_DIR/recovery";
	Only_Numeric_Owners = true;
}
EXPORT {
	Export_Id = 1;
	Path = "$dir";
	Pseudo = "/export";
	Access_Type = RO;
	Squash = No_Root_Squash;
	SecType = sys;
	Protocols = 4;
	Transports = TCP;
	# The suites change files behind the server's back: attributes must
	# not come from its cache, or a change would go unseen.
	Attr_Expiration_Time = 0;
	${GANESHA_MAXREAD:+MaxRead = $GANESHA_MAXREAD;}
	FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
CONF
	"$GANESHA_BIN" -F -f "$GANESHA_DIR/ganesha.conf" -L "$GANESHA_LOG" \
		-p "$GANESHA_DIR/ganesha.pid" >>"$GANESHA_LOG" 2>&1 &
	GANESHA_PID=$!
	PIDS+=("$GANESHA_PID")
	NFS_URL=nfs://127.0.0.1:$GANESHA_PORT/export
	local i
	for i in $(seq 200); do
		if ! kill -0 "$GANESHA_PID" 2>/dev/null; then
			echo "ganesha exited at start:" >&2
			tail -n 20 "$GANESHA_LOG" >&2
			return 1
		fi
		if grep -q 'NFS SERVER INITIALIZED' "$GANESHA_LOG" 2>/dev/null &&
			(exec 3<>"/dev/tcp/127.0.0.1/$GANESHA_PORT") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "ganesha did not answer on port $GANESHA_PORT in 20 s:" >&2
	tail -n 20 "$GANESHA_LOG" >&2
	return 1
}

# stderr off: the shell's own "Killed" notice of a server killed on purpose
# would be noise in the suite's output.
ganesha_wait_gone() {
	local i
	for i in $(seq 100); do
		kill -0 "$GANESHA_PID" 2>/dev/null || { wait "$GANESHA_PID"; return 0; }
		sleep 0.1
	done
	return 1
} 2>/dev/null

ganesha_stop() {
	kill "$GANESHA_PID" 2>/dev/null || return 0
	ganesha_wait_gone || { kill -9 "$GANESHA_PID" 2>/dev/null; ganesha_wait_gone; }
}

ganesha_kill() {
	kill -9 "$GANESHA_PID" 2>/dev/null
	ganesha_wait_gone
}

ganesha_pause() { kill -STOP "$GANESHA_PID"; }
ganesha_resume() { kill -CONT "$GANESHA_PID"; }
