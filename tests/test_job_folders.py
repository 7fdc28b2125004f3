"""Ordinary job folders as a new user lints them: a job that changes folder before starting its script, a Hugging
Face script that picks its GPUs from its own `--gpus`, a PyTorchJob whose script is elsewhere, and the messages
about a script that was not read."""

import json

import pytest
from conftest import cli_in_process

DDP = ("import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
       "dist.init_process_group('nccl')\nmodel = DDP(torch.nn.Linear(2, 2).cuda())\n")
HF = '''import argparse
import os

from transformers import Trainer, TrainingArguments


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--gpus", default="0")
    parser.add_argument("--deepspeed", default=None)
    args = parser.parse_args()
    os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
    training_args = TrainingArguments(output_dir=f"output/{args.config}", deepspeed=args.deepspeed)
    Trainer(model=None, args=training_args).train()


if __name__ == "__main__":
    main()
'''


def lint(*paths, select="GD6"):
    done = cli_in_process("lint", *map(str, paths), "--format", "json", "--select", select,
                          env={"COLUMNS": "120", "NCCL_DEBUG": None})
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def rules(report):
    return sorted(finding["rule"] for finding in report["findings"])


def unknown(report, rule):
    return next((item.get("reason") or item["missing"] for item in report["unknown"] if item["rule"] == rule), None)


@pytest.mark.parametrize("change", ["cd src && srun python train.py", "cd src\nsrun python train.py",
                                    "pushd src >/dev/null\nsrun python train.py\npopd",
                                    'DIR=src\ncd "$DIR"\nsrun python train.py',
                                    'cd "$SLURM_SUBMIT_DIR"/src && srun python train.py'])
def test_a_job_that_changes_folder_starts_the_script_in_that_folder(tmp_path, change):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(DDP)
    job = tmp_path / "job.sbatch"
    job.write_text(f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n{change}\n")
    report = lint(job)
    assert "GD604" in rules(report), report
    assert str(tmp_path / "src" / "train.py") in json.dumps(report["findings"])


def test_a_folder_set_at_run_time_is_said_not_guessed(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text('#!/bin/bash\n#SBATCH --nodes=2\ncd "$WORK/src"\nsrun python train.py\n')
    (tmp_path / "train.py").write_text(DDP)  # beside the job file, but the job runs elsewhere
    assert "in a folder the job files do not say" in unknown(lint(job), "GD604")


def test_a_module_the_job_starts_is_named_in_the_unknown_reason(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=2\nsrun python -m pkg.train\n")
    reason = unknown(lint(job), "GD604")
    assert "starts module pkg.train, which was not among the files read" in reason
    assert "the script it starts" not in reason


@pytest.mark.parametrize("arguments, expected", [
    ("--config paper_r64 --gpus 0", []),
    ("--config paper_r64 --gpus 0,1,2,3", ["GD605"]),  # the Trainer falls back to DataParallel: not DeepSpeed
    ("--config paper_r64 --gpus 0,1,2,3 --deepspeed ds.json", ["GD604"]),
])
def test_a_hugging_face_script_keeps_the_gpus_its_own_option_names(tmp_path, arguments, expected):
    (tmp_path / "train.py").write_text(HF)
    job = tmp_path / "run.sh"
    job.write_text(f"#!/bin/bash\npython train.py {arguments}\n")
    report = lint(job, tmp_path / "train.py")
    assert rules(report) == expected
    if expected == ["GD604"]:
        finding = report["findings"][0]
        assert finding["fix"]["commands"] == [f"torchrun --nproc_per_node=4 train.py {arguments}"]
        assert "4 GPUs (`--gpus 0,1,2,3`" in finding["message"]


def test_a_pytorchjob_master_on_eight_gpus_with_its_script_elsewhere_is_unknown(tmp_path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text("""apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ft}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: nvcr.io/nvidia/pytorch:24.05-py3
              command: ["python", "/workspace/train.py"]
              resources: {limits: {nvidia.com/gpu: 8}}
""")
    report = lint(manifest, select="GD606")
    assert "GD606" not in report["passed"]
    assert "whether /workspace/train.py starts its own ranks" in unknown(report, "GD606")
