"""`gpudoctor check` on this machine, including the faults it must survive: hung tools, broken torch."""

import json
import os
import subprocess
import textwrap
import time
import venv

import pytest
from conftest import ROOT, gpudoctor_cmd


def run_check(*args, env=None, timeout=60):
    started = time.monotonic()
    result = subprocess.run(gpudoctor_cmd() + ["check", "--format", "json", *args], capture_output=True, text=True,
                            env=env, timeout=timeout, cwd=ROOT)
    return result, json.loads(result.stdout) if result.stdout.strip() else None, time.monotonic() - started


def env_with(**changes):
    env = dict(os.environ)
    env.update(changes)
    return env


def fake_tool(tmp_path, name, body):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    tool = bindir / name
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(0o755)
    return bindir


def findings(data, rule):
    return [f for f in data["findings"] if f["rule"] == rule]


@pytest.mark.slow
def test_live_check_reports_no_false_error(run_cli, probes_once):
    code, out, err = run_cli("check", "--format", "json")
    assert code == 0, out + err
    data = json.loads(out)
    assert data["summary"]["error"] == 0
    assert {p["name"]: p["status"] for p in data["probes"]} == {
        "nvml": "ok", "nvcc": "ok", "torch": "ok", "env": "ok", "system": "ok",
        "slurm": "ok"}  # outside a Slurm job with GPUs it reads nothing, and says so by recording no fact


@pytest.mark.slow
def test_hung_nvcc_and_nvidia_smi_are_bounded(tmp_path):
    bindir = fake_tool(tmp_path, "nvcc", "sleep 300")
    fake_tool(tmp_path, "nvidia-smi", "sleep 300")
    result, data, seconds = run_check("--timeout", "2", env=env_with(PATH=f"{bindir}:{os.environ['PATH']}"))
    assert seconds < 20  # 2 s probes, killed with their children; the margin is for a loaded CI machine
    timeouts = {f["evidence"]["probe"] for f in findings(data, "GD002")}
    assert "nvcc" in timeouts and "nvml" not in timeouts  # torch may also time out at 2 s on a loaded machine
    assert data["summary"]["passed"] > 5, "the other rules must still be evaluated"
    assert result.returncode == 0  # GD002 is a warning


def test_failing_nvcc_is_gd001(tmp_path):
    bindir = fake_tool(tmp_path, "nvcc", "echo 'nvcc fatal: broken install' >&2; exit 1")
    result, data, _ = run_check("--quick", env=env_with(PATH=f"{bindir}:{os.environ['PATH']}"))
    failed = findings(data, "GD001")
    assert len(failed) == 1 and "broken install" in failed[0]["message"]


def _fake_torch(tmp_path, body):
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(body))
    return str(tmp_path / "site")


def test_torch_whose_import_raises_is_gd108(tmp_path):
    site = _fake_torch(tmp_path, 'raise ImportError("libcudnn.so.9: cannot open shared object file")\n')
    result, data, _ = run_check(env=env_with(PYTHONPATH=site))
    broken = findings(data, "GD108")
    assert len(broken) == 1 and "libcudnn.so.9" in broken[0]["message"]
    assert result.returncode == 1


def test_torch_whose_import_hangs_is_bounded(tmp_path):
    site = _fake_torch(tmp_path, "import time\ntime.sleep(300)\n")
    result, data, seconds = run_check("--timeout", "2", env=env_with(PYTHONPATH=site))
    assert seconds < 20  # 2 s probes, killed with their children; the margin is for a loaded CI machine
    assert [f["evidence"]["probe"] for f in findings(data, "GD002")] == ["torch"]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """An interpreter of a fresh virtual environment without torch."""
    target = tmp_path_factory.mktemp("bare-venv")
    venv.EnvBuilder(with_pip=False).create(target)
    return str(target / "bin" / "python")


@pytest.mark.slow
def test_python_flag_inspects_another_interpreter(bare_python):
    result, data, _ = run_check("--python", bare_python)
    assert result.returncode == 0
    assert data["summary"]["error"] == 0
    (missing,) = findings(data, "GD110")  # said, naming the interpreter; its torch rules unknown, not passed
    assert missing["severity"] == "info" and bare_python in missing["message"]
    # unknown where the node has an NVIDIA driver; not applicable where it has none (this machine, CI): never passed
    assert {"GD101", "GD103", "GD109"} <= {item["rule"] for item in data["unknown"] + data["not_applicable"]}
    text = subprocess.run(gpudoctor_cmd() + ["check", "--python", bare_python], capture_output=True, text=True).stdout
    assert "torch not installed" in text


def test_missing_interpreter_is_a_usage_error():
    result = subprocess.run(gpudoctor_cmd() + ["check", "--python", "/nonexistent/python"], capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "no such file" in result.stderr


@pytest.mark.slow
def test_this_interpreter_torch_is_seen(run_cli, probes_once):
    torch = pytest.importorskip("torch", reason="the CPU torch is installed by .ci/run")
    code, out, _ = run_cli("snapshot")
    facts = json.loads(out)["facts"]
    assert facts["torch"]["version"] == torch.__version__
    assert facts["torch"]["cuda"] is None and facts["torch"]["status"] == "ok"


@pytest.mark.slow
def test_quick_reads_torch_versions_without_importing_it(tmp_path):
    """--quick reads torch/version.py as text: a torch whose import would hang is still answered at once."""
    torch = pytest.importorskip("torch", reason="the CPU torch is installed by .ci/run")
    result = subprocess.run(gpudoctor_cmd() + ["snapshot", "--quick"], capture_output=True, text=True)
    facts = json.loads(result.stdout)["facts"]["torch"]
    assert facts["quick"] is True and facts["version"] == torch.__version__ and facts["cuda"] == torch.version.cuda
    assert "cuda_available" not in facts, "quick mode does not claim to know whether CUDA works"

    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import time\ntime.sleep(300)\n")
    (package / "version.py").write_text("__version__ = '2.5.1+cu124'\ncuda = '12.4'\nhip = None\n")
    result, data, seconds = run_check("--quick", "--timeout", "60", env=env_with(PYTHONPATH=str(tmp_path / "site")))
    assert seconds < 30 and not findings(data, "GD002")  # importing it would hang for 60 s
    text = subprocess.run(gpudoctor_cmd() + ["check", "--quick"], capture_output=True, text=True,
                          env=env_with(PYTHONPATH=str(tmp_path / "site"))).stdout
    assert "torch 2.5.1+cu124 (CUDA 12.4, read from its files, not imported (--quick))" in " ".join(text.split())
