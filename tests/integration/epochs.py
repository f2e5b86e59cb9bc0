#!/usr/bin/python3
"""Reads and checks epoch-E/ and skip-K/ trees of a mount (test_epochs.sh).

    epochs.py tree MOUNT TREE CTRL SRC --world W
        for every rank r < W: the files under MOUNT/TREE/rank-r are exactly
        the non-pad keys of MOUNT/CTRL/rank-r.order, each byte for byte the
        file SRC/KEY. Prints one "ok" line, exits 1 naming the first
        mismatch. (The order files themselves are compared with
        shardspec.py by the suite.)
    epochs.py read MOUNT TREE CTRL SRC --rank r [--first N]
        reads rank r's first N (default: all) non-pad files of its order
        from MOUNT/TREE/rank-r, in order, checks each against SRC and
        prints its key: what a trainer on that rank consumed.
    epochs.py sets MOUNT CTRL --world W
        prints each rank's sorted non-pad key set, one line per rank, for
        comparing the item sets of two epochs.

Keys here are plain (the suite's dataset needs no escaping).
"""

import argparse
import os
import sys


def order_keys(mnt, ctrl, rank):
    path = os.path.join(mnt, ctrl, "rank-%d.order" % rank)
    with open(path, "rb") as f:
        lines = f.read().decode().splitlines()
    return [ln for ln in lines if not ln.endswith("\tpad")]


def tree_files(root):
    out = set()
    for d, _, files in os.walk(root):
        for name in files:
            out.add(os.path.relpath(os.path.join(d, name), root))
    return out


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def cmd_tree(a):
    n = 0
    for r in range(a.world):
        keys = order_keys(a.mount, a.ctrl, r)
        root = os.path.join(a.mount, a.tree, "rank-%d" % r)
        got = tree_files(root)
        if got != set(keys):
            sys.exit("FAIL %s: %d files, order lists %d (%d differ)" %
                     (root, len(got), len(keys), len(got ^ set(keys))))
        for k in keys:
            if not same_bytes(os.path.join(root, k), os.path.join(a.src, k)):
                sys.exit("FAIL %s/%s: bytes differ from the source" % (root, k))
        n += len(keys)
    print("ok %s: %d ranks, %d files, listing = order, bytes = source" %
          (a.tree, a.world, n))


def cmd_read(a):
    keys = order_keys(a.mount, a.ctrl, a.rank)
    if a.first is not None:
        keys = keys[:a.first]
    root = os.path.join(a.mount, a.tree, "rank-%d" % a.rank)
    for k in keys:
        if not same_bytes(os.path.join(root, k), os.path.join(a.src, k)):
            sys.exit("FAIL %s/%s: bytes differ from the source" % (root, k))
        print(k)


def cmd_sets(a):
    for r in range(a.world):
        print(" ".join(sorted(order_keys(a.mount, a.ctrl, r))))


def main(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tree")
    rd = sub.add_parser("read")
    for q in (t, rd):
        q.add_argument("mount")
        q.add_argument("tree")
        q.add_argument("ctrl")
        q.add_argument("src")
    t.add_argument("--world", type=int, required=True)
    rd.add_argument("--rank", type=int, required=True)
    rd.add_argument("--first", type=int)
    s = sub.add_parser("sets")
    s.add_argument("mount")
    s.add_argument("ctrl")
    s.add_argument("--world", type=int, required=True)
    a = p.parse_args(argv)
    {"tree": cmd_tree, "read": cmd_read, "sets": cmd_sets}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
