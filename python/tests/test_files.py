"""RankDataset over a real mount of files: rank-R/ and epoch-E/rank-R/
are the order file minus pads, byte for byte the source, keys with every
escape; a DataLoader with 2 workers reads each file once; errors name
what is wrong."""

import collections
import os
import re

import pytest
from torch.utils.data import DataLoader

import shardfs
from shardfs.torch import RankDataset

from conftest import file_conf

W = 4


@pytest.fixture(scope="module")
def fm(mounts, files_src, tmp_path_factory):
    src, data = files_src
    cache = str(tmp_path_factory.mktemp("cache"))
    # 130 files on 4 ranks with balance = pad: ranks 2 and 3 get a pad.
    m = mounts.mount(file_conf(src, cache, world_size=W, seed=9, epoch=2, balance="pad"))
    return m, data


def order_keys(path):
    """The non-pad keys of an order file, read here on their own: lines
    ending in '\\n', '%XX' for the escaped bytes."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    assert lines[-1] == b""
    return [re.sub(rb"%([0-9A-F]{2})", lambda mt: bytes([int(mt.group(1), 16)]), ln)
            for ln in lines[:-1] if not ln.endswith(b"\tpad")]


def tree_keys(d):
    db = os.fsencode(d)
    out = set()
    for root, _, files in os.walk(db):
        for f in files:
            out.add(os.path.relpath(os.path.join(root, f), db))
    return out


@pytest.mark.parametrize("epoch", [None, 2, 0, 5])
def test_rank_dataset_is_the_order_file_minus_pads(fm, epoch):
    m, data = fm
    sub = "" if epoch is None else "epoch-%d" % epoch
    seen = collections.Counter()
    pads = 0
    for r in range(W):
        ds = RankDataset(m, r, epoch=epoch)
        order = os.path.join(str(m), ".shardfs", sub, "rank-%d.order" % r)
        assert ds.key_bytes == order_keys(order)
        assert set(ds.key_bytes) == tree_keys(os.path.join(str(m), sub, "rank-%d" % r))
        assert len(ds) == len(ds.key_bytes)
        for i in range(len(ds)):
            key, blob = ds[i]
            assert os.fsencode(key) == ds.key_bytes[i]
            assert blob == data[ds.key_bytes[i]], key
        seen.update(ds.key_bytes)
        pads += ds.pads
    assert seen == collections.Counter(data.keys())  # every file once
    assert pads == 2
    if epoch is not None:
        plan = shardfs.read_plan(m, sub)
        assert plan["epoch"] == str(epoch)
        assert [r.pad for r in plan.ranks] == [0, 0, 1, 1]


def test_rank_r_is_the_configured_epoch(fm):
    m, _ = fm
    assert RankDataset(m, 1).key_bytes == RankDataset(m, 1, epoch=2).key_bytes
    assert RankDataset(m, 1, epoch=3).key_bytes != RankDataset(m, 1, epoch=2).key_bytes


def test_every_escape_reaches_the_right_file(fm):
    m, data = fm
    odd = {k for k in data if k.startswith(b"odd/")}
    got = set()
    for r in range(W):
        ds = RankDataset(m, r, epoch=4)
        for i, k in enumerate(ds.key_bytes):
            if k in odd:
                assert ds[i][1] == data[k]
                got.add(k)
    assert got == odd


def test_dataloader_two_workers_reads_each_file_once_in_order(fm):
    m, data = fm
    for r in range(W):
        ds = RankDataset(m, r, epoch=1, transform=lambda key, blob: (key, len(blob)))
        keys, sizes = [], []
        for bk, bs in DataLoader(ds, batch_size=7, shuffle=False, num_workers=2):
            keys += list(bk)
            sizes += bs.tolist()
        assert keys == ds.keys  # the rank's order: what the prefetcher follows
        assert sizes == [len(data[os.fsencode(k)]) for k in keys]


def test_errors_name_what_is_wrong(fm, tmp_path):
    m, _ = fm
    with pytest.raises(shardfs.ViewError, match="does not show rank 9"):
        RankDataset(m, 9)
    with pytest.raises(shardfs.ViewError, match="not a shardfs mount"):
        RankDataset(tmp_path, 0)
    with pytest.raises(shardfs.ViewError, match="rank must be"):
        RankDataset(m, -1)
    with pytest.raises(shardfs.ViewError, match="epoch 1 but the resume point is in epoch 2"):
        RankDataset(m, 0, epoch=1, resume=shardfs.resume_point(2, 1, 1, 4))
    with pytest.raises(shardfs.ViewError, match="file view"):
        shardfs.RankRecords(m, 0)
