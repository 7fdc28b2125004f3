"""torch, CUDA as torch sees it, and DeepSpeed of the job's interpreter (`--python`), in a child process."""

from __future__ import annotations

import json
from pathlib import Path

from gpudoctor.probes import Probe, ProbeContext
from gpudoctor.probes.command import run_command

CHILD = Path(__file__).with_name("torch_child.py")


def probe_torch(ctx: ProbeContext) -> dict:
    try:
        argv = [ctx.python, str(CHILD)] + (["--quick"] if ctx.quick else [])
        result = run_command(argv, ctx.timeout, env=ctx.environ)
    except FileNotFoundError:
        raise RuntimeError(f"interpreter {ctx.python!r} not found") from None
    except PermissionError:
        raise RuntimeError(f"interpreter {ctx.python!r} is not executable") from None
    lines = result.stdout.strip().splitlines()
    try:
        facts = json.loads(lines[-1]) if lines else None
    except ValueError:
        facts = None
    if not isinstance(facts, dict):
        detail = (result.stderr.strip() or result.stdout.strip())[-300:]
        raise RuntimeError(f"{ctx.python} exited {result.returncode} without a report: {detail}")
    return {"torch": facts}


PROBE = Probe("torch", probe_torch, starts_child=True, long_pole=True)
