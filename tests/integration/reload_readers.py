#!/usr/bin/env python3
"""Busy readers for test_reload.sh: N processes read a shardfs mount and
check every byte against the source directory while the mount reloads.

  reload_readers.py MOUNT SRC N STOPFILE OUT.json

Each reader loops until STOPFILE exists:
  - "walkers" (most) list the rank directories afresh, open files and read
    them whole in 4 KiB pieces, comparing the SHA-256 with the source file
    (rank-R/<path> is SRC/<path>);
  - "holders" (every 4th) open up to 24 files once, before the first
    reload, and keep re-reading them through the same descriptors for the
    whole run (dropping the page cache each pass, so the reads reach the
    daemon): files whose rank disappears in a reload must stay readable.
An open that fails with ENOENT is expected only when the tree changed since
the file was listed: the rank directory's inode number carries the mount's
generation in its high 32 bits, so the reader compares it with the one it
listed under. Anything else is an error. Prints "ready" once every holder
has its files open, then writes OUT.json with the totals when stopped.
"""
import errno
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time


def src_digest(cache, src, rel):
    d = cache.get(rel)
    if d is None:
        with open(os.path.join(src, rel), "rb") as f:
            d = hashlib.sha256(f.read()).hexdigest()
        cache[rel] = d
    return d


def rank_dirs(mnt):
    out = []
    for name in sorted(os.listdir(mnt)):
        if name.startswith("rank-"):
            try:
                out.append((name, os.stat(os.path.join(mnt, name)).st_ino))
            except FileNotFoundError:
                pass  # gone between listdir and stat: a reload
    return out


def list_files(mnt, rank):
    files = []
    for dirpath, _, names in os.walk(os.path.join(mnt, rank)):
        for n in names:
            p = os.path.join(dirpath, n)
            files.append(os.path.relpath(p, os.path.join(mnt, rank)))
    return files


def read_fd(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    h = hashlib.sha256()
    n = 0
    while True:
        b = os.read(fd, 4096)
        if not b:
            break
        h.update(b)
        n += len(b)
    return h.hexdigest(), n


def reader(idx, mnt, src, stopfile, q, ready):
    st = {"opens": 0, "reads_bytes": 0, "files": 0, "vanished": 0,
          "errors": [], "wrong": [], "held": 0, "held_passes": 0}
    cache = {}
    holder = idx % 4 == 3
    held = []
    if holder:
        for rank, ino in rank_dirs(mnt):
            for rel in list_files(mnt, rank)[:12]:
                try:
                    fd = os.open(os.path.join(mnt, rank, rel), os.O_RDONLY)
                except OSError as e:
                    st["errors"].append("hold open %s/%s: %s" % (rank, rel, e))
                    continue
                held.append((fd, rank, rel))
        st["held"] = len(held)
    ready.set()
    k = 0
    while not os.path.exists(stopfile):
        k += 1
        if holder:
            for fd, rank, rel in held:
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    d, n = read_fd(fd)
                except OSError as e:
                    st["errors"].append("held read %s/%s: %s" % (rank, rel, e))
                    continue
                st["reads_bytes"] += n
                if d != src_digest(cache, src, rel):
                    st["wrong"].append("held %s/%s" % (rank, rel))
            st["held_passes"] += 1
            time.sleep(0.01)
            continue
        try:
            ranks = rank_dirs(mnt)
        except OSError as e:
            st["errors"].append("list root: %s" % e)
            time.sleep(0.05)
            continue
        if not ranks:
            st["errors"].append("no rank directories")
            time.sleep(0.05)
            continue
        rank, ino = ranks[(idx + k) % len(ranks)]
        try:
            files = list_files(mnt, rank)
        except OSError as e:
            st["errors"].append("walk %s: %s" % (rank, e))
            continue
        # A few files per listing, starting at a different place each time.
        for j in range(8):
            if not files:
                break
            rel = files[(k * 7 + idx * 13 + j) % len(files)]
            path = os.path.join(mnt, rank, rel)
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                try:
                    now = os.stat(os.path.join(mnt, rank)).st_ino
                except FileNotFoundError:
                    now = None
                if now != ino:
                    st["vanished"] += 1  # listed in an older tree
                else:
                    st["errors"].append("open %s/%s: ENOENT in the same "
                                        "tree" % (rank, rel))
                continue
            except OSError as e:
                st["errors"].append("open %s/%s: %s" % (rank, rel, e))
                continue
            st["opens"] += 1
            try:
                d, n = read_fd(fd)
                st["reads_bytes"] += n
                st["files"] += 1
                if d != src_digest(cache, src, rel):
                    st["wrong"].append("%s/%s" % (rank, rel))
            except OSError as e:
                st["errors"].append("read %s/%s: %s" % (rank, rel, e))
            finally:
                os.close(fd)
    for fd, _, _ in held:
        os.close(fd)
    q.put(st)


def main():
    mnt, src, n, stopfile, out = sys.argv[1:6]
    n = int(n)
    q = mp.Queue()
    procs, events = [], []
    for i in range(n):
        ev = mp.Event()
        p = mp.Process(target=reader, args=(i, mnt, src, stopfile, q, ev))
        p.start()
        procs.append(p)
        events.append(ev)
    for ev in events:
        ev.wait(120)
    print("ready", flush=True)
    results = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    tot = {"readers": n, "opens": 0, "files": 0, "reads_bytes": 0,
           "vanished": 0, "held": 0, "held_passes": 0, "errors": [],
           "wrong": []}
    for r in results:
        for k in ("opens", "files", "reads_bytes", "vanished", "held",
                  "held_passes"):
            tot[k] += r[k]
        tot["errors"] += r["errors"]
        tot["wrong"] += r["wrong"]
    with open(out, "w") as f:
        json.dump(tot, f, indent=1)


if __name__ == "__main__":
    main()
