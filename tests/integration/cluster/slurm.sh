# shellcheck shell=bash
# A one-node Slurm cluster on 127.0.0.1 for the cluster suites: munged,
# slurmctld and slurmd (Debian's slurm-wlm 22.05), everything in $T/slurm,
# own munge key and socket, own ports, the node called "localhost" so the
# config does not depend on the hostname. Source after lib.sh (uses T,
# PIDS, free_port from s3/s3rver.sh or its own).
#
# slurm_start PROLOG EPILOG [TASKPROLOG]: writes slurm.conf, starts the three daemons
# (PIDs go to PIDS, so lib.sh's cleanup stops them by PID; slurm_stop
# stops them in the right order first), waits until the node is idle.
# Exports SLURM_CONF. Returns non-zero with the logs on stderr if the
# cluster does not come up in 30 s.

SL=$T/slurm

slurm_free_port() {
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_start() {
	local prolog=$1 epilog=$2 taskprolog=${3:-}
	mkdir -p "$SL"/{state,spool,log,munge}
	chmod 700 "$SL/munge"
	head -c 1024 /dev/urandom >"$SL/munge/munge.key"
	chmod 400 "$SL/munge/munge.key"
	SLURM_MUNGE_SOCKET=$SL/munge/munge.socket
	munged -F --force --key-file "$SL/munge/munge.key" --socket "$SLURM_MUNGE_SOCKET" \
		--pid-file "$SL/munge/munged.pid" --log-file "$SL/log/munged.log" \
		--seed-file "$SL/munge/munged.seed" >"$SL/log/munged.out" 2>&1 &
	SLURM_MUNGED_PID=$!
	PIDS+=("$SLURM_MUNGED_PID")
	local ctld_port slurmd_port
	ctld_port=$(slurm_free_port)
	slurmd_port=$(slurm_free_port)
	cat >"$SL/slurm.conf" <<CONF
ClusterName=shardfstest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
AuthType=auth/munge
AuthInfo=socket=$SLURM_MUNGE_SOCKET
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SL/state
SlurmdSpoolDir=$SL/spool
SlurmctldPidFile=$SL/slurmctld.pid
SlurmdPidFile=$SL/slurmd.pid
SlurmctldLogFile=$SL/log/slurmctld.log
SlurmdLogFile=$SL/log/slurmd.log
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
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
	export SLURM_CONF=$SL/slurm.conf
	for _ in $(seq 100); do [ -S "$SLURM_MUNGE_SOCKET" ] && break; sleep 0.1; done
	slurmctld -D -f "$SLURM_CONF" >"$SL/log/slurmctld.out" 2>&1 &
	SLURM_CTLD_PID=$!
	PIDS+=("$SLURM_CTLD_PID")
	slurmd -D -N localhost -f "$SLURM_CONF" >"$SL/log/slurmd.out" 2>&1 &
	SLURM_SLURMD_PID=$!
	PIDS+=("$SLURM_SLURMD_PID")
	for _ in $(seq 300); do
		if [ "$(timeout 5 sinfo -h -n localhost -o %t 2>/dev/null)" = idle ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "slurm did not come up in 30 s:" >&2
	tail -n 20 "$SL"/log/*.log "$SL"/log/*.out >&2
	return 1
}

# slurm_node_state: the node's state as sinfo prints it (idle, drain, ...).
slurm_node_state() { timeout 10 sinfo -h -n localhost -o %t 2>/dev/null; }

# slurm_wait_job JOBID SECONDS: waits until the job has left the queue.
slurm_wait_job() {
	local id=$1 n=$(($2 * 10))
	while [ $n -gt 0 ]; do
		[ -z "$(timeout 10 squeue -h -j "$id" -o %i 2>/dev/null)" ] && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

# slurm_stop: waits for the queue to empty (bounded), then stops slurmd,
# slurmctld and munged, in that order, by PID.
slurm_stop() {
	local p
	for _ in $(seq 100); do
		[ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
		sleep 0.1
	done
	for p in ${SLURM_SLURMD_PID:-} ${SLURM_CTLD_PID:-} ${SLURM_MUNGED_PID:-}; do
		kill "$p" 2>/dev/null || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
}
