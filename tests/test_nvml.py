"""The NVML probe against a simulated driver: tests/nvmlsim compiles a libnvidia-ml.so.1 from a JSON description
of a node, and the real probe child runs on it through nvidia-ml-py and ctypes, as on a GPU node. pytest-mock is
kept for what a library cannot express: the kernel module's /proc file and a missing nvidia-ml-py."""

import ctypes
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import nvmlsim
import pynvml
import pytest
from conftest import gpudoctor_cmd

from gpudoctor.probes import nvml_child

GiB = 1024**3
MiB = 1024**2


@pytest.fixture(scope="module")
def node():
    return nvmlsim.load_node("a100x8_lost_mig")


def h100s(count=2, **extra):
    """A plain node of identical H100s on PCIe."""
    gpus = [{"name": "NVIDIA H100 PCIe", "uuid": f"GPU-{i:08x}-0000-4000-8000-00000000000{i}", "cc": "9.0",
             "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0", "minor": i,
             "memory": {"total": 80 * GiB, "reserved": 512 * MiB, "used": 0}, **extra} for i in range(count)]
    return {"driver_version": "550.90.07", "cuda_version": 12040, "gpus": gpus}


@pytest.fixture
def collect(tmp_path):
    return lambda node: nvmlsim.collect(node, tmp_path)


# --- the 8-GPU node: one lost GPU, one MIG-partitioned GPU, a P2P matrix ------------------------------------

def test_lost_gpu_node_facts_are_complete(node, collect):
    facts = collect(node)
    assert facts["status"] == "ok" and facts["driver_version"] == "535.183.01"
    assert facts["cuda_driver_version"] == "12.2"
    gpus = facts["gpus"]
    assert [g["index"] for g in gpus] == list(range(8)) and "hidden_gpus" not in facts
    for described, gpu in zip(node["gpus"], gpus):
        if "handle_error" in described:
            continue
        assert gpu["name"] == described["name"] and gpu["uuid"] == described["uuid"]
        assert gpu["pci_bus_id"] == described["pci_bus_id"] and gpu["minor_number"] == described["minor"]
        assert gpu["cc"] == "8.0" and gpu["memory_total_bytes"] == 80 * GiB
        assert gpu["memory_used_bytes"] == described["memory"]["used"], "v2 memory: reserved is not used"
        assert gpu["memory_reserved_bytes"] == described["memory"]["reserved"]
        assert gpu["ecc_enabled"] is True and gpu["ecc_uncorrected_volatile"] == 0
        assert gpu["remapped_rows_pending"] is False and gpu["retired_pages_pending"] is False
        assert gpu["nvlink_active_links"] == 12
    assert gpus[5] == {"index": 5, "error_kind": "gpu_lost", "error": "GPU is lost", "error_query": "handle"}
    assert gpus[2]["processes"] == [{"pid": 4190001, "name": None, "used_bytes": 30 * GiB}]
    # P2P: every pair of the healthy non-MIG GPUs; the MIG GPU has no peer; the lost GPU is not asked
    assert gpus[0]["p2p_read_peers"] == [1, 2, 3, 4, 6] and gpus[7]["p2p_read_peers"] == []
    assert "p2p_read_peers" not in gpus[5] and facts["p2p_supported"] is False


def test_mig_devices_are_listed(node, collect):
    gpu = collect(node)["gpus"][7]
    assert gpu["mig_enabled"] is True
    migs = gpu["mig_devices"]
    assert [(m["slot"], m["name"].split()[-1], m["gpu_instance_id"], m["sm_count"]) for m in migs] == [
        (0, "3g.40gb", 2, 42), (1, "2g.20gb", 3, 28), (2, "1g.10gb", 9, 14)]
    assert [m["memory_total_bytes"] for m in migs] == [40192 * MiB, 19968 * MiB, 9856 * MiB]
    assert [m["sm_share"] for m in migs] == [round(3 / 7, 4), round(2 / 7, 4), round(1 / 7, 4)]
    assert migs[2]["uuid"] == "MIG-4f6b8d0c-2e4a-5c6e-8f1a-3b5d7f9a1c33"
    assert migs[2]["processes"] == [{"pid": 4190002, "name": None, "used_bytes": None}], "MIG: no per-process memory"
    assert migs[0]["processes"] == []


# --- one bad GPU does not cost the others' facts ---------------------------------------------------------

def test_gpu_lost_during_the_queries_keeps_what_was_read(collect):
    node = h100s(3)
    node["gpus"][1]["query_error"] = "gpu_lost"
    gpus = collect(node)["gpus"]
    assert gpus[1] == {"index": 1, "error_kind": "gpu_lost", "error": "GPU is lost", "error_query": "name"}
    assert gpus[0]["name"] == gpus[2]["name"] == "NVIDIA H100 PCIe"


def test_gpus_the_job_may_not_open_are_left_out(collect):
    node = h100s(4)
    for index in (0, 2):  # SLURM ConstrainDevices: NVML counts them, their handles say NoPermission
        node["gpus"][index]["handle_error"] = "no_permission"
    facts = collect(node)
    assert facts["status"] == "ok" and [g["index"] for g in facts["gpus"]] == [1, 3]
    assert [(g["index"], g["error_kind"]) for g in facts["hidden_gpus"]] == [(0, "no_permission"), (2, "no_permission")]


def test_optional_tells_unsupported_from_lost_and_lets_bugs_through():
    def raises(exc):
        def call():
            raise exc
        return call

    assert nvml_child._optional(pynvml, raises(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED))) is None
    assert nvml_child._optional(pynvml, raises(pynvml.NVMLError_FunctionNotFound())) is None
    if hasattr(pynvml, "NVMLLibraryMismatchError"):  # nvidia-ml-py 12.550+; older ones raise FUNCTION_NOT_FOUND
        assert nvml_child._optional(pynvml, raises(pynvml.NVMLLibraryMismatchError("no _v3"))) is None
    with pytest.raises(nvml_child.GpuFailed):
        nvml_child._optional(pynvml, raises(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)))
    unknown = raises(pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN))
    assert nvml_child._optional(pynvml, unknown) is None, "an optional query: that fact is unknown"
    with pytest.raises(nvml_child.GpuFailed, match="Unknown Error"):
        nvml_child._optional(pynvml, unknown, identity="uuid")
    for bug in (TypeError("wrong type"), ctypes.ArgumentError("argument 3: wrong type")):
        with pytest.raises(type(bug)):
            nvml_child._optional(pynvml, raises(bug))


# --- P2P, memory and processes as each driver answers them ----------------------------------------------

def test_p2p_over_pcie_is_read(collect):
    node = h100s(3)
    node["p2p"] = {"default": "ok"}
    facts = collect(node)
    assert facts["p2p_supported"] is True and facts["gpus"][0]["p2p_read_peers"] == [1, 2]
    node["p2p"] = {"default": "ok", "pairs": [[0, 2, "topology_not_supported"]]}
    facts = collect(node)
    assert facts["p2p_supported"] is False and facts["gpus"][0]["p2p_read_peers"] == [1]


def test_p2p_unknown_when_the_driver_cannot_tell(collect):
    facts = collect(h100s(2))
    assert "p2p_supported" not in facts and "p2p_read_peers" not in facts["gpus"][0]


def test_memory_used_without_the_driver_reserve(collect):
    node = h100s(1)
    node["gpus"][0]["memory"]["used"] = GiB
    assert collect(node)["gpus"][0]["memory_used_bytes"] == GiB
    node["missing_symbols"] = ["nvmlDeviceGetMemoryInfo_v2"]  # before R510
    gpu = collect(node)["gpus"][0]
    assert gpu["memory_used_bytes"] == GiB + 512 * MiB and "memory_reserved_bytes" not in gpu


@pytest.mark.parametrize("driver, missing", [
    ("R525", []),
    ("R470", ["nvmlDeviceGetComputeRunningProcesses_v3"]),
    ("R450", ["nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"]),
])
def test_processes_on_every_driver(collect, driver, missing):
    node = h100s(1, processes=[{"pid": 4190007, "used_bytes": 3 * GiB}])
    node["missing_symbols"] = missing
    assert collect(node)["gpus"][0]["processes"] == [{"pid": 4190007, "name": None, "used_bytes": 3 * GiB}]


@pytest.mark.parametrize("driver", ["535.54.03", "535.86.10", "550.90.07"])
def test_several_processes_on_every_record_size(collect, driver):
    """Drivers 535.43 to before 535.86 write 32-byte _v3 records, the others 24: read with the wrong size, the
    second process comes back as (2147483648, 0) and GD502 names wrong PIDs and sizes."""
    held = [{"pid": 4190000 + i, "used_bytes": (i + 1) * GiB} for i in range(3)]
    node = dict(h100s(1, processes=held), driver_version=driver)
    assert collect(node)["gpus"][0]["processes"] == [dict(p, name=None) for p in held]


@pytest.mark.parametrize("struct", ["nvmlPciInfo_t", "c_nvmlMemory_t", "c_nvmlMemory_v2_t", "c_nvmlProcessInfo_v2_t",
                                    "c_nvmlDeviceAttributes"])
def test_simulator_structs_have_pynvml_layout(tmp_path, struct):
    library = ctypes.CDLL(str(nvmlsim.build(tmp_path) / "libnvidia-ml.so.1"))
    library.fake_nvml_struct_size.restype = ctypes.c_ulong
    assert library.fake_nvml_struct_size(struct.encode()) == ctypes.sizeof(getattr(pynvml, struct))


@pytest.mark.parametrize("struct", ["c_nvmlGpuFabricInfo_t", "c_nvmlGpuFabricInfo_v2_t"])
def test_fabric_structs_are_the_drivers_or_are_not_read(tmp_path, struct):
    """The simulator writes the driver's layout (a 16-byte clusterUuid). An nvidia-ml-py that declares the struct so
    (12.550+) has its size; an older one (80-byte clusterUuid, or no _v2 at all) is never used to read the state."""
    from gpudoctor.probes.nvml_child import fabric_struct_usable

    library = ctypes.CDLL(str(nvmlsim.build(tmp_path) / "libnvidia-ml.so.1"))
    library.fake_nvml_struct_size.restype = ctypes.c_ulong
    if fabric_struct_usable(pynvml, struct):
        assert library.fake_nvml_struct_size(struct.encode()) == ctypes.sizeof(getattr(pynvml, struct))
    else:
        assert getattr(pynvml, "NVML_GPU_FABRIC_UUID_LEN", None) is None or not hasattr(pynvml, struct)


def test_simulated_old_driver_really_lacks_the_symbol(tmp_path):
    """The version script hides the entry point: pynvml finds no _v3, as on an R470 driver (nvidia-ml-py 12.550+
    raises NVMLLibraryMismatchError, older releases NVMLError FUNCTION_NOT_FOUND)."""
    node = h100s(1)
    node["missing_symbols"] = ["nvmlDeviceGetComputeRunningProcesses_v3"]
    code = ("import pynvml\npynvml.nvmlInit()\nh = pynvml.nvmlDeviceGetHandleByIndex(0)\n"
            "absent = (getattr(pynvml, 'NVMLLibraryMismatchError', pynvml.NVMLError_FunctionNotFound),\n"
            "          pynvml.NVMLError_FunctionNotFound)\n"
            "try:\n    pynvml.nvmlDeviceGetComputeRunningProcesses_v3(h)\n"
            "except absent:\n    print('absent')\n")
    result = subprocess.run([sys.executable, "-c", code], env=nvmlsim.node_env(node, tmp_path),
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "absent", result.stderr


# --- NVML that does not start -----------------------------------------------------------------------------

def test_init_unknown_error_is_a_fact_and_gd105(tmp_path):
    node = dict(h100s(1), init_error="unknown")  # "Failed to initialize NVML: Unknown Error"
    env = nvmlsim.node_env(node, tmp_path)
    assert nvmlsim.collect(node, tmp_path)["error_kind"] == "unknown"
    result = subprocess.run(gpudoctor_cmd() + ["check", "--select", "GD105", "--format", "json", "--quick"],
                            env=env, capture_output=True, text=True, timeout=120)
    findings = json.loads(result.stdout)["findings"]
    assert [f["rule"] for f in findings] == ["GD105"], result.stderr
    assert "Unknown Error" in findings[0]["message"] and "daemon-reload" in findings[0]["fix"]["summary"]


class FakeNVMLError(pynvml.NVMLError):
    def __new__(cls, value):
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self):
        return {pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "Driver/library version mismatch",
                pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found"}.get(self.value, "error")


@pytest.fixture
def failing_init(mocker):
    """pynvml whose nvmlInit fails: the kernel module's /proc file is what these tests vary."""
    fake = mocker.MagicMock()
    for name in dir(pynvml):
        if name.startswith("NVML_"):
            setattr(fake, name, getattr(pynvml, name))
    fake.NVMLError = pynvml.NVMLError
    return fake


def test_driver_library_mismatch_is_a_fact(failing_init, tmp_path):
    module = tmp_path / "version"
    module.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n")
    failing_init.nvmlInit.side_effect = FakeNVMLError(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    facts = nvml_child.collect(failing_init, module_path=str(module))
    assert 0 <= facts.pop("init_seconds") < 5  # how long the failing nvmlInit took: the driver's time, measured
    assert facts == {"kernel_module": "535.129.03", "status": "error", "error_kind": "driver_mismatch",
                     "error": "Driver/library version mismatch"}


def test_no_library_and_no_module_means_no_driver(failing_init, tmp_path):
    failing_init.nvmlInit.side_effect = FakeNVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    facts = nvml_child.collect(failing_init, module_path=str(tmp_path / "absent"))
    assert facts["status"] == "unavailable" and facts["gpus"] == [] and facts["driver_version"] is None


def test_library_missing_in_a_container_with_the_module_loaded(failing_init, tmp_path):
    module = tmp_path / "version"
    module.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\n")
    failing_init.nvmlInit.side_effect = FakeNVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    facts = nvml_child.collect(failing_init, module_path=str(module))
    assert facts["status"] == "error" and facts["error_kind"] == "library_not_found"
    assert facts["kernel_module"] == "570.124.06"


def test_driver_version_unknown_keeps_the_gpus(collect):
    node = dict(h100s(1), driver_version="")  # the query answers NOT_SUPPORTED
    facts = collect(node)
    assert facts["driver_version"] is None and facts["gpus"][0]["name"] == "NVIDIA H100 PCIe"


def test_zero_devices(collect):
    facts = collect({"gpus": []})
    assert facts["error_kind"] == "no_devices" and facts["gpus"] == []


def test_real_child_on_this_machine():
    """Without a loaded NVIDIA module (CI), the real child reports 'no driver' as a fact, not an error."""
    facts = nvml_child.collect()
    driver_loaded = os.path.exists("/proc/driver/nvidia/version")
    assert facts["status"] == ("ok" if driver_loaded else "unavailable"), facts


def _loads(library: str) -> bool:
    try:
        ctypes.CDLL(library)
    except OSError:
        return False
    return True


@pytest.mark.skipif(_loads("libnvidia-ml.so.1") or os.path.exists("/proc/driver/nvidia/version"),
                    reason="this machine has an NVIDIA driver: nvidia-ml-py is always imported")
def test_without_a_driver_the_child_answers_as_nvidia_ml_py_does_without_importing_it():
    """No kernel module, no libnvidia-ml: nvidia-ml-py's nvmlInit can only fail with LIBRARY_NOT_FOUND, and the
    child says so without importing it (~25 ms of every run on a CPU node)."""
    absent = "/nonexistent/nvidia/version"
    fast, slow = nvml_child.collect(module_path=absent), nvml_child.collect(pynvml, module_path=absent)
    assert 0 <= fast.pop("init_seconds") < 5 and 0 <= slow.pop("init_seconds") < 5
    assert fast == slow and fast["status"] == "unavailable"
    code = ("import sys; sys.path[:0] = sys.argv[1:]; import nvml_child; facts = nvml_child.collect(); "
            "print(facts['status'], 'pynvml' in sys.modules)")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, os.path.dirname(nvml_child.__file__),
                           os.path.dirname(pynvml.__file__)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["unavailable", "False"], done.stderr


@pytest.mark.skipif(_loads("libnvidia-ml.so.1") or os.path.exists("/proc/driver/nvidia/version"),
                    reason="this machine has an NVIDIA driver: the probe starts its child")
def test_without_a_driver_the_probe_starts_no_child(monkeypatch):
    from gpudoctor.probes import ProbeContext, nvml

    def no_child(*args, **kwargs):
        raise AssertionError("a child was started on a machine without a driver")

    monkeypatch.setattr(nvml, "run_command", no_child)
    facts = nvml.probe_nvml(ProbeContext(timeout=30))["nvml"]
    assert facts["status"] == "unavailable" and facts["error_kind"] == "library_not_found" and facts["gpus"] == []


def test_probe_writes_only_declared_facts(node, collect):
    """Every key the probe writes on the simulated nodes is in the fact schema (rules/facts.toml)."""
    from gpudoctor import schema

    hidden = h100s(2)
    hidden["gpus"][0]["handle_error"] = "no_permission"
    for facts in (collect(node), collect(hidden)):
        assert schema.undeclared({"nvml": facts}) == []


# --- the child's import path: HPC Python environments ------------------------------------------------------

STUB = '''class NVMLError(Exception):
    value = 999
    def __str__(self):
        return "the pynvml on PYTHONPATH answered"
NVML_ERROR_UNKNOWN = 999
def nvmlInit():
    raise NVMLError()
'''


def test_the_child_finds_pynvml_where_the_parent_found_it(tmp_path, monkeypatch):
    """pynvml reachable only through PYTHONPATH (or a user site, an Lmod module): `python -I` drops both, so the
    probe hands the child exactly the entry that found it."""
    from gpudoctor.probes import ProbeContext
    from gpudoctor.probes.nvml import probe_nvml

    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "pynvml.py").write_text(STUB)
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    facts = probe_nvml(ProbeContext(timeout=30))["nvml"]
    assert facts["error"] == "the pynvml on PYTHONPATH answered", facts


def test_the_child_still_ignores_the_current_directory(tmp_path, monkeypatch):
    """A pynvml.py in the directory gpudoctor runs from is never run by the child (what -I is for)."""
    from gpudoctor.probes.nvml import pynvml_path

    (tmp_path / "pynvml.py").write_text(STUB)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    monkeypatch.syspath_prepend("")
    assert pynvml_path() == []
    monkeypatch.syspath_prepend(str(tmp_path))  # the same directory named outright: still the current one
    assert pynvml_path() == []


def test_a_benchmark_reads_nvml_without_preexec_fn(tmp_path, monkeypatch):
    """`bench train` asks NVML for its MIG slice with CUDA's threads running: no preexec_fn there (Python's docs:
    not safe in the presence of threads), and the GPUs still come back."""
    from gpudoctor.probes.nvml import read_gpus

    env = nvmlsim.node_env(h100s(2), tmp_path)
    for name in ("LD_LIBRARY_PATH", "FAKE_NVML_SPEC"):
        monkeypatch.setenv(name, env[name])
    started = []
    popen = subprocess.Popen.__init__
    monkeypatch.setattr(subprocess.Popen, "__init__", lambda self, *a, **k: started.append(k) or popen(self, *a, **k))
    assert [gpu["name"] for gpu in read_gpus(30)] == ["NVIDIA H100 PCIe"] * 2
    assert started and all(k.get("preexec_fn") is None for k in started)


def test_process_names_only_in_the_host_pid_namespace(monkeypatch):
    """NVML's PIDs are the host's: inside a container /proc/<pid>/comm would name another process."""
    pid = os.getpid()
    host = SimpleNamespace(st_ino=nvml_child.PROC_PID_INIT_INO)
    monkeypatch.setattr(nvml_child.os, "stat", lambda path: host)
    assert nvml_child._process_name(pid) == open(f"/proc/{pid}/comm").read().strip()
    monkeypatch.setattr(nvml_child.os, "stat", lambda path: SimpleNamespace(st_ino=4026532201))
    assert nvml_child._process_name(pid) is None
