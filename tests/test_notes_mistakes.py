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
