#!/usr/bin/python3
"""Reads files through a mount in fixed-size reads and compares every byte
with the source, for test_integrity.sh.

    pagereads.py [--io N] [--readers R] [--direct] MOUNT_DIR SOURCE_DIR NAME...

Each NAME (a path relative to both directories) is read by R threads at
once, each from its start to its end in reads of N bytes (default 4096).
With --direct the file is opened O_DIRECT, so every read reaches the
daemon as a request of N bytes, as the kernel's own 4 KiB re-reads after a
failed read do. A read returns bytes equal to the source's at its offset,
or fails; a reader that saw other bytes is "wrong" (whatever else it
saw), one that saw no wrong byte but an EIO is "eio". Prints one JSON
object: {"reads": N, "ok": [name...], "eio": [name...], "wrong":
["name: ..."...], "errors": ["name: ..."...]}, one entry per reader.
"""
import argparse
import errno
import json
import mmap
import os
import threading


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--io", type=int, default=4096)
    ap.add_argument("--readers", type=int, default=1)
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("mount")
    ap.add_argument("src")
    ap.add_argument("names", nargs="+")
    a = ap.parse_args()
    lock = threading.Lock()
    res = {"reads": 0, "ok": [], "eio": [], "wrong": [], "errors": []}

    def reader(name):
        with open(os.path.join(a.src, name), "rb") as f:
            want = f.read()
        reads, wrong, eio, other = 0, None, False, None
        buf = mmap.mmap(-1, a.io)  # page-aligned, as O_DIRECT wants
        try:
            fd = os.open(os.path.join(a.mount, name),
                         os.O_RDONLY | (os.O_DIRECT if a.direct else 0))
        except OSError as e:
            with lock:
                res["errors"].append("%s: open: %s" % (name, e))
            return
        try:
            for off in range(0, max(len(want), 1), a.io):
                reads += 1
                try:
                    n = os.preadv(fd, [buf], off)
                except OSError as e:
                    if e.errno == errno.EIO:
                        eio = True
                    else:
                        other = "%s: at %d: %s" % (name, off, e)
                    continue
                exp = want[off:off + a.io]
                if n != len(exp) or buf[:n] != exp:
                    i = next((k for k in range(min(n, len(exp)))
                              if buf[k] != exp[k]), min(n, len(exp)))
                    wrong = wrong or "%s: read at %d gave %d bytes, want %d, " \
                        "first difference at %d" % (name, off, n, len(exp),
                                                    off + i)
        finally:
            os.close(fd)
        with lock:
            res["reads"] += reads
            if wrong:
                res["wrong"].append(wrong)
            elif other:
                res["errors"].append(other)
            elif eio:
                res["eio"].append(name)
            else:
                res["ok"].append(name)

    ts = [threading.Thread(target=reader, args=(n,))
          for n in a.names for _ in range(a.readers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
