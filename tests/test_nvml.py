"""The NVML child's logic against a mocked pynvml (there is no NVIDIA driver here)."""

import os
import types

import pynvml
import pytest

from gpudoctor.probes import nvml_child

GiB = 1024**3


class FakeNVMLError(pynvml.NVMLError):
    def __new__(cls, value):
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self):
        return {pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "Driver/library version mismatch",
                pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found"}.get(self.value, "error")


@pytest.fixture
def nvml(mocker):
    """pynvml with every call the child makes patched to describe two H100s, one with a pending row remap."""
    fake = mocker.MagicMock(wraps=None)
    for name in dir(pynvml):
        if name.startswith("NVML_"):
            setattr(fake, name, getattr(pynvml, name))
    fake.NVMLError = pynvml.NVMLError
    fake.nvmlSystemGetDriverVersion.return_value = "550.90.07"
    fake.nvmlSystemGetCudaDriverVersion_v2.return_value = 12040
    fake.nvmlDeviceGetCount.return_value = 2
    fake.nvmlDeviceGetHandleByIndex.side_effect = lambda i: i
    fake.nvmlDeviceGetName.side_effect = lambda h: b"NVIDIA H100 80GB HBM3"
    fake.nvmlDeviceGetUUID.side_effect = lambda h: f"GPU-{h}"
    fake.nvmlDeviceGetPciInfo.side_effect = lambda h: types.SimpleNamespace(busId=f"00000000:{h}:00.0")
    fake.nvmlDeviceGetCudaComputeCapability.return_value = (9, 0)
    fake.nvmlDeviceGetMemoryInfo.return_value = types.SimpleNamespace(total=80 * GiB, used=GiB)
    fake.nvmlDeviceGetEccMode.return_value = (1, 1)
    fake.nvmlDeviceGetTotalEccErrors.side_effect = lambda h, kind, counter: 3 if h == 1 else 0
    fake.nvmlDeviceGetRetiredPagesPendingStatus.side_effect = FakeNVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    fake.nvmlDeviceGetRemappedRows.side_effect = lambda h: (0, 1, h == 1, False)
    fake.nvmlDeviceGetMigMode.return_value = (0, 0)
    fake.nvmlDeviceGetNvLinkState.side_effect = lambda h, link: (
        1 if link < 18 else (_ for _ in ()).throw(FakeNVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)))
    fake.nvmlDeviceGetComputeRunningProcesses.side_effect = lambda h: (
        [types.SimpleNamespace(pid=4242, usedGpuMemory=2 * GiB)] if h == 0 else [])
    fake.nvmlDeviceGetP2PStatus.return_value = pynvml.NVML_P2P_STATUS_OK
    return fake


def test_collects_driver_and_gpus(nvml, tmp_path):
    facts = nvml_child.collect(nvml, module_path=str(tmp_path / "absent"))
    assert facts["status"] == "ok" and facts["driver_version"] == "550.90.07"
    assert facts["cuda_driver_version"] == "12.4"
    assert [g["name"] for g in facts["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
    first, second = facts["gpus"]
    assert first["cc"] == "9.0" and first["memory_total_bytes"] == 80 * GiB
    assert first["nvlink_active_links"] == 18 and facts["p2p_supported"] is True
    assert first["processes"] == [{"pid": 4242, "name": None, "used_bytes": 2 * GiB}]
    assert second["ecc_uncorrected_volatile"] == 3 and second["remapped_rows_pending"] is True
    assert "retired_pages_pending" not in first, "an unsupported query leaves the fact unknown"
    nvml.nvmlShutdown.assert_called_once()


def test_driver_library_mismatch_is_a_fact(nvml, tmp_path):
    module = tmp_path / "version"
    module.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n")
    nvml.nvmlInit.side_effect = FakeNVMLError(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    facts = nvml_child.collect(nvml, module_path=str(module))
    assert facts == {"kernel_module": "535.129.03", "status": "error", "error_kind": "driver_mismatch",
                     "error": "Driver/library version mismatch"}


def test_no_library_and_no_module_means_no_driver(nvml, tmp_path):
    nvml.nvmlInit.side_effect = FakeNVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    facts = nvml_child.collect(nvml, module_path=str(tmp_path / "absent"))
    assert facts["status"] == "unavailable" and facts["gpus"] == [] and facts["driver_version"] is None


def test_library_missing_in_a_container_with_the_module_loaded(nvml, tmp_path):
    module = tmp_path / "version"
    module.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\n")
    nvml.nvmlInit.side_effect = FakeNVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    facts = nvml_child.collect(nvml, module_path=str(module))
    assert facts["status"] == "error" and facts["error_kind"] == "library_not_found"
    assert facts["kernel_module"] == "570.124.06"


def test_zero_devices(nvml, tmp_path):
    nvml.nvmlDeviceGetCount.return_value = 0
    facts = nvml_child.collect(nvml, module_path=str(tmp_path / "absent"))
    assert facts["error_kind"] == "no_devices" and facts["gpus"] == []


def test_real_child_on_this_machine():
    """Without a loaded NVIDIA module (CI), the real child reports 'no driver' as a fact, not an error."""
    facts = nvml_child.collect()
    driver_loaded = os.path.exists("/proc/driver/nvidia/version")
    assert facts["status"] == ("ok" if driver_loaded else "unavailable"), facts
