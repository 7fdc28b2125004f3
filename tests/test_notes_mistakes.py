"""Mistakes from job folders like the user's that the rules catch: each fires where it is made and not where it is
not (the catalog's examples run the same rules on facts; these run them on job files as `lint` reads them)."""

import json

import pytest
from conftest import cli_in_process


def lint(path, select):
    done = cli_in_process("lint", str(path), "--format", "json", "--select", select, env={"NCCL_DEBUG": None})
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("line, fires", [
    ("export PYTHONPATH=/workspace/Megatron-LM:", True),
    ("export PYTHONPATH=:/workspace/Megatron-LM", True),
    ("export LD_LIBRARY_PATH=/usr/local/cuda/lib64::/opt/nccl/lib", True),
    ("export PYTHONPATH=/workspace/Megatron-LM:/workspace/apex", False),
    ("export PYTHONPATH=$PYTHONPATH:/workspace/Megatron-LM", False),  # the caller's part: not known to be empty
])
def test_an_empty_search_path_entry_is_the_current_directory(tmp_path, line, fires):
    job = tmp_path / "job.sh"
    job.write_text(f"#!/bin/bash\n{line}\npython train.py\n")
    report = lint(job, "GD434")
    assert ("GD434" in {f["rule"] for f in report["findings"]}) is fires
    if fires:
        (finding,) = report["findings"]
        assert "::" not in str(finding["fix"]["env"]["set"]) and finding["location"]["line"] == 2


@pytest.mark.parametrize("header, launch, fires", [
    ("", "CUDA_VISIBLE_DEVICES=0 python train.py", True),
    ("#SBATCH --nodes=1\n#SBATCH --gpus-per-node=1\n", "srun python train.py", True),
    ("", "torchrun --nproc_per_node=8 train.py", False),
    ("#SBATCH --gpus-per-node=8\n", "srun python train.py", False),
])
def test_nccl_settings_on_a_one_gpu_job_do_nothing(tmp_path, header, launch, fires):
    job = tmp_path / "run.sh"
    job.write_text(f"#!/bin/bash\n{header}export NCCL_NVLS_ENABLE=0\nexport TORCH_NCCL_AVOID_RECORD_STREAMS=1\n"
                   f"export CUDA_DEVICE_MAX_CONNECTIONS=1\n{launch}\n")
    report = lint(job, "GD435")
    found = sorted(f["evidence"]["variable"] for f in report["findings"])
    assert found == (["CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_NVLS_ENABLE", "TORCH_NCCL_AVOID_RECORD_STREAMS"]
                     if fires else [])
    assert all(f["severity"] == "info" for f in report["findings"])
