"""Record views: a rank's ``records/part-PPPPP-of-QQQQQ.EXT`` files read
as records (docs/RECORDS.md), checked as they are read.

- TFRecord (``.tfrecord``): ``LE64 length | masked CRC-32C of the 8
  length bytes | data | masked CRC-32C of data``; both CRCs are checked
  (the length's before the length is trusted); yields ``data`` (bytes).
- JSONL (``.jsonl``): one record a line; yields the line without its
  ``\\n`` (bytes: ``json.loads`` takes them).
- WebDataset (``.tar``): a sample is a run of consecutive regular members
  with the same key (the path up to the first dot of its last component);
  yields ``{"__key__": key, EXT: bytes, ...}`` (EXT: the rest of the
  member's name after that dot), as ``webdataset`` does.

Every part must hold exactly the records its rank's order file lists for
it (part p of P holds positions ``[q*p + min(p, m), q*(p+1) + min(p+1, m))``
of the rank's list, q, m = divmod(len, P)); a part that parses to another
count, a bad CRC, a truncated frame or a malformed tar raises RecordError
naming the part, the record and the offset.
"""

import collections
import io
import os
import re
import struct
import tarfile

from .crc32c import masked_crc32c
from .order import read_order
from .plan import read_plan
from .views import ViewError, check_resume_exact, rank_paths, view_subdir, need_rank_dir

__all__ = ["RecordError", "Record", "iter_tfrecord", "iter_jsonl",
           "iter_webdataset", "iter_records", "RankRecords", "FORMATS"]

# records/frame.h: REC_TFRECORD_LEN_MAX.
TFRECORD_LEN_MAX = (1 << 32) - 1 - 16

FORMATS = {"tfrecord": "tfrecord", "jsonl": "jsonl", "tar": "tar"}
_PART = re.compile(r"part-([0-9]{5})-of-([0-9]{5})\.(tfrecord|jsonl|tar)\Z")

Record = collections.namedtuple("Record", "key index pad value")
Record.__doc__ = """A record with where it comes from (with_meta=True).

key: the source object's key (str, os.fsdecode'd); index: the record's
index within that object; pad: True for a pad (a copy of another
position's record); value: what the reader yields."""


class RecordError(ValueError):
    """A part that is not well-formed records of its format, or not the
    records its order file lists."""


def _read_exact(f, n, what):
    b = f.read(n)
    if len(b) != n:
        raise RecordError("%s: cut short (%d of %d bytes)" % (what, len(b), n))
    return b


def iter_tfrecord(f, name="tfrecord", size=None):
    """The data of each TFRecord frame of the binary file ``f``, both CRCs
    checked. ``size``: the file's size, if known (bounds a length before
    any allocation)."""
    if size is None:
        try:
            size = os.fstat(f.fileno()).st_size
        except (AttributeError, OSError, io.UnsupportedOperation):
            size = None
    off, n = 0, 0
    while True:
        head = f.read(12)
        if not head:
            return
        where = "%s: offset %d: record %d" % (name, off, n)
        if len(head) < 12:
            raise RecordError("%s: truncated: header cut short (%d of 12 bytes)"
                              % (where, len(head)))
        (length,) = struct.unpack_from("<Q", head)
        (lcrc,) = struct.unpack_from("<I", head, 8)
        want = masked_crc32c(head[:8])
        if lcrc != want:
            raise RecordError("%s: length CRC mismatch (stored 0x%08x, computed 0x%08x)"
                              % (where, lcrc, want))
        if length > TFRECORD_LEN_MAX:
            raise RecordError("%s: record length %d too large (at most %d)"
                              % (where, length, TFRECORD_LEN_MAX))
        if size is not None and off + 16 + length > size:
            raise RecordError("%s: truncated: length %d but %d bytes left"
                              % (where, length, size - off - 12))
        data = _read_exact(f, length, where + ": data")
        (dcrc,) = struct.unpack("<I", _read_exact(f, 4, where + ": data CRC"))
        want = masked_crc32c(data)
        if dcrc != want:
            raise RecordError("%s: data CRC mismatch (stored 0x%08x, computed 0x%08x)"
                              % (where, dcrc, want))
        yield data
        off += 16 + length
        n += 1


def iter_jsonl(f, name="jsonl"):
    """Each line of the binary file ``f`` without its ``\\n``. A part ends
    every record with ``\\n``; a last line without one is an error."""
    off, n = 0, 0
    for line in f:
        if not line.endswith(b"\n"):
            raise RecordError("%s: offset %d: record %d: last line has no newline "
                              "(a part ends every record with one)" % (name, off, n))
        yield line[:-1]
        off += len(line)
        n += 1


def _wds_split(path):
    """WebDataset's key and extension of a member path: 'a/b/c.d.e' ->
    ('a/b/c', 'd.e'); no dot: (path, '')."""
    d, slash, base = path.rpartition("/")
    stem, _, ext = base.partition(".")
    return d + slash + stem, ext


def iter_webdataset(f, name="tar", size=None):
    """Each WebDataset sample of the tar stream ``f`` as a dict
    ``{"__key__": key, EXT: bytes, ...}``. Non-regular members end a
    sample and belong to none. A member whose extension the current
    sample already has starts a new sample (two samples with one key:
    pads can put a sample next to its copy)."""
    if size is None:
        try:
            size = os.fstat(f.fileno()).st_size
        except (AttributeError, OSError, io.UnsupportedOperation):
            size = None
    cur = None
    try:
        with tarfile.open(fileobj=f, mode="r|") as t:
            for m in t:
                if not m.isfile():
                    if cur is not None:
                        yield cur
                        cur = None
                    continue
                if size is not None and m.size > size:
                    raise RecordError("%s: offset %d: member %r of size %d in a %d-byte part"
                                      % (name, m.offset, m.name, m.size, size))
                key, ext = _wds_split(m.name)
                if cur is not None and (cur["__key__"] != key or ext in cur):
                    yield cur
                    cur = None
                if cur is None:
                    cur = {"__key__": key}
                data = t.extractfile(m).read()
                if len(data) != m.size:
                    raise RecordError("%s: offset %d: member %r cut short"
                                      % (name, m.offset, m.name))
                cur[ext] = data
            end = t.offset
    except tarfile.TarError as e:
        raise RecordError("%s: not a well-formed tar: %s" % (name, e)) from None
    # tarfile ends an archive quietly at a header whose checksum fails, as
    # at the end-of-archive zeros: everything from there on must be zeros.
    if f.seekable():
        f.seek(end)
        off = end
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            if chunk.count(0) != len(chunk):
                raise RecordError(
                    "%s: offset %d: not a tar header (bad checksum?) and not the "
                    "end of the archive (non-zero byte at offset %d)"
                    % (name, end, off + len(chunk) - len(chunk.lstrip(b"\0"))))
            off += len(chunk)
    if cur is not None:
        yield cur


def iter_records(path, fmt=None):
    """The records of one part file; ``fmt`` defaults to its extension."""
    path = os.fspath(path)
    if fmt is None:
        fmt = os.path.splitext(path)[1].lstrip(".")
    if fmt not in FORMATS:
        raise RecordError("%s: unknown record format %r (tfrecord, jsonl, tar)"
                          % (path, fmt))
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if fmt == "tfrecord":
            yield from iter_tfrecord(f, path, size)
        elif fmt == "jsonl":
            yield from iter_jsonl(f, path)
        else:
            yield from iter_webdataset(f, path, size)


def part_slices(n, parts):
    """[(start, end)] of each part of a rank's list of n positions."""
    q, m = divmod(n, parts)
    return [(q * p + min(p, m), q * (p + 1) + min(p + 1, m)) for p in range(parts)]


class RankRecords:
    """Rank ``rank``'s records of a record view, part by part.

    epoch, resume, allow_inexact: as for RankFiles.
    pads: False skips pads (a copy of another position's record, there so
        that every rank has the same count under ``balance = pad``); the
        default keeps them, as the plan serves them.
    with_meta: yield Record(key, index, pad, value) instead of the value.

    ``parts`` lists the part files; ``iter_worker(w, n)`` reads parts
    w, w+n, w+2n, ... (DataLoader worker w of n); ``len()`` is the number
    of records the rank yields (pads counted unless pads=False).
    """

    def __init__(self, mount, rank, epoch=None, resume=None, pads=True,
                 with_meta=False, allow_inexact=False):
        self.mount = os.fspath(mount)
        self.rank = rank
        self.subdir = view_subdir(epoch, resume)
        tree, self.order_path = rank_paths(self.mount, rank, self.subdir)
        need_rank_dir(tree, self.mount, rank)
        self.plan = read_plan(self.mount, self.subdir)
        if not self.plan.is_records:
            raise ViewError("%s is a file view, not a record view ([shard] unit = "
                            "record): read it with RankDataset" % tree)
        if resume is not None and not allow_inexact:
            check_resume_exact(self.plan, tree)
        self.dir = os.path.join(tree, "records")
        names = sorted(os.listdir(self.dir))
        parsed = [_PART.match(n) for n in names]
        bad = [n for n, p in zip(names, parsed) if p is None]
        if bad:
            raise ViewError("%s: not a part file name: %s" % (self.dir, bad[0]))
        total = {int(p.group(2)) for p in parsed}
        if names and (len(total) != 1 or total != {len(names)} or
                      [int(p.group(1)) for p in parsed] != list(range(len(names)))):
            raise ViewError("%s: parts are not part-00000 .. of one count: %s"
                            % (self.dir, names))
        exts = {p.group(3) for p in parsed}
        if len(exts) > 1:
            raise ViewError("%s: parts of several formats: %s" % (self.dir, sorted(exts)))
        self.format = exts.pop() if exts else None
        self.parts = [os.path.join(self.dir, n) for n in names]
        self.entries = read_order(self.order_path)
        if any(e.record is None for e in self.entries):
            raise ViewError("%s: not a record view's order" % self.order_path)
        self.slices = part_slices(len(self.entries), len(self.parts)) if self.parts else []
        if not self.parts and self.entries:
            raise ViewError("%s: no parts but %d records in %s"
                            % (self.dir, len(self.entries), self.order_path))
        self.pads = pads
        self.with_meta = with_meta

    def __len__(self):
        return sum(1 for e in self.entries if self.pads or not e.pad)

    def iter_part(self, p):
        """The records of part p, checked against the order file."""
        path = self.parts[p]
        start, end = self.slices[p]
        want = end - start
        n = 0
        for value in iter_records(path, self.format):
            if n >= want:
                raise RecordError("%s: holds more than the %d records %s lists for it"
                                  % (path, want, self.order_path))
            e = self.entries[start + n]
            n += 1
            if e.pad and not self.pads:
                continue
            yield Record(os.fsdecode(e.key), e.record, e.pad, value) if self.with_meta \
                else value
        if n != want:
            raise RecordError("%s: holds %d records, %s lists %d for it"
                              % (path, n, self.order_path, want))

    def iter_worker(self, worker=0, num_workers=1):
        """The records of parts worker, worker + num_workers, ..."""
        if not 0 <= worker < num_workers:
            raise ValueError("worker %r of %r" % (worker, num_workers))
        for p in range(worker, len(self.parts), num_workers):
            yield from self.iter_part(p)

    def __iter__(self):
        return self.iter_worker(0, 1)
