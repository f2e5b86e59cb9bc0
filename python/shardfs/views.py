"""A rank's share of a mount, as files: the tree ``[epoch-E/[skip-K-of-W/]]
rank-R/`` and its order file, paired.

Layout of a mount (docs/DESIGN.md §3):

    MOUNT/rank-R/KEY                         the configured epoch
    MOUNT/epoch-E/rank-R/KEY                 epoch E
    MOUNT/epoch-E/skip-K-of-W/rank-R/KEY     epoch E from position K on
    MOUNT/.shardfs/[SUBDIR/]rank-R.order     their orders (order.py)
    MOUNT/.shardfs/[SUBDIR/]plan             their plans (plan.py)

``RankFiles`` is a plain sequence (no torch): ``len``, ``[i]`` gives
``(key, bytes)``; ``shardfs.torch.RankDataset`` is the same as a torch
Dataset.
"""

import os

from .order import read_order
from .plan import read_plan
from .resume import ResumePoint

__all__ = ["ViewError", "view_subdir", "rank_paths", "RankFiles",
           "check_resume_exact"]


class ViewError(ValueError):
    """A view that does not exist on this mount, or cannot be read as asked."""


def view_subdir(epoch=None, resume=None):
    """'' (the configured epoch), 'epoch-E', or a resume point's
    'epoch-E/skip-K-of-W'."""
    if resume is not None:
        if not isinstance(resume, ResumePoint):
            raise TypeError("resume must be a ResumePoint (shardfs.resume_point()), not %r"
                            % (resume,))
        if epoch is not None and epoch != resume.epoch:
            raise ViewError("epoch %d but the resume point is in epoch %d"
                            % (epoch, resume.epoch))
        return resume.subdir
    if epoch is None:
        return ""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ViewError("epoch must be an int >= 0, not %r" % (epoch,))
    return "epoch-%d" % epoch


def rank_paths(mount, rank, subdir=""):
    """(tree directory, order file) of rank ``rank`` under ``subdir``."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ViewError("rank must be an int >= 0, not %r" % (rank,))
    m = os.fspath(mount)
    tree = os.path.join(m, subdir, "rank-%d" % rank) if subdir else \
        os.path.join(m, "rank-%d" % rank)
    ctrl = os.path.join(m, ".shardfs", subdir) if subdir else os.path.join(m, ".shardfs")
    return tree, os.path.join(ctrl, "rank-%d.order" % rank)


def check_resume_exact(plan, where):
    """Raises ViewError if a skip tree's plan is one where a resume is not
    exact (docs/DESIGN.md §5): layout contiguous or bytes with skip_world
    > 1, or record runs (run_bytes > 0)."""
    layout = plan.get("layout")
    w0 = int(plan.get("skip_world", "0") or 0) or plan.world_size
    if layout != "strided" and w0 != 1:
        raise ViewError(
            "%s: layout %s: resuming is exact only with layout = strided (or "
            "an old world size of 1); items would be missed and repeated. "
            "Pass allow_inexact=True to read it anyway" % (where, layout))
    if plan.is_records and int(plan.get("run_bytes", "0")) > 0:
        raise ViewError(
            "%s: run_bytes = %s: a record view dealt in runs resumes in runs, "
            "not records (not exact). Pass allow_inexact=True to read it anyway"
            % (where, plan.get("run_bytes")))


def need_rank_dir(tree, mount, rank):
    if not os.path.isdir(tree):
        plan = os.path.join(os.fspath(mount), ".shardfs", "plan")
        if not os.path.exists(plan):
            raise ViewError("%s: no such directory, and %s is not a shardfs mount "
                            "(no %s)" % (tree, os.fspath(mount), plan))
        raise ViewError("%s: no such directory: this node's mount does not show rank "
                        "%d (its [shard] ranks, or world_size <= %d)" % (tree, rank, rank))


class RankFiles:
    """Rank ``rank``'s files of a mount in the rank's read order, pads
    skipped (a pad's file is another rank's).

    epoch: None for the mount's configured epoch (``rank-R/``), or E for
        ``epoch-E/rank-R/``;
    resume: a ResumePoint (``shardfs.resume_point()``): read
        ``epoch-E/skip-K-of-W/rank-R/``, the rest of that epoch;
    allow_inexact: read a skip tree even where a resume is not exact.

    ``len()`` is the number of files; ``[i]`` reads file i and returns
    ``(key, data)`` (key: str, with undecodable bytes as surrogate escapes,
    ``os.fsdecode``), or ``transform(key, data)`` if a transform is given.
    ``keys`` (str), ``key_bytes`` and ``paths`` are the lists behind it.
    """

    def __init__(self, mount, rank, epoch=None, resume=None, transform=None,
                 allow_inexact=False):
        self.mount = os.fspath(mount)
        self.rank = rank
        self.subdir = view_subdir(epoch, resume)
        self.tree, self.order_path = rank_paths(self.mount, rank, self.subdir)
        need_rank_dir(self.tree, self.mount, rank)
        self.plan = read_plan(self.mount, self.subdir)
        if self.plan.is_records:
            raise ViewError("%s is a record view ([shard] unit = record): read it "
                            "with RecordDataset" % self.tree)
        if resume is not None and not allow_inexact:
            check_resume_exact(self.plan, self.tree)
        entries = read_order(self.order_path)
        self.key_bytes = [e.key for e in entries if not e.pad]
        self.pads = len(entries) - len(self.key_bytes)
        tree_b = os.fsencode(self.tree)
        self.paths = [os.fsdecode(os.path.join(tree_b, k)) for k in self.key_bytes]
        self.keys = [os.fsdecode(k) for k in self.key_bytes]
        self.transform = transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            data = f.read()
        key = self.keys[i]
        return self.transform(key, data) if self.transform else (key, data)
