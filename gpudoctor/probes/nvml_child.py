"""Read the NVIDIA driver and GPUs through NVML. Runs in a child process (a wedged driver can hang NVML calls)
and prints one JSON object. Standalone: imports nothing from gpudoctor."""

from __future__ import annotations

import json
import re
import sys

ERROR_KINDS = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": "library_not_found",
    "NVML_ERROR_DRIVER_NOT_LOADED": "driver_not_loaded",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "driver_mismatch",
    "NVML_ERROR_NO_PERMISSION": "no_permission",
}
MiB = 1024 * 1024


def kernel_module_version(path: str = "/proc/driver/nvidia/version"):
    """The loaded kernel module's version, or None when the module is not loaded."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        return None
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text) or re.search(
        r"(\d{3}\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else "unknown"


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _error_kind(nvml, exc) -> str:
    for name, kind in ERROR_KINDS.items():
        if getattr(nvml, name, object()) == getattr(exc, "value", None):
            return kind
    return "other"


def _optional(call, *args):
    """The value of an NVML call, or None when the GPU or driver does not support it."""
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and friends: the fact stays unknown
        return None


def _process_name(pid: int):
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _gpu(nvml, index: int) -> dict:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    gpu = {"index": index, "name": _text(nvml.nvmlDeviceGetName(handle))}
    for key, call in (("uuid", nvml.nvmlDeviceGetUUID), ("pci_bus_id", lambda h: nvml.nvmlDeviceGetPciInfo(h).busId)):
        value = _optional(call, handle)
        if value is not None:
            gpu[key] = _text(value)
    cc = _optional(nvml.nvmlDeviceGetCudaComputeCapability, handle)
    if cc:
        gpu["cc"] = f"{cc[0]}.{cc[1]}"
    memory = _optional(nvml.nvmlDeviceGetMemoryInfo, handle)
    if memory is not None:
        gpu["memory_total_bytes"] = int(memory.total)
        gpu["memory_used_bytes"] = int(memory.used)
    ecc = _optional(nvml.nvmlDeviceGetEccMode, handle)
    if ecc is not None:
        gpu["ecc_enabled"] = bool(ecc[0])
        if ecc[0]:
            for key, counter in (("ecc_uncorrected_volatile", nvml.NVML_VOLATILE_ECC),
                                 ("ecc_uncorrected_aggregate", nvml.NVML_AGGREGATE_ECC)):
                value = _optional(nvml.nvmlDeviceGetTotalEccErrors, handle,
                                  nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter)
                if value is not None:
                    gpu[key] = int(value)
    pending = _optional(nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
    if pending is not None:
        gpu["retired_pages_pending"] = bool(pending)
    remap = _optional(nvml.nvmlDeviceGetRemappedRows, handle)
    if remap is not None:
        gpu["remapped_rows_pending"] = bool(remap[2])
        gpu["remapped_rows_failure"] = bool(remap[3])
    mig = _optional(nvml.nvmlDeviceGetMigMode, handle)
    if mig is not None:
        gpu["mig_enabled"] = bool(mig[0])
    links = 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = _optional(nvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:
            break
        links += 1 if state else 0
    gpu["nvlink_active_links"] = links
    processes = _optional(nvml.nvmlDeviceGetComputeRunningProcesses, handle)
    if processes is not None:
        gpu["processes"] = [
            {"pid": int(p.pid), "name": _process_name(int(p.pid)),
             "used_bytes": int(p.usedGpuMemory) if p.usedGpuMemory is not None else None}
            for p in processes
        ]
    return gpu


def _p2p_supported(nvml, count: int):
    """True when every GPU pair reports P2P read support, None when NVML cannot tell."""
    if count < 2 or not hasattr(nvml, "nvmlDeviceGetP2PStatus"):
        return None
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    for i in range(count):
        for j in range(i + 1, count):
            status = _optional(nvml.nvmlDeviceGetP2PStatus, handles[i], handles[j], nvml.NVML_P2P_CAPS_INDEX_READ)
            if status is None:
                return None
            if status != nvml.NVML_P2P_STATUS_OK:
                return False
    return True


def collect(nvml=None, module_path: str = "/proc/driver/nvidia/version") -> dict:
    """All NVML facts as the `nvml` fact group; NVML failures become facts, never exceptions."""
    facts = {"kernel_module": kernel_module_version(module_path)}
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as exc:
            facts.update(status="error", error_kind="other", error=f"nvidia-ml-py is not installed: {exc}")
            return facts
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        kind = _error_kind(nvml, exc)
        absent = kind == "library_not_found" and facts["kernel_module"] is None
        facts.update(status="unavailable" if absent else "error", error_kind=kind, error=str(exc))
        if absent:
            facts.update(driver_version=None, cuda_driver_version=None, gpus=[])
        return facts
    try:
        facts["status"], facts["error_kind"], facts["error"] = "ok", None, None
        facts["driver_version"] = _text(nvml.nvmlSystemGetDriverVersion())
        cuda = _optional(getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", nvml.nvmlSystemGetCudaDriverVersion))
        if cuda:
            facts["cuda_driver_version"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            facts.update(status="error", error_kind="no_devices", error="No devices were found")
        facts["gpus"] = [_gpu(nvml, index) for index in range(count)]
        p2p = _p2p_supported(nvml, count)
        if p2p is not None:
            facts["p2p_supported"] = p2p
    finally:
        _optional(nvml.nvmlShutdown)
    return facts


if __name__ == "__main__":
    json.dump(collect(), sys.stdout)
