"""Resume points: where a preempted job picks up, as docs/DESIGN.md §5
("When a resume is exact") defines it.

A job on W0 ranks stopped after every rank consumed its first c items of
epoch E (c = steps done x batch size per rank). With ``layout = strided``
(the default) the job then consumed exactly the first K = c x W0
positions of the epoch's sequence, whatever the balance, and
``epoch-E/skip-K-of-W0/rank-R/`` serves the rest of epoch E re-sharded
over the new mount's ``world_size``: every remaining item exactly once
(balance none or pad; pad adds copies of the head as pads, drop drops up
to W-1 more). K past the end gives empty ranks: the epoch is done.

Not exact: ``layout = contiguous`` or ``bytes`` with W0 > 1 (the consumed
items are a prefix of each rank's block, not of the sequence), and record
views with ``run_bytes`` > 0 (K then counts runs' positions). RankFiles
and RecordDataset refuse those unless told ``allow_inexact=True``.
"""

import collections

__all__ = ["ResumePoint", "resume_point", "MAX_WORLD"]

# The mount's bound on a skip-K-of-W name's W (the config's bound on
# world_size, 2^20).
MAX_WORLD = 1 << 20
_U64 = (1 << 64) - 1


class ResumePoint(collections.namedtuple("ResumePoint", "epoch skip skip_world")):
    """Epoch E from position ``skip`` (K) of its sequence on, positions
    counted on ``skip_world`` (W0) ranks."""

    __slots__ = ()

    @property
    def name(self):
        """``skip-K-of-W0``: the directory under ``epoch-E/``."""
        return "skip-%d-of-%d" % (self.skip, self.skip_world)

    @property
    def subdir(self):
        """``epoch-E/skip-K-of-W0``: relative to the mount (trees) and to
        its ``.shardfs/`` (orders and plan)."""
        return "epoch-%d/%s" % (self.epoch, self.name)


def _count(name, v, low=0, high=_U64):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s must be an int, not %r" % (name, v))
    if not low <= v <= high:
        raise ValueError("%s = %d is out of range (%d..%d)" % (name, v, low, high))
    return v


def resume_point(epoch, steps, batch_size, world_size):
    """The resume point of a job of ``world_size`` ranks (W0) that stopped
    in ``epoch`` after ``steps`` steps of ``batch_size`` items per rank
    (every rank: ranks that stopped at different steps resume from the
    smallest, which serves the items past it again and misses none).

    Returns a ResumePoint; its ``subdir`` is the directory to read on the
    new mount (``world_size`` there is the new job's). Raises TypeError or
    ValueError naming a bad argument.
    """
    _count("epoch", epoch)
    _count("steps", steps)
    _count("batch_size", batch_size, 1)
    _count("world_size", world_size, 1, MAX_WORLD)
    k = steps * batch_size * world_size
    if k > _U64:
        raise ValueError("steps x batch_size x world_size = %d is past 2^64-1" % k)
    return ResumePoint(epoch, k, world_size)
