#!/usr/bin/python3
"""Checks a shardfs mount against its source directory.

verify_mount.py MOUNT SOURCE: for every rank-R/ directory in MOUNT, checks
  - its files are exactly the non-pad keys of .shardfs/rank-R.order;
  - every directory lists its entries in byte order;
  - every file is byte-identical to SOURCE/<key> and has its size;
and across ranks that no file is in two ranks, and that the union is every
key of .shardfs/manifest.tsv except the plan's dropped items (or all of them
with --partial, when only some ranks are shown). Prints each problem and
exits 1 if there was any.
"""
import os
import re
import sys


def unescape(s: bytes) -> bytes:
    return re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), s)


def walk(root: bytes, problems):
    files = []
    stack = [b""]
    while stack:
        rel = stack.pop()
        d = os.path.join(root, rel) if rel else root
        names = os.listdir(d)
        if names != sorted(names):
            problems.append("%r: listing not in byte order" % d)
        for n in names:
            p = os.path.join(rel, n) if rel else n
            full = os.path.join(root, p)
            if os.path.isdir(full):
                stack.append(p)
            else:
                files.append(p)
    return files


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    partial = "--partial" in sys.argv
    mnt, src = os.fsencode(args[0]), os.fsencode(args[1])
    problems = []
    ctl = os.path.join(mnt, b".shardfs")
    plan = dict(l.split(b" ", 1) for l in open(os.path.join(ctl, b"plan"), "rb").read().splitlines()
                if not l.startswith(b"rank "))
    dropped = int(plan[b"dropped_items"])
    manifest = [l.split(b"\t")[0] for l in open(os.path.join(ctl, b"manifest.tsv"), "rb").read().splitlines()[1:]]
    manifest = set(unescape(k) for k in manifest)

    owner = {}
    ranks = sorted(n for n in os.listdir(mnt) if n.startswith(b"rank-"))
    nfiles = 0
    for r in ranks:
        files = walk(os.path.join(mnt, r), problems)
        order = open(os.path.join(ctl, r + b".order"), "rb").read().splitlines()
        expect = set(unescape(l) for l in order if not l.endswith(b"\tpad"))
        if set(files) != expect:
            problems.append("%s: files differ from its order file: extra %r missing %r" % (
                r.decode(), sorted(set(files) - expect)[:5], sorted(expect - set(files))[:5]))
        for f in files:
            nfiles += 1
            if f in owner:
                problems.append("%r in both %s and %s" % (f, owner[f].decode(), r.decode()))
            owner[f] = r
            a = open(os.path.join(mnt, r, f), "rb").read()
            b = open(os.path.join(src, f), "rb").read()
            if a != b:
                problems.append("%s/%r: content differs from the source (%d vs %d bytes)" % (
                    r.decode(), f, len(a), len(b)))
            if os.stat(os.path.join(mnt, r, f)).st_size != len(b):
                problems.append("%s/%r: st_size differs from the source" % (r.decode(), f))
    union = set(owner)
    if not union <= manifest:
        problems.append("files not in the manifest: %r" % sorted(union - manifest)[:5])
    if not partial and len(manifest) - len(union) != dropped:
        problems.append("union has %d of %d manifest keys, %d dropped" % (len(union), len(manifest), dropped))
    for p in problems:
        print("verify_mount: " + p)
    print("verify_mount: %d ranks, %d files checked" % (len(ranks), nfiles))
    sys.exit(1 if problems else 0)


main()
