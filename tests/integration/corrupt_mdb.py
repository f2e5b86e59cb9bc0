#!/usr/bin/env python3
"""Damages an LMDB data file (the cache's index.mdb) one way, for
test_corrupt.sh. usage: corrupt_mdb.py FILE MODE

Modes: trunc0, trunc-mid (half, on a page boundary), trunc-page (one
page), meta0 (page 0's magic), meta-both (both meta pages' headers and magic),
meta-root (the newest meta page's main root beyond the file), branch-hdr
(a branch page's header), leaf-hdr (a leaf page's header), leaf-ptrs (a
leaf page's node offsets): pages reachable from the newest meta page, garbage (random bytes, same size). Prints what
it did; exits 1 if the file has no page of the kind asked for."""
import os
import random
import struct
import sys

path, mode = sys.argv[1], sys.argv[2]
size = os.path.getsize(path)
rnd = random.Random(7)
with open(path, "r+b") as f:
    data = f.read()
    psize = struct.unpack_from("<I", data, 16 + 24)[0] if size >= 64 else 4096
    npages = size // psize

    def newest_meta():
        # mm_txnid: after the page header (16), magic, version,
        # address, mapsize (24), two MDB_db (96) and mm_last_pg (8).
        t0 = struct.unpack_from("<Q", data, 16 + 128)[0]
        t1 = struct.unpack_from("<Q", data, psize + 16 + 128)[0]
        return 0 if t0 > t1 else 1

    def reachable():
        # (kind, pgno) of every branch (1) and leaf (2) page reachable
        # from the newest meta page: the main tree and the named
        # databases its leaves point at (idx, data, meta).
        out = []
        m = newest_meta() * psize + 16 + 24 + 48
        stack = [struct.unpack_from("<Q", data, m + 40)[0]]
        main = stack[0]
        while stack:
            p = stack.pop()
            off = p * psize
            _, _, flags, lower, _ = struct.unpack_from("<QHHHH", data, off)
            out.append((flags & 3, p))
            for i in range((lower - 16) // 2):
                ptr = struct.unpack_from("<H", data, off + 16 + 2 * i)[0]
                lo, hi, nfl, ks = struct.unpack_from("<HHHH", data, off + ptr)
                if flags & 1:
                    stack.append(lo | hi << 16 | nfl << 32)
                elif nfl & 2:  # a named database's record
                    root = struct.unpack_from("<Q", data, off + ptr + 8 + ks + 40)[0]
                    if root != 2**64 - 1:
                        stack.append(root)
        return [(k, p) for k, p in out if p != main]

    def pages(kind):
        return sorted(p for k, p in reachable() if k == kind)

    def write(off, b):
        f.seek(off)
        f.write(b)

    if mode == "trunc0":
        f.truncate(0)
    elif mode == "trunc-mid":
        f.truncate(npages // 2 * psize)
    elif mode == "trunc-page":
        f.truncate(psize)
    elif mode == "meta0":
        write(16, b"\x00\x11\x22\x33")
    elif mode == "meta-both":
        write(8, b"\xff" * 16)
        write(psize + 8, b"\xff" * 16)
    elif mode == "meta-root":
        m = newest_meta()
        write(m * psize + 16 + 24 + 48 + 40, struct.pack("<Q", npages * 4))
    elif mode in ("branch-hdr", "leaf-hdr", "leaf-ptrs"):
        ps = pages(1 if mode == "branch-hdr" else 2)
        if not ps:
            print("no such page", file=sys.stderr)
            sys.exit(1)
        p = ps[len(ps) // 2]
        if mode == "leaf-ptrs":
            write(p * psize + 16, b"\xf0\xff" * 8)
        else:
            write(p * psize + 8, b"\xa5\x5a\xff\x7f\x01\x00\xee\x01")
        mode += " (page %d)" % p
    elif mode == "garbage":
        f.seek(0)
        f.write(rnd.randbytes(size))
    else:
        sys.exit("unknown mode " + mode)
print("%s: %s" % (path, mode))
