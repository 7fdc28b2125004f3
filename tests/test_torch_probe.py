"""The torch probe child (gpudoctor/probes/torch_child.py) run by an interpreter whose `torch` is a stand-in that
follows torch's own device-count code (tests/standin_torch): before CUDA initialises, torch.cuda.device_count() is
NVML's count (pytorch#83973), which a MIG node's CUDA does not share; and torch.cuda.nccl.version() is the NCCL
header torch was built with, not the library it loads."""

import json
import os
import subprocess
import sys

import nvmlsim
from conftest import ROOT

from gpudoctor.catalog import find_rule
from gpudoctor.engine import evaluate
from gpudoctor.snapshot import Snapshot

STANDIN = ROOT / "tests" / "standin_torch"
CHILD = ROOT / "gpudoctor" / "probes" / "torch_child.py"
GiB = 1024**3


def mig(slot: int) -> dict:
    return {"name": "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "major": 8, "minor": 0, "total_memory": 9728 << 20,
            "uuid": f"1e2d3c4b-5a69-5788-9a0b-1c2d3e4f5a6{slot}"}


def probe(tmp_path, spec: dict, env=None) -> dict:
    (tmp_path / "torch.json").write_text(json.dumps(spec))
    environ = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    environ.update(PYTHONPATH=str(STANDIN), STANDIN_TORCH=str(tmp_path / "torch.json"), **(env or {}))
    done = subprocess.run([sys.executable, str(CHILD)], env=environ, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_cuda_counts_its_own_devices_where_nvml_counts_more(tmp_path):
    """Driver R535, two A100s, one in MIG mode: NVML counts 2 GPUs, CUDA enumerates one MIG device. Counting with
    NVML's 2, the second device's properties raise ("Invalid device id") and every device was lost."""
    facts = probe(tmp_path, {"nvml_count": 2, "devices": [mig(0)]})
    assert facts["device_count_before_init"] == 2 and facts["device_count"] == 1
    assert [d["uuid"] for d in facts["devices"]] == [mig(0)["uuid"]] and "cuda_error" not in facts


def test_cuda_counts_seven_mig_devices_where_nvml_counts_one_gpu(tmp_path):
    """Driver R570, one A100 split into seven 1g.10gb instances: CUDA enumerates one per GPU instance."""
    facts = probe(tmp_path, {"nvml_count": 1, "devices": [mig(slot) for slot in range(7)]})
    assert facts["device_count_before_init"] == 1 and facts["device_count"] == 7 and len(facts["devices"]) == 7


def test_a_cuda_initialisation_error_is_recorded(tmp_path):
    error = "Unexpected error from cudaGetDeviceCount(). Error 802: system not yet initialized"
    facts = probe(tmp_path, {"nvml_count": 8, "devices": [mig(0)], "init_error": error})
    assert facts["cuda_available"] is False and facts["device_count"] == 0 and facts["devices"] == []
    assert facts["device_count_before_init"] == 8


def _nccl(tmp_path, code: int):
    library = tmp_path / "lib" / "libnccl.so.2"
    library.parent.mkdir()
    subprocess.run([nvmlsim.compiler(), "-shared", "-fPIC", f"-DNCCL_CODE={code}", "-o", str(library),
                    str(STANDIN / "fake_nccl.c")], check=True, capture_output=True, timeout=60)
    return str(library)


def gd111(facts: dict, wheel: str) -> list:
    torch = dict(facts, status="ok", python="/opt/venv/bin/python", cuda_wheels={"nccl": wheel})
    return list(evaluate(Snapshot(facts={"torch": torch, "env": {}}), [find_rule("GD111")]).findings)


def test_the_nccl_torch_loaded_is_read_from_the_library(tmp_path):
    """torch built with NCCL 2.21.5 loads the upgraded nvidia-nccl-cu12 2.23.4: no mismatch (the compiled version
    against the wheel was a false error)."""
    facts = probe(tmp_path, {"nvml_count": 1, "devices": [mig(0)], "nccl": [2, 21, 5],
                             "nccl_library": _nccl(tmp_path, 22304)})
    assert (facts["nccl_compiled"], facts["nccl_loaded"], facts["nccl"]) == ("2.21.5", "2.23.4", "2.23.4")
    assert facts["nccl_library"].endswith("/lib/libnccl.so.2")
    assert gd111(facts, "2.23.4") == []


def test_a_stray_older_nccl_is_caught_though_torch_was_built_with_the_wheels(tmp_path):
    facts = probe(tmp_path, {"nvml_count": 1, "devices": [mig(0)], "nccl": [2, 21, 5],
                             "nccl_library": _nccl(tmp_path, 21803)})
    (finding,) = gd111(facts, "2.21.5")
    assert finding.evidence == {"library": "nccl", "loaded": "2.18.3", "wheel": "2.21.5", "LD_LIBRARY_PATH": None}
