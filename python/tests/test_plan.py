"""The plan-digest check over real mounts: equal plans pass, two mounts
with different seeds fail clearly, with a plain all_gather callable and
with torch.distributed (two real processes, gloo on 127.0.0.1); a rank
that cannot read its plan makes every rank fail, none wait."""

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import shardfs

from conftest import SHARDFS, file_conf


@pytest.fixture(scope="module")
def three(mounts, files_src, tmp_path_factory):
    """Two mounts of one config (two nodes of a job) and one with another seed."""
    src, _ = files_src
    c = str(tmp_path_factory.mktemp("cache"))
    a1 = mounts.mount(file_conf(src, c, world_size=2, seed=1))
    a2 = mounts.mount(file_conf(src, c, world_size=2, seed=1, ranks=1))
    b = mounts.mount(file_conf(src, c, world_size=2, seed=2))
    return a1, a2, b


def test_digest_is_the_plan_files_sha256_as_status_and_plan_say(three):
    a1, _, _ = three
    with open(os.path.join(str(a1), ".shardfs", "plan"), "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    assert shardfs.plan_digest(a1) == want
    with open(os.path.join(str(a1), ".shardfs", "stats")) as f:
        assert 'plan_sha256="%s"' % want in f.read()
    out = subprocess.run([SHARDFS, "plan", a1.conf], capture_output=True, timeout=60)
    assert out.returncode == 0 and hashlib.sha256(out.stdout).hexdigest() == want


def test_equal_plans_pass_different_seeds_fail_clearly(three):
    a1, a2, b = three
    d = shardfs.plan_digest(a2)
    assert shardfs.check_same_plan(a1, all_gather=lambda mine: [mine, d], rank=0,
                                   world_size=2) == d
    other = shardfs.plan_digest(b)
    assert other != d
    with pytest.raises(shardfs.PlanMismatch) as e:
        shardfs.check_same_plan(a1, all_gather=lambda mine: [mine, d, other], rank=0)
    msg = str(e.value)
    assert "2 different plans" in msg and "ranks 0-1: %s" % d in msg and \
        "ranks 2: %s" % other in msg and "pin the manifest" in msg
    with pytest.raises(shardfs.PlanMismatch, match="world_size = 2 but the job has 4 ranks"):
        shardfs.check_same_plan(a1, world_size=4)
    with pytest.raises(shardfs.PlanMismatch, match="expected 00"):
        shardfs.check_same_plan(a1, expected="00" * 32)
    assert shardfs.check_same_plan(a1, expected=d) == d


WORKER = textwrap.dedent("""
    import json, sys, datetime
    import torch.distributed as dist
    import shardfs, shardfs.torch
    rank, store, mounts = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                            world_size=2, timeout=datetime.timedelta(seconds=60))
    out = []
    for mount in mounts:  # one check per case, every rank in step
        try:
            out.append({"digest": shardfs.torch.check_same_plan(mount)})
        except (shardfs.PlanMismatch, OSError) as e:
            out.append({"error": type(e).__name__, "msg": str(e)})
    print(json.dumps(out))
    dist.destroy_process_group()
""")


@pytest.fixture(scope="module")
def two_ranks(three, tmp_path_factory):
    """One torch.distributed job of two processes (gloo on 127.0.0.1),
    rank r reading mount r of each case: the same plan (a1, a2), another
    seed (a1, b), no mount at all on rank 1. Returns each case's [rank 0's
    result, rank 1's]."""
    a1, a2, b = three
    tmp = tmp_path_factory.mktemp("dist")
    (tmp / "notmounted").mkdir()
    cases = [(a1, a2), (a1, b), (a1, tmp / "notmounted")]
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1",
               PYTHONPATH=os.path.dirname(os.path.dirname(shardfs.__file__)))
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(r), str(tmp / "store")] +
                              [str(c[r]) for c in cases],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for r in range(2)]
    out = []
    try:
        for p in procs:
            so, se = p.communicate(timeout=120)
            assert p.returncode == 0, se.decode(errors="replace")
            out.append(json.loads(so.decode().strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [[out[0][i], out[1][i]] for i in range(len(cases))]


def test_torch_distributed_same_and_different(three, two_ranks):
    a1, _, _ = three
    same, diff, _ = two_ranks
    assert same == [{"digest": shardfs.plan_digest(a1)}] * 2
    for r, res in enumerate(diff):
        assert res["error"] == "PlanMismatch", res
        assert re.search(r"rank %d: the job's ranks read 2 different plans \(ranks 0: "
                         r"[0-9a-f]{64}; ranks 1: [0-9a-f]{64}\)" % r, res["msg"]), res


def test_torch_distributed_a_rank_without_a_mount_fails_every_rank(two_ranks):
    res = two_ranks[2]
    assert res[0]["error"] == "PlanMismatch" and \
        "rank 1: " in res[0]["msg"] and "a shardfs mount" in res[0]["msg"], res
    assert res[1]["error"] == "FileNotFoundError", res
