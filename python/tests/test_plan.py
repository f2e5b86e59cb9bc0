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
    rank, store, mount = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                            world_size=2, timeout=datetime.timedelta(seconds=60))
    try:
        print(json.dumps({"digest": shardfs.torch.check_same_plan(mount)}))
    except (shardfs.PlanMismatch, OSError) as e:
        print(json.dumps({"error": type(e).__name__, "msg": str(e)}))
    dist.destroy_process_group()
""")


def run_two(tmp_path, m0, m1):
    """Runs the check in two processes of one torch.distributed job, rank
    r reading mount m_r; returns their JSON results."""
    store = tmp_path / "store"
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1",
               PYTHONPATH=os.path.dirname(os.path.dirname(shardfs.__file__)))
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(r), str(store), str(m)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for r, m in enumerate((m0, m1))]
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
    return out


def test_torch_distributed_same_and_different(three, tmp_path):
    a1, a2, b = three
    for d in ("same", "diff"):
        (tmp_path / d).mkdir()
    same = run_two(tmp_path / "same", a1, a2)
    assert same == [{"digest": shardfs.plan_digest(a1)}] * 2
    diff = run_two(tmp_path / "diff", a1, b)
    for r, res in enumerate(diff):
        assert res["error"] == "PlanMismatch", res
        assert re.search(r"rank %d: the job's ranks read 2 different plans \(ranks 0: "
                         r"[0-9a-f]{64}; ranks 1: [0-9a-f]{64}\)" % r, res["msg"]), res


def test_torch_distributed_a_rank_without_a_mount_fails_every_rank(three, tmp_path):
    a1, _, _ = three
    (tmp_path / "x").mkdir()
    (tmp_path / "notmounted").mkdir()
    res = run_two(tmp_path / "x", a1, tmp_path / "notmounted")
    assert res[0]["error"] == "PlanMismatch" and \
        "rank 1: " in res[0]["msg"] and "a shardfs mount" in res[0]["msg"], res
    assert res[1]["error"] == "FileNotFoundError", res
