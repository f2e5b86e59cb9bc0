#!/usr/bin/python3
"""Checks that the tree keeps the layout docs/DESIGN.md §2 and README.md's
"Layout of the code" describe. Prints one "ok - ..." or "FAIL - ...: why"
line per check (test_docs.sh counts them); exits 1 if any failed.

    layout_check.py ROOT

- no file includes a header of a folder above its own (DESIGN §2's
  one-way rule: mount -> fs -> records -> plan, fs -> cache -> backends,
  cache -> transform, everything -> util, util -> nothing);
- fs/ includes no curl or LMDB header, and only backends/ and
  util/sha256.c, util/md5.c include OpenSSL's;
- README.md's layout table names every source file of those folders (by
  its name without the extension, as the table's backends/ row does);
- a .c file of more than 700 lines says why in its top comment (STYLE.md:
  the comment names the 700).
"""
import os
import re
import sys

# What each folder may include of the others (DESIGN §2).
ALLOWED = {
    "util": set(),
    "plan": {"util"},
    "records": {"plan", "util"},
    "backends": {"util"},
    "transform": {"util"},
    "cache": {"backends", "transform", "util"},
    "fs": {"cache", "records", "plan", "util"},
    "mount": {"fs", "cache", "records", "plan", "backends", "transform", "util"},
}
OPENSSL_OK = {"util/sha256.c", "util/md5.c"}
failed = 0


def check(name, bad):
    global failed
    if bad:
        failed += 1
        print("FAIL - %s: %s" % (name, "; ".join(bad[:10])))
    else:
        print("ok - " + name)


def sources(root):
    for d in sorted(ALLOWED):
        for f in sorted(os.listdir(os.path.join(root, d))):
            if f.endswith((".c", ".h")):
                yield d, f


def includes(root, d, f):
    with open(os.path.join(root, d, f), encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
            if m:
                yield n, m.group(1), m.group(2)


def main():
    root = sys.argv[1]
    up, libs = [], []
    for d, f in sources(root):
        for n, kind, path in includes(root, d, f):
            top = path.split("/")[0]
            if kind == '"' and "/" in path and top != d and top not in ALLOWED[d]:
                up.append("%s/%s:%d includes %s" % (d, f, n, path))
            if kind == "<" and d == "fs" and (top == "curl" or path == "lmdb.h"):
                libs.append("%s/%s:%d includes <%s>" % (d, f, n, path))
            if (kind == "<" and top == "openssl" and d != "backends"
                    and "%s/%s" % (d, f) not in OPENSSL_OK):
                libs.append("%s/%s:%d includes <%s>" % (d, f, n, path))
    check("no file includes a header of a folder above its own (DESIGN §2)", up)
    check("fs/ includes no curl or LMDB header; OpenSSL only in backends/, "
          "util/sha256.c and util/md5.c", libs)

    with open(os.path.join(root, "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    m = re.search(r"^## Layout of the code\n(.*?)(?=^## )", text, re.M | re.S)
    table = m.group(1) if m else ""
    missing = []
    for d, f in sources(root):
        stem = f[:-2]
        if f.endswith(".h") and os.path.exists(os.path.join(root, d, stem + ".c")):
            continue  # a module's header: its .c is named
        if f.endswith(".h") and stem.endswith("_impl"):
            continue  # what a folder's files share, not a module
        if not re.search(r"`%s(\.[ch])?`" % re.escape(stem), table):
            missing.append("%s/%s" % (d, f))
    check("README.md's layout table names every source file", missing)

    long = []
    for d, f in sources(root):
        if not f.endswith(".c"):
            continue
        with open(os.path.join(root, d, f), encoding="utf-8") as fh:
            text = fh.read()
        top = re.match(r"\s*/\*.*?\*/", text, re.S)
        if text.count("\n") > 700 and not (top and "700" in top.group(0)):
            long.append("%s/%s (%d lines)" % (d, f, text.count("\n")))
    check("every .c file over 700 lines says why in its top comment", long)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
