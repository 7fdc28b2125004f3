"""Read the NVIDIA driver and GPUs through NVML. Runs in a child process (a wedged driver can hang NVML calls)
and prints one JSON object. Standalone: imports nothing from gpudoctor.

Every query goes through `_optional`. NVML's return codes (nvml.h, nvmlReturn_t) say three things:
- the query went unanswered (UNANSWERED: not supported on this GPU, an entry point or struct version this driver
  lacks): that one fact is unknown — normal on consumer GPUs and old drivers;
- this process may not open the GPU (HIDDEN on its *handle*: SLURM's ConstrainDevices, a container's device
  cgroup): the GPU is listed apart, in `hidden_gpus`, and counts nowhere. HIDDEN on a query of a GPU whose handle
  opened is that query unanswered: a process given a MIG device, not the GPU (a container, a Slurm job), gets
  NO_PERMISSION for the parent's memory and process list (nvml.h on nvmlDeviceGetMemoryInfo: "In MIG mode, if
  device handle is provided, the API returns aggregate information, only if the caller has appropriate
  privileges");
- anything else on the handle or an identity query (name, UUID, memory), and a lost GPU on any query: the GPU is
  broken; its queries end and the code is recorded on it (`error_kind`, `error_query`).
"""

from __future__ import annotations

import ctypes
import functools
import gc
import json
import os
import re
import sys
import time

RENAMED = {"LIB_RM_VERSION_MISMATCH": "driver_mismatch", "GPU_IS_LOST": "gpu_lost"}  # else NVML's name, lowercase
UNANSWERED = frozenset({"not_supported", "function_not_found", "invalid_argument", "insufficient_size",
                        "argument_version_mismatch", "not_found", "no_data", "deprecated"})
HIDDEN = frozenset({"no_permission", "operating_system"})  # nvml.h: "blocked by the operating system/cgroups"
P2P_STATUS = {0: "ok", 1: "chipset_not_supported", 2: "gpu_not_supported", 3: "topology_not_supported",
              4: "disabled_by_regkey", 5: "not_supported", 6: "unknown"}
PROCESS_QUERIES = ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2")
DRIVER: dict = {}  # the driver version, once read: the process records depend on it
# As it goes, the child writes to stderr the facts read so far before each GPU and the name of each query, so that
# the parent keeps what arrived when a GPU hangs the driver, and names that GPU and query (probes/nvml.py).
READING, QUERY = "gpudoctor-nvml-reading ", "gpudoctor-nvml-query "
PROGRESS: dict = {"on": False}
NOT_AVAILABLE = (1 << 64) - 1  # NVML_VALUE_NOT_AVAILABLE for unsigned long long (MIG, WDDM)


class GpuFailed(Exception):
    """A query that must answer did not: the GPU is lost, broken, or hidden from this process."""

    def __init__(self, kind: str, message: str, query: str = "", code=None):
        super().__init__(message)
        self.kind, self.query, self.code = kind, query, code

    def facts(self) -> dict:
        """error_kind, error, and the code itself where this nvidia-ml-py has no name for it (`other`)."""
        unnamed = {"error_code": self.code} if self.kind == "other" else {}
        return {"error_kind": self.kind, "error": str(self), **unnamed}


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
    """NVML's name for the return code, lowercase (`unknown`, `insufficient_power`, …); `other` for a code this
    nvidia-ml-py does not name (the parent names it from rules/nvml_errors.toml: probes/nvml.py)."""
    return _error_names(nvml).get(getattr(exc, "value", None), "other")


@functools.cache
def _error_names(nvml) -> dict:
    """Each return code's name in this nvidia-ml-py, the first NVML_ERROR_ name of its value in dir() order: read
    once (its module holds thousands of names, and a GPU answers dozens of queries Not Supported)."""
    names: dict = {}
    for name in dir(nvml):
        if name.startswith("NVML_ERROR_"):
            suffix = name[len("NVML_ERROR_"):]
            names.setdefault(getattr(nvml, name), RENAMED.get(suffix, suffix.lower()))
    return names


def _optional(nvml, call, *args, identity: str = ""):
    """The value of an NVML call; None when it went unanswered (UNANSWERED, an entry point this driver lacks).
    Raises GpuFailed for a lost GPU, and for any other failure of an `identity` query (its name: `name`, `uuid`,
    `memory`) but UNANSWERED and HIDDEN (the handle opened: the query is refused, not the GPU); anything but an
    NVML error propagates (a bug)."""
    if PROGRESS["on"]:
        sys.stderr.write(QUERY + getattr(call, "__name__", "query") + "\n")
        sys.stderr.flush()
    try:
        return call(*args)
    except nvml.NVMLError as exc:
        kind = _error_kind(nvml, exc)
        if kind == "gpu_lost" or (identity and kind not in UNANSWERED | HIDDEN):
            raise GpuFailed(kind, str(exc), identity, getattr(exc, "value", None)) from None
        return None
    except getattr(nvml, "NVMLLibraryMismatchError", ()):  # an unversioned call on a driver without that version
        return None


PROC_PID_INIT_INO = 0xEFFFFFFC  # the host's PID namespace (linux/proc_ns.h)


def _in_host_pid_namespace(path: str = "/proc/self/ns/pid") -> bool:
    """NVML gives host PIDs; in a container's PID namespace /proc/<pid> is another process, or none."""
    try:
        return os.stat(path).st_ino == PROC_PID_INIT_INO
    except OSError:
        return False


def _process_name(pid: int):
    """The process's name, only where NVML's PID is this namespace's: never another process's name."""
    if not _in_host_pid_namespace():
        return None
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return None


class ProcessInfoV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class ProcessInfoV3R535(ctypes.Structure):
    """The 32-byte record drivers 535.43 to before 535.86 write for _v3 (one more field than nvml.h's 24-byte
    struct, which nvidia-ml-py 12.535.108+ reads); read with the 24-byte struct, pid and memory come out shifted.
    gpustat (wookayin/gpustat#161) and nvitop pick the record by the driver version the same way."""
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint), ("usedGpuCcProtectedMemory", ctypes.c_ulonglong)]


def _driver_writes_535_records(driver) -> bool:
    numbers = re.match(r"(\d+)\.(\d+)", driver or "")
    return numbers is not None and int(numbers.group(1)) == 535 and 43 <= int(numbers.group(2)) < 86


def _record_size_disputed(driver) -> bool:
    """535.86.x: gpustat and nvitop read its _v3 records with different sizes (24 and 32 bytes)."""
    return re.match(r"535\.86\.", driver or "") is not None


def _records_whose_pids_exist(nvml, handle):
    """On a driver whose record size is disputed, both layouts: the one whose PIDs all exist in /proc (read in the
    host's PID namespace, where NVML's PIDs are this /proc's), else nvml.h's 24-byte one."""
    candidates = [_processes_raw(nvml, handle, PROCESS_QUERIES[0], record)
                  for record in (nvml.c_nvmlProcessInfo_v2_t, ProcessInfoV3R535)]
    for records in candidates:
        if records and all(os.path.exists(f"/proc/{int(record.pid)}") for record in records):
            return records
    return candidates[0]


def _processes_raw(nvml, handle, name: str, record):
    """A process query through ctypes with the record the driver writes: v1 (pynvml wraps only _v2/_v3, which
    drivers before R470 lack) or the R535 _v3 record."""
    function = nvml._nvmlGetFunctionPointer(name)
    count = ctypes.c_uint(0)
    status = function(handle, ctypes.byref(count), None)
    if status == nvml.NVML_SUCCESS:
        return []
    if status != nvml.NVML_ERROR_INSUFFICIENT_SIZE:
        raise nvml.NVMLError(status)
    count.value = count.value * 2 + 5  # room for processes started in between
    infos = (record * count.value)()
    nvml._nvmlCheckReturn(function(handle, ctypes.byref(count), infos))
    return list(infos[:count.value])


def _running_processes(nvml, handle, driver=None):
    """Compute processes on a GPU or MIG device: _v3, else _v2, else v1 (drivers before R510 lack _v3); on the
    drivers that write 32-byte _v3 records, those."""
    if _driver_writes_535_records(driver):
        return _processes_raw(nvml, handle, PROCESS_QUERIES[0], ProcessInfoV3R535)
    if _record_size_disputed(driver) and _in_host_pid_namespace():
        return _records_whose_pids_exist(nvml, handle)
    for name in PROCESS_QUERIES:
        query = getattr(nvml, name, None)
        if query is None:  # an nvidia-ml-py older than the entry point
            continue
        try:
            return query(handle)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) != nvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                raise
    return _processes_raw(nvml, handle, "nvmlDeviceGetComputeRunningProcesses", ProcessInfoV1)


def _process_facts(nvml, handle):
    processes = _optional(nvml, _running_processes, nvml, handle, DRIVER.get("version"))
    if processes is None:
        return None
    facts = []
    for process in processes:
        used = process.usedGpuMemory
        facts.append({"pid": int(process.pid), "name": _process_name(int(process.pid)),
                      "used_bytes": None if used is None or used == NOT_AVAILABLE else int(used)})
    return facts


def _memory(nvml, handle, device: dict, strict: bool = False) -> None:
    """Total and used memory: the v2 struct (R510+) keeps the driver's reserved memory out of `used`. `strict`:
    a GPU's own memory, whose failure marks it broken (a MIG device's may go unanswered)."""
    identity = "memory" if strict else ""
    memory = None
    if hasattr(nvml, "nvmlMemory_v2"):
        memory = _optional(nvml, nvml.nvmlDeviceGetMemoryInfo, handle, nvml.nvmlMemory_v2, identity=identity)
    if memory is not None:
        device["memory_reserved_bytes"] = int(memory.reserved)
    else:
        memory = _optional(nvml, nvml.nvmlDeviceGetMemoryInfo, handle, identity=identity)
    if memory is not None:
        device["memory_total_bytes"] = int(memory.total)
        device["memory_used_bytes"] = int(memory.used)


def _identity(nvml, handle, device: dict, strict: bool = False) -> None:
    for key, call in (("name", nvml.nvmlDeviceGetName), ("uuid", nvml.nvmlDeviceGetUUID)):
        value = _optional(nvml, call, handle, identity=key if strict else "")
        if value is not None:
            device[key] = _text(value)


FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}  # NVML_GPU_FABRIC_STATE_*


FABRIC_UUID_BYTES = 16  # nvml.h: NVML_GPU_FABRIC_UUID_LEN, the clusterUuid the driver writes


def fabric_struct_usable(nvml, struct: str) -> bool:
    """Whether this nvidia-ml-py declares the fabric struct as the driver writes it: before 12.550 it declared
    clusterUuid as NVML_DEVICE_UUID_BUFFER_SIZE (80) bytes, so `status` and `state` would be read at offsets the
    driver never writes (the fabric state is then not read at all, never guessed)."""
    declared = getattr(nvml, struct, None)
    uuid = getattr(declared, "clusterUuid", None)
    return declared is not None and getattr(uuid, "size", None) == FABRIC_UUID_BYTES


def _fabric_info(nvml, handle):
    """nvmlDeviceGetGpuFabricInfoV (nvidia-ml-py 12.550+), else the deprecated nvmlDeviceGetGpuFabricInfo. Both
    wrappers pass the struct on as given: the caller passes a pointer (pynvml.py)."""
    for function, struct in (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
                             ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")):
        if not (hasattr(nvml, function) and fabric_struct_usable(nvml, struct)):
            continue
        info = getattr(nvml, struct)()
        if _optional(nvml, getattr(nvml, function), handle, ctypes.byref(info)) is not None:
            return info
    return None


def _fabric(nvml, handle, gpu: dict) -> None:
    """The GPU's registration in the NVLink fabric, the driver's own verdict on a Hopper or newer NVSwitch system
    (nvml.h: `state` NOT_SUPPORTED, NOT_STARTED, IN_PROGRESS, COMPLETED; `status` "must be checked only if state
    returns complete"). nvml.h's state is an unsigned char, which nvidia-ml-py reads as an unsigned int."""
    info = _fabric_info(nvml, handle)
    if info is None:
        return
    state = FABRIC_STATES.get(int(info.state) & 0xFF, "unknown")
    fabric = {"state": state}
    if state == "completed":
        fabric["status"] = "success" if info.status == nvml.NVML_SUCCESS else _error_kind(
            nvml, nvml.NVMLError(info.status))
    gpu["fabric"] = fabric


def _health(nvml, handle, gpu: dict) -> None:
    ecc = _optional(nvml, nvml.nvmlDeviceGetEccMode, handle)
    if ecc is not None:
        gpu["ecc_enabled"] = bool(ecc[0])
        if ecc[0]:
            for key, counter in (("ecc_uncorrected_volatile", nvml.NVML_VOLATILE_ECC),
                                 ("ecc_uncorrected_aggregate", nvml.NVML_AGGREGATE_ECC)):
                value = _optional(nvml, nvml.nvmlDeviceGetTotalEccErrors, handle,
                                  nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter)
                if value is not None:
                    gpu[key] = int(value)
    pending = _optional(nvml, nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
    if pending is not None:
        gpu["retired_pages_pending"] = bool(pending)
    remap = _optional(nvml, nvml.nvmlDeviceGetRemappedRows, handle)
    if remap is not None:
        gpu["remapped_rows_pending"] = bool(remap[2])
        gpu["remapped_rows_failure"] = bool(remap[3])


def _mig_handle(nvml, handle, slot: int, refused: list):
    """A MIG device's handle; None for an empty slot (NOT_FOUND) and for one this process may not open (HIDDEN:
    counted in `refused`, so that a GPU whose MIG devices are all hidden is not taken for one without any)."""
    try:
        return nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
    except nvml.NVMLError as exc:
        kind = _error_kind(nvml, exc)
        if kind == "gpu_lost":
            raise GpuFailed(kind, str(exc), "mig_handle", getattr(exc, "value", None)) from None
        if kind in HIDDEN:
            refused.append(slot)
        return None


def _mig_devices(nvml, handle, gpu: dict) -> list:
    """The GPU's MIG devices: UUID, memory, SMs and their share of the GPU's compute slices, processes. Slots
    this process may not open are counted in `gpu["mig_devices_hidden"]`."""
    slots = _optional(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
    devices: list = []
    refused: list = []
    for slot in range(slots):
        mig = _mig_handle(nvml, handle, slot, refused)
        if mig is None:
            continue
        device = {"slot": slot}
        _identity(nvml, mig, device)
        for key, call in (("gpu_instance_id", nvml.nvmlDeviceGetGpuInstanceId),
                          ("compute_instance_id", nvml.nvmlDeviceGetComputeInstanceId)):
            value = _optional(nvml, call, mig)
            if value is not None:
                device[key] = int(value)
        _memory(nvml, mig, device)
        attributes = _optional(nvml, nvml.nvmlDeviceGetAttributes, mig)
        if attributes is not None:
            device["sm_count"] = int(attributes.multiprocessorCount)
            device["sm_share"] = round(attributes.computeInstanceSliceCount / slots, 4)
        processes = _process_facts(nvml, mig)
        if processes is not None:
            device["processes"] = processes
        devices.append(device)
    if refused:
        gpu["mig_devices_hidden"] = len(refused)
    return devices


def _mig_mode(nvml, handle, gpu: dict) -> None:
    """MIG mode, current and pending (a change waits for a GPU reset: nvmlDeviceGetMigMode's `pendingMode`),
    and in MIG mode the MIG devices. Read before the GPU's memory, which MIG mode may refuse."""
    mig = _optional(nvml, nvml.nvmlDeviceGetMigMode, handle)
    if mig is None:
        return
    gpu["mig_enabled"] = bool(mig[0])
    if bool(mig[1]) != bool(mig[0]):
        gpu["mig_pending"] = bool(mig[1])
    if mig[0]:
        gpu["mig_devices"] = _mig_devices(nvml, handle, gpu)


def _gpu(nvml, handle, gpu: dict) -> None:
    """Fill `gpu` with the GPU's facts (as far as it gets before a GpuFailed)."""
    _identity(nvml, handle, gpu, strict=True)
    pci = _optional(nvml, nvml.nvmlDeviceGetPciInfo, handle)
    if pci is not None:
        gpu["pci_bus_id"] = _text(pci.busId)
    minor = _optional(nvml, nvml.nvmlDeviceGetMinorNumber, handle)
    if minor is not None:
        gpu["minor_number"] = int(minor)
    cc = _optional(nvml, nvml.nvmlDeviceGetCudaComputeCapability, handle)
    if cc:
        gpu["cc"] = f"{cc[0]}.{cc[1]}"
    _mig_mode(nvml, handle, gpu)
    _memory(nvml, handle, gpu, strict=True)
    _health(nvml, handle, gpu)
    _fabric(nvml, handle, gpu)
    links = 0
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = _optional(nvml, nvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:
            break
        links += 1 if state else 0
    gpu["nvlink_active_links"] = links
    processes = _process_facts(nvml, handle)
    if processes is not None:
        gpu["processes"] = processes


def _p2p_read(nvml, handles: dict) -> dict:
    """P2P read status between every pair of GPUs (NVML index → {peer index: status}); a pair NVML cannot
    judge is left out. nvidia-ml-py defines NVML_P2P_CAPS_INDEX_READ as the tuple (0,)."""
    index = nvml.NVML_P2P_CAPS_INDEX_READ
    index = index[0] if isinstance(index, tuple) else index
    matrix: dict = {i: {} for i in handles}
    for i in handles:
        for j in handles:
            if j <= i:
                continue
            try:
                status = _optional(nvml, nvml.nvmlDeviceGetP2PStatus, handles[i], handles[j], index)
            except GpuFailed:
                continue
            if status is not None:
                matrix[i][j] = matrix[j][i] = P2P_STATUS.get(status, "unknown")
    return matrix


def _p2p_facts(nvml, handles: dict, gpus: dict, facts: dict) -> None:
    """Per GPU, the peers it can read from over P2P; `p2p_supported`: whether every pair can (None: unknown)."""
    if len(handles) < 2:
        return
    matrix = _p2p_read(nvml, handles)
    for i, peers in matrix.items():
        if len(peers) == len(handles) - 1:  # every pair answered
            gpus[i]["p2p_read_peers"] = sorted(j for j, status in peers.items() if status == "ok")
    answered = [status for peers in matrix.values() for status in peers.values()]
    if len(answered) == len(handles) * (len(handles) - 1):
        facts["p2p_supported"] = all(status == "ok" for status in answered)


def _handle(nvml, index: int):
    try:
        return nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError as exc:
        raise GpuFailed(_error_kind(nvml, exc), str(exc), "handle", getattr(exc, "value", None)) from None


def _gpus(nvml, count: int, facts: dict) -> None:
    """Every GPU NVML counts: usable ones (broken ones with their error) in `gpus`, forbidden ones apart."""
    gpus: dict = {}
    hidden: list = []
    handles: dict = {}
    for index in range(count):
        if PROGRESS["on"]:
            so_far = dict(facts, gpus=list(gpus.values()), **({"hidden_gpus": hidden} if hidden else {}))
            sys.stderr.write(READING + json.dumps({"facts": so_far, "index": index, "count": count}) + "\n")
            sys.stderr.flush()
        gpu: dict = {"index": index}
        gpus[index] = gpu
        try:
            handle = _handle(nvml, index)
            _gpu(nvml, handle, gpu)
            handles[index] = handle
        except GpuFailed as exc:
            if exc.kind in HIDDEN:
                del gpus[index]
                hidden.append({"index": index, **exc.facts()})
            else:
                gpu.update(**exc.facts(), **({"error_query": exc.query} if exc.query else {}))
    facts["gpus"] = list(gpus.values())
    if hidden:
        facts["hidden_gpus"] = hidden
    _p2p_facts(nvml, handles, gpus, facts)


# What nvidia-ml-py's pynvml loads on Linux (_LoadNvmlLibrary, in every version from 7.352 to 13.615), and its text
# for NVML_ERROR_LIBRARY_NOT_FOUND.
NVML_LIBRARY = "libnvidia-ml.so.1"
LIBRARY_NOT_FOUND = "NVML Shared Library Not Found"


def _failed_load():
    """On Linux, where the pynvml found is nvidia-ml-py's, the seconds that loading NVML's library as it loads it
    took, where that failed (its nvmlInit can then only fail with LIBRARY_NOT_FOUND); else None."""
    if not sys.platform.startswith("linux"):
        return None
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("pynvml")
    folder = os.path.dirname(spec.origin or "") if spec else ""
    try:
        if not any(name.startswith("nvidia_ml_py-") and name.endswith(".dist-info") for name in os.listdir(folder)):
            return None  # not installed (collect says so), or another pynvml: it answers for itself
    except OSError:
        return None
    started = time.monotonic()
    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return time.monotonic() - started
    return None


def _no_driver(facts: dict, seconds: float) -> dict:
    """What nvmlInit answers on a machine without the NVIDIA driver (no kernel module, no library), without
    importing nvidia-ml-py (~20 ms of the child's CPU on a machine without a GPU: a CPU node, a laptop, CI)."""
    facts.update(init_seconds=round(seconds, 3), status="unavailable", error_kind="library_not_found",
                 error=LIBRARY_NOT_FOUND, driver_version=None, cuda_driver_version=None, gpus=[])
    return facts


MODULE_PATH = "/proc/driver/nvidia/version"


def without_driver(module_path: str = MODULE_PATH):
    """The facts of a machine without the NVIDIA driver (no kernel module; libnvidia-ml.so.1 does not load where
    nvidia-ml-py's pynvml would load it), as its nvmlInit would answer, or None where there may be a driver. Nothing
    here talks to a driver: the probe asks it in gpudoctor's own process and starts no child on such a machine."""
    facts = {"kernel_module": kernel_module_version(module_path)}
    if facts["kernel_module"] is not None:
        return None
    seconds = _failed_load()
    return None if seconds is None else _no_driver(facts, seconds)


def collect(nvml=None, module_path: str = MODULE_PATH) -> dict:
    """All NVML facts as the `nvml` fact group; NVML failures become facts, never exceptions."""
    facts = {"kernel_module": kernel_module_version(module_path)}
    absent = without_driver(module_path) if nvml is None and facts["kernel_module"] is None else None
    if absent is not None:
        return absent
    if nvml is None:
        try:
            import pynvml
        except ImportError as exc:
            facts.update(status="error", error_kind="other", error=f"nvidia-ml-py is not installed: {exc}")
            return facts
        nvml = pynvml
    started = time.monotonic()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        facts["init_seconds"] = round(time.monotonic() - started, 3)
        kind = _error_kind(nvml, exc)
        absent = kind == "library_not_found" and facts["kernel_module"] is None
        facts.update(status="unavailable" if absent else "error", error_kind=kind, error=str(exc))
        if absent:
            facts.update(driver_version=None, cuda_driver_version=None, gpus=[])
        return facts
    # without persistence mode the driver initialises every GPU here: seconds that are the node's, not gpudoctor's
    facts["init_seconds"] = round(time.monotonic() - started, 3)
    try:
        # in every nvidia-ml-py since R450; nvidia-ml-py3 (7.352) lacks it
        if not hasattr(nvml, "nvmlDeviceGetMigMode"):
            facts.update(status="error", error_kind="bindings", error=f"{getattr(nvml, '__file__', 'pynvml')} is "
                         "not nvidia-ml-py's pynvml: it lacks nvmlDeviceGetMigMode (nvidia-ml-py3's pynvml.py, "
                         "installed over nvidia-ml-py's)")
            return facts
        facts["status"], facts["error_kind"], facts["error"] = "ok", None, None
        driver = _optional(nvml, nvml.nvmlSystemGetDriverVersion)
        facts["driver_version"] = DRIVER["version"] = _text(driver) if driver is not None else None
        cuda = _optional(nvml, getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2",
                                       nvml.nvmlSystemGetCudaDriverVersion))
        if cuda:
            facts["cuda_driver_version"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            facts.update(status="error", error_kind=_error_kind(nvml, exc), error=str(exc), gpus=[])
            return facts
        if count == 0:
            facts.update(status="error", error_kind="no_devices", error="No devices were found")
        _gpus(nvml, count, facts)
    finally:
        _optional(nvml, nvml.nvmlShutdown)
    return facts


def main(paths: list) -> None:
    """Print the facts; `paths`: the entry that found pynvml in the parent (probes/nvml.py), ahead of the rest."""
    gc.disable()  # a process that reads and leaves: nothing it makes needs collecting before it exits (start-up time)
    sys.path[:0] = paths
    PROGRESS["on"] = True
    json.dump(collect(), sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
