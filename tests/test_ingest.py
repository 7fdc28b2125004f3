"""Parsers for pasted reports (gpudoctor.ingest): the shared corpus of real reports, and our own fixtures for each
format variant listed in ../shared/reference/report_formats.md."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Dict

import pytest

from gpudoctor.ingest.normalize import clean_text, normalize
from gpudoctor.ingest.report import ParsedReport, ReportError, merge_reports, parse_report

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
FORMATS = CORPUS / "formats"
FIXTURES = ROOT / "fixtures" / "reports"
MiB = 1024 ** 2
GiB = 1024 ** 3

needs_shared = pytest.mark.usefixtures("corpus")  # skips without ../shared/corpus, fails if CI requires it


pytestmark = pytest.mark.usefixtures("parser_bugs_fail")


def read(path: Path) -> ParsedReport:
    with open(path, encoding="utf-8", newline="") as fh:
        return parse_report(fh.read(), path.name)


def get(facts: Dict[str, Any], path: str, default: Any = KeyError) -> Any:
    node: Any = facts
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif default is KeyError:
            raise KeyError(path)
        else:
            return default
    return node


def absent(facts: Dict[str, Any], path: str) -> bool:
    return get(facts, path, default=_ABSENT) is _ABSENT


_ABSENT = object()


def check(report: ParsedReport, expected: Dict[str, Any]) -> None:
    for path, want in expected.items():
        if want is _ABSENT:
            assert absent(report.facts, path), "%s should be unknown, is %r" % (path, get(report.facts, path))
        else:
            assert get(report.facts, path) == want, path


def gpu_names(report: ParsedReport):
    return [g["name"] for g in report.facts["nvml"]["gpus"]]


# ---------------------------------------------------------------------------------------------------
# the corpus (../shared/corpus), read in place
# ---------------------------------------------------------------------------------------------------
CORPUS_EXPECTED: Dict[str, Dict[str, Any]] = {
    "pt-28321-driver-old.txt": {
        "kind": "collect_env",
        "torch.version": "1.3.0", "torch.status": "ok", "torch.cuda": "10.1", "torch.cuda_available": False,
        "torch.python_version": "3.7", "nvcc.version": "10.0", "nvml.driver_version": "410.104",
        "nvml.status": "ok", "nvml.gpus": [{"index": 0, "name": "Tesla T4"}],
        "host.os": "Debian GNU/Linux 9.11 (stretch)",
        "nvml.cuda_driver_version": _ABSENT, "torch.hip": _ABSENT, "torch.cudnn": _ABSENT,
    },
    "pt-43058-driver-old.txt": {
        "kind": "collect_env",
        "torch.version": "1.6.0", "torch.cuda": "10.2", "torch.cuda_available": False,
        "nvml.driver_version": "418.67",
        "nvml.gpus": [{"index": 0, "name": "Tesla V100-PCIE-16GB"}, {"index": 1, "name": "Tesla V100-PCIE-16GB"}],
        "nvcc.version": _ABSENT,  # 'Could not collect': nvcc unknown, not absent
        "host.os": "Red Hat Enterprise Linux Server 7.6 (Maipo)",
    },
    "pt-77528-fwdcompat-healthy.txt": {
        "kind": "mixed",
        "nvml.driver_version": "460.32.03", "nvml.cuda_driver_version": "11.2", "nvml.status": "ok",
        "torch.version": "1.11.0+cu113", "torch.cuda": "11.3",
        "nvml.gpus": _ABSENT,  # the table is cut after its header
    },
    "pt-121067-macos-nogpu-none.txt": {
        "kind": "collect_env",
        "torch.version": "2.2.2", "torch.cuda": None, "torch.hip": None, "torch.cuda_available": False,
        "torch.python_version": "3.10.13", "host.os": "macOS 14.5 (x86_64)", "host.arch": "x86_64",
        "nvml.status": "unavailable", "nvml.driver_version": None, "nvml.gpus": [],
        "nvcc.version": _ABSENT, "torch.cudnn": _ABSENT,
    },
    "ds-pr6762-envblock-none.txt": {
        "kind": "ds_report",
        "torch.version": "2.3.0+cu121", "torch.cuda": "12.1", "torch.hip": None, "nvcc.version": "12.0",
        "torch.deepspeed.version": "0.15.5+unknown", "torch.deepspeed.wheel_torch": "0.0",
        "torch.deepspeed.wheel_cuda": "0.0", "host.shm_bytes": round(125.77 * GiB),
        "torch.deepspeed.installed_ops": _ABSENT, "torch.ninja": _ABSENT, "nvml": _ABSENT,
    },
    "collect_env__KickaStone-torch2.2.2-arch-RTX3060Ti.txt": {
        "kind": "collect_env",
        "torch.version": "2.2.2", "torch.cuda": "12.1", "torch.hip": None, "torch.cuda_available": True,
        "torch.python_version": "3.12.2", "torch.cudnn": "8.9.7", "nvcc.version": "12.4",
        "nvml.driver_version": "550.67", "nvml.gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3060 Ti"}],
        "host.os": "Arch Linux (x86_64)", "host.arch": "x86_64", "torch.nccl": _ABSENT,
    },
    "ds_report__lzzmm-reft_ds-torch2.2-cu121.txt": {
        "kind": "ds_report",
        "torch.version": "2.2.0+cu121", "torch.cuda": "12.1", "torch.hip": None, "nvcc.version": "12.1",
        "torch.ninja": "ninja", "torch.deepspeed.version": "0.14.1+f583d42",
        "torch.deepspeed.wheel_torch": "2.2", "torch.deepspeed.wheel_cuda": "12.1",
        "host.shm_bytes": round(251.53 * GiB),
    },
    "nvcc__pytorch-builder-580-cuda11.1.txt": {
        "kind": "nvcc", "nvcc.version": "11.1", "nvcc.build": "cuda_11.1.TC455_06.29190527_0"},
    "nvcc__qixuema-envs-4-cuda10.0.txt": {"kind": "nvcc", "nvcc.version": "10.0", "nvcc.build": _ABSENT},
    "nvcc__synergia2-215-cuda12.2.txt": {
        "kind": "nvcc", "nvcc.version": "12.2", "nvcc.build": "cuda_12.2.r12.2/compiler.32965470_0"},
    "nvidia-smi-error__nvidia-ogkm-862-no-devices.txt": {
        "kind": "nvidia_smi_error", "nvml.status": "error", "nvml.error_kind": "no_devices",
        "nvml.error": "No devices were found", "nvml.gpus": [], "nvml.driver_version": _ABSENT},
    "nvidia-smi-error__shine-cluster-30-nvml-mismatch-old.txt": {
        "kind": "nvidia_smi_error", "nvml.status": "error", "nvml.error_kind": "driver_mismatch",
        "nvml.error": "Failed to initialize NVML: Driver/library version mismatch", "nvml.gpus": _ABSENT},
    "nvidia-smi-error__shine-cluster-50-no-driver-comm.txt": {
        "kind": "nvidia_smi_error", "nvml.status": "error", "nvml.error_kind": "driver_not_loaded",
        "nvml.error": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
                      "that the latest NVIDIA driver is installed and running."},
    "nvidia-smi-error__tinygrad-ogkm-47-nvml-mismatch-570.txt": {
        "kind": "nvidia_smi_error", "nvml.status": "error", "nvml.error_kind": "driver_mismatch",
        "nvml.error": "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124"},
}


def _corpus_files():
    if not CORPUS.is_dir():
        return []
    out = []
    for d in (CORPUS, FORMATS):
        for p in sorted(d.iterdir()):
            if p.is_file() and p.name not in ("README.md", "SOURCES.md", "labels.json"):
                out.append(p)
    return out


@needs_shared
def test_every_corpus_file_has_expectations():
    covered = set(CORPUS_EXPECTED) | set(_DETAILED)
    missing = [p.name for p in _corpus_files() if p.name not in covered]
    assert not missing, "corpus files without a test: %s" % missing


@needs_shared
@pytest.mark.parametrize("name", sorted(CORPUS_EXPECTED))
def test_corpus_facts(name):
    path = CORPUS / name if (CORPUS / name).exists() else FORMATS / name
    report = read(path)
    expected = dict(CORPUS_EXPECTED[name])
    assert report.kind == expected.pop("kind")
    check(report, expected)
    assert report.conflicts == []


@needs_shared
def test_corpus_labels_kinds_match():
    import json

    labels = json.loads((CORPUS / "labels.json").read_text())
    for label in labels:
        report = read(CORPUS / (label["id"] + ".txt"))
        assert report.kind == label["report_kind"], label["id"]


# --- nvidia-smi files in formats/: every fact a person can read -------------------------------------
def _h100_mig(report):
    f = report.facts["nvml"]
    assert f["driver_version"] == "535.104.12" and f["cuda_driver_version"] == "12.2"
    gpus = f["gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g["pci_bus_id"] for g in gpus] == ["00000000:%s:00.0" % b for b in
                                               ("1B", "43", "52", "61", "9D", "C3", "D1", "DF")]
    for g in gpus:
        assert g["mig_enabled"] is True
        assert g["ecc_enabled"] is True            # 'On' in MIG mode: counts are per MIG device
        assert "ecc_uncorrected_volatile" not in g
        assert "memory_total_bytes" not in g       # 'N/A' in MIG mode
        assert g["processes"] == []                # 'No running processes found'
        devs = g["mig_devices"]
        assert [d["index"] for d in devs] == [0, 1, 2, 3]
        assert [d["memory_total_bytes"] for d in devs] == [40448 * MiB, 20096 * MiB, 9984 * MiB, 9984 * MiB]
        assert [d["memory_used_bytes"] for d in devs] == [16 * MiB, 11 * MiB, 5 * MiB, 5 * MiB]
        assert [d["sm_count"] for d in devs] == [60, 32, 16, 16]
        assert all(d["ecc_uncorrected_volatile"] == 0 for d in devs)
    assert [d["gpu_instance_id"] for d in gpus[0]["mig_devices"]] == [2, 3, 9, 10]
    assert [d["gpu_instance_id"] for d in gpus[4]["mig_devices"]] == [1, 5, 13, 14]
    assert sum(len(g["mig_devices"]) for g in gpus) == 32


def _v100_418(report):
    f = report.facts["nvml"]
    assert (f["driver_version"], f["cuda_driver_version"], f["status"]) == ("418.67", "10.1", "ok")
    assert f["gpus"] == [{"index": 0, "name": "Tesla V100-PCIE...", "pci_bus_id": "00000000:00:05.0",
                          "ecc_enabled": True, "ecc_uncorrected_volatile": 0, "memory_used_bytes": 0,
                          "memory_total_bytes": 16130 * MiB, "processes": []}]


def _gh200_590(report):
    f = report.facts["nvml"]
    assert (f["driver_version"], f["cuda_driver_version"]) == ("590.48.01", "13.1")
    gpus = f["gpus"]
    assert gpu_names(report) == ["NVIDIA GH200 120GB"] * 4
    assert [g["pci_bus_id"] for g in gpus] == ["000000%s9:01:00.0" % d for d in "0123"]
    assert [g["memory_used_bytes"] for g in gpus] == [3 * MiB, 3 * MiB, 3 * MiB, 4 * MiB]
    assert {g["memory_total_bytes"] for g in gpus} == {97871 * MiB}
    assert all(g["mig_enabled"] is False and g["ecc_uncorrected_volatile"] == 0 and g["processes"] == []
               for g in gpus)


def _rtx3090_535(report):
    f = report.facts["nvml"]
    assert (f["driver_version"], f["cuda_driver_version"]) == ("535.161.07", "12.2")
    assert f["gpus"] == [{"index": 0, "name": "NVIDIA GeForce RTX 3090", "pci_bus_id": "00000000:C1:00.0",
                          "memory_used_bytes": 404 * MiB, "memory_total_bytes": 24576 * MiB,
                          "processes_unnamed": True}]
    # ECC 'N/A': unknown; MIG 'N/A': unknown; processes header without rows: not listable, unknown (marked unnamed)


def _a100_575(report):
    f = report.facts["nvml"]
    assert (f["driver_version"], f["cuda_driver_version"]) == ("575.51.03", "12.9")
    assert f["gpus"] == [{"index": 0, "name": "NVIDIA A100 80GB PCIe", "pci_bus_id": "00000000:4A:00.0",
                          "ecc_enabled": True, "ecc_uncorrected_volatile": 0, "memory_used_bytes": 1187 * MiB,
                          "memory_total_bytes": 81920 * MiB, "mig_enabled": False,
                          "processes": [{"pid": 2308208, "type": "C", "name": "python",
                                         "used_bytes": 1178 * MiB}]}]


def _q_a100x4(report):
    f = report.facts["nvml"]
    assert (f["driver_version"], f["cuda_driver_version"]) == ("555.42.02", "12.5")
    gpus = f["gpus"]
    assert gpu_names(report) == ["NVIDIA A100-SXM4-80GB"] * 4
    assert [g["pci_bus_id"] for g in gpus] == ["00000000:68:00.0", "00000000:9E:00.0", "00000000:C2:00.0",
                                               "00000000:D4:00.0"]
    assert [g["uuid"] for g in gpus] == ["GPU-31515c3d-1414-7c2c-004a-f86a898946ac",
                                         "GPU-72d87681-01db-370e-567d-41afcf20fad0",
                                         "GPU-62989189-9e1e-ac75-4676-114f14998542",
                                         "GPU-011b2cfe-2b8e-1cb0-19e1-1b764e854dfc"]
    for g in gpus:
        assert g["memory_total_bytes"] == 81920 * MiB and g["memory_used_bytes"] == 1 * MiB
        assert g["ecc_enabled"] is True
        assert g["ecc_uncorrected_volatile"] == 0 and g["ecc_uncorrected_aggregate"] == 0
        assert g["mig_enabled"] is False and g["processes"] == []
        assert g["remapped_rows_failure"] is False
        assert "retired_pages_pending" not in g    # Retired Pages N/A on A100 (row remapping instead)
    assert [g["remapped_rows_pending"] for g in gpus] == [False, True, False, False]


def _q_win_610(report):
    f = report.facts["nvml"]
    # new 610 header: 'Driver Version : 610.88 [Deprecated; …]', KMD Version, CUDA UMD Version
    assert (f["driver_version"], f["cuda_driver_version"]) == ("610.88", "13.3")
    assert f["gpus"] == [{
        "index": 0, "name": "NVIDIA GeForce RTX 3060 Laptop GPU", "uuid": "GPU-20606811-3bb2-e6b5-ec74-b477d9c1d1d8",
        "pci_bus_id": "00000000:01:00.0", "memory_total_bytes": 6144 * MiB, "memory_used_bytes": 116 * MiB,
        "processes": [
            {"pid": 24420, "type": "C+G",
             "name": r"C:\Program Files\BraveSoftware\Brave-Browser\Application\brave.exe"},
            {"pid": 28204, "type": "C+G",
             "name": r"C:\Program Files\BraveSoftware\Brave-Browser\Application\brave.exe"},
        ]}]  # ECC N/A, MIG N/A, Remapped Rows N/A, memory per process 'Not available in WDDM': all unknown


def _x_rtx4000(report):
    f = report.facts["nvml"]
    assert (f["driver_version"], f["cuda_driver_version"]) == ("595.84", "13.2")
    (g,) = f["gpus"]
    assert g["name"] == "NVIDIA RTX 4000 SFF Ada Generation"
    assert g["uuid"] == "GPU-37037c3f-65c8-ec4d-24a9-420204ad8026"
    assert g["pci_bus_id"] == "00000000:06:00.0"
    assert (g["memory_total_bytes"], g["memory_used_bytes"]) == (20475 * MiB, 3534 * MiB)
    assert g["ecc_enabled"] is False and "ecc_uncorrected_volatile" not in g
    assert g["remapped_rows_pending"] is False and g["remapped_rows_failure"] is False
    assert "retired_pages_pending" not in g and "mig_enabled" not in g
    assert g["processes"] == [
        {"pid": 1842, "type": "G", "name": "cosmic-comp", "used_bytes": 410 * MiB},
        {"pid": 3190, "type": "G", "name": "/usr/bin/code", "used_bytes": 451 * MiB},
        {"pid": 4937, "type": "C", "name": "python", "used_bytes": 160 * MiB},
        {"pid": 34626, "type": "C+G", "name": "/usr/lib/chromium/chromium", "used_bytes": 183 * MiB},
    ]


def _x_t4(report):
    f = report.facts["nvml"]
    assert (f["driver_version"], f["cuda_driver_version"]) == ("515.105.01", "11.7")
    assert f["gpus"] == [{
        "index": 0, "name": "Tesla T4", "uuid": "GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
        "pci_bus_id": "00000000:00:1E.0", "memory_total_bytes": 15360 * MiB, "memory_used_bytes": 1032 * MiB,
        "ecc_enabled": True, "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
        "retired_pages_pending": False,
        "processes": [{"pid": 675, "type": "G", "name": "/usr/lib/xorg/Xorg", "used_bytes": 22 * MiB},
                      {"pid": 5762, "type": "C", "name": "python", "used_bytes": 1005 * MiB}]}]


_DETAILED = {
    "nvidia-smi-table__nvidia-cloud-native-docs-8xH100-MIG-535.txt": ("nvidia_smi", _h100_mig),
    "nvidia-smi-table__ovh-docs-V100-418.txt": ("nvidia_smi", _v100_418),
    "nvidia-smi-table__lsaie-gipfelsturm-4xGH200-590.txt": ("nvidia_smi", _gh200_590),
    "nvidia-smi-table__gbmi-data-RTX3090-535-emptyprocs.txt": ("nvidia_smi", _rtx3090_535),
    "nvidia-smi-table__princeton-gpu-intro-A100-575-procs.txt": ("nvidia_smi", _a100_575),
    "nvidia-smi-q__thamada-gls-A100SXM4x4-555.txt": ("nvidia_smi_q", _q_a100x4),
    "nvidia-smi-q__sjsu-lab-win-RTX3060laptop-610.txt": ("nvidia_smi_q", _q_win_610),
    "nvidia-smi-q-x__telegraf-rtx-4000-sff-ada-v13.xml": ("nvidia_smi_xml", _x_rtx4000),
    "nvidia-smi-q-x__telegraf-tesla-t4.xml": ("nvidia_smi_xml", _x_t4),
}


@needs_shared
@pytest.mark.parametrize("name", sorted(_DETAILED))
def test_corpus_nvidia_smi(name):
    kind, verify = _DETAILED[name]
    report = read(FORMATS / name)
    assert report.kind == kind
    assert report.facts["nvml"]["status"] == "ok"
    assert report.warnings == [] and report.conflicts == []
    verify(report)
    assert "torch" not in report.facts and "nvcc" not in report.facts


@needs_shared
def test_corpus_ds_report_ops():
    report = read(FORMATS / "ds_report__lzzmm-reft_ds-torch2.2-cu121.txt")
    ds = report.facts["torch"]["deepspeed"]
    assert len(ds["installed_ops"]) == 19 and not any(ds["installed_ops"].values())
    assert sorted(op for op, ok in ds["compatible_ops"].items() if not ok) == [
        "async_io", "evoformer_attn", "sparse_attn"]
    assert ds["compatible_ops"]["stochastic_transformer"] is True  # 'stochastic_transformer . [NO]'


@needs_shared
def test_corpus_evidence_cites_lines():
    r = read(CORPUS / "pt-43058-driver-old.txt")
    assert r.evidence["nvml.driver_version"] == "pt-43058-driver-old.txt line 17: 'Nvidia driver version: 418.67'"
    assert r.evidence["nvml.gpus"].startswith("pt-43058-driver-old.txt line 14: 'GPU 0: Tesla V100-PCIE-16GB'")
    r = read(CORPUS / "pt-77528-fwdcompat-healthy.txt")
    assert r.evidence["torch.cuda"] == ("pt-77528-fwdcompat-healthy.txt line 7: 'Version: 1.11.0+cu113' "
                                        "(inferred from wheel tag +cu113)")
    assert "line 3" in r.evidence["nvml.cuda_driver_version"]
    assert r.missing == ["nvml.gpus", "torch.arch_list", "nvcc.version"]


@needs_shared
def test_corpus_merge_collect_env_with_nvidia_smi_completes_truncated_names():
    a = read(CORPUS / "pt-43058-driver-old.txt")            # Tesla V100-PCIE-16GB x2, driver 418.67
    b = read(FORMATS / "nvidia-smi-table__ovh-docs-V100-418.txt")  # Tesla V100-PCIE... , driver 418.67
    facts, evidence, conflicts = merge_reports([b, a])
    assert conflicts == []
    assert [g["name"] for g in facts["nvml"]["gpus"]] == ["Tesla V100-PCIE-16GB"] * 2
    assert facts["nvml"]["gpus"][0]["memory_total_bytes"] == 16130 * MiB
    assert facts["nvml"]["cuda_driver_version"] == "10.1" and facts["torch"]["cuda"] == "10.2"
    assert evidence["nvml.driver_version"].startswith("nvidia-smi-table__ovh-docs-V100-418.txt line 3")


# ---------------------------------------------------------------------------------------------------
# our own fixtures, one per format variant
# ---------------------------------------------------------------------------------------------------
H100 = "NVIDIA H100 80GB HBM3"
FIXTURE_EXPECTED: Dict[str, Dict[str, Any]] = {
    # collect_env ------------------------------------------------------------------------------------
    "collect_env_torch041_minimal.txt": {  # 0.4: Yes/No, ends at cuDNN, no library section
        "kind": "collect_env", "torch.version": "0.4.1", "torch.cuda": "9.0", "torch.cuda_available": True,
        "torch.hip": _ABSENT, "torch.python_version": "3.6", "nvcc.version": "9.0", "torch.cudnn": "7.1.4",
        "nvml.driver_version": "390.77",
        "nvml.gpus": [{"index": 0, "name": "GeForce GTX 1080 Ti"}, {"index": 1, "name": "GeForce GTX 1080 Ti"}],
        "host.os": "Ubuntu 16.04.5 LTS", "host.arch": _ABSENT, "torch.nccl": _ABSENT},
    "collect_env_torch15_pip.txt": {  # 1.5: [pip] prefix, no ROCM line
        "kind": "collect_env", "torch.version": "1.5.0", "torch.cuda": "10.2", "nvcc.version": "10.1",
        "torch.cudnn": "7.6.5", "nvml.driver_version": "440.64",
        "nvml.gpus": [{"index": 0, "name": "GeForce RTX 2080 Ti"}], "torch.python_version": "3.8"},
    "collect_env_rtx3090_driver470_cu121.txt": {  # 2.3: pip wheel whose nvidia-* requirements carry NCCL
        "kind": "collect_env", "torch.version": "2.3.1+cu121", "torch.cuda": "12.1", "torch.cuda_available": False,
        "nvcc.version": "11.4", "torch.nccl": "2.20.5", "nvml.driver_version": "470.256.02",
        "nvml.gpus": [{"index": i, "name": "NVIDIA GeForce RTX 3090"} for i in range(2)],
        "host.os": "Ubuntu 20.04.6 LTS (x86_64)", "host.arch": "x86_64"},
    "collect_env_torch25_cpu_section_8xH100.txt": {  # 2.x: CPU section, XPU/allocator lines, pip nccl + deepspeed
        "kind": "collect_env", "torch.version": "2.5.1+cu124", "torch.cuda": "12.4", "torch.hip": None,
        "torch.cuda_available": True, "torch.python_version": "3.11.10", "nvcc.version": "12.6",
        "torch.cudnn": "9.1.0", "torch.nccl": "2.21.5", "torch.deepspeed": {"version": "0.15.4"},
        "nvml.driver_version": "560.35.03", "nvml.gpus": [{"index": i, "name": H100} for i in range(8)],
        "host.os": "Ubuntu 22.04.4 LTS (x86_64)", "host.arch": "x86_64"},
    "collect_env_cpu_only_conda_cudatoolkit.txt": {  # CPU build beside a conda cudatoolkit on a GPU machine
        "kind": "collect_env", "torch.version": "1.12.1", "torch.cuda": None, "torch.cuda_available": False,
        "nvcc.version": "11.3", "nvml.driver_version": "515.65.01", "nvml.status": "ok",
        "nvml.gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3090"}]},
    "collect_env_macos_arm64.txt": {
        "kind": "collect_env", "torch.version": "2.4.1", "torch.cuda": None, "torch.cuda_available": False,
        "nvml.status": "unavailable", "nvml.driver_version": None, "nvml.gpus": [], "nvcc.version": _ABSENT,
        "host.os": "macOS 14.6.1 (arm64)", "host.arch": "arm64", "torch.cudnn": _ABSENT},
    "collect_env_windows.txt": {
        "kind": "collect_env", "torch.version": "2.0.1+cu118", "torch.cuda": "11.8", "nvcc.version": "11.8",
        "nvml.driver_version": "536.23", "nvml.gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 4090"}],
        "host.os": "Microsoft Windows 11 Pro", "torch.python_version": "3.10.11",
        "torch.cudnn": _ABSENT},  # a DLL path carries no full version
    "collect_env_rocm.txt": {
        "kind": "collect_env", "torch.version": "2.3.0+rocm6.0", "torch.cuda": None,
        "torch.hip": "6.0.32830-d62f6a171", "torch.cuda_available": True,
        "torch.devices": [{"name": "AMD Instinct MI250X/MI250", "gcn_arch": "gfx90a:sramecc+:xnack-"}],
        "nvml": _ABSENT, "nvcc": _ABSENT},
    "collect_env_quoted.txt": {  # e-mail quoting, one part quoted twice, prose around it
        "kind": "collect_env", "torch.version": "2.1.2+cu118", "torch.cuda": "11.8", "nvcc.version": "11.8",
        "nvml.driver_version": "470.199.02",
        "nvml.gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-40GB"}, {"index": 1, "name": "NVIDIA A100-SXM4-40GB"}]},
    "collect_env_indented.txt": {  # 4-space Markdown code block inside prose
        "kind": "collect_env", "torch.version": "1.13.1+cu116", "torch.cuda": "11.6", "nvcc.version": "12.1",
        "nvml.driver_version": "530.41.03",
        "nvml.gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 4090"},
                      {"index": 1, "name": "NVIDIA GeForce RTX 4090"}]},
    "collect_env_wrapped.txt": {  # lines wrapped by a mail client
        "kind": "collect_env", "torch.version": "2.0.1+cu117", "torch.cuda": "11.7",
        "host.os": "Red Hat Enterprise Linux release 8.8 (Ootpa) (x86_64)", "host.arch": "x86_64",
        "torch.python_version": "3.10.12", "nvml.gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3090"}],
        "nvml.driver_version": "535.86.10"},
    "collect_env_fullwidth_colons.txt": {
        "kind": "collect_env", "torch.version": "1.13.1+cu117", "torch.cuda": "11.7", "nvcc.version": "11.7",
        "nvml.driver_version": "525.105.17",
        "nvml.gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 3080"},
                      {"index": 1, "name": "NVIDIA GeForce RTX 3080"}]},
    "collect_env_driver_warning_11040.txt": {  # the torch warning is the only driver evidence
        "kind": "collect_env", "torch.version": "2.1.0+cu121", "torch.cuda": "12.1", "torch.cuda_available": False,
        "nvml.cuda_driver_version": "11.4", "nvml.driver_version": _ABSENT, "nvml.gpus": _ABSENT,
        "nvml.status": _ABSENT, "nvcc.version": _ABSENT},
    "collect_env_hand_edited.txt": {  # 'PyTorch version 1.5.0' without colon, 'Os:', 'Version of …' singular
        "kind": "collect_env", "torch.version": "1.5.0", "torch.cuda": "10.1", "torch.cuda_available": True,
        "host.os": "CentOS Linux release 7.7.1908 (Core)", "nvcc.version": "10.1", "torch.cudnn": "7.6.4",
        "nvml.driver_version": "418.87.00", "nvml.gpus": [{"index": 0, "name": "Tesla P100-PCIE-16GB"}]},
    "collect_env_pypi_wheel_no_tag.txt": {  # PyPI wheel: no +cu tag, CUDA from 'CUDA used to build'
        "kind": "collect_env", "torch.version": "2.3.0", "torch.cuda": "12.1", "torch.nccl": "2.20.5",
        "nvcc.version": _ABSENT, "nvml.gpus": [{"index": 0, "name": "NVIDIA L4"}]},
    "collect_env_cut_libraries_only.txt": {  # only the library list: CUDA from the nvidia-cuda-runtime wheel
        "kind": "collect_env", "torch.version": "2.3.0", "torch.cuda": "12.1", "torch.nccl": "2.20.5",
        "nvml": _ABSENT, "nvcc": _ABSENT},
    "collect_env_mig.txt": {
        "kind": "collect_env", "torch.cudnn": "8.9.7",
        "nvml.gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "mig_enabled": True},
                      {"index": 1, "name": "NVIDIA A100-SXM4-80GB"}]},
    "collect_env_cut.txt": {  # cut in the middle of a line
        "kind": "collect_env", "torch.version": "2.2.1+cu121", "torch.cuda": "12.1", "torch.cuda_available": True,
        "nvcc.version": "12.1", "nvml": _ABSENT},
    "collect_env_torch_missing.txt": {
        "kind": "collect_env", "torch.status": "missing", "torch.version": _ABSENT, "torch.cuda": _ABSENT,
        "torch.hip": _ABSENT, "torch.cuda_available": _ABSENT, "nvml.driver_version": "535.129.03",
        "nvcc.version": "12.2"},
    # ds_report --------------------------------------------------------------------------------------
    "ds_report_ansi_raw.txt": {
        "kind": "ds_report", "torch.version": "2.1.2+cu121", "torch.cuda": "12.1", "nvcc.version": "12.1",
        "torch.ninja": "ninja", "torch.deepspeed.version": "0.12.6", "torch.deepspeed.wheel_torch": "2.1",
        "torch.deepspeed.wheel_cuda": "12.1", "host.shm_bytes": 64 * MiB,
        "torch.deepspeed.installed_ops.fused_adam": True, "torch.deepspeed.installed_ops.cpu_adam": True,
        "torch.deepspeed.installed_ops.async_io": False, "torch.deepspeed.compatible_ops.async_io": False,
        "torch.deepspeed.compatible_ops.transformer_inference": True},
    "ds_report_ansi_mangled.txt": {
        "kind": "ds_report", "torch.version": "2.0.1+cu117", "torch.cuda": "11.7", "nvcc.version": "11.7",
        "torch.ninja": "ninja", "torch.deepspeed.version": "0.10.0", "torch.deepspeed.wheel_cuda": "11.7",
        "torch.deepspeed.installed_ops.cpu_adam": True, "torch.deepspeed.compatible_ops.evoformer_attn": False,
        "host.shm_bytes": _ABSENT},
    "ds_report_envblock_only_mismatch.txt": {
        "kind": "ds_report", "torch.version": "2.5.1+cu124", "torch.cuda": "12.4", "nvcc.version": "11.5",
        "torch.deepspeed": {"version": "0.15.1", "wheel_torch": "2.5", "wheel_cuda": "12.4"},
        "host.shm_bytes": round(31.25 * GiB), "torch.ninja": _ABSENT},
    "ds_report_ninja_fail_nvcc_missing.txt": {
        "kind": "ds_report", "torch.ninja": None, "nvcc.version": None, "torch.cuda": "11.8",
        "torch.deepspeed.version": "0.9.2", "torch.deepspeed.compatible_ops.cpu_adam": True,
        "torch.deepspeed.installed_ops.cpu_adam": False, "host.shm_bytes": _ABSENT},
    "ds_report_no_cuda_home.txt": {
        "kind": "ds_report", "nvcc.version": None, "nvcc.cuda_home": None, "torch.deepspeed.wheel_torch": "0.0",
        "torch.deepspeed.wheel_cuda": "0.0", "host": _ABSENT},  # '/dev/shm size .... UNKNOWN'
    "ds_report_rocm.txt": {
        "kind": "ds_report", "torch.cuda": None, "torch.hip": "6.1.40091-a8dbc0c19", "nvcc": _ABSENT,
        "torch.deepspeed.wheel_hip": "6.1", "torch.deepspeed.wheel_cuda": _ABSENT,
        "host.shm_bytes": round(503.79 * GiB)},
    "ds_report_v03_old.txt": {
        "kind": "ds_report", "torch.version": "1.7.1+cu110", "torch.cuda": "11.0", "nvcc.version": "11.0",
        "torch.deepspeed.version": "0.3.13+8cea96d", "torch.hip": _ABSENT,
        "torch.deepspeed.installed_ops": {"cpu_adam": True, "fused_adam": True, "fused_lamb": True,
                                          "sparse_attn": False, "transformer": True,
                                          "stochastic_transformer": True, "utils": True}},
    # nvidia-smi -------------------------------------------------------------------------------------
    "nvidia_smi_470_table.txt": {
        "kind": "nvidia_smi", "nvml.driver_version": "470.57.02", "nvml.cuda_driver_version": "11.4",
        "nvml.gpus": [
            {"index": 0, "name": "NVIDIA GeForce ...", "pci_bus_id": "00000000:01:00.0",
             "memory_used_bytes": 10235 * MiB, "memory_total_bytes": 24268 * MiB,
             "processes": [{"pid": 1234, "type": "G", "name": "/usr/lib/xorg/Xorg", "used_bytes": 4 * MiB},
                           {"pid": 23456, "type": "C", "name": "/opt/conda/bin/python",
                            "used_bytes": 10227 * MiB}]},
            {"index": 1, "name": "NVIDIA GeForce ...", "pci_bus_id": "00000000:02:00.0",
             "memory_used_bytes": 5 * MiB, "memory_total_bytes": 24268 * MiB,
             "processes": [{"pid": 1234, "type": "G", "name": "/usr/lib/xorg/Xorg", "used_bytes": 4 * MiB}]}]},
    "nvidia_smi_470_mig_a100.txt": {
        "kind": "nvidia_smi", "nvml.driver_version": "470.82.01",
        "nvml.gpus": [{
            "index": 0, "name": "NVIDIA A100-SXM...", "pci_bus_id": "00000000:07:00.0", "ecc_enabled": True,
            "memory_used_bytes": 24 * MiB, "memory_total_bytes": 40536 * MiB, "mig_enabled": True,
            "mig_devices": [
                {"index": 0, "gpu_instance_id": 1, "compute_instance_id": 0, "memory_used_bytes": 3026 * MiB,
                 "memory_total_bytes": 20096 * MiB, "sm_count": 42, "ecc_uncorrected_volatile": 0},
                {"index": 1, "gpu_instance_id": 2, "compute_instance_id": 0, "memory_used_bytes": 7 * MiB,
                 "memory_total_bytes": 9984 * MiB, "sm_count": 28, "ecc_uncorrected_volatile": 0},
                {"index": 2, "gpu_instance_id": 3, "compute_instance_id": 0, "memory_used_bytes": 6 * MiB,
                 "memory_total_bytes": 9984 * MiB, "sm_count": 28, "ecc_uncorrected_volatile": 1}],
            "processes": [{"pid": 41872, "type": "C", "name": "python", "used_bytes": 3015 * MiB,
                           "gpu_instance_id": 1, "compute_instance_id": 0}]}]},
    "nvidia_smi_windows_wddm.txt": {
        "kind": "nvidia_smi", "nvml.driver_version": "531.41", "nvml.cuda_driver_version": "12.1",
        "nvml.gpus": [{
            "index": 0, "name": "NVIDIA GeForce RTX 4090", "pci_bus_id": "00000000:01:00.0", "ecc_enabled": False,
            "memory_used_bytes": 1862 * MiB, "memory_total_bytes": 24564 * MiB,
            "processes": [{"pid": 1456, "type": "C+G", "name": r"C:\Windows\explorer.exe"},
                          {"pid": 9876, "type": "C+G", "name": r"...5n1h2txyewy\ShellExperienceHost.exe"},
                          {"pid": 12044, "type": "C", "name": r"...rograms\Python\Python311\python.exe"}]}]},
    "nvidia_smi_390_no_cuda_version.txt": {  # before 410: no 'CUDA Version' in the header
        "kind": "nvidia_smi", "nvml.driver_version": "390.30", "nvml.cuda_driver_version": _ABSENT,
        "nvml.gpus": [{
            "index": 0, "name": "GeForce GTX 108...", "pci_bus_id": "00000000:01:00.0",
            "memory_used_bytes": 551 * MiB, "memory_total_bytes": 11175 * MiB,
            "processes": [{"pid": 1085, "type": "G", "name": "/usr/lib/xorg/Xorg", "used_bytes": 359 * MiB},
                          {"pid": 1841, "type": "G", "name": "compiz", "used_bytes": 189 * MiB}]}]},
    "nvidia_smi_450_ecc_errors.txt": {
        "kind": "nvidia_smi", "nvml.driver_version": "450.80.02", "nvml.cuda_driver_version": "11.0",
        "nvml.gpus": [
            {"index": 0, "name": "Tesla V100-SXM2...", "pci_bus_id": "00000000:00:1B.0", "ecc_enabled": True,
             "ecc_uncorrected_volatile": 0, "memory_used_bytes": 15990 * MiB, "memory_total_bytes": 16160 * MiB},
            {"index": 1, "name": "Tesla V100-SXM2...", "pci_bus_id": "00000000:00:1C.0", "ecc_enabled": True,
             "ecc_uncorrected_volatile": 3, "memory_used_bytes": 0, "memory_total_bytes": 16160 * MiB}]},
    "nvidia_smi_535_wrapped_80col.txt": {  # rows hard-wrapped at 80 columns by a terminal
        "kind": "nvidia_smi", "nvml.driver_version": "535.104.05", "nvml.cuda_driver_version": "12.2",
        "nvml.gpus": [{
            "index": 0, "name": "NVIDIA RTX 6000 Ada Gene...", "pci_bus_id": "00000000:41:00.0", "ecc_enabled": False,
            "memory_used_bytes": 20145 * MiB, "memory_total_bytes": 49140 * MiB,
            "processes": [{"pid": 741023, "type": "C", "name": "python3", "used_bytes": 20136 * MiB}]}]},
    "nvidia_smi_L_mig.txt": {
        "kind": "nvidia_smi", "nvml.status": "ok", "nvml.driver_version": _ABSENT,
        "nvml.gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-5d5ba0d6-d33d-2b2c-524d-f4ea2b1f7b3e",
                       "mig_enabled": True},
                      {"index": 1, "name": "NVIDIA A100-SXM4-40GB",
                       "uuid": "GPU-2aa1b6f9-e1f8-a3b7-2d07-4c4cc1d9c8b4"}]},
    "nvidia_smi_truncated_table.txt": {
        "kind": "nvidia_smi", "nvml.driver_version": "545.23.08", "nvml.cuda_driver_version": "12.3",
        "nvml.gpus": [{"index": 0, "name": "NVIDIA L40S", "pci_bus_id": "00000000:4F:00.0", "ecc_enabled": True,
                       "ecc_uncorrected_volatile": 0, "memory_used_bytes": 4 * MiB, "memory_total_bytes": 46068 * MiB},
                      {"index": 1, "name": "NVIDIA L40S", "pci_bus_id": "00000000:52:00.0", "ecc_enabled": True,
                       "ecc_uncorrected_volatile": 0}]},
    "nvidia_smi_q_418_v100_retired_pages.txt": {  # old -q: Single/Double Bit ECC blocks, 'Pending Page Blacklist'
        "kind": "nvidia_smi_q", "nvml.driver_version": "418.67", "nvml.cuda_driver_version": "10.1",
        "nvml.gpus": [
            {"index": 0, "name": "Tesla V100-PCIE-32GB", "uuid": "GPU-8e3d1c7a-3f2b-6c1d-9a4e-0f5b7c2d1e3a",
             "pci_bus_id": "00000000:3B:00.0", "memory_total_bytes": 32480 * MiB, "memory_used_bytes": 1515 * MiB,
             "ecc_enabled": True, "ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0,
             "retired_pages_pending": False,
             "processes": [{"pid": 21455, "type": "C", "name": "/usr/bin/python3", "used_bytes": 1503 * MiB}]},
            {"index": 1, "name": "Tesla V100-PCIE-32GB", "uuid": "GPU-1c0a7b6e-55d2-4a9f-8e3b-2f6d9c4e7a10",
             "pci_bus_id": "00000000:D8:00.0", "memory_total_bytes": 32480 * MiB, "memory_used_bytes": 0,
             "ecc_enabled": True, "ecc_uncorrected_volatile": 1, "ecc_uncorrected_aggregate": 2,
             "retired_pages_pending": True, "processes": []}]},
    "nvidia_smi_q_x_a100_mig_470.xml": {
        "kind": "nvidia_smi_xml", "nvml.driver_version": "470.82.01", "nvml.cuda_driver_version": "11.4",
        "nvml.gpus": [{
            "index": 0, "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-5d5ba0d6-d33d-2b2c-524d-f4ea2b1f7b3e",
            "pci_bus_id": "00000000:07:00.0", "memory_total_bytes": 40536 * MiB, "memory_used_bytes": 3061 * MiB,
            "ecc_enabled": True, "ecc_uncorrected_volatile": 1, "ecc_uncorrected_aggregate": 1,
            "remapped_rows_pending": True, "remapped_rows_failure": False, "mig_enabled": True,
            "mig_devices": [
                {"index": 0, "gpu_instance_id": 1, "compute_instance_id": 0, "memory_total_bytes": 20096 * MiB,
                 "memory_used_bytes": 3026 * MiB, "ecc_uncorrected_volatile": 0},
                {"index": 1, "gpu_instance_id": 2, "compute_instance_id": 0, "memory_total_bytes": 9984 * MiB,
                 "memory_used_bytes": 7 * MiB, "ecc_uncorrected_volatile": 1}],
            "processes": [{"pid": 41872, "type": "C", "name": "python", "used_bytes": 3015 * MiB,
                           "gpu_instance_id": 1, "compute_instance_id": 0}]}]},
    "nvidia_smi_q_x_v100_418.xml": {  # old XML: single_bit/double_bit ECC blocks, pending_retirement
        "kind": "nvidia_smi_xml", "nvml.driver_version": "418.67",
        "nvml.gpus": [{
            "index": 0, "name": "Tesla V100-PCIE-32GB", "uuid": "GPU-1c0a7b6e-55d2-4a9f-8e3b-2f6d9c4e7a10",
            "pci_bus_id": "00000000:D8:00.0", "memory_total_bytes": 32480 * MiB, "memory_used_bytes": 0,
            "ecc_enabled": True, "ecc_uncorrected_volatile": 1, "ecc_uncorrected_aggregate": 2,
            "retired_pages_pending": True, "processes": []}]},
    "nvidia_smi_q_x_truncated.xml": {
        "kind": "nvidia_smi_xml", "nvml.driver_version": "418.67", "nvml.cuda_driver_version": "10.1",
        "nvml.gpus": [{
            "index": 0, "name": "Tesla V100-PCIE-32GB", "uuid": "GPU-1c0a7b6e-55d2-4a9f-8e3b-2f6d9c4e7a10",
            "pci_bus_id": "00000000:D8:00.0", "memory_total_bytes": 32480 * MiB, "memory_used_bytes": 0,
            "ecc_enabled": True}]},
    "nvidia_smi_error_wrapped_typographic.txt": {
        "kind": "nvidia_smi_error", "nvml.status": "error", "nvml.error_kind": "driver_not_loaded",
        "nvml.error": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
                      "that the latest NVIDIA driver is installed and running."},
    "nvidia_smi_error_unknown.txt": {
        "kind": "nvidia_smi_error", "nvml.status": "error", "nvml.error_kind": "other",
        "nvml.error": "Failed to initialize NVML: Unknown Error"},
    "nvidia_smi_error_no_library.txt": {
        "kind": "nvidia_smi_error", "nvml.status": "unavailable", "nvml.error_kind": "library_not_found",
        "nvml.driver_version": _ABSENT},
    # nvcc, pip show ----------------------------------------------------------------------------------
    "nvcc_windows_prompt.txt": {
        "kind": "nvcc", "nvcc.version": "11.8", "nvcc.build": "cuda_11.8.r11.8/compiler.31833905_0"},
    "nvcc_crlf.txt": {"kind": "nvcc", "nvcc.version": "12.1", "nvcc.build": "cuda_12.1.r12.1/compiler.32688072_0"},
    "pip_show_torch_cpu.txt": {
        "kind": "pip_show", "torch.version": "2.1.2+cpu", "torch.status": "ok", "torch.cuda": None},
    "pip_show_torch_no_tag.txt": {  # no +cu tag, but Requires: nvidia-*-cu12 (PyPI's CUDA wheel): CUDA major 12
        "kind": "pip_show", "torch.version": "2.3.0", "torch.cuda": "12",
        "torch.deepspeed": {"version": "0.14.2"}},
    "pip_show_torch_conda.txt": {  # plain version, no nvidia-* wheels required: not PyPI's Linux wheel, unknown
        "kind": "pip_show", "torch.version": "2.1.0", "torch.cuda": _ABSENT},
    "pip_show_not_found.txt": {
        "kind": "pip_show", "torch.status": "missing", "torch.version": _ABSENT},
    # several outputs in one text ---------------------------------------------------------------------
    "mixed_issue_smi_collect_env_ds.txt": {
        "kind": "mixed", "nvml.driver_version": "550.54.15", "nvml.cuda_driver_version": "12.4",
        "torch.version": "2.5.1+cu124", "torch.cuda": "12.4", "nvcc.version": "11.5", "torch.nccl": "2.21.5",
        "torch.deepspeed": {"version": "0.15.1", "wheel_torch": "2.5", "wheel_cuda": "12.4"},
        "host.shm_bytes": round(62.79 * GiB),
        "nvml.gpus": [{"index": 0, "name": "NVIDIA RTX 6000 Ada Generation", "pci_bus_id": "00000000:01:00.0",
                       "ecc_enabled": False, "memory_used_bytes": 2 * MiB, "memory_total_bytes": 49140 * MiB,
                       "processes": []}]},
    "mixed_conflicting_torch.txt": {
        "kind": "mixed", "torch.version": "2.1.0+cu121", "torch.cuda": "12.1"},
}

FIXTURE_ERRORS = {
    "not_a_report.txt": "not a report gpudoctor reads",
    "nvidia_smi_xml_entity_bomb.xml": "entity declarations refused",
}


def test_every_fixture_has_a_test():
    names = {p.name for p in FIXTURES.iterdir() if p.is_file()}
    assert names == set(FIXTURE_EXPECTED) | set(FIXTURE_ERRORS)


@pytest.mark.parametrize("name", sorted(FIXTURE_EXPECTED))
def test_fixture_facts(name):
    report = read(FIXTURES / name)
    expected = dict(FIXTURE_EXPECTED[name])
    assert report.kind == expected.pop("kind")
    check(report, expected)


@pytest.mark.parametrize("name", sorted(FIXTURE_ERRORS))
def test_fixture_unreadable(name):
    with pytest.raises(ReportError, match=FIXTURE_ERRORS[name]):
        read(FIXTURES / name)


def test_fixture_parts_and_warnings():
    assert read(FIXTURES / "mixed_issue_smi_collect_env_ds.txt").parts == ("nvidia_smi", "collect_env", "ds_report")
    r = read(FIXTURES / "mixed_conflicting_torch.txt")
    assert r.conflicts == [{"fact": "torch.version", "values": ["2.1.0+cu121", "2.2.0+cu118"],
                            "sources": ["mixed_conflicting_torch.txt (collect_env)",
                                        "mixed_conflicting_torch.txt (pip_show)"]}]
    assert read(FIXTURES / "nvidia_smi_truncated_table.txt").warnings == [
        "nvidia_smi_truncated_table.txt: the nvidia-smi GPU table ends early; the GPU list may be incomplete"]
    assert "cut or malformed" in read(FIXTURES / "nvidia_smi_q_x_truncated.xml").warnings[0]
    for name in ("nvidia_smi_470_table.txt", "nvidia_smi_535_wrapped_80col.txt", "collect_env_wrapped.txt"):
        assert read(FIXTURES / name).warnings == []


def test_fixture_evidence():
    r = read(FIXTURES / "collect_env_driver_warning_11040.txt")
    ev = r.evidence["nvml.cuda_driver_version"]
    assert ev.startswith("collect_env_driver_warning_11040.txt line 1: ")
    assert "found version 11040 means the driver supports CUDA 11.4" in ev
    assert len(r.facts["torch"]["warnings"]) == 1 and "found version 11040" in r.facts["torch"]["warnings"][0]
    r = read(FIXTURES / "collect_env_cpu_only_conda_cudatoolkit.txt")
    assert r.evidence["torch.cuda"] == ("collect_env_cpu_only_conda_cudatoolkit.txt line 4: "
                                        "'CUDA used to build PyTorch: Could not collect' (CPU-only build)")
    r = read(FIXTURES / "collect_env_cut_libraries_only.txt")
    assert "nvidia-cuda-runtime-cu12" in r.evidence["torch.cuda"] and "line 3" in r.evidence["torch.cuda"]
    r = read(FIXTURES / "collect_env_quoted.txt")        # line numbers are those of the text as pasted
    assert r.evidence["nvml.driver_version"] == "collect_env_quoted.txt line 25: 'Nvidia driver version: 470.199.02'"
    r = read(FIXTURES / "nvcc_crlf.txt")
    assert r.evidence["nvcc.version"] == "nvcc_crlf.txt line 4: 'Cuda compilation tools, release 12.1, V12.1.105'"
    r = read(FIXTURES / "ds_report_envblock_only_mismatch.txt")
    assert "GB = GiB" in r.evidence["host.shm_bytes"]
    r = read(FIXTURES / "pip_show_torch_cpu.txt")
    assert r.evidence["torch.cuda"].endswith("'Version: 2.1.2+cpu' (inferred from wheel tag +cpu)")


def test_fixture_missing():
    assert read(FIXTURES / "nvcc_crlf.txt").missing == [
        "nvml.driver_version", "nvml.cuda_driver_version", "nvml.gpus", "torch.version", "torch.cuda",
        "torch.arch_list"]
    assert read(FIXTURES / "collect_env_macos_arm64.txt").missing == [
        "nvml.cuda_driver_version", "torch.arch_list", "nvcc.version"]


# ---------------------------------------------------------------------------------------------------
# merging several reports
# ---------------------------------------------------------------------------------------------------
def _report(name, facts, evidence=None):
    return ParsedReport(kind="collect_env", facts=facts, evidence=evidence or {}, missing=[], name=name)


def test_merge_keeps_first_and_records_conflicts():
    a = _report("a.txt", {"torch": {"version": "2.1.0", "cuda": None}, "nvml": {"driver_version": "535.1"}},
                {"torch.version": "a.txt line 2: 'PyTorch version: 2.1.0'"})
    b = _report("b.txt", {"torch": {"version": "2.2.0", "cuda": "12.1", "nccl": "2.19.3"},
                          "nvml": {"driver_version": "535.1", "status": "ok"}},
                {"torch.version": "b.txt line 9", "torch.nccl": "b.txt line 30"})
    c = _report("c.txt", {"torch": {"version": "2.3.0"}})
    facts, evidence, conflicts = merge_reports([a, b, c])
    assert facts == {"torch": {"version": "2.1.0", "cuda": None, "nccl": "2.19.3"},
                     "nvml": {"driver_version": "535.1", "status": "ok"}}
    assert conflicts == [
        {"fact": "torch.version", "values": ["2.1.0", "2.2.0", "2.3.0"], "sources": ["a.txt", "b.txt", "c.txt"]},
        {"fact": "torch.cuda", "values": [None, "12.1"], "sources": ["a.txt", "b.txt"]},
    ]
    assert evidence == {"torch.version": "a.txt line 2: 'PyTorch version: 2.1.0'", "torch.nccl": "b.txt line 30"}
    assert a.facts["torch"]["version"] == "2.1.0" and "nccl" not in a.facts["torch"]  # inputs untouched


def test_merge_gpus_by_index():
    a = _report("smi.txt", {"nvml": {"gpus": [{"index": 1, "name": "Tesla V100-SXM2...", "memory_total_bytes": 5},
                                              {"index": 0, "name": "Tesla V100-SXM2...", "memory_total_bytes": 5}]}})
    b = _report("env.txt", {"nvml": {"gpus": [{"index": 0, "name": "Tesla V100-SXM2-16GB"},
                                              {"index": 1, "name": "Tesla V100-SXM2-16GB"},
                                              {"index": 2, "name": "Tesla T4"}]}})
    facts, _, conflicts = merge_reports([a, b])
    assert conflicts == []
    assert facts["nvml"]["gpus"] == [{"index": 0, "name": "Tesla V100-SXM2-16GB", "memory_total_bytes": 5},
                                     {"index": 1, "name": "Tesla V100-SXM2-16GB", "memory_total_bytes": 5},
                                     {"index": 2, "name": "Tesla T4"}]
    c = _report("other.txt", {"nvml": {"gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}]}})
    _, _, conflicts = merge_reports([a, b, c])
    assert conflicts == [{"fact": "nvml.gpus[0].name", "values": ["Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB"],
                          "sources": ["env.txt", "other.txt"]}]


def test_merge_no_gpus_versus_gpus_is_a_conflict():
    a = _report("mac.txt", {"nvml": {"status": "unavailable", "driver_version": None, "gpus": []}})
    b = _report("smi.txt", {"nvml": {"status": "ok", "driver_version": "550.54.15",
                                     "gpus": [{"index": 0, "name": "X"}]}})
    facts, _, conflicts = merge_reports([a, b])
    assert facts["nvml"] == {"status": "unavailable", "driver_version": None, "gpus": []}
    assert [c["fact"] for c in conflicts] == ["nvml.status", "nvml.driver_version", "nvml.gpus"]


def test_merge_parsed_reports_end_to_end():
    reports = [read(FIXTURES / n) for n in ("nvidia_smi_535_wrapped_80col.txt", "ds_report_envblock_only_mismatch.txt",
                                            "nvcc_crlf.txt")]
    facts, evidence, conflicts = merge_reports(reports)
    assert facts["nvml"]["driver_version"] == "535.104.05"
    assert facts["torch"]["cuda"] == "12.4"
    assert facts["nvcc"] == {"version": "11.5"} or facts["nvcc"]["version"] == "11.5"
    assert conflicts == [{"fact": "nvcc.version", "values": ["11.5", "12.1"],
                          "sources": ["ds_report_envblock_only_mismatch.txt", "nvcc_crlf.txt"]}]
    assert facts["nvcc"]["build"] == "cuda_12.1.r12.1/compiler.32688072_0"
    assert evidence["nvcc.version"].startswith("ds_report_envblock_only_mismatch.txt line 8")


# ---------------------------------------------------------------------------------------------------
# known none versus unknown, and small variants
# ---------------------------------------------------------------------------------------------------
CE_HEAD = "Collecting environment information...\nPyTorch version: 2.1.0\n"


@pytest.mark.parametrize("line, expected", [
    ("CUDA used to build PyTorch: None", None),
    ("CUDA used to build PyTorch: Could not collect", None),
    ("CUDA used to build PyTorch: 10.1.243", "10.1"),
    ("CUDA used to build PyTorch: 12.4", "12.4"),
])
def test_cuda_used_to_build(line, expected):
    assert parse_report(CE_HEAD + line).facts["torch"]["cuda"] == expected


@pytest.mark.parametrize("line", ["CUDA runtime version: Could not collect", "CUDA runtime version: No CUDA"])
def test_cuda_runtime_not_found_leaves_nvcc_unknown(line):
    assert "nvcc" not in parse_report(CE_HEAD + line).facts


def test_torch_version_without_tag_leaves_cuda_unknown():
    r = parse_report("Collecting environment information...\nPyTorch version: 2.3.0\nIs CUDA available: True\n")
    assert "cuda" not in r.facts["torch"] and r.facts["torch"]["cuda_available"] is True


@pytest.mark.parametrize("version, cuda", [("1.11.0+cu113", "11.3"), ("2.5.1+cu124", "12.4"), ("1.4.0+cu92", "9.2"),
                                           ("2.9.0+cu130", "13.0"), ("2.1.0+cpu", None)])
def test_wheel_tag(version, cuda):
    r = parse_report("Name: torch\nVersion: %s\n" % version)
    assert r.facts["torch"]["cuda"] == cuda
    assert "inferred from wheel tag" in r.evidence["torch.cuda"]


def test_rocm_wheel_tag():
    r = parse_report("Name: torch\nVersion: 2.3.0+rocm6.0\n")
    assert r.facts["torch"]["cuda"] is None and r.facts["torch"]["hip"] == "6.0"


@pytest.mark.parametrize("text, version", [
    ("UserWarning: The NVIDIA driver on your system is too old (found version 10010).", "10.1"),
    ("The NVIDIA driver on your system is too old (found version\n12020). Please update", "12.2"),
    ("CUDA initialization: The NVIDIA driver on your system is too old (found version 9020).", "9.2"),
])
def test_driver_warning_hint(text, version):
    r = parse_report(text)
    assert r.kind == "torch_warning"
    assert r.facts["nvml"] == {"cuda_driver_version": version}


def test_gpu_inline_then_following_lines():
    r = parse_report(CE_HEAD + "GPU models and configuration: GPU 0: Tesla T4\nGPU 1: Tesla T4\n"
                     "Nvidia driver version: 535.104.05\n")
    assert gpu_names(r) == ["Tesla T4", "Tesla T4"]


def test_gpu_line_with_uuid():
    r = parse_report(CE_HEAD + "GPU models and configuration: GPU 0: NVIDIA L4 (UUID: GPU-1234-abcd)\n")
    assert r.facts["nvml"]["gpus"] == [{"index": 0, "name": "NVIDIA L4", "uuid": "GPU-1234-abcd"}]


def test_cudnn_ambiguous_versions_stay_unknown():
    r = parse_report(CE_HEAD + "cuDNN version: Probably one of the following:\n/usr/lib/libcudnn.so.8.9.2\n"
                     "/usr/local/cuda/lib64/libcudnn.so.9.1.0\nHIP runtime version: N/A\n")
    assert "cudnn" not in r.facts["torch"]


def test_pip_show_deepspeed_not_found():
    r = parse_report("WARNING: Package(s) not found: deepspeed")
    assert r.facts == {"torch": {"deepspeed": {"version": None}}}


def test_error_messages_variants():
    r = parse_report("NVIDIA-SMI has failed because it couldnt communicate with the NVIDIA\ndriver.")
    assert r.facts["nvml"]["error_kind"] == "driver_not_loaded"
    r = parse_report("Failed to initialize NVML: Insufficient Permissions")
    assert r.facts["nvml"]["error_kind"] == "no_permission"


def test_ds_report_op_table_cut_mid_way():
    text = (FIXTURES / "ds_report_v03_old.txt").read_text().splitlines()[:16]
    r = parse_report("\n".join(text))
    assert r.facts["torch"]["deepspeed"]["installed_ops"] == {"cpu_adam": True, "fused_adam": True,
                                                              "fused_lamb": True, "sparse_attn": False}
    assert "version" not in r.facts["torch"]


# ---------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "   \n\n\t", "\x00\x01\x02", None, b"", "> \n>\n"])
def test_empty_is_report_error(text):
    with pytest.raises(ReportError, match="empty"):
        parse_report(text, "empty.txt")


@pytest.mark.parametrize("text", ["hello world", "DeepSpeed C++/CUDA extension op report\n-----\n",
                                  "<nvidia_smi_log><gpu>", "\ufffd" * 100])
def test_unrecognised_is_report_error(text):
    with pytest.raises(ReportError):
        parse_report(text)


def test_bytes_are_decoded():
    r = parse_report((FIXTURES / "nvcc_crlf.txt").read_bytes())
    assert r.facts["nvcc"]["version"] == "12.1"


def test_xxe_is_refused():
    text = ('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            "<nvidia_smi_log><driver_version>&e;</driver_version></nvidia_smi_log>")
    with pytest.raises(ReportError, match="refused"):
        parse_report(text)


# ---------------------------------------------------------------------------------------------------
# normalisation
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", ["\x1b[92m[OKAY]\x1b[0m", "#033[92m[OKAY]#033[0m", "^[[92m[OKAY]^[[0m",
                                 "[92m[OKAY][0m", "\\033[92m[OKAY]\\033[0m", "\\x1b[1;92m[OKAY]\\x1b[0m"])
def test_ansi_codes_removed(raw):
    assert clean_text(raw) == "[OKAY]"


def test_normalize_quotes_prompts_fullwidth_and_indent():
    lines = normalize("> > $ nvidia-smi\r\n>     GPU 0\uff1aTesla T4\r\n>     Name:\u00a0torch\n"
                      "(base) me@box:~/x$ pip show torch\nPS C:\\Users\\me> nvcc -V\n")
    assert lines.lines == ["", "GPU 0:Tesla T4", "Name: torch", "", "", ""]
    assert lines.nos == [1, 2, 3, 4, 5, 6]


def test_normalize_joins_wrapped_table_rows():
    lines = normalize("| NVIDIA-SMI 535.1   Driver Version: 535.1  CUDA Ver\nsion: 12.2   |\nnext line\n")
    assert lines.lines == ["| NVIDIA-SMI 535.1   Driver Version: 535.1  CUDA Version: 12.2   |", "next line", ""]
    assert lines.nos == [1, 3, 4]


def test_sources_are_python39_syntax():
    for path in sorted((ROOT / "gpudoctor" / "ingest").glob("*.py")):
        ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=(3, 9))
