"""The README's trainer example (section "Reading it from a trainer") runs as
written against a real mount whose keys need every escape, including
bytes that are not UTF-8, and reads each rank's files of every epoch
once. The only edits: the mount path, and the training step (`...`)
replaced by a call that records the batch."""

import collections
import hashlib
import re
import textwrap

import pytest

import shardfs

from conftest import REPO, file_conf

W = 4


def readme_example():
    text = (REPO / "README.md").read_text()
    sec = text.split("## Reading it from a trainer", 1)[1]
    m = re.search(r"```python\n(.*?)```", sec, re.S)
    assert m, "no python block in README's 'Reading it from a trainer'"
    return m.group(1)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_readme_example_reads_every_file_of_each_epoch(mounts, files_src, tmp_path_factory,
                                                       monkeypatch):
    src, data = files_src
    m = mounts.mount(file_conf(src, str(tmp_path_factory.mktemp("cache")), world_size=W,
                               seed=3))
    code = readme_example()
    assert "/mnt/imagenet" in code and re.search(r"^\s+\.\.\.$", code, re.M)
    code = code.replace("/mnt/imagenet", str(m))
    code = re.sub(r"^(\s+)\.\.\.$", r"\1_seen.extend(batch)", code, count=1, flags=re.M)
    epochs = 2
    for rank in range(W):
        seen = []
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(W))
        g = {"__name__": "readme_example", "_seen": seen, "start_epoch": 0,
             "epochs": epochs, "skip": "", "resume": None,
             "decode": lambda blob: hashlib.sha256(blob).hexdigest()}
        exec(compile(textwrap.dedent(code), "README.md example", "exec"), g)
        want = collections.Counter()
        for e in range(epochs):
            want.update(hashlib.sha256(data[k]).hexdigest()
                        for k in shardfs.RankFiles(m, rank, epoch=e).key_bytes)
        assert collections.Counter(seen) == want
    mounts.unmount(m)
