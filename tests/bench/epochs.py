#!/usr/bin/python3
"""Driver of the epochs bench (tests/bench/epochs.sh).

    epochs.py make SRC N
        an ImageNet-like tree SRC/train/nCCCCCCCC/IIIIIII.JPEG: N files of
        80-140 KiB of random bytes (seed 7, as tests/bench/cache.sh).
    epochs.py epoch MOUNT RANK E SRC
        one trainer's epoch: opens, reads whole and closes every non-pad
        file of MOUNT/.shardfs/epoch-E/rank-RANK.order, in that order, from
        MOUNT/epoch-E/rank-RANK/, checks each file's bytes against SRC and
        prints one JSON line (files, bytes, seconds, the stats at its end).
        Exits 1 at the first file whose bytes differ or that fails to read.
    epochs.py run --label L --epochs K --src SRC NODE:MOUNT:RANK...
        K epochs of every node at once (a barrier between epochs, as a
        synchronous trainer's), each node's stats read before epoch 0 and
        at the end of each of its epochs; prints one JSON line per node and
        epoch (the deltas and what the plans predict).
    epochs.py report OUT RESULTS.jsonl... [--note TEXT]
        the table (stdout) and, unless OUT is "-", the markdown file OUT.

Only the mount path is measured: every byte a trainer reads comes through
FUSE from the daemon.
"""

import json
import os
import random
import subprocess
import sys
import time

STATS = ("backend_bytes_total", "backend_requests_total", "cache_hits_total",
         "cache_misses_total", "prefetch_hits_total", "reads_total",
         "read_bytes_total", "kernel_pushes_total", "cache_evictions_total",
         "backend_errors_total", "read_errors_total", "hedges_issued_total")


def read_stats(mnt):
    out = {}
    with open(os.path.join(mnt, ".shardfs", "stats")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0].startswith("shardfs_"):
                name = parts[0][len("shardfs_"):]
                if name in STATS:
                    out[name] = int(float(parts[1]))
    missing = [s for s in STATS if s not in out]
    if missing:
        sys.exit("epochs.py: %s/.shardfs/stats lacks %s" % (mnt, missing))
    return out


def order_keys(mnt, epoch, rank):
    path = os.path.join(mnt, ".shardfs", "epoch-%d" % epoch,
                        "rank-%d.order" % rank)
    with open(path, "rb") as f:
        lines = f.read().decode().splitlines()
    return [ln for ln in lines if not ln.endswith("\tpad")]


def cmd_make(src, n):
    rnd = random.Random(7)
    for i in range(n):
        d = os.path.join(src, "train", "n%08d" % (i % 100))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "%07d.JPEG" % i), "wb") as f:
            f.write(rnd.randbytes(rnd.randint(80000, 140000)))


def cmd_epoch(mnt, rank, epoch, src):
    keys = order_keys(mnt, epoch, rank)
    root = os.path.join(mnt, "epoch-%d" % epoch, "rank-%d" % rank)
    nbytes = 0
    t0 = time.monotonic()
    for k in keys:
        # A trainer's loop: open, read whole, close, in the order's order.
        with open(os.path.join(root, k), "rb", buffering=0) as f:
            chunks = []
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                chunks.append(b)
        got = b"".join(chunks)
        with open(os.path.join(src, k), "rb") as f:
            want = f.read()
        if got != want:
            sys.exit("FAIL %s/%s: %d bytes read, the source has %d%s" %
                     (root, k, len(got), len(want),
                      " (same length, bytes differ)"
                      if len(got) == len(want) else ""))
        nbytes += len(got)
    secs = time.monotonic() - t0
    print(json.dumps({"files": len(keys), "bytes": nbytes, "seconds": secs,
                      "stats": read_stats(mnt)}))


def cmd_run(args):
    label, epochs, src, nodes = None, 3, None, []
    i = 0
    while i < len(args):
        if args[i] == "--label":
            label, i = args[i + 1], i + 2
        elif args[i] == "--epochs":
            epochs, i = int(args[i + 1]), i + 2
        elif args[i] == "--src":
            src, i = args[i + 1], i + 2
        else:
            name, mnt, rank = args[i].split(":")
            nodes.append((name, mnt, int(rank)))
            i += 1
    prev = {n: read_stats(m) for n, m, _ in nodes}
    seen = {n: set() for n, _, _ in nodes}
    for e in range(epochs):
        procs = [(n, m, r, subprocess.Popen(
            [sys.executable, __file__, "epoch", m, str(r), str(e), src],
            stdout=subprocess.PIPE, text=True)) for n, m, r in nodes]
        for n, m, r, p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                sys.exit("epochs.py: node %s epoch %d failed (exit %d)" %
                         (n, e, p.returncode))
            res = json.loads(out)
            keys = order_keys(m, e, r)
            new = [k for k in keys if k not in seen[n]]
            new_bytes = sum(os.path.getsize(os.path.join(src, k))
                            for k in new)
            seen[n].update(keys)
            d = {s: res["stats"][s] - prev[n][s] for s in STATS}
            prev[n] = res["stats"]
            print(json.dumps({
                "label": label, "node": n, "rank": r, "epoch": e,
                "files": res["files"], "bytes": res["bytes"],
                "seconds": res["seconds"], "delta": d,
                "new_files": len(new), "new_bytes": new_bytes,
                "seen_files": len(seen[n])}), flush=True)
            if d["read_errors_total"] or d["backend_errors_total"]:
                sys.exit("epochs.py: node %s epoch %d: %d read errors, %d "
                         "backend errors" % (n, e, d["read_errors_total"],
                                             d["backend_errors_total"]))
    # The prefetcher walks on into epoch K's head after the last epoch:
    # wait until each node's backend bytes settle (at most 30 s) and report
    # what it fetched after its last epoch ended.
    for n, m, _ in nodes:
        last, still = read_stats(m)["backend_bytes_total"], 0
        for _ in range(60):
            time.sleep(0.5)
            cur = read_stats(m)["backend_bytes_total"]
            still = still + 1 if cur == last else 0
            last = cur
            if still >= 2:
                break
        print(json.dumps({"label": label, "node": n, "tail_bytes":
                          last - prev[n]["backend_bytes_total"]}), flush=True)


def table(rows):
    head = ("| run | epoch | node | files | backend MB | from backend | "
            "expected (plans) | expected 1-(1-1/W)^k cached | cum. backend MB "
            "| cum. expected MB | file hit rate | chunk hit rate | prefetch "
            "hits | files/s |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    cum = {}
    for r in rows:
        if "epoch" not in r:
            continue
        d = r["delta"]
        c = cum.setdefault((r["label"], r["node"]), [0, 0])
        c[0] += d["backend_bytes_total"]
        c[1] += r["new_bytes"]
        share = d["backend_bytes_total"] / r["bytes"]
        want = r["new_bytes"] / r["bytes"]
        files_fetched = min(d["backend_requests_total"], r["files"])
        lookups = d["cache_hits_total"] + d["cache_misses_total"]
        chunk = d["cache_hits_total"] / lookups if lookups else float("nan")
        formula = ("%.3f" % (1 - 0.5 ** r["epoch"])
                   if r["label"].startswith("global") else
                   ("0" if r["epoch"] == 0 else "1 (local)"))
        out.append("| %s | %d | %s | %d | %.1f | %.3f | %.3f | %s | %.1f | "
                   "%.1f | %.3f | %.3f | %d | %.0f |" % (
                       r["label"], r["epoch"], r["node"], r["files"],
                       d["backend_bytes_total"] / 1e6, share, want, formula,
                       c[0] / 1e6, c[1] / 1e6,
                       1 - files_fetched / r["files"], chunk,
                       d["prefetch_hits_total"], r["files"] / r["seconds"]))
    return "\n".join(out)


def summary(rows):
    out = []
    labels = []
    for r in rows:
        if r["label"] not in labels:
            labels.append(r["label"])
    for lab in labels:
        rs = [r for r in rows if r["label"] == lab and "epoch" in r]
        tail = sum(r["tail_bytes"] for r in rows
                   if r["label"] == lab and "tail_bytes" in r)
        parts = []
        for e in sorted({r["epoch"] for r in rs}):
            er = [r for r in rs if r["epoch"] == e]
            b = sum(r["delta"]["backend_bytes_total"] for r in er)
            tot = sum(r["bytes"] for r in er)
            want = (0.5 ** e if lab.startswith("global") else
                    (1 if e == 0 else 0))
            parts.append("epoch %d %.1f MB (%.3f of the bytes read; "
                         "expected %.3f)" % (e, b / 1e6, b / tot, want))
        hedges = sum(r["delta"]["hedges_issued_total"] for r in rs)
        evicted = sum(r["delta"]["cache_evictions_total"] for r in rs)
        out.append("- %s, both nodes: %s; after the last epoch (the "
                   "prefetcher in the next epoch's head) %.1f MB; %d backend "
                   "reads hedged (re-issued: their bytes count twice); %d "
                   "cache entries evicted." %
                   (lab, "; ".join(parts), tail / 1e6, hedges, evicted))
    return "\n".join(out)


def cmd_report(out_path, files, note):
    rows = []
    for p in files:
        with open(p) as f:
            rows.extend(json.loads(ln) for ln in f if ln.strip())
    t = table(rows)
    s = summary(rows)
    print(t)
    print(s)
    if out_path == "-":
        return
    with open(out_path, "w") as f:
        f.write("# Epochs bench: `reshuffle = global` vs `local` on two "
                "nodes\n\n")
        f.write(note.strip() + "\n\n")
        f.write(t + "\n\n" + s + "\n")


def main():
    a = sys.argv[1:]
    if a[:1] == ["make"] and len(a) == 3:
        cmd_make(a[1], int(a[2]))
    elif a[:1] == ["epoch"] and len(a) == 5:
        cmd_epoch(a[1], int(a[2]), int(a[3]), a[4])
    elif a[:1] == ["run"]:
        cmd_run(a[1:])
    elif a[:1] == ["report"] and len(a) >= 3:
        note = ""
        if "--note" in a:
            i = a.index("--note")
            note = a[i + 1]
            a = a[:i] + a[i + 2:]
        cmd_report(a[1], a[2:], note)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
