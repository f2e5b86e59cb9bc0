#!/usr/bin/env bash
# The documentation names what the code has (docs_check.py): every command
# of `shardfs --help` has a row in README.md's command table; every row,
# with its options, is in shardfs(8)'s SYNOPSIS, which also has every
# option of each command's usage line; every key of mount/config.c's table
# is documented in shardfs.conf(5) under its section, and README.md's ini
# examples use no other; README.md names every fuzz harness. Then the
# checker must notice a key removed from a copy of shardfs.conf(5). And
# text the docs quote from the binary: OPERATIONS.md's `shardfs manifest`
# output lines ("Pinning a dataset") and its message of `shardfs status` on
# a dead mount.
# DOCS_ROOT=DIR checks another tree's README.md and docs/ for those two and
# for its links. The link checker must notice a broken #anchor and a
# missing file in a copy of the docs, OPERATIONS.md's table of contents
# missing a section and a backend page off the template.
# The layout (layout_check.py): no include runs up a folder (DESIGN §2),
# fs/ includes no curl or LMDB header, README.md's layout table names every
# source file, a .c over 700 lines says why; and the checker must notice an
# include up, a curl header in fs/, a file the table does not name and a
# long file without a reason, in a copy of the tree.
SUITE=docs
. "$(dirname "$0")/lib.sh"

ROOT=$(cd "$HERE/../.." && pwd)
# relay FILE: a checker's "ok - ..." and "FAIL - ..." lines, as this
# suite's own checks.
relay() {
	while IFS= read -r line; do
		case $line in
		"ok - "*) ok "${line#ok - }" ;;
		"FAIL - "*) fail "${line#FAIL - }" ;;
		*) echo "# $line" ;;
		esac
	done <"$1"
}
/usr/bin/python3 "$HERE/docs_check.py" "$ROOT" "$SHARDFS" >"$T/check.out" 2>&1
rc=$?
relay "$T/check.out"
check "docs_check.py exits 0 exactly when every check passed (exit $rc)" \
	test "$rc" -eq "$((FAILED > 0))"

# Text the docs quote from the binary's output, compared with what it prints
# now (whitespace aside; MOUNTPOINT and the numbers are placeholders).
DOCS=${DOCS_ROOT:-$ROOT} # another tree's docs, to see these checks fail
SRC=$T/src
make_dataset "$SRC" 12
"$SHARDFS" manifest "$SRC" -o "$T/m.tsv" >"$T/manifest.out" 2>&1
want=$(awk '{print $1}' "$T/manifest.out" | paste -sd ' ')
got=$(/usr/bin/python3 - "$DOCS/docs/OPERATIONS.md" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"^ {4}shardfs manifest /\S+ -o \S+\n((?: {4}.*\n)+)", text, re.M)
print(" ".join(l.split()[0] for l in m.group(1).splitlines()) if m else "(no example)")
PY
)
check "OPERATIONS.md's shardfs manifest example shows the lines it prints ($want; OPERATIONS.md: $got)" \
	test "$got" = "$want"

# A dead mount (its daemon killed) and what shardfs status says about it.
M=$T/mnt
printf '[source]\nurl = %s\n[cache]\ndir = %s\n' "$SRC" "$T/cache" >"$T/c.conf"
if mount_shardfs "$T/c.conf" "$M"; then
	kill -9 "$LAST_PID"
	wait "$LAST_PID" 2>/dev/null
	"$SHARDFS" status "$M" >"$T/status.out" 2>&1
	rc=$?
	fusermount3 -u -z "$M" 2>/dev/null
	check "shardfs status on a dead mount exits 1 (exit $rc)" test "$rc" -eq 1
	check "OPERATIONS.md quotes status's dead-mount message as it is printed" \
		/usr/bin/python3 - "$DOCS/docs/OPERATIONS.md" "$T/status.out" "$M" <<'PY'
import re, sys
doc = " ".join(open(sys.argv[1]).read().split())
out = open(sys.argv[2]).read().strip()
msg = out.split(": status: %s: " % sys.argv[3], 1)[-1].replace(sys.argv[3], "MOUNTPOINT")
msg = " ".join(msg.split())
if "`%s`" % msg not in doc:
    print("# printed: %s" % msg)
    m = re.search(r"`(mount is dead[^`]*)`", doc)
    print("# OPERATIONS.md: %s" % (m.group(1) if m else "(no quote)"))
    sys.exit(1)
PY
else
	fail "mount for the dead-mount message"
fi

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
# Links (docs_check.py --links): DOCS_ROOT's tree when it is another one
# (the run above checked this tree's), then a copy of this tree's docs with
# a broken anchor and a missing file added on purpose: the checker names both.
if [ "$DOCS" != "$ROOT" ]; then
	/usr/bin/python3 "$HERE/docs_check.py" --links "$DOCS" >"$T/links.out" 2>&1
	while IFS= read -r line; do
		case $line in
		"ok - "*) ok "DOCS_ROOT: ${line#ok - }" ;;
		"FAIL - "*) fail "DOCS_ROOT: ${line#FAIL - }" ;;
		esac
	done <"$T/links.out"
fi
L=$T/links
mkdir -p "$L/python"
cp -r "$ROOT/README.md" "$ROOT/docs" "$ROOT/man" "$L/"
cp "$ROOT/python/README.md" "$L/python/"
/usr/bin/python3 "$HERE/docs_check.py" --links "$L" >"$T/links-copy.out" 2>&1
check "the link checker passes an unchanged copy of the docs (exit $?)" \
	bash -c "! grep -q '^FAIL' '$T/links-copy.out'"
# a heading that is not there, a file that is not there
printf '\nSee [status](docs/OPERATIONS.md#no-such-heading) and [x](docs/DESIGN-gone.md).\n' >>"$L/README.md"
/usr/bin/python3 "$HERE/docs_check.py" --links "$L" >"$T/links-bad.out" 2>&1
rc=$?
check "the link checker fails a README with a broken #anchor, naming it (exit $rc)" \
	bash -c "test $rc -ne 0 && grep -q '^FAIL - README.md:.*#no-such-heading: no heading' '$T/links-bad.out'"
check "the link checker fails a README linking a missing file, naming it" \
	grep -q '^FAIL - README.md:.*docs/DESIGN-gone.md: no such file' "$T/links-bad.out"
# OPERATIONS.md's table of contents without its "Prometheus metrics" line
sed -i '/^ *- \[Prometheus metrics\](#prometheus-metrics)$/d' "$L/docs/OPERATIONS.md"
/usr/bin/python3 "$HERE/docs_check.py" --links "$L" >"$T/links-toc.out" 2>&1
check "the link checker fails an OPERATIONS.md whose contents miss a section, naming it" \
	grep -q "^FAIL - docs/OPERATIONS.md's table of contents.*not in it: ### Prometheus metrics" "$T/links-toc.out"
# a backend page off the template (its "## Limits" renamed)
sed -i 's/^## Limits$/## Caveats/' "$L/docs/backends/s3.md"
/usr/bin/python3 "$HERE/docs_check.py" --links "$L" >"$T/links-tpl.out" 2>&1
check "the link checker fails a backend page off the template, naming it" \
	grep -q "^FAIL - docs/backends/s3.md has the backend template's sections.*Caveats" "$T/links-tpl.out"

# The layout of the code (layout_check.py), then four ways to break it in
# a copy of the tree, each of which the checker must name.
/usr/bin/python3 "$HERE/layout_check.py" "$ROOT" >"$T/layout.out" 2>&1
rc=$?
relay "$T/layout.out"
check "layout_check.py exits 0 when the layout holds (exit $rc)" test "$rc" -eq 0
Y=$T/layout-copy
mkdir -p "$Y"
(cd "$ROOT" && cp -r README.md util plan records fs cache backends transform mount "$Y/")
printf '#include "fs/fs.h"\n' >>"$Y/cache/warn.c"
printf '#include <curl/curl.h>\n' >>"$Y/fs/order.c"
printf '/* a file the README does not name */\n' >"$Y/plan/unnamed.c"
{ printf '/* long, and no reason given */\n'; seq 1 800 | sed 's|.*|/* & */|'; } >"$Y/util/long.c"
/usr/bin/python3 "$HERE/layout_check.py" "$Y" >"$T/layout-bad.out" 2>&1
rc=$?
check "the layout checker fails a cache/ file including fs/, naming it (exit $rc)" \
	bash -c "test $rc -ne 0 && grep -q '^FAIL - no file includes.*cache/warn.c:[0-9]* includes fs/fs.h' '$T/layout-bad.out'"
check "the layout checker fails fs/ including a curl header, naming it" \
	grep -q '^FAIL - fs/ includes no curl.*fs/order.c:[0-9]* includes <curl/curl.h>' "$T/layout-bad.out"
check "the layout checker fails a source file the README's layout table does not name" \
	grep -q "^FAIL - README.md's layout table names every source file: plan/unnamed.c" "$T/layout-bad.out"
check "the layout checker fails a .c file of 800 lines whose top comment gives no reason" \
	grep -q "^FAIL - every .c file over 700 lines says why.*util/long.c (801 lines)" "$T/layout-bad.out"
finish
