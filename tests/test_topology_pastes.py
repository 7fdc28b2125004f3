"""A pasted `nvidia-smi topo -m` with GPUs behind PCIe bridges (PIX, PXB, PHB): GD412 says what to check for a P2P
hang (the IOMMU, ACS, a run with NCCL_P2P_DISABLE=1) at the severity the paste supports."""

import io

from gpudoctor.api import evaluate
from gpudoctor.ingest.source import snapshot_from_reports
from gpudoctor.model import Severity

MATRIX = ("\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
          "GPU0\t X \tPXB\tSYS\tSYS\t0-27\t0\n"
          "GPU1\tPXB\t X \tSYS\tSYS\t0-27\t0\n"
          "GPU2\tSYS\tSYS\t X \tPIX\t28-55\t1\n"
          "GPU3\tSYS\tSYS\tPIX\t X \t28-55\t1\n")


def gd412(text):
    report = evaluate(snapshot_from_reports(["-"], stdin=io.BytesIO(text.encode())))
    return [(f.severity, f.message) for f in report.findings if f.rule == "GD412"]


def test_a_bare_matrix_gets_what_to_check_as_information():
    (severity, message), = gd412(MATRIX)
    assert severity == Severity.INFO and "GPU0-GPU1 PXB, GPU2-GPU3 PIX" in message


def test_a_stated_hang_beside_the_matrix_is_a_warning():
    (severity, message), = gd412(MATRIX + "\nThe job hangs at the first all_reduce.\n")
    assert severity == Severity.WARNING and "The job hangs at the first all_reduce." in message


def test_nvlink_and_cross_socket_paths_are_not_bridges():
    nvlink = MATRIX.replace("PXB", "NV12").replace("PIX", "NV12")
    assert gd412(nvlink + "\nIt hangs.\n") == []
