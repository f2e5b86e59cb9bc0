"""PyTorch datasets over a shardfs mount (imports torch; the rest of the
package does not).

The mount already is the sampler: a rank's directory is its share, in
its order, so use no DistributedSampler and no shuffle.

    from shardfs.torch import RankDataset, RecordDataset, check_same_plan

    check_same_plan("/mnt/train")           # every rank: the same plan
    ds = RankDataset("/mnt/train", rank, epoch, resume=None,
                     transform=lambda key, data: decode(data))
    loader = DataLoader(ds, batch_size=64, shuffle=False, num_workers=4)

    recs = RecordDataset("/mnt/train", rank, epoch)   # a record view
    loader = DataLoader(recs, batch_size=None, num_workers=4)
"""

import torch.distributed as dist
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from . import plan as _plan
from .records import RankRecords
from .views import RankFiles

__all__ = ["RankDataset", "RecordDataset", "check_same_plan"]


class RankDataset(RankFiles, Dataset):
    """A map-style Dataset of rank ``rank``'s files (shardfs.RankFiles):
    item i is ``(key, bytes)`` of the rank's i-th file in its order, pads
    skipped, or ``transform(key, bytes)``. ``epoch`` picks
    ``epoch-E/rank-R/``; ``resume`` (shardfs.resume_point()) the rest of
    an epoch after a preemption, on any world size."""


class RecordDataset(IterableDataset):
    """An IterableDataset of rank ``rank``'s records in a record view
    (shardfs.RankRecords): TFRecord data (both CRCs checked), JSONL lines,
    or WebDataset samples as dicts. DataLoader workers split the rank's
    parts: worker w of n reads parts w, w+n, ... (so keep ``[records]
    parts`` >= num_workers). Use ``batch_size=None`` or a collate that
    takes bytes.

    pads=False skips pad records (balance = pad repeats a few records so
    every rank has the same count); with_meta=True yields
    shardfs.Record(key, index, pad, value)."""

    def __init__(self, mount, rank, epoch=None, resume=None, pads=True,
                 with_meta=False, allow_inexact=False):
        super().__init__()
        self.records = RankRecords(mount, rank, epoch=epoch, resume=resume,
                                   pads=pads, with_meta=with_meta,
                                   allow_inexact=allow_inexact)

    def __len__(self):
        return len(self.records)

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return self.records.iter_worker(0, 1)
        return self.records.iter_worker(info.id, info.num_workers)


def check_same_plan(mount, group=None, expected=None, subdir=""):
    """Checks that every rank of the torch.distributed job (if one is
    initialized) reads the same plan and that the mount's world_size is
    the job's; returns the plan digest, raises shardfs.PlanMismatch.
    Without torch.distributed it checks the mount alone (and ``expected``
    if given). A collective: every rank of ``group`` must call it (with
    NCCL, after torch.cuda.set_device)."""
    if dist.is_available() and dist.is_initialized():
        n = dist.get_world_size(group)

        def gather(digest):
            out = [None] * n
            dist.all_gather_object(out, digest, group=group)
            return out

        return _plan.check_same_plan(mount, all_gather=gather, rank=dist.get_rank(group),
                                     world_size=n, expected=expected, subdir=subdir)
    return _plan.check_same_plan(mount, expected=expected, subdir=subdir)
