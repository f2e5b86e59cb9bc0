"""Latency phases of bench.py (issue 12, item 3; issue 25's additions).

bench.py calls run(B, ctx) with itself as B (this module does not import
bench.py, so the classes are bench.py's own). For each latency L in
ctx.latencies (milliseconds) it restarts s3rver on the same data dir through
tests/integration/s3/s3rver_delay.js with S3RVER_DELAY_MS=L (a timer before
every request, no CPU), then measures, in one round:

  raw curl     small files in rank order at 1, 8, 32, 64, 128 connections
               (1 connection on the first SLOW_FILES keys: it is N x L long);
               large files with 1 and 8 streams to /dev/null, and as 8
               streams of 8 MiB ranged GETs into files on a tmpfs (the
               large-file target's denominator: the bytes land in new pages,
               as shardfs' do)
  shardfs      disk cache in a fresh dir, default config: small 1 reader in
               rank order and 8 readers (the shared list in rank order) cold;
               large sequential cold; the trainer (rank 0 of 4, COMPUTE_MS per
               file); 64 readers cold, with the daemon's peak RSS (VmHWM);
               at the lowest latency also the warm second pass and the warm
               pass after a remount (with the GETs it made) against local disk
  DataLoader   (pass "torch") tests/bench/torch_trainer.py with Debian's
               PyTorch: DataLoader(batch_size=32, num_workers=4) over rank-0/
               of a fresh shardfs mount, 2 ms per sample, two epochs; the same
               over the local copy (first epoch cold) at the lowest latency
  shardfs, cache off
               small 1 reader in rank order on the first SLOW_FILES keys (a
               diagnosis: the fetch path without the disk cache's store path)
  local disk   at the lowest latency: small 1 reader cold and warm, large warm
  squashfuse_ll
               at the lowest latency: small 1 reader in rank order after a
               fresh mount of an image of the local copy, and a second pass
  s3fs, rclone (cache off)
               small 1 reader in rank order on the first SLOW_FILES keys,
               8 readers on the first 4 x SLOW_FILES, large sequential cold

While shardfs reads, a thread samples .shardfs/stats every 0.2 s
(backend_inflight, prefetch_depth_files, memory_in_use_bytes): the profile
table says how deep the pipeline was. The counters are read before and after
each pass; the daemon's CPU time (/proc/PID/stat) is taken around it. FUSE
requests per file come from shardfs_fuse_requests_total{op=...} when the
daemon has those counters ("n/a" otherwise), less the requests the stats
reads made themselves (see fuse_pass_delta).

The large phases read the first LAT_LARGE_FILES large files (rank order).

markdown() returns the markdown of the latency section and of the targets
table (targets.py).
"""

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

import targets

CONNS = (1, 8, 32, 64, 128)
RSS_READERS = 64
# BENCH_LAT_PASSES: the passes to run at each latency, to iterate on one
# (the targets table then shows only what ran).
ALL_PASSES = "raw,s1,s8,nocache,l1,trainer,torch,rss,local,squashfuse,peers"
PASSES = {w.strip() for w in (os.environ.get("BENCH_LAT_PASSES", "") or ALL_PASSES).split(",")}
HERE = os.path.dirname(os.path.abspath(__file__))
FUSE_OP = re.compile(r'fuse_requests_total\{op="(\w+)"\}$')


class Sampler:
    """Samples a shardfs mount's gauges while a pass runs."""

    KEYS = ("backend_inflight", "prefetch_depth_files", "memory_in_use_bytes")

    def __init__(self, tgt, pids=()):
        self.tgt = tgt
        self.pids = pids  # whose CPU time the pass is charged: daemon, server
        self.cpu = None
        self.reads = 0  # stats reads made: their FUSE requests are not the pass's
        self.samples = {k: [] for k in self.KEYS}
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.wait(0.2):
            self.reads += 1
            st = self.tgt.stats()
            if not st:
                continue
            for k in self.KEYS:
                if k in st:
                    self.samples[k].append(st[k])

    def __enter__(self):
        self.cpu0 = [cpu_s(p) for p in self.pids]
        self.th.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.th.join()
        self.cpu = [None if a is None or b is None else b - a
                    for a, b in zip(self.cpu0, [cpu_s(p) for p in self.pids])]

    def summary(self):
        out = {}
        for k, v in self.samples.items():
            if v:
                out[k] = (statistics.mean(v), max(v))
        return out


def cpu_s(pid):
    """User + system CPU seconds of a live process."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def fuse_ops(st):
    """{op: count} of the FUSE request counters in a stats dict; empty
    when the daemon has none."""
    out = {}
    for k, v in (st or {}).items():
        m = FUSE_OP.match(k)
        if m:
            out[m.group(1)] = v
    return out


def fuse_pass_delta(b1, b2, a, stats_reads):
    """The FUSE requests of a pass, {op: count}, or None without counters.
    b1 and b2 are stats read back to back before the pass, a after it, and
    stats_reads further reads were made during it (the sampler). b1 -> b2
    is exactly one stats read's requests (b1's release, b2's lookup, open,
    read); b2 -> a holds the pass, the stats_reads reads and one more (b2's
    release, a's head), so the pass is (a - b2) - (stats_reads + 1) x
    (b2 - b1), never below 0."""
    o1, o2, oa = fuse_ops(b1), fuse_ops(b2), fuse_ops(a)
    if not oa:
        return None
    return {op: max(0, oa[op] - o2.get(op, 0) - (stats_reads + 1) *
                    (o2.get(op, 0) - o1.get(op, 0))) for op in oa}


def vm_kib(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Lat:
    """Results of the latency phases: (L, target, phase) -> value."""

    def __init__(self):
        self.v = {}
        self.errors = []
        self.profile = []  # rows: (L, phase, files/s or MB/s, sampler summary, stats delta)
        self.rss = {}  # L -> dict
        self.gets = {}  # (L, phase) -> backend requests during the pass
        self.compute = {}  # L -> measured compute seconds of the trainer
        self.walls = {}  # L -> seconds for the latency's phases
        # (L, target, phase) -> daemon CPU us per file of a pass that has no
        # profile row (squashfuse_ll's)
        self.cpu_pf = {}
        self.torch = {}  # (L, target) -> torch_trainer.py's output

    def put(self, L, tgt, phase, val):
        self.v[(L, tgt, phase)] = val

    def get(self, L, tgt, phase):
        return self.v.get((L, tgt, phase))

    def prof(self, L, phase):
        """The profile row of shardfs' pass `phase` at L, or None."""
        for p in self.profile:
            if p["L"] == L and p["phase"] == phase:
                return p
        return None


def s3rver_restart(B, ctx, L):
    if getattr(ctx, "s3p", None) is not None:
        ctx.env.stop(ctx.s3p)
    launcher = os.path.join(B.REPO, "tests", "integration", "s3", "s3rver_delay.js")
    ctx.s3p, ctx.ep = B.s3rver_start(ctx.env, ctx.s3rver_js, delay_ms=L, launcher=launcher)
    B.write_rclone_conf(ctx)


def run(B, ctx):
    lat = Lat()
    local = B.Local(ctx)
    for L in ctx.latencies:
        t0 = time.perf_counter()
        print("bench: latency %d ms" % L, flush=True)
        s3rver_restart(B, ctx, L)
        one_latency(B, ctx, lat, L, local, L == min(ctx.latencies))
        lat.walls[L] = time.perf_counter() - t0
    return lat


def one_latency(B, ctx, lat, L, local, lowest):
    rank, large, tk = ctx.rank, ctx.keys["large"][:ctx.lat_large_files], ctx.trainer_keys
    slow = rank[:ctx.slow_files]
    slow8 = rank[:4 * ctx.slow_files]

    def note(tgt, phase, r, unit):
        if "error" in r:
            lat.errors.append((L, tgt, phase, r["error"]))
            print("  %3d ms %-16s %-22s ERROR %s" % (L, tgt, phase, r["error"]), flush=True)
            return None
        if unit == "files/s":
            v = r["n"] / r["wall_s"]
        elif unit == "MB/s":
            v = r["bytes"] / 1e6 / r["wall_s"]
        else:
            v = r["wall_s"]
        lat.put(L, tgt, phase, v)
        print("  %3d ms %-16s %-22s %10.2f %-7s (%5.2f s, other processes %3.0f%% CPU)" % (
            L, tgt, phase, v, unit, r["wall_s"], 100 * r.get("foreign", 0)), flush=True)
        return v

    # Raw curl: the server's limit at this latency.
    for c in CONNS if "raw" in PASSES else ():
        keys = slow if c == 1 else rank
        note("raw", "s%d" % c, B.curl_pass(ctx, keys, "small", c), "files/s")
    if "raw" in PASSES:
        note("raw", "l1", B.curl_pass(ctx, large, "large", 1), "MB/s")
        note("raw", "l8", B.curl_pass(ctx, large, "large", 8), "MB/s")
        note("raw", "l8_tmpfs", B.curl_tmpfs_pass(ctx, large, "large", 8), "MB/s")

    # shardfs, disk cache, default config.
    sf = ctx.lat_shardfs

    def sf_pass(phase, keys, dataset, readers, unit, world=1, compute_ms=0):
        b1 = sf.stats() or {}
        before = sf.stats() or {}
        with Sampler(sf, (sf.proc.pid, ctx.s3p.pid)) as smp:
            r = B.read_pass(ctx, sf, keys, dataset, readers, world, compute_ms)
        after = sf.stats() or {}
        delta = {k: after[k] - before.get(k, 0) for k in after}
        ops = fuse_pass_delta(b1, before, after, smp.reads)
        v = note("shardfs", phase, r, unit)
        if v is not None:
            lat.profile.append({"L": L, "phase": phase, "v": v, "unit": unit,
                                "smp": smp.summary(), "d": delta, "ops": ops,
                                "stats_reads": smp.reads + 1, "files": len(keys),
                                "cpu": smp.cpu + [r["wall_s"]]})
            lat.gets[(L, phase)] = delta.get("backend_requests_total")
            dm = smp.summary().get("prefetch_depth_files")
            rt = targets.round_trips(ops, len(keys))
            print("         first-chunk waits %s (%.0f ms), prefetch hits %s misses %s, "
                  "depth mean/max %s, GETs %s, daemon CPU %s us/file, FUSE requests/file "
                  "%s%s" % (
                      delta.get("first_chunk_waits_total", "—"),
                      delta.get("first_chunk_wait_us_total", 0) / 1000,
                      delta.get("prefetch_hits_total", "—"),
                      delta.get("prefetch_misses_total", "—"),
                      "—" if dm is None else "%.1f/%.0f" % dm,
                      delta.get("backend_requests_total", "—"),
                      "—" if smp.cpu[0] is None else "%.0f" % (smp.cpu[0] * 1e6 / len(keys)),
                      "n/a" if rt is None else "%.2f" % rt,
                      ", compute %.2f s" % r["compute_s"] if compute_ms else ""), flush=True)
        return r

    def session(fn, dataset, world=1, cold=True, tgt=sf):
        try:
            tgt.mount(dataset, world, cold)
        except Exception as e:
            lat.errors.append((L, tgt.name, "mount", str(e)))
            print("  %3d ms %-16s mount ERROR %s" % (L, tgt.name, e), flush=True)
            tgt.abort()
            return
        try:
            fn()
        finally:
            tgt.umount()

    def s1():
        sf_pass("s1_rank", rank, "small", 1, "files/s")
        if lowest:
            sf_pass("s1_warm", rank, "small", 1, "files/s")
    if "s1" in PASSES:
        session(s1, "small")
    if lowest and "s1" in PASSES:
        session(lambda: sf_pass("s1_remount", rank, "small", 1, "files/s"), "small", cold=False)
    if "s8" in PASSES:
        session(lambda: sf_pass("s8_rank", rank, "small", 8, "files/s"), "small")
    # Diagnosis: the same 1r pass without the disk cache (what the store
    # path costs).
    nc = ctx.lat_nocache
    if nc is not None and "nocache" in PASSES:
        session(lambda: note(nc.name, "s1_rank", B.read_pass(ctx, nc, slow, "small", 1),
                             "files/s"), "small", tgt=nc)
    if "l1" in PASSES:
        session(lambda: sf_pass("l1", large, "large", 1, "MB/s"), "large")

    def trainer():
        r = sf_pass("trainer", tk, "small", 1, "s", world=4, compute_ms=ctx.compute_ms)
        if "error" not in r:
            lat.compute[L] = r["compute_s"]
    if "trainer" in PASSES:
        session(trainer, "small", world=4)

    # The DataLoader trainer over rank-0/ of a fresh mount, then (once) over
    # the local copy of the same files.
    def torch_sf():
        order = os.path.join(sf.mnt, ".shardfs", "rank-0.order")
        with open(order) as f:
            served = [ln.rstrip("\n") for ln in f if ln.strip() and "\t" not in ln]
        if served != ctx.torch_keys:
            lat.errors.append((L, "shardfs", "torch", ".shardfs/rank-0.order differs from "
                               "shardfs plan --rank 0"))
        r = torch_pass(B, ctx, os.path.join(sf.mnt, "rank-0"), order,
                       stats=os.path.join(sf.mnt, ".shardfs", "stats"),
                       pids=(sf.proc.pid, ctx.s3p.pid))
        torch_note(B, ctx, lat, L, "torch-shardfs", r, note)
    if "torch" in PASSES:
        session(torch_sf, "small", world=ctx.torch_world)
    if lowest and "torch" in PASSES:
        order = os.path.join(ctx.env.tmp, "torch-local.order")
        with open(order, "w") as f:
            f.write("".join(k + "\n" for k in ctx.torch_keys))
        local.mount("small", cold=True)
        r = torch_pass(B, ctx, local.mnt, order)
        torch_note(B, ctx, lat, L, "torch-local", r, note)

    def rss():
        pid = sf.proc.pid
        base = vm_kib(pid, "VmHWM")
        sf_pass("s64_rank", rank, "small", RSS_READERS, "files/s")
        st = sf.stats() or {}
        lat.rss[L] = {"hwm_kib": vm_kib(pid, "VmHWM"), "base_kib": base,
                      "budget": st.get("memory_budget_bytes"),
                      "mem_hw": st.get("memory_high_water_bytes")}
    if "rss" in PASSES:
        session(rss, "small")

    if lowest and "local" in PASSES:
        local.mount("small", cold=True)
        note("local", "s1_cold", B.read_pass(ctx, local, rank, "small", 1), "files/s")
        note("local", "s1_warm", B.read_pass(ctx, local, rank, "small", 1), "files/s")
        local.mount("large", cold=False)
        B.read_pass(ctx, local, large, "large", 1)  # into the page cache
        note("local", "l1_warm", B.read_pass(ctx, local, large, "large", 1), "MB/s")

    # squashfuse_ll over the same small files: a fresh mount (no FUSE inode,
    # no page cache of its own), then a second pass on it.
    sq = ctx.lat_squashfuse
    if lowest and sq is not None and "squashfuse" in PASSES:
        def sq_pass(phase):
            c0 = cpu_s(sq.proc.pid)
            v = note(sq.name, phase, B.read_pass(ctx, sq, rank, "small", 1), "files/s")
            c1 = cpu_s(sq.proc.pid)
            if v is not None and c0 is not None and c1 is not None:
                lat.cpu_pf[(L, sq.name, phase)] = (c1 - c0) * 1e6 / len(rank)
        session(lambda: (sq_pass("s1_cold"), sq_pass("s1_warm")), "small", tgt=sq)

    # The peers, on fewer files (they are slow at latency).
    for peer in ctx.lat_peers if "peers" in PASSES else ():
        session(lambda: note(peer.name, "s1_rank", B.read_pass(ctx, peer, slow, "small", 1),
                             "files/s"), "small", tgt=peer)
        session(lambda: note(peer.name, "s8_rank", B.read_pass(ctx, peer, slow8, "small", 8),
                             "files/s"), "small", tgt=peer)
        session(lambda: note(peer.name, "l1", B.read_pass(ctx, peer, large, "large", 1), "MB/s"),
                "large", tgt=peer)


def torch_pass(B, ctx, root, order, stats=None, pids=()):
    """tests/bench/torch_trainer.py over root in the order of the file
    order (two epochs). Returns its output, with "error" on a failure."""
    want = sum(ctx.sizes["small"][k] for k in ctx.torch_keys)
    argv = ["/usr/bin/python3", os.path.join(HERE, "torch_trainer.py"), "--root", root,
            "--order", order, "--epochs", "2", "--workers", str(ctx.torch_workers),
            "--batch", str(ctx.torch_batch), "--compute-ms", str(ctx.compute_ms),
            "--compute", ctx.torch_compute, "--expect-bytes", str(want)]
    if stats:
        argv += ["--stats", stats]
    if pids:
        argv += ["--pids", ",".join(str(p) for p in pids)]
    ctx.meter.wait_quiet()
    ctx.meter.start()
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=B.PASS_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"error": "torch_trainer.py timed out after %d s" % B.PASS_TIMEOUT}
    try:
        r = json.loads(cp.stdout)
    except ValueError:
        return {"error": "torch_trainer.py failed (rc %d): %s" % (cp.returncode,
                                                                  cp.stderr.strip()[-400:])}
    r["foreign"] = ctx.meter.foreign()
    errs = [e["error"] for e in r.get("epochs", []) if "error" in e]
    if errs or len(r.get("epochs", [])) != 2:
        r["error"] = errs[0] if errs else "torch_trainer.py ran %d epochs" % len(r["epochs"])
    return r


def torch_note(B, ctx, lat, L, tgt, r, note):
    """Records a DataLoader run: epoch walls as (L, tgt, "e1"/"e2"), and for
    shardfs a profile row per epoch."""
    lat.torch[(L, tgt)] = r
    if "error" in r and not any("error" in ep for ep in r.get("epochs", [])):
        note(tgt, "run", r, "s")  # failed before or between its epochs
    for i, ep in enumerate(r.get("epochs", [])):
        phase = "e%d" % (i + 1)
        v = note(tgt, phase, dict(ep, foreign=r.get("foreign", 0)), "s")
        if v is None or "stats" not in ep:
            continue
        d = ep["stats"]
        ops = fuse_ops(d) or None
        cpu = ep.get("cpu_s") or [None, None]
        lat.profile.append({"L": L, "phase": "torch_" + phase, "v": v, "unit": "s",
                            "smp": {}, "d": d, "ops": ops, "stats_reads": 0,
                            "files": ep["files"], "cpu": list(cpu) + [ep["wall_s"]]})
        rt = targets.round_trips(ops, ep["files"])
        print("         GETs %s, first-chunk waits %s, daemon CPU %s us/file, FUSE "
              "requests/file %s" % (
                  d.get("backend_requests_total", "—"), d.get("first_chunk_waits_total", "—"),
                  "—" if cpu[0] is None else "%.0f" % (cpu[0] * 1e6 / ep["files"]),
                  "n/a" if rt is None else "%.2f" % rt), flush=True)


# ---------------------------------------------------------------------------
# Report.


def f(v, unit="files/s"):
    if v is None:
        return "—"
    if unit == "s":
        return "%.2f" % v
    return "%.0f" % v if v >= 100 else "%.1f" % v


def best_raw(lat, L):
    vals = [(lat.get(L, "raw", "s%d" % c), c) for c in CONNS]
    vals = [x for x in vals if x[0] is not None]
    return max(vals) if vals else (None, None)


def trainer_bound(ctx, lat, L):
    """max(compute, server-limited read time of the trainer's files at the
    server's best concurrency)."""
    comp = lat.compute.get(L)
    best, _ = best_raw(lat, L)
    if comp is None or not best:
        return None, comp, None
    server = len(ctx.trainer_keys) / best
    return max(comp, server), comp, server


def markdown(B, ctx, lat):
    lats = ctx.latencies
    out = []
    tmd, rows = targets.section(sys.modules[__name__], ctx, lat)
    out.append(tmd)

    out.append("## Latency\n")
    out.append("s3rver with a fixed delay before every request "
               "(`tests/integration/s3/s3rver_delay.js`, `S3RVER_DELAY_MS`), one round. "
               "Small files: files/s; large: MB/s; trainers: seconds. Raw curl 1 connection, "
               "shardfs with the cache off, s3fs and rclone 1r read the first %d keys of the "
               "rank order, their 8r the first %d (they are slow at latency); everything "
               "else reads all %d small files, and the first %d large files (of %d MiB). "
               "8r and 64r take the next path from one list in rank order. Time per "
               "latency: %s.\n" % (
                   ctx.slow_files, 4 * ctx.slow_files, len(ctx.rank),
                   min(ctx.lat_large_files, len(ctx.keys["large"])), ctx.large_mib,
                   ", ".join("%d ms %.0f s" % (L, lat.walls[L]) for L in lats if L in lat.walls)))
    head = ["target"] + ["%d ms" % L for L in lats]
    cols = [("raw curl, %d conn (files/s)" % c, "raw", "s%d" % c, "files/s") for c in CONNS]
    cols += [("raw curl, large, 1 stream (MB/s)", "raw", "l1", "MB/s"),
             ("raw curl, large, 8 streams, to /dev/null (MB/s)", "raw", "l8", "MB/s"),
             ("raw curl, large, 8 streams of 8 MiB ranges into a tmpfs (MB/s) ³", "raw",
              "l8_tmpfs", "MB/s"),
             ("shardfs, small 1r rank order cold (files/s)", "shardfs", "s1_rank", "files/s"),
             ("shardfs, small 8r cold (files/s)", "shardfs", "s8_rank", "files/s"),
             ("shardfs, cache off, small 1r rank order (files/s) ²", "shardfs-nocache",
              "s1_rank", "files/s"),
             ("shardfs, small %dr cold (files/s)" % RSS_READERS, "shardfs", "s64_rank",
              "files/s"),
             ("shardfs, large seq cold (MB/s)", "shardfs", "l1", "MB/s"),
             ("shardfs, trainer wall (s)", "shardfs", "trainer", "s"),
             ("shardfs, DataLoader epoch 1, cold (s) ⁴", "torch-shardfs", "e1", "s"),
             ("shardfs, DataLoader epoch 2 (s) ⁴", "torch-shardfs", "e2", "s"),
             ("shardfs, small 1r warm second pass (files/s)", "shardfs", "s1_warm", "files/s"),
             ("shardfs, small 1r warm after remount (files/s)", "shardfs", "s1_remount",
              "files/s"),
             ("local disk, small 1r cold (files/s)", "local", "s1_cold", "files/s"),
             ("local disk, small 1r warm (files/s)", "local", "s1_warm", "files/s"),
             ("local disk, large seq warm (MB/s)", "local", "l1_warm", "MB/s"),
             ("local copy, DataLoader epoch 1, cold (s) ⁴", "torch-local", "e1", "s"),
             ("local copy, DataLoader epoch 2 (s) ⁴", "torch-local", "e2", "s"),
             ("squashfuse_ll, small 1r rank order after a mount (files/s) ⁵", "squashfuse",
              "s1_cold", "files/s"),
             ("squashfuse_ll, small 1r second pass (files/s) ⁵", "squashfuse", "s1_warm",
              "files/s")]
    for p in ctx.lat_peers:
        cols += [("%s, small 1r rank order cold (files/s)" % p.label, p.name, "s1_rank",
                  "files/s"),
                 ("%s, small 8r cold (files/s)" % p.label, p.name, "s8_rank", "files/s"),
                 ("%s, large seq cold (MB/s)" % p.label, p.name, "l1", "MB/s")]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for label, t, ph, unit in cols:
        cells = []
        for L in lats:
            v = lat.get(L, t, ph)
            err = any(e[0] == L and e[1] == t and e[2] in (ph, "run", "mount")
                      for e in lat.errors)
            cells.append(f(v, unit) + (" (ERR)" if err else ""))
        out.append("| %s | %s |" % (label, " | ".join(cells)))
    out.append("")
    tr = []
    for L in lats:
        bound, comp, server = trainer_bound(ctx, lat, L)
        tr.append("%d ms: compute %s s, server-limited read %s s" % (L, f(comp, "s"),
                                                                   f(server, "s")))
    out.append("² Not a target: `[cache] enabled = false`, to tell the disk cache's store "
               "path from the fetch path.\n")
    out.append("³ The large-file target's denominator: one `curl --parallel --parallel-max 8`"
               " process fetching the same files in the same order as ranged GETs of 8 MiB "
               "(shardfs' `cache.chunk_size`), every request signed, each range written into "
               "its own file on a tmpfs of the run's own, so the bytes land in newly "
               "allocated pages as shardfs' do (removed after the pass). The /dev/null row "
               "above is the older figure (whole objects, at most one stream per file).\n")
    out.append(torch_text(ctx, lat))
    sq = [(ph, lat.cpu_pf.get((min(lats), "squashfuse", ph)))
          for ph in ("s1_cold", "s1_warm")]
    out.append("⁵ `mksquashfs SRC IMG -noappend -noD -noF` of the local copy of the small "
               "files (uncompressed data and fragments), then `squashfuse_ll -f IMG MNT`: a "
               "plain C FUSE filesystem on libfuse's low-level API, like shardfs. The image "
               "is in the page cache (as shardfs' cache is after a remount); each mount is "
               "fresh, so its first pass has no FUSE inode and no page cache of its own. "
               "Daemon CPU per file: %s.\n" % ", ".join(
                   "%s %s" % ("after a mount" if ph == "s1_cold" else "second pass",
                              "—" if v is None else "%.0f µs" % v) for ph, v in sq))
    out.append("Trainer: rank 0 of world_size 4 (%d files), one reader, %d ms of compute "
               "(sleep) after each file; the server-limited read time is those files at raw "
               "curl's best files/s at that latency. %s.\n" % (
                   len(ctx.trainer_keys), ctx.compute_ms, "; ".join(tr)))
    rss = []
    for L in lats:
        m = lat.rss.get(L)
        if not m or not m.get("hwm_kib"):
            continue
        rss.append("%d ms: VmHWM %.0f MiB (%.0f MiB after mount), buffers' high water %s MiB, "
                   "prefetch.memory %s MiB" % (
                       L, m["hwm_kib"] / 1024, (m["base_kib"] or 0) / 1024,
                       "%.0f" % (m["mem_hw"] / 2**20) if m.get("mem_hw") is not None else "—",
                       "%.0f" % (m["budget"] / 2**20) if m.get("budget") else "—"))
    out.append("Peak RSS of the shardfs daemon (VmHWM of `/proc/PID/status`, read after the "
               "%d-reader pass on that mount; prefetch.memory + 64 MiB is its bound): %s.\n" % (
                   RSS_READERS, "; ".join(rss) or "—"))

    out.append("### Where the time goes: shardfs' gauges during each pass\n")
    out.append("Sampled from `.shardfs/stats` every 0.2 s while the pass ran (mean / max); "
               "GETs = backend_requests_total during the pass. A pass shorter than 0.2 s has "
               "no samples, nor has a DataLoader epoch (`torch_e1`, `torch_e2`: counters "
               "only). CPU: seconds of CPU the shardfs daemon and s3rver used during "
               "the pass, and the pass's wall time (2 cores in all); µs/file: the daemon's "
               "CPU over the files of the pass. FUSE req/file: lookup + open + read + "
               "release + getattr requests per file (n/a: this build has no "
               "`shardfs_fuse_requests_total`).\n")
    out.append("| latency (ms) | phase | result | GETs | backend_inflight | "
               "prefetch_depth_files | memory_in_use (MiB) | prefetch hits / misses / "
               "refused | direct_reads | first-chunk waits (ms waited) | "
               "CPU s: shardfs / s3rver / wall | daemon CPU µs/file | FUSE req/file |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in lat.profile:
        smp, d, cpu = p["smp"], p["d"], p["cpu"]

        def mm(k, scale=1):
            if k not in smp:
                return "—"
            return "%.1f / %.0f" % (smp[k][0] / scale, smp[k][1] / scale)
        wus = d.get("first_chunk_wait_us_total")
        rt = targets.round_trips(p["ops"], p["files"])
        out.append("| %d | %s | %s %s | %s | %s | %s | %s | %s / %s / %s | %s | %s (%s) | %s "
                   "| %s | %s |" % (
                       p["L"], p["phase"], f(p["v"], p["unit"]), p["unit"],
                       d.get("backend_requests_total", "—"),
                       mm("backend_inflight"), mm("prefetch_depth_files"),
                       mm("memory_in_use_bytes", 2**20), d.get("prefetch_hits_total", "—"),
                       d.get("prefetch_misses_total", "—"),
                       d.get("prefetch_refused_total", "—"),
                       d.get("direct_reads_total", "—"), d.get("first_chunk_waits_total", "—"),
                       "—" if wus is None else "%.0f" % (wus / 1000),
                       " / ".join("—" if c is None else "%.2f" % c for c in cpu),
                       cpu_per(p),
                       "n/a" if rt is None else "%.2f" % rt))
    out.append("")
    out.append(ops_table(lat))
    if lat.errors:
        out.append("Errors in the latency phases:\n")
        for L, t, ph, m in lat.errors:
            out.append("- %d ms, %s, %s: %s" % (L, t, ph, m))
        out.append("")
    return "\n".join(out) + "\n", rows


def cpu_per(p):
    """The daemon's CPU per file of a profile row (per MB for large files)."""
    cpu = p["cpu"]
    if cpu[0] is None:
        return "—"
    if p["unit"] == "MB/s":
        mb = p["v"] * cpu[-1]
        return "%.0f per MB" % (cpu[0] * 1e6 / mb) if mb else "—"
    return "%.0f" % (cpu[0] * 1e6 / p["files"])


def torch_text(ctx, lat):
    runs = [r for r in lat.torch.values() if "epochs" in r]
    imp = ", ".join("%.1f s" % r["import_s"] for r in runs[:1])
    ver = runs[0]["torch"] if runs else "—"
    return ("⁴ The DataLoader trainer (`tests/bench/torch_trainer.py`, `/usr/bin/python3`, "
            "Debian's PyTorch %s): a map-style Dataset over the %d files of `rank-0/` "
            "(world_size %d) in the order of `.shardfs/rank-0.order`; `__getitem__` reads "
            "its file whole, spends %d ms of compute (%s: %s) and returns the bytes as a "
            "uint8 tensor; `DataLoader(ds, batch_size=%d, shuffle=False, num_workers=%d, "
            "collate_fn=list)`, two epochs, each timed from its first batch asked to its "
            "last received (the workers start again each epoch, as by default); import "
            "time (%s) not counted. On shardfs a fresh mount (empty cache): epoch 1 is "
            "cold, epoch 2 warm on the same mount. The local copy is the same files on "
            "local disk, its page cache dropped before epoch 1 "
            "(`POSIX_FADV_DONTNEED`), run once at the lowest latency.\n" % (
                ver, len(ctx.torch_keys), ctx.torch_world, ctx.compute_ms,
                "a sleep, not a busy loop" if ctx.torch_compute == "sleep" else
                "a busy loop (`BENCH_TORCH_COMPUTE=busy`)",
                "it stands for work done off these 2 cores (the GPU, a real node's other "
                "cores); four spinning workers would take both cores from the daemon and the "
                "store, and the ratio would measure the scheduler" if
                ctx.torch_compute == "sleep" else "the four workers spin on the 2 cores the "
                "daemon and the store share", ctx.torch_batch, ctx.torch_workers,
                imp or "—"))


def ops_table(lat):
    """FUSE requests per file of every shardfs pass, by op."""
    ops = sorted({op for p in lat.profile if p["ops"] for op in p["ops"]})
    if not ops:
        return ("### FUSE requests per file\n\nn/a: this build of shardfs has no "
                "`shardfs_fuse_requests_total{op=...}` counters in `.shardfs/stats`.\n")
    out = ["### FUSE requests per file\n",
           "From `shardfs_fuse_requests_total{op=...}` before and after each pass; the "
           "requests of the benchmark's own reads of `.shardfs/stats` (before, after and "
           "the 0.2 s samples: one stats read's worth measured right before the pass, "
           "times the reads made) are taken out. Round trips = lookup + open + read + "
           "release + getattr.\n",
           "| latency (ms) | phase | files | round trips / file | " +
           " | ".join(ops) + " |",
           "|---|---|---|---|" + "---|" * len(ops)]
    for p in lat.profile:
        if not p["ops"]:
            continue
        n = p["files"]
        out.append("| %d | %s | %d | %.2f | %s |" % (
            p["L"], p["phase"], n, targets.round_trips(p["ops"], n),
            " | ".join("%.2f" % (p["ops"].get(op, 0) / n) for op in ops)))
    return "\n".join(out) + "\n"
