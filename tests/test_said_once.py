"""Helpers that exist once and serve several callers: major_minor (readers and rules), byte units."""

import pytest

from gpudoctor.catalog import find_rule
from gpudoctor.engine import evaluate
from gpudoctor.ingest.report import parse_report
from gpudoctor.knowledge import major_minor
from gpudoctor.snapshot import Snapshot
from gpudoctor.units import GiB, MiB, find, gib, parse, size


@pytest.mark.parametrize("text,expected", [
    ("12.4.131", "12.4"), ("12.4", "12.4"), ("v12.4", "12.4"), (" 11.8 ", "11.8"), ("535.104.05", "535.104"),
    ("2.5.1+cu124", "2.5"), ("12.04", "12.4"), ("12", "12"), ("2023.1", "2023.1"),
    ("cuda_12.1", None), ("abc", None), ("", None), (None, None),
])
def test_major_minor_never_invents_a_minor(text, expected):
    assert major_minor(text) == expected


def test_major_minor_in_a_reader():
    report = parse_report("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n",
                          "nvcc.txt")
    assert report.facts["nvcc"]["version"] == "12.4"


@pytest.mark.parametrize("home_version,fires", [("12.4.1", False), ("11.8", True)])
def test_major_minor_in_a_rule(home_version, fires):
    """GD106 compares CUDA_HOME's toolkit with the nvcc on PATH by major.minor."""
    nvcc = {"path": "/opt/cuda/bin/nvcc", "version": "12.4", "cuda_home": "/usr/local/cuda-x", "cuda_path": None,
            "toolkits": [{"path": "/usr/local/cuda-x", "version": home_version}]}
    report = evaluate(Snapshot(facts={"nvcc": nvcc, "env": {}}), [find_rule("GD106")])
    assert bool(report.findings) is fires


@pytest.mark.parametrize("text,bare,expected", [
    ("79.14 GiB", False, round(79.14 * GiB)), ("1187MiB", False, 1187 * MiB), ("24GB", False, 24 * GiB),
    ("24 G", False, 24 * GiB), ("64K", False, 65536), ("512 B", False, 512), ("2 TiB", False, 2 * 1024**4),
    ("8", True, 8), ("128M", True, 128 * MiB), ("8", False, None), ("4090", False, None), ("lots", True, None),
    ("10 Mbps", False, None), ("A100 40GB", False, None), ("", False, None), (None, False, None),
])
def test_one_byte_size_grammar(text, bare, expected):
    """Torch's OOM totals, nvidia-smi's MiB, --gpu 24GB and nccl-tests' -b 64K are read by one parser."""
    assert parse(text, bare=bare) == expected


def test_a_size_found_in_a_longer_text():
    assert find("|    0   N/A  N/A   1234   C   python   1187MiB |") == 1187 * MiB
    assert find("31.26 GB") == round(31.26 * GiB) and find("N/A") is None and find("GPU 0 at 10 Mbps") is None


def test_byte_units():
    assert (size(None), size(512), size(64 * 1024), size(64 * MiB), size(48 * GiB)) == ("?", "512 B", "64 KiB",
                                                                                       "64 MiB", "48 GiB")
    assert (gib(None), gib(int(79.25 * GiB))) == ("?", "79.2 GiB")


Q_TEXT = """
==============NVSMI LOG==============

Timestamp                           : Wed Jun 12 09:14:03 2024
Driver Version                      : 535.104.05
CUDA Version                        : 12.2

Attached GPUs                       : 1
GPU 00000000:3B:00.0
    Product Name                    : NVIDIA A100-SXM4-80GB
    GPU UUID                        : GPU-8e3d1c7a-3f2b-6c1d-9a4e-0f5b7c2d1e3a
    MIG Mode
        Current                     : Enabled
        Pending                     : Enabled
    PCI
        Bus Id                      : 00000000:3B:00.0
    FB Memory Usage
        Total                       : 81920 MiB
        Used                        : 1024 MiB
        Free                        : 80896 MiB
    ECC Mode
        Current                     : Enabled
        Pending                     : Enabled
    Remapped Rows
        Correctable Error           : 0
        Uncorrectable Error         : 0
        Pending                     : Yes
        Remapping Failure Occurred  : No
"""

XML_TEXT = """<?xml version="1.0" ?>
<nvidia_smi_log>
    <driver_version>535.104.05</driver_version>
    <cuda_version>12.2</cuda_version>
    <attached_gpus>1</attached_gpus>
    <gpu id="00000000:3B:00.0">
        <product_name>NVIDIA A100-SXM4-80GB</product_name>
        <uuid>GPU-8e3d1c7a-3f2b-6c1d-9a4e-0f5b7c2d1e3a</uuid>
        <mig_mode><current_mig>Enabled</current_mig><pending_mig>Enabled</pending_mig></mig_mode>
        <pci><pci_bus_id>00000000:3B:00.0</pci_bus_id></pci>
        <fb_memory_usage><total>81920 MiB</total><used>1024 MiB</used><free>80896 MiB</free></fb_memory_usage>
        <ecc_mode><current_ecc>Enabled</current_ecc><pending_ecc>Enabled</pending_ecc></ecc_mode>
        <remapped_rows><remapped_row_pending>Yes</remapped_row_pending>
            <remapped_row_failure>No</remapped_row_failure></remapped_rows>
    </gpu>
</nvidia_smi_log>
"""


def test_nvidia_smi_text_and_xml_read_the_same_fields():
    """`nvidia-smi -q` and `nvidia-smi -q -x` of one GPU give the same facts for every field of the one table."""
    from gpudoctor.ingest.nvidia_smi_query import GPU_FIELDS

    (text_gpu,) = parse_report(Q_TEXT, "q.txt").facts["nvml"]["gpus"]
    (xml_gpu,) = parse_report(XML_TEXT, "q.xml").facts["nvml"]["gpus"]
    keys = [key for key, *_ in GPU_FIELDS]
    assert {k: text_gpu.get(k) for k in keys} == {k: xml_gpu.get(k) for k in keys} == {
        "uuid": "GPU-8e3d1c7a-3f2b-6c1d-9a4e-0f5b7c2d1e3a", "pci_bus_id": "00000000:3B:00.0",
        "memory_total_bytes": 80 * GiB, "memory_used_bytes": 1 * GiB, "ecc_enabled": True,
        "remapped_rows_pending": True, "remapped_rows_failure": False, "mig_enabled": True}
