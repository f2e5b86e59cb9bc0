"""Fixtures: real shardfs mounts of generated datasets on real files.

SHARDFS names the binary (default: build/shardfs of this repository).
Each mount runs in the foreground as this process's child, so it is
stopped by its PID; every mount is unmounted (lazily if it must) and its
daemon stopped when the session ends, also after a failure. Needs FUSE
(/dev/fuse, fusermount3), as the integration suites do.
"""

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARDFS = os.environ.get("SHARDFS") or str(REPO / "build" / "shardfs")
INTEGRATION = REPO / "tests" / "integration"

# The generator and independent readers of the record-view suites
# (tests/integration/records.py): written from the published framings.
sys.path.insert(0, str(INTEGRATION))
import records as ref_records  # noqa: E402

# What the test modules import from here.
__all__ = ["REPO", "SHARDFS", "ref_records", "make_files", "file_conf", "Mounts"]

# Keys that exercise the order file's escapes: '%', TAB, LF, CR, bytes
# below 0x20, and bytes that are not UTF-8 (which urllib's unquote would
# change), beside plain ones.
ODD_NAMES = [b"odd/100%.bin", b"odd/tab\there", b"odd/new\nline", b"odd/cr\rx",
             b"odd/ctl\x01\x1f", b"odd/latin1-\xe9\xff", b"odd/utf8-\xc3\xa9",
             b"odd/%41 not an escape", b"odd/sp ace#;", b"odd/\xe2\x98\x83"]


def make_files(root, n, seed=5):
    """n plain files train/cCC/NNNNNN.bin of 0..3000 bytes plus ODD_NAMES;
    returns {key bytes: content}."""
    rnd = random.Random(seed)
    out = {}
    for i in range(n):
        out[b"train/c%02d/%06d.bin" % (i % 5, i)] = rnd.randbytes(rnd.randint(0, 3000))
    for k in ODD_NAMES:
        out[k] = rnd.randbytes(rnd.randint(1, 500))
    rootb = os.fsencode(root)
    for k, v in out.items():
        p = os.path.join(rootb, k)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(v)
    return out


class Mount:
    def __init__(self, path, conf, proc, log):
        self.path, self.conf, self.proc, self.log = path, conf, proc, log

    def __fspath__(self):
        return self.path

    def __str__(self):
        return self.path


def _mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


class Mounts:
    """Starts mounts; stops them all at the end."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.live = []
        self.n = 0

    def mount(self, sections, name=None):
        """Mounts a config of {section: {key: value}}; returns a Mount."""
        self.n += 1
        name = name or "m%d" % self.n
        d = self.tmp / name
        d.mkdir()
        conf = d / "c.conf"
        with open(conf, "w") as f:
            for sec, kv in sections.items():
                f.write("[%s]\n" % sec)
                for k, v in kv.items():
                    f.write("%s = %s\n" % (k, v))
        mnt = d / "mnt"
        mnt.mkdir()
        log = open(d / "log", "wb")
        proc = subprocess.Popen([SHARDFS, "mount", str(conf), str(mnt), "-f"],
                                stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        m = Mount(str(mnt), str(conf), proc, d / "log")
        self.live.append(m)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("shardfs exited %d before serving:\n%s"
                                   % (proc.returncode, m.log.read_text(errors="replace")))
            if _mounted(m.path) and b": serving " in m.log.read_bytes():
                return m
            time.sleep(0.05)
        raise RuntimeError("shardfs did not serve in 20 s:\n%s"
                           % m.log.read_text(errors="replace"))

    def unmount(self, m):
        """Unmounts m; raises if the daemon does not exit 0 (a sanitizer's
        report under make SAN=1 makes it exit non-zero)."""
        if m not in self.live:
            return
        self.live.remove(m)
        if _mounted(m.path):
            if subprocess.run(["fusermount3", "-u", m.path]).returncode != 0:
                subprocess.run(["fusermount3", "-u", "-z", m.path])
        try:
            rc = m.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            m.proc.kill()
            m.proc.wait(timeout=20)
            raise RuntimeError("%s: the daemon did not exit within 20 s of the unmount"
                               % m.path) from None
        if rc != 0:
            tail = m.log.read_text(errors="replace").splitlines()[-30:]
            raise RuntimeError("%s: the daemon exited %d; the end of its log:\n%s"
                               % (m.path, rc, "\n".join(tail)))

    def close(self):
        errors = []
        for m in list(self.live):
            try:
                self.unmount(m)
            except RuntimeError as e:
                errors.append(str(e))
        if errors:
            raise RuntimeError("\n".join(errors))


@pytest.fixture(scope="session")
def mounts(tmp_path_factory):
    if not os.access(SHARDFS, os.X_OK):
        pytest.fail("SHARDFS=%s is not an executable: build it with make" % SHARDFS)
    ms = Mounts(tmp_path_factory.mktemp("mounts"))
    yield ms
    ms.close()


@pytest.fixture(scope="session")
def files_src(tmp_path_factory):
    """(directory, {key: content}) of a file dataset of 130 files."""
    root = tmp_path_factory.mktemp("files-src")
    return str(root), make_files(str(root), 120)


def file_conf(src, cache, **shard):
    return {"source": {"url": src}, "shard": shard, "cache": {"dir": cache}}
