"""shardfs: read shardfs mounts from training code.

A shardfs mount shows each rank its share of a dataset as a directory
(``rank-R/``, ``epoch-E/rank-R/``, ``epoch-E/skip-K-of-W/rank-R/``) with
its read order in ``.shardfs/``. This package reads them; it needs
nothing but the standard library (``shardfs.torch`` adds PyTorch
datasets):

    RankFiles(mount, rank, epoch=None, resume=None)   a rank's files, in order
    RankRecords(mount, rank, ...)                      a record view's records
    resume_point(epoch, steps, batch_size, world_size) where a preempted job resumes
    check_same_plan(mount, all_gather=...)             every rank reads one plan
    read_order, unescape, read_plan, plan_digest       the control files

The mount's layout and files: docs/DESIGN.md §3 and §5, docs/RECORDS.md.
"""

from .order import OrderEntry, OrderError, escape, parse_order, read_order, unescape
from .plan import (Plan, PlanError, PlanMismatch, check_same_plan, plan_digest,
                   plan_path, read_plan)
from .records import (Record, RecordError, RankRecords, iter_jsonl, iter_records,
                      iter_tfrecord, iter_webdataset)
from .resume import ResumePoint, resume_point
from .views import RankFiles, ViewError, rank_paths, view_subdir

__version__ = "0.1.0"

__all__ = [
    "OrderEntry", "OrderError", "escape", "parse_order", "read_order", "unescape",
    "Plan", "PlanError", "PlanMismatch", "check_same_plan", "plan_digest",
    "plan_path", "read_plan",
    "Record", "RecordError", "RankRecords", "iter_jsonl", "iter_records",
    "iter_tfrecord", "iter_webdataset",
    "ResumePoint", "resume_point",
    "RankFiles", "ViewError", "rank_paths", "view_subdir",
]
