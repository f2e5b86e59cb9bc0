#!/usr/bin/python3
"""Times one read() per file, for the read-bound checks (test_faults.sh,
test_gcs.sh, test_nfs.sh).

    timedread.py FILE...

Opens each FILE and makes one os.read() of 64 KiB at offset 0 (through
the page cache, so the kernel's read-ahead and its re-read of the first
page after a failed read-ahead are part of it). Prints one line per file:
"eio MS", "ok MS" or "errno N MS", MS the read()'s own time in ms.
"""
import errno
import os
import sys
import time


def main():
    for path in sys.argv[1:]:
        fd = os.open(path, os.O_RDONLY)
        t0 = time.monotonic()
        try:
            os.read(fd, 64 << 10)
            what = "ok"
        except OSError as e:
            what = "eio" if e.errno == errno.EIO else "errno %d" % e.errno
        ms = (time.monotonic() - t0) * 1000
        os.close(fd)
        print("%s %d" % (what, ms), flush=True)


if __name__ == "__main__":
    main()
