#!/usr/bin/python3
"""Read benchmark, GCS phase (issue 11, item 6): shardfs against raw curl
and rclone's GCS backend on one GCS emulator.

`make bench` runs this after bench.py (the S3 phase), whose machinery it
uses: the same reader, targets, phases, rounds, noise accounting and tables.
It is not part of `make check`.

One run:
  1. installs what is missing (Debian rclone and curl; firebase-tools by
     `npm ci` through tests/integration/gcs/gcs_emulator.sh), builds shardfs
     if build/shardfs is missing, and measures a private copy of it;
  2. starts the Firebase Storage emulator's GCS JSON API on a free
     127.0.0.1 port (tests/integration/gcs/emulator.js), generates the
     datasets (as bench.py: SMALL_FILES files of about 110 KB, LARGE_FILES
     files of BENCH_GCS_LARGE_MIB MiB) and uploads them (objects.insert,
     one kept-alive connection);
  3. measures on the same emulator and data:
       raw curl     GETs of ?alt=media, 1 and 8 connections, no auth: plain
                    ones, and those shardfs makes (generation, Range; the
                    emulator reads the whole object for a range)
       shardfs      url = gs://..., STORAGE_EMULATOR_HOST; disk cache, and
                    [cache] enabled = false
       rclone       mount of a `google cloud storage` remote with
                    endpoint = the emulator and anonymous = true,
                    --vfs-cache-mode off and full
       local disk   the generated files
     in bench.py's phases (small 1r/8r cold shuffled and in rank order,
     warm, warm after remount, large sequential, trainer);
  4. prints the tables and writes them to docs/BENCHMARKS-gcs.md.

The large files are smaller than bench.py's 64 MiB by default: the emulator
reads the whole object from its disk for every ranged GET (a 1 MiB range of
a 64 MiB object takes about 0.5 s here), so a client that fetches a large
object in ranges (shardfs: chunks) pays for the whole object per range,
which real GCS does not; the tables then measure the emulator. 16 MiB
keeps that cost near one whole read per chunk of 8 MiB.

Environment knobs: bench.py's (SHARDFS, BENCH_REPS, BENCH_EXTRA_REPS,
BENCH_SMALL_FILES, BENCH_LARGE_FILES, BENCH_COMPUTE_MS, BENCH_KEEP), plus
BENCH_GCS_LARGE_MIB [16], BENCH_GCS_TARGETS [raw,raw-ranged,local,shardfs,
shardfs-nocache,rclone-off,rclone-full], BENCH_GCS_OUT
[docs/BENCHMARKS-gcs.md; "-" = do not write].

Everything started is stopped by PID, every mount unmounted and the temp dir
removed on exit. Nothing here contacts anything but 127.0.0.1 and, only when
something is missing, Debian's apt archive and the npm registry. No Google
credential is read: STORAGE_EMULATOR_HOST means none, every other GOOGLE_*,
GCE_* and CLOUDSDK_* variable is cleared, and the metadata server is pointed
at a closed port.
"""

import http.client
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.parse

import bench as B

REPO = B.REPO
GCS_DIR = os.path.join(REPO, "tests", "integration", "gcs")


def gcs_source_lines(ctx, dataset):
    # The emulator comes from STORAGE_EMULATOR_HOST (set for the whole run),
    # as for a user who points shardfs at one.
    return ["url = gs://%s/%s/" % (B.BUCKET, B.PREFIX[dataset])]


def gcs_object_url(ctx, dataset, key):
    name = "%s/%s" % (B.PREFIX[dataset], key)
    return "%s/storage/v1/b/%s/o/%s?alt=media" % (
        ctx.ep, B.BUCKET, urllib.parse.quote(name, safe="-._~"))


def list_generations(port):
    """{object name: generation} of the bucket (objects.list, all pages)."""
    import json
    gens, token = {}, ""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while True:
        c.request("GET", "/storage/v1/b/%s/o?maxResults=1000%s" % (
            B.BUCKET, "&pageToken=" + urllib.parse.quote(token, safe="") if token else ""))
        r = c.getresponse()
        page = json.loads(r.read())
        for it in page.get("items", []):
            gens[it["name"]] = it["generation"]
        token = page.get("nextPageToken")
        if not token:
            break
    c.close()
    return gens


CHUNK = 8 << 20  # shardfs' default [cache] chunk_size


def shardfs_requests(ctx):
    """The GETs shardfs (disk cache, default chunk size) makes for one
    object: its generation pinned, a Range per chunk of up to 8 MiB."""
    def requests(dataset, key):
        name = "%s/%s" % (B.PREFIX[dataset], key)
        url = "%s&generation=%s" % (gcs_object_url(ctx, dataset, key), ctx.gens[name])
        size = ctx.sizes[dataset][key]
        return [(url, ["Range: bytes=%d-%d" % (a, min(a + CHUNK, size) - 1)])
                for a in range(0, size, CHUNK)]
    return requests


def bench_raw_ranged(ctx, res, rnd):
    """Raw curl making shardfs' requests: the emulator's price of a ranged
    GET, which plain GETs (the raw row) do not pay."""
    req = shardfs_requests(ctx)
    for phase, conns in (("s1_cold_shuf", 1), ("s8_cold_shuf", 8)):
        res.add("raw-ranged", phase, B.curl_pass(ctx, ctx.shuf, "small", conns, req))
    res.add("raw-ranged", "l_cold", B.curl_pass(ctx, ctx.keys["large"], "large", 1, req))


def ensure_debs():
    missing = []
    for pkg in ("rclone", "curl"):
        st = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                            capture_output=True, text=True).stdout
        if "install ok installed" not in st or not shutil.which(pkg):
            missing.append(pkg)
    if not missing:
        return
    print("bench-gcs: installing missing Debian packages: %s" % " ".join(missing))
    envx = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    B.run(["apt-get", "update", "-q"], env=envx, stdout=subprocess.DEVNULL)
    B.run(["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing,
          env=envx, stdout=subprocess.DEVNULL)


def emulator_install(env):
    """npm ci through the integration suites' helper (build/gcs-emulator)."""
    helper = os.path.join(GCS_DIR, "gcs_emulator.sh")
    B.run(["bash", "-c", 'T=$1; PIDS=(); . "$2" && gcs_install && echo "$GCS_DIR"',
           "_", env.tmp, helper], stdout=subprocess.PIPE)
    return os.path.join(REPO, "build", "gcs-emulator", "node_modules")


def emulator_start(env, node_modules):
    port = B.free_port()
    data = os.path.join(env.tmp, "gcsdata")
    os.makedirs(os.path.join(data, "tmp"))
    envx = dict(os.environ, TMPDIR=os.path.join(data, "tmp"), NODE_PATH=node_modules)
    p = env.spawn(["node", os.path.join(GCS_DIR, "emulator.js"), str(port)], "gcs-emulator",
                  cwd=data, env=envx)
    ep = "http://127.0.0.1:%d" % port
    for _ in range(300):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/storage/v1/b/probe/o")
            c.getresponse().read()
            c.close()
            return p, ep, port
        except OSError:
            if p.poll() is not None:
                raise SystemExit("bench-gcs: emulator exited: " + open(p.logpath).read())
            time.sleep(0.1)
    raise SystemExit("bench-gcs: the emulator did not answer in 30 s")


def upload(port, root, prefix):
    """objects.insert (uploadType=media) of every file under root, one
    kept-alive connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    for d, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(d, f)
            name = "%s/%s" % (prefix, os.path.relpath(p, root))
            with open(p, "rb") as fh:
                body = fh.read()
            c.request("POST", "/upload/storage/v1/b/%s/o?uploadType=media&name=%s" % (
                B.BUCKET, urllib.parse.quote(name, safe="-._~")), body=body,
                headers={"Content-Type": "application/octet-stream"})
            r = c.getresponse()
            out = r.read()
            if r.status != 200:
                raise SystemExit("bench-gcs: upload %s: HTTP %d: %s" % (name, r.status, out[:300]))
    c.close()


def rclone_conf(ctx):
    path = os.path.join(ctx.env.tmp, "rclone.conf")
    with open(path, "w") as f:
        f.write("[gcs]\ntype = google cloud storage\nanonymous = true\n"
                "bucket_policy_only = true\nendpoint = %s/storage/v1/\n" % ctx.ep)
    return path


def rclone_probe(ctx):
    """Whether rclone's GCS backend lists and reads the emulator; the reason
    if not."""
    key = ctx.keys["small"][0]
    cp = subprocess.run(["rclone", "--config", ctx.rclone_conf, "cat",
                         "gcs:%s/%s/%s" % (B.BUCKET, B.PREFIX["small"], key)],
                        capture_output=True, timeout=60)
    if cp.returncode != 0:
        return "rclone cat exits %d: %s" % (cp.returncode, cp.stderr.decode()[-300:])
    if len(cp.stdout) != ctx.sizes["small"][key]:
        return "rclone cat returned %d bytes, expected %d" % (
            len(cp.stdout), ctx.sizes["small"][key])
    return None


def vs_ranged(res):
    return ", ".join("%s %s" % (B.PHASE[ph][1], B.ratio(res.med("shardfs", ph),
                                                         res.med("raw-ranged", ph)))
                     for ph in ("s1_cold_shuf", "s8_cold_shuf", "l_cold"))


def write_report(ctx, res, targets, tabs, wall, noise, path):
    abs_table, ratio_table, noise_table, spreads, trainer = tabs
    mc = ctx.machine
    git = B.sh("git -C %s rev-parse --short HEAD" % REPO)
    dirty = B.sh("git -C %s status --porcelain | wc -l" % REPO)
    errs = "".join("- %s, %s: %s\n" % (t, B.PHASE[p][1] if p in B.PHASE else p, m)
                   for t, p, m in res.errors) or "none\n"
    mounts = "".join("%s %.2f s, " % (t.label, statistics.median(t.mount_times))
                     for t in targets if t.mount_times)
    fall = [f for fs in res.foreign.values() for f in fs]
    text = """# Benchmarks: GCS

Written by `make bench` (`tests/bench/bench_gcs.py`); do not edit by hand,
rerun. The S3 phase is in [BENCHMARKS.md](BENCHMARKS.md), with the method
both share.

Run of {date}, shardfs commit `{git}` ({dirty} paths differed from that commit
in the working tree: the binary measured, `{exe}` built {built}, may include
uncommitted changes), {wall:.0f} s for the whole run.

## Results

The Firebase Storage emulator's GCS JSON API (firebase-tools {fbt}) on
127.0.0.1, the same datasets as the S3 phase but for the large files'
size. Medians of {reps} rounds for the phases without ¹, {extra} round(s)
for those with ¹. Small files: files/s (1 file = {avg:.0f} bytes on
average); large: MB/s (10^6 bytes); trainer: seconds. 1r / 8r = 1 / 8
concurrent readers.

{abs}

"raw curl, shardfs' requests" makes the GETs shardfs makes: the
generation pinned and a `Range` header (the whole of a small file, chunks
of 8 MiB of a large one). The emulator answers a ranged GET from a read of
the whole object, so a large object fetched in chunks costs it one whole
read per chunk (compare the two raw rows' large cells); this row is the
server's limit for shardfs here. shardfs (disk cache) ÷ raw curl with
shardfs' requests: {vsranged}.

Ratios (of the medians above). "raw 1-conn" is one curl connection, "raw
8-conn" eight, "raw 1-stream" one curl GET after another over the large
files; the peer is rclone with its cache off (there is no s3fs for GCS).

{ratio}

Trainer: rank 0 of world_size 4 ({ntr} files), one reader, {cms} ms of compute
(sleep) after each file; {trainer}.

Time to mount (median, small dataset, until a listing of the root answers):
{mounts}.

rclone: {rclone}

### shardfs' own counters during each pass (first round, from `.shardfs/stats`)

"bytes / data" is backend bytes over the bytes the pass read.

| target | phase | backend requests | backend bytes | bytes / data | cache hits | cache misses |
|---|---|---|---|---|---|---|
{sstats}
### Errors

{errs}
## Machine and noise

- {nproc} cores, {cpu}, {mem} RAM, {os}, kernel {kernel}
- the emulator: one Node {node} process on 127.0.0.1, objects in its memory
  and temp dir (in the page cache after the upload)
- Peers and tools: {rclone_v}; {curl}; {fuse}; Python {python}
- Load average at start {la0}, at the end {la1}. Other processes used
  {foreign:.0f}% of the CPU during the measurements; per pass of at least
  0.5 s: median {fmed}, largest {fmax}; this run waited {waited:.0f} s for
  quiet in all (bench.py's rules). CPU steal {steal:.1f}%.
- Spread of the repeated measurements, (max - min) / median: median
  {smed}, largest {smax}. Per cell, with the largest share of the CPU other
  processes took during one of its passes in brackets:

{noise}

## Method

As in [BENCHMARKS.md](BENCHMARKS.md) (readers, orders, cold and warm,
remount), with:

- Datasets: small = {nsmall} files of 80-135 KiB under `small/train/` ({ncls}
  classes); large = {nlarge} files of {lmib} MiB under `large/`; uploaded
  with objects.insert (`uploadType=media`).
- The emulator reads the whole object for every ranged GET (it answers a
  range from a full read), so one ranged GET of a {lmib} MiB object costs
  about one whole read; rclone and raw curl read each large object in one
  GET, shardfs in chunks of 8 MiB. Real GCS serves a range at the cost of
  the range. The large-file cells compare clients of this emulator, not
  of GCS.
- Raw curl: one `curl` process, `GET /storage/v1/b/{bucket}/o/NAME?alt=media`
  (NAME percent-encoded, `/` as `%2F`), no credentials, keep-alive;
  `--parallel --parallel-immediate --parallel-max 8` for 8 connections.
  "shardfs' requests" adds `&generation=G` and `Range: bytes=A-B` (the
  whole object for a small file; 8 MiB chunks of a large one).
- shardfs: `url = gs://{bucket}/small/train/` (or `large/`),
  `STORAGE_EMULATOR_HOST=127.0.0.1:PORT` in its environment (no
  credentials), `[shard] world_size = 1` (4 for the trainer){cachenote};
  other keys default; readers use `MNT/rank-0/KEY`.
- rclone: `rclone mount gcs:{bucket}/small/train MNT --read-only
  --vfs-cache-mode off|full --cache-dir DIR`, a `google cloud storage`
  remote with `endpoint = http://127.0.0.1:PORT/storage/v1/`,
  `anonymous = true`, `bucket_policy_only = true`; other options default.
""".format(
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), git=git, dirty=dirty,
        exe=ctx.shardfs_src,
        built=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ctx.shardfs_built)),
        wall=wall, fbt=ctx.fbt, reps=ctx.reps, extra=ctx.extra_reps,
        avg=statistics.mean(ctx.sizes["small"].values()), abs=abs_table,
        ratio=ratio_table, ntr=len(ctx.trainer_keys), cms=ctx.compute_ms, trainer=trainer,
        mounts=mounts.rstrip(", ") or "—", rclone=ctx.rclone_note,
        vsranged=vs_ranged(res),
        sstats=B.stats_rows(ctx, res, targets), errs=errs,
        nproc=mc["nproc"], cpu=mc["cpu"], mem=mc["mem"], os=mc["os"], kernel=mc["kernel"],
        node=mc["node"], rclone_v=mc["rclone"], curl=mc["curl"], fuse=mc["fuse"],
        python=mc["python"], la0=noise["la0"], la1=noise["la1"], foreign=noise["foreign"],
        steal=noise["steal"], waited=ctx.meter.waited,
        fmed="%.0f%%" % (100 * statistics.median(fall)) if fall else "—",
        fmax="%.0f%%" % (100 * max(fall)) if fall else "—",
        smed="%.0f%%" % (100 * statistics.median(spreads)) if spreads else "—",
        smax="%.0f%%" % (100 * max(spreads)) if spreads else "—",
        noise=noise_table, nsmall=len(ctx.keys["small"]),
        ncls=len({k.split("/")[0] for k in ctx.keys["small"]}),
        nlarge=len(ctx.keys["large"]), lmib=ctx.large_mib, bucket=B.BUCKET,
        cachenote={"dir+enabled": "; `[cache] dir = ` a fresh temp dir for cold mounts, "
                   "the same dir for a remount; \"cache off\" adds `enabled = false`",
                   "dir": "; `[cache] dir = ` a fresh temp dir for cold mounts"}.get(
                       ctx.cache_keys, "; this build has no [cache] keys"))
    if path != "-":
        with open(path, "w") as f:
            f.write(text)
        print("bench-gcs: wrote %s" % os.path.relpath(path, REPO))


def main():
    if os.geteuid() != 0:
        raise SystemExit("bench-gcs: run as root (FUSE mounts, apt-get)")
    ctx = B.Ctx()
    ctx.source_lines, ctx.object_url = gcs_source_lines, gcs_object_url
    ctx.curl_auth, ctx.rclone_remote, ctx.peer = [], "gcs", "rclone-off"
    ctx.reps = B.env_int("BENCH_REPS", 1)
    ctx.extra_reps = min(B.env_int("BENCH_EXTRA_REPS", 1), ctx.reps)
    ctx.compute_ms = B.env_int("BENCH_COMPUTE_MS", 2)
    ctx.large_mib = B.env_int("BENCH_GCS_LARGE_MIB", 16)
    n_small = B.env_int("BENCH_SMALL_FILES", 2000)
    n_large = B.env_int("BENCH_LARGE_FILES", 8)
    want = os.environ.get("BENCH_GCS_TARGETS", "") or \
        "raw,raw-ranged,local,shardfs,shardfs-nocache,rclone-off,rclone-full"
    want = [w.strip() for w in want.split(",") if w.strip()]
    out_path = os.environ.get("BENCH_GCS_OUT") or os.path.join(REPO, "docs", "BENCHMARKS-gcs.md")

    # No credential of this machine's is read, nothing asks a metadata
    # server; rclone 1.60 refuses to start with AWS_CA_BUNDLE set.
    for k in list(os.environ):
        if k.startswith(("GOOGLE_", "GCE_", "CLOUDSDK_", "AWS_")) or k == "STORAGE_EMULATOR_HOST":
            del os.environ[k]
    ctx.env = env = B.Env(keep=os.environ.get("BENCH_KEEP") == "1")
    os.environ.update({"CLOUDSDK_CONFIG": os.path.join(env.tmp, "no-gcloud-config"),
                       "GCE_METADATA_HOST": "127.0.0.1:9", "AWS_EC2_METADATA_DISABLED": "true"})
    ctx.meter = B.CpuMeter(env)
    run_meter = B.CpuMeter(env)

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    t_start = time.perf_counter()
    la0 = B.sh("cut -d' ' -f1-3 /proc/loadavg")
    try:
        ensure_debs()
        ctx.machine = B.machine()
        built = B.ensure_shardfs()
        ctx.shardfs_src = os.path.relpath(built, REPO)
        ctx.shardfs_built = os.stat(built).st_mtime
        ctx.shardfs = os.path.join(env.tmp, "shardfs")
        shutil.copy2(built, ctx.shardfs)
        nm = emulator_install(env)
        ctx.fbt = B.sh("node -p 'require(\"%s/firebase-tools/package.json\").version'" % nm)
        emu, ctx.ep, port = emulator_start(env, nm)
        os.environ["STORAGE_EMULATOR_HOST"] = "127.0.0.1:%d" % port
        print("bench-gcs: emulator on %s (pid %d), temp dir %s" % (ctx.ep, emu.pid, env.tmp),
              flush=True)

        ctx.data = os.path.join(env.tmp, "data")
        t0 = time.perf_counter()
        ctx.sizes = B.make_datasets(ctx.data, n_small, n_large, ctx.large_mib)
        for ds in ("small", "large"):
            upload(port, os.path.join(ctx.data, B.PREFIX[ds]), B.PREFIX[ds])
        print("bench-gcs: datasets generated and uploaded in %.0f s" % (
            time.perf_counter() - t0), flush=True)

        ctx.gens = list_generations(port)
        ctx.cache_keys = ""
        ctx.cache_keys = B.probe_cache_keys(ctx)
        ctx.keys = {ds: sorted(ctx.sizes[ds]) for ds in ("small", "large")}
        ctx.shuf = list(ctx.keys["small"])
        random.Random(42).shuffle(ctx.shuf)
        ctx.rank = B.plan_keys(ctx, "small", 1)
        ctx.trainer_keys = B.plan_keys(ctx, "small", 4)
        if sorted(ctx.rank) != ctx.keys["small"]:
            raise SystemExit("bench-gcs: shardfs plan (world_size 1) does not list every small key")
        ctx.keys["large"] = B.plan_keys(ctx, "large", 1)
        if sorted(ctx.keys["large"]) != sorted(ctx.sizes["large"]):
            raise SystemExit("bench-gcs: shardfs plan (world_size 1) does not list every large key")

        ctx.rclone_conf = rclone_conf(ctx)
        why = rclone_probe(ctx) if any(w.startswith("rclone") for w in want) else None
        if why:
            ctx.rclone_note = ("its GCS backend cannot be pointed at the emulator here: %s; "
                               "not measured." % why)
            print("bench-gcs: rclone left out: %s" % why, flush=True)
            want = [w for w in want if not w.startswith("rclone")]
        else:
            ctx.rclone_note = ("its `google cloud storage` backend reads the emulator with "
                               "`endpoint` (the JSON API's base URL) and `anonymous = true`; "
                               "downloads follow each object's mediaLink, which the emulator "
                               "points at itself.")

        all_targets = {
            "raw": None, "raw-ranged": None, "local": B.Local(ctx), "shardfs": B.Shardfs(ctx, True),
            "shardfs-nocache": B.Shardfs(ctx, False),
            "rclone-off": B.Rclone(ctx, "off"), "rclone-full": B.Rclone(ctx, "full")}
        if ctx.cache_keys != "dir+enabled":
            want = [w for w in want if w != "shardfs-nocache"]
        targets = []
        for w in want:
            if w not in all_targets:
                raise SystemExit("bench-gcs: unknown target %s" % w)
            t = all_targets[w]
            if t is None:
                t = B.Target(ctx)
                t.name, t.is_fuse = w, False
                t.label = {"raw": "raw curl, plain GETs",
                           "raw-ranged": "raw curl, shardfs' requests (server limit)"}[w]
            targets.append(t)

        res = B.Results()
        c0 = B.cpu_times()
        run_meter.start()
        for rnd in range(ctx.reps):
            print("bench-gcs: round %d of %d (%.0f s so far)" % (
                rnd + 1, ctx.reps, time.perf_counter() - t_start), flush=True)
            for t in targets:
                if t.name == "raw":
                    B.bench_raw(ctx, res, rnd)
                elif t.name == "raw-ranged":
                    bench_raw_ranged(ctx, res, rnd)
                else:
                    B.bench_target(ctx, res, t, rnd)
        c1 = B.cpu_times()

        foreign = run_meter.foreign()
        env.stop(emu)
        wall = time.perf_counter() - t_start
        total = sum(c1[k] - c0[k] for k in ("busy", "idle", "steal"))
        noise = {"la0": la0, "la1": B.sh("cut -d' ' -f1-3 /proc/loadavg"),
                 "foreign": 100 * foreign,
                 "steal": 100 * (c1["steal"] - c0["steal"]) / total if total else 0}
        tabs = B.tables(ctx, res, targets)
        print()
        print(tabs[0])
        print()
        print(tabs[1])
        print()
        print("Trainer: " + tabs[4])
        print("shardfs ÷ raw curl with shardfs' requests: " + vs_ranged(res))
        print("rclone: " + ctx.rclone_note)
        print("Spread of repeated cells:")
        print(tabs[2])
        if res.errors:
            print("\nErrors:")
            for t, p, m in res.errors:
                print("  %s, %s: %s" % (t, p, m))
        write_report(ctx, res, targets, tabs, wall, noise, out_path)
        print("bench-gcs: %.0f s" % wall)
        return 0
    except KeyboardInterrupt:
        print("bench-gcs: interrupted", file=sys.stderr)
        return 130
    finally:
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())
