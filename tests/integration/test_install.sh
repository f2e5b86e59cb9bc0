#!/usr/bin/env bash
# make install / uninstall into a DESTDIR for two PREFIXes: the files, their
# modes, the absolute binary path in the mount helper and the unit, the man
# pages rendering without a warning and documenting every command; then the
# real thing: `mount -t fuse.shardfs` and an fstab line, run by mount(8)
# with no usable PATH, inside a private mount namespace where the installed
# helper is /sbin/mount.fuse.shardfs (so nothing is left in the real /sbin
# or /usr/local/bin).
SUITE=install
. "$(dirname "$0")/lib.sh"

ROOT=$(cd "$HERE/../.." && pwd)
# The option strings mount(8) hands the helper here, passed on to shardfs.
MOUNT_OPTS="ro,_netdev,allow_other"
FSTAB_OPTS="ro,_netdev,nofail,allow_other,x-systemd.mount-timeout=1min"

mode() { stat -c %a "$1" 2>/dev/null; }

# install_into DESTDIR PREFIX: make install, output in $T/install.log.
install_into() {
	make -s -C "$ROOT" install SHARDFS_BIN="$SHARDFS" DESTDIR="$1" PREFIX="$2" \
		>"$T/install.log" 2>&1
}

for PREFIX in /usr/local /opt/shardfs; do
	D=$T/dest${PREFIX//\//-}
	install_into "$D" "$PREFIX"
	check "make install DESTDIR PREFIX=$PREFIX exits 0" test $? -eq 0
	U=$D$PREFIX/lib/systemd/system/shardfs@.service
	H=$D/sbin/mount.fuse.shardfs
	for f in "$D$PREFIX/bin/shardfs:755" "$H:755" "$U:644" \
		"$D$PREFIX/share/man/man8/shardfs.8:644" \
		"$D$PREFIX/share/man/man5/shardfs.conf.5:644" \
		"$D$PREFIX/share/doc/shardfs/examples/s3.conf:644" \
		"$D$PREFIX/share/doc/shardfs/examples/nfs.conf:644" \
		"$D$PREFIX/share/doc/shardfs/examples/gcs.conf:644" \
		"$D$PREFIX/share/doc/shardfs/examples/fstab:644" \
		"$D$PREFIX/share/doc/shardfs/systemd/transforms.conf:644" \
		"$D$PREFIX/share/doc/shardfs/examples/mnt-imagenet.mount:644"; do
		check "PREFIX=$PREFIX: ${f%:*} mode ${f##*:} (got $(mode "${f%:*}"))" \
			test "$(mode "${f%:*}")" = "${f##*:}"
	done
	check "PREFIX=$PREFIX: the helper runs $PREFIX/bin/shardfs" \
		grep -q "^SHARDFS='$PREFIX/bin/shardfs'\$" "$H"
	check "PREFIX=$PREFIX: the unit runs $PREFIX/bin/shardfs" \
		grep -q "^ExecStart=$PREFIX/bin/shardfs " "$U"
	check "PREFIX=$PREFIX: no placeholder or other bin path left" bash -c \
		"! grep -n '@BINDIR@' '$H' '$U' && { [ '$PREFIX' = /usr/local ] || ! grep -n /usr/local/bin '$H' '$U'; }"
	check "PREFIX=$PREFIX: nothing written to /etc/shardfs" test ! -e "$D/etc/shardfs"
	check "PREFIX=$PREFIX: the helper is valid sh" sh -n "$H"
	check "PREFIX=$PREFIX: the installed binary is the one under test" \
		cmp -s "$D$PREFIX/bin/shardfs" "$SHARDFS"
	make -s -C "$ROOT" uninstall DESTDIR="$D" PREFIX="$PREFIX" >/dev/null 2>&1
	check "PREFIX=$PREFIX: make uninstall removes every file" \
		test -z "$(find "$D" -type f -o -type l)"
done
# SBINDIR and SYSTEMDUNITDIR move those two.
D=$T/dest-dirs
make -s -C "$ROOT" install SHARDFS_BIN="$SHARDFS" DESTDIR="$D" SBINDIR=/usr/sbin \
	SYSTEMDUNITDIR=/etc/systemd/system >/dev/null 2>&1
check "SBINDIR, SYSTEMDUNITDIR are honoured" test -x "$D/usr/sbin/mount.fuse.shardfs" -a \
	-f "$D/etc/systemd/system/shardfs@.service"

# --- man pages ----------------------------------------------------------------
for page in shardfs.8 shardfs.conf.5; do
	groff -man -ww -z "$ROOT/man/$page" >"$T/groff.out" 2>&1
	check "$page: groff -man -ww -z is silent" test ! -s "$T/groff.out"
	MANWIDTH=80 man --warnings -l "$ROOT/man/$page" >/dev/null 2>"$T/man.err"
	check "$page: man --warnings is silent" test ! -s "$T/man.err"
done
# Every command `shardfs --help` lists has its .SS entry in shardfs(8).
cmds=$("$SHARDFS" --help | sed -n '/^commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p')
missing=
for c in $cmds; do
	grep -q "^\.SS \"\?$c\b" "$ROOT/man/shardfs.8" || missing="$missing $c"
done
check "shardfs(8) documents every command of --help ($(echo $cmds)): missing [$missing]" \
	test -n "$cmds" -a -z "$missing"

# --- mount(8) and fstab, for real -----------------------------------------
SRC=$T/src
make_dataset "$SRC" 30
C=$T/etc/ds.conf
mkdir -p "$T/etc"
printf '[source]\nurl = %s\n[cache]\ndir = %s\n' "$SRC" "$T/cache" >"$C"
M=$T/mnt
mkdir -p "$M"
D=$T/real
install_into "$D" /usr/local || fail "install for the real mount" "$(cat "$T/install.log")"
printf '%s %s fuse.shardfs %s 0 0\n' "$C" "$M" "$FSTAB_OPTS" >"$T/fstab"

cat >"$T/ns.sh" <<NS
# Runs in a private mount namespace: the installed tree is bound over the
# real /sbin (its target) and /usr/local/bin here only.
R=$T/ns.results
res() { echo "\$1 \$2" >>"\$R"; }
daemon_gone() {
	for _ in \$(seq 100); do
		pgrep -f "shardfs $C $M" >/dev/null || return 0
		sleep 0.1
	done
	return 1
}
mounted() { grep -q " $M fuse" /proc/self/mounts; }
mount --bind "$D/sbin" "\$(readlink -f /sbin)" || { res fail "bind /sbin"; exit 1; }
mount --bind "$D/usr/local/bin" /usr/local/bin || { res fail "bind /usr/local/bin"; exit 1; }
[ -x /sbin/mount.fuse.shardfs ] && res ok "the helper is /sbin/mount.fuse.shardfs here"

# No PATH at all that could find shardfs: the helper must name it.
timeout 60 env -i PATH=/nonexistent /usr/bin/mount -t fuse.shardfs "$C" "$M" -o "$MOUNT_OPTS" 2>"$T/mount1.err"
rc=\$?
if [ \$rc -eq 0 ] && mounted; then
	res ok "mount -t fuse.shardfs CONFIG MOUNTPOINT -o $MOUNT_OPTS (stripped PATH)"
	diff -r "$M/rank-0" "$SRC" >/dev/null && res ok "mount -t: rank-0 is the dataset, byte for byte" || res fail "mount -t: rank-0 differs"
	umount "$M" && daemon_gone && res ok "mount -t: umount, the daemon exits" || res fail "mount -t: umount"
else
	res fail "mount -t fuse.shardfs -o $MOUNT_OPTS: rc \$rc: \$(tr '\n' ' ' <"$T/mount1.err")"
fi

timeout 60 env -i PATH=/nonexistent /usr/bin/mount -T "$T/fstab" "$M" 2>"$T/mount2.err"
rc=\$?
if [ \$rc -eq 0 ] && mounted; then
	res ok "fstab line ($FSTAB_OPTS): mount -T FSTAB MOUNTPOINT"
	diff -r "$M/rank-0" "$SRC" >/dev/null && res ok "fstab: rank-0 is the dataset, byte for byte" || res fail "fstab: rank-0 differs"
	umount "$M" && daemon_gone && res ok "fstab: umount, the daemon exits" || res fail "fstab: umount"
else
	res fail "fstab line $FSTAB_OPTS: rc \$rc: \$(tr '\n' ' ' <"$T/mount2.err")"
fi

# mount -s (sloppy) reaches shardfs: an option it does not know is a
# warning; without -s the mount fails and names the option.
timeout 60 env -i PATH=/nonexistent /usr/bin/mount -s -t fuse.shardfs "$C" "$M" -o ro,someunknownopt 2>"$T/mount3.err"
rc=\$?
if [ \$rc -eq 0 ] && mounted && grep -q 'someunknownopt: unknown option, ignored (sloppy' "$T/mount3.err"; then
	res ok "mount -s -o ro,someunknownopt: mounts, with a warning naming the option"
else
	res fail "mount -s -o ro,someunknownopt: rc \$rc: \$(tr '\n' ' ' <"$T/mount3.err")"
fi
mounted && { umount "$M"; daemon_gone; }
timeout 60 env -i PATH=/nonexistent /usr/bin/mount -t fuse.shardfs "$C" "$M" -o ro,someunknownopt 2>"$T/mount4.err"
rc=\$?
if [ \$rc -ne 0 ] && ! mounted && grep -q 'someunknownopt: unknown option' "$T/mount4.err"; then
	res ok "mount -o ro,someunknownopt without -s: fails (rc \$rc), naming the option"
else
	res fail "mount -o ro,someunknownopt without -s: rc \$rc: \$(tr '\n' ' ' <"$T/mount4.err")"
fi
mounted && { umount "$M"; daemon_gone; }
NS

if [ "$(id -u)" -ne 0 ] || ! unshare --mount --propagation private true 2>/dev/null; then
	echo "# not root or no unshare: skipping the real mount(8) tests"
else
	: >"$T/ns.results"
	timeout 180 unshare --mount --propagation private bash "$T/ns.sh"
	while read -r verdict name; do
		if [ "$verdict" = ok ]; then ok "$name"; else fail "$name"; fi
	done <"$T/ns.results"
	check "the namespace ran every mount test" test "$(wc -l <"$T/ns.results")" -ge 9
	check "nothing left in the real /sbin" test ! -e /sbin/mount.fuse.shardfs
	check "nothing mounted outside the namespace" bash -c "! grep -q ' $M ' /proc/mounts"
	# A daemon left behind in the dead namespace would be ours: stop it.
	for p in $(pgrep -f "shardfs $C $M"); do PIDS+=("$p"); done
fi

finish
