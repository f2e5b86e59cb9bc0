#!/usr/bin/env python3
"""Concurrent readers for the memory-pressure suite (test_memory.sh).

Reader r reads the whole of file r % F (of the F files given), starting
at chunk (r // F) of it and wrapping around, so readers of one file want
different chunks at once. Each read is --io bytes with O_DIRECT where the
mount takes it (every read then reaches the daemon, not the page cache),
and every byte is compared with the source file.

Prints one line: "readers R done D reads N bytes B wrong W errors E
secs S" and exits 0 only if every reader finished within --timeout with
every byte right and no error. A reader that hangs is a failure: the
process exits at the timeout whatever its threads are doing.
"""
import argparse
import mmap
import os
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mount", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--prefix", default="rank-0",
                    help="directory of the files in the mount")
    ap.add_argument("--readers", type=int, required=True)
    ap.add_argument("--chunk", type=int, required=True)
    ap.add_argument("--io", type=int, default=1 << 20)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()

    lock = threading.Lock()
    tot = {"done": 0, "reads": 0, "bytes": 0, "wrong": 0, "errors": 0}
    msgs = []

    def reader(r):
        name = a.files[r % len(a.files)]
        path = os.path.join(a.mount, a.prefix, name)
        src = os.path.join(a.src, name)
        reads = nbytes = wrong = 0
        try:
            size = os.path.getsize(src)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            except OSError:
                fd = os.open(path, os.O_RDONLY)
            sfd = os.open(src, os.O_RDONLY)
            buf = mmap.mmap(-1, a.io)  # page-aligned, as O_DIRECT wants
            nchunks = max(1, (size + a.chunk - 1) // a.chunk)
            start = (r // len(a.files)) % nchunks * a.chunk
            offs = list(range(start, size, a.io)) + list(range(0, start, a.io))
            for off in offs:
                want = min(a.io, size - off, start - off if off < start else a.io)
                n = os.preadv(fd, [buf], off)
                reads += 1
                if n < want:
                    raise OSError(0, "short read %d of %d at %d" % (n, want, off))
                if buf[:want] != os.pread(sfd, want, off):
                    wrong += 1
                nbytes += want
            os.close(fd)
            os.close(sfd)
            with lock:
                tot["done"] += 1
        except OSError as e:
            with lock:
                tot["errors"] += 1
                msgs.append("reader %d (%s): %s" % (r, name, e))
        with lock:
            tot["reads"] += reads
            tot["bytes"] += nbytes
            tot["wrong"] += wrong

    t0 = time.monotonic()
    threads = [threading.Thread(target=reader, args=(r,), daemon=True)
               for r in range(a.readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, a.timeout - (time.monotonic() - t0)))
    secs = time.monotonic() - t0
    with lock:
        line = "readers %d done %d reads %d bytes %d wrong %d errors %d secs %.1f" % (
            a.readers, tot["done"], tot["reads"], tot["bytes"], tot["wrong"],
            tot["errors"], secs)
        ok = tot["done"] == a.readers and tot["wrong"] == 0 and tot["errors"] == 0
        for m in msgs[:5]:
            print(m, file=sys.stderr)
    print(line, flush=True)
    sys.stderr.flush()
    # Threads stuck in a read cannot be joined: leave without them.
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
