"""NCCL's 'peer access is not supported' has one owner, GD412 (the P2P path between the GPUs), never GD425 too; an
NVLink pair whose P2P NVML disables stays GD425's (a fault of the link, not the PCIe path)."""

import pytest

from gpudoctor.api import evaluate
from gpudoctor.ingest.source import snapshot_from_reports

IPC = ("z-pc:909608:910337 [0] NCCL INFO Channel 00 : 0[2d000] -> 1[2e000] via P2P/IPC\n"
       "z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not "
       "supported between these two devices\n"
       "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled cuda error, NCCL version "
       "2.7.8\n")
SHM = ("9b405963aa12:774:854 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is not supported between "
       "these two devices'\n")
NVLINK = ("P2P is disabled between NVLINK connected GPUs 1 and 0. "
          "This should not be the case given their connectivity, "
          "and is probably due to a hardware issue. If you still want to proceed, you can set "
          "NCCL_IGNORE_DISABLED_P2P=1.\n")


def _fired(tmp_path, text):
    path = tmp_path / "paste.txt"
    path.write_text(text)
    return {f.rule for f in evaluate(snapshot_from_reports([str(path)])).findings}


@pytest.mark.parametrize("text", [IPC, SHM], ids=["p2p-ipc", "shm-cumem"])
def test_peer_access_unsupported_is_gd412_only(tmp_path, text):
    fired = _fired(tmp_path, text)
    assert "GD412" in fired and "GD425" not in fired


def test_nvlink_p2p_disabled_stays_gd425(tmp_path):
    fired = _fired(tmp_path, NVLINK)
    assert "GD425" in fired and "GD412" not in fired
