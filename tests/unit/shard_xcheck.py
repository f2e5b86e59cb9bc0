#!/usr/bin/python3
"""Cross-check of plan/shard.c against the independent reference.

    shard_xcheck.py SHARD_DUMP [CASES [SEED]]

generates CASES (default 300) random specs with a fixed seed (default 14),
feeds them all to SHARD_DUMP (build/tests/shard_dump, one process) and
compares every rank's list, pads included, and the skipped and dropped
counts with tests/integration/shardspec.py. Exit status 0 if all agree,
1 on a mismatch (the case is printed so it can be replayed), 2 on usage.
"""

import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
import shardspec  # noqa: E402


def random_case(g):
    n = g.choice([0, 1, 2, 3, 5]) if g.random() < 0.1 else g.randint(0, 60)
    w = g.randint(1, 9) if g.random() < 0.9 else n + g.randint(1, 4)
    layout = g.choice(["strided", "contiguous", "bytes"])
    balance = "none" if layout == "bytes" else \
        g.choice(["none", "drop", "pad"])
    skip_world, skip = 0, 0
    if g.random() < 0.6:
        skip_world = g.choice([0, g.randint(1, 9)])
        skip = g.randint(0, n + 12)
    weights = [g.choice([0, 1, 7, 100, 1 << 40]) if g.random() < 0.2
               else g.randint(1, 1000) for _ in range(n)]
    return dict(n=n, w=w, seed=g.choice([42, g.getrandbits(64)]),
                epoch=g.choice([0, 1, 2, g.getrandbits(64)]),
                order=g.choice(["shuffle", "shuffle", "none"]),
                layout=layout, balance=balance,
                reshuffle=g.choice(["global", "local"]),
                skip=skip, skip_world=skip_world,
                weights=weights if layout == "bytes" or g.random() < 0.5
                else None)


def case_line(c):
    # An empty list still means "weights given" (bytes needs them).
    weights = "-" if c["weights"] is None else \
        ",".join(map(str, c["weights"])) or "0"
    return "%d %d %d %d %s %s %s %s %d %d %s\n" % (
        c["n"], c["w"], c["seed"], c["epoch"], c["order"], c["layout"],
        c["balance"], c["reshuffle"], c["skip"], c["skip_world"], weights)


def reference(c):
    """Lines as shard_dump prints them."""
    args = (c["n"], c["weights"] or [0] * c["n"], c["w"], c["seed"],
            c["epoch"], c["order"], c["layout"], c["balance"])
    lists = shardspec.plan_all(*args, reshuffle=c["reshuffle"],
                               skip=c["skip"], skip_world=c["skip_world"])
    skipped = 0
    if c["skip"] or c["skip_world"]:
        w0 = c["skip_world"] or c["w"]
        base = shardspec.base_plan(c["n"], args[1], w0, *args[3:],
                                   c["reshuffle"])
        q = shardspec.sequence(base, w0, c["layout"])
        skipped = sum(1 for _, pad in q[:c["skip"]] if not pad)
    placed = sum(1 for lst in lists for _, pad in lst if not pad)
    out = ["plan %d %d" % (skipped, c["n"] - skipped - placed)]
    for lst in lists:
        out.append(" ".join("%d%s" % (i, "*" if pad else "")
                            for i, pad in lst))
    return out


def main(argv):
    if not 1 <= len(argv) <= 3:
        print(__doc__, file=sys.stderr)
        return 2
    n_cases = int(argv[1]) if len(argv) > 1 else 300
    g = random.Random(int(argv[2]) if len(argv) > 2 else 14)
    cases = [random_case(g) for _ in range(n_cases)]
    text = "".join(case_line(c) for c in cases)
    got = subprocess.run([argv[0]], input=text.encode(), check=True,
                         stdout=subprocess.PIPE).stdout.decode().split("\n")
    pos = 0
    for k, c in enumerate(cases):
        want = reference(c)
        have = got[pos:pos + len(want)]
        pos += len(want)
        if have != want:
            print("shard_xcheck: case %d differs: %s  C:   %r\n  ref: %r"
                  % (k, case_line(c), have, want), file=sys.stderr)
            return 1
    print("shard_xcheck: %d cases agree with shardspec.py" % n_cases)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
