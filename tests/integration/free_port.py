#!/usr/bin/python3
"""Prints a free TCP port on 127.0.0.1 for a test server to listen on.

    free_port.py

The kernel picks it (bind to port 0), and it is free when printed; the
server binds it a moment later. Suites that run side by side (run.sh)
could otherwise be handed the same port in that moment, or one suite
could find its own port taken by another's server while it restarts a
server on it. So when SHARDFS_PORTS_FILE names a file (run.sh sets it
for a run), a port listed there is never printed, and the one printed is
added to it, under a lock. Without it, just a free port. Stdlib only.
"""
import fcntl
import os
import socket
import sys


def kernel_port():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def main():
    path = os.environ.get("SHARDFS_PORTS_FILE")
    if not path:
        print(kernel_port())
        return 0
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        used = set(f.read().split())
        for _ in range(1000):
            port = str(kernel_port())
            if port not in used:
                f.write(port + "\n")
                f.flush()
                print(port)
                return 0
    print("free_port.py: no port that %s does not list after 1000 tries"
          % path, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
