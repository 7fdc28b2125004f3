"""The torch a fix says to install fits the driver AND the GPU: CUDA 13 wheels dropped the GPUs before sm_75, so a
V100 on a CUDA 13 driver is sent to a CUDA 12 wheel; an arch-specific build (sm_90a, sm_100a) runs on exactly that
GPU; the user's torch, torchvision and torchaudio are pinned to one release. The table below is driver × GPU ×
torch; the wheel rows it relies on are those of rules/torch_wheels.toml."""

import shlex

import pytest

from gpudoctor.api import evaluate
from gpudoctor.checks.driver_cuda import _runs, best_wheel_cuda
from gpudoctor.knowledge import wheel_archs
from gpudoctor.snapshot import Snapshot

GPUS = {"V100": ("Tesla V100-SXM2-32GB", "7.0"), "P100": ("Tesla P100-PCIE-16GB", "6.0"),
        "GTX 1080": ("NVIDIA GeForce GTX 1080", "6.1"), "T4": ("Tesla T4", "7.5"),
        "A100": ("NVIDIA A100-SXM4-80GB", "8.0"),
        "H100": ("NVIDIA H100 80GB HBM3", "9.0"), "RTX 5090": ("NVIDIA GeForce RTX 5090", "12.0"),
        "K80": ("Tesla K80", "3.7")}

# (driver, the CUDA it reports, GPU, the user's torch) -> the wheel the fix installs, and its pin
TABLE = [
    ("580.65.06", "13.0", "V100", "2.9.0+cpu", "cu128", "torch==2.9.0"),  # cu130 has no sm_70
    ("580.65.06", "13.0", "P100", "2.9.0+cpu", "cu126", "torch==2.9.0"),  # only cu126 keeps sm_60
    ("580.65.06", "13.0", "GTX 1080", "2.9.1+cpu", "cu126", "torch==2.9.1"),  # sm_61 runs sm_60's kernels
    ("580.65.06", "13.0", "T4", "2.9.0+cpu", "cu130", "torch==2.9.0"),
    ("580.65.06", "13.0", "H100", "2.9.0+cpu", "cu130", "torch==2.9.0"),
    ("570.124.06", "12.8", "RTX 5090", "2.6.0+cpu", "cu128", "torch==2.7.*"),  # 2.6 has no cu128 wheel
    ("535.183.01", "12.2", "A100", "2.5.1+cpu", "cu121", "torch==2.5.1"),  # native before minor-version compat
    ("470.182.03", "11.4", "K80", "2.7.1+cpu", "cu118", "torch==2.7.1"),  # only cu118 keeps sm_37
]


def gd103(driver, driver_cuda, gpu, torch, **more):
    name, cc = GPUS[gpu]
    facts = {"torch": {"status": "ok", "version": torch, "cuda": None, **more},
             "nvml": {"status": "ok", "driver_version": driver, "cuda_driver_version": driver_cuda,
                      "gpus": [{"index": 0, "name": name, "cc": cc}]}}
    report = evaluate(Snapshot(facts=facts, source={"kind": "report", "paths": []}), select=["GD103"])
    (finding,) = report.findings
    return finding.fix.commands


@pytest.mark.parametrize("driver, driver_cuda, gpu, torch, tag, pin", TABLE)
def test_the_wheel_fits_the_driver_and_the_gpu(driver, driver_cuda, gpu, torch, tag, pin):
    (command,) = gd103(driver, driver_cuda, gpu, torch)
    assert command == f"pip install --force-reinstall {shlex.quote(pin)} --index-url https://download.pytorch.org/whl/{tag}"
    cuda = f"{tag[2:-1]}.{tag[-1]}"
    row = wheel_archs(pin.split("==")[1].rstrip(".*"), cuda)
    assert _runs(GPUS[gpu][1], [f"sm_{a.replace('.', '')}" for a in row["archs"]])


def test_no_wheel_is_offered_where_none_fits_the_driver_and_the_gpu():
    """A K80 (sm_37) on a driver too old for CUDA 11.8's minor-version compatibility: no official wheel fits."""
    assert best_wheel_cuda("418.39", "10.1", ["3.7"], "2.7.1") is None


def test_torchvision_and_torchaudio_are_pinned_to_the_torch_they_were_built_for():
    (command,) = gd103("535.183.01", "12.2", "A100", "2.5.1+cpu", torchvision="0.20.1+cpu", torchaudio="2.5.1+cpu")
    assert command == ("pip install --force-reinstall torch==2.5.1 'torchvision==0.20.*' 'torchaudio==2.5.*' "
                       "--index-url https://download.pytorch.org/whl/cu121")


def test_a_companion_the_table_does_not_know_is_left_for_pip_to_match():
    (command,) = gd103("580.65.06", "13.0", "H100", "2.12.0+cpu", torchaudio="2.12.0+cpu")
    assert command == ("pip install --force-reinstall torch==2.12.0 torchaudio "
                       "--index-url https://download.pytorch.org/whl/cu130")


@pytest.mark.parametrize("cc, archs, runs", [
    ("9.0", ["sm_80", "sm_90a"], True),  # an H100 on an sm_90a build
    ("10.0", ["sm_100a"], True),  # a B200 on an sm_100a build
    ("10.3", ["sm_100a"], False),  # sm_100a is that architecture only
    ("10.3", ["sm_100f"], True),  # a family target runs the later minors of its major
    ("8.9", ["sm_90a"], False),
    ("9.0", ["compute_90a"], True),
    ("8.6", ["sm_80"], True),
    ("7.0", ["sm_75", "sm_80"], False),
])
def test_arch_specific_targets(cc, archs, runs):
    assert _runs(cc, archs) is runs
