#!/usr/bin/env bash
# contrib/slurm/ for real: Debian's slurm-wlm (munged, slurmctld, and two
# slurmds as nodes n1 and n2) on 127.0.0.1, a dataset in s3rver, the
# contrib prolog, epilog and task prolog installed through slurm.conf (via
# wrappers that only point them at their node's settings file: each node
# its own mount and log directories), and contrib's example job.
#
# Covered: a 4-task job with --comment=shardfs=ds gets the dataset mounted
# by the prolog with world_size 4; each task read exactly its rank (its
# files = `shardfs plan --rank R`), the union of the tasks' files is the
# dataset with the source's sha256, no file in two ranks; the epilog
# unmounted it and the daemon is gone. An 8-task job on both nodes with
# shardfs_ranks=node: n1 mounts ranks 0-3, n2 ranks 4-7, each task ran
# where its rank is and read exactly it, the union is the dataset. A mount
# that fails (a bucket that does not exist; a dataset the node does not
# have; a name that tries to leave the config directory) fails the job with
# the reason in its output file and leaves the nodes idle; with
# SHARDFS_SLURM_ON_FAILURE=drain the node is drained ("Prolog error") and
# `scontrol update ... state=resume` brings it back. A stale job directory
# with a symlink at the mountpoint is not followed; shardfs_ranks=node with
# tasks that do not divide over the nodes is refused (prolog and epilog run
# by hand with a 3-node job's environment).
SUITE=slurm
. "$(dirname "$0")/lib.sh"
. "$HERE/s3/s3rver.sh"
SLURM_NODES="n1 n2"
. "$HERE/cluster/slurm.sh"
CONTRIB=$(cd "$HERE/../../contrib/slurm" && pwd)

for b in munged slurmctld slurmd sbatch srun scontrol sinfo squeue; do
	if ! command -v $b >/dev/null; then
		fail "$b is not installed (scripts/install-deps.sh installs slurm-wlm and munge)"
		finish
	fi
done

# slurmctld and slurmd look up this machine's own name and localhost (the
# cluster's address): a fresh Debian install has both in /etc/hosts, a
# debootstrap chroot neither, and without them they never come up.
for h in "$(hostname)" localhost; do
	if ! getent hosts "$h" >/dev/null; then
		fail "'$h' does not resolve (getent hosts): slurmctld and slurmd need it; add it to /etc/hosts"
		finish
	fi
done

# Slurm first in the cleanup: its prolog's mounts and the daemons, by PID.
cleanup_slurm() {
	local m
	slurm_stop
	# (printf %b decodes /proc/mounts' \040 for a space.)
	awk -v d="$T/run-" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r |
		while IFS= read -r m; do
			m=$(printf '%b' "$m")
			fusermount3 -u -z "$m" 2>/dev/null || umount -l --no-canonicalize "$m" 2>/dev/null
		done
	cleanup
}
trap cleanup_slurm EXIT

s3_suite_start bkt
SRC=$T/src
make_dataset "$SRC" 240
head -c $((1 << 20)) /dev/urandom >"$SRC/train/big-1.bin"
head -c $((3 << 19)) /dev/urandom >"$SRC/train/big-2.bin"
check "upload the dataset" aws_s3 cp --recursive "$SRC" "s3://$BUCKET/ds/"

# What an admin installs: dataset configs, credentials for the daemon,
# the settings file.
mkdir -p "$T/etc"
printf '[default]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n' >"$T/aws-credentials"
chmod 600 "$T/aws-credentials"
cat >"$T/etc/ds.conf" <<CONF
[source]
url = s3://$BUCKET/ds/
endpoint = $S3_EP
[shard]
world_size = 1
[cache]
dir = $T/cache
CONF
sed "s|s3://$BUCKET/ds/|s3://no-such-bucket/ds/|" "$T/etc/ds.conf" >"$T/etc/bad.conf"
printf '[source]\nurl = /nonexistent\n' >"$T/bad.conf" # outside the config dir
defaults() { # defaults ON_FAILURE: each node's settings file
	local n
	for n in $SLURM_NODES; do
		mkdir -p "$T/run-$n" "$T/log-$n"
		cat >"$T/defaults.$n" <<DEF
SHARDFS_BIN=$SHARDFS
SHARDFS_SLURM_CONF_DIR=$T/etc
SHARDFS_SLURM_MOUNT_BASE=$T/run-$n
SHARDFS_SLURM_LOG_DIR=$T/log-$n
SHARDFS_SLURM_ON_FAILURE=$1
SHARDFS_SLURM_MOUNT_TIMEOUT=60
export AWS_SHARED_CREDENTIALS_FILE=$T/aws-credentials
export AWS_CONFIG_FILE=$T/aws-config
export AWS_EC2_METADATA_DISABLED=true
DEF
	done
}
defaults fail-job
# The task prolog runs as the job's user: a copy in $T (0755 below), since
# the checkout may be one other users cannot read (under /root).
cp "$CONTRIB/shardfs-taskprolog" "$T/shardfs-taskprolog"
chmod 755 "$T/shardfs-taskprolog"
for s in prolog epilog taskprolog; do
	script=$CONTRIB/shardfs-$s
	[ "$s" = taskprolog ] && script=$T/shardfs-taskprolog
	printf '#!/bin/sh\nSHARDFS_SLURM_DEFAULTS=%s.$SLURMD_NODENAME exec %s\n' "$T/defaults" "$script" >"$T/$s"
	chmod 755 "$T/$s"
done

if ! slurm_start "$T/prolog" "$T/epilog" "$T/taskprolog"; then
	fail "slurm start (munged, slurmctld, slurmd)"
	finish
fi
ok "slurm up: n1 $(slurm_node_state n1), n2 $(slurm_node_state n2)"

job_field() { timeout 10 scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
# submit NAME COMMENT SBATCH_ARGS...: runs the example job; sets JOB.
submit() {
	local name=$1 comment=$2
	shift 2
	mkdir -p "$T/out-$name"
	JOB=$(timeout 30 sbatch --parsable "$@" --comment="$comment" -o "$T/$name.out" \
		"$CONTRIB/shardfs-read.sbatch" "$T/out-$name" 2>"$T/$name.sbatch.err")
	[ -n "$JOB" ] || { cat "$T/$name.sbatch.err" >&2; return 1; }
}
no_job_mounts() { ! grep -qs " $T/run-" /proc/mounts; }
no_daemon_of() { ! pgrep -f -- "/job-$1/" >/dev/null; }
all_idle() { test "$(timeout 10 sinfo -h -t idle -o %D 2>/dev/null)" = 2; }
wait_until() { # wait_until SECONDS CMD...: SECONDS of wall time, however long CMD takes
	local end=$((SECONDS + $1)); shift
	while [ "$SECONDS" -lt "$end" ]; do "$@" && return 0; sleep 0.1; done
	"$@"
}
(cd "$SRC" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) |
	sed 's|  \./|  |' | LC_ALL=C sort >"$T/src.sha"
# ranks_read NAME WORLD: each task's files are `shardfs plan --rank R`'s
# keys, the union is the dataset; prints the failures.
ranks_read() {
	local r bad=""
	for ((r = 0; r < $2; r++)); do
		sed 's|^[0-9a-f]*  \./||' "$T/out-$1/task-$r.sha256" 2>/dev/null | LC_ALL=C sort >"$T/got.$r"
		"$SHARDFS" plan "$T/etc/ds.conf" -o shard.world_size="$2" --rank $r 2>/dev/null |
			LC_ALL=C sort >"$T/want.$r"
		{ [ -s "$T/want.$r" ] && cmp -s "$T/got.$r" "$T/want.$r"; } || bad="$bad rank$r"
	done
	cat "$T"/out-"$1"/task-*.sha256 | sed 's|  \./|  |' | LC_ALL=C sort >"$T/union.sha"
	cmp -s "$T/union.sha" "$T/src.sha" || bad="$bad union"
	echo "# $1: tasks read $(cat "$T"/got.* | wc -l) files of $(wc -l <"$T/src.sha"): $(for ((r = 0; r < $2; r++)); do printf '%s ' "$(wc -l <"$T/got.$r")"; done)"
	rm -f "$T"/got.* "$T"/want.*
	[ -z "$bad" ] || { echo "# $1: wrong:$bad"; return 1; }
}

# --- a 4-task job reads its ranks --------------------------------------------
if submit good "shardfs=ds" -N 1 -n 4 && slurm_wait_job "$JOB" 120; then
	check "job $JOB completed (state $(job_field "$JOB" JobState), exit $(job_field "$JOB" ExitCode))" \
		test "$(job_field "$JOB" JobState)" = COMPLETED
else
	fail "the good job did not finish in 120 s" "$(cat "$T/good.out" 2>/dev/null)"
fi
N=$(job_field "$JOB" NodeList)
check "the prolog on $N mounted it with the job's world size (the job saw .shardfs/plan)" bash -c \
	"grep -q '^world_size 4\$' '$T/good.out' && grep -q 'job $JOB on $N: mounted $T/etc/ds.conf at $T/run-$N/job-$JOB/ds (world size 4, ranks all)' '$T/log-$N/prolog.log'"
check "each task read exactly its rank's files (= shardfs plan --rank R), the union is the dataset, bytes identical, none twice" \
	ranks_read good 4
check "the epilog unmounted it and removed the job's directory" bash -c \
	"$(declare -f no_job_mounts); no_job_mounts && test ! -e '$T/run-$N/job-$JOB' && grep -q 'job $JOB on $N: unmounted $T/run-$N/job-$JOB/ds' '$T/log-$N/epilog.log'"
check "the daemon of the job's mount is gone" wait_until 20 no_daemon_of "$JOB"
check "the nodes are idle" wait_until 20 all_idle

# --- a job of a user who is not root -----------------------------------------------
# The user's tasks need the suite's wrappers and settings (0755 dir) and a
# directory of their own for the output.
chmod 755 "$T"
mkdir -p "$T/out-nonroot"
chown nobody "$T/out-nonroot"
JOB=$(timeout 30 sbatch --parsable --uid=nobody -N 1 -n 4 --comment=shardfs=ds \
	-o "$T/out-nonroot/job.out" "$CONTRIB/shardfs-read.sbatch" "$T/out-nonroot" 2>"$T/nonroot.err")
if [ -n "$JOB" ] && slurm_wait_job "$JOB" 120; then
	check "a job of user nobody completed (state $(job_field "$JOB" JobState))" \
		test "$(job_field "$JOB" JobState)" = COMPLETED
	check "its tasks ran as nobody, in a job directory of nobody's, mode 700 ($(grep -o '(user .*)' "$T/out-nonroot/job.out"))" \
		grep -q '^dataset at .* (user nobody, directory nobody 700); plan:$' "$T/out-nonroot/job.out"
	check "its tasks read their ranks through allow_other" ranks_read nonroot 4
else
	fail "a job of user nobody" "$(cat "$T/nonroot.err" "$T/out-nonroot/job.out" 2>/dev/null)"
fi

# --- 8 tasks on two nodes, each node mounting its own ranks -----------------------
if submit twonode "shardfs=ds,shardfs_ranks=node" -N 2 -n 8 && slurm_wait_job "$JOB" 120; then
	check "two-node job $JOB completed (state $(job_field "$JOB" JobState), nodes $(job_field "$JOB" NodeList))" \
		test "$(job_field "$JOB" JobState)" = COMPLETED
else
	fail "the two-node job did not finish in 120 s" "$(cat "$T/twonode.out" 2>/dev/null)"
fi
check "n1's prolog mounted ranks 0-3, n2's ranks 4-7, of world size 8" bash -c \
	"grep -q 'job $JOB on n1: mounted .* (world size 8, ranks 0-3)' '$T/log-n1/prolog.log' && grep -q 'job $JOB on n2: mounted .* (world size 8, ranks 4-7)' '$T/log-n2/prolog.log'"
check "tasks 0-3 ran on n1 and 4-7 on n2, each finding its rank mounted there" test \
	"$(sed -n 's/^task \([0-9]*\) on \(n[12]\) read .*/\1:\2/p' "$T/twonode.out" | sort -n | tr '\n' ' ')" = \
	"0:n1 1:n1 2:n1 3:n1 4:n2 5:n2 6:n2 7:n2 "
check "each task read exactly its rank's files, the union over both nodes is the dataset" \
	ranks_read twonode 8
check "both epilogs unmounted" bash -c \
	"$(declare -f no_job_mounts); no_job_mounts && grep -q 'job $JOB on n1: unmounted' '$T/log-n1/epilog.log' && grep -q 'job $JOB on n2: unmounted' '$T/log-n2/epilog.log'"
check "the nodes are idle" wait_until 20 all_idle

# --- failing mounts fail the job, not the node ---------------------------------
failing_job() { # failing_job NAME COMMENT EXPECTED_REASON
	if ! submit "$1" "$2" -N 1 -n 4 || ! slurm_wait_job "$JOB" 120; then
		fail "$1: the job did not finish in 120 s"
		return
	fi
	local n
	n=$(job_field "$JOB" NodeList)
	check "$1: job $JOB failed (state $(job_field "$JOB" JobState), exit $(job_field "$JOB" ExitCode))" \
		test "$(job_field "$JOB" JobState)" = FAILED
	check "$1: the reason is in the job's output file" \
		grep -q -- "^shardfs: job $JOB on $n: $3" "$T/$1.out"
	check "$1: the job script never ran" bash -c "! grep -q 'dataset at' '$T/$1.out'"
	check "$1: logged as an error in $n's prolog.log" \
		grep -q -- " err job $JOB on $n: $3" "$T/log-$n/prolog.log"
	wait_until 20 all_idle
	check "$1: the nodes are idle, not drained ($(timeout 10 sinfo -h -N -o '%N:%t' | tr '\n' ' '))" all_idle
	check "$1: nothing left mounted or behind" bash -c \
		"$(declare -f no_job_mounts); no_job_mounts && test ! -e '$T/run-$n/job-$JOB' -a ! -e '$T/run-$n/job-$JOB.failed'"
}
failing_job missing-bucket "shardfs=bad" \
	"mounting dataset 'bad' ($T/etc/bad.conf) at $T/run-n[12]/job-[0-9]*/bad failed, exit 1: .*HTTP 404 NoSuchBucket"
echo "# the user sees: $(grep '^shardfs: job' "$T/missing-bucket.out" | head -1)"
failing_job unknown-dataset "shardfs=nosuch" \
	"no dataset 'nosuch' on this node ($T/etc/nosuch.conf does not exist)"
failing_job escape "shardfs=../bad" "dataset name '../bad' is not allowed"

# --- the strict choice: drain the node -------------------------------------------
defaults drain
if submit drain "shardfs=bad" -N 1 -n 4; then
	drained() { timeout 10 sinfo -h -R -o '%E|%N' 2>/dev/null | grep -q .; }
	wait_until 60 drained
	IFS='|' read -r reason DN < <(timeout 10 sinfo -h -R -o '%E|%N' 2>/dev/null)
	check "drain: a failed mount drains the node (${DN:-none}: $(slurm_node_state "${DN:-n1}"))" \
		bash -c "case '$(slurm_node_state "${DN:-n1}")' in drain*) exit 0 ;; esac; exit 1"
	check "drain: sinfo -R gives the reason ($reason)" test "$reason" = "Prolog error"
	check "drain: the prolog said so in its log" \
		grep -q "job $JOB on $DN: draining this node" "$T/log-$DN/prolog.log"
	echo "# job $JOB: state $(job_field "$JOB" JobState), reason $(job_field "$JOB" Reason)"
	timeout 10 scancel "$JOB"
	slurm_wait_job "$JOB" 60
	timeout 10 scontrol update nodename="$DN" state=resume
	check "drain: scontrol update nodename=$DN state=resume brings it back" wait_until 30 all_idle
	check "drain: nothing left behind" bash -c \
		"$(declare -f no_job_mounts); no_job_mounts && test ! -e '$T/run-$DN/job-$JOB' -a ! -e '$T/run-$DN/job-$JOB.failed'"
else
	fail "drain: submit"
fi
defaults fail-job

# --- by hand: node 2 of 3, 12 tasks -> ranks 4-7; a stale job directory ------------
fake_job() { # fake_job SCRIPT NTASKS: a 3-node job's environment, node n2 (the
	# variables slurmd 22.05 gives a prolog: SLURM_NODELIST, not SLURM_JOB_NODELIST)
	env -i SLURM_JOB_ID=9999 SLURM_NODELIST='n[1-3]' SLURMD_NODENAME=n2 \
		SLURM_JOB_NUM_NODES=3 SLURM_JOB_NTASKS=$2 SLURM_JOB_UID=0 SLURM_JOB_GID=0 \
		SLURM_JOB_COMMENT='shardfs=ds,shardfs_ranks=node' SLURM_CONF="$SLURM_CONF" \
		SHARDFS_SLURM_DEFAULTS="$T/defaults.n1" "$CONTRIB/shardfs-$1" 2>>"$T/fake.err"
}
# A stale job directory (a requeue after a crash) with a symlink where the
# mountpoint goes must not make the prolog (root) mount somewhere else.
mkdir -p "$T/run-n1/job-9999" "$T/victim"
ln -s "$T/victim" "$T/run-n1/job-9999/ds"
fake_job prolog 12
M9=$T/run-n1/job-9999/ds
check "a stale job directory is replaced: the symlink's target is not mounted on" bash -c \
	"! grep -qs ' $T/victim ' /proc/mounts && test ! -L '$M9' && grep -qs ' $M9 fuse' /proc/mounts"
check "ranks=node: node 2 of 3 with 12 tasks shows rank-4 .. rank-7" test \
	"$(ls "$M9" 2>/dev/null | tr '\n' ' ')" = "rank-4 rank-5 rank-6 rank-7 "
check "ranks=node: the plan is the whole job's (world_size 12)" grep -q '^world_size 12$' "$M9/.shardfs/plan"
# A process Slurm could not kill still has a file open: the epilog
# detaches the mount lazily and says so.
busy=$(find "$M9"/rank-4 -type f -size +0 | head -n 1)
exec 9<"$busy"
fake_job epilog 12
check "ranks=node: the epilog unmounts it, lazily while a file is open" bash -c \
	"$(declare -f no_job_mounts); no_job_mounts && test ! -e '$T/run-n1/job-9999' && grep -q 'job 9999 on n2: $M9 was busy or did not answer: detached lazily' '$T/log-n1/epilog.log'"
exec 9<&-
fake_job prolog 10
check "ranks=node: 10 tasks on 3 nodes is refused with the reason" \
	grep -q "shardfs_ranks=node needs a known world size that divides evenly over the job's 3 nodes" "$T/run-n1/job-9999.failed"
fake_job epilog 10
check "ranks=node: the epilog clears the failure" test ! -e "$T/run-n1/job-9999.failed"

# --- what the job's user put in the job directory (theirs after the prolog) ------
# A FUSE mount named with a glob character ("x*") next to a symlink "xlink"
# to a mount that is not the job's, and a mount whose name has a space:
# the epilog (root) unmounts the job's mounts and never the symlink's target.
fake_job prolog 12
J9=$T/run-n1/job-9999
mkdir -p "$T/foreign" "$J9/x*" "$J9/a b"
MOUNTS+=("$T/foreign")
"$SHARDFS" mount "$T/etc/ds.conf" "$T/foreign" -o cache.dir="$T/cache-foreign" 2>>"$T/fake.err"
"$SHARDFS" mount "$T/etc/ds.conf" "$J9/x*" -o cache.dir="$T/cache-x" 2>>"$T/fake.err"
mount -t tmpfs -o size=1m shardfs-test "$J9/a b"
ln -s "$T/foreign" "$J9/xlink"
check "the user's mounts are there: x*, a b (and the job's ds)" test \
	"$(grep -c " $J9/" /proc/mounts)" = 3
fake_job epilog 12
check "the epilog leaves the symlink's target (a foreign mount) mounted" \
	grep -qs " $T/foreign fuse.shardfs " /proc/mounts
check "the epilog unmounted the job's mount, the glob-named one and the one with a space" bash -c \
	"$(declare -f no_job_mounts); no_job_mounts && test ! -e '$J9'"
echo "# epilog.log: $(grep -c 'job 9999 on n2: unmounted' "$T/log-n1/epilog.log") unmount lines"
"$SHARDFS" unmount "$T/foreign" >/dev/null 2>&1 || fusermount3 -u -z "$T/foreign" 2>/dev/null

# --- a mount that does not answer (its daemon stopped) ---------------------------
# Each unmount in the epilog has a timeout: the epilog detaches the mount
# lazily instead of hanging until Slurm's PrologEpilogTimeout.
fake_job prolog 12
hung=$(pgrep -f -- " mount $T/etc/ds.conf $M9 ")
if [ "$(echo "$hung" | wc -w)" = 1 ] && kill -STOP "$hung"; then
	t0=$(date +%s)
	timeout 60 env -i SLURM_JOB_ID=9999 SLURMD_NODENAME=n2 \
		SHARDFS_SLURM_DEFAULTS="$T/defaults.n1" SHARDFS_SLURM_UNMOUNT_TIMEOUT=3 \
		"$CONTRIB/shardfs-epilog" 2>>"$T/fake.err"
	rc=$?
	check "a hung mount: the epilog finished (exit $rc, $(($(date +%s) - t0)) s; 124 = hung for 60 s)" test $rc = 0
	check "a hung mount: detached lazily, and said so" bash -c \
		"$(declare -f no_job_mounts); no_job_mounts && test ! -e '$J9' && grep -q 'job 9999 on n2: $M9 was busy or did not answer: detached lazily' '$T/log-n1/epilog.log'"
	kill -CONT "$hung"
	check "a hung mount: its daemon exits once resumed" wait_until 30 no_daemon_of 9999
else
	fail "a hung mount: the daemon of $M9 (pids: $hung)"
fi

# --- the cluster stops -------------------------------------------------------------
# slurm_stop stops what slurm_start started: no daemon the pid files name
# outlives the suite.
daemon_pids() { cat "$SL"/slurmctld.pid "$SL"/slurmd-*.pid 2>/dev/null; }
pids=$(daemon_pids | tr '\n' ' ')
slurm_stop
check "slurm_stop: slurmctld and the slurmds are gone (pids $pids)" bash -c \
	"test -n '$pids' && for p in $pids; do ! kill -0 \$p 2>/dev/null || exit 1; done"

finish
