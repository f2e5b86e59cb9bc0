# shellcheck shell=bash
# A small Slurm cluster on 127.0.0.1 for the cluster suites: munged,
# slurmctld and one slurmd per node (Debian's slurm-wlm 22.05 runs several
# on one host: each node its own port, spool and log), everything in
# $T/slurm, own munge key and socket, own ports. Node names come from
# SLURM_NODES (default "localhost"), so the config does not depend on the
# hostname. Source after lib.sh (uses T, PIDS).
#
# slurm_start PROLOG EPILOG [TASKPROLOG]: writes slurm.conf, starts the
# daemons (PIDs go to PIDS, so lib.sh's cleanup stops them by PID;
# slurm_stop stops them in the right order first), waits until every node
# is idle. Exports SLURM_CONF. Returns non-zero with the logs on stderr if
# the cluster does not come up in 30 s.

SL=$T/slurm
SLURM_NODES=${SLURM_NODES:-localhost}

slurm_free_port() { /usr/bin/python3 "$HERE/free_port.py"; }

# The daemons run in a UTS namespace of their own whose host name is
# localhost (unshare --uts sh -c "$SLURM_AS_LOCALHOST" sh CMD...). They
# never listen on every address (NoCtldInAddrAny, NoInAddrAny) but on the
# one their host name resolves to: 127.0.1.1 on a Debian install
# (/etc/hosts), maybe a routable address elsewhere, while the cluster's
# address is 127.0.0.1 (the clients could not connect). Named localhost
# they listen on 127.0.0.1, and nothing else on the machine sees the name.
# Started as `unshare ... &`, never through a shell function (that would
# fork a subshell): unshare and sh exec, so $! is the daemon's PID.
SLURM_AS_LOCALHOST='hostname localhost && exec "$@"'

slurm_start() {
	local prolog=$1 epilog=$2 taskprolog=${3:-}
	mkdir -p "$SL"/{state,spool,log,munge}
	# 0755: jobs of other users (srun in a batch script) talk to munged too;
	# the key itself stays 0400.
	chmod 755 "$SL/munge"
	head -c 1024 /dev/urandom >"$SL/munge/munge.key"
	chmod 400 "$SL/munge/munge.key"
	SLURM_MUNGE_SOCKET=$SL/munge/munge.socket
	munged -F --force --key-file "$SL/munge/munge.key" --socket "$SLURM_MUNGE_SOCKET" \
		--pid-file "$SL/munge/munged.pid" --log-file "$SL/log/munged.log" \
		--seed-file "$SL/munge/munged.seed" >"$SL/log/munged.out" 2>&1 &
	SLURM_MUNGED_PID=$!
	PIDS+=("$SLURM_MUNGED_PID")
	local ctld_port
	ctld_port=$(slurm_free_port)
	cat >"$SL/slurm.conf" <<CONF
ClusterName=shardfstest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
AuthType=auth/munge
AuthInfo=socket=$SLURM_MUNGE_SOCKET
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool-%n
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd-%n.pid
SlurmctldLogFile=$SL/log/slurmctld.log
SlurmdLogFile=$SL/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
SlurmdParameters=config_overrides
Prolog=$prolog
Epilog=$epilog
PrologFlags=Alloc
${taskprolog:+TaskProlog=$taskprolog}
PrologEpilogTimeout=120
InactiveLimit=0
KillWait=5
CONF
	local n
	for n in $SLURM_NODES; do
		echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$(slurm_free_port) CPUs=4 State=UNKNOWN"
	done >>"$SL/slurm.conf"
	echo "PartitionName=test Nodes=$(echo $SLURM_NODES | tr ' ' ,) Default=YES MaxTime=INFINITE State=UP" >>"$SL/slurm.conf"
	export SLURM_CONF=$SL/slurm.conf
	for _ in $(seq 100); do [ -S "$SLURM_MUNGE_SOCKET" ] && break; sleep 0.1; done
	unshare --uts sh -c "$SLURM_AS_LOCALHOST" sh \
		slurmctld -D -f "$SLURM_CONF" >"$SL/log/slurmctld.out" 2>&1 &
	SLURM_CTLD_PID=$!
	PIDS+=("$SLURM_CTLD_PID")
	SLURM_SLURMD_PIDS=()
	for n in $SLURM_NODES; do
		unshare --uts sh -c "$SLURM_AS_LOCALHOST" sh \
			slurmd -D -N "$n" -f "$SLURM_CONF" >"$SL/log/slurmd-$n.out" 2>&1 &
		SLURM_SLURMD_PIDS+=("$!")
		PIDS+=("$!")
	done
	local want end=$((SECONDS + 30))
	want=$(echo $SLURM_NODES | wc -w)
	# 30 s of wall time: a sinfo that hangs (a slurmctld that never
	# answers) takes its 5 s each time, so a count of tries is no bound.
	while [ "$SECONDS" -lt "$end" ]; do
		if [ "$(timeout 5 sinfo -h -t idle -o %D 2>/dev/null)" = "$want" ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "slurm did not come up in 30 s:" >&2
	tail -n 20 "$SL"/log/*.log "$SL"/log/*.out >&2
	return 1
}

# slurm_node_state NODE: its state as sinfo prints it (idle, drain, ...).
slurm_node_state() { timeout 10 sinfo -h -n "$1" -o %t 2>/dev/null; }

# slurm_wait_job JOBID SECONDS: waits until the job has left the queue.
slurm_wait_job() {
	local id=$1 end=$((SECONDS + $2))
	while [ "$SECONDS" -lt "$end" ]; do
		[ -z "$(timeout 10 squeue -h -j "$id" -o %i 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	return 1
}

# slurm_stop: waits for the queue to empty (bounded), then stops the
# slurmds, slurmctld and munged, in that order, by PID.
slurm_stop() {
	local p end=$((SECONDS + 10))
	while [ "$SECONDS" -lt "$end" ]; do
		[ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
		sleep 0.1
	done
	for p in "${SLURM_SLURMD_PIDS[@]+"${SLURM_SLURMD_PIDS[@]}"}" ${SLURM_CTLD_PID:-} ${SLURM_MUNGED_PID:-}; do
		kill "$p" 2>/dev/null || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
}
