"""GD904: a Kubernetes pod that gets several GPUs and starts one process whose script drives one GPU."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from gpudoctor.catalog import load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.readers.registry import read_file
from gpudoctor.snapshot import Snapshot

K8S = FIXTURES / "launch" / "k8s"
RULES = [rule for rule in load_catalog() if rule.id in ("GD604", "GD605", "GD606", "GD904")]

PYTORCHJOB = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: resnet
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: nvcr.io/nvidia/pytorch:24.10-py3
              command: ["python", "/workspace/resnet_finetune.py", "--epochs", "30"]
              resources:
                limits:
                  nvidia.com/gpu: 8
"""


def lint(*paths):
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": []})
    for path in paths:
        read_file(path, snapshot)
    return evaluate(snapshot, RULES)


def verdict(report):
    return [(f.rule, str(f.severity), f.location.line) for f in report.findings]


def test_a_one_gpu_script_in_an_8_gpu_job():
    report = lint(K8S / "one_process_8gpu_job.yaml", K8S / "resnet_finetune.py")
    assert verdict(report) == [("GD904", "warning", 14)]
    finding, = report.findings
    assert "while 7 stay idle" in finding.message
    assert "torchrun --nproc_per_node=8 /workspace/resnet_finetune.py" in finding.fix.summary


def test_a_pytorchjob_master_running_a_one_gpu_script(tmp_path):
    """A PyTorchJob starts one process per pod: with a script that drives one GPU, GD606 has no ranks to count
    against the GPUs and GD904 says the seven idle ones."""
    (tmp_path / "job.yaml").write_text(PYTORCHJOB)
    (tmp_path / "resnet_finetune.py").write_bytes((K8S / "resnet_finetune.py").read_bytes())
    report = lint(tmp_path / "job.yaml", tmp_path / "resnet_finetune.py")
    assert verdict(report) == [("GD904", "warning", 14)] and 'nprocPerNode: "8"' in report.findings[0].fix.summary


def test_one_process_that_spreads_a_model_over_the_gpus_passes():
    report = lint(K8S / "one_process_sharded_job.yaml", K8S / "eval_sharded.py")
    assert not report.findings and "GD904" in report.passed


@pytest.mark.parametrize("line", [
    "model = model.to(f'cuda:{args.rank}')",  # a device index set at run time
    "n = torch.cuda.device_count()",
    "llm = LLM(model=name, tensor_parallel_size=8)",
    "model = nn.DataParallel(model)",  # GD605's
])
def test_a_script_that_may_use_the_other_gpus_is_left_alone(tmp_path, line):
    (tmp_path / "job.yaml").write_text((K8S / "one_process_8gpu_job.yaml").read_text())
    (tmp_path / "resnet_finetune.py").write_text("import torch\nimport torch.nn as nn\n" + line + "\n")
    report = lint(tmp_path / "job.yaml", tmp_path / "resnet_finetune.py")
    assert "GD904" not in {f.rule for f in report.findings}


def test_a_script_not_read_leaves_the_rule_unknown(tmp_path):
    (tmp_path / "job.yaml").write_text((K8S / "one_process_8gpu_job.yaml").read_text())  # no script beside it
    report = lint(tmp_path / "job.yaml")
    assert not report.findings and "GD904" in {item.rule for item in report.unknown}
