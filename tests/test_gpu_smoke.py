"""tools/gpu-smoke and tools/gpu-truth, the checks and the raw readings for a real GPU machine: their parts that
need no GPU run here (--dry-run), gpu-truth's NVML part against the simulated driver (tests/nvmlsim)."""

import json
import subprocess
import sys

import nvmlsim
import pytest
from conftest import ROOT

GiB = 1024**3


@pytest.mark.slow
def test_gpu_smoke_dry_run_passes_on_cpu():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu-smoke"), "--dry-run"], capture_output=True,
                          text=True, timeout=180, cwd=ROOT)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines and all(line.startswith("PASS ") for line in lines), done.stdout + done.stderr
    names = [line.split(":")[0][5:] for line in lines]
    assert names == ["imports", "runs_without_packaging_and_regex", "pynvml_on_pythonpath_only"]


@pytest.mark.slow
def test_gpu_truth_records_the_simulated_driver_raw(tmp_path):
    """An HGX H100 whose fabric manager is down, one process on GPU 0 (this test's own PID: it exists)."""
    import os

    gpus = [{"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i:08x}-1111-4222-8333-444444444444", "minor": 1 - i,
             "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0", "memory": {"total": 80 * GiB, "used": 0},
             "mig": {"enabled": False, "pending": i == 1, "max_devices": 7}, "fabric": {"state": "not_started"},
             "processes": [{"pid": os.getpid(), "used_bytes": GiB}] if i == 0 else []} for i in range(2)]
    env = nvmlsim.node_env({"driver_version": "550.90.07", "cuda_version": 12040, "gpus": gpus}, tmp_path)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu-truth"), "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    truth = json.loads(done.stdout)
    assert set(truth) == {"nvml", "libcuda", "torch", "visible", "pid_namespace"}, done.stderr
    nvml = truth["nvml"]
    assert (nvml["driver"], nvml["cuda_driver_version"], nvml["cuda_driver_version_v2"]) == ("550.90.07", 12040, 12040)
    first, second = nvml["gpus"]
    assert (first["minor"], second["minor"]) == (1, 0) and second["mig_mode"] == [0, 1]
    assert first["fabric"]["nvmlDeviceGetGpuFabricInfoV"] == {"state": 1, "status": 0}
    assert first["processes"]["24"] == [{"pid": os.getpid(), "used": GiB, "exists": True}]
    assert truth["pid_namespace"]["host"] in (True, False) and "0" in truth["visible"]
