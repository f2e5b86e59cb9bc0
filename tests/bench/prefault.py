#!/usr/bin/python3
"""Pre-faults guest memory once at the start of `make bench` (issue 25).

This VM's memory is backed lazily by its host: the first touch of each page
after boot costs about 25 us (150 MB/s), later touches nothing. A benchmark
that lands data in new pages (a cache's blob files, a tmpfs file, the page
cache of a large read) would otherwise measure that first touch, not the
code. So: map BENCH_PREFAULT_GIB GiB (default 16) of anonymous memory with
MAP_POPULATE, which faults every page in (writable, so real zeroed pages,
not the shared zero page), then unmap it. The pages go back to the guest's
free lists still backed by the host, and whatever the benchmark allocates
next comes from them.

The size is capped at 3/4 of MemAvailable, so the step squeezes the page
cache but never pushes the machine into swap or the OOM killer. 0 skips it.
Prints how long it took; with BENCH_RESULTS set (run.sh's results dir) also
writes prefault.json there for the report. A failure (no memory to map) is
reported and the benchmark goes on: its figures then say "not pre-faulted".
"""

import json
import math
import mmap
import os
import sys
import time

GIB = 1 << 30


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    raw = os.environ.get("BENCH_PREFAULT_GIB", "") or "16"
    try:
        want = float(raw)
    except ValueError:
        print("prefault: BENCH_PREFAULT_GIB=%r is not a number of GiB" % raw, file=sys.stderr)
        return 2
    if not math.isfinite(want) or want < 0:
        print("prefault: BENCH_PREFAULT_GIB=%r is not a size (GiB, 0 or more)" % raw,
              file=sys.stderr)
        return 2
    avail = mem_available()
    cap = avail * 3 // 4
    size = min(int(want * GIB), cap)
    size -= size % mmap.PAGESIZE
    out = {"asked_gib": want, "mem_available_gib": avail / GIB, "gib": size / GIB,
           "seconds": None, "error": None}
    if size <= 0:
        out["error"] = "skipped (BENCH_PREFAULT_GIB=%s)" % raw if want == 0 else \
            "skipped: MemAvailable %.1f GiB" % (avail / GIB)
        print("prefault: " + out["error"], flush=True)
    else:
        capped = " (capped at 3/4 of MemAvailable %.1f GiB)" % (avail / GIB) \
            if cap < int(want * GIB) else ""
        print("prefault: mapping %.1f GiB with MAP_POPULATE%s" % (size / GIB, capped),
              flush=True)
        t0 = time.perf_counter()
        try:
            m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS |
                          mmap.MAP_POPULATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            m.close()  # munmap
            out["seconds"] = time.perf_counter() - t0
            print("prefault: %.1f GiB in %.1f s (%.0f MB/s)" % (
                size / GIB, out["seconds"], size / 1e6 / max(out["seconds"], 1e-9)), flush=True)
        except (OSError, ValueError, OverflowError) as e:
            out["error"] = "mmap of %.1f GiB failed: %s" % (size / GIB, e)
            print("prefault: %s; the benchmark goes on without it" % out["error"],
                  file=sys.stderr, flush=True)
    res = os.environ.get("BENCH_RESULTS")
    if res:
        with open(os.path.join(res, "prefault.json"), "w") as f:
            json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
