#!/usr/bin/python3
"""Read benchmark (issue 5, item 5; issue 12, item 3; issue 25): shardfs
against its peers on one S3 server, without and with store latency.

`make bench` (tests/bench/run.sh) pre-faults guest memory (prefault.py),
runs scale.sh, cache.sh, records.sh, nfs.sh, this file, bench_gcs.py (the
peers phases on the GCS emulator, with this file's machinery) and
epochs.sh. It is not part of `make check`. About 35 minutes on 2 cores.

Quick subsets (environment of `make bench` or of this file):
  BENCH_PHASES     comma list of scale, cache, records, nfs, peers, latency,
                   gcs, epochs, transform [all]; this file runs peers
                   and latency, run.sh the others
  BENCH_QUICK=1    (run.sh) every chosen phase on small sizes, no docs
                   written: e.g. `BENCH_QUICK=1 BENCH_PHASES=latency make
                   bench` (about 3 min)
  BENCH_LATENCIES  delays in ms for the latency phases [0,20,50]
  BENCH_LAT_PASSES comma list of latency passes (see below), e.g. s1,local
                   for the warm targets (1r cold, warm, after remount)
  e.g. `BENCH_PHASES=latency BENCH_LATENCIES=20 make bench` (about 4 min),
  `BENCH_PHASES=latency BENCH_LATENCIES=20 BENCH_OUT=- tests/bench/bench.py`.

The latency phases (latency.py) restart s3rver through
tests/integration/s3/s3rver_delay.js (S3RVER_DELAY_MS, a timer before every
request) at each latency and measure, in one round, raw curl at 1-128
connections and on the large files (8 streams into a tmpfs too), shardfs
(disk cache, default config: small 1r rank order, 8r, 64r with the daemon's
peak RSS, large sequential, the trainer, a PyTorch DataLoader; warm and
warm after remount with local disk and squashfuse_ll at the lowest
latency), s3fs and rclone (cache off); then the targets table of issue 25
(targets.py: ratios, met or missed, where the time of a miss went, with the
figures records.sh and nfs.sh left in BENCH_RESULTS) and a profile of
shardfs' gauges, CPU and FUSE requests during each pass. The peers phases
below are the older table (issue 5), one round by default (BENCH_REPS was
3) to keep `make bench` near 35 minutes.

The peers phases:

One run:
  1. installs what is missing (Debian s3fs, rclone, awscli, curl; s3rver by
     `npm ci` through tests/integration/s3/s3rver.sh), builds shardfs if
     build/shardfs is missing, and measures a private copy of that binary
     (others may rebuild build/shardfs meanwhile);
  2. starts s3rver on a free 127.0.0.1 port, generates the datasets in a temp
     dir (SMALL_FILES files of about 110 KB in an ImageNet-like tree, LARGE_FILES
     files of LARGE_MIB MiB) and uploads them with /usr/bin/aws;
  3. measures every target on the same server and data:
       raw curl     SigV4 GETs, 1 and 8 connections (the server's limit)
       shardfs      with its disk cache in a fresh dir, and with [cache]
                    enabled = false (when the config has those keys)
       s3fs         1.90, defaults
       rclone       mount, --vfs-cache-mode off and full
       local disk   the generated files (cold = POSIX_FADV_DONTNEED first)
     in these phases:
       small 1r/8r cold, shuffled order and rank order (fresh mount, empty cache)
       small 1r/8r warm (a second pass on the same mount)
       small 1r warm after remount (unmount, mount again with the same cache dir)
       large sequential cold, warm, warm after remount (one reader, 1 MiB reads)
       trainer: rank 0 of world_size 4, one reader, 2 ms of compute per file,
                against the same reader without compute on a fresh mount
  4. prints the tables and writes them, with the machine and its noise, to
     docs/BENCHMARKS.md.

The phases that carry a target (small cold 1r in rank order, small cold
1r/8r shuffled, small warm 1r, large cold, trainer) are repeated REPS times (median reported, spread in the
noise table); the others EXTRA_REPS times. Rounds are interleaved (round 1 of
every target, then round 2, ...), so slow drift of the machine hits all
targets alike. The machine is shared: every pass records how much CPU other
processes took meanwhile (CpuMeter), and waits a little for quiet first.

Environment knobs (defaults in brackets): SHARDFS [build/shardfs],
BENCH_REPS [1], BENCH_EXTRA_REPS [1], BENCH_SMALL_FILES [2000],
BENCH_LARGE_FILES [8], BENCH_LARGE_MIB [64], BENCH_COMPUTE_MS [2],
BENCH_TARGETS [all: raw,local,shardfs,shardfs-nocache,s3fs,rclone-off,
rclone-full], BENCH_OUT [docs/BENCHMARKS.md; "-" = do not write],
BENCH_KEEP [0; 1 keeps the temp dir]; for the latency phases
BENCH_LATENCIES [0,20,50], BENCH_SLOW_FILES [100: the small keys raw curl's
1 connection and s3fs/rclone 1r read at latency; 8r 4x that],
BENCH_LAT_LARGE_FILES [4: large files read at latency], BENCH_LAT_NOCACHE [1:
also shardfs with the cache off, 1r, for diagnosis], BENCH_LAT_PEERS
[s3fs,rclone-off], BENCH_LAT_PASSES [raw,s1,s8,nocache,l1,trainer,torch,rss,
local,squashfuse,peers: the latency passes to run, e.g. raw,s1,trainer to
iterate on one], BENCH_TORCH_WORLD [1: the DataLoader reads rank-0/ of
that world size], BENCH_TORCH_WORKERS [4], BENCH_TORCH_BATCH [32],
BENCH_TORCH_COMPUTE [sleep; or busy], BENCH_RESULTS [run.sh's results dir:
prefault.json, records.json, nfs.json for the targets table],
BENCH_NOTE [a line for the report's header, e.g. that the
machine was loaded].

Everything started is stopped by PID, every mount unmounted and the temp dir
removed on exit, also on an error or a signal. Nothing here contacts anything
but 127.0.0.1 and, only when something is missing, Debian's apt archive and
the npm registry (s3rver). AWS_EC2_METADATA_DISABLED=true is always set.
"""

import argparse
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import latency

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUCKET = "bench"
# Where each dataset lives, in the bucket and under the local data dir. The
# small one is ImageNet's train/<class>/<file> tree; targets mount train/
# (s3rver lists no common prefix for a "directory" that holds only
# directories, so small/ itself would look empty to s3fs and rclone).
PREFIX = {"small": "small/train", "large": "large"}
READ_BUF = 1 << 20
PASS_TIMEOUT = 600  # seconds; a pass that takes longer is an error


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v else default


# ---------------------------------------------------------------------------
# The reader: runs in its own process (`bench.py read ...`) so that a reader
# stuck in a hung FUSE mount can be abandoned, and its timing is not disturbed
# by the driver.


def cmd_read(args):
    with open(args.list) as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    compute = args.compute_ms / 1000.0
    lock = threading.Lock()
    it = iter(paths)
    out = {"files": 0, "bytes": 0, "errors": [], "compute_s": 0.0}

    def worker():
        mv = memoryview(bytearray(READ_BUF))
        files = nbytes = 0
        slept = 0.0
        errors = []
        while True:
            with lock:
                p = next(it, None)
            if p is None:
                break
            try:
                fd = os.open(p, os.O_RDONLY)
                try:
                    while True:
                        k = os.readv(fd, [mv])
                        if k == 0:
                            break
                        nbytes += k
                finally:
                    os.close(fd)
                files += 1
            except OSError as e:
                errors.append("%s: %s" % (p, e.strerror))
            if compute:
                t = time.perf_counter()
                time.sleep(compute)
                slept += time.perf_counter() - t
        with lock:
            out["files"] += files
            out["bytes"] += nbytes
            out["errors"] += errors
            out["compute_s"] += slept

    threads = [threading.Thread(target=worker) for _ in range(args.readers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["wall_s"] = time.perf_counter() - t0
    out["errors"] = out["errors"][:5] + (
        ["... %d more" % (len(out["errors"]) - 5)] if len(out["errors"]) > 5 else [])
    json.dump(out, sys.stdout)
    return 0


# ---------------------------------------------------------------------------
# Process and mount bookkeeping.


class Env:
    """The temp dir, the processes and mounts this run owns."""

    def __init__(self, keep=False):
        self.tmp = tempfile.mkdtemp(prefix="shardfs-bench.")
        self.keep = keep
        self.pids = []  # Popen objects, stopped in reverse order
        self.mounts = []  # mount points
        self.logs = os.path.join(self.tmp, "logs")
        os.makedirs(self.logs)
        self.nlog = 0

    def log(self, name):
        self.nlog += 1
        return os.path.join(self.logs, "%03d-%s.log" % (self.nlog, name))

    def spawn(self, argv, name, **kw):
        logf = open(self.log(name), "w")
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, **kw)
        p.logpath = logf.name
        logf.close()
        self.pids.append(p)
        return p

    def stop(self, p, timeout=10):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.pids:
            self.pids.remove(p)

    def cleanup(self):
        for m in list(self.mounts):
            unmount(m)
            self.mounts.remove(m)
        for p in reversed(list(self.pids)):
            self.stop(p, timeout=5)
        if self.keep:
            print("bench: kept %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def mounted(path):
    with open("/proc/mounts") as f:
        for line in f:
            if line.split(" ")[1] == path:
                return True
    return False


def unmount(path):
    for argv in (["fusermount3", "-u", path], ["umount", path],
                 ["fusermount3", "-u", "-z", path]):
        if not mounted(path):
            return
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(50):
            if not mounted(path):
                return
            time.sleep(0.1)


def run(argv, **kw):
    return subprocess.run(argv, check=True, **kw)


# ---------------------------------------------------------------------------
# Setup: packages, shardfs, s3rver, data.


def ensure_debs():
    """The peers and tools (s3fs, rclone, curl, awscli, squashfuse,
    squashfs-tools, python3-torch): one list, in scripts/install-deps.sh
    bench, which `make bench` has run already (then this is a no-op)."""
    run([os.path.join(REPO, "scripts", "install-deps.sh"), "bench"])


def ensure_shardfs():
    exe = os.environ.get("SHARDFS") or os.path.join(REPO, "build", "shardfs")
    if not os.access(exe, os.X_OK):
        print("bench: %s missing, running make" % exe)
        run(["make", "-C", REPO, "--no-print-directory"])
    return os.path.abspath(exe)


def s3rver_install(env):
    """npm ci through the integration suites' helper (build/s3rver)."""
    helper = os.path.join(REPO, "tests", "integration", "s3", "s3rver.sh")
    run(["bash", "-c", 'T=$1; PIDS=(); . "$2" && s3rver_install && echo "$S3RVER_DIR"',
         "_", env.tmp, helper], stdout=subprocess.PIPE)
    return os.path.join(REPO, "build", "s3rver", "node_modules", "s3rver",
                        "bin", "s3rver.js")


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def s3rver_start(env, js, delay_ms=None, launcher=None):
    """Starts s3rver on the run's data dir (kept across restarts). With
    launcher (tests/integration/s3/s3rver_delay.js), through it with
    S3RVER_DELAY_MS=delay_ms: a fixed delay before every request."""
    import urllib.request
    port = free_port()
    data = os.path.join(env.tmp, "s3data")
    os.makedirs(data, exist_ok=True)
    pre, kw = [], {}
    if launcher:
        pre = [launcher]
        kw["env"] = dict(os.environ, S3RVER_DELAY_MS=str(delay_ms or 0))
    p = env.spawn(["node", "--openssl-legacy-provider"] + pre + [js, "-d", data,
                   "-a", "127.0.0.1", "-p", str(port), "-s",
                   "--service-endpoint", "localhost",
                   "--configure-bucket", BUCKET], "s3rver", **kw)
    ep = "http://127.0.0.1:%d" % port
    for _ in range(100):
        try:
            urllib.request.urlopen(ep + "/", timeout=1).read()
            return p, ep
        except OSError:
            if p.poll() is not None:
                raise SystemExit("bench: s3rver exited: " + open(p.logpath).read())
            time.sleep(0.1)
    raise SystemExit("bench: s3rver did not answer in 10 s")


def make_datasets(root, n_small, n_large, large_mib):
    """small/train/<class>/<class>_<n>.JPEG, 80-135 KiB (mean ~110 KB);
    large/part-NN.bin. Returns {dataset: {key: size}}, keys relative to
    PREFIX[dataset]."""
    rnd = random.Random(20261122)
    sizes = {"small": {}, "large": {}}
    classes = max(1, n_small // 20)
    for i in range(n_small):
        cls = "n%08d" % (1440764 + 1000 * (i % classes))
        key = "%s/%s_%05d.JPEG" % (cls, cls, i)
        size = rnd.randint(80 << 10, 135 << 10)
        path = os.path.join(root, PREFIX["small"], key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(rnd.randbytes(size))
        sizes["small"][key] = size
    os.makedirs(os.path.join(root, "large"), exist_ok=True)
    for i in range(n_large):
        key = "part-%02d.bin" % i
        with open(os.path.join(root, "large", key), "wb") as f:
            for _ in range(large_mib):
                f.write(rnd.randbytes(1 << 20))
        sizes["large"][key] = large_mib << 20
    os.sync()  # so that POSIX_FADV_DONTNEED can drop every page
    return sizes


def drop_file_cache(root):
    """Drops the page cache of the files under root only (not global)."""
    for d, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(d, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


# ---------------------------------------------------------------------------
# Targets. A FUSE target mounts one dataset (small or large) at a time; keys
# are relative to the dataset. cold=True: a fresh mount with an empty cache.


class Target:
    name = ""
    label = ""
    is_fuse = True
    has_remount = True  # warm after remount is meaningful

    def __init__(self, ctx):
        self.ctx = ctx
        self.proc = None
        self.mnt = None
        self.cache_dir = None
        self.mount_times = []

    def path(self, key, world):
        return os.path.join(self.mnt, key)

    def argv(self, dataset, world):
        raise NotImplementedError

    def fresh_cache(self):
        self.cache_dir = tempfile.mkdtemp(prefix="cache-%s." % self.name,
                                          dir=self.ctx.env.tmp)

    def mount(self, dataset, world=1, cold=True):
        env = self.ctx.env
        if cold or self.cache_dir is None:
            self.fresh_cache()
        self.mnt = os.path.join(env.tmp, "mnt-" + self.name)
        os.makedirs(self.mnt, exist_ok=True)
        t0 = time.perf_counter()
        self.proc = env.spawn(self.argv(dataset, world), self.name)
        env.mounts.append(self.mnt)
        for _ in range(600):
            if mounted(self.mnt):
                break
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited while mounting: %s" % (
                    self.name, open(self.proc.logpath).read()[-2000:]))
            time.sleep(0.05)
        else:
            raise RuntimeError("%s did not mount in 30 s" % self.name)
        # Serving: a stat of the root goes through the daemon.
        os.listdir(self.mnt)
        self.mount_times.append(time.perf_counter() - t0)

    def umount(self):
        env = self.ctx.env
        unmount(self.mnt)
        if self.mnt in env.mounts:
            env.mounts.remove(self.mnt)
        if self.proc is not None:
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                pass
            env.stop(self.proc)
            self.proc = None

    def abort(self):
        """After a timed-out pass: kill the daemon so the reader returns."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.umount()

    def stats(self):
        return None


class Local(Target):
    name, label, is_fuse, has_remount = "local", "local disk", False, False

    def mount(self, dataset, world=1, cold=True):
        self.mnt = os.path.join(self.ctx.data, PREFIX[dataset])
        if cold:
            drop_file_cache(self.mnt)

    def umount(self):
        pass

    def abort(self):
        pass


class Shardfs(Target):
    def __init__(self, ctx, cache):
        super().__init__(ctx)
        self.cache = cache
        self.name = "shardfs" if cache else "shardfs-nocache"
        self.label = "shardfs, disk cache" if cache else "shardfs, cache off"
        if not ctx.cache_keys:
            self.label = "shardfs"

    def path(self, key, world):
        return os.path.join(self.mnt, "rank-0", key)

    def argv(self, dataset, world):
        conf = os.path.join(self.ctx.env.tmp, "%s-%s-%d.conf" % (self.name, dataset, world))
        with open(conf, "w") as f:
            f.write(shardfs_conf(self.ctx, dataset, world, self.cache_dir,
                                 self.cache))
        return [self.ctx.shardfs, "mount", conf, self.mnt, "-f"]

    def stats(self):
        """The mount's counters: name without the shardfs_ prefix, with its
        labels if any (`fuse_requests_total{op="lookup"}`)."""
        out = {}
        try:
            with open(os.path.join(self.mnt, ".shardfs", "stats")) as f:
                for line in f:
                    m = STAT_LINE.match(line.strip())
                    if m:
                        out[m.group(1) + (m.group(2) or "")] = int(m.group(3))
        except OSError:
            return None
        return out


# One line of .shardfs/stats: name, labels (none may hold a "}"), integer.
STAT_LINE = re.compile(r"shardfs_(\w+)(\{[^}]*\})? (\d+)$")


class Squashfuse(Target):
    """squashfuse_ll over an uncompressed squashfs image of the local copy
    (`mksquashfs SRC IMG -noappend -noD -noF`): a plain C FUSE filesystem
    (libfuse's low-level API, like shardfs) serving the same files, the
    ceiling of such a filesystem on this kernel. The image is built once per
    dataset and stays in the page cache (as shardfs' cache does after a
    remount); a fresh mount starts with no FUSE inode and no page cache of
    its own."""
    name, label = "squashfuse", "squashfuse_ll"
    has_remount = False

    def __init__(self, ctx):
        super().__init__(ctx)
        self.images = {}

    def image(self, dataset):
        if dataset not in self.images:
            img = os.path.join(self.ctx.env.tmp, "%s.sqfs" % dataset)
            with open(self.ctx.env.log("mksquashfs"), "w") as logf:
                run(["mksquashfs", os.path.join(self.ctx.data, PREFIX[dataset]), img,
                     "-noappend", "-noD", "-noF", "-no-progress"], stdout=logf,
                    stderr=subprocess.STDOUT)
            self.images[dataset] = img
        with open(self.images[dataset], "rb") as f:  # into the page cache
            while f.read(READ_BUF << 3):
                pass
        return self.images[dataset]

    def mount(self, dataset, world=1, cold=True):
        self.img = self.image(dataset)  # before the clock of the mount starts
        super().mount(dataset, world, cold)

    def argv(self, dataset, world):
        return ["squashfuse_ll", "-f", self.img, self.mnt]


def s3_source_lines(ctx, dataset):
    return ["url = s3://%s/%s/" % (BUCKET, PREFIX[dataset]),
            "endpoint = %s" % ctx.ep,
            "addressing = path"]


def shardfs_conf(ctx, dataset, world, cache_dir, cache_on):
    # ctx.source_lines: the [source] keys of the store measured (S3 here,
    # GCS in bench_gcs.py).
    lines = ["[source]"] + ctx.source_lines(ctx, dataset) + [
             "[shard]",
             "world_size = %d" % world]
    if ctx.cache_keys and cache_dir:
        lines += ["[cache]", "dir = %s" % cache_dir]
        if ctx.cache_keys == "dir+enabled":
            lines.append("enabled = %s" % ("true" if cache_on else "false"))
    return "\n".join(lines) + "\n"


class S3fs(Target):
    name, label = "s3fs", "s3fs"
    has_remount = True

    def argv(self, dataset, world):
        return ["s3fs", "%s:/%s" % (BUCKET, PREFIX[dataset]), self.mnt, "-f", "-o",
                "ro,passwd_file=%s,url=%s,use_path_request_style,endpoint=us-east-1"
                % (self.ctx.s3fs_passwd, self.ctx.ep)]


class Rclone(Target):
    def __init__(self, ctx, mode):
        super().__init__(ctx)
        self.mode = mode
        self.name = "rclone-" + mode
        self.label = "rclone, cache %s" % mode

    def argv(self, dataset, world):
        return ["rclone", "mount", "--config", self.ctx.rclone_conf,
                "%s:%s/%s" % (self.ctx.rclone_remote, BUCKET, PREFIX[dataset]), self.mnt,
                "--read-only",
                "--vfs-cache-mode", self.mode, "--cache-dir", self.cache_dir]


# ---------------------------------------------------------------------------
# Measurements.


class Ctx:
    pass


class CpuMeter:
    """How much of the machine other processes (not this run's) used while
    a pass ran: busy time from /proc/stat minus the CPU time of this run's
    own processes (the driver, its finished children such as the reader and
    curl, and the live daemons: s3rver and the FUSE daemon)."""

    HZ = os.sysconf("SC_CLK_TCK")
    QUIET = 0.15  # other processes' share of the machine that counts as quiet
    WAIT_MAX = 10  # seconds to wait for quiet before one pass
    WAIT_BUDGET = 120  # seconds to wait for quiet in a whole run

    def __init__(self, env):
        self.env = env
        self.waited = 0.0

    def wait_quiet(self):
        """Before a pass: wait (within the budgets) until other processes
        leave the machine alone for half a second."""
        t0 = time.perf_counter()
        while self.waited + (time.perf_counter() - t0) < self.WAIT_BUDGET and \
                time.perf_counter() - t0 < self.WAIT_MAX:
            self.start()
            time.sleep(0.5)
            if self.foreign() < self.QUIET:
                break
        self.waited += time.perf_counter() - t0

    def _snap(self):
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        busy = v[0] + v[1] + v[2] + v[5] + v[6]
        ours = 0
        for p in self.env.pids:
            try:
                with open("/proc/%d/stat" % p.pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ours += int(fields[11]) + int(fields[12])
            except (OSError, IndexError):
                pass
        t = os.times()
        own = t.user + t.system + t.children_user + t.children_system
        return time.perf_counter(), busy / self.HZ, ours / self.HZ + own

    def start(self):
        self.s0 = self._snap()

    def foreign(self):
        """Fraction of all cores used by other processes since start()."""
        t1, b1, o1 = self._snap()
        t0, b0, o0 = self.s0
        if t1 - t0 <= 0:
            return 0.0
        return max(0.0, ((b1 - b0) - (o1 - o0)) / ((t1 - t0) * os.cpu_count()))


def read_pass(ctx, tgt, keys, dataset, readers, world=1, compute_ms=0):
    """One pass over keys with `readers` threads. Returns a result dict or
    {"error": ...}."""
    lst = os.path.join(ctx.env.tmp, "list.txt")
    with open(lst, "w") as f:
        for k in keys:
            f.write(tgt.path(k, world) + "\n")
    argv = [sys.executable, os.path.abspath(__file__), "read", "--list", lst,
            "--readers", str(readers), "--compute-ms", str(compute_ms)]
    ctx.meter.wait_quiet()
    ctx.meter.start()
    try:
        cp = subprocess.run(argv, capture_output=True, text=True,
                            timeout=PASS_TIMEOUT)
    except subprocess.TimeoutExpired:
        tgt.abort()
        return {"error": "timed out after %d s" % PASS_TIMEOUT}
    if cp.returncode != 0:
        return {"error": "reader failed: " + cp.stderr[-500:]}
    r = json.loads(cp.stdout)
    r["foreign"] = ctx.meter.foreign()
    want = sum(ctx.sizes[dataset][k] for k in keys)
    if r["errors"]:
        r["error"] = "%d files failed, e.g. %s" % (len(keys) - r["files"], r["errors"][0])
    elif r["bytes"] != want:
        r["error"] = "read %d bytes, expected %d" % (r["bytes"], want)
    r["n"] = len(keys)
    return r


def s3_object_url(ctx, dataset, key):
    return "%s/%s/%s/%s" % (ctx.ep, BUCKET, PREFIX[dataset], key)


S3_CURL_AUTH = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER",
                "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]


def curl_pass(ctx, keys, dataset, conns, requests=None):
    """GETs of keys with `conns` connections in one curl process
    (ctx.object_url, with ctx.curl_auth: SigV4 for S3, none for the GCS
    emulator). requests(dataset, key), if given, lists the (url, [header])
    GETs that fetch one key instead (ranged ones answer 206)."""
    cfg = os.path.join(ctx.env.tmp, "curl.cfg")
    wout = "%{http_code} %{size_download}\\n"
    sep = ""
    with open(cfg, "w") as f:
        for k in keys:
            if not requests:
                f.write('url = "%s"\noutput = "/dev/null"\n' % ctx.object_url(ctx, dataset, k))
                continue
            # Headers are per request: each is its own operation ("next"),
            # which resets the options but keeps the connections.
            for url, headers in requests(dataset, k):
                f.write('%surl = "%s"\noutput = "/dev/null"\nsilent\nshow-error\n'
                        'write-out = "%s"\n' % (sep, url, wout))
                for h in headers:
                    f.write('header = "%s"\n' % h)
                sep = "next\n"
    argv = ["curl", "-sS"] + ctx.curl_auth + (["-K", cfg] if requests else
                                              ["-w", wout, "-K", cfg])
    if conns > 1:
        argv[1:1] = ["--parallel", "--parallel-immediate", "--parallel-max", str(conns)]
    ctx.meter.wait_quiet()
    ctx.meter.start()
    t0 = time.perf_counter()
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=PASS_TIMEOUT)
    wall = time.perf_counter() - t0
    foreign = ctx.meter.foreign()
    codes = [line.split() for line in cp.stdout.splitlines() if line.strip()]
    ok = ("200", "206") if requests else ("200",)
    nbytes = sum(int(c[1]) for c in codes if c[0] in ok)
    bad = [c for c in codes if c[0] not in ok]
    r = {"wall_s": wall, "files": len(codes) - len(bad), "bytes": nbytes, "n": len(keys),
         "foreign": foreign}
    want = sum(ctx.sizes[dataset][k] for k in keys)
    if cp.returncode != 0 or bad or nbytes != want:
        r["error"] = "curl rc %d, %d failed, %d of %d bytes: %s" % (
            cp.returncode, len(bad), nbytes, want, cp.stderr[-300:])
    return r


# shardfs' default cache.chunk_size: it fetches a large file as GETs of this
# many bytes, so raw curl's large-file peer does too.
LARGE_CHUNK = 8 << 20


def curl_config_auth(auth):
    """ctx.curl_auth (command-line options, each with a value) as curl
    config lines, for configs whose operations are separated by `next`
    (which resets every option given before it)."""
    longname = {"-H": "header", "-u": "user"}
    return ['%s = "%s"' % (longname.get(opt, opt.lstrip("-")), val)
            for opt, val in zip(auth[0::2], auth[1::2])]


def tmpfs_dir(ctx):
    """A tmpfs of this run's own, mounted once and unmounted at the end,
    large enough for every large file."""
    d = getattr(ctx, "tmpfs", None)
    if d is None:
        d = os.path.join(ctx.env.tmp, "tmpfs")
        os.makedirs(d, exist_ok=True)
        size = sum(ctx.sizes["large"].values()) + (64 << 20)
        run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0700" % size, "tmpfs", d])
        ctx.env.mounts.append(d)
        ctx.tmpfs = d
    return d


def curl_tmpfs_pass(ctx, keys, dataset, streams=8, chunk=LARGE_CHUNK):
    """The large-file peer of issue 25: the files of keys, in that order, as
    ranged GETs of `chunk` bytes (shardfs' chunk size), `streams` at once in
    one curl process, each range written into its own file on a tmpfs, so
    that, as in shardfs' cold read, every byte lands in newly allocated
    pages (the /dev/null figure of curl_pass does not). Every request is
    signed (the auth is repeated in each operation of the config). The
    bytes on the tmpfs are counted, then removed."""
    d = tmpfs_dir(ctx)
    cfg = os.path.join(ctx.env.tmp, "curl-tmpfs.cfg")
    auth = curl_config_auth(ctx.curl_auth)
    want = 0
    with open(cfg, "w") as f:
        sep = ""
        for i, k in enumerate(keys):
            size = ctx.sizes[dataset][k]
            for j, off in enumerate(range(0, size, chunk)):
                end = min(off + chunk, size) - 1
                f.write('%surl = "%s"\noutput = "%s/%03d.%03d"\nrange = "%d-%d"\n'
                        'silent\nshow-error\nwrite-out = "%%{http_code} %%{size_download} %d\\n"\n'
                        % (sep, ctx.object_url(ctx, dataset, k), d, i, j, off, end,
                           end - off + 1))
                f.write("".join(line + "\n" for line in auth))
                sep = "next\n"
            want += size
    argv = ["curl", "--parallel", "--parallel-immediate", "--parallel-max", str(streams),
            "-K", cfg]
    ctx.meter.wait_quiet()
    ctx.meter.start()
    t0 = time.perf_counter()
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=PASS_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"error": "curl timed out after %d s" % PASS_TIMEOUT}
    wall = time.perf_counter() - t0
    foreign = ctx.meter.foreign()
    landed = 0
    for name in os.listdir(d):
        landed += os.path.getsize(os.path.join(d, name))
        os.unlink(os.path.join(d, name))
    codes = [line.split() for line in cp.stdout.splitlines() if line.strip()]
    bad = [c for c in codes if len(c) != 3 or c[0] not in ("200", "206") or c[1] != c[2]]
    nbytes = sum(int(c[1]) for c in codes if c not in bad)
    r = {"wall_s": wall, "bytes": nbytes, "n": len(keys), "foreign": foreign}
    if cp.returncode != 0 or bad or nbytes != want or landed != want:
        r["error"] = "curl rc %d, %d of %d ranges bad, %d of %d bytes (%d on the tmpfs): %s" % (
            cp.returncode, len(bad), len(codes), nbytes, want, landed, cp.stderr[-300:])
    return r


# Phase ids, in table order: (id, column head, unit, primary)
PHASES = [
    ("s1_cold_shuf", "small 1r cold", "files/s", True),
    ("s1_cold_rank", "small 1r cold, rank order", "files/s", True),
    ("s8_cold_shuf", "small 8r cold", "files/s", True),
    ("s8_cold_rank", "small 8r cold, rank order", "files/s", False),
    ("s1_warm", "small 1r warm", "files/s", True),
    ("s8_warm", "small 8r warm", "files/s", False),
    ("s1_remount", "small 1r warm after remount", "files/s", False),
    ("l_cold", "large seq cold", "MB/s", True),
    ("l_warm", "large seq warm", "MB/s", False),
    ("l_remount", "large seq warm after remount", "MB/s", False),
    ("tr_wall", "trainer wall", "s", True),
    ("tr_read", "trainer's files, no compute", "s", True),
]
PHASE = {p[0]: p for p in PHASES}


def value(phase, r):
    unit = PHASE[phase][2]
    if unit == "files/s":
        return r["n"] / r["wall_s"]
    if unit == "MB/s":
        return r["bytes"] / 1e6 / r["wall_s"]
    return r["wall_s"]


class Results:
    def __init__(self):
        self.vals = {}  # (target, phase) -> [values]
        self.foreign = {}  # (target, phase) -> [other processes' CPU share]
        self.errors = []  # (target, phase, message)
        self.extra = {}  # raw extras and diagnostics
        self.compute = []  # measured compute seconds of the trainer
        self.shardfs_stats = {}  # (target, phase) -> stats dict of round 1

    def add(self, tgt, phase, r):
        if "error" in r:
            self.errors.append((tgt, phase, r["error"]))
            print("  %-16s %-30s ERROR %s" % (tgt, PHASE[phase][1], r["error"]), flush=True)
            return
        v = value(phase, r)
        self.vals.setdefault((tgt, phase), []).append(v)
        if r["wall_s"] >= 0.5:  # shorter passes: too few clock ticks to tell
            self.foreign.setdefault((tgt, phase), []).append(r["foreign"])
        print("  %-16s %-30s %10.2f %-7s (%5.2f s, other processes %3.0f%% CPU)" % (
            tgt, PHASE[phase][1], v, PHASE[phase][2], r["wall_s"], 100 * r["foreign"]),
            flush=True)

    def med(self, tgt, phase):
        v = self.vals.get((tgt, phase))
        return statistics.median(v) if v else None

    def spread(self, tgt, phase):
        v = self.vals.get((tgt, phase))
        if not v or len(v) < 2:
            return None
        return (max(v) - min(v)) / statistics.median(v)


def bench_raw(ctx, res, rnd):
    large = ctx.keys["large"]
    tr = ctx.trainer_keys
    for phase, keys, conns in (("s1_cold_shuf", ctx.shuf, 1),
                               ("s8_cold_shuf", ctx.shuf, 8),
                               ("s1_cold_rank", ctx.rank, 1),
                               ("s8_cold_rank", ctx.rank, 8)):
        if PHASE[phase][3] or rnd < ctx.extra_reps:
            res.add("raw", phase, curl_pass(ctx, keys, "small", conns))
    res.add("raw", "l_cold", curl_pass(ctx, large, "large", 1))
    r = curl_pass(ctx, large, "large", 8)
    if "error" not in r:
        res.extra.setdefault("raw_large8", []).append(value("l_cold", r))
    # The server-limited read time of the trainer's files.
    for conns in (1, 8):
        r = curl_pass(ctx, tr, "small", conns)
        if "error" not in r:
            res.extra.setdefault("raw_trainer%d" % conns, []).append(r["wall_s"])


def bench_target(ctx, res, tgt, rnd):
    extra = rnd < ctx.extra_reps
    name = tgt.name
    shuf, rank = ctx.shuf, ctx.rank

    def check_order(keys):
        """shardfs serves the order the peers are given (plan = mount)."""
        if isinstance(tgt, Shardfs) and rnd == 0:
            with open(os.path.join(tgt.mnt, ".shardfs", "rank-0.order")) as f:
                served = [line.rstrip("\n") for line in f if "\t" not in line]
            if served != keys:
                res.errors.append((name, "order", ".shardfs/rank-0.order differs "
                                   "from shardfs plan --rank 0"))

    def measure(phase, keys, dataset, readers, world=1, compute_ms=0):
        if phase in ("s1_cold_rank", "tr_wall"):
            check_order(keys)
        before = tgt.stats()
        r = read_pass(ctx, tgt, keys, dataset, readers, world, compute_ms)
        res.add(name, phase, r)
        after = tgt.stats()
        if before is not None and after is not None and rnd == 0:
            res.shardfs_stats[(name, phase)] = {
                k: after[k] - before.get(k, 0) for k in after}
        return r

    def session(fn, dataset, world=1, cold=True):
        try:
            tgt.mount(dataset, world, cold)
        except Exception as e:  # a target that cannot mount: errors, go on
            res.errors.append((name, "mount", str(e)))
            print("  %-16s mount ERROR %s" % (name, e), flush=True)
            tgt.abort()
            return
        try:
            fn()
        finally:
            tgt.umount()

    # Small, shuffled: cold, warm (1 and 8 readers), then warm after remount.
    def s_a():
        measure("s1_cold_shuf", shuf, "small", 1)
        measure("s1_warm", shuf, "small", 1)
        if extra:
            measure("s8_warm", shuf, "small", 8)
    session(s_a, "small")
    if extra and tgt.has_remount:
        session(lambda: measure("s1_remount", shuf, "small", 1), "small", cold=False)
    session(lambda: measure("s8_cold_shuf", shuf, "small", 8), "small")
    session(lambda: measure("s1_cold_rank", rank, "small", 1), "small")
    if extra:
        session(lambda: measure("s8_cold_rank", rank, "small", 8), "small")

    # Large, sequential, one reader.
    large = ctx.keys["large"]

    def l_a():
        measure("l_cold", large, "large", 1)
        if extra:
            measure("l_warm", large, "large", 1)
    session(l_a, "large")
    if extra and tgt.has_remount:
        session(lambda: measure("l_remount", large, "large", 1), "large", cold=False)

    # Trainer: rank 0 of 4, compute per file; then the same files without.
    tk = ctx.trainer_keys

    def trainer():
        r = measure("tr_wall", tk, "small", 1, world=4, compute_ms=ctx.compute_ms)
        if "error" not in r:
            res.compute.append(r["compute_s"])
    session(trainer, "small", world=4)
    session(lambda: measure("tr_read", tk, "small", 1, world=4), "small", world=4)


# ---------------------------------------------------------------------------
# Report.


def fmt(v, unit):
    if v is None:
        return "—"
    if unit == "s":
        return "%.2f" % v
    if v >= 100:
        return "%.0f" % v
    return "%.1f" % v


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "—"
    return "%.2f" % (a / b)


def tables(ctx, res, targets):
    names = [t.name for t in targets]
    label = {t.name: t.label for t in targets}
    cols = [p for p in PHASES]
    out = []

    # 1. Absolute numbers.
    head = ["target"] + ["%s (%s)%s" % (p[1], p[2], "" if p[3] else " ¹") for p in cols]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for n in names:
        row = [label[n]]
        for p in cols:
            v = res.med(n, p[0])
            if n == "raw" and p[0] in ("s1_warm", "s8_warm", "s1_remount", "l_warm",
                                       "l_remount", "tr_wall"):
                cell = "—"
            elif n == "raw" and p[0] == "tr_read":
                v8 = res.extra.get("raw_trainer8")
                cell = "%.2f (8 conn)" % statistics.median(v8) if v8 else "—"
            elif n == "raw" and p[0] == "l_cold":
                v8 = res.extra.get("raw_large8")
                cell = fmt(v, "MB/s") + (" (8 streams: %.0f)" % statistics.median(v8) if v8 else "")
            else:
                cell = fmt(v, p[2])
            if any(e[0] == n and e[1] == p[0] for e in res.errors):
                cell += " (ERR)"
            row.append(cell)
        out.append("| " + " | ".join(row) + " |")
    abs_table = "\n".join(out)

    # 2. Ratios: to raw, to the peer (s3fs; rclone, cache off, over GCS),
    # and the targets of issue 5 (those against s3fs only over S3).
    peer = ctx.peer
    pl = label.get(peer, peer)
    goal = (lambda g: " (goal %s)" % g) if peer == "s3fs" else (lambda g: "")
    compute = statistics.median(res.compute) if res.compute else None
    raw_tr8 = statistics.median(res.extra["raw_trainer8"]) if res.extra.get("raw_trainer8") else None
    bound = max(compute, raw_tr8) if compute is not None and raw_tr8 is not None else None
    rhead = ["target",
             "small 1r cold ×raw 1-conn",
             "small 1r cold ×%s" % pl,
             "small 1r cold, rank order ×raw 1-conn (goal ≥ 2)",
             "small 1r cold, rank order ×%s%s" % (pl, goal("≥ 4")),
             "small 1r cold, rank order ×raw 8-conn (the server's limit)",
             "small 8r cold ×raw 8-conn (goal ≥ 0.9)",
             "small 8r cold ×%s" % pl,
             "small 1r warm ×raw 1-conn",
             "small 1r warm ×%s" % pl,
             "small 1r warm ×local warm (goal ≥ 0.7)",
             "small 8r warm ×local warm ¹",
             "large cold ×raw 1-stream (goal ≥ 1.2)",
             "large cold ×%s%s" % (pl, goal("≥ 1")),
             "trainer wall ÷ max(compute, server read) (goal ≤ 1.15)"]
    out = ["| " + " | ".join(rhead) + " |", "|" + "---|" * len(rhead)]
    for n in names:
        m = lambda ph, t=n: res.med(t, ph)  # noqa: E731
        tw = m("tr_wall")
        row = [label[n],
               ratio(m("s1_cold_shuf"), res.med("raw", "s1_cold_shuf")),
               ratio(m("s1_cold_shuf"), res.med(peer, "s1_cold_shuf")),
               ratio(m("s1_cold_rank"), res.med("raw", "s1_cold_shuf")),
               ratio(m("s1_cold_rank"), res.med(peer, "s1_cold_rank")),
               ratio(m("s1_cold_rank"), res.med("raw", "s8_cold_shuf")),
               ratio(m("s8_cold_shuf"), res.med("raw", "s8_cold_shuf")),
               ratio(m("s8_cold_shuf"), res.med(peer, "s8_cold_shuf")),
               ratio(m("s1_warm"), res.med("raw", "s1_cold_shuf")),
               ratio(m("s1_warm"), res.med(peer, "s1_warm")),
               ratio(m("s1_warm"), res.med("local", "s1_warm")),
               ratio(m("s8_warm"), res.med("local", "s8_warm")),
               ratio(m("l_cold"), res.med("raw", "l_cold")),
               ratio(m("l_cold"), res.med(peer, "l_cold")),
               ratio(tw, bound) if n != "raw" else "—"]
        out.append("| " + " | ".join(row) + " |")
    ratio_table = "\n".join(out)

    # 3. Noise: spread of the repeated cells.
    rep = [p for p in cols if p[3]]
    out = ["| target | " + " | ".join(p[1] for p in rep) + " |", "|" + "---|" * (len(rep) + 1)]
    spreads = []
    for n in names:
        row = [label[n]]
        for p in rep:
            s = res.spread(n, p[0])
            if s is not None:
                spreads.append(s)
            f = res.foreign.get((n, p[0]))
            row.append(("—" if s is None else "%.0f%%" % (100 * s)) +
                       (" (%.0f%%)" % (100 * max(f)) if f else ""))
        out.append("| " + " | ".join(row) + " |")
    noise_table = "\n".join(out)

    trainer = ("compute per pass (measured sleeps) %.2f s; server-limited read time of the same "
               "files (raw curl, 8 connections) %s s, 1 connection %s s; bound = max of the "
               "first two = %s s" % (
                   compute or 0,
                   "%.2f" % raw_tr8 if raw_tr8 else "—",
                   "%.2f" % statistics.median(res.extra["raw_trainer1"])
                   if res.extra.get("raw_trainer1") else "—",
                   "%.2f" % bound if bound else "—"))
    return abs_table, ratio_table, noise_table, spreads, trainer


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except Exception:
        return ""


def machine():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) // (1 << 20)
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "mem": "%d GiB" % mem,
        "s3fs": sh("s3fs --version 2>&1 | head -1"),
        "rclone": sh("rclone version 2>&1 | head -1"),
        "node": sh("node --version"),
        "curl": sh("curl --version | head -1 | cut -d' ' -f1-2"),
        "aws": sh("/usr/bin/aws --version 2>&1"),
        "python": platform.python_version(),
        "fuse": sh("fusermount3 --version 2>&1"),
        "squashfuse": sh("dpkg-query -W -f='${Package} ${Version}; ' squashfuse "
                         "squashfs-tools 2>/dev/null").rstrip("; "),
        "torch": sh("dpkg-query -W -f='${Package} ${Version}' python3-torch 2>/dev/null"),
    }


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return {"busy": v[0] + v[1] + v[2] + v[5] + v[6], "idle": v[3] + v[4],
            "steal": v[7] if len(v) > 7 else 0}


def stats_rows(ctx, res, targets):
    """shardfs' own counters of each pass, as table rows."""
    sstats = ""
    for n in [t.name for t in targets]:
        for ph in PHASES:
            st = res.shardfs_stats.get((n, ph[0]))
            if not st or "backend_requests_total" not in st:
                continue
            want = sum(ctx.sizes["large" if ph[0].startswith("l_") else "small"][k]
                       for k in (ctx.keys["large"] if ph[0].startswith("l_") else
                                 ctx.trainer_keys if ph[0].startswith("tr_") else
                                 ctx.keys["small"]))
            sstats += "| %s | %s | %d | %d | %.2f | %s | %s |\n" % (
                n, ph[1], st["backend_requests_total"], st.get("backend_bytes_total", 0),
                st.get("backend_bytes_total", 0) / want, st.get("cache_hits_total", "—"),
                st.get("cache_misses_total", "—"))
    return sstats


RESULTS_TMPL = """## Results (peers)

Medians of {reps} rounds for the phases without ¹, {extra} round(s) for those
with ¹. Small files: files/s (1 file = {avg:.0f} bytes on average); large:
MB/s (10^6 bytes); trainer: seconds. 1r / 8r = 1 / 8 concurrent readers.

{abs}

Ratios (of the medians above). "raw 1-conn" is one curl connection, "raw
8-conn" eight, "raw 1-stream" one curl GET after another over the large files.
The goals are issue 5's targets, reported, not asserted.

{ratio}

Trainer: rank 0 of world_size 4 ({ntr} files), one reader, {cms} ms of compute
(sleep) after each file; {trainer}.

Time to mount (median, small dataset, until a listing of the root answers):
{mounts}.

### shardfs' own counters during each pass (first round, from `.shardfs/stats`)

"bytes / data" is backend bytes over the bytes the pass read.

| target | phase | backend requests | backend bytes | bytes / data | cache hits | cache misses |
|---|---|---|---|---|---|---|
{sstats}
### Errors

{errs}
"""


def write_report(ctx, res, targets, tabs, wall, noise, path, latency_md="",
                 phases=("peers",)):
    abs_table, ratio_table, noise_table, spreads, trainer = tabs
    mc = ctx.machine
    git = sh("git -C %s rev-parse --short HEAD" % REPO)
    dirty = sh("git -C %s status --porcelain | wc -l" % REPO)
    sstats = stats_rows(ctx, res, targets)
    errs = "".join("- %s, %s: %s\n" % (t, PHASE[p][1] if p in PHASE else p, m)
                   for t, p, m in res.errors) or "none\n"
    mounts = "".join("%s %.2f s, " % (t.label, statistics.median(t.mount_times))
                     for t in targets if t.mount_times)
    avg_small = statistics.mean(ctx.sizes["small"].values())
    fall = [f for fs in res.foreign.values() for f in fs]
    results = ("## Results (peers)\n\nNot run (`BENCH_PHASES`).\n\n" if "peers" not in phases
               else RESULTS_TMPL)
    text = ("""# Benchmarks

Written by `make bench` (`tests/bench/bench.py`); do not edit by hand, rerun.
The first part of `make bench` (`tests/bench/scale.sh`, manifest scale) is in
[OPERATIONS.md](OPERATIONS.md#manifest-scale-what-a-mount-costs-before-it-serves); its GCS phase (`tests/bench/bench_gcs.py`) in
[BENCHMARKS-gcs.md](BENCHMARKS-gcs.md).

Run of {date}, shardfs commit `{git}` ({dirty} paths differed from that commit
in the working tree: the binary measured, `{exe}` built {built}, may include
uncommitted changes), {wall:.0f} s for bench.py (phases: {phases}{lats}).
{note}
Subsets for quick iterations (environment of `make bench`, see the top of
`tests/bench/bench.py` and `tests/bench/run.sh`): `BENCH_PHASES` = comma list
of scale, cache, records, nfs, peers, latency, gcs, epochs (default all);
`BENCH_LATENCIES` [0,20,50] (ms); `BENCH_SMALL_FILES` [2000];
`BENCH_SLOW_FILES` [100]; `BENCH_REPS` [1]; `BENCH_PREFAULT_GIB` [16];
`BENCH_OUT=-` to leave this file alone; `BENCH_QUICK=1` for small sizes
and no docs written. For example
`BENCH_PHASES=latency BENCH_LATENCIES=20 make bench` (about 4 minutes).

{latency}{results}## Machine and noise

- {nproc} cores, {cpu}, {mem} RAM, {os}, kernel {kernel}
- s3rver 3.7.1 on Node {node} (one process, `--openssl-legacy-provider`), on
  127.0.0.1, data dir in the temp dir (in the page cache after the upload)
- Peers and tools: {s3fs}; {rclone}; {curl}; {aws}; {fuse}; {squashfuse}; {torch};
  Python {python}
- Load average at start {la0}, at the end {la1}. Other processes (other
  people's builds and tests on this shared machine) used {foreign:.0f}% of
  its CPU during the measurements (busy time from /proc/stat minus this
  run's own processes); per pass of at least 0.5 s: median {fmed}, largest
  {fmax}. Before each pass the run waits until other processes use less
  than 15% of the machine for 0.5 s (at most 10 s per pass, 120 s per run;
  this run waited {waited:.0f} s in all). CPU steal {steal:.1f}%.
- Spread of the repeated measurements, (max - min) / median: median
  {smed}, largest {smax}. Differences smaller than that are noise. Per cell,
  with the largest share of the CPU other processes took during one of its
  passes in brackets:

{noise}

## Method

- Datasets, generated once per run: small = {nsmall} files of 80-135 KiB of
  random bytes under `train/nXXXXXXXX/` ({ncls} classes); large = {nlarge}
  files of {lmib} MiB. Uploaded to bucket `{bucket}` (prefixes `small/train/`
  and `large/`) with `/usr/bin/aws s3 cp --recursive`. Every target serves
  `small/train/` (the class directories at its root) or `large/`: s3rver
  lists no common prefix for a "directory" holding only directories, so
  s3fs and rclone would see `small/` empty.
- Readers are threads of one Python process (`bench.py read`), each opening
  a file, reading it whole with 1 MiB `readv` calls and closing it, taking
  the next path from a shared list (like a DataLoader's workers). Every pass
  checks the byte count; a short or failed read is reported as an error.
- Orders: "shuffled" is a fixed random permutation (seed 42) of the small
  keys, the same for every target; "rank order" is `shardfs plan --rank 0` of
  the same dataset with world_size 1 (what shardfs serves as
  `.shardfs/rank-0.order`), also used as the key sequence for the peers.
  The one-reader targets are taken in rank order: a trainer on shardfs
  reads its rank in that order (it is the directory order, and shuffled
  per seed and epoch by the plan), and only a known order lets anything
  run ahead of a single reader; for a random order unknown to the
  filesystem one reader cannot beat one connection. Raw curl's speed does
  not depend on the order, so its 1-connection figure of the shuffled
  pass is the reference for both. The large files are read one after
  another in rank order, for every target.
- Cold: a fresh mount (which starts with an empty kernel page cache for it),
  for shardfs and rclone full with a fresh empty cache dir. Local disk cold:
  `posix_fadvise(POSIX_FADV_DONTNEED)` on the dataset files only (the global
  drop_caches is not touched). Warm: a second pass on the same mount. Warm
  after remount: unmount, mount again with the same cache dir, read again
  (for s3fs and rclone off that is cold again; n/a for local disk).
- Raw curl: one `curl` process, SigV4 (`--aws-sigv4 aws:amz:us-east-1:s3`),
  keep-alive, output to /dev/null; `--parallel --parallel-immediate
  --parallel-max 8` for 8 connections. Its "small 1r" column is 1
  connection, "small 8r" 8 connections.
- shardfs: `shardfs mount CONF MNT -f`, `url = s3://{bucket}/small/train/` (or
  `large/`), `endpoint`, `addressing = path`, `[shard] world_size = 1` (4 for
  the trainer){cachenote}; other keys default; readers use `MNT/rank-0/KEY`.
- s3fs: `s3fs {bucket}:/small/train MNT -f -o ro,passwd_file=F,url=http://127.0.0.1:PORT,use_path_request_style,endpoint=us-east-1`, other options default.
- rclone: `rclone mount s3r:{bucket}/small/train MNT --read-only --vfs-cache-mode off|full --cache-dir DIR`,
  an s3 remote with provider Other, `force_path_style = true`; other options default.
- All traffic is loopback; the server (one Node process, about one core)
  and the FUSE daemon and the readers share the 2 cores, so a daemon that
  burns CPU slows the server too.
""").replace("{results}", results).format(
        latency=latency_md, phases=",".join(phases),
        lats=(", latencies %s ms" % ",".join(map(str, ctx.latencies))
              if "latency" in phases else ""),
        note=(os.environ.get("BENCH_NOTE", "") + "\n") if os.environ.get("BENCH_NOTE") else "",
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), git=git, dirty=dirty,
        exe=ctx.shardfs_src,
        built=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ctx.shardfs_built)),
        wall=wall, reps=ctx.reps, extra=ctx.extra_reps, avg=avg_small, abs=abs_table,
        ratio=ratio_table, ntr=len(ctx.trainer_keys), cms=ctx.compute_ms, trainer=trainer,
        mounts=mounts.rstrip(", ") or "—", sstats=sstats, errs=errs,
        nproc=mc["nproc"], cpu=mc["cpu"], mem=mc["mem"], os=mc["os"], kernel=mc["kernel"],
        node=mc["node"], s3fs=mc["s3fs"], rclone=mc["rclone"], curl=mc["curl"],
        aws=mc["aws"], fuse=mc["fuse"], python=mc["python"], squashfuse=mc["squashfuse"],
        torch=mc["torch"],
        la0=noise["la0"], la1=noise["la1"], foreign=noise["foreign"], steal=noise["steal"],
        waited=ctx.meter.waited,
        fmed="%.0f%%" % (100 * statistics.median(fall)) if fall else "—",
        fmax="%.0f%%" % (100 * max(fall)) if fall else "—",
        smed="%.0f%%" % (100 * statistics.median(spreads)) if spreads else "—",
        smax="%.0f%%" % (100 * max(spreads)) if spreads else "—",
        noise=noise_table, nsmall=len(ctx.keys["small"]),
        ncls=len({k.split("/")[0] for k in ctx.keys["small"]}),
        nlarge=len(ctx.keys["large"]), lmib=ctx.large_mib, bucket=BUCKET,
        cachenote={"dir+enabled": "; `[cache] dir = ` a fresh temp dir for cold mounts, "
                   "the same dir for a remount; \"cache off\" adds `enabled = false`",
                   "dir": "; `[cache] dir = ` a fresh temp dir for cold mounts"}.get(
                       ctx.cache_keys, "; this build has no [cache] keys"))
    if path != "-":
        with open(path, "w") as f:
            f.write(text)
        print("bench: wrote %s" % os.path.relpath(path, REPO))
    return text


# ---------------------------------------------------------------------------


def write_rclone_conf(ctx):
    ctx.rclone_conf = os.path.join(ctx.env.tmp, "rclone.conf")
    with open(ctx.rclone_conf, "w") as f:
        f.write("[s3r]\ntype = s3\nprovider = Other\naccess_key_id = S3RVER\n"
                "secret_access_key = S3RVER\nendpoint = %s\nregion = us-east-1\n"
                "force_path_style = true\n" % ctx.ep)


def probe_cache_keys(ctx):
    """Which [cache] keys this build of shardfs accepts."""
    for keys in ("dir+enabled", "dir"):
        ctx.cache_keys = keys
        conf = os.path.join(ctx.env.tmp, "probe.conf")
        with open(conf, "w") as f:
            f.write(shardfs_conf(ctx, "small", 1, os.path.join(ctx.env.tmp, "probe-cache"), False))
        cp = subprocess.run([ctx.shardfs, "plan", conf], capture_output=True, text=True)
        if cp.returncode == 0:
            return keys
        if cp.returncode != 2:
            raise SystemExit("bench: shardfs plan failed: " + cp.stderr)
    return ""


def plan_keys(ctx, dataset, world):
    conf = os.path.join(ctx.env.tmp, "plan.conf")
    with open(conf, "w") as f:
        f.write(shardfs_conf(ctx, dataset, world, None, False))
    cp = subprocess.run([ctx.shardfs, "plan", conf, "--rank", "0"], capture_output=True,
                        text=True, check=True)
    return [line for line in cp.stdout.splitlines() if line and "\t" not in line]


def main_bench():
    if os.geteuid() != 0:
        raise SystemExit("bench: run as root (FUSE mounts, apt-get)")
    ctx = Ctx()
    ctx.source_lines, ctx.object_url = s3_source_lines, s3_object_url
    ctx.curl_auth, ctx.rclone_remote, ctx.peer = S3_CURL_AUTH, "s3r", "s3fs"
    ctx.reps = env_int("BENCH_REPS", 1)
    ctx.extra_reps = min(env_int("BENCH_EXTRA_REPS", 1), ctx.reps)
    ctx.compute_ms = env_int("BENCH_COMPUTE_MS", 2)
    ctx.large_mib = env_int("BENCH_LARGE_MIB", 64)
    n_small = env_int("BENCH_SMALL_FILES", 2000)
    n_large = env_int("BENCH_LARGE_FILES", 8)
    want = os.environ.get("BENCH_TARGETS", "") or \
        "raw,local,shardfs,shardfs-nocache,s3fs,rclone-off,rclone-full"
    want = [w.strip() for w in want.split(",") if w.strip()]
    out_path = os.environ.get("BENCH_OUT") or os.path.join(REPO, "docs", "BENCHMARKS.md")
    phases = [w.strip() for w in (os.environ.get("BENCH_PHASES", "") or
                                  "peers,latency").split(",") if w.strip()]
    ctx.latencies = sorted({int(x) for x in (os.environ.get("BENCH_LATENCIES", "") or
                                             "0,20,50").split(",") if x.strip()})
    ctx.slow_files = env_int("BENCH_SLOW_FILES", 100)
    ctx.torch_world = env_int("BENCH_TORCH_WORLD", 1)
    ctx.torch_workers = env_int("BENCH_TORCH_WORKERS", 4)
    ctx.torch_batch = env_int("BENCH_TORCH_BATCH", 32)
    ctx.torch_compute = os.environ.get("BENCH_TORCH_COMPUTE", "") or "sleep"
    if ctx.torch_compute not in ("sleep", "busy"):
        raise SystemExit("bench: BENCH_TORCH_COMPUTE=%s: sleep or busy" % ctx.torch_compute)
    ctx.results_dir = os.environ.get("BENCH_RESULTS") or None
    ctx.lat_large_files = env_int("BENCH_LAT_LARGE_FILES", 4)
    lat_peers = [w.strip() for w in (os.environ.get("BENCH_LAT_PEERS", "") or
                                     "s3fs,rclone-off").split(",") if w.strip()]
    if "peers" not in phases and "latency" not in phases:
        print("bench: BENCH_PHASES names neither peers nor latency: nothing for bench.py")
        return 0

    # Nothing from the machine's AWS setup leaks in; nothing ever asks a
    # metadata service (169.254.169.254).
    for k in list(os.environ):
        if k.startswith("AWS_"):
            del os.environ[k]
    ctx.env = env = Env(keep=os.environ.get("BENCH_KEEP") == "1")
    ctx.meter = CpuMeter(env)
    run_meter = CpuMeter(env)
    os.environ.update({
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
        "AWS_SHARED_CREDENTIALS_FILE": os.path.join(env.tmp, "no-credentials"),
        "AWS_CONFIG_FILE": os.path.join(env.tmp, "aws-config"),
    })
    with open(os.environ["AWS_CONFIG_FILE"], "w") as f:
        f.write("[default]\ns3 =\n  max_concurrent_requests = 16\n")

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    t_start = time.perf_counter()
    la0 = sh("cut -d' ' -f1-3 /proc/loadavg")
    try:
        ensure_debs()
        ctx.machine = machine()
        # A private copy: others may rebuild build/shardfs during the run.
        built = ensure_shardfs()
        ctx.shardfs_src = os.path.relpath(built, REPO)
        ctx.shardfs_built = os.stat(built).st_mtime
        ctx.shardfs = os.path.join(env.tmp, "shardfs")
        shutil.copy2(built, ctx.shardfs)
        ctx.s3rver_js = js = s3rver_install(env)
        ctx.s3p, ctx.ep = s3rver_start(env, js)
        print("bench: s3rver on %s (pid %d), temp dir %s" % (
            ctx.ep, ctx.s3p.pid, env.tmp), flush=True)

        ctx.data = os.path.join(env.tmp, "data")
        t0 = time.perf_counter()
        ctx.sizes = make_datasets(ctx.data, n_small, n_large, ctx.large_mib)
        for ds in ("small", "large"):
            run(["/usr/bin/aws", "--endpoint-url", ctx.ep, "s3", "cp", "--recursive",
                 "--only-show-errors", os.path.join(ctx.data, PREFIX[ds]),
                 "s3://%s/%s/" % (BUCKET, PREFIX[ds])])
        print("bench: datasets generated and uploaded in %.0f s" % (time.perf_counter() - t0),
              flush=True)

        ctx.cache_keys = ""
        ctx.cache_keys = probe_cache_keys(ctx)
        ctx.keys = {ds: sorted(ctx.sizes[ds]) for ds in ("small", "large")}
        ctx.shuf = list(ctx.keys["small"])
        random.Random(42).shuffle(ctx.shuf)
        ctx.rank = plan_keys(ctx, "small", 1)
        ctx.trainer_keys = plan_keys(ctx, "small", 4)
        ctx.torch_keys = plan_keys(ctx, "small", ctx.torch_world)
        if sorted(ctx.rank) != ctx.keys["small"]:
            raise SystemExit("bench: shardfs plan (world_size 1) does not list every small key")
        # Large files are read one after another in rank order too (see
        # the doc's "Orders").
        ctx.keys["large"] = plan_keys(ctx, "large", 1)
        if sorted(ctx.keys["large"]) != sorted(ctx.sizes["large"]):
            raise SystemExit("bench: shardfs plan (world_size 1) does not list every large key")

        ctx.s3fs_passwd = os.path.join(env.tmp, "s3fs.passwd")
        with open(ctx.s3fs_passwd, "w") as f:
            f.write("S3RVER:S3RVER\n")
        os.chmod(ctx.s3fs_passwd, 0o600)
        write_rclone_conf(ctx)

        all_targets = {
            "raw": None, "local": Local(ctx), "shardfs": Shardfs(ctx, True),
            "shardfs-nocache": Shardfs(ctx, False), "s3fs": S3fs(ctx),
            "rclone-off": Rclone(ctx, "off"), "rclone-full": Rclone(ctx, "full")}
        if ctx.cache_keys != "dir+enabled":
            want = [w for w in want if w != "shardfs-nocache"]
        targets = []
        for w in want:
            if w not in all_targets:
                raise SystemExit("bench: unknown target %s" % w)
            t = all_targets[w]
            if t is None:
                t = Target(ctx)
                t.name, t.label, t.is_fuse = "raw", "raw curl (server limit)", False
            targets.append(t)

        res = Results()
        c0 = cpu_times()
        run_meter.start()
        for rnd in range(ctx.reps if "peers" in phases else 0):
            print("bench: round %d of %d (%.0f s so far)" % (
                rnd + 1, ctx.reps, time.perf_counter() - t_start), flush=True)
            for t in targets:
                if t.name == "raw":
                    bench_raw(ctx, res, rnd)
                else:
                    bench_target(ctx, res, t, rnd)
        lat_md, lat_rows = "", []
        if "latency" in phases:
            ctx.lat_shardfs = Shardfs(ctx, True)
            ctx.lat_squashfuse = Squashfuse(ctx)
            ctx.lat_nocache = (Shardfs(ctx, False) if ctx.cache_keys == "dir+enabled" and
                               os.environ.get("BENCH_LAT_NOCACHE", "1") != "0" else None)
            ctx.lat_peers = [S3fs(ctx), Rclone(ctx, "off")]
            ctx.lat_peers = [p for p in ctx.lat_peers if p.name in lat_peers]
            lat = latency.run(sys.modules[__name__], ctx)
            lat_md, lat_rows = latency.markdown(sys.modules[__name__], ctx, lat)
        c1 = cpu_times()

        foreign = run_meter.foreign()
        env.stop(ctx.s3p)
        wall = time.perf_counter() - t_start
        total = sum(c1[k] - c0[k] for k in ("busy", "idle", "steal"))
        noise = {"la0": la0, "la1": sh("cut -d' ' -f1-3 /proc/loadavg"),
                 "foreign": 100 * foreign,
                 "steal": 100 * (c1["steal"] - c0["steal"]) / total if total else 0}
        tabs = tables(ctx, res, targets)
        if "peers" in phases:
            print()
            print(tabs[0])
            print()
            print(tabs[1])
            print()
            print("Trainer: " + tabs[4])
            print("Spread of repeated cells:")
            print(tabs[2])
        if res.errors:
            print("\nErrors:")
            for t, p, m in res.errors:
                print("  %s, %s: %s" % (t, p, m))
        if lat_rows:
            print("\nTargets (issue 25):")
            for what, L, e, r, goal, ok, w in lat_rows:
                print("  %6s  %s\n          %-44s %5s  %-8s %s%s" % (
                    "—" if L is None else "%d ms" % L, what, e, r, goal, ok,
                    "\n          where the time goes: " + w if w else ""))
        write_report(ctx, res, targets, tabs, wall, noise, out_path, latency_md=lat_md,
                     phases=phases)
        print("bench: %.0f s" % wall)
        return 0
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    finally:
        env.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    r = sub.add_parser("read", help="(internal) one reader pass")
    r.add_argument("--list", required=True)
    r.add_argument("--readers", type=int, default=1)
    r.add_argument("--compute-ms", type=float, default=0)
    args = ap.parse_args()
    if args.cmd == "read":
        return cmd_read(args)
    return main_bench()


if __name__ == "__main__":
    sys.exit(main())
