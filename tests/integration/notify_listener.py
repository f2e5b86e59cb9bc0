#!/usr/bin/env python3
"""A stand-in for systemd's notification socket (sd_notify(3)).

Usage: notify_listener.py SOCKET MOUNTPOINT LOG

Binds an AF_UNIX datagram socket at SOCKET and appends every datagram to
LOG, one line per message ("MSG " + its newline-separated assignments
joined by "|"). When a message holds READY=1 it also lists MOUNTPOINT at
that moment, as a service that was ordered after this one would, and
appends "CHECK READY serving=1 entries=..." if the mount answered with
rank directories, else "CHECK READY serving=0 ...". Runs until killed.
"""
import os
import socket
import subprocess
import sys


def main():
    path, mnt, log = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    with open(log, "a", buffering=1) as out:
        while True:
            data = s.recv(65536).decode("utf-8", "replace")
            fields = [f for f in data.split("\n") if f]
            out.write("MSG " + "|".join(fields) + "\n")
            if "READY=1" in fields:
                # Bounded: a mount that does not answer is a failure.
                try:
                    r = subprocess.run(["ls", "-A", mnt], capture_output=True,
                                       text=True, timeout=20)
                    entries = r.stdout.split()
                except subprocess.TimeoutExpired:
                    entries = []
                serving = any(e.startswith("rank-") for e in entries)
                out.write("CHECK READY serving=%d entries=%s\n"
                          % (serving, ",".join(entries)))


if __name__ == "__main__":
    main()
