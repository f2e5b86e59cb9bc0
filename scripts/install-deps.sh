#!/bin/sh
# Installs the Debian packages shardfs needs to build, test, demo and
# benchmark, if any are missing, then checks that every command those
# run is there (command -v), naming each missing one and its package.
# Runs apt-get update at most once, and only when something is missing.
# Needs root for the install step; says so otherwise.
#
#   install-deps.sh          what make check and make demo need
#   install-deps.sh bench    that and the benchmarks' peers (make bench)
set -eu

WHAT=${1:-check}
case $WHAT in
check | demo | bench) ;;
*)
	echo "usage: install-deps.sh [check|demo|bench] (not '$WHAT')" >&2
	exit 2
	;;
esac

PKGS="gcc make pkg-config libfuse3-dev fuse3 libssl-dev check \
python3 clang-format"
# S3 backend: libcurl, expat (XML), jansson (credential JSON); its tests use
# awscli to upload, botocore to cross-check SigV4, and Node for s3rver (the
# machine image ships Node 20; Debian's nodejs + npm only when it has none).
# The GCS suite's emulator (firebase-tools 15, tests/integration/gcs) needs
# Node 20 or later: with Debian 12's nodejs 18, gcs_emulator.sh fetches a
# pinned Node 20 from the npm registry for the emulator alone.
PKGS="$PKGS libcurl4-openssl-dev libexpat1-dev libjansson-dev awscli \
python3-botocore"
# Cache: LMDB (index), zlib (gzip), ISA-L (CRC-32 and CRC-32C).
PKGS="$PKGS liblmdb-dev zlib1g-dev libisal-dev"
# Operations: libsystemd (readiness, journal), libmicrohttpd (metrics
# endpoint); systemd-analyze checks the units, groff/man-db render the man
# pages, the prometheus client parses the metrics, PyYAML the Kubernetes
# manifests; Slurm (slurmctld, slurmd, munge) runs the cluster test.
PKGS="$PKGS libsystemd-dev libmicrohttpd-dev systemd groff-base man-db \
python3-prometheus-client python3-yaml slurm-wlm munge"
# GCS credentials: the fake token endpoint (tests/integration/gcs) verifies
# the RS256 JWT with PyJWT and cryptography.
PKGS="$PKGS python3-jwt python3-cryptography"
# NFS backend: libnfs (user-space NFS client, no kernel mount); its tests
# run nfs-ganesha with the VFS FSAL on 127.0.0.1 (tests/integration/nfs),
# and the bench compares with libnfs' own nfs-cp (libnfs-utils). On a host
# where systemd runs, the package also enables Debian's nfs-ganesha service
# (its default config exports nothing); the tests start their own server and
# never use it: `systemctl disable --now nfs-ganesha` if it is not wanted.
PKGS="$PKGS libnfs-dev nfs-ganesha nfs-ganesha-vfs libnfs-utils"
# The Python helper (python/, tests/integration/test_python.sh): Debian's
# torch and pytest for /usr/bin/python3, and a venv (--system-site-packages)
# that installs the package offline with Debian's pip and setuptools;
# python3-crcmod is its optional CRC-32C accelerator (C), tested too.
PKGS="$PKGS python3-torch python3-pytest python3-venv python3-pip python3-setuptools \
python3-crcmod"
# Transforms (transform/, tests/unit/check_transform): bubblewrap is the
# default sandbox of a transform's processes; the suite's real transform
# decodes and resizes JPEGs with Pillow.
PKGS="$PKGS bubblewrap python3-pil"
# Fuzzing (tests/fuzz, part of check): clang 14 and its libFuzzer runtime.
PKGS="$PKGS clang libclang-rt-14-dev"

# Every command the build, the tests (unit, integration, fuzz), the demo
# and the benchmarks run, with the package that has it: its package is
# installed with the others, and after the install each command is
# looked for (a path: must be executable; else command -v), so a missing
# one is named here, once, not as "command not found" in every suite. A
# minimal Debian (debootstrap --variant=minbase) lacks curl and procps,
# which the servers' start-up probes and the suites use. Commands of
# Essential packages are listed too: an image may have removed one.
# Found by reading the Makefile, scripts/, tests/ (shell, Python
# subprocess and the unit suites' popen/system) and contrib/ (the Slurm
# scripts the suites run); tests/integration/run.sh fails a suite whose
# output says "command not found", naming the command to add here.
COMMANDS="
cc gcc
make make
pkg-config pkg-config
ar binutils
readelf binutils
clang clang
clang-format clang-format
git git
/usr/bin/python3 python3
/usr/bin/aws awscli
node nodejs
npm npm
curl curl
pgrep procps
fusermount3 fuse3
mount mount
umount mount
mountpoint util-linux
setpriv util-linux
bwrap bubblewrap
unshare util-linux
flock util-linux
setsid util-linux
script bsdutils
logger bsdutils
hostname hostname
ldd libc-bin
getent libc-bin
openssl openssl
groff groff-base
man man-db
systemd-analyze systemd
ganesha.nfsd nfs-ganesha
nfs-cp libnfs-utils
munged munge
slurmctld slurm-wlm
slurmd slurm-wlm
sbatch slurm-wlm
srun slurm-wlm
scontrol slurm-wlm
sinfo slurm-wlm
squeue slurm-wlm
bash bash
awk mawk
sed sed
grep grep
find findutils
xargs findutils
cmp diffutils
diff diffutils
timeout coreutils
numfmt coreutils
mkfifo coreutils
sha256sum coreutils
stat coreutils
truncate coreutils
realpath coreutils
mktemp coreutils
seq coreutils
sort coreutils
join coreutils
comm coreutils
cut coreutils
uniq coreutils
tr coreutils
wc coreutils
head coreutils
tail coreutils
tee coreutils
dd coreutils
du coreutils
nproc coreutils
nice coreutils
paste coreutils
fmt coreutils
nl coreutils
install coreutils
"
# Python modules the suites import beyond the standard library.
MODULES="
botocore python3-botocore
yaml python3-yaml
jwt python3-jwt
cryptography python3-cryptography
PIL python3-pil
prometheus_client python3-prometheus-client
"
# make bench: the peers it compares with (tests/bench/bench.py): s3fs and
# rclone, squashfuse_ll with mksquashfs (a plain C FUSE filesystem over the
# same small files); PyTorch for the DataLoader trainer (Debian's
# python3-torch works with /usr/bin/python3 only; make check's Python
# suites install it too).
if [ "$WHAT" = bench ]; then
	COMMANDS="$COMMANDS
s3fs s3fs
rclone rclone
squashfuse_ll squashfuse
mksquashfs squashfs-tools
"
	MODULES="$MODULES
torch python3-torch
"
fi

# The image may ship its own Node (npm comes with it): Debian's only when
# there is none.
for p in $(printf '%s\n' "$COMMANDS" | awk 'NF == 2 && $1 != "node" && $1 != "npm" {print $2}' | sort -u); do
	PKGS="$PKGS $p"
done
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"

missing=""
for p in $PKGS; do
	case " $missing " in *" $p "*) continue ;; esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done

if [ -n "$missing" ]; then
	echo "shardfs: installing missing Debian packages:$missing"
	if [ "$(id -u)" != 0 ]; then
		echo "shardfs: not root: run 'apt-get install$missing' as root first" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing
fi

# What the suites will run, looked for now.
installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}
absent=""
pkgs=""
while read -r cmd pkg; do
	[ -n "$cmd" ] || continue
	case $cmd in
	/*) [ -x "$cmd" ] && continue ;;
	*) command -v "$cmd" >/dev/null 2>&1 && continue ;;
	esac
	if installed "$pkg"; then
		absent="$absent $cmd ($pkg is installed, but $cmd is not on PATH=$PATH)"
	else
		absent="$absent $cmd ($pkg)"
		pkgs="$pkgs $pkg"
	fi
done <<EOF
$COMMANDS
EOF
while read -r mod pkg; do
	[ -n "$mod" ] || continue
	/usr/bin/python3 -c "import $mod" >/dev/null 2>&1 && continue
	absent="$absent python3 module $mod ($pkg)"
	pkgs="$pkgs $pkg"
done <<EOF
$MODULES
EOF
if [ -n "$absent" ]; then
	echo "shardfs: missing commands the build and tests run:$absent" >&2
	[ -z "$pkgs" ] ||
		echo "shardfs: install them (apt-get install$(printf '%s\n' $pkgs | sort -u | tr '\n' ' ' | sed 's/ $//; s/^/ /')) and run this again" >&2
	exit 1
fi
