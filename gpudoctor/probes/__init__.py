"""Probes gather facts about the live machine. They run concurrently, each bounded in time.

A probe is `def probe(ctx: ProbeContext) -> dict` returning fact groups (`{"nvcc": {...}}`).
An exception makes it `failed` (GD001), running past the deadline makes it `timeout` (GD002);
either way the other probes and every rule still run.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from gpudoctor.model import ProbeResult
from gpudoctor.probes.command import CommandTimeout, announce_launch
from gpudoctor.waiting import joined, patiently


@dataclass(frozen=True)
class ProbeContext:
    """What a probe may look at: the job's interpreter, the environment, its time budget."""

    python: str = sys.executable
    timeout: float = 15.0
    quick: bool = False  # read versions from installed files instead of importing torch
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class Probe:
    """One probe: its name, its function, and how it is started (run_probes)."""

    name: str  # the schema's groups name the probe that gathers them (rules/facts.toml)
    run: Callable[[ProbeContext], dict]
    starts_child: bool = False  # it runs a child process: started before the probes that work in this process
    long_pole: bool = False  # its child takes longest (it imports the job's torch): started first of all


# Every probe, by name, and the module of gpudoctor.probes whose PROBE it is.
MODULES = {"nvml": "nvml", "nvcc": "nvcc", "torch": "torch_probe", "env": "env", "system": "system", "slurm": "slurm"}


def all_probes(names: Optional[Iterable[str]] = None) -> Dict[str, Probe]:
    """Every probe by name, or those named: only their modules are imported (a command that probes for two rules
    does not import the others)."""
    wanted = set(MODULES if names is None else names)
    return {name: importlib.import_module(f"gpudoctor.probes.{module}").PROBE
            for name, module in MODULES.items() if name in wanted}


def probes_for(groups: Iterable[str]) -> List[Probe]:
    """The probes that gather any of the given fact groups: each group's `probe` in the fact schema, read from
    rules/facts.toml as it is (gpudoctor.schema's objects would cost every live run ~4 ms before its probes start)."""
    from gpudoctor.data import load_toml, rules_dir

    schema = load_toml(rules_dir() / "facts.toml")
    return list(all_probes({schema[group].get("probe") for group in groups if group in schema} - {None}).values())


LAUNCH_WAIT_S = 0.1  # at most this long the caller's own work waits for the probes to start their children


def run_probes(probes: Iterable[Probe], ctx: ProbeContext,
               meanwhile: Optional[Callable[[], None]] = None) -> Tuple[dict, List[ProbeResult]]:
    """Run probes concurrently; return the merged facts and one result per probe, within ctx.timeout (+1 s).
    `meanwhile`: the caller's own work, done once the probes have started their children (which run on other cores
    while it does), and waited for."""
    probes = list(probes)
    outcomes: Dict[str, tuple] = {}
    lock = threading.Lock()
    done = threading.Event()

    launched = {probe.name: threading.Event() for probe in probes}  # its first child has started, or it has ended

    def work(probe: Probe) -> None:
        start = time.monotonic()
        announce_launch(launched[probe.name])
        try:
            facts, status, error = probe.run(ctx) or {}, "ok", None
        except CommandTimeout as exc:
            facts, status, error = {}, "timeout", str(exc)
        except Exception as exc:  # noqa: BLE001 - a failing probe is a finding, not a crash
            facts, status, error = {}, "failed", f"{type(exc).__name__}: {exc}"
        launched[probe.name].set()
        with lock:
            outcomes[probe.name] = (facts, ProbeResult(probe.name, status, time.monotonic() - start, error))
            if len(outcomes) == len(probes):
                done.set()

    started = time.monotonic()
    # The children first, the longest first: a probe that starts a child is started once the one before it has
    # started its own (or ended), within LAUNCH_WAIT_S for them all; then the probes that work in this process, and
    # the caller's own work. Each step of a probe up to its child's start (a file looked up, a pipe opened) waits
    # for the interpreter lock, which busy threads would hold, and its child would start tens of ms late.
    deadline = time.monotonic() + LAUNCH_WAIT_S
    for probe in sorted(probes, key=lambda probe: (not probe.starts_child, not probe.long_pole)):
        threading.Thread(target=work, args=(probe,), name=f"probe-{probe.name}", daemon=True).start()
        if probe.starts_child:
            launched[probe.name].wait(max(0.0, deadline - time.monotonic()))
    helper = threading.Thread(target=meanwhile, name="meanwhile", daemon=True) if meanwhile else None
    if helper:  # in a thread of its own: Ctrl-C lands in this thread's waits, never inside an import of its work
        helper.start()
    if probes:
        patiently(done.wait, ctx.timeout + 1.0)
    if helper:
        patiently(lambda seconds: joined(helper, seconds), ctx.timeout + 1.0)

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
