#!/usr/bin/python3
"""A PyTorch DataLoader trainer for the latency phases of bench.py (issue 25).

    /usr/bin/python3 torch_trainer.py --root DIR --order FILE [--stats FILE]
        [--pids PID,...] [--epochs 2] [--workers 4] [--batch 32]
        [--compute-ms 2] [--compute sleep|busy] [--expect-bytes N]

A map-style Dataset over the files of one rank: the keys of FILE (a
`.shardfs/rank-R.order`: one key a line, `%XX` escapes undone, pad lines,
which end in TAB pad, skipped), in that order, under DIR (`MNT/rank-0` or
a local copy of the same files). `__getitem__` reads its file whole, then
spends --compute-ms of "compute" and returns the bytes as a uint8 tensor
(the size of a decoded 224x224 image, so the workers move about what a real
pipeline moves through shared memory). The DataLoader:
`DataLoader(ds, batch_size=32, shuffle=False, num_workers=4,
collate_fn=list)`: no shuffle, because the rank's order is already the
epoch's shuffle (what shardfs' prefetcher follows); a list, because the
tensors differ in length (a real pipeline resizes and stacks them).

Compute is a sleep by default: on this 2-core machine, four workers that
spin would take both cores from the FUSE daemon and the store, and the
ratio to the local copy would then measure the scheduler rather than the
read path; a sleep stands for work done elsewhere (the GPU, a real node's
other cores), as bench.py's own trainer does. `--compute busy` spins
instead.

Each epoch is timed from the first `next()` of the loader to its last batch
(worker start-up included: the loader's workers are not persistent, as by
default). With --stats (a mount's `.shardfs/stats`) the counters are read
around every epoch; the requests those reads make themselves are taken out
of the FUSE request counters (see the `stats_delta` comment). With --pids
the CPU seconds of those processes (the daemon, the store) over each epoch.
Prints one JSON object: the import time and, per epoch, wall seconds,
files, bytes, the counters' deltas and the CPU seconds; exits 1 if an epoch
read the wrong number of bytes or a file failed.
"""

import argparse
import json
import os
import re
import sys
import time
import warnings

T0 = time.perf_counter()
import torch  # noqa: E402
import torch.utils.data  # noqa: E402

IMPORT_S = time.perf_counter() - T0
STAT_LINE = re.compile(r"shardfs_(\w+)(\{[^}]*\})? (\d+)$")


def unescape(key):
    """Undoes the manifest's %XX escapes (DESIGN: `%`, TAB, LF, CR and
    bytes below 0x20 are written as %XX; nothing else is escaped)."""
    return re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), key)


def order_keys(path):
    keys = []
    with open(path, "rb") as f:
        for line in f.read().split(b"\n"):
            if not line or line.endswith(b"\tpad"):
                continue
            keys.append(os.fsdecode(unescape(line.split(b"\t")[0])))
    return keys


class Files(torch.utils.data.Dataset):
    def __init__(self, root, keys, compute_s, busy):
        self.paths = [os.path.join(root, k) for k in keys]
        self.compute_s = compute_s
        self.busy = busy

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb", buffering=0) as f:
            data = f.read()
        if self.compute_s:
            if self.busy:
                end = time.perf_counter() + self.compute_s
                while time.perf_counter() < end:
                    pass
            else:
                time.sleep(self.compute_s)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
            torch.empty(0, dtype=torch.uint8)


def read_stats(path):
    out = {}
    with open(path) as f:
        for line in f:
            m = STAT_LINE.match(line.strip())
            if m:
                out[m.group(1) + (m.group(2) or "")] = int(m.group(3))
    return out


def cpu_s(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def stats_delta(b1, b2, a):
    """Counters over the epoch. b1 and b2 are read back to back before it,
    a after it. b2 -> a holds the epoch plus the FUSE requests of one stats
    read (b2's release, a's lookup/open/read); b1 -> b2 is exactly one such
    read, so the FUSE request counters are (a - b2) - (b2 - b1), never
    below 0. Other counters (the daemon's own, not FUSE's) are a - b2."""
    out = {}
    for k, v in a.items():
        d = v - b2.get(k, 0)
        if k.startswith("fuse_requests_total"):
            d = max(0, d - (b2.get(k, 0) - b1.get(k, 0)))
        out[k] = d
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--order", required=True)
    ap.add_argument("--stats")
    ap.add_argument("--pids", default="")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--compute-ms", type=float, default=2.0)
    ap.add_argument("--compute", choices=("sleep", "busy"), default="sleep")
    ap.add_argument("--expect-bytes", type=int)
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds the loader waits for one batch before failing")
    args = ap.parse_args()
    keys = order_keys(args.order)
    if not keys:
        print("torch_trainer: %s lists no file" % args.order, file=sys.stderr)
        return 1
    pids = [int(p) for p in args.pids.split(",") if p]
    # 4 workers on 2 cores is what the benchmark asks for, not a mistake.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    ds = Files(args.root, keys, args.compute_ms / 1000.0, args.compute == "busy")
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=False,
                                         num_workers=args.workers, collate_fn=list,
                                         timeout=args.timeout if args.workers else 0)
    out = {"import_s": IMPORT_S, "files": len(keys), "workers": args.workers,
           "batch": args.batch, "compute_ms": args.compute_ms, "compute": args.compute,
           "torch": torch.__version__, "epochs": []}
    rc = 0
    for e in range(args.epochs):
        b1 = read_stats(args.stats) if args.stats else None
        b2 = read_stats(args.stats) if args.stats else None
        c0 = [cpu_s(p) for p in pids]
        files = nbytes = 0
        error = None
        t0 = time.perf_counter()
        try:
            for batch in loader:
                files += len(batch)
                nbytes += sum(t.numel() for t in batch)
        except (OSError, RuntimeError) as ex:
            # A worker's exception arrives as its whole traceback: keep the
            # first line (which worker) and the last (what failed).
            lines = [ln.strip() for ln in str(ex).splitlines() if ln.strip()]
            error = " ".join(lines[:1] + lines[-1:]) if len(lines) > 1 else \
                (lines[0] if lines else type(ex).__name__)
        wall = time.perf_counter() - t0
        c1 = [cpu_s(p) for p in pids]
        ep = {"wall_s": wall, "files": files, "bytes": nbytes,
              "cpu_s": [None if a is None or b is None else b - a for a, b in zip(c0, c1)]}
        if args.stats:
            ep["stats"] = stats_delta(b1, b2, read_stats(args.stats))
        if error is None and files != len(keys):
            error = "read %d files, expected %d" % (files, len(keys))
        if error is None and args.expect_bytes is not None and nbytes != args.expect_bytes:
            error = "read %d bytes, expected %d" % (nbytes, args.expect_bytes)
        if error:
            ep["error"] = error
            rc = 1
        out["epochs"].append(ep)
        if error:
            break
    json.dump(out, sys.stdout)
    return rc


if __name__ == "__main__":
    sys.exit(main())
