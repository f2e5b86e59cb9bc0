#!/bin/sh
# Installs the Debian packages shardfs needs to build, test and demo, if any
# are missing. Runs apt-get update at most once, and only when something is
# missing. Needs root for the install step; says so otherwise.
#
# --bench adds what only `make bench` uses (peers and trainers, below):
# `make check` never installs them.
set -eu

bench=0
for a in "$@"; do
	case $a in
	--bench) bench=1 ;;
	*) echo "install-deps.sh: unknown argument '$a' (--bench)" >&2; exit 2 ;;
	esac
done

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
# Fuzzing (tests/fuzz, part of check): clang 14 and its libFuzzer runtime.
PKGS="$PKGS clang libclang-rt-14-dev"
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
# make bench only: the peers s3fs and rclone, curl (raw GETs, the server's
# limit), squashfuse_ll with mksquashfs (a plain C FUSE filesystem over the
# same small files) and PyTorch (the DataLoader trainer; Debian's
# python3-torch works with /usr/bin/python3 only).
if [ "$bench" = 1 ]; then
	PKGS="$PKGS s3fs rclone curl squashfuse squashfs-tools python3-torch"
fi
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "shardfs: installing missing Debian packages:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "shardfs: not root: run 'apt-get install$missing' as root first" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
