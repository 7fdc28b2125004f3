"""Host facts: OS, Python, CPUs, RAM, /dev/shm, ulimits, network interfaces, InfiniBand devices."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

from gpudoctor.probes import Probe, ProbeContext

IB_ROOT = Path("/sys/class/infiniband")


def _limit(name: str) -> Optional[int]:
    """Soft limit of a resource, None when unlimited or unknown on this OS."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, _ = resource.getrlimit(getattr(resource, name))
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _distro() -> Optional[str]:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        return None
    return None


def _shm_bytes() -> Optional[int]:
    try:
        stats = os.statvfs("/dev/shm")
    except (OSError, AttributeError):
        return None
    return stats.f_frsize * stats.f_blocks


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def ib_devices(root: Path = IB_ROOT) -> list:
    """InfiniBand/RoCE devices from sysfs with their ports' state and link layer."""
    if not root.is_dir():
        return []
    devices = []
    for device in sorted(root.iterdir()):
        ports = []
        for port in sorted((device / "ports").glob("*")):
            state = _read(port / "state") or ""
            ports.append({
                "port": int(port.name) if port.name.isdigit() else port.name,
                "state": state.split(":")[-1].strip(),
                "link_layer": _read(port / "link_layer"),
            })
        devices.append({"name": device.name, "ports": ports})
    return devices


def _in_container() -> bool:
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    cgroup = _read(Path("/proc/1/cgroup")) or ""
    return any(word in cgroup for word in ("docker", "kubepods", "containerd", "lxc"))


def _os_and_arch() -> tuple:
    """("Linux 6.8.0-45-generic", "x86_64"): from os.uname, which platform.uname reads too, without importing
    platform (its regexes cost every run ~4 ms); platform's own answer on macOS (the macOS version, not Darwin's)
    and where there is no os.uname (Windows)."""
    if hasattr(os, "uname") and sys.platform != "darwin":
        uname = os.uname()
        return f"{uname.sysname} {uname.release}".strip(), uname.machine
    import platform

    system, release, machine = platform.system(), platform.release(), platform.machine()
    if system == "Darwin":
        system, release = "macOS", platform.mac_ver()[0]
    return f"{system} {release}".strip(), machine


def probe_system(ctx: ProbeContext) -> dict:
    from gpudoctor.probes import host_memory_net, libaio  # here: in the probe's own thread

    ram_total, ram_available = host_memory_net.memory()
    os_name, arch = _os_and_arch()
    return {
        "host": {
            "hostname": host_memory_net.hostname(),
            "os": os_name,
            "distro": _distro(),
            "arch": arch,
            "python": sys.version.split()[0],  # platform.python_version(): the version sys.version starts with
            "python_executable": sys.executable,
            "cpu_count": os.cpu_count(),
            "ram_total_bytes": ram_total,
            "ram_available_bytes": ram_available,
            "shm_bytes": _shm_bytes(),
            "ulimit_memlock": _limit("RLIMIT_MEMLOCK"),
            "ulimit_nofile": _limit("RLIMIT_NOFILE"),
            "interfaces": host_memory_net.interfaces(),
            "ib_devices": ib_devices(),
            "in_container": _in_container(),
            "libaio": libaio.find(ctx.environ),
        }
    }


PROBE = Probe("system", probe_system)
