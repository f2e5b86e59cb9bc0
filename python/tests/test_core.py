"""The package's parsers and arithmetic on their own (no mount): order
files, plans, CRC-32C, TFRecord/JSONL/tar readers against bytes written
here from the published formats, resume points; and the packaging."""

import io
import os
import re
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import shardfs
from shardfs import crc32c as crcmod_
from shardfs.records import iter_jsonl, iter_tfrecord, iter_webdataset, part_slices

from conftest import REPO, ref_records


# --- order files ----------------------------------------------------------------
def test_unescape_is_bytewise_and_inverts_escape():
    for key in [b"a/b", b"100%", b"t\tb\nc\rd\x01\x1f", b"\xff\xfe latin", b"%41",
                b"\xe2\x98\x83", bytes(range(1, 256))]:
        esc = shardfs.escape(key)
        assert all(b >= 0x20 for b in esc)
        assert shardfs.unescape(esc) == key
    # What urllib's unquote gets wrong: bytes that are not UTF-8.
    assert shardfs.unescape(b"x%25\xff") == b"x%\xff"
    assert shardfs.unescape(b"%2541") == b"%41"


@pytest.mark.parametrize("bad", [b"50%", b"a%4", b"a%zz", b"a%4g", b"a%0a", b"raw\x01"])
def test_unescape_refuses_what_the_mount_never_writes(bad):
    with pytest.raises(shardfs.OrderError):
        shardfs.unescape(bad)


def test_parse_order_file_and_record_views():
    es = shardfs.parse_order(b"a%09b\nc\tpad\n")
    assert es == [shardfs.OrderEntry(b"a\tb", None, False), shardfs.OrderEntry(b"c", None, True)]
    es = shardfs.parse_order(b"x.tfrecord\t0\nx.tfrecord\t12\ty.tfrecord\t3\tpad\n".replace(
        b"\ty.tfrecord", b"\ny.tfrecord"))
    assert [(e.key, e.record, e.pad) for e in es] == [
        (b"x.tfrecord", 0, False), (b"x.tfrecord", 12, False), (b"y.tfrecord", 3, True)]
    assert shardfs.parse_order(b"") == []


@pytest.mark.parametrize("bad, what", [
    (b"a\nb", "no newline"),
    (b"a\tpad\tpad\n", "not KEY"),
    (b"a\t01\n", "not KEY"),
    (b"a\t-1\n", "not KEY"),
    (b"\tpad\n", "empty key"),
    (b"a\nb\t3\n", "record-view line in a file view"),
    (b"a\n50%\n", ":2:"),
])
def test_parse_order_refuses_malformed_lines(bad, what):
    with pytest.raises(shardfs.OrderError, match=re.escape(what)):
        shardfs.parse_order(bad, "f.order")


# --- plans ------------------------------------------------------------------------
PLAN = (b"spec shardfs-shard v1\nmanifest_sha256 ab\nworld_size 2\nseed 0\n"
        b"layout strided\nrank 0 items 3 pad 0 bytes 10\nrank 1 items 3 pad 1 bytes 9\n")


def test_plan_parses_and_digests():
    p = shardfs.Plan(PLAN)
    assert p["spec"] == "shardfs-shard v1" and p.world_size == 2
    assert p.ranks[1] == (1, 3, 1, 9)
    assert re.fullmatch("[0-9a-f]{64}", p.digest)


@pytest.mark.parametrize("bad", [b"", PLAN[:-1], PLAN + b"rank 5 items 1 pad 0 bytes 1\n",
                                 PLAN + b"rank 2 items x pad 0 bytes 1\n", b"spec v1\n",
                                 PLAN + b"lonely\n"],
                         ids=["empty", "no-newline", "rank-gap", "rank-not-number",
                              "no-world-size", "lonely-word"])
def test_plan_refuses_malformed(bad):
    with pytest.raises(shardfs.PlanError):
        shardfs.Plan(bad)


# --- CRC-32C and the record readers -------------------------------------------------
def test_crc32c_check_values_both_implementations():
    # The polynomial's published check value, and RFC 3720's vectors.
    vectors = {b"123456789": 0xE3069283, bytes(32): 0x8A9136AA,
               b"\xff" * 32: 0x62A8AB43, bytes(range(32)): 0x46DD794E}
    for data, want in vectors.items():
        assert crcmod_.crc32c_python(data) == want
        assert crcmod_.crc32c(data) == want
    print("crc32c accelerated by crcmod:", crcmod_.ACCELERATED)


def test_crc32c_uses_crcmods_c_extension_when_installed():
    # Pure Python runs at a few MB/s; TFRecord parts of GBs need the C one.
    import importlib.util
    try:
        has_ext = importlib.util.find_spec("crcmod._crcfunext") is not None
    except ImportError:
        has_ext = False
    if not has_ext:
        pytest.skip("python3-crcmod's C extension is not installed")
    assert crcmod_.ACCELERATED


def frame(data):
    return ref_records.tfrecord_frame(data)


def test_tfrecord_reader_checks_both_crcs_and_the_tail():
    recs = [b"", b"x", os.urandom(70000)]
    buf = b"".join(frame(r) for r in recs)
    assert list(iter_tfrecord(io.BytesIO(buf))) == recs
    f1 = len(frame(recs[0]))
    cases = {
        "length CRC mismatch": lambda b: b[:f1 + 2] + bytes([b[f1 + 2] ^ 1]) + b[f1 + 3:],
        "data CRC mismatch": lambda b: b[:f1 + 12] + bytes([b[f1 + 12] ^ 0x80]) + b[f1 + 13:],
        "header cut short": lambda b: b + b"\x01\x02",
        "truncated": lambda b: b[:-1],
    }
    for what, damage in cases.items():
        bad = damage(buf)
        with pytest.raises(shardfs.RecordError, match=what):
            list(iter_tfrecord(io.BytesIO(bad), "p.tfrecord", len(bad)))
        # Without a known size (a pipe), the cut is still found.
        with pytest.raises(shardfs.RecordError):
            list(iter_tfrecord(io.BytesIO(bad), "p.tfrecord"))
    # A length over the format's bound with a valid length CRC.
    n = struct.pack("<Q", 1 << 40)
    huge = n + struct.pack("<I", ref_records.masked(ref_records.crc32c(n)))
    with pytest.raises(shardfs.RecordError, match="too large"):
        list(iter_tfrecord(io.BytesIO(huge + b"x" * 20)))


def test_jsonl_reader():
    assert list(iter_jsonl(io.BytesIO(b'{"a":1}\n\n\xff\r\n'))) == [b'{"a":1}', b"", b"\xff\r"]
    with pytest.raises(shardfs.RecordError, match="no newline"):
        list(iter_jsonl(io.BytesIO(b"a\nb")))


def test_webdataset_reader_groups_by_key():
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in [("d/s1.jpg", b"J1"), ("d/s1.cls", b"1"), ("d/s2.seg.png", b"P"),
                           ("d/s2.cls", b"2"), ("d/s2.cls", b"again"), ("x" * 150 + ".txt", b"L")]:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    got = list(iter_webdataset(io.BytesIO(bio.getvalue())))
    assert got == [{"__key__": "d/s1", "jpg": b"J1", "cls": b"1"},
                   {"__key__": "d/s2", "seg.png": b"P", "cls": b"2"},
                   # the same key and extension again: the next sample
                   {"__key__": "d/s2", "cls": b"again"},
                   {"__key__": "x" * 150, "txt": b"L"}]
    bad = bytearray(bio.getvalue())
    bad[1024 + 5] ^= 0xFF  # the second header: its checksum fails
    with pytest.raises(shardfs.RecordError):
        list(iter_webdataset(io.BytesIO(bytes(bad))))


def test_part_slices_follow_the_spec():
    # docs/RECORDS.md: part p holds [q*p + min(p,m), q*(p+1) + min(p+1,m)).
    assert part_slices(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert part_slices(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]


# --- resume points ----------------------------------------------------------------------
def test_resume_point_is_k_equals_c_times_w0():
    rp = shardfs.resume_point(epoch=7, steps=500, batch_size=8, world_size=4)
    assert rp == (7, 16000, 4)
    assert rp.subdir == "epoch-7/skip-16000-of-4"
    assert shardfs.resume_point(0, 0, 1, 1).subdir == "epoch-0/skip-0-of-1"


@pytest.mark.parametrize("args, exc", [
    ((1, -1, 8, 4), ValueError), ((1, 1, 0, 4), ValueError), ((1, 1, 8, 0), ValueError),
    ((1, 1, 8, (1 << 20) + 1), ValueError), ((1.0, 1, 8, 4), TypeError),
    ((1, True, 8, 4), TypeError), ((1, 1 << 62, 1 << 10, 4), ValueError),
])
def test_resume_point_refuses_bad_arguments(args, exc):
    with pytest.raises(exc):
        shardfs.resume_point(*args)


def test_check_same_plan_without_a_mount_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a shardfs mount|is .* a shardfs mount"):
        shardfs.check_same_plan(tmp_path)


# --- packaging ------------------------------------------------------------------------------
def test_version_is_the_repository_version():
    want = (REPO / "VERSION").read_text().strip()
    assert shardfs.__version__ == want
    toml = (REPO / "python" / "pyproject.toml").read_text()
    assert re.search(r'^version = "%s"$' % re.escape(want), toml, re.M)


def test_core_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import shardfs\n"
            "try:\n    import shardfs.torch\nexcept ImportError:\n    print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=str(Path(shardfs.__file__).parents[1]))
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr
