#!/usr/bin/env bash
# The config file syntax and the source checks through the real binary:
# long lines and comments in a config that mounts, [source] allow_empty
# (an empty source refused by plan, warm and mount alike, served when
# allowed), and the one rank-list grammar of `plan --rank` and
# `warm --rank`.
SUITE=config
. "$(dirname "$0")/lib.sh"

SRC=$T/src
make_dataset "$SRC" 40
M=$T/mnt

# --- long lines and comments -------------------------------------------------
# A source path of ~300 bytes (Debian's inih stopped at 199) under a
# directory whose name holds " #", which must be quoted.
LONG=$T/$(printf 'p%.0s' $(seq 120))/$(printf 'q%.0s' $(seq 120))
mkdir -p "$(dirname "$LONG")"
mkdir -p "$T/run #1"
cp -r "$SRC" "$LONG"
cp -r "$SRC" "$T/run #1/src"
C=$T/long.conf
cat >"$C" <<CONF
# a config an admin would write
[source]
url = $LONG    # ${#LONG} bytes of path
[shard]        ; ranks of this node
world_size = 4 # four trainers
ranks = 0-1, 3 # not rank 2
[cache]
dir = $T/cache # node-local
CONF
"$SHARDFS" plan "$C" >"$T/long.plan" 2>&1
check "a ${#LONG}-byte path, inline '#' and ';' comments: plan works" \
	grep -q '^manifest_items 40$' "$T/long.plan"
if mount_shardfs "$C" "$M"; then
	check "the mount shows rank-0, rank-1, rank-3 only" bash -c \
		"[ \"\$(ls '$M' | grep '^rank-' | tr '\n' ' ')\" = 'rank-0 rank-1 rank-3 ' ]"
	check "unmount" umount_shardfs "$M"
else
	fail "mount with long lines and comments"
fi
printf '[source]\nurl = "%s"  # quoted: it holds " #"\n' "$T/run #1/src" >"$T/quoted.conf"
"$SHARDFS" plan "$T/quoted.conf" >"$T/quoted.plan" 2>&1
check "a quoted value keeps ' #'" bash -c \
	"grep -q '^manifest_items 40\$' '$T/quoted.plan'"
{ printf '[source]\nurl = /'; head -c 70000 /dev/zero | tr '\0' a; echo; } >"$T/huge.conf"
"$SHARDFS" plan "$T/huge.conf" >/dev/null 2>"$T/huge.err"
rc=$?
check "a 70000-byte line: exit 2, file:line named (rc $rc)" bash -c \
	"[ $rc -eq 2 ] && grep -q '$T/huge.conf:2: line too long (more than 65536 bytes)' '$T/huge.err'"

# --- allow_empty ---------------------------------------------------------
E=$T/empty
mkdir -p "$E"
printf '[source]\nurl = %s\n[cache]\ndir = %s\n' "$E" "$T/cache" >"$T/empty.conf"
for cmd in plan warm; do
	"$SHARDFS" $cmd "$T/empty.conf" >/dev/null 2>"$T/$cmd.err"
	rc=$?
	check "$cmd of an empty source exits 1 (rc $rc)" test $rc -eq 1
	check "$cmd names the source and allow_empty" bash -c \
		"grep -q 'the source $E lists 0 objects' '$T/$cmd.err' && grep -q 'allow_empty = true' '$T/$cmd.err'"
done
mkdir -p "$M"
"$SHARDFS" mount "$T/empty.conf" "$M" -f >/dev/null 2>"$T/mount.err" &
pid=$!
PIDS+=("$pid")
MOUNTS+=("$(realpath "$M")")
# Bounded: a daemon that mounted the empty source would serve forever.
for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
	rc=running
	fusermount3 -u "$M" 2>/dev/null
else
	rc=0
	wait "$pid" || rc=$?
fi
check "mount of an empty source exits 1 and does not mount (rc $rc)" bash -c \
	"[ $rc = 1 ] && ! grep -qs ' $(realpath "$M") ' /proc/mounts"
check "mount names the source and allow_empty" \
	grep -q "allow_empty = true" "$T/mount.err"
# Only hidden keys: everything skipped is empty too.
mkdir -p "$T/skipped/a/"
printf '[source]\nurl = %s\n' "$T/skipped" >"$T/skipped.conf"
"$SHARDFS" plan "$T/skipped.conf" >/dev/null 2>&1
check "a source of only empty directories exits 1" test $? -eq 1
# A pinned manifest with no entry.
"$SHARDFS" manifest "$E" -o "$T/empty.tsv" >/dev/null 2>&1
printf '[source]\nurl = %s\nmanifest = %s\n' "$SRC" "$T/empty.tsv" >"$T/pinned.conf"
"$SHARDFS" plan "$T/pinned.conf" >/dev/null 2>"$T/pinned.err"
rc=$?
check "an empty pinned manifest exits 1, naming it (rc $rc)" bash -c \
	"[ $rc -eq 1 ] && grep -q 'pinned manifest $T/empty.tsv has 0 entries' '$T/pinned.err'"
"$SHARDFS" plan "$T/empty.conf" -o source.allow_empty=true >"$T/ae.plan" 2>&1
check "allow_empty = true: plan works, 0 items" \
	grep -q '^manifest_items 0$' "$T/ae.plan"
if mount_shardfs "$T/empty.conf" "$M" -o source.allow_empty=true; then
	check "allow_empty = true: mounts an empty rank-0" bash -c \
		"[ -d '$M/rank-0' ] && [ -z \"\$(ls -A '$M/rank-0')\" ]"
	check "unmount the empty mount" umount_shardfs "$M"
else
	fail "allow_empty = true: mount"
fi

# --- one rank-list grammar ------------------------------------------------
printf '[source]\nurl = %s\n[shard]\nworld_size = 4\n[cache]\ndir = %s\n' \
	"$SRC" "$T/cache" >"$T/r.conf"
mount_shardfs "$T/r.conf" "$M" || fail "mount for rank orders"
"$SHARDFS" plan "$T/r.conf" --rank 2 >"$T/one.out"
check "plan --rank 2 = .shardfs/rank-2.order, byte for byte" \
	cmp -s "$T/one.out" "$M/.shardfs/rank-2.order"
"$SHARDFS" plan "$T/r.conf" --rank '0-1, 3' >"$T/list.out"
rc=$?
{ for r in 0 1 3; do echo "# rank $r"; cat "$M/.shardfs/rank-$r.order"; done; } >"$T/list.want"
check "plan --rank '0-1, 3': each rank's order after '# rank R' (rc $rc)" \
	cmp -s "$T/list.out" "$T/list.want"
"$SHARDFS" plan "$T/r.conf" --rank 3 --rank 1-1 >"$T/rep.out"
{ for r in 1 3; do echo "# rank $r"; cat "$M/.shardfs/rank-$r.order"; done; } >"$T/rep.want"
check "plan --rank repeated: the union, in rank order" cmp -s "$T/rep.out" "$T/rep.want"
umount_shardfs "$M" || fail "unmount after rank orders"

# Same words for the same mistakes, whichever command reads the list.
for bad in '1,' '2-1' '0-4' 'x' ''; do
	case $bad in
	'1,' | x) why='not a list of ranks and ranges such as 0,2,8-15' ;;
	'2-1') why='range 2-1 ends before it starts' ;;
	'0-4') why='rank 4 is not below world_size 4' ;;
	'') why='empty rank list' ;;
	esac
	for cmd in plan warm; do
		"$SHARDFS" $cmd "$T/r.conf" --rank "$bad" >/dev/null 2>"$T/bad.err"
		rc=$?
		check "$cmd --rank '$bad': exit 2 (rc $rc), '$why'" bash -c \
			"[ $rc -eq 2 ] && grep -qF 'shardfs: $cmd: --rank $bad: $why' '$T/bad.err'"
	done
	if [ -n "$bad" ]; then
		{ cat "$T/r.conf"; printf '[shard]\nranks = %s\n' "$bad"; } >"$T/bad.conf"
		sed -i '3,4d' "$T/bad.conf" # one [shard] section, world_size below
		printf 'world_size = 4\n' >>"$T/bad.conf"
		"$SHARDFS" plan "$T/bad.conf" >/dev/null 2>"$T/bad.err"
		rc=$?
		check "ranks = $bad in the config: exit 2 (rc $rc), '$why'" bash -c \
			"[ $rc -eq 2 ] && grep -qF 'ranks = $bad: $why' '$T/bad.err'"
	fi
done

finish
