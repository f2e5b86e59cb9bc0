"""The transform side of shardfs' transforms (issue 27), for Python.

A transform is a command that shardfs runs on one object's bytes and whose
output it caches node-wide. Write the transform as a function from bytes to
bytes and end the script with::

    from shardfs.transform import main
    main(my_function)

main() runs in either of shardfs' two modes, as the daemon says in the
environment variable SHARDFS_TRANSFORM_MODE (or the first argument
``--worker`` / ``--process`` says):

- ``process`` (the default): read all of stdin, call the function once,
  write the result to stdout, exit 0. An exception exits 1 with its
  traceback on stderr (the daemon logs the tail).
- ``worker``: serve(fn), a long-lived loop over the framed protocol of
  transform/protocol.h: a request is an 8-byte little-endian length and
  that many bytes; a reply is one status byte (0 ok, 1 error), an 8-byte
  little-endian length and that many bytes (the output, or the error's
  message). An exception in the function becomes an error reply with its
  message, and the worker goes on with the next object. End of file on
  stdin ends the loop.

Only the result goes to stdout: print() inside the function would corrupt
the output, so sys.stdout is pointed at stderr while the function runs.
"""

import os
import struct
import sys

MODE_ENV = "SHARDFS_TRANSFORM_MODE"
STATUS_OK = 0
STATUS_ERROR = 1
ERROR_MAX = 65536  # transform/protocol.h, TRANSFORM_PROTO_ERROR_MAX

__all__ = ["serve", "main", "run_once", "MODE_ENV"]


def _read_exact(f, n):
    """n bytes from f, or None at a clean end of file before the first."""
    parts = []
    got = 0
    while got < n:
        b = f.read(n - got)
        if not b:
            if got == 0:
                return None
            raise EOFError(f"end of input after {got} of {n} bytes")
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _reply(out, status, payload):
    out.write(struct.pack("<BQ", status, len(payload)))
    out.write(payload)
    out.flush()


def serve(fn, stdin=None, stdout=None):
    """Answers framed requests from stdin with fn(bytes) -> bytes until end
    of file. Returns the number of requests served."""
    inp = stdin if stdin is not None else sys.stdin.buffer
    out = stdout if stdout is not None else sys.stdout.buffer
    served = 0
    while True:
        hdr = _read_exact(inp, 8)
        if hdr is None:
            return served
        (length,) = struct.unpack("<Q", hdr)
        data = _read_exact(inp, length) if length else b""
        if data is None:
            raise EOFError("end of input inside a request")
        saved = sys.stdout
        sys.stdout = sys.stderr
        try:
            result = fn(data)
            if not isinstance(result, (bytes, bytearray, memoryview)):
                raise TypeError(
                    f"the transform returned {type(result).__name__}, not bytes"
                )
            status, payload = STATUS_OK, bytes(result)
        except Exception as e:  # noqa: BLE001: any failure is this object's
            msg = f"{type(e).__name__}: {e}".encode("utf-8", "replace")
            status, payload = STATUS_ERROR, msg[:ERROR_MAX]
        finally:
            sys.stdout = saved
        _reply(out, status, payload)
        served += 1


def run_once(fn, stdin=None, stdout=None):
    """Process mode: all of stdin through fn to stdout."""
    inp = stdin if stdin is not None else sys.stdin.buffer
    out = stdout if stdout is not None else sys.stdout.buffer
    data = inp.read()
    saved = sys.stdout
    sys.stdout = sys.stderr
    try:
        result = fn(data)
    finally:
        sys.stdout = saved
    if not isinstance(result, (bytes, bytearray, memoryview)):
        raise TypeError(f"the transform returned {type(result).__name__}, not bytes")
    out.write(result)
    out.flush()


def main(fn, argv=None):
    """Runs fn in the mode shardfs asked for (module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    mode = os.environ.get(MODE_ENV, "process")
    if "--worker" in args:
        mode = "worker"
    elif "--process" in args:
        mode = "process"
    if mode == "worker":
        serve(fn)
    elif mode == "process":
        run_once(fn)
    else:
        sys.stderr.write(f"shardfs.transform: unknown {MODE_ENV} '{mode}'\n")
        sys.exit(2)
