"""shardfs.transform over real pipes: a transform script run as a real
process in both modes, spoken to with the frames of transform/protocol.h
as the daemon speaks them (written here from that header)."""

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PYDIR = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, %r)
    from shardfs.transform import main

    def fn(data):
        if data == b"boom":
            raise ValueError("cannot transform boom")
        if data == b"str":
            return "not bytes"
        print("a print goes to stderr, not into the output")
        return data.upper() + b"!"

    main(fn)
    """
) % str(PYDIR)


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "t.py"
    p.write_text(SCRIPT)
    return p


def frame(data):
    return struct.pack("<Q", len(data)) + data


def read_replies(out):
    replies = []
    while out:
        status, n = struct.unpack("<BQ", out[:9])
        replies.append((status, out[9 : 9 + n]))
        out = out[9 + n :]
    return replies


def run(script, mode, stdin, args=()):
    env = dict(os.environ)
    env.pop("SHARDFS_TRANSFORM_MODE", None)
    if mode is not None:
        env["SHARDFS_TRANSFORM_MODE"] = mode
    return subprocess.run(
        [sys.executable, str(script), *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=60,
    )


def test_worker_frames(script):
    reqs = [b"abc", b"boom", b"", b"x" * 200000, b"str", b"last"]
    r = run(script, "worker", b"".join(frame(d) for d in reqs))
    assert r.returncode == 0, r.stderr
    replies = read_replies(r.stdout)
    assert [s for s, _ in replies] == [0, 1, 0, 0, 1, 0]
    assert replies[0][1] == b"ABC!"
    assert replies[1][1] == b"ValueError: cannot transform boom"
    assert replies[2][1] == b"!"
    assert replies[3][1] == b"X" * 200000 + b"!"
    assert b"not bytes" in replies[4][1]
    assert replies[5][1] == b"LAST!"
    # print() inside the function went to stderr.
    assert b"a print goes to stderr" in r.stderr


def test_worker_by_argument(script):
    r = run(script, None, frame(b"q"), args=["--worker"])
    assert r.returncode == 0, r.stderr
    assert read_replies(r.stdout) == [(0, b"Q!")]


def test_worker_cut_request(script):
    # A request cut short is an error exit, never a reply.
    r = run(script, "worker", struct.pack("<Q", 10) + b"abc")
    assert r.returncode != 0
    assert r.stdout == b""
    assert b"EOFError" in r.stderr


def test_process_mode(script):
    r = run(script, "process", b"hello")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"HELLO!"
    # The default mode is process.
    r = run(script, None, b"hi")
    assert r.stdout == b"HI!"


def test_process_mode_exception(script):
    r = run(script, "process", b"boom")
    assert r.returncode == 1
    assert r.stdout == b""
    assert b"cannot transform boom" in r.stderr


def test_unknown_mode(script):
    r = run(script, "sideways", b"x")
    assert r.returncode == 2
    assert b"unknown SHARDFS_TRANSFORM_MODE 'sideways'" in r.stderr


def test_serve_in_process():
    import io

    from shardfs.transform import serve

    inp = io.BytesIO(frame(b"ab") + frame(b"cd"))
    out = io.BytesIO()
    assert serve(lambda b: b[::-1], inp, out) == 2
    assert read_replies(out.getvalue()) == [(0, b"ba"), (0, b"dc")]
