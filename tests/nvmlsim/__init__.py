"""A simulated NVIDIA driver for tests: fake_nvml.c compiled into a libnvidia-ml.so.1 that answers from a JSON
description of a node, loaded by the real nvidia-ml-py through LD_LIBRARY_PATH.

    node = load_node("h100x8_lost_mig")          # a JSON file in nodes/, or build the dict in the test
    env = node_env(node, tmp_path)               # LD_LIBRARY_PATH + FAKE_NVML_SPEC for a child process
    facts = collect(node, tmp_path)              # the real NVML probe child, run against it

The description (every key optional; a fact left out makes its query answer NOT_SUPPORTED):
  driver_version, cuda_version (12040 = 12.4), process_record_bytes (the _v3 record the driver writes, 24 or 32;
  default: 32 on 535.43 to before 535.86, as those drivers do), init_error ("unknown", "driver_not_loaded", … or a
  number),
  missing_symbols (entry points an old driver lacks, e.g. "nvmlDeviceGetComputeRunningProcesses_v3"),
  p2p: {"default": STATUS, "pairs": [[A, B, STATUS], …]} (STATUS: ok, chipset_not_supported, gpu_not_supported,
  topology_not_supported, disabled_by_regkey, not_supported), gpus: [{
    name, uuid, pci_bus_id, minor, cc ("9.0"), memory: {total, reserved, used} (bytes),
    ecc: {enabled, volatile, aggregate}, retired_pending, remapped_rows: [corrected, uncorrected, pending, failure],
    mig: {enabled, pending (default: enabled), max_devices, devices: [{slot, name, uuid, memory, gi, ci, sm_count,
    gi_slices, ci_slices, processes, handle_error}]}, nvlink: {links, active}, processes: [{pid, used_bytes}],
    fabric: {state: not_supported | not_started | in_progress | completed, status: an NVML error or "success"}
    (nvmlGpuFabricInfo_t: Hopper and newer),
    handle_error / query_error: an NVML error (its kind in rules/nvml_errors.toml: "no_permission", "gpu_lost",
    "unknown", … or a number) for the handle or every query,
    fails: {QUERY: error} for one query: name, uuid, pci, minor, memory, ecc, mig_mode, remapped_rows, processes,
    fabric (a MIG parent's memory and process list answer NO_PERMISSION to a process given only a MIG device);
    the error "hang" makes the query never return (a wedged driver)}].
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import required_or_skip

from gpudoctor.knowledge import table
from gpudoctor.probes.nvml import child_argv, named

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fake_nvml.c"
NODES = HERE / "nodes"
ERRORS = {entry["kind"]: entry["code"] for entry in table("nvml_errors")["error"]}  # nvml.h's return codes
FABRIC_STATES = {"not_supported": 0, "not_started": 1, "in_progress": 2, "completed": 3}  # NVML_GPU_FABRIC_STATE_*
P2P = {"ok": 0, "chipset_not_supported": 1, "gpu_not_supported": 2, "topology_not_supported": 3,
       "disabled_by_regkey": 4, "not_supported": 5}
_built: dict = {}


def compiler() -> str:
    """The system C compiler; without one the simulator tests skip (fail under .ci/run, which installs gcc)."""
    found = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not found:
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", "no C compiler (cc) to build the simulated libnvidia-ml.so.1 "
                                                    "(apt-get install gcc)")
    return found


def build(directory: Path, missing=()) -> Path:
    """Compile the simulated library into directory/libnvidia-ml.so.1, without the `missing` entry points."""
    key = tuple(sorted(missing))
    if key in _built and (_built[key] / "libnvidia-ml.so.1").exists():
        return _built[key]
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "exports.map"
    hidden = "".join(f" {name};" for name in key)  # an exact name outranks the wildcard
    script.write_text("{ global: nvml*; fake_nvml_*; local:" + hidden + " *; };\n")
    library = directory / "libnvidia-ml.so.1"
    subprocess.run([compiler(), "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(library), str(SOURCE),
                    f"-Wl,--version-script={script}"], check=True, capture_output=True, timeout=120)
    _built[key] = directory
    return directory


def _error(value) -> int:
    return value if isinstance(value, int) else {"success": 0, "hang": -1}.get(value, ERRORS.get(value))


def _memory(prefix: str, memory: dict) -> list:
    return [f"{prefix} memory {memory['total']} {memory.get('reserved', 0)} {memory.get('used', 0)}"]


def _processes(prefix: str, processes: list) -> list:
    none = (1 << 64) - 1  # NVML_VALUE_NOT_AVAILABLE: MIG and WDDM report no per-process memory
    return [f"{prefix} process {p['pid']} {none if p.get('used_bytes') is None else p['used_bytes']} 0 0"
            for p in processes]


def _device_lines(prefix: str, device: dict) -> list:
    lines = [f"{prefix} {key} {device[key]}" for key in ("name", "uuid", "pci_bus_id", "minor") if key in device]
    for key in ("handle_error", "query_error"):
        if device.get(key):
            lines.append(f"{prefix} {key} {_error(device[key])}")
    lines += [f"{prefix} fails {query} {_error(error)}" for query, error in device.get("fails", {}).items()]
    if "cc" in device:
        lines.append(f"{prefix} cc {device['cc'].replace('.', ' ')}")
    if "memory" in device:
        lines += _memory(prefix, device["memory"])
    return lines + _processes(prefix, device.get("processes", []))


def spec_lines(node: dict) -> list:
    """The description in the line format fake_nvml.c reads."""
    lines = [f"driver_version {node.get('driver_version', '550.90.07')}",
             f"cuda_version {node.get('cuda_version', 12040)}", f"gpu_count {len(node.get('gpus', []))}"]
    if node.get("process_record_bytes"):
        lines.append(f"process_record_bytes {node['process_record_bytes']}")
    if node.get("init_error"):
        lines.append(f"init_error {_error(node['init_error'])}")
    for index, gpu in enumerate(node.get("gpus", [])):
        prefix = f"gpu {index}"
        lines += _device_lines(prefix, gpu)
        if "ecc" in gpu:
            ecc = gpu["ecc"]
            lines.append(f"{prefix} ecc {int(ecc['enabled'])} {ecc.get('volatile', 0)} {ecc.get('aggregate', 0)}")
        if "retired_pending" in gpu:
            lines.append(f"{prefix} retired_pending {int(gpu['retired_pending'])}")
        if "remapped_rows" in gpu:
            lines.append(f"{prefix} remapped_rows {' '.join(str(int(v)) for v in gpu['remapped_rows'])}")
        if "fabric" in gpu:
            fabric = gpu["fabric"]
            lines.append(f"{prefix} fabric {FABRIC_STATES[fabric['state']]} {_error(fabric.get('status', 'success'))}")
        if "nvlink" in gpu:
            links = gpu["nvlink"]
            lines.append(f"{prefix} nvlink {links['links']} {(1 << links.get('active', links['links'])) - 1}")
        if "mig" in gpu:
            mig = gpu["mig"]
            lines.append(f"{prefix} mig_mode {int(mig['enabled'])} {mig.get('max_devices', 7)} "
                         f"{int(mig.get('pending', mig['enabled']))}")
            for device in mig.get("devices", []):
                mig_prefix = f"mig {index} {device['slot']}"
                lines += _device_lines(mig_prefix, device)
                lines.append(f"{mig_prefix} instance {device['gi']} {device['ci']} {device['sm_count']} "
                             f"{device['gi_slices']} {device['ci_slices']}")
    p2p = node.get("p2p")
    if p2p:
        count = len(node.get("gpus", []))
        pairs = {(a, b): P2P[p2p["default"]] for a in range(count) for b in range(count) if a != b}
        for a, b, status in p2p.get("pairs", []):
            pairs[(a, b)] = pairs[(b, a)] = P2P[status]
        lines += [f"p2p {a} {b} {status}" for (a, b), status in sorted(pairs.items())]
    return lines


def load_node(name: str) -> dict:
    return json.loads((NODES / f"{name}.json").read_text())


def node_env(node: dict, directory: Path, base=None) -> dict:
    """An environment in which a child process's NVML is the simulated node."""
    library = build(directory / "lib", node.get("missing_symbols", ()))
    spec = directory / "node.spec"
    spec.write_text("\n".join(spec_lines(node)) + "\n")
    env = dict(os.environ if base is None else base)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(library), env.get("LD_LIBRARY_PATH")]))
    env["FAKE_NVML_SPEC"] = str(spec)
    return env


def collect(node: dict, directory: Path) -> dict:
    """The real NVML probe child's facts on the simulated node, started and read as gpudoctor does: with the
    nvidia-ml-py this process imports (tests/test_nvml_oldest.py puts the oldest allowed one first)."""
    result = subprocess.run(child_argv(), env=node_env(node, directory), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return named(json.loads(result.stdout))


def run_prolog(node: dict, directory: Path, env: dict) -> tuple:
    """deploy/slurm/prolog.sh as slurmd runs it (job 42 on gpu-node-7, `env` added), its NVML the simulated node and
    its scontrol a recorder: (the finished process, scontrol's arguments, the JSON report)."""
    root = HERE.parents[1]
    directory.mkdir(parents=True, exist_ok=True)
    scontrol = directory / "scontrol"
    calls = directory / "scontrol.calls"
    scontrol.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {calls}\n')
    scontrol.chmod(0o755)
    base = {"PYTHONPATH": str(root), "SLURM_JOB_ID": "42", "SLURMD_NODENAME": "gpu-node-7",
            "GPUDOCTOR": f"{sys.executable} -m gpudoctor", "GPUDOCTOR_CONF": os.devnull,
            "GPUDOCTOR_LOG_DIR": str(directory / "log"), "SCONTROL": str(scontrol), **env}
    done = subprocess.run(["sh", str(root / "deploy" / "slurm" / "prolog.sh")], env=node_env(node, directory, base),
                          capture_output=True, text=True, timeout=120)
    report = json.loads((directory / "log" / "job-42.json").read_text())
    return done, (calls.read_text().splitlines() if calls.exists() else []), report
