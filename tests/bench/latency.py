"""Latency phases of bench.py (issue 12, item 3, and its targets).

bench.py calls run(B, ctx) with itself as B (this module does not import
bench.py, so the classes are bench.py's own). For each latency L in
ctx.latencies (milliseconds) it restarts s3rver on the same data dir through
tests/integration/s3/s3rver_delay.js with S3RVER_DELAY_MS=L (a timer before
every request, no CPU), then measures, in one round:

  raw curl     small files in rank order at 1, 8, 32, 64, 128 connections
               (1 connection on the first SLOW_FILES keys: it is N x L long);
               large files with 1 and 8 streams
  shardfs      disk cache in a fresh dir, default config: small 1 reader in
               rank order and 8 readers (the shared list in rank order) cold;
               large sequential cold; the trainer (rank 0 of 4, COMPUTE_MS per
               file); 64 readers cold, with the daemon's peak RSS (VmHWM);
               at the lowest latency also the warm second pass and the warm
               pass after a remount (with the GETs it made) against local disk
  shardfs, cache off
               small 1 reader in rank order on the first SLOW_FILES keys (a
               diagnosis: the fetch path without the disk cache's store path)
  local disk   at the lowest latency: small 1 reader cold and warm, large warm
  s3fs, rclone (cache off)
               small 1 reader in rank order on the first SLOW_FILES keys,
               8 readers on the first 4 x SLOW_FILES, large sequential cold

While shardfs reads, a thread samples .shardfs/stats every 0.2 s
(backend_inflight, prefetch_depth_files, memory_in_use_bytes): the profile
table says how deep the pipeline was.

The large phases read the first LAT_LARGE_FILES large files (rank order).

markdown() returns the markdown of the latency section and of the targets table.
"""

import os
import statistics
import threading
import time

CONNS = (1, 8, 32, 64, 128)
RSS_READERS = 64
SLACK = 64 << 20  # RSS target: prefetch.memory + 64 MiB


class Sampler:
    """Samples a shardfs mount's gauges while a pass runs."""

    KEYS = ("backend_inflight", "prefetch_depth_files", "memory_in_use_bytes")

    def __init__(self, tgt, pids=()):
        self.tgt = tgt
        self.pids = pids  # whose CPU time the pass is charged: daemon, server
        self.cpu = None
        self.samples = {k: [] for k in self.KEYS}
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.wait(0.2):
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

    def put(self, L, tgt, phase, val):
        self.v[(L, tgt, phase)] = val

    def get(self, L, tgt, phase):
        return self.v.get((L, tgt, phase))


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

    # BENCH_LAT_PASSES=warm: only what the warm targets need (shardfs 1r
    # cold, warm, warm after remount; local disk), for quick A/B runs.
    warm_only = os.environ.get("BENCH_LAT_PASSES") == "warm"
    # Raw curl: the server's limit at this latency.
    for c in CONNS if not warm_only else ():
        keys = slow if c == 1 else rank
        note("raw", "s%d" % c, B.curl_pass(ctx, keys, "small", c), "files/s")
    if not warm_only:
        note("raw", "l1", B.curl_pass(ctx, large, "large", 1), "MB/s")
        note("raw", "l8", B.curl_pass(ctx, large, "large", 8), "MB/s")

    # shardfs, disk cache, default config.
    sf = ctx.lat_shardfs

    def sf_pass(phase, keys, dataset, readers, unit, world=1, compute_ms=0):
        before = sf.stats() or {}
        with Sampler(sf, (sf.proc.pid, ctx.s3p.pid)) as smp:
            r = B.read_pass(ctx, sf, keys, dataset, readers, world, compute_ms)
        after = sf.stats() or {}
        delta = {k: after[k] - before.get(k, 0) for k in after}
        v = note("shardfs", phase, r, unit)
        if v is not None:
            lat.profile.append((L, phase, v, unit, smp.summary(), delta,
                                smp.cpu + [r["wall_s"]]))
            lat.gets[(L, phase)] = delta.get("backend_requests_total")
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
    session(s1, "small")
    if lowest:
        session(lambda: sf_pass("s1_remount", rank, "small", 1, "files/s"), "small", cold=False)
    if warm_only:
        if lowest:
            local.mount("small", cold=True)
            note("local", "s1_cold", B.read_pass(ctx, local, rank, "small", 1), "files/s")
            note("local", "s1_warm", B.read_pass(ctx, local, rank, "small", 1), "files/s")
        return
    session(lambda: sf_pass("s8_rank", rank, "small", 8, "files/s"), "small")
    # Diagnosis: the same 1r pass without the disk cache (what the store
    # path costs).
    nc = ctx.lat_nocache
    if nc is not None:
        session(lambda: note(nc.name, "s1_rank", B.read_pass(ctx, nc, slow, "small", 1),
                             "files/s"), "small", tgt=nc)
    session(lambda: sf_pass("l1", large, "large", 1, "MB/s"), "large")

    def trainer():
        r = sf_pass("trainer", tk, "small", 1, "s", world=4, compute_ms=ctx.compute_ms)
        if "error" not in r:
            lat.compute[L] = r["compute_s"]
    session(trainer, "small", world=4)

    def rss():
        pid = sf.proc.pid
        base = vm_kib(pid, "VmHWM")
        sf_pass("s64_rank", rank, "small", RSS_READERS, "files/s")
        st = sf.stats() or {}
        lat.rss[L] = {"hwm_kib": vm_kib(pid, "VmHWM"), "base_kib": base,
                      "budget": st.get("memory_budget_bytes"),
                      "mem_hw": st.get("memory_high_water_bytes")}
    session(rss, "small")

    if lowest:
        local.mount("small", cold=True)
        note("local", "s1_cold", B.read_pass(ctx, local, rank, "small", 1), "files/s")
        note("local", "s1_warm", B.read_pass(ctx, local, rank, "small", 1), "files/s")
        local.mount("large", cold=False)
        B.read_pass(ctx, local, large, "large", 1)  # into the page cache
        note("local", "l1_warm", B.read_pass(ctx, local, large, "large", 1), "MB/s")

    # The peers, on fewer files (they are slow at latency).
    for peer in ctx.lat_peers:
        session(lambda: note(peer.name, "s1_rank", B.read_pass(ctx, peer, slow, "small", 1),
                             "files/s"), "small", tgt=peer)
        session(lambda: note(peer.name, "s8_rank", B.read_pass(ctx, peer, slow8, "small", 8),
                             "files/s"), "small", tgt=peer)
        session(lambda: note(peer.name, "l1", B.read_pass(ctx, peer, large, "large", 1), "MB/s"),
                "large", tgt=peer)


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


def targets(ctx, lat):
    """Rows (target, latency, measured, ratio, goal, met)."""
    rows = []
    lats = ctx.latencies

    def row(what, L, a, b, goal, le=False, extra=""):
        if a is None or not b:
            rows.append((what, L, "—", "—", goal, "not measured"))
            return
        r = a / b
        ok = r <= goal if le else r >= goal
        rows.append((what, L, extra, "%.2f" % r, ("≤ " if le else "≥ ") + "%.2f" % goal,
                     "met" if ok else "**missed**"))

    if 20 in lats:
        b, c = best_raw(lat, 20)
        a = lat.get(20, "shardfs", "s1_rank")
        row("small 1r rank order cold ÷ raw curl at its best concurrency (%s conn)" % c, 20,
            a, b, 0.9, extra="%s ÷ %s files/s" % (f(a), f(b)))
        s = lat.get(20, "s3fs", "s1_rank")
        row("small 1r rank order cold ÷ s3fs", 20, a, s, 30.0,
            extra="%s ÷ %s files/s" % (f(a), f(s)))
    if 0 in lats:
        r8 = lat.get(0, "raw", "s8")
        for ph, name in (("s1_rank", "small 1r rank order cold"), ("s8_rank", "small 8r cold")):
            a = lat.get(0, "shardfs", ph)
            row("%s ÷ raw curl 8 conn" % name, 0, a, r8, 0.95,
                extra="%s ÷ %s files/s" % (f(a), f(r8)))
    for L in lats:
        a, r8, s = lat.get(L, "shardfs", "l1"), lat.get(L, "raw", "l8"), lat.get(L, "s3fs", "l1")
        row("large seq cold ÷ raw curl 8 streams", L, a, r8, 0.9,
            extra="%s ÷ %s MB/s" % (f(a), f(r8)))
        row("large seq cold ÷ s3fs", L, a, s, 1.5, extra="%s ÷ %s MB/s" % (f(a), f(s)))
    lo = min(lats)
    lw = lat.get(lo, "local", "s1_warm")
    a = lat.get(lo, "shardfs", "s1_warm")
    row("warm second pass (1r) ÷ local disk warm", lo, a, lw, 0.85,
        extra="%s ÷ %s files/s, %s GETs" % (f(a), f(lw), lat.gets.get((lo, "s1_warm"), "—")))
    a = lat.get(lo, "shardfs", "s1_remount")
    g = lat.gets.get((lo, "s1_remount"))
    row("warm after remount (1r) ÷ local disk warm, 0 GETs", lo, a, lw, 0.5,
        extra="%s ÷ %s files/s, %s GETs" % (f(a), f(lw), "—" if g is None else g))
    if g:  # GETs on a warm remount: missed whatever the speed
        w, L_, e, r, goal, _ = rows[-1]
        rows[-1] = (w, L_, e, r, goal, "**missed** (%d GETs)" % g)
    for L in lats:
        bound, comp, server = trainer_bound(ctx, lat, L)
        a = lat.get(L, "shardfs", "trainer")
        row("trainer wall ÷ max(compute, server-limited read)", L, a, bound, 1.05, le=True,
            extra="%s ÷ max(%s, %s) s" % (f(a, "s"), f(comp, "s"), f(server, "s")))
    for L in lats:
        m = lat.rss.get(L) or {}
        hwm = m.get("hwm_kib")
        lim = (m["budget"] + SLACK) if m.get("budget") else None
        row("daemon peak RSS at %d readers ÷ (prefetch.memory + 64 MiB)" % RSS_READERS, L,
            hwm * 1024 if hwm else None, lim, 1.0, le=True,
            extra="%s ÷ %s MiB" % ("%.0f" % (hwm / 1024) if hwm else "—",
                                   "%.0f" % (lim / 2**20) if lim else "—"))
    return rows


def markdown(B, ctx, lat):
    lats = ctx.latencies
    out = []
    rows = targets(ctx, lat)
    met = sum(1 for r in rows if r[5] == "met")
    out.append("## Targets (issue 12)\n")
    out.append("One round of the latency phases below (so every ratio is from one run); "
               "%d of %d met. Reported, not asserted.\n" % (met, len(rows)))
    out.append("| target | latency (ms) | measured | ratio | goal | |")
    out.append("|---|---|---|---|---|---|")
    for what, L, e, r, goal, ok in rows:
        out.append("| %s | %d | %s | %s | %s | %s |" % (what, L, e, r, goal, ok))
    out.append("")

    out.append("## Latency\n")
    out.append("s3rver with a fixed delay before every request "
               "(`tests/integration/s3/s3rver_delay.js`, `S3RVER_DELAY_MS`), one round. "
               "Small files: files/s; large: MB/s; trainer: seconds. Raw curl 1 connection, "
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
             ("raw curl, large, 8 streams (MB/s)", "raw", "l8", "MB/s"),
             ("shardfs, small 1r rank order cold (files/s)", "shardfs", "s1_rank", "files/s"),
             ("shardfs, small 8r cold (files/s)", "shardfs", "s8_rank", "files/s"),
             ("shardfs, cache off, small 1r rank order (files/s) ²", "shardfs-nocache",
              "s1_rank", "files/s"),
             ("shardfs, small %dr cold (files/s)" % RSS_READERS, "shardfs", "s64_rank",
              "files/s"),
             ("shardfs, large seq cold (MB/s)", "shardfs", "l1", "MB/s"),
             ("shardfs, trainer wall (s)", "shardfs", "trainer", "s"),
             ("shardfs, small 1r warm second pass (files/s)", "shardfs", "s1_warm", "files/s"),
             ("shardfs, small 1r warm after remount (files/s)", "shardfs", "s1_remount",
              "files/s"),
             ("local disk, small 1r cold (files/s)", "local", "s1_cold", "files/s"),
             ("local disk, small 1r warm (files/s)", "local", "s1_warm", "files/s"),
             ("local disk, large seq warm (MB/s)", "local", "l1_warm", "MB/s")]
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
            err = any(e[0] == L and e[1] == t and e[2] == ph for e in lat.errors)
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
               "%d-reader pass on that mount): %s.\n" % (RSS_READERS, "; ".join(rss) or "—"))

    out.append("### Where the time goes: shardfs' gauges during each pass\n")
    out.append("Sampled from `.shardfs/stats` every 0.2 s while the pass ran (mean / max); "
               "GETs = backend_requests_total during the pass. A pass shorter than 0.2 s has "
               "no samples. CPU: seconds of CPU the shardfs daemon and s3rver used during "
               "the pass, and the pass's wall time (2 cores in all).\n")
    out.append("| latency (ms) | phase | result | GETs | backend_inflight | "
               "prefetch_depth_files | memory_in_use (MiB) | prefetch hits / misses / "
               "refused | direct_reads | CPU s: shardfs / s3rver / wall |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for L, ph, v, unit, smp, d, cpu in lat.profile:
        def mm(k, scale=1):
            if k not in smp:
                return "—"
            return "%.1f / %.0f" % (smp[k][0] / scale, smp[k][1] / scale)
        out.append("| %d | %s | %s %s | %s | %s | %s | %s | %s / %s / %s | %s | %s |" % (
            L, ph, f(v, unit), unit, d.get("backend_requests_total", "—"),
            mm("backend_inflight"), mm("prefetch_depth_files"),
            mm("memory_in_use_bytes", 2**20), d.get("prefetch_hits_total", "—"),
            d.get("prefetch_misses_total", "—"), d.get("prefetch_refused_total", "—"),
            d.get("direct_reads_total", "—"),
            " / ".join("—" if c is None else "%.2f" % c for c in cpu)))
    out.append("")
    if lat.errors:
        out.append("Errors in the latency phases:\n")
        for L, t, ph, m in lat.errors:
            out.append("- %d ms, %s, %s: %s" % (L, t, ph, m))
        out.append("")
    return "\n".join(out) + "\n", rows
