"""Probes gather facts about the live machine. They run concurrently, each bounded in time.

A probe is `def probe(ctx: ProbeContext) -> dict` returning fact groups (`{"nvcc": {...}}`).
An exception makes it `failed` (GD001), running past the deadline makes it `timeout` (GD002);
either way the other probes and every rule still run.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Tuple

from gpudoctor.model import ProbeResult
from gpudoctor.probes.command import CommandTimeout
from gpudoctor.waiting import patiently


@dataclass(frozen=True)
class ProbeContext:
    """What a probe may look at: the job's interpreter, the environment, its time budget."""

    python: str = sys.executable
    timeout: float = 15.0
    quick: bool = False  # read versions from installed files instead of importing torch
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class Probe:
    name: str  # the schema's groups name the probe that gathers them (rules/facts.toml)
    run: Callable[[ProbeContext], dict]


def all_probes() -> Dict[str, Probe]:
    """Every probe, by name (imported lazily so that `gpudoctor rules` stays fast)."""
    from gpudoctor.probes import env, nvcc, nvml, slurm, system, torch_probe

    probes = [nvml.PROBE, nvcc.PROBE, torch_probe.PROBE, env.PROBE, system.PROBE, slurm.PROBE]
    return {probe.name: probe for probe in probes}


def probes_for(groups: Iterable[str]) -> List[Probe]:
    """The probes that gather any of the given fact groups (each group's `probe` in the fact schema)."""
    from gpudoctor.schema import probe_of

    wanted = {probe_of(group) for group in groups}
    return [probe for name, probe in all_probes().items() if name in wanted]


def run_probes(probes: Iterable[Probe], ctx: ProbeContext) -> Tuple[dict, List[ProbeResult]]:
    """Run probes concurrently; return the merged facts and one result per probe, within ctx.timeout (+1 s)."""
    probes = list(probes)
    outcomes: Dict[str, tuple] = {}
    lock = threading.Lock()
    done = threading.Event()

    def work(probe: Probe) -> None:
        start = time.monotonic()
        try:
            facts, status, error = probe.run(ctx) or {}, "ok", None
        except CommandTimeout as exc:
            facts, status, error = {}, "timeout", str(exc)
        except Exception as exc:  # noqa: BLE001 - a failing probe is a finding, not a crash
            facts, status, error = {}, "failed", f"{type(exc).__name__}: {exc}"
        with lock:
            outcomes[probe.name] = (facts, ProbeResult(probe.name, status, time.monotonic() - start, error))
            if len(outcomes) == len(probes):
                done.set()

    started = time.monotonic()
    for probe in probes:
        threading.Thread(target=work, args=(probe,), name=f"probe-{probe.name}", daemon=True).start()
    if probes:
        patiently(done.wait, ctx.timeout + 1.0)

    facts: dict = {}
    results: List[ProbeResult] = []
    with lock:
        for probe in probes:
            if probe.name in outcomes:
                probe_facts, result = outcomes[probe.name]
                for group, value in probe_facts.items():
                    if isinstance(value, dict) and isinstance(facts.get(group), dict):
                        facts[group].update(value)
                    else:
                        facts[group] = value
            else:
                result = ProbeResult(probe.name, "timeout", time.monotonic() - started,
                                     f"no answer within {ctx.timeout:g} s")
            results.append(result)
    return facts, results
