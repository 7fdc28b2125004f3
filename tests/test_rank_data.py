"""GD618-GD620: what each rank receives (broadcast_object_list) and reads (DataLoader samplers), from the script
reader (gpudoctor.readers.python.broadcast, .samplers) through the rules; the broadcast fixtures also run for real
on two gloo ranks, so the verdicts are held to what torch does."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import FIXTURES

from gpudoctor.catalog import find_rule
from gpudoctor.engine import evaluate
from gpudoctor.readers.python.script import analyse
from gpudoctor.readers.registry import read_file
from gpudoctor.snapshot import Snapshot

SCRIPTS = FIXTURES / "scripts"
RULES = [find_rule(rule) for rule in ("GD618", "GD619", "GD620")]


def script(source: str) -> dict:
    result = analyse("train.py", textwrap.dedent(source).lstrip("\n").encode())
    assert result.script is not None, result.problems
    return result.script


def problems(source: str) -> list:
    return [(entry["problem"], entry["list_what"]) for entry in script(source)["broadcasts"]]


BROADCAST_HEADER = "import torch.distributed as dist\n"


@pytest.mark.parametrize("body,expected", [
    ("cfg = load() if dist.get_rank() == 0 else None\ndist.broadcast_object_list([cfg], src=0)\n",
     [("temporary", "[cfg]")]),
    ("def f(payload, rank):\n    dist.broadcast_object_list([payload if rank == 0 else None], src=0)\n",
     [("temporary", "[payload if rank == 0 else None]")]),
    ("def f(rank, x):\n    objs = [x] if rank == 0 else []\n    dist.broadcast_object_list(objs, src=0)\n",
     [("sizes", "objs = [x] if rank == 0 else []")]),
    ("def f(x, accelerator):\n    objs = []\n    if accelerator.is_main_process:\n        objs.append(x)\n"
     "    dist.broadcast_object_list(objs)\n", [("sizes", "objs.append(x)")]),
    ("objs = [None, None]\nif dist.get_rank() == 0:\n    objs = [1]\ndist.broadcast_object_list(objs)\n",
     [("sizes", "objs = [1]")]),
])
def test_a_list_the_other_ranks_cannot_receive_into(body, expected):
    assert problems(BROADCAST_HEADER + body) == expected


@pytest.mark.parametrize("body", [
    "def f(rank, x):\n    objs = [x] if rank == 0 else [None]\n    dist.broadcast_object_list(objs, src=0)\n",
    "if dist.get_rank() == 0:\n    objects = ['foo', 12, {1: 2}]\nelse:\n    objects = [None, None, None]\n"
    "dist.broadcast_object_list(objects, src=0)\n",  # torch's own docstring example
    "def f(n, x):\n    objs = [None] * n\n    dist.broadcast_object_list(objs, src=0)\n",
    "def f(args, x):\n    objs = []\n    if args.resume:\n        objs.append(x)\n"
    "    dist.broadcast_object_list(objs)\n",  # the same test on every rank
    "def send(obj, group):\n    dist.broadcast_object_list([obj], src=0, group=group)\n",  # a sender's helper
    "def f(self):\n    if self.rank == 0:\n        t = make()\n        dist.broadcast_object_list([t], src=0)\n"
    "    else:\n        box = [None]\n        dist.broadcast_object_list(box, src=0)\n        t = box[0]\n",
])
def test_a_list_of_one_length_everywhere_passes(body):
    assert problems(BROADCAST_HEADER + body) == []


DDP_HEADER = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
model = DDP(net)
"""


def loaders(body: str) -> list:
    data = script(DDP_HEADER + body)["data"]
    return [(entry["sampler"], entry["training"], entry["iterable"]) for entry in data["loaders"]]


@pytest.mark.parametrize("body,expected", [
    ("train_loader = DataLoader(train_set, batch_size=8, shuffle=True)\n", [("none", True, False)]),
    ("loader = DataLoader(ds, 8, False, DistributedSampler(ds))\n", [("distributed", False, False)]),
    ("kw = {'batch_size': 8, 'sampler': DistributedSampler(train_set)}\ntrain_loader = DataLoader(train_set, **kw)\n",
     [("distributed", True, False)]),
    ("def get(kw):\n    return DataLoader(train_set, **kw)\n", [("unknown", True, False)]),
    ("from torch.utils.data import IterableDataset\nclass Stream(IterableDataset):\n    pass\n"
     "train_loader = DataLoader(Stream(), batch_size=4)\n", [("none", True, True)]),
    ("ds = load_dataset('c4', split='train', streaming=True)\nloader = DataLoader(ds, batch_size=4)\n",
     [("none", False, True)]),
    ("from torch.utils.data import RandomSampler\n"
     "train_loader = DataLoader(train_set, sampler=RandomSampler(train_set))\n",
     [("other", True, False)]),
])
def test_how_a_loader_is_sampled(body, expected):
    assert loaders(body) == expected


@pytest.mark.parametrize("body,by", [
    ("from accelerate import Accelerator\nacc = Accelerator()\nloader = acc.prepare(DataLoader(ds, shuffle=True))\n",
     "Accelerator"),
    ("from transformers import Trainer\ntrainer = Trainer(model=model)\nloader = DataLoader(ds, shuffle=True)\n",
     "Trainer"),
    ("ds = ds.shard(num_shards=world, index=rank)\nloader = DataLoader(ds, shuffle=True)\n", "shard"),
    ("import deepspeed\nengine, _, loader, _ = deepspeed.initialize(model=m, training_data=ds)\n"
     "eval_loader = DataLoader(ds, shuffle=True)\n", "deepspeed.initialize"),
])
def test_what_splits_the_data_for_the_loaders(body, by):
    assert by in script(DDP_HEADER + body)["data"]["sharded_by"]["what"]


def test_a_sampler_handed_to_an_imported_train_function_escapes():
    data = script(DDP_HEADER + "from utils import train\nsampler = DistributedSampler(ds)\n"
                  "loader = DataLoader(ds, sampler=sampler)\nfor epoch in range(3):\n"
                  "    train(model, loader, epoch, sampler=sampler)\n")["data"]
    assert data["samplers"][0]["escapes"] is True and data["set_epoch"] is False


def lint(name):
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": []})
    read_file(SCRIPTS / name, snapshot)
    report = evaluate(snapshot, RULES)
    return {(f.rule, str(f.severity), f.location.line) for f in report.findings}, report


@pytest.mark.parametrize("name,expected", [
    ("ddp_no_sampler.py", {("GD619", "warning", 16)}),
    ("ddp_sampler_no_set_epoch.py", {("GD620", "warning", 17)}),
    ("ddp_sampler_set_epoch.py", set()),
    ("broadcast_config.py", {("GD618", "error", 15), ("GD618", "error", 21)}),
    ("broadcast_presized.py", set()),
])
def test_fixture_scripts(name, expected):
    found, report = lint(name)
    assert found == expected
    assert len(report.passed) == 3 - len({rule for rule, _, _ in expected})


def test_the_messages_name_the_list_the_loader_and_the_loop():
    _, report = lint("broadcast_config.py")
    temporary, sizes = sorted(report.findings, key=lambda f: f.location.line)
    assert "[config]" in temporary.message and "nothing keeps" in temporary.message
    assert "[run_id] if dist.get_rank() == 0 else []" in sizes.message and "same length" in sizes.message
    _, report = lint("ddp_sampler_no_set_epoch.py")
    assert "for epoch in range(3)" in report.findings[0].message


def run_on_two_gloo_ranks(name, tmp_path):
    config = tmp_path / "run.json"
    config.write_text('{"lr": 0.1}')
    env = dict(os.environ, RUN_CONFIG=str(config), RUN_ID="r7", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(SCRIPTS / name)], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_torch_agrees_the_flagged_broadcasts_never_arrive(tmp_path):
    """What GD618 says, on two real gloo ranks: the list built in the call leaves `config` None on rank 1, and the
    list that is empty there makes gloo abort; the pre-sized script hands both values over."""
    pytest.importorskip("torch.distributed")
    bad = run_on_two_gloo_ranks("broadcast_config.py", tmp_path)
    assert "rank 0 config {'lr': 0.1}" in bad.stdout and "rank 1 config None" in bad.stdout
    assert bad.returncode != 0 and "Received data size doesn't match expected size" in bad.stdout + bad.stderr
    good = run_on_two_gloo_ranks("broadcast_presized.py", tmp_path)
    assert good.returncode == 0, good.stderr[-2000:]
    assert "rank 1 config {'lr': 0.1}" in good.stdout and "rank 1 run id r7" in good.stdout
