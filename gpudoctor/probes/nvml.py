"""The NVIDIA driver and GPUs, read through NVML in a child process (see nvml_child.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpudoctor.probes import Probe, ProbeContext
from gpudoctor.probes.command import run_command

CHILD = Path(__file__).with_name("nvml_child.py")


def probe_nvml(ctx: ProbeContext) -> dict:
    result = run_command([sys.executable, "-I", str(CHILD)], ctx.timeout)
    if result.returncode != 0:
        raise RuntimeError(f"NVML child exited {result.returncode}: {result.stderr.strip()[-300:]}")
    return {"nvml": json.loads(result.stdout)}


PROBE = Probe("nvml", probe_nvml)
