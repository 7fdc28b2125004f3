"""The reader registry: a job file is read by one format, parsed once, and that one parse gives all its facts."""

import ast
import dataclasses
import os

import pytest
import yaml
from conftest import FIXTURES

from gpudoctor.readers import ds_config, registry
from gpudoctor.readers.dockerfile import env as dockerfile_env
from gpudoctor.readers.dotenv import grammar as dotenv_grammar
from gpudoctor.readers.shell import parser
from gpudoctor.snapshot import Snapshot

LAUNCH = FIXTURES / "launch"


def count_calls(monkeypatch, owners, name: str) -> list:
    """Record each call of `owner.name` (for every owner that holds its own reference)."""
    calls = []
    for owner in owners:
        original = getattr(owner, name)

        def counted(*args, _original=original, **kwargs):
            calls.append(name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)
    return calls


PYTHON_LAUNCHER = '''import os
import nemo_run as run

os.environ["NCCL_DEBUG"] = "WARN"
executor = run.SlurmExecutor(ntasks_per_node=8, gpus_per_node=8)
'''


@pytest.mark.parametrize("name,text,owners,parse,parts", [
    ("launch.py", PYTHON_LAUNCHER, [ast], "parse", ("env", "script", "launch")),
    ("pod.yaml", (LAUNCH / "k8s" / "jobset_torchrun.yaml").read_text(), [yaml], "compose_all", ("env", "launch")),
    ("job.sbatch", (LAUNCH / "clean_torchrun.sbatch").read_text(), [parser.Walker], "walk", ("env", "launch")),
    ("Dockerfile", "FROM pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime\nENV NCCL_DEBUG=WARN\n"
     'CMD ["torchrun", "--nproc_per_node=8", "train.py"]\n', [dockerfile_env], "instructions",
     ("env", "launch")),
    (".env", "NCCL_DEBUG=WARN\nexport NCCL_IB_HCA='mlx5'\n", [dotenv_grammar], "read", ("env",)),
    ("nccl.conf", "NCCL_DEBUG=WARN\n", [dotenv_grammar], "read_nccl_conf", ("env",)),
    ("ds.json", '{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}}', [ds_config], "parse",
     ("ds_config",)),
])
def test_one_parse_gives_every_fact_of_a_file(monkeypatch, tmp_path, name, text, owners, parse, parts):
    path = tmp_path / name
    path.write_text(text)
    calls = count_calls(monkeypatch, owners, parse)
    snapshot = Snapshot(facts={"env": {}})
    registry.read_file(path, snapshot)
    assert len(calls) == 1
    given = {"env": bool(snapshot.facts["env"]), "script": bool(snapshot.facts.get("scripts")),
             "launch": bool(snapshot.facts.get("launch", {}).get("jobs")), "ds_config": "ds_config" in snapshot.facts}
    assert {part for part, found in given.items() if found} == set(parts)


def test_check_script_takes_only_the_script_facts(tmp_path):
    path = tmp_path / "launch.py"
    path.write_text(PYTHON_LAUNCHER)
    snapshot = Snapshot(facts={"env": {}})
    registry.read_file(path, snapshot, part="script")
    assert snapshot.facts["scripts"] and snapshot.facts["env"] == {} and "launch" not in snapshot.facts


def test_a_file_without_the_part_asked_for_is_reported(tmp_path):
    path = tmp_path / "job.sh"
    path.write_text("export NCCL_DEBUG=WARN\n")
    snapshot = Snapshot(facts={"env": {}})
    registry.read_file(path, snapshot, part="script")
    (entry,) = snapshot.facts["inputs"]
    assert entry["kind"] == "script" and "not a file gpudoctor knows" in entry["error"]
    assert snapshot.facts["env"] == {}


def test_a_container_script_is_walked_once_for_its_env_and_its_jobs(monkeypatch, tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n"
                    '    command: ["/bin/bash", "-c"]\n    args:\n    - |\n      export NCCL_DEBUG=WARN\n'
                    "      torchrun --nproc_per_node=8 train.py\n")
    calls = count_calls(monkeypatch, [parser.Walker], "walk")
    snapshot = Snapshot(facts={"env": {}})
    registry.read_file(path, snapshot)
    assert len(calls) == 1
    assert snapshot.facts["env"] == {"NCCL_DEBUG": "WARN"}
    assert [job["line"] for job in snapshot.facts["launch"]["jobs"]] == [11]


def test_a_batch_script_and_its_directives_are_tokenized_once(monkeypatch, tmp_path):
    """The `#SBATCH` lines are comments of the script's one tokenization; each directive's own words are split
    once, for its resources and its `--export` alike."""
    text = ("#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gres=gpu:4 --export=ALL,NCCL_DEBUG=INFO\nsrun python train.py\n"
            "#SBATCH --time=1:00:00\n")
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    tokenized = []
    original = parser.Tokenizer.run

    def run(self):
        tokenized.append(self.text)
        return original(self)

    monkeypatch.setattr(parser.Tokenizer, "run", run)
    snapshot = Snapshot(facts={"env": {}})
    registry.read_file(path, snapshot)
    assert sorted(tokenized) == sorted([text, "-N 2", "--gres=gpu:4 --export=ALL,NCCL_DEBUG=INFO"])
    (job,) = snapshot.facts["launch"]["jobs"]
    assert (job["nodes"]["count"], job["gpus"]["count"]) == (2, 4)
    assert [entry["line"] for entry in job["ignored_directives"]] == [5]
    assert snapshot.facts["env"]["NCCL_DEBUG"] == "INFO"


def test_a_manifest_is_walked_once_for_its_env_and_its_pods(monkeypatch, tmp_path):
    """The env reader and the pod reader are handed each node of one walk: no node is visited twice."""
    from gpudoctor.readers.k8s import nodes

    path = tmp_path / "job.yaml"
    path.write_text((LAUNCH / "k8s" / "jobset_torchrun.yaml").read_text())
    visited = []
    original = nodes._node

    def visit(node, *args):
        visited.append(id(node))
        return original(node, *args)

    monkeypatch.setattr(nodes, "_node", visit)
    snapshot = Snapshot(facts={"env": {}})
    registry.read_file(path, snapshot)
    assert visited and len(visited) == len(set(visited))
    assert snapshot.facts["env"] and snapshot.facts["launch"]["pods"] and snapshot.facts["launch"]["jobs"]


def test_a_python_file_is_walked_once_for_all_its_facts(monkeypatch, tmp_path):
    """One parse and one walk of the module give its env, its script analysis and its nemo_run jobs: no reader
    walks the tree again (ast.walk, a NodeVisitor) or starts another walk from the module."""
    path = tmp_path / "launch.py"
    path.write_text(PYTHON_LAUNCHER + "import torch.distributed as dist\n\nif __name__ == \"__main__\":\n"
                    "    dist.init_process_group(\"nccl\")\n    run.run(recipe, executor=executor)\n")
    expanded, walks = [], []
    original = ast.iter_child_nodes

    def children(node):
        expanded.append(node)
        return original(node)

    monkeypatch.setattr(ast, "iter_child_nodes", children)
    monkeypatch.setattr(ast, "walk", lambda node: walks.append(node) or original(node))
    monkeypatch.setattr(ast.NodeVisitor, "visit", lambda self, node: walks.append(node))
    parses = count_calls(monkeypatch, [ast], "parse")
    snapshot = Snapshot(facts={"env": {}})
    registry.read_file(path, snapshot)
    assert len(parses) == 1 and walks == []
    assert sum(isinstance(node, ast.Module) for node in expanded) == 1
    (script,) = snapshot.facts["scripts"]
    assert script["launch"]["init"][0]["kind"] == "init_process_group"
    assert snapshot.facts["env"] == {"NCCL_DEBUG": "WARN"}
    assert snapshot.facts["launch"]["jobs"][0]["kind"] == "nemo_run"


TREE_SOURCE = '''import os
class Trainer:
    def fit(self, loader=[x for x in range(3) if x]):
        f = lambda y: os.environ.get("RANK", y)
        return {k: v for k, v in zip("ab", (f(1), 2))}
if __name__ == "__main__":
    Trainer().fit()
'''


def test_the_one_walk_answers_as_the_walks_it_replaces():
    """Tree.walk is ast.walk's order, Tree.postorder children first without nested scopes, Tree.visit a
    NodeVisitor's enter/leave order: for the module and for any node of it."""
    from gpudoctor.readers.python.tree import SCOPES, Tree

    module = ast.parse(TREE_SOURCE)
    tree = Tree(module)

    def postorder(node):
        inner = [] if node is not module and isinstance(node, SCOPES) else ast.iter_child_nodes(node)
        return [found for child in inner for found in postorder(child)] + [node]

    def visits(node):
        return [("enter", node)] + [event for child in ast.iter_child_nodes(node) for event in visits(child)] \
            + [("leave", node)]

    for node in [None] + list(ast.walk(module)):
        assert tree.walk(node) == list(ast.walk(node or module))
    scope = module.body[1].body[0]
    assert tree.postorder(module) == [n for n in postorder(module) if not isinstance(n, SCOPES) or n is module]
    assert [type(n).__name__ for n in tree.postorder(scope)][-1] == "FunctionDef"
    assert not any(isinstance(n, ast.Lambda) for n in tree.postorder(scope))
    events = []

    class Recorder:
        def enter(self, node):
            events.append(("enter", node))

        def leave(self, node):
            events.append(("leave", node))

    tree.visit(Recorder())
    assert events == visits(module)


def record_reads(monkeypatch) -> list:
    """Record each (format, file) the registry reads."""
    reads = []

    def recorded(fmt):
        def read(path, text):
            reads.append((fmt.name, os.path.basename(path)))
            return fmt.read(path, text)
        return dataclasses.replace(fmt, read=read)

    monkeypatch.setattr(registry, "FORMATS", tuple(recorded(fmt) for fmt in registry.FORMATS))
    return reads


@pytest.mark.parametrize("command", ["lint", "env-file"])
def test_a_script_a_job_starts_is_read_through_the_registry(monkeypatch, tmp_path, command):
    """A job's script that is not among the files given (`lint job.sbatch`, `check --env-file job.sbatch`) is read
    by the registry's Python format, once, like a script given itself; `python train` (no suffix) too."""
    from gpudoctor.gather import files_snapshot

    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n#SBATCH -N 1\nsrun torchrun --nproc_per_node=4 train.py\n"
                                         "srun python train\n")
    (tmp_path / "train.py").write_text("import torch.distributed as dist\ndist.init_process_group('nccl')\n")
    (tmp_path / "train").write_text("import torch\ntorch.cuda.init()\n")
    monkeypatch.chdir(tmp_path)
    reads = record_reads(monkeypatch)
    if command == "lint":
        snapshot = files_snapshot(["job.sbatch"])
    else:
        snapshot = Snapshot(facts={"env": {}}, source={"kind": "live", "paths": []})
        registry.read_env_files(["job.sbatch"], snapshot)
    assert sorted(reads) == [("python", "train"), ("python", "train.py"), ("shell", "job.sbatch")]
    assert [job["script"]["analysed_as"] for job in snapshot.facts["launch"]["jobs"]] == ["train.py", "train"]
    assert [entry["path"] for entry in snapshot.facts["scripts"]] == ["train.py", "train"]


@pytest.mark.parametrize("given", [["."], ["job.sbatch", "train.py"]])
def test_a_script_a_job_starts_is_parsed_once_when_linted_with_it(monkeypatch, tmp_path, given):
    """`lint DIR` and `lint job.sbatch train.py`: the job file's script is analysed from the script's own read
    (the job file comes first, in both), not read and parsed a second time."""
    from gpudoctor.gather import files_snapshot

    (tmp_path / "job.sbatch").write_text("#!/bin/bash\n#SBATCH -N 1\nsrun torchrun --nproc_per_node=4 train.py\n")
    (tmp_path / "train.py").write_text("import os\nimport torch.distributed as dist\n"
                                       "os.environ['NCCL_DEBUG'] = 'WARN'\ndist.init_process_group('nccl')\n")
    monkeypatch.chdir(tmp_path)
    parses = count_calls(monkeypatch, [ast], "parse")
    snapshot = files_snapshot(given)
    assert len(parses) == 1
    (job,) = snapshot.facts["launch"]["jobs"]
    assert os.path.samefile(job["script"]["analysed_as"], tmp_path / "train.py")
    assert [s["launch"]["init"][0]["kind"] for s in snapshot.facts["scripts"]] == ["init_process_group"]
    assert snapshot.facts["env"] == {"NCCL_DEBUG": "WARN"}
