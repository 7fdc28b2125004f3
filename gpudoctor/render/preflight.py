"""The preflight report: one line per phase with its time, the figures, the findings, the bad nodes and what to do
now; or `gpudoctor.preflight/1` JSON."""

from __future__ import annotations

import json
from statistics import median
from typing import IO, Optional

from rich.text import Text

from gpudoctor.model import PreflightReport, Severity
from gpudoctor.render.describe import plural
from gpudoctor.render.terminal import keep, say, screen
from gpudoctor.render.text import render_finding
from gpudoctor.version import __version__

SCHEMA = "gpudoctor.preflight/1"
PHASE_TITLES = {"meet": "meet", "agree": "agree", "gpus": "each GPU alone", "fabric": "fabric"}
PHASE_MARKS = {"ok": ("✓", "bold green"), "bad": ("✗", "bold red"), "failed": ("✗", "bold red"),
               "skipped": ("-", "dim")}


def render(report: PreflightReport, fmt: str, stream: IO, width: Optional[int] = None) -> None:
    """The report in `fmt` (rich, plain or json), secrets redacted first (gpudoctor.redact)."""
    from gpudoctor.redact import redact_data

    report = redact_data(report)
    if fmt == "json":
        json.dump(to_json(report), stream, indent=2, ensure_ascii=False)
        stream.write("\n")
        return
    from gpudoctor.render.printable import printable_data

    with screen(stream, fmt == "rich", width) as console:
        for part in (_header, _phases, _figures, _findings, _verdict):
            part(printable_data(report), console)


def to_json(report: PreflightReport) -> dict:
    """The `gpudoctor.preflight/1` document."""
    fleet = report.fleet
    return {
        "schema": SCHEMA,
        "tool": {"name": "gpudoctor", "version": __version__},
        "ok": report.ok(),
        "launcher": report.launcher,
        "world_size": report.world_size,
        "device": report.facts.get("device"),
        "backend": report.facts.get("backend"),
        "budget_s": report.budget_s,
        "seconds": report.seconds,
        "phases": [{"name": p.name, "status": p.status, "seconds": p.seconds, "note": p.note} for p in report.phases],
        "bad_nodes": list(report.bad_nodes),
        "slow_links": list(report.slow_links),
        "findings": [finding.to_json() for finding in report.findings()],
        "summary": report.verdicts.summary(),
        "nodes": report.facts.get("nodes") or [],
        "gpus": report.facts.get("gpus") or [],
        "fabric": report.facts.get("fabric"),
        "failure": report.facts.get("failure"),
        "limits": report.facts.get("limits"),
        "agree": None if fleet is None else {name: node.summary() for name, node in fleet.nodes},
        "next_steps": list(report.next_steps),
    }


def _header(report, console) -> None:
    nodes = report.facts.get("nodes") or []
    device = report.facts.get("device")
    where = {"cpu": "gloo on CPU (no GPU: the same phases, on this machine's cores)", "cuda": "NCCL on GPUs"}
    items = [f"gpudoctor {__version__} preflight", f"{plural(len(nodes), 'node')}, "
             f"{plural(report.world_size, 'rank')} ({report.launcher})"]
    if device:
        items.append(where.get(device, device))
    items.append(f"{report.seconds:.1f} s of a {report.budget_s:g} s budget")
    say(console, " · ".join(keep(item) for item in items[:2]) + " · " + " · ".join(items[2:]), rest="  ",
        style="bold")
    console.print()


def _phases(report, console) -> None:
    for phase in report.phases:
        mark, style = PHASE_MARKS.get(phase.status, ("?", "bold yellow"))
        seconds = f"{phase.seconds:6.1f} s" if phase.status != "skipped" else " " * 8
        head = Text.assemble((f" {mark} ", style), (PHASE_TITLES.get(phase.name, phase.name).ljust(15), "bold"),
                             f"{seconds}  ")
        console.print(head + Text(phase.note or ("not run" if phase.status == "skipped" else "")))
    console.print()


def _figures(report, console) -> None:
    gpus = [gpu for gpu in report.facts.get("gpus") or [] if gpu.get("gemm_tflops")]
    if gpus:
        gemm = median(gpu["gemm_tflops"] for gpu in gpus)
        copy = median(gpu["copy_gbps"] for gpu in gpus)
        low = min(gpus, key=lambda gpu: gpu["gemm_tflops"])
        say(console, f"GPUs     median matmul {gemm:.3g} TFLOP/s ({gpus[0]['dtype']}), copy {copy:.3g} GB/s; "
                     f"slowest matmul {low['gemm_tflops']:.3g} on {low['node']} (rank {low['rank']})",
            " ", "          ")
    fabric = report.facts.get("fabric") or {}
    parts = []
    for item in fabric.get("intra") or []:
        parts.append(f"within {item['node']} {_gbps(item.get('busbw_gbps'))}")
    if fabric.get("cross"):
        cross = fabric["cross"]
        parts.append(f"across {plural(len(cross['nodes']), 'node')} {_gbps(cross.get('busbw_gbps'))}")
    if fabric.get("pairs"):
        parts.append("pairs " + ", ".join(f"{a} ↔ {b} {_gbps(p.get('busbw_gbps'))}"
                                          for p in fabric["pairs"] for a, b in [p["nodes"]]))
    if parts:
        say(console, "Fabric   all-reduce bus bandwidth: " + "; ".join(parts), " ", "          ")
    if gpus or parts:
        console.print()


def _gbps(value) -> str:
    return f"{value:.3g} GB/s" if isinstance(value, (int, float)) else "not measured"


def _findings(report, console) -> None:
    findings = [f for f in report.findings() if f.severity >= Severity.WARNING]
    for finding in findings:
        render_finding(console, finding)
    if findings:
        console.print()


def _verdict(report, console) -> None:
    bad = report.bad_nodes
    summary = report.verdicts.summary()
    counts = (f"{summary['passed']} passed · {summary['unknown']} unknown"
              + (f" · {summary['not_applicable']} not applicable" if summary.get("not_applicable") else ""))
    if bad or report.slow_links:
        names = ", ".join(entry["node"] for entry in bad)
        say(console, f"Bad: {names or 'a link'}" + (f" ({plural(len(bad), 'node')})" if bad else ""), " ✗ ", "   ",
            style="bold red")
        for step in report.next_steps:
            say(console, step, "   now: ", "        ")
        return
    worst = report.worst()
    if worst is not None and worst >= Severity.ERROR:
        say(console, f"the allocation is not ready (the errors above) · preflight's own rules: {counts}", " ✗ ", "   ",
            style="bold red")
        return
    say(console, f"the allocation is good: nothing named · preflight's own rules: {counts}", " ✓ ", "   ",
        style="bold green")
