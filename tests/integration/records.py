#!/usr/bin/python3
"""Record datasets and an independent checker for record views.

Written from the published framings, not from shardfs' C code:

    records.py make FORMAT DIR [--objects N] [--seed S] [--big]
        writes a dataset of FORMAT (tfrecord, tfrecord.gz, jsonl, jsonl.gz,
        tar) into DIR, plus a few objects of other formats that a record
        view must skip.
    records.py check FORMAT SRC MOUNT --world W --seed S [--epoch E]
            [--order O] [--layout L] [--balance B] --parts P [--ranks R,R..]
            [--reshuffle global|local] [--skip K] [--skip-world W0]
            [--tree epoch-E[/skip-K]] [--ctrl .shardfs/epoch-E[/skip-K]]
        reads SRC's record files with the readers below, computes every
        rank's records and parts with shardspec.py's plan (the spec's
        reference), then for each shown rank: every part parses with the
        format's reader (TFRecord: both masked CRC32Cs; tar: Python's
        tarfile in stream mode and the WebDataset key rule; JSONL: a JSON
        parser per line), every part is byte for byte the expected records,
        and .shardfs/rank-R.order lists them. Over all ranks the multiset
        of records (pads aside) equals the source's. Prints "ok ..." lines
        and exits 1 on the first mismatch.
    records.py tfrecord-check FILE     exit 0 if FILE is valid TFRecord
"""

import gzip
import io
import json
import os
import random
import struct
import sys
import tarfile
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shardspec  # noqa: E402

SUFFIXES = {
    "tfrecord": (".tfrecord", ".tfrecords"),
    "tfrecord.gz": (".tfrecord.gz", ".tfrecords.gz"),
    "jsonl": (".jsonl",),
    "jsonl.gz": (".jsonl.gz",),
    "tar": (".tar",),
}

# --- CRC-32C (Castagnoli), bit by bit from the polynomial ------------------
_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def tfrecord_frame(data):
    n = struct.pack("<Q", len(data))
    return (n + struct.pack("<I", masked(crc32c(n))) + data
            + struct.pack("<I", masked(crc32c(data))))


def tfrecord_split(buf, name):
    """The frames of buf, each checked; raises ValueError."""
    out, pos = [], 0
    while pos < len(buf):
        if len(buf) - pos < 12:
            raise ValueError("%s: truncated header at %d" % (name, pos))
        (n,) = struct.unpack_from("<Q", buf, pos)
        (lc,) = struct.unpack_from("<I", buf, pos + 8)
        if lc != masked(crc32c(buf[pos:pos + 8])):
            raise ValueError("%s: length CRC at %d" % (name, pos))
        end = pos + 12 + n + 4
        if end > len(buf):
            raise ValueError("%s: truncated record at %d" % (name, pos))
        data = buf[pos + 12:pos + 12 + n]
        (dc,) = struct.unpack_from("<I", buf, pos + 12 + n)
        if dc != masked(crc32c(data)):
            raise ValueError("%s: data CRC at %d" % (name, pos))
        out.append(buf[pos:end])
        pos = end
    return out


def jsonl_split(buf):
    """Lines with their '\\n'; a last line without one gets it."""
    out, pos = [], 0
    while pos < len(buf):
        nl = buf.find(b"\n", pos)
        if nl < 0:
            out.append(buf[pos:] + b"\n")
            break
        out.append(buf[pos:nl + 1])
        pos = nl + 1
    return out


def wds_key(path):
    d, _, base = path.rpartition("/")
    stem = base.split(".", 1)[0]
    return (d + "/" + stem) if d else stem


def tar_samples(buf, name):
    """Each sample as (key, [(member name, data)]), with tarfile in stream
    mode and WebDataset's grouping of consecutive members by key."""
    samples = []
    with tarfile.open(fileobj=io.BytesIO(buf), mode="r|") as t:
        for m in t:
            if not m.isfile():
                continue
            data = t.extractfile(m).read()
            k = wds_key(m.name)
            if samples and samples[-1][0] == k:
                samples[-1][1].append((m.name, data))
            else:
                samples.append((k, [(m.name, data)]))
    return samples


# --- making datasets ----------------------------------------------------------
def make(fmt, root, objects, seed, big, small=False):
    rnd = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    base = fmt[:-3] if fmt.endswith(".gz") else fmt
    for i in range(objects):
        sub = "a" if i % 2 else "b/c"
        os.makedirs(os.path.join(root, sub), exist_ok=True)
        if base == "tfrecord":
            n = rnd.randint(0 if i == 0 else 1, 40)
            if big:
                n = rnd.randint(4, 12)
            recs = []
            if small:
                n = rnd.randint(800, 1200)
            for _ in range(n):
                size = rnd.choice([0, 1, 7, 100, 4096, 70000])
                if big:
                    size = rnd.randint(100 << 10, 900 << 10)
                if small:
                    size = rnd.randint(2 << 10, 6 << 10)
                recs.append(tfrecord_frame(rnd.randbytes(size)))
            data = b"".join(recs)
            ext = ".tfrecord" if i % 3 else ".tfrecords"
        elif base == "jsonl":
            lines = []
            for j in range(rnd.randint(1, 60)):
                obj = {"id": "%d-%d" % (i, j), "text": "é☃" * rnd.randint(0, 50),
                       "n": rnd.random()}
                lines.append(json.dumps(obj, ensure_ascii=False).encode())
            if i == 1:  # bytes that are not UTF-8, inside a JSON string
                lines.append(b'{"raw": "\xff\xfe bytes"}')
            if i == 2:
                lines.append(b"")  # an empty line is a record too
            data = b"\n".join(lines) + (b"" if i % 4 == 3 else b"\n")
            ext = ".jsonl"
        else:  # tar: samples of 1-3 members with a per-dataset unique key
            bio = io.BytesIO()
            tfmt = tarfile.GNU_FORMAT if i % 3 == 2 else tarfile.PAX_FORMAT
            with tarfile.open(fileobj=bio, mode="w", format=tfmt) as t:
                if i == 1:
                    di = tarfile.TarInfo("dir-entry")
                    di.type = tarfile.DIRTYPE
                    t.addfile(di)
                for j in range(rnd.randint(1, 25)):
                    key = "o%03d/s%04d" % (i, j)
                    if j == 3:
                        key = "o%03d/%s%04d" % (i, "long" * 40, j)
                    for ext_ in rnd.sample(["jpg", "cls", "json", "txt"],
                                           rnd.randint(1, 3)):
                        payload = rnd.randbytes(rnd.choice([0, 10, 513, 5000]))
                        ti = tarfile.TarInfo("%s.%s" % (key, ext_))
                        ti.size = len(payload)
                        t.addfile(ti, io.BytesIO(payload))
            data = bio.getvalue()
            ext = ".tar"
        if fmt.endswith(".gz"):
            if i % 3 == 1 and len(data) > 1:  # two gzip members
                h = len(data) // 2
                data = gzip.compress(data[:h]) + gzip.compress(data[h:])
            else:
                data = gzip.compress(data)
            ext += ".gz"
        with open(os.path.join(root, sub, "part%03d%s" % (i, ext)), "wb") as f:
            f.write(data)
    # objects a record view of this format must skip
    with open(os.path.join(root, "README.txt"), "wb") as f:
        f.write(b"not a record file\n")
    with open(os.path.join(root, "a", "x.tfrecord.bak"), "wb") as f:
        f.write(b"skip me")


# --- checking a mount ---------------------------------------------------------
def source_records(fmt, root):
    """[(key, [record bytes as served])] in canonical (raw key byte) order."""
    objs = []
    for d, _, files in os.walk(root):
        for fn in files:
            p = os.path.join(d, fn)
            key = os.path.relpath(p, root)
            if key.endswith(SUFFIXES[fmt]):
                objs.append(key.encode())
    objs.sort()
    out = []
    for key in objs:
        with open(os.path.join(root, key.decode()), "rb") as f:
            buf = f.read()
        if fmt.endswith(".gz"):
            buf = gzip.decompress(buf)  # handles several members
        name = key.decode()
        if fmt.startswith("tfrecord"):
            recs = tfrecord_split(buf, name)
        elif fmt.startswith("jsonl"):
            recs = jsonl_split(buf)
        else:
            recs = tar_raw_samples(buf, name)
        out.append((name, recs))
    return out


def tar_raw_samples(buf, name):
    """Samples as the raw bytes of their members (headers, data, padding),
    located with tarfile's offsets: what a part must hold verbatim."""
    spans = []
    with tarfile.open(fileobj=io.BytesIO(buf), mode="r:") as t:
        for m in t.getmembers():
            end = m.offset_data + ((m.size + 511) // 512) * 512
            if m.isfile():
                k = wds_key(m.name)
                if spans and spans[-1][0] == k and spans[-1][2] == m.offset:
                    spans[-1][2] = end
                else:
                    spans.append([k, m.offset, end])
    return [buf[a:b] for _, a, b in spans]


def parse_part(fmt, data, name):
    """Records of a part, parsed by the independent readers."""
    if fmt.startswith("tfrecord"):
        return tfrecord_split(data, name)
    if fmt.startswith("jsonl"):
        if data and not data.endswith(b"\n"):
            raise ValueError("%s: does not end in a newline" % name)
        recs = jsonl_split(data)
        for r in recs:
            if r.strip():
                json.loads(r.decode("utf-8", "surrogateescape"))
        return recs
    samples = tar_samples(data, name)
    keys = [k for k, _ in samples]
    if len(keys) != len(set(keys)):
        raise ValueError("%s: a key repeats" % name)
    if len(data) % 512 or data[-1024:] != b"\0" * 1024:
        raise ValueError("%s: no end-of-archive blocks" % name)
    return samples


def check(args):
    fmt, src, mnt = args.format, args.src, args.mount
    objs = source_records(fmt, src)
    flat = [(key, j, r) for key, recs in objs for j, r in enumerate(recs)]
    weights = [len(r) for _, _, r in flat]
    ranks = (range(args.world) if not args.ranks
             else [int(x) for x in args.ranks.split(",")])
    seen = Counter()
    for rank in ranks:
        more = dict(reshuffle=args.reshuffle, skip=args.skip,
                    skip_world=args.skip_world)
        if args.run_bytes:
            share = shardspec.plan_rank_runs(
                [[len(r) for r in recs] for _, recs in objs], args.world,
                args.seed, args.epoch, args.order, args.layout, args.balance,
                args.run_bytes, args.window, rank, **more)
        else:
            share = shardspec.plan_rank(len(flat), weights, args.world, args.seed,
                                        args.epoch, args.order, args.layout,
                                        args.balance, rank, **more)
        want_order = b"".join(
            b"%s\t%d%s\n" % (flat[i][0].encode(), flat[i][1],
                             b"\tpad" if pad else b"") for i, pad in share)
        with open(os.path.join(mnt, args.ctrl, "rank-%d.order" % rank), "rb") as f:
            got_order = f.read()
        if got_order != want_order:
            sys.exit("FAIL rank %d: %s/rank-%d.order differs from the "
                     "reference" % (rank, args.ctrl, rank))
        q, m = divmod(len(share), args.parts)
        ext = fmt[:-3] if fmt.endswith(".gz") else fmt
        for p in range(args.parts):
            lo, hi = q * p + min(p, m), q * (p + 1) + min(p + 1, m)
            want = b"".join(flat[i][2] for i, _ in share[lo:hi])
            if ext == "tar":
                want += b"\0" * 1024
            name = "part-%05d-of-%05d.%s" % (p, args.parts, ext)
            path = os.path.join(mnt, args.tree, "rank-%d" % rank, "records",
                                name)
            if os.stat(path).st_size != len(want):
                sys.exit("FAIL %s: size %d, want %d" %
                         (path, os.stat(path).st_size, len(want)))
            with open(path, "rb") as f:
                data = f.read()
            try:
                parsed = parse_part(fmt, data, path)
            except Exception as e:  # noqa: BLE001 (any reader error)
                sys.exit("FAIL %s: the %s reader rejects it: %s" % (path, ext, e))
            if len(parsed) != hi - lo:
                sys.exit("FAIL %s: %d records, want %d" % (path, len(parsed), hi - lo))
            if data != want:
                sys.exit("FAIL %s: bytes differ from the reference" % path)
        for i, pad in share:
            if not pad:
                seen[(flat[i][0], flat[i][1])] += 1
        print("ok rank %d: %d records (%d pads) in %d parts, every part "
              "parses and matches" % (rank, len(share),
                                      sum(1 for _, p in share if p), args.parts))
    if not args.ranks and args.balance != "drop" and not args.skip:
        want_all = Counter((k, j) for k, j, _ in flat)
        if seen != want_all:
            sys.exit("FAIL the ranks' records are not the source's records")
        print("ok every source record is served exactly once (%d records)" % len(flat))


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make")
    mk.add_argument("format", choices=sorted(SUFFIXES))
    mk.add_argument("dir")
    mk.add_argument("--objects", type=int, default=6)
    mk.add_argument("--seed", type=int, default=7)
    mk.add_argument("--big", action="store_true")
    mk.add_argument("--small", action="store_true",
                    help="tfrecord: many records of 2-6 KiB")
    ck = sub.add_parser("check")
    ck.add_argument("format", choices=sorted(SUFFIXES))
    ck.add_argument("src")
    ck.add_argument("mount")
    ck.add_argument("--world", type=int, required=True)
    ck.add_argument("--seed", type=int, default=0)
    ck.add_argument("--epoch", type=int, default=0)
    ck.add_argument("--order", default="shuffle")
    ck.add_argument("--layout", default="strided")
    ck.add_argument("--balance", default="none")
    ck.add_argument("--parts", type=int, default=8)
    ck.add_argument("--ranks", default="")
    ck.add_argument("--run-bytes", type=int, default=0)
    ck.add_argument("--window", type=int, default=1024)
    ck.add_argument("--reshuffle", default="global")
    ck.add_argument("--skip", type=int, default=0)
    ck.add_argument("--skip-world", type=int, default=0)
    ck.add_argument("--tree", default="",
                    help="where the rank directories are, under MOUNT "
                    "(e.g. epoch-1 or epoch-1/skip-40)")
    ck.add_argument("--ctrl", default=".shardfs",
                    help="where their order files are, under MOUNT")
    tc = sub.add_parser("tfrecord-check")
    tc.add_argument("file")
    a = ap.parse_args(argv)
    if a.cmd == "make":
        make(a.format, a.dir, a.objects, a.seed, a.big, a.small)
    elif a.cmd == "check":
        check(a)
    else:
        with open(a.file, "rb") as f:
            tfrecord_split(f.read(), a.file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
