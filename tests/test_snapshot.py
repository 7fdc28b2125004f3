"""Snapshots: record, replay, redact, and refuse bad files with one line and exit 2."""

import json
import subprocess

import pytest
from conftest import gpudoctor_cmd

from gpudoctor.redact import REDACTED, redact_data


@pytest.mark.slow
def test_snapshot_round_trip(tmp_path, run_cli, probes_once):
    path = tmp_path / "snap.json"
    code, out, err = run_cli("snapshot", "-o", path)
    assert code == 0 and out == ""
    data = json.loads(path.read_text())
    assert data["schema"] == "gpudoctor.snapshot/1"
    assert {"host", "nvml", "nvcc", "torch", "env"} <= set(data["facts"])
    code, out, _ = run_cli("check", "--snapshot", path, "--format", "json")
    report = json.loads(out)
    assert report["source"] == {"kind": "snapshot", "paths": [str(path)]}
    assert report["summary"]["error"] == 0 and code == 0


def test_secrets_are_redacted_in_snapshots(tmp_path):
    env = {"PATH": "/usr/bin", "HF_TOKEN": "hf_abcdef", "WANDB_API_KEY": "123", "NCCL_DEBUG": "INFO",
           "TORCH_HOME": "https://user:s3cret@example.com/cache", "AWS_SECRET_ACCESS_KEY": "x"}
    result = subprocess.run(gpudoctor_cmd() + ["snapshot", "--quick"], capture_output=True, text=True, env=env)
    facts = json.loads(result.stdout)["facts"]
    assert facts["env"]["HF_TOKEN"] == REDACTED
    assert facts["env"]["NCCL_DEBUG"] == "INFO"
    assert "s3cret" not in result.stdout and "hf_abcdef" not in result.stdout
    assert facts["env"]["TORCH_HOME"] == f"https://{REDACTED}@example.com/cache"


def test_redact_leaves_the_input_alone():
    facts = {"env": {"MY_PASSWORD": "p"}}
    assert redact_data(facts)["env"]["MY_PASSWORD"] == REDACTED
    assert facts["env"]["MY_PASSWORD"] == "p"


@pytest.mark.parametrize("content,needle", [
    ("not json at all", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"facts": {}}', "no 'schema'"),
    ('{"schema": "gpudoctor.report/1", "facts": {}}', "wrong schema"),
    ('{"schema": "gpudoctor.snapshot/2", "facts": {}}', "newer"),
    ('{"schema": "gpudoctor.snapshot/1"}', "no 'facts'"),
])
def test_bad_snapshots_exit_2_with_one_line(tmp_path, run_cli, content, needle):
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, out, err = run_cli("check", "--snapshot", path)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_snapshot_file(run_cli):
    code, _, err = run_cli("check", "--snapshot", "node.jsn")
    assert code == 2
    assert err == "gpudoctor: error: cannot read snapshot 'node.jsn': no such file\n"


def test_binary_snapshot(tmp_path, run_cli):
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run_cli("check", "--snapshot", path)
    assert code == 2 and err.count("\n") == 1
