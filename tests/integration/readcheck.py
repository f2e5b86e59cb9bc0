#!/usr/bin/python3
"""Reads every file of a source tree back through a mount with N threads
and compares every byte, for the fault suites.

    readcheck.py MOUNT_DIR SOURCE_DIR [THREADS] [ROUNDS]

Each file of SOURCE_DIR is read at the same relative path under MOUNT_DIR
in 1 MiB reads, ROUNDS times over (each round in a new order). A read
either returns the file's exact bytes or fails; anything else (fewer or
other bytes, a size that changed) is wrong. After the reads, every
file's st_size must still be the source's. Prints one JSON object:
{"reads": N, "ok": N, "eio": [path...], "errors": [...], "wrong": [...]}
"""
import errno
import json
import os
import queue
import random
import sys
import threading


def main():
    mnt, src = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    files = []
    for d, _, names in os.walk(src):
        for n in names:
            files.append(os.path.relpath(os.path.join(d, n), src))
    files.sort()
    expect = {}
    for rel in files:
        with open(os.path.join(src, rel), "rb") as f:
            expect[rel] = f.read()
    work = queue.Queue()
    rnd = random.Random(7)
    for _ in range(rounds):
        order = files[:]
        rnd.shuffle(order)
        for rel in order:
            work.put(rel)
    lock = threading.Lock()
    res = {"reads": 0, "ok": 0, "eio": [], "errors": [], "wrong": []}

    def reader():
        while True:
            try:
                rel = work.get_nowait()
            except queue.Empty:
                return
            got = bytearray()
            err = None
            try:
                fd = os.open(os.path.join(mnt, rel), os.O_RDONLY)
                try:
                    while True:
                        b = os.read(fd, 1 << 20)
                        if not b:
                            break
                        got += b
                finally:
                    os.close(fd)
            except OSError as e:
                err = e
            with lock:
                res["reads"] += 1
                if err is not None and err.errno == errno.EIO:
                    res["eio"].append(rel)
                elif err is not None:
                    res["errors"].append("%s: %s" % (rel, err))
                elif bytes(got) != expect[rel]:
                    want = expect[rel]
                    i = next((k for k in range(min(len(got), len(want)))
                              if got[k] != want[k]), min(len(got), len(want)))
                    res["wrong"].append("%s: got %d bytes, want %d, first "
                                        "difference at %d" % (
                                            rel, len(got), len(want), i))
                else:
                    res["ok"] += 1

    ts = [threading.Thread(target=reader) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for rel in files:
        try:
            size = os.stat(os.path.join(mnt, rel)).st_size
        except OSError as e:
            res["errors"].append("stat %s: %s" % (rel, e))
            continue
        if size != len(expect[rel]):
            res["wrong"].append("%s: st_size %d after the reads, want %d" % (
                rel, size, len(expect[rel])))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
