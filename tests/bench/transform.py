#!/usr/bin/python3
"""Driver of the transform bench (tests/bench/transform.sh, issue 27).

    transform.py make DIR N
        N JPEGs of a few hundred KB (800x600, gradient plus noise, quality
        92, numpy seed per file) under DIR/img/cCC/IIIIIII.jpg, unless
        DIR/.done-N says a run already wrote them all (kept between runs).
    transform.py local JPEG_DIR PNG_DIR
        the reference outputs: resize64.resize() run locally on every JPEG,
        written as PNG_DIR/<path with .png for .jpg> (DIR/.done marks a
        finished set; rerun only when missing).
    transform.py load --mode png|jpeg --root ROOT --order FILE --epochs K
                      [--stats MOUNT]
        a PyTorch DataLoader (num_workers 2, batch 32, the order file's
        order) over ROOT/<path> for every non-pad path of FILE; png: its
        __getitem__ decodes the PNG to a uint8 tensor; jpeg: it decodes the
        JPEG and resizes it to 64x64 itself (resize64.decode_resize()).
        Prints one JSON line per epoch: items and seconds (and with --stats
        the epoch's deltas of a few of MOUNT/.shardfs/stats' counters).
    transform.py compare TREE REF ORDER
        every path of ORDER under TREE has exactly REF's bytes (exit 1 and
        the first difference otherwise).
    transform.py report RESULTS.json
        the table.
"""

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resize64  # noqa: E402

BATCH = 32
WORKERS = 2


# Counters of .shardfs/stats read after each epoch of a mount's loader:
# where an epoch's time went (the bytes fetched, whether the prefetcher got
# there first, how often a read waited for its first chunk, transform runs).
STATS = ("backend_requests_total", "backend_bytes_total", "prefetch_hits_total",
         "first_chunk_waits_total", "first_chunk_wait_us_total",
         "cache_derived_runs_total")


def read_stats(mnt):
    out = {}
    with open(os.path.join(mnt, ".shardfs", "stats")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0].startswith("shardfs_"):
                name = parts[0][len("shardfs_"):]
                if name in STATS:
                    out[name] = int(float(parts[1]))
    return out


def order_paths(order):
    with open(order, "rb") as f:
        lines = f.read().decode().splitlines()
    return [ln for ln in lines if ln and not ln.endswith("\tpad")]


def cmd_make(d, n):
    from PIL import Image

    done = os.path.join(d, ".done-%d" % n)
    if os.path.exists(done):
        return
    w, h = 800, 600
    y, x = np.mgrid[0:h, 0:w]
    for i in range(n):
        rng = np.random.default_rng(1000 + i)
        base = np.stack([(x * 255 // w + i) % 256, (y * 255 // h + 3 * i) % 256,
                         (x ^ y ^ i) & 255], -1).astype(np.int16)
        amp = int(rng.integers(25, 50))
        img = np.clip(base + rng.integers(-amp, amp + 1, size=(h, w, 3)), 0, 255)
        sub = os.path.join(d, "img", "c%02d" % (i % 20))
        os.makedirs(sub, exist_ok=True)
        Image.fromarray(img.astype(np.uint8)).save(
            os.path.join(sub, "%07d.jpg" % i), format="JPEG", quality=92)
    open(done, "w").close()


def cmd_local(src, dst):
    done = os.path.join(dst, ".done")
    if os.path.exists(done):
        return
    for top, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".jpg"):
                continue
            rel = os.path.relpath(os.path.join(top, name), src)
            out = os.path.join(dst, rel[:-len(".jpg")] + ".png")
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(os.path.join(top, name), "rb") as f:
                data = resize64.resize(f.read())
            with open(out, "wb") as f:
                f.write(data)
    open(done, "w").close()


class Files:
    """The dataset: one file per item, read whole in __getitem__."""

    def __init__(self, root, paths, mode):
        self.files = [os.path.join(root, p) for p in paths]
        self.mode = mode

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import io

        import torch
        from PIL import Image

        with open(self.files[i], "rb") as f:
            data = f.read()
        if self.mode == "jpeg":
            im = resize64.decode_resize(data)
        else:
            im = Image.open(io.BytesIO(data)).convert("RGB")
        return torch.from_numpy(np.asarray(im, dtype=np.uint8).copy())


def one_thread(_):
    import torch

    torch.set_num_threads(1)


def cmd_load(mode, root, order, epochs, mnt):
    import torch
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    paths = order_paths(order)
    ds = Files(root, paths, mode)
    dl = DataLoader(ds, batch_size=BATCH, shuffle=False, num_workers=WORKERS,
                    worker_init_fn=one_thread)
    before = read_stats(mnt) if mnt else {}
    for e in range(epochs):
        n = 0
        t0 = time.monotonic()
        for batch in dl:
            if batch.dtype != torch.uint8 or tuple(batch.shape[1:]) != (64, 64, 3):
                sys.exit("transform.py: a batch of %s %s" % (batch.dtype, tuple(batch.shape)))
            n += batch.shape[0]
        secs = time.monotonic() - t0
        if n != len(paths):
            sys.exit("transform.py: epoch %d gave %d of %d items" % (e + 1, n, len(paths)))
        line = {"mode": mode, "epoch": e + 1, "items": n, "seconds": secs}
        if mnt:
            after = read_stats(mnt)
            line["stats"] = {k: after[k] - before.get(k, 0) for k in after}
            before = after
        print(json.dumps(line), flush=True)


def cmd_compare(tree, ref, order):
    paths = order_paths(order)
    for p in paths:
        with open(os.path.join(tree, p), "rb") as f:
            a = f.read()
        with open(os.path.join(ref, p), "rb") as f:
            b = f.read()
        if a != b:
            sys.exit("transform.py: %s: %d bytes differ from the local output's %d"
                     % (p, len(a), len(b)))
    print("compare: %d files identical" % len(paths))


def ratio(a, b):
    return a / b if b > 0 else float("inf")


def cmd_report(path):
    with open(path) as f:
        r = json.load(f)
    t, j, loc = r["transform"], r["jpeg"], r["local"]
    k = len(t)
    print("Transform bench: %d JPEGs (%.0f KB mean) on s3rver, [transform resize64] "
          "(Pillow decode + 64x64 PNG, worker mode, workers = 2), world_size 1;"
          % (r["n"], r["jpeg_bytes"] / r["n"] / 1024))
    print("PyTorch DataLoader num_workers %d, batch %d, order of rank-0.order; "
          "fresh cache per mount." % (WORKERS, BATCH))
    print()
    print("%-7s %14s %18s %12s" % ("epoch", "transform (s)", "in-DataLoader (s)", "local (s)"))
    for e in range(k):
        print("%-7d %14.2f %18.2f %12.2f" % (e + 1, t[e], j[e], loc[e]))
    print()
    rows = [("transform epoch1 / in-DataLoader epoch1", ratio(t[0], j[0]), "<= 1.2",
             ratio(t[0], j[0]) <= 1.2)]
    for e in range(1, k):
        v = ratio(j[e], t[e])
        rows.append(("in-DataLoader epoch%d / transform epoch%d" % (e + 1, e + 1), v, ">= 5",
                     v >= 5))
    for e in range(1, k):
        v = ratio(t[e], loc[e])
        rows.append(("transform epoch%d / local epoch%d" % (e + 1, e + 1), v, "<= 1.1",
                     v <= 1.1))
    print("%-42s %8s %8s  %s" % ("ratio", "value", "target", ""))
    for name, v, tgt, met in rows:
        print("%-42s %8.2f %8s  %s" % (name, v, tgt, "met" if met else "missed"))
    print()
    print("Per epoch, deltas of .shardfs/stats (transform mount | in-DataLoader mount):")
    print("%-6s %-24s %-24s %-20s %-22s %s" % ("epoch", "backend requests", "backend MB",
                                              "prefetch hits", "first-chunk waits (s)",
                                              "derived runs"))
    ts, js = r.get("transform_stats", []), r.get("jpeg_stats", [])
    for e in range(min(len(ts), len(js))):
        a, b = ts[e], js[e]

        def pair(key, scale=1.0, fmt="%d"):
            return (fmt + " | " + fmt) % (a.get(key, 0) / scale, b.get(key, 0) / scale)
        print("%-6d %-24s %-24s %-20s %-22s %s" % (
            e + 1, pair("backend_requests_total"), pair("backend_bytes_total", 1e6, "%.0f"),
            pair("prefetch_hits_total"), pair("first_chunk_wait_us_total", 1e6, "%.1f"),
            pair("cache_derived_runs_total")))
    print()
    st = r["stats"]
    name = next((s for s in ("shardfs_transform_runs_total", "shardfs_transform_runs")
                 if s in st), "shardfs_cache_derived_runs_total")
    if name not in st:
        print("transform runs: neither shardfs_transform_runs nor "
              "shardfs_cache_derived_runs_total in .shardfs/stats")
        return
    # The derived counter counts producer runs of derived objects: each
    # output is two (its length and its bytes, cache/xform.h), the second
    # taking the first's output from memory without running the transform.
    per = 1 if "transform" in name.split("_")[1] else 2
    print("transform runs (%s after %d epochs): %d = %.2f per object (%d per object "
          "is one transform run each)" % (name, k, st[name], st[name] / r["n"], per))


def main(argv):
    if len(argv) >= 2 and argv[1] == "make" and len(argv) == 4:
        cmd_make(argv[2], int(argv[3]))
    elif len(argv) >= 2 and argv[1] == "local" and len(argv) == 4:
        cmd_local(argv[2], argv[3])
    elif len(argv) >= 2 and argv[1] == "load":
        import argparse

        ap = argparse.ArgumentParser(prog="transform.py load")
        ap.add_argument("--mode", choices=("png", "jpeg"), required=True)
        ap.add_argument("--root", required=True)
        ap.add_argument("--order", required=True)
        ap.add_argument("--epochs", type=int, default=3)
        ap.add_argument("--stats", metavar="MOUNT",
                        help="the mount whose .shardfs/stats to read after each epoch")
        a = ap.parse_args(argv[2:])
        cmd_load(a.mode, a.root, a.order, a.epochs, a.stats)
    elif len(argv) >= 2 and argv[1] == "compare" and len(argv) == 5:
        cmd_compare(argv[2], argv[3], argv[4])
    elif len(argv) >= 2 and argv[1] == "report" and len(argv) == 3:
        cmd_report(argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
