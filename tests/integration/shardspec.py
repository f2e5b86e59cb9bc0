#!/usr/bin/python3
"""Reference implementation of the sharding spec "shardfs-shard v1".

DESIGN.md section 5 (with "Epochs, local reshuffle and skip"), written independently of
plan/shard.c and as plainly as possible: integration tests compare a mount's
.shardfs/rank-R.order with what this script prints, so it must follow the
spec text rather than the C code's shortcuts. Python's integers are exact,
so the bytes layout needs no 128-bit tricks; uint64 wrapping is spelled out
with MASK.

    shardspec.py MANIFEST_TSV --world-size W --seed S --epoch E \\
        --order shuffle|none --layout strided|contiguous|bytes \\
        --balance none|drop|pad --rank R \\
        [--reshuffle global|local] [--skip K] [--skip-world W0]
    shardspec.py --selftest

prints rank R's keys in epoch order, one per line, byte for byte as the
manifest writes them (still escaped); a pad item's line ends in TAB "pad".

    shardspec.py records --index INDEX --world-size W --seed S --epoch E \
        --order ... --layout ... --balance ... --parts P [--rank R] \
        [--reshuffle global|local] [--skip K] [--skip-world W0]

reads a record index file (docs/RECORDS.md §2; parsed here, not by
shardfs) and prints, for each rank (or only R) and each part, a line
"rank R part P size BYTES NAME" and then the part's records, one
"object<TAB>record" line each (object: the key as the index writes it,
escaped; record: its index within its object), a pad's line ending in
TAB "pad".
Exit status: 0 ok, 1 self-test mismatch, 2 usage, manifest or index error.
"""

import argparse
import hashlib
import sys

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
DERIVE_INIT = 0x5348415244563031
MANIFEST_MAGIC = b"# shardfs-manifest v1"
UINT32_MAX = (1 << 32) - 1


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class SplitMix64:
    def __init__(self, state):
        self.state = state & MASK

    def next(self):
        self.state = (self.state + GAMMA) & MASK
        return mix64(self.state)


def derive(*values):
    h = DERIVE_INIT
    for v in values:
        h = mix64(((h ^ v) + GAMMA) & MASK)
    return h


def bounded(g, n):
    """Lemire's unbiased draw in [0, n)."""
    m = g.next() * n
    low = m & MASK
    if low < n:
        t = ((1 << 64) - n) % n
        while low < t:
            m = g.next() * n
            low = m & MASK
    return m >> 64


def fisher_yates(a, g):
    for i in range(len(a) - 1, 0, -1):
        j = bounded(g, i + 1)
        a[i], a[j] = a[j], a[i]
    return a


def epoch_order(n, seed, epoch, order):
    """S: the item indices in epoch order."""
    s = list(range(n))
    if order == "shuffle":
        fisher_yates(s, SplitMix64(derive(1, seed, epoch)))
    return s


def balanced(s, w, balance):
    """S' as a list of (item, is_pad)."""
    r = len(s)
    out = [(i, False) for i in s]
    if balance == "drop":
        out = out[: (r // w) * w]
    elif balance == "pad":
        target = -(-r // w) * w
        k = 0
        while len(out) < target:
            out.append((s[k % r], True))
            k += 1
    return out


def rank_positions(n_positions, w, layout, rank):
    if layout == "strided":
        return list(range(rank, n_positions, w))
    q, m = divmod(n_positions, w)
    return list(range(q * rank + min(rank, m), q * (rank + 1) + min(rank + 1, m)))


def bytes_ranks(s, weights, w):
    """Rank of each position of S under the bytes layout."""
    total = sum(weights[i] for i in s)
    if total == 0:
        return [0] * len(s)
    ranks = []
    c = 0
    for i in s:
        ranks.append(min(w - 1, (2 * c + weights[i]) * w // (2 * total)))
        c += weights[i]
    return ranks


def v1_rank(n, weights, w, seed, epoch, order, layout, balance, rank):
    """Rank `rank`'s share under v1 (section 5), as [(item, is_pad)]."""
    s = epoch_order(n, seed, epoch, order)
    if layout == "bytes":
        ranks = bytes_ranks(s, weights, w)
        return [(i, False) for i, r in zip(s, ranks) if r == rank]
    sb = balanced(s, w, balance)
    return [sb[p] for p in rank_positions(len(sb), w, layout, rank)]


def base_plan(n, weights, w, seed, epoch, order, layout, balance, reshuffle):
    """Every rank's list without skip: v1 (global), or (local) epoch 0's v1
    lists with each rank's non-pad prefix shuffled by
    splitmix64(derive(3, seed, epoch, rank)), pads left last."""
    if reshuffle == "global":
        return [v1_rank(n, weights, w, seed, epoch, order, layout, balance,
                        r) for r in range(w)]
    p0 = [v1_rank(n, weights, w, seed, 0, order, layout, balance, r)
          for r in range(w)]
    if epoch == 0 or order == "none":
        return p0
    out = []
    for r, lst in enumerate(p0):
        npad = sum(1 for _, pad in lst if pad)
        body = lst[:len(lst) - npad]
        fisher_yates(body, SplitMix64(derive(3, seed, epoch, r)))
        out.append(body + lst[len(lst) - npad:])
    return out


def sequence(lists, w, layout):
    """Q, the epoch's sequence of a plan: strided Q[i*W + r] = L_r[i],
    else L_0 + L_1 + ... + L_{W-1}."""
    if layout != "strided":
        return [x for lst in lists for x in lst]
    q = [None] * sum(len(lst) for lst in lists)
    for r, lst in enumerate(lists):
        for i, x in enumerate(lst):
            q[i * w + r] = x
    assert None not in q, "strided lists do not tile their sequence"
    return q


def plan_all(n, weights, w, seed, epoch, order, layout, balance,
             reshuffle="global", skip=0, skip_world=0):
    """Every rank's list [(item, is_pad)], the extended spec
    (docs/DESIGN.md section 5, "Epochs, local reshuffle and skip"). With skip or skip_world: the sequence Q of the
    plan on W0 = skip_world (or w) ranks, T its non-pad items from
    position skip on, then v1's balance and layout on w ranks with T as S."""
    if skip == 0 and skip_world == 0:
        return base_plan(n, weights, w, seed, epoch, order, layout, balance,
                         reshuffle)
    w0 = skip_world or w
    q = sequence(base_plan(n, weights, w0, seed, epoch, order, layout,
                           balance, reshuffle), w0, layout)
    t = [i for i, pad in q[skip:] if not pad]
    if layout == "bytes":
        ranks = bytes_ranks(t, weights, w)
        return [[(i, False) for i, r in zip(t, ranks) if r == rank]
                for rank in range(w)]
    sb = balanced(t, w, balance)
    return [[sb[p] for p in rank_positions(len(sb), w, layout, rank)]
            for rank in range(w)]


def plan_rank(n, weights, w, seed, epoch, order, layout, balance, rank,
              reshuffle="global", skip=0, skip_world=0):
    """Rank `rank`'s share as a list of (item, is_pad), in epoch order."""
    if reshuffle == "global" and skip == 0 and skip_world == 0:
        return v1_rank(n, weights, w, seed, epoch, order, layout, balance,
                       rank)
    return plan_all(n, weights, w, seed, epoch, order, layout, balance,
                    reshuffle, skip, skip_world)[rank]


def plan_rank_runs(object_lens, w, seed, epoch, order, layout, balance,
                   run_bytes, window, rank, reshuffle="global", skip=0,
                   skip_world=0):
    """Record views dealt in runs (docs/RECORDS.md, "Runs"): each object's
    records (served lengths object_lens[o]) cut into runs of at most
    run_bytes (a larger record alone), runs planned as items, a rank's
    records its runs' records in run order, then (order shuffle, window > 1)
    its non-pad records shuffled within windows with one generator per
    rank, derive(2, seed, epoch, rank). reshuffle, skip and skip_world
    apply to the runs (skip counts runs). Returns [(record id, is_pad)]."""
    runs, first = [], 0
    for lens in object_lens:
        cur = None
        for j, ln in enumerate(lens):
            if cur is None or cur[1] + ln > run_bytes:
                cur = [[first + j], ln]
                runs.append(cur)
            else:
                cur[0].append(first + j)
                cur[1] += ln
        first += len(lens)
    share = plan_rank(len(runs), [r[1] for r in runs], w, seed, epoch, order,
                      layout, balance, rank, reshuffle, skip, skip_world)
    out = [(rec, pad) for i, pad in share for rec in runs[i][0]]
    if order == "shuffle" and window > 1:
        g = SplitMix64(derive(2, seed, epoch, rank))
        body = [rec for rec, pad in out if not pad]
        pads = [x for x in out if x[1]]
        for w0 in range(0, len(body), window):
            chunk = body[w0:w0 + window]
            fisher_yates(chunk, g)
            body[w0:w0 + window] = chunk
        out = [(rec, False) for rec in body] + pads
    return out


def spec_error(w, layout, balance, skip_world=0):
    if w < 1:
        return "world_size must be at least 1"
    if layout == "bytes" and balance != "none":
        return "layout bytes requires balance none"
    if skip_world > UINT32_MAX:
        return "skip_world must be at most 4294967295 (2^32-1)"
    return None


def add_epoch_args(p):
    p.add_argument("--reshuffle", choices=["global", "local"],
                   default="global")
    p.add_argument("--skip", type=uint64_arg, default=0,
                   help="K: positions of the epoch's sequence consumed")
    p.add_argument("--skip-world", type=uint64_arg, default=0,
                   help="the world size K was counted on (0: --world-size)")


def read_manifest(path):
    """(keys, sizes) from a manifest file; keys stay escaped, as bytes."""
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines or lines[0] != MANIFEST_MAGIC:
        raise ValueError("%s:1: expected %r" % (path, MANIFEST_MAGIC.decode()))
    keys, sizes = [], []
    for lineno, line in enumerate(lines[1:], start=2):
        fields = line.split(b"\t")
        if len(fields) != 4:
            raise ValueError("%s:%d: expected 4 tab-separated fields, got %d"
                             % (path, lineno, len(fields)))
        try:
            size = int(fields[1].decode("ascii"), 10)
        except ValueError:
            size = -1
        if not 0 <= size <= MASK:
            raise ValueError("%s:%d: bad size %r" % (path, lineno, fields[1]))
        keys.append(fields[0])
        sizes.append(size)
    return keys, sizes


def selftest():
    failures = []

    def check(name, got, want):
        if got != want:
            failures.append("%s: got %r, want %r" % (name, got, want))

    def hexes(xs):
        return ["0x%016x" % x for x in xs]

    g = SplitMix64(0)
    check("splitmix64(0)", hexes([g.next() for _ in range(3)]),
          ["0xe220a8397b1dcdaf", "0x6e789e6aa1b965f4", "0x06c45d188009454f"])
    g = SplitMix64(1234567)
    check("splitmix64(1234567)", hexes([g.next() for _ in range(3)]),
          ["0x599ed017fb08fc85", "0x2c73f08458540fa5", "0x883ebce5a3f27c77"])
    check("derive(1, 42, 0)", "0x%016x" % derive(1, 42, 0),
          "0x5c85f74146959618")
    check("shuffle N=10 seed 42 epoch 0", epoch_order(10, 42, 0, "shuffle"),
          [8, 2, 4, 3, 6, 0, 7, 9, 5, 1])
    check("shuffle N=10 seed 42 epoch 1", epoch_order(10, 42, 1, "shuffle"),
          [2, 8, 5, 1, 7, 0, 3, 6, 9, 4])

    def show(n, weights, w, order, layout, balance):
        return [["%d%s" % (i, "*" if pad else "") for i, pad in
                 plan_rank(n, weights, w, 42, 0, order, layout, balance, r)]
                for r in range(w)]

    check("W=4 strided pad", show(10, None, 4, "shuffle", "strided", "pad"),
          [["8", "6", "5"], ["2", "0", "1"], ["4", "7", "8*"],
           ["3", "9", "2*"]])
    check("W=4 contiguous none",
          show(10, None, 4, "shuffle", "contiguous", "none"),
          [["8", "2", "4"], ["3", "6", "0"], ["7", "9"], ["5", "1"]])
    check("bytes [5,1,1,1,1,5] W=3",
          show(6, [5, 1, 1, 1, 1, 5], 3, "none", "bytes", "none"),
          [["0"], ["1", "2", "3", "4"], ["5"]])
    epochs_selftest(check)
    records_selftest(check)

    for f in failures:
        print("selftest FAIL: " + f, file=sys.stderr)
    if not failures:
        print("selftest ok")
    return 1 if failures else 0


# --- Epochs and skip (docs/DESIGN.md section 5, "Epochs, local reshuffle and skip") ----------------------------

# N=10, seed 42, order shuffle, weights [1..10] (item i weighs i + 1): for
# each (reshuffle, layout, balance, W, skip, skip_world), epoch: rank lists
# as "8 6 5*" (* = pad).
EPOCH_VECTORS = [
    (("local", "strided", "none", 4, 0, 0), {
        0: ["8 6 5", "2 0 1", "4 7", "3 9"],
        1: ["6 5 8", "2 0 1", "7 4", "9 3"],
        2: ["8 6 5", "0 2 1", "4 7", "9 3"]}),
    (("local", "strided", "drop", 4, 0, 0), {
        0: ["8 6", "2 0", "4 7", "3 9"],
        1: ["6 8", "2 0", "7 4", "9 3"],
        2: ["8 6", "2 0", "4 7", "9 3"]}),
    (("local", "strided", "pad", 4, 0, 0), {
        0: ["8 6 5", "2 0 1", "4 7 8*", "3 9 2*"],
        1: ["6 5 8", "2 0 1", "7 4 8*", "9 3 2*"],
        2: ["8 6 5", "0 2 1", "4 7 8*", "9 3 2*"]}),
    (("local", "contiguous", "none", 4, 0, 0), {
        0: ["8 2 4", "3 6 0", "7 9", "5 1"],
        1: ["2 4 8", "3 6 0", "9 7", "1 5"],
        2: ["8 2 4", "6 3 0", "7 9", "1 5"]}),
    (("local", "contiguous", "drop", 4, 0, 0), {
        0: ["8 2", "4 3", "6 0", "7 9"],
        1: ["2 8", "4 3", "0 6", "9 7"],
        2: ["8 2", "4 3", "6 0", "9 7"]}),
    (("local", "contiguous", "pad", 4, 0, 0), {
        0: ["8 2 4", "3 6 0", "7 9 5", "1 8* 2*"],
        1: ["2 4 8", "3 6 0", "7 5 9", "1 8* 2*"],
        2: ["8 2 4", "6 3 0", "7 9 5", "1 8* 2*"]}),
    (("local", "bytes", "none", 4, 0, 0), {
        0: ["8 2", "4 3 6", "0 7", "9 5 1"],
        1: ["2 8", "4 3 6", "7 0", "5 1 9"],
        2: ["8 2", "3 4 6", "0 7", "5 1 9"]}),
    (("local", "strided", "none", 2, 0, 0), {
        1: ["6 7 8 5 4", "0 2 3 1 9"],
        2: ["4 6 8 5 7", "2 0 1 3 9"]}),
    (("global", "strided", "none", 4, 0, 0), {
        1: ["2 7 9", "8 0 4", "5 3", "1 6"],
        2: ["2 9 8", "1 0 6", "3 5", "4 7"]}),
    # Skip: K positions of the sequence on skip_world ranks, then W ranks.
    (("global", "strided", "none", 3, 4, 4), {0: ["6 9", "0 5", "7 1"]}),
    (("global", "strided", "pad", 4, 4, 4),
     {0: ["6 5", "0 1", "7 6*", "9 0*"]}),
    (("global", "strided", "drop", 3, 4, 4), {0: ["6", "0", "7"]}),
    (("global", "strided", "none", 3, 10, 4), {0: ["", "", ""]}),
    (("global", "strided", "pad", 3, 0, 4),
     {0: ["8 3 7 1", "2 6 9 8*", "4 0 5 2*"]}),
    (("global", "contiguous", "none", 2, 3, 4),
     {0: ["3 6 0 7", "9 5 1"]}),
    (("global", "bytes", "none", 3, 3, 4), {0: ["3 6 0", "7 9", "5 1"]}),
    (("local", "strided", "none", 3, 4, 4), {1: ["5 3", "0 8", "4 1"]}),
    (("local", "strided", "pad", 3, 5, 4), {1: ["0 8", "4 1", "3 0*"]}),
    (("local", "contiguous", "pad", 3, 5, 2),
     {1: ["9 0", "7 1", "5 9*"]}),
]


def epochs_selftest(check):
    check("derive(3, 42, 1, 0)", "0x%016x" % derive(3, 42, 1, 0),
          "0xddf781b6b175eced")
    weights = list(range(1, 11))
    for (reshuffle, layout, balance, w, skip, skip_world), by_epoch in \
            EPOCH_VECTORS:
        for epoch, want in by_epoch.items():
            got = [" ".join("%d%s" % (i, "*" if pad else "")
                            for i, pad in lst)
                   for lst in plan_all(10, weights, w, 42, epoch, "shuffle",
                                       layout, balance, reshuffle, skip,
                                       skip_world)]
            check("%s %s %s W=%d skip %d skip_world %d epoch %d"
                  % (reshuffle, layout, balance, w, skip, skip_world, epoch),
                  got, want)


# --- Records (docs/RECORDS.md §2) -------------------------------------

RINDEX_MAGIC = b"# shardfs-records v1"
REC_FORMATS = {"tfrecord": "tfrecord", "tfrecord.gz": "tfrecord",
               "jsonl": "jsonl", "jsonl.gz": "jsonl", "tar": "tar"}
TAR_TRAILER = 1024


def canon_int(b, what):
    """A decimal without sign or leading zero, as the index writes it."""
    if not b or not b.isdigit() or (b[:1] == b"0" and len(b) > 1):
        raise ValueError("%s is not a canonical number: %r" % (what, b))
    return int(b)


def read_rindex(path):
    """(format, [(escaped key, nl_added, [(off, len), ...]), ...]) from a
    record index file, checking its end digest and its framing."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.endswith(b"\n"):
        raise ValueError("%s: no final newline (truncated?)" % path)
    cut = data.rfind(b"\n", 0, len(data) - 1) + 1
    body, end = data[:cut], data[cut:-1]
    if not end.startswith(b"end ") or \
            end[4:].decode("ascii", "replace") != \
            hashlib.sha256(body).hexdigest():
        raise ValueError("%s: end line is not the digest of the body" % path)
    lines = body.split(b"\n")[:-1]
    if len(lines) < 4 or lines[0] != RINDEX_MAGIC:
        raise ValueError("%s:1: expected %r" % (path, RINDEX_MAGIC.decode()))
    fmt = lines[1][len(b"format "):].decode("ascii", "replace")
    if not lines[1].startswith(b"format ") or fmt not in REC_FORMATS:
        raise ValueError("%s:2: bad format line" % path)
    head = lines[3].split(b" ")
    if len(head) != 6 or head[0::2] != [b"objects", b"records", b"skipped"]:
        raise ValueError("%s:4: bad objects line" % path)
    n_obj = canon_int(head[1], "objects")
    n_rec = canon_int(head[3], "records")
    objects = []
    i = 4
    while i < len(lines):
        line = lines[i]
        if not line.startswith(b"o "):
            raise ValueError("%s:%d: expected an object line" % (path, i + 1))
        f = line[2:].split(b"\t")
        if len(f) != 6 or f[5] not in (b"-", b"n"):
            raise ValueError("%s:%d: bad object line" % (path, i + 1))
        decoded, count = canon_int(f[3], "decoded"), canon_int(f[4], "count")
        recs, pos = [], 0
        for k in range(count):
            i += 1
            rl = lines[i] if i < len(lines) else b""
            if rl.startswith(b"@"):
                a, _, b = rl[1:].partition(b" ")
                off, ln = canon_int(a, "offset"), canon_int(b, "length")
                if off == pos:
                    raise ValueError("%s:%d: needless @" % (path, i + 1))
            else:
                off, ln = pos, canon_int(rl, "length")
            if off < pos or ln == 0 or off + ln > decoded:
                raise ValueError("%s:%d: bad record" % (path, i + 1))
            recs.append((off, ln))
            pos = off + ln
        objects.append((f[0], f[5] == b"n", recs))
        i += 1
    if len(objects) != n_obj or sum(len(o[2]) for o in objects) != n_rec:
        raise ValueError("%s: counts differ from the objects line" % path)
    return fmt, objects


def served_lengths(objects):
    """[(object index, record index, served length)] in canonical order:
    objects in manifest order, records in file order."""
    out = []
    for oi, (_, nl_added, recs) in enumerate(objects):
        for ri, (_, ln) in enumerate(recs):
            last = ri == len(recs) - 1
            out.append((oi, ri, ln + (1 if nl_added and last else 0)))
    return out


def plan_records(objects, fmt, w, seed, epoch, order, layout, balance, parts,
                 reshuffle="global", skip=0, skip_world=0):
    """Each rank's parts: [[(size, [(object, record, is_pad), ...]), ...]
    per part] per rank. objects: [(name, nl_added, [(off, len), ...])].
    Records are the items (skip counts records)."""
    items = served_lengths(objects)
    weights = [it[2] for it in items]
    trailer = TAR_TRAILER if REC_FORMATS[fmt] == "tar" else 0
    ranks = []
    shares = plan_all(len(items), weights, w, seed, epoch, order, layout,
                      balance, reshuffle, skip, skip_world)
    for r in range(w):
        share = shares[r]
        n = len(share)
        q, m = divmod(n, parts)
        rank_parts = []
        for p in range(parts):
            run = share[q * p + min(p, m): q * (p + 1) + min(p + 1, m)]
            size = sum(weights[i] for i, _ in run) + trailer
            rank_parts.append((size, [(items[i][0], items[i][1], pad)
                                      for i, pad in run]))
        ranks.append(rank_parts)
    return ranks


def part_name(fmt, p, parts):
    return "part-%05d-of-%05d.%s" % (p, parts, REC_FORMATS[fmt])


# The vectors of docs/RECORDS.md §2: objects a (3 records; in jsonl the
# last is served with an added newline) and b (4 records).
def vector_objects(fmt):
    ext = REC_FORMATS[fmt]
    return [(b"a." + ext.encode(), ext == "jsonl",
             [(0, 10), (10, 20), (30, 30)]),
            (b"b." + ext.encode(), False,
             [(0, 40), (40, 50), (90, 60), (150, 70)])]


def show_records(ranks):
    return [[(size, ["%d.%d%s" % (o, r, "*" if pad else "")
                     for o, r, pad in recs]) for size, recs in rank]
            for rank in ranks]


# Rank by rank, part by part: (size, ["OBJECT.RECORD", ...]), * = pad.
RECORD_VECTORS = {
    "shuffle": [6, 2, 5, 4, 0, 3, 1],
    "plans": {
        ("jsonl", 2): [[(130, ["1.3", "1.2"]), (30, ["0.0", "0.1"])],
                       [(81, ["0.2", "1.1"]), (110, ["1.0", "1.3*"])]],
        ("jsonl", 3): [[(120, ["1.3", "1.1"]), (20, ["0.1"])],
                       [(41, ["0.2", "0.0"]), (70, ["1.3*"])],
                       [(100, ["1.2", "1.0"]), (31, ["0.2*"])]],
        ("tar", 2): [[(1154, ["1.3", "1.2"]), (1054, ["0.0", "0.1"])],
                     [(1104, ["0.2", "1.1"]), (1134, ["1.0", "1.3*"])]],
    },
}


def records_selftest(check):
    check("records served lengths",
          [it[2] for it in served_lengths(vector_objects("jsonl"))],
          [10, 20, 31, 40, 50, 60, 70])
    check("records shuffle N=7 seed 42", epoch_order(7, 42, 0, "shuffle"),
          RECORD_VECTORS["shuffle"])
    for (fmt, w), want in RECORD_VECTORS["plans"].items():
        check("records %s W=%d strided pad parts 2" % (fmt, w),
              show_records(plan_records(vector_objects(fmt), fmt, w, 42, 0,
                                        "shuffle", "strided", "pad", 2)),
              want)


def records_main(argv):
    p = argparse.ArgumentParser(
        prog="shardspec.py records",
        description="Reference record sharding: each rank's parts.")
    p.add_argument("--index", required=True, help="record index file")
    p.add_argument("--world-size", type=uint64_arg, required=True)
    p.add_argument("--seed", type=uint64_arg, default=0)
    p.add_argument("--epoch", type=uint64_arg, default=0)
    p.add_argument("--order", choices=["shuffle", "none"], default="shuffle")
    p.add_argument("--layout", choices=["strided", "contiguous", "bytes"],
                   default="strided")
    p.add_argument("--balance", choices=["none", "drop", "pad"],
                   default="none")
    p.add_argument("--parts", type=uint64_arg, required=True)
    p.add_argument("--rank", type=uint64_arg)
    add_epoch_args(p)
    a = p.parse_args(argv)
    err = spec_error(a.world_size, a.layout, a.balance, a.skip_world)
    if err:
        p.error(err)
    if not 1 <= a.parts <= 99999:
        p.error("--parts must be 1 to 99999")
    if a.rank is not None and a.rank >= a.world_size:
        p.error("--rank %d is not below --world-size %d"
                % (a.rank, a.world_size))
    try:
        fmt, objects = read_rindex(a.index)
    except (OSError, ValueError) as e:
        print("shardspec: %s" % e, file=sys.stderr)
        return 2
    ranks = plan_records(objects, fmt, a.world_size, a.seed, a.epoch,
                         a.order, a.layout, a.balance, a.parts, a.reshuffle,
                         a.skip, a.skip_world)
    out = sys.stdout.buffer
    for r, rank in enumerate(ranks):
        if a.rank is not None and r != a.rank:
            continue
        for pi, (size, recs) in enumerate(rank):
            out.write(b"rank %d part %d size %d %s\n"
                      % (r, pi, size, part_name(fmt, pi, a.parts).encode()))
            for o, rec, pad in recs:
                out.write(objects[o][0] + b"\t%d%s\n"
                          % (rec, b"\tpad" if pad else b""))
    out.flush()
    return 0


def uint64_arg(text):
    try:
        v = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % text)
    if not 0 <= v <= MASK:
        raise argparse.ArgumentTypeError("out of uint64 range: %r" % text)
    return v


def main(argv):
    if argv[:1] == ["records"]:
        return records_main(argv[1:])
    p = argparse.ArgumentParser(
        description="Reference sharding (shardfs-shard v1): print one "
        "rank's keys in epoch order.")
    p.add_argument("manifest", nargs="?", help="manifest file (TSV)")
    p.add_argument("--world-size", type=uint64_arg)
    p.add_argument("--seed", type=uint64_arg, default=0)
    p.add_argument("--epoch", type=uint64_arg, default=0)
    p.add_argument("--order", choices=["shuffle", "none"], default="shuffle")
    p.add_argument("--layout", choices=["strided", "contiguous", "bytes"],
                   default="strided")
    p.add_argument("--balance", choices=["none", "drop", "pad"],
                   default="none")
    p.add_argument("--rank", type=uint64_arg)
    add_epoch_args(p)
    p.add_argument("--selftest", action="store_true",
                   help="check the DESIGN.md section 5 test vectors")
    a = p.parse_args(argv)

    if a.selftest:
        return selftest()
    if a.manifest is None or a.world_size is None or a.rank is None:
        p.error("MANIFEST_TSV, --world-size and --rank are required")
    err = spec_error(a.world_size, a.layout, a.balance, a.skip_world)
    if err:
        p.error(err)
    if a.rank >= a.world_size:
        p.error("--rank %d is not below --world-size %d"
                % (a.rank, a.world_size))
    try:
        keys, sizes = read_manifest(a.manifest)
    except (OSError, ValueError) as e:
        print("shardspec: %s" % e, file=sys.stderr)
        return 2
    # plan/shard.c stores indices as uint32 and refuses larger plans. A skip
    # plan's T is at most N long, so this bound may refuse a plan near
    # 2^32 positions that shardfs builds, never the reverse.
    worlds = [a.world_size]
    if a.skip or a.skip_world:
        worlds.append(a.skip_world or a.world_size)
    n_positions = len(keys)
    if a.balance == "pad":
        n_positions = max(-(-len(keys) // w) * w for w in worlds)
    if max(len(keys), a.world_size, n_positions) > UINT32_MAX:
        print("shardspec: plan too large for shardfs (EOVERFLOW)",
              file=sys.stderr)
        return 2

    out = sys.stdout.buffer
    for item, pad in plan_rank(len(keys), sizes, a.world_size, a.seed,
                               a.epoch, a.order, a.layout, a.balance, a.rank,
                               a.reshuffle, a.skip, a.skip_world):
        out.write(keys[item] + (b"\tpad\n" if pad else b"\n"))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
