"""`gpudoctor lint FILE...` end to end, as a user runs it: exit codes, output, no tracebacks. The CLI runs in this
process (as run from a folder at 120 columns); one test runs it as a real command, for its exit codes."""

import json
import os
import subprocess

import pytest
from conftest import FIXTURES, ROOT, cli_in_process, gpudoctor_cmd

JOBS = FIXTURES / "jobs"


def lint(*args, cwd=ROOT, process=False):
    argv = ["lint", *map(str, args)]
    if process:
        env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")
        env.pop("NCCL_DEBUG", None)
        done = subprocess.run(gpudoctor_cmd() + argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    else:
        done = cli_in_process(*argv, cwd=cwd, env={"COLUMNS": "120", "NCCL_DEBUG": None})
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_seed_002_exports_json():
    done = lint(JOBS / "seed002_nccl_exports.sh", "--format", "json")
    assert done.returncode == 0, done.stderr  # warnings and info only: below the default --fail-on error
    report = json.loads(done.stdout)
    assert report["schema"] == "gpudoctor.report/1"
    found = sorted((f["rule"], f["evidence"]["variable"], f["location"]["line"]) for f in report["findings"])
    assert ("GD401", "NCCL_ALGO_ALL", 10) in found and ("GD401", "NCCL_COMM_WAIT_TIMEOUT", 47) in found
    assert ("GD404", "NCCL_CHECKS_DISABLE", 38) in found
    assert report["summary"]["error"] == 0 and report["summary"]["warning"] == 9  # 4 GD411: EFA spares only NCCL_PROTO
    for finding in report["findings"]:
        assert finding["fix"]["env"]["set"] or finding["fix"]["env"]["unset"]


@pytest.mark.slow
def test_fail_on_warning_exits_1():  # the exit codes a shell sees, from a real process
    assert lint(JOBS / "seed002_nccl_exports.sh", "--fail-on", "warning", "-q", process=True).returncode == 1
    assert lint(JOBS / "clean_pytorchjob.yaml", "--fail-on", "warning", "-q", process=True).returncode == 0  # info


def test_plain_output_points_at_file_and_line():
    done = lint(JOBS / "seed002_nccl_exports.sh", "--format", "plain", "--select", "GD401")
    assert done.returncode == 0
    assert "seed002_nccl_exports.sh:11" in done.stdout and "NCCL_ALGO_TREE" in done.stdout
    assert "GD404" not in done.stdout


def test_clean_jobs_exit_0_with_nothing_to_report():
    done = lint(JOBS / "clean_multinode.sbatch", JOBS / "clean_pytorchjob.yaml", "--format", "json")
    assert done.returncode == 0
    report = json.loads(done.stdout)
    assert report["summary"]["error"] == report["summary"]["warning"] == report["summary"]["unknown"] == 0
    assert {f["rule"] for f in report["findings"]} <= {"GD411", "GD903"}  # a site's GDR cutoff, the EKS memlock note


def test_bad_input_is_reported_with_its_line_and_exit_1():
    done = lint(JOBS / "bad_manifest.yaml", JOBS / "bad_job.sh", JOBS / "bad.env", JOBS / "Dockerfile.bad",
                "--format", "json")
    assert done.returncode == 1  # GD003 and GD402 are errors
    report = json.loads(done.stdout)
    unreadable = {(f["location"]["path"].rsplit("/", 1)[-1], f["location"]["line"])
                  for f in report["findings"] if f["rule"] == "GD003"}
    assert ("bad_manifest.yaml", 29) in unreadable and ("bad.env", 5) in unreadable


def test_missing_file_is_a_usage_error():
    done = lint("no/such/job.sbatch")
    assert done.returncode == 2
    assert done.stderr.startswith("gpudoctor: error:") and len(done.stderr.strip().splitlines()) == 1


def test_unknown_file_kind_is_reported_not_raised(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# not a job file\n")
    done = lint(path, "--format", "json")
    assert done.returncode == 1
    assert [f["rule"] for f in json.loads(done.stdout)["findings"]] == ["GD003"]


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage\x00", b"", b"export A=\"\n" * 3, b"\x00" * 100])
def test_binary_and_empty_files_never_crash(tmp_path, content):
    path = tmp_path / "job.sh"
    path.write_bytes(content)
    done = lint(path)
    assert done.returncode in (0, 1)


def test_lint_does_not_judge_this_host(tmp_path):
    """NCCL_SOCKET_IFNAME naming an interface this machine lacks is the cluster's business, not lint's."""
    path = tmp_path / "job.sbatch"
    path.write_text("#!/bin/bash\nexport NCCL_SOCKET_IFNAME==no-such-interface0\nexport NCCL_IB_DISABLE=1\n")
    done = lint(path, "--format", "json")
    assert done.returncode == 0 and json.loads(done.stdout)["findings"] == []


@pytest.mark.slow
def test_check_env_file_end_to_end(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("NCCL_PROTO=simple2\nNCCL_DEBUG=WARN\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(gpudoctor_cmd() + ["check", "--select", "GD402", "--env-file", str(env_file), "--format",
                                             "json", "--timeout", "20"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=180)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1
    (finding,) = json.loads(done.stdout)["findings"]
    assert finding["location"] == {"path": str(env_file), "line": 1, "column": None}


@pytest.mark.parametrize("option,what", [("--env-file", "env file"), ("--script", "script"),
                                         ("--ds-config", "DeepSpeed config")])
def test_a_missing_file_is_refused_before_anything_is_probed(tmp_path, monkeypatch, run_cli, option, what):
    from gpudoctor import probes

    monkeypatch.setattr(probes, "run_probes", lambda *a, **k: pytest.fail("the machine was probed first"))
    missing = tmp_path / "nope"
    code, out, err = run_cli("check", option, missing)
    assert (code, out, err) == (2, "", f"gpudoctor: error: cannot read {what} {str(missing)!r}: no such file\n")


# --- files that hold no environment, files sniffed by content, folders, ${VAR:-default} -------------------------

def findings_of(done):
    return [(f["rule"], f["severity"], f["location"]["path"].rsplit("/", 1)[-1] if f.get("location") else None,
             f["location"]["line"] if f.get("location") else None) for f in json.loads(done.stdout)["findings"]]


def test_a_training_config_yaml_is_not_an_error(tmp_path):
    """A NeMo/Hydra config holds no environment: lint says so (info) and passes, so a pre-commit run stays green."""
    config = tmp_path / "megatron_gpt_config.yaml"
    config.write_text("name: megatron_gpt\ntrainer:\n  devices: 8\n  num_nodes: 1\n  precision: bf16-mixed\n"
                      "model:\n  tensor_model_parallel_size: 1\n  data:\n    num_workers: 2\n")
    done = lint(config, "--format", "json")
    assert done.returncode == 0, done.stdout
    (finding,) = json.loads(done.stdout)["findings"]
    assert finding["rule"] == "GD003" and finding["severity"] == "info"
    assert "no environment variables found" in finding["message"]


def test_a_yaml_file_of_export_lines_is_read(tmp_path):
    env_yaml = tmp_path / "nccl_env.yaml"
    env_yaml.write_text("export NCCL_DEBUG=WARN\nexport NCCL_PROTO=simple2\n")
    done = lint(env_yaml, "--format", "json")
    assert ("GD402", "error", "nccl_env.yaml", 2) in findings_of(done)


def test_files_are_sniffed_by_content(tmp_path):
    dockerfile = tmp_path / "mnist_Dockerfile"
    dockerfile.write_text("FROM pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime\nWORKDIR /workspace\n"
                          "ENV NCCL_ASYNC_ERROR_HANDLING=1\nCOPY mnist.py .\nCMD [\"python\", \"mnist.py\"]\n")
    script = tmp_path / "run_pretrain"
    script.write_text("# one node, eight GPUs\nset -euo pipefail\nexport NCCL_ALGO=Foo\n"
                      "torchrun --nproc_per_node 8 pretrain.py\n")
    found = findings_of(lint(dockerfile, script, "--format", "json"))
    assert ("GD404", "info", "mnist_Dockerfile", 3) in found
    assert ("GD402", "error", "run_pretrain", 3) in found
    assert not [f for f in found if f[0] == "GD003"]


def test_a_folder_is_linted_recursively_skipping_what_it_does_not_know(tmp_path):
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "train.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes=1\nexport NCCL_PROTO=simple2\n")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text("trainer:\n  devices: 8\n")
    (tmp_path / "notes.md").write_text("# notes\nexport NCCL_PROTO=bad\n")
    (tmp_path / "weights.bin").write_bytes(b"\x00\x01" * 100)
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "activate").write_text("#!/bin/bash\nexport NCCL_PROTO=ignored\n")
    done = lint(".", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1
    assert findings_of(done) == [("GD402", "error", "train.sbatch", 3)]
    empty = tmp_path / "empty"
    empty.mkdir()
    quiet = lint(empty, "--format", "json")
    assert quiet.returncode == 0
    assert [(f["rule"], f["severity"]) for f in json.loads(quiet.stdout)["findings"]] == [("GD003", "info")]


def test_shell_defaults_are_judged_when_the_caller_does_not_set_the_variable(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text('#!/bin/bash\n#SBATCH --nodes=2\nexport NCCL_DEBUG="${NCCL_DEBUG:-DEBUG}"\n'
                   "export NCCL_SOCKET_IFNAME=${SLURM_NCCL_IFNAME:-lo}\nexport NCCL_PROTO=${LOCAL_RANK-simple2}\n")
    done = lint(job, "--format", "json")
    report = json.loads(done.stdout)
    assert [(f["rule"], f["location"]["line"]) for f in report["findings"]] == [("GD402", 3)]
    assert "applies when the caller does not set NCCL_DEBUG" in report["findings"][0]["message"]


def test_a_env_file_is_not_called_no_job_file(run_cli):
    """Rules about how a job starts are not applicable to a .env for want of a launch command, not of a file."""
    _, out, _ = run_cli("lint", FIXTURES / "jobs" / "fixable.env", "--format", "json")
    reasons = {item["reason"] for item in json.loads(out)["not_applicable"]}
    assert "no launch command" in reasons and "no job file" not in reasons


def test_an_unreadable_file_is_named_once_and_no_position_is_promised(run_cli, tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    _, out, _ = run_cli("lint", empty)
    assert " ".join(out.split()).count(str(empty)) == 1 and "position shown" not in out
