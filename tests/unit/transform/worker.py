#!/usr/bin/python3
"""check_transform's worker-protocol probe (transform/protocol.h), its own
loop so that it can break the protocol on purpose. The reply to an object
is the object reversed, except for these objects:
  die   exits 5 without replying (dies mid-object)
  quit  replies, then exits 0 (dies between objects)
  bad   replies with status 7 (a malformed frame)
  big   announces a reply of 2^40 bytes
  hang  never replies
  oops  replies status 1 with a message
  alloc allocates 1 GiB (dies of MemoryError under a smaller limit)
"""
import os
import struct
import sys
import time

inp = sys.stdin.buffer
out = sys.stdout.buffer


def read_exact(n):
    b = b""
    while len(b) < n:
        c = inp.read(n - len(b))
        if not c:
            sys.exit(0)
        b += c
    return b


sys.stderr.write("worker %d ready\n" % os.getpid())
sys.stderr.flush()
while True:
    (n,) = struct.unpack("<Q", read_exact(8))
    data = read_exact(n) if n else b""
    if data == b"die":
        sys.stderr.write("dying mid-object\n")
        sys.stderr.flush()
        os._exit(5)
    if data == b"alloc":
        big = bytearray(1 << 30)
    if data == b"bad":
        out.write(struct.pack("<BQ", 7, 3) + b"xyz")
    elif data == b"big":
        out.write(struct.pack("<BQ", 0, 1 << 40))
    elif data == b"hang":
        time.sleep(600)
    elif data == b"oops":
        msg = b"cannot handle oops"
        out.write(struct.pack("<BQ", 1, len(msg)) + msg)
    else:
        r = data[::-1]
        out.write(struct.pack("<BQ", 0, len(r)) + r)
    out.flush()
    if data == b"quit":
        os._exit(0)
