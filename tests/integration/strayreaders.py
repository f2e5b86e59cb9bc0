#!/usr/bin/python3
"""Readers for the stray-reply checks (test_faults.sh, test_gcs.sh): a
fault proxy answers some requests twice, and the second, well-formed
reply (same headers, a body of zeros) stays on the kept-alive connection.

    strayreaders.py MOUNTFILE SRCFILE READERS IO SETTLE_URL

READERS threads read the file in IO-byte reads with O_DIRECT (every read
reaches the daemon), READERS passes, each range twice: between the two a
reader waits until the proxy has written every stray reply it had begun
(SETTLE_URL answers {"begun": B, "written": W}), so when the second read
goes out, the stray reply of the first is on its connection, whatever the
machine's load. In a pass the readers read disjoint ranges (reader r the
ranges i with (i + pass) % READERS == r; passes start together): a stray
sent late (the proxy's 5 ms mode) may reach a connection another reader
has just sent its request on, and no client can tell that stray, naming
the range asked for, from the answer; naming another range, it must be
refused. Every byte is compared with SRCFILE. Prints "reads N wrong W
errors E" and exits 0 only when W and E are 0.
"""
import json
import mmap
import os
import sys
import threading
import time
import urllib.request


def settle(url):
    """Waits (at most 30 s) until every stray begun so far is written."""
    begun = None
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30:
        with urllib.request.urlopen(url, timeout=10) as r:
            st = json.load(r)
        if begun is None:
            begun = st["begun"]
        if st["written"] >= begun:
            return
        time.sleep(0.001)
    raise OSError(0, "the proxy did not write its stray replies in 30 s")


def main():
    path, src, readers, io, url = sys.argv[1:6]
    readers, io = int(readers), int(io)
    want = open(src, "rb").read()
    lock = threading.Lock()
    tot = {"reads": 0, "wrong": 0, "errors": 0}
    msgs = []

    ranges = (len(want) + io - 1) // io
    passes = threading.Barrier(readers, timeout=300)

    def reader(r):
        reads = wrong = 0
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            buf = mmap.mmap(-1, io)  # page-aligned, as O_DIRECT wants
            for p in range(readers):
                passes.wait()
                for k in range(ranges):
                    if (k + p) % readers != r:
                        continue
                    off = k * io
                    n_want = min(io, len(want) - off)
                    for i in range(2):
                        if i:
                            settle(url)
                        n = os.preadv(fd, [buf], off)
                        reads += 1
                        if (n != n_want or
                                buf[:n_want] != want[off:off + n_want]):
                            wrong += 1
            os.close(fd)
        except Exception as e:  # any failure ends every reader's wait
            passes.abort()
            with lock:
                tot["errors"] += 1
                msgs.append("reader %d: %s" % (r, e))
        with lock:
            tot["reads"] += reads
            tot["wrong"] += wrong

    ts = [threading.Thread(target=reader, args=(r,)) for r in range(readers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for m in msgs[:5]:
        print(m, file=sys.stderr)
    # Every range read twice in every pass, or it is an error.
    if tot["reads"] != 2 * ranges * readers and tot["errors"] == 0:
        print("reads %d, want %d" % (tot["reads"], 2 * ranges * readers),
              file=sys.stderr)
        tot["errors"] = 1
    print("reads %d wrong %d errors %d" % (tot["reads"], tot["wrong"],
                                          tot["errors"]))
    sys.exit(0 if tot["wrong"] == 0 and tot["errors"] == 0 else 1)


if __name__ == "__main__":
    main()
