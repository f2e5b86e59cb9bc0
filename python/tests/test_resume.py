"""A preempted job resumed on another world size: a job of W0 = 4 ranks
reads `steps` batches of epoch 1 through DataLoaders (2 workers), stops;
a mount of W = 3 ranks reads shardfs.resume_point()'s skip tree. The
consumed and the resumed items together are every item exactly once
(layout strided, balance none and pad; and a record view read in order).
Where a resume is not exact (layout contiguous) the datasets refuse it."""

import collections
import itertools
import os

import pytest
from torch.utils.data import DataLoader

import shardfs
from shardfs.torch import RankDataset, RecordDataset

from conftest import file_conf, ref_records

W0, W, EPOCH, BATCH, STEPS = 4, 3, 1, 5, 6


def consume(ds, steps, batch):
    """The keys of the first `steps` batches a DataLoader with 2 workers
    gives a trainer."""
    out = []
    loader = DataLoader(ds, batch_size=batch, shuffle=False, num_workers=2,
                        collate_fn=lambda items: [k for k, _ in items])
    for keys in itertools.islice(loader, steps):
        out += keys
    return out


@pytest.mark.parametrize("balance", ["none", "pad"])
def test_resume_w4_to_w3_covers_every_item_once(balance, mounts, files_src, tmp_path_factory):
    src, data = files_src
    cache = str(tmp_path_factory.mktemp("cache"))
    old = mounts.mount(file_conf(src, cache, world_size=W0, seed=11, balance=balance))
    new = mounts.mount(file_conf(src, cache, world_size=W, seed=11, balance=balance))
    consumed = []
    for r in range(W0):
        got = consume(RankDataset(old, r, epoch=EPOCH), STEPS, BATCH)
        assert len(got) == STEPS * BATCH
        consumed += got
    rp = shardfs.resume_point(EPOCH, STEPS, BATCH, W0)
    assert rp.subdir == "epoch-1/skip-120-of-4"
    resumed = []
    for r in range(W):
        ds = RankDataset(new, r, resume=rp)
        resumed += [k for k, _ in ds]
        assert shardfs.read_plan(new, rp.subdir)["skip"] == "120"
    everything = collections.Counter(consumed) + collections.Counter(resumed)
    assert everything == collections.Counter(data_keys(data))
    # Resuming past the end of the epoch: nothing is left.
    done = shardfs.resume_point(EPOCH, 1000, BATCH, W0)
    assert all(len(RankDataset(new, r, resume=done)) == 0 for r in range(W))
    mounts.unmount(old)
    mounts.unmount(new)


def data_keys(data):
    return [os.fsdecode(k) for k in data]


def test_record_view_resume_w4_to_w3(mounts, tmp_path_factory):
    src = str(tmp_path_factory.mktemp("rsrc"))
    ref_records.make("tfrecord", src, 6, 22, False)
    cache = str(tmp_path_factory.mktemp("rcache"))

    def conf(w):
        return {"source": {"url": src},
                "shard": {"unit": "record", "world_size": w, "seed": 8, "balance": "pad"},
                "records": {"format": "tfrecord", "parts": 3}, "cache": {"dir": cache}}
    old, new = mounts.mount(conf(W0)), mounts.mount(conf(W))
    steps, batch = 4, 3
    consumed = []
    for r in range(W0):
        # In the rank's order (one reader): the consumed records are then
        # the first steps x batch positions of the rank's list.
        ds = RecordDataset(old, r, epoch=EPOCH, with_meta=True)
        loader = DataLoader(ds, batch_size=batch, num_workers=0,
                            collate_fn=lambda recs: [(x.key, x.index) for x in recs])
        for b in itertools.islice(loader, steps):
            consumed += b
    rp = shardfs.resume_point(EPOCH, steps, batch, W0)
    resumed = [(x.key, x.index) for r in range(W)
               for x in RecordDataset(new, r, resume=rp, pads=False, with_meta=True)]
    total = sum(len(recs) for _, recs in ref_records.source_records("tfrecord", src))
    seen = collections.Counter(consumed) + collections.Counter(resumed)
    assert len(seen) == total and set(seen.values()) == {1}
    mounts.unmount(old)
    mounts.unmount(new)


def test_inexact_resume_is_refused_unless_allowed(mounts, files_src, tmp_path_factory):
    src, _ = files_src
    cache = str(tmp_path_factory.mktemp("cache"))
    m = mounts.mount(file_conf(src, cache, world_size=W, layout="contiguous"))
    rp = shardfs.resume_point(EPOCH, 2, 4, W0)
    with pytest.raises(shardfs.ViewError, match="layout contiguous.*allow_inexact"):
        RankDataset(m, 0, resume=rp)
    assert len(RankDataset(m, 0, resume=rp, allow_inexact=True)) > 0
    # One old rank: a prefix of its only block is a prefix of the sequence.
    assert len(RankDataset(m, 0, resume=shardfs.resume_point(EPOCH, 2, 4, 1))) > 0
    mounts.unmount(m)
