#!/usr/bin/env bash
# The Python helper (python/): installs it the documented way, offline,
# into a venv that sees Debian's python3-torch (pip install
# --no-build-isolation, no PyPI), then runs python/tests under pytest with
# that venv's interpreter, so the tests import the installed package, not
# the source tree. The tests mount real shardfs mounts of generated data
# (python/tests/conftest.py) and check: RankDataset over rank-R/ and
# epoch-E/rank-R/ = the order file minus pads, byte for byte; a DataLoader
# with 2 workers over TFRecord, JSONL and WebDataset record views sees every
# record exactly once across the ranks; a W0 = 4 job resumed on W = 3
# covers every item exactly once; the plan-digest check passes on equal
# plans and fails clearly on different ones, with and without
# torch.distributed. Each pytest test is one ok/FAIL line here.
SUITE=python
. "$(dirname "$0")/lib.sh"

ROOT=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3 # Debian's: python3-torch is built for it

for mod in torch pytest; do
	if ! $PY -c "import $mod" 2>/dev/null; then
		fail "$PY cannot import $mod (scripts/install-deps.sh installs python3-$mod)"
		finish
	fi
done

# Copy first: an in-tree setuptools build writes build/ and *.egg-info
# into the source directory.
mkdir -p "$T/pkg"
cp -r "$ROOT/python/pyproject.toml" "$ROOT/python/README.md" "$ROOT/python/shardfs" "$T/pkg/"
V=$T/venv
check "a venv with --system-site-packages" $PY -m venv --system-site-packages --without-pip "$V"
# --no-index: pip must not even try the network (there is none here).
if PIP_DISABLE_PIP_VERSION_CHECK=1 "$V/bin/python" -m pip install -q --no-build-isolation \
	--no-index "$T/pkg" >"$T/pip.log" 2>&1; then
	ok "pip install --no-build-isolation --no-index ./python (offline)"
else
	fail "pip install --no-build-isolation --no-index ./python" "$(tail -5 "$T/pip.log")"
	finish
fi
where=$(cd "$T" && "$V/bin/python" -c 'import shardfs; print(shardfs.__file__)')
check "the venv imports the installed package ($where)" \
	bash -c "[[ '$where' == '$V'/lib/python3*/site-packages/shardfs/__init__.py ]]"
check "the venv sees Debian's torch" "$V/bin/python" -c 'import shardfs.torch'

# From $T, so that neither the working directory nor python/ is on
# sys.path: `import shardfs` finds the venv's copy (pytest puts only
# python/tests itself on the path, for conftest.py). No __pycache__ or
# .pytest_cache is written into the repository.
cd "$T" || exit 1
PYTHONDONTWRITEBYTECODE=1 SHARDFS=$SHARDFS timeout -k 10 300 "$V/bin/python" -m pytest \
	-p no:cacheprovider -q -rN --basetemp="$T/pytest" --junitxml="$T/junit.xml" \
	"$ROOT/python/tests" >"$T/pytest.out" 2>&1
rc=$?
# One ok/FAIL line per test case, from pytest's JUnit report.
if [ -s "$T/junit.xml" ]; then
	while IFS=$'\t' read -r verdict name why; do
		if [ "$verdict" = ok ]; then ok "$name"; else fail "$name" "$why"; fi
	done < <($PY - "$T/junit.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = "%s::%s" % (tc.get("classname", "").rsplit(".", 1)[-1], tc.get("name"))
    bad = [c for c in tc if c.tag in ("failure", "error")]
    skipped = [c for c in tc if c.tag == "skipped"]
    if bad:
        why = (bad[0].get("message") or bad[0].tag).replace("\n", " ")[:300]
        print("fail\t%s\t%s" % (name, why))
    elif skipped:
        print("fail\t%s\tskipped: %s" % (name, skipped[0].get("message", "")))
    else:
        print("ok\t%s\t" % name)
PY
	)
fi
if [ "$rc" -ne 0 ]; then
	fail "pytest exited $rc" "see below"
	sed 's/^/#   /' "$T/pytest.out" | tail -60
fi
# A test that died mid-way may leave a mount under $T: clear it (lazily)
# so the suite's cleanup can remove the directory.
left=$(awk -v t="$T/" 'index($2, t) == 1 {print $2}' /proc/self/mounts)
check "pytest left no mount behind${left:+ (left: $left)}" test -z "$left"
for m in $left; do fusermount3 -u -z "$m" 2>/dev/null; done
finish
