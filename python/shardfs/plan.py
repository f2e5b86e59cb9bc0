"""A mount's plan (``.shardfs/plan``) and the check that every rank of a
job reads the same one.

The plan file is ``name value`` lines (spec, manifest_sha256,
world_size, seed, epoch, order, layout, balance, reshuffle, ...), one
``rank R items N pad P bytes B`` line per rank, and for a record view
``rank R records N pad P bytes B`` lines. It names everything the split
depends on, so its SHA-256, the **plan digest** (``shardfs status``,
``shardfs_plan_info`` in the stats), is equal on every node of a job iff
the nodes serve the same split. A node with another manifest (not
pinned), seed or world_size silently trains on an overlapping share;
checking the digest at start turns that into an error.
"""

import collections
import hashlib
import os

__all__ = ["Plan", "PlanError", "PlanMismatch", "read_plan", "plan_path",
           "plan_digest", "check_same_plan"]


class PlanError(ValueError):
    """A plan file that is not what a shardfs mount writes."""


class PlanMismatch(RuntimeError):
    """The ranks of a job do not read the same plan."""


RankLine = collections.namedtuple("RankLine", "rank count pad bytes")


class Plan:
    """A parsed plan file.

    fields: dict of the ``name value`` lines (values are strings);
    ranks: the ``rank R items ...`` lines (RankLine), index = rank;
    record_ranks: the ``rank R records ...`` lines of a record view;
    digest: the SHA-256 of the file's bytes, lowercase hex.
    """

    def __init__(self, data, name="plan"):
        self.digest = hashlib.sha256(data).hexdigest()
        self.fields = {}
        self.ranks = []
        self.record_ranks = []
        if not data.endswith(b"\n"):
            raise PlanError("%s: empty, or the last line has no newline" % name)
        for n, raw in enumerate(data[:-1].split(b"\n"), 1):
            try:
                line = raw.decode("ascii")
            except UnicodeDecodeError:
                raise PlanError("%s:%d: not ASCII" % (name, n)) from None
            w = line.split(" ")
            if w[0] == "rank":
                if (len(w) != 8 or w[2] not in ("items", "records") or w[4] != "pad"
                        or w[6] != "bytes" or not all(x.isdigit() for x in w[1::2])):
                    raise PlanError("%s:%d: not 'rank R items|records N pad P bytes B': %r"
                                    % (name, n, line))
                lst = self.ranks if w[2] == "items" else self.record_ranks
                r = RankLine(int(w[1]), int(w[3]), int(w[5]), int(w[7]))
                if r.rank != len(lst):
                    raise PlanError("%s:%d: rank %d out of order" % (name, n, r.rank))
                lst.append(r)
            elif len(w) >= 2 and w[0] and w[1]:
                # A value may hold spaces: "spec shardfs-shard v1".
                self.fields.setdefault(w[0], line[len(w[0]) + 1:])
            else:
                raise PlanError("%s:%d: not 'name value': %r" % (name, n, line))
        if "spec" not in self.fields or "world_size" not in self.fields:
            raise PlanError("%s: no spec or world_size line: not a shardfs plan" % name)

    def __getitem__(self, name):
        return self.fields[name]

    def get(self, name, default=None):
        return self.fields.get(name, default)

    @property
    def world_size(self):
        return int(self.fields["world_size"])

    @property
    def is_records(self):
        return self.fields.get("unit") == "record"


def plan_path(mount, subdir=""):
    """``MOUNT/.shardfs[/SUBDIR]/plan``; subdir e.g. ``epoch-3`` or a
    ResumePoint's ``subdir``."""
    return os.path.join(os.fspath(mount), ".shardfs", subdir, "plan") if subdir \
        else os.path.join(os.fspath(mount), ".shardfs", "plan")


def read_plan(mount, subdir=""):
    """The Plan of a mount (or of its ``epoch-E[/skip-K-of-W]`` tree).
    Raises FileNotFoundError with a hint when MOUNT is not a shardfs
    mount, PlanError on a malformed file."""
    path = plan_path(mount, subdir)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            "%s: no such file: is %s a shardfs mount (and is it mounted)?"
            % (path, os.fspath(mount))) from None
    return Plan(data, path)


def plan_digest(mount, subdir=""):
    """The plan digest (SHA-256 hex of the plan file) of a mount."""
    return read_plan(mount, subdir).digest


def check_same_plan(mount, all_gather=None, rank=None, world_size=None,
                    expected=None, subdir=""):
    """Checks that every rank of a job reads the same plan; returns this
    rank's plan digest, or raises PlanMismatch saying which ranks differ.

    all_gather: a callable that takes this rank's digest (a str) and
        returns the list of every rank's, in rank order (e.g.
        ``mpi4py``'s ``comm.allgather``, or a launcher's key-value store);
        ``shardfs.torch.check_same_plan`` passes torch.distributed's.
    world_size: the job's number of ranks; the mount's ``[shard]
        world_size`` must equal it (checked also without all_gather).
    expected: a digest every rank must have (e.g. from the job's
        environment, computed once with ``shardfs plan CONFIG |
        sha256sum``).
    rank: this rank, for the messages.
    """
    who = "" if rank is None else "rank %d: " % rank
    plan, err = None, None
    try:
        plan = read_plan(mount, subdir)
    except (OSError, PlanError) as e:
        err = e
    if all_gather is not None:
        # Gather even when this rank cannot read its plan: a rank that
        # raised before the collective would leave the others waiting in
        # it. Every rank then sees every failure and raises.
        digests = [str(d) for d in all_gather(
            plan.digest if plan is not None else "error: %s" % err)]
        if err is not None:
            raise err
        failed = [(r, d) for r, d in enumerate(digests) if d.startswith("error: ")]
        if failed:
            raise PlanMismatch("%s%d rank(s) could not read their plan: %s"
                               % (who, len(failed), "; ".join(
                                   "rank %d: %s" % (r, d[7:]) for r, d in failed)))
        groups = collections.OrderedDict()
        for r, d in enumerate(digests):
            groups.setdefault(d, []).append(r)
        if len(groups) > 1:
            detail = "; ".join("ranks %s: %s" % (_ranks_text(rs), d)
                               for d, rs in groups.items())
            raise PlanMismatch(
                "%sthe job's ranks read %d different plans (%s): the nodes' "
                "mounts differ in their manifest or [shard] keys; compare "
                "their .shardfs/plan files (pin the manifest, use one config)"
                % (who, len(groups), detail))
    elif err is not None:
        raise err
    if world_size is not None and plan.world_size != world_size:
        raise PlanMismatch(
            "%s%s serves [shard] world_size = %d but the job has %d ranks: "
            "set world_size = %d in the mount's config"
            % (who, os.fspath(mount), plan.world_size, world_size, world_size))
    if expected is not None and plan.digest != expected:
        raise PlanMismatch("%s%s: plan digest %s, expected %s"
                           % (who, plan_path(mount, subdir), plan.digest, expected))
    return plan.digest


def _ranks_text(rs):
    """[0, 1, 2, 5] -> '0-2,5'."""
    out, i = [], 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else "%d-%d" % (rs[i], rs[j]))
        i = j + 1
    return ",".join(out)
