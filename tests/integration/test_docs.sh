#!/usr/bin/env bash
# The documentation names what the code has (docs_check.py): every command
# of `shardfs --help` has a row in README.md's command table; every row,
# with its options, is in shardfs(8)'s SYNOPSIS, which also has every
# option of each command's usage line; every key of mount/config.c's table
# is documented in shardfs.conf(5) under its section, and README.md's ini
# examples use no other; README.md names every fuzz harness. Then the
# checker must notice a key removed from a copy of shardfs.conf(5).
SUITE=docs
. "$(dirname "$0")/lib.sh"

ROOT=$(cd "$HERE/../.." && pwd)
/usr/bin/python3 "$HERE/docs_check.py" "$ROOT" "$SHARDFS" >"$T/check.out" 2>&1
rc=$?
while IFS= read -r line; do
	case $line in
	"ok - "*) ok "${line#ok - }" ;;
	"FAIL - "*) fail "${line#FAIL - }" ;;
	*) echo "# $line" ;;
	esac
done <"$T/check.out"
check "docs_check.py exits 0 exactly when every check passed (exit $rc)" \
	test "$rc" -eq "$((FAILED > 0))"

# The checker is not blind: a copy of the tree whose shardfs.conf(5) lacks
# [cache] fsync.
mkdir -p "$T/copy/man" "$T/copy/mount" "$T/copy/tests"
cp "$ROOT/README.md" "$T/copy/"
cp "$ROOT/man/shardfs.8" "$ROOT/man/shardfs.conf.5" "$T/copy/man/"
cp "$ROOT/mount/config.c" "$T/copy/mount/"
cp -r "$ROOT/tests/fuzz" "$T/copy/tests/"
sed -i '/^\.B fsync$/d' "$T/copy/man/shardfs.conf.5"
/usr/bin/python3 "$HERE/docs_check.py" "$T/copy" "$SHARDFS" >"$T/copy.out" 2>&1
rc=$?
check "the checker fails a shardfs.conf(5) without [cache] fsync, naming it (exit $rc)" \
	bash -c "test $rc -ne 0 && grep -q '^FAIL - shardfs.conf(5) documents every key.*missing: \[cache\] fsync' '$T/copy.out'"
finish
