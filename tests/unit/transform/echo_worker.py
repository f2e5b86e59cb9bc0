#!/usr/bin/python3
"""A trivial transform (the output is the input) through
shardfs.transform.main(), for bench_transform's per-object overhead; the
object "alloc" allocates 1 GiB instead (check_transform's memory case:
serve() turns the MemoryError into an error reply)."""
import os
import sys

sys.path.insert(
    0,
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"),
)
from shardfs.transform import main  # noqa: E402

if __name__ == "__main__":
    main(lambda b: bytes(bytearray(1 << 30)) if b == b"alloc" else b)
