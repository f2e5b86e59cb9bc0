"""RecordDataset over real record views (TFRecord, JSONL, WebDataset tar):
a DataLoader with 2 workers per rank sees every source record exactly
once across the ranks, each equal to the source's record as an
independent reader (tests/integration/records.py) parses it; pads are
served or skipped as asked; workers split the parts."""

import collections
import io
import os
import tarfile

import pytest
from torch.utils.data import DataLoader

import shardfs
from shardfs.torch import RecordDataset

from conftest import ref_records

W = 4
PARTS = 4


def expected_records(fmt, src):
    """{(object key, record index): what RecordDataset must yield}."""
    out = {}
    for key, recs in ref_records.source_records(fmt, src):
        for i, raw in enumerate(recs):
            if fmt == "tfrecord":
                ref_records.tfrecord_split(raw, key)  # the source is well formed
                v = raw[12:-4]
            elif fmt == "jsonl":
                v = raw[:-1]
            else:
                with tarfile.open(fileobj=io.BytesIO(raw), mode="r|") as t:
                    v = {}
                    for mb in t:
                        k = ref_records.wds_key(mb.name)
                        v.setdefault("__key__", k)
                        assert v["__key__"] == k
                        v[mb.name[len(k) + 1:]] = t.extractfile(mb).read()
            out[(key, i)] = v
    return out


@pytest.fixture(scope="module", params=["tfrecord", "jsonl", "tar"])
def rview(request, mounts, tmp_path_factory):
    fmt = request.param
    src = str(tmp_path_factory.mktemp("rsrc-" + fmt))
    ref_records.make(fmt, src, 6, 21, False)
    cache = str(tmp_path_factory.mktemp("rcache-" + fmt))
    m = mounts.mount({"source": {"url": src},
                      "shard": {"unit": "record", "world_size": W, "seed": 4,
                                "balance": "pad"},
                      "records": {"format": fmt, "parts": PARTS},
                      "cache": {"dir": cache}})
    return fmt, m, expected_records(fmt, src)


def test_two_workers_see_every_record_exactly_once(rview):
    fmt, m, want = rview
    seen = collections.Counter()
    for r in range(W):
        ds = RecordDataset(m, r, pads=False, with_meta=True)
        assert ds.records.format == fmt and len(ds.records.parts) == PARTS
        for rec in DataLoader(ds, batch_size=None, num_workers=2):
            assert not rec.pad
            assert rec.value == want[(rec.key, rec.index)], (rec.key, rec.index)
            seen[(rec.key, rec.index)] += 1
    assert seen == collections.Counter(want.keys())


def test_pads_are_served_by_default_to_even_the_ranks(rview):
    fmt, m, want = rview
    plan = shardfs.read_plan(m)
    counts = [r.count for r in plan.record_ranks]
    assert len(set(counts)) == 1  # balance = pad
    assert sum(r.pad for r in plan.record_ranks) == counts[0] * W - len(want) > 0
    for r in range(W):
        ds = RecordDataset(m, r)
        got = list(DataLoader(ds, batch_size=None, num_workers=2))
        assert len(got) == len(ds) == counts[r]
        plain = list(RecordDataset(m, r, pads=False))
        assert len(plain) == counts[r] - plan.record_ranks[r].pad


def test_workers_split_the_parts(rview):
    _, m, _ = rview
    rr = shardfs.RankRecords(m, 0, epoch=3, with_meta=True)
    a = list(rr.iter_worker(0, 2))
    b = list(rr.iter_worker(1, 2))
    by_part = [list(rr.iter_part(p)) for p in range(PARTS)]
    assert a == by_part[0] + by_part[2] and b == by_part[1] + by_part[3]
    assert a + b != [] and list(rr) == sum(by_part, [])
    # More workers than parts: the extra ones read nothing.
    assert list(rr.iter_worker(PARTS, PARTS + 1)) == []


def test_records_follow_the_order_file(rview):
    _, m, _ = rview
    for r in range(W):
        rr = shardfs.RankRecords(m, r, epoch=1, with_meta=True)
        order = shardfs.read_order(os.path.join(str(m), ".shardfs", "epoch-1",
                                                "rank-%d.order" % r))
        assert [(os.fsencode(x.key), x.index, x.pad) for x in rr] == \
            [(e.key, e.record, e.pad) for e in order]


def test_record_view_refuses_the_file_api(rview):
    _, m, _ = rview
    with pytest.raises(shardfs.ViewError, match="record view"):
        shardfs.RankFiles(m, 0)
