"""The human report: rich with colour on a terminal, the same layout as plain text when piped."""

from __future__ import annotations

from typing import IO, Optional

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from gpudoctor import __version__
from gpudoctor.facts import Facts
from gpudoctor.model import Applicability, Finding, Report, Severity
from gpudoctor.render.describe import header_items, machine_line, python_line, unknown_reasons

MARKS = {Severity.ERROR: ("✗", "bold red"), Severity.WARNING: ("!", "bold yellow"), Severity.INFO: ("i", "bold blue")}
FAMILY_TITLES = {
    "doctor": "gpudoctor itself", "driver-cuda": "Driver, CUDA and torch build", "precision": "Precision",
    "deepspeed": "DeepSpeed", "nccl": "NCCL and distributed environment", "memory-host": "Memory, host limits, GPU health",
    "script": "Training script", "bench": "Benchmarks", "fleet": "Fleet",
}


def _console(stream: IO, color: bool, width: Optional[int]) -> Console:
    return Console(file=stream, no_color=not color, force_terminal=color, highlight=False, soft_wrap=False,
                   width=width or (None if color else 100), emoji=False)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _fix_lines(finding: Finding) -> list:
    fix = finding.fix
    if fix is None:
        return []
    lines = [f"[bold]fix[/]  {escape(fix.summary)}"]
    for command in fix.commands:
        lines.append(f"     [cyan]{escape(command)}[/]")
    env = [f"{k}={v}" for k, v in fix.env.set.items()] + [f"unset {k}" for k in fix.env.unset]
    if env:
        tag = "safe, gpudoctor fix" if fix.applicability == Applicability.SAFE else fix.applicability.value
        lines.append(f"     [cyan]{escape(' · '.join(env))}[/]   [dim]({tag})[/]")
    return lines


def render_finding(console: Console, finding: Finding) -> None:
    mark, style = MARKS[finding.severity]
    head = Text(f" {mark} ", style=style)
    head.append(f"{finding.rule} ", style="bold")
    head.append(f"{finding.name:<30} ", style="dim")
    if finding.location:
        head.append(f"{finding.location} ", style="underline")
    head.append(finding.message)
    console.print(head, overflow="fold")
    for line in _fix_lines(finding):
        console.print("     " + line, overflow="fold")


def render(report: Report, stream: IO, color: bool = False, quiet: bool = False, width: Optional[int] = None) -> None:
    console = _console(stream, color, width)
    facts = Facts(report.facts)
    if not quiet:
        items = [f"gpudoctor {__version__}", *header_items(facts)]
        if report.seconds:
            items.append(f"{report.seconds:.1f} s")
        console.print(escape(" · ".join(items)), style="bold")
        kind = report.source.get("kind")
        if kind in ("report", "snapshot"):
            paths = ", ".join(report.source.get("paths", []))
            what = "pasted report" if kind == "report" else "recorded snapshot"
            console.print(f"[dim]source: {what} {escape(paths)}[/]")
            missing = report.source.get("missing")
            if missing:
                console.print(f"[dim]not in the report: {escape(', '.join(missing))}[/]")
        console.print()
        console.print(f" [bold]Machine[/]   {escape(machine_line(facts))}", overflow="fold")
        console.print(f" [bold]Python[/]    {escape(python_line(facts))}", overflow="fold")
        for conflict in report.conflicts:
            console.print(f" [yellow]conflict[/]  {escape(str(conflict.get('fact')))}: "
                          f"{escape(' vs '.join(map(str, conflict.get('values', []))))}")
        console.print()
    family = None
    for finding in report.findings:
        if finding.family != family and len({f.family for f in report.findings}) > 1 and not quiet:
            family = finding.family
            console.print(f" [dim]{FAMILY_TITLES.get(family, family)}[/]")
        render_finding(console, finding)
    summary = report.summary()
    parts = [_plural(summary["error"], "error"), _plural(summary["warning"], "warning"), f"{summary['info']} info",
             f"{summary['passed']} passed", f"{summary['unknown']} unknown"]
    line = " · ".join(parts)
    if report.unknown:
        line += f" ({unknown_reasons(facts, report.unknown)})"
    if report.findings:
        console.print()
    style = "bold red" if summary["error"] else ("bold yellow" if summary["warning"] else "bold green")
    mark = "✓ " if not summary["error"] and not summary["warning"] else ""
    console.print(f" {mark}{escape(line)}", style=style, overflow="fold")
    if any(f.fix and f.fix.env and f.fix.applicability == Applicability.SAFE for f in report.findings):
        console.print(" Write the safe fixes:  [cyan]gpudoctor fix --write-env .env[/]")
