"""Helpers that exist once and serve several callers: major_minor (readers and rules), byte units."""

import pytest

from gpudoctor.catalog import find_rule
from gpudoctor.engine import evaluate
from gpudoctor.ingest import parse_report
from gpudoctor.knowledge import major_minor
from gpudoctor.snapshot import Snapshot
from gpudoctor.units import GiB, MiB, gib, size


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


def test_byte_units():
    assert (size(None), size(512), size(64 * 1024), size(64 * MiB), size(48 * GiB)) == ("?", "512 B", "64 KiB",
                                                                                       "64 MiB", "48 GiB")
    assert (gib(None), gib(int(79.25 * GiB))) == ("?", "79.2 GiB")
