"""The human report: rich with colour on a terminal, the same layout as plain text when piped."""

from __future__ import annotations

import io
from typing import IO, Optional

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpudoctor import __version__
from gpudoctor.facts import Facts
from gpudoctor.model import Applicability, Finding, Report, Severity
from gpudoctor.render.describe import header_items, machine_line, plural, python_line, unknown_reasons

MARKS = {Severity.ERROR: ("✗", "bold red"), Severity.WARNING: ("!", "bold yellow"), Severity.INFO: ("i", "bold blue")}
FAMILY_TITLES = {
    "doctor": "gpudoctor itself", "driver-cuda": "Driver, CUDA and torch build", "precision": "Precision",
    "deepspeed": "DeepSpeed", "nccl": "NCCL and distributed environment", "memory-host": "Memory, host limits, GPU health",
    "script": "Training script and launch", "bench": "Benchmarks", "fleet": "Fleet", "job-spec": "Job specification",
}


def _console(stream: IO, color: bool, width: Optional[int]) -> Console:
    if color and width is None:
        width = Console().width
    return Console(file=stream, no_color=not color, force_terminal=color, highlight=False, soft_wrap=False,
                   width=width or 110, emoji=False)


def _env_text(finding: Finding) -> Text:
    fix = finding.fix
    env = [f"{k}={v}" for k, v in fix.env.set.items()] + [f"unset {k}" for k in fix.env.unset]
    text = Text()
    if env:
        tag = "safe: gpudoctor fix" if fix.applicability == Applicability.SAFE else fix.applicability.value
        text.append("env  ", style="dim")
        text.append(" · ".join(env), style="cyan")
        text.append(f"  ({tag})", style="dim")
    return text


def render_finding(console: Console, finding: Finding, name_width: int, id_width: int = 5) -> None:
    """Mark, ID, name and message on a grid (wrapped inside the message column); commands unwrapped below."""
    table = Table.grid(padding=(0, 1))
    table.add_column(width=2, justify="right")
    table.add_column(no_wrap=True, width=id_width)  # GD101: 5; site policy IDs may be longer
    table.add_column(no_wrap=True, width=name_width, overflow="ellipsis")
    table.add_column(ratio=1, overflow="fold")
    mark, style = MARKS[finding.severity]
    message = Text()
    if finding.location:
        message.append(f"{finding.location} ", style="underline")
    message.append(finding.message)
    table.add_row(Text(mark, style=style), Text(finding.rule, style="bold"), Text(finding.name, style="dim"), message)
    if finding.fix:
        table.add_row("", "", "", Text.assemble(("fix  ", "bold"), finding.fix.summary))
        if finding.fix.env:
            table.add_row("", "", "", _env_text(finding))
    console.print(table)
    indent = " " * (2 + 1 + id_width + 1 + name_width + 1)
    for command in finding.fix.commands if finding.fix else ():
        console.print(Text.assemble(indent, ("     $ ", "dim"), (command, "cyan")), soft_wrap=True)


def render(report: Report, stream: IO, color: bool = False, quiet: bool = False, width: Optional[int] = None) -> None:
    buffer = io.StringIO()
    _render(report, _console(buffer, color, width), quiet)
    stream.write("\n".join(line.rstrip() for line in buffer.getvalue().split("\n")))


def inferred_facts(report: Report) -> list:
    """(fact path, reason) for facts a pasted report only hints at, e.g. the driver's CUDA from a torch warning."""
    found = []
    for path, text in sorted(report.evidence.items()):
        start = str(text).find("(inferred")
        if start >= 0:
            found.append((path, str(text)[start:]))
    return found


def _render(report: Report, console: Console, quiet: bool) -> None:
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
            for path, why in inferred_facts(report):
                console.print(f"[dim]inferred: {escape(path)} = {escape(str(facts.get(path, '?')))} {escape(why)}[/]",
                              overflow="fold")
        console.print()
        console.print(f" [bold]Machine[/]   {escape(machine_line(facts))}", overflow="fold")
        console.print(f" [bold]Python[/]    {escape(python_line(facts))}", overflow="fold")
        for conflict in report.conflicts:
            console.print(f" [yellow]conflict[/]  {escape(str(conflict.get('fact')))}: "
                          f"{escape(' vs '.join(map(str, conflict.get('values', []))))}")
        console.print()
    name_width = min(28, max((len(f.name) for f in report.findings), default=0))
    families = sorted({f.family for f in report.findings}, key=lambda fam: min(
        f.rule for f in report.findings if f.family == fam))
    for family in families:
        if len(families) > 1 and not quiet:
            console.print(f" [dim]{FAMILY_TITLES.get(family, family)}[/]")
        for finding in (f for f in report.findings if f.family == family):
            render_finding(console, finding, name_width, max([5] + [len(f.rule) for f in report.findings]))
    summary = report.summary()
    parts = [plural(summary["error"], "error"), plural(summary["warning"], "warning"), f"{summary['info']} info",
             f"{summary['passed']} passed", f"{summary['unknown']} unknown"]
    line = " · ".join(parts)
    if report.unknown:
        line += f" ({unknown_reasons(facts, report.unknown)})"
    if report.findings:
        console.print()
    judged = bool(summary["passed"] or report.findings)
    if not judged:
        line += " · no rule could be evaluated"
    style = "bold red" if summary["error"] else ("bold yellow" if summary["warning"] or not judged else "bold green")
    mark = "✓ " if judged and not summary["error"] and not summary["warning"] else ""
    console.print(f" {mark}{escape(line)}", style=style, overflow="fold")
    if any(f.fix and f.fix.env and f.fix.applicability == Applicability.SAFE for f in report.findings):
        from gpudoctor.fix import fix_command

        console.print(f" Write the safe fixes:  [cyan]{escape(fix_command(report))}[/]")
