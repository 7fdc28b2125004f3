"""The human report: rich with colour on a terminal, the same layout as plain text when piped."""

from __future__ import annotations

from typing import IO, Optional

from rich.console import Console
from rich.text import Text

from gpudoctor.facts import Facts
from gpudoctor.model import Applicability, Finding, Fix, Report, Severity
from gpudoctor.render.describe import (
    fix_command,
    header_items,
    machine_line,
    not_applicable_text,
    plural,
    python_line,
    unknown_reasons,
)
from gpudoctor.render.run_timeline import timeline_lines
from gpudoctor.render.terminal import command_line, fix_block, keep, say, say_block, screen, wrap
from gpudoctor.version import __version__

MARKS = {Severity.ERROR: ("✗", "bold red"), Severity.WARNING: ("!", "bold yellow"), Severity.INFO: ("i", "bold blue")}
FAMILY_TITLES = {
    "doctor": "gpudoctor itself", "driver-cuda": "Driver, CUDA and torch build", "precision": "Precision",
    "deepspeed": "DeepSpeed", "nccl": "NCCL and distributed environment",
    "memory-host": "Memory, host limits, GPU health",
    "script": "Training script and launch", "bench": "Benchmarks", "fleet": "Fleet", "job-spec": "Job specification",
}


def _env_changes(fix: Fix) -> str:
    env = [f"{k}={v}" for k, v in fix.env.set.items()] + [f"unset {k}" for k in fix.env.unset]
    if not env:
        return ""
    tag = "safe: gpudoctor fix" if fix.applicability == Applicability.SAFE else fix.applicability.value
    return f"{' · '.join(env)}  ({tag})"


INDENT = " " * 5  # the message, the fix and its commands, below the mark, ID and name


def _print_wrapped(console: Console, text: str, first: Text, rest: str) -> None:
    """`first` (styled), then `text` wrapped after it; the following lines start with `rest`."""
    lines = wrap(text, console.width, " " * len(first), rest)
    console.print(first + Text(lines[0][len(first):]))
    for line in lines[1:]:
        console.print(line, markup=False)


def render_finding(console: Console, finding: Finding) -> None:
    """Mark, ID and name on their line; below them the message, the fix and its commands. Prose breaks at
    spaces; a command stays whole on its line, and the lines of a fix's block (after its first line) are never
    wrapped."""
    mark, style = MARKS[finding.severity]
    console.print(Text.assemble((f" {mark} ", style), (finding.rule, "bold"), " ", (finding.name, "dim")))
    message = f"{finding.location} {finding.message}" if finding.location else finding.message
    _print_wrapped(console, message, Text(INDENT), INDENT)
    if not finding.fix:
        return
    summary, block = fix_block(finding.fix.summary)
    for label, style, text in (("fix", "bold", summary), ("env", "dim", _env_changes(finding.fix))):
        if text:
            _print_wrapped(console, text, Text.assemble(INDENT, (label, style), "  "), INDENT + " " * 5)
        if block and label == "fix":
            say_block(console, block, INDENT + " " * 5, INDENT)
    for command in finding.fix.commands:
        line = command_line(command, console.width, INDENT + " " * 5 + "$ ")
        console.print(Text.assemble((line[:-len(command)], "dim"), (command, "cyan")))


def render(report: Report, stream: IO, quiet: bool = False, color: bool = False, width: Optional[int] = None) -> None:
    with screen(stream, color, width) as console:
        _render(report, console, quiet)


def render_rich(report: Report, stream: IO, quiet: bool = False) -> None:
    render(report, stream, quiet, color=True)


def inferred_facts(report: Report) -> list:
    """(fact path, reason) for facts a pasted report only hints at, e.g. the driver's CUDA from a torch warning."""
    found = []
    for path, text in sorted(report.evidence.items()):
        start = str(text).find("(inferred")
        if start >= 0:
            found.append((path, str(text)[start:]))
    return found


def _render(report: Report, console: Console, quiet: bool) -> None:
    """The report's parts in order; --quiet leaves out the header."""
    facts = Facts(report.facts)
    for part in (() if quiet else (_header, _machine)) + (_findings, _run, _summary, _fix_hint):
        part(report, facts, console, quiet)


def _header(report: Report, facts: Facts, console: Console, quiet: bool) -> None:
    """`gpudoctor 0.1.0 · host · 1.2 s`, then where the facts come from."""
    items = [f"gpudoctor {__version__}", *header_items(facts)]
    if report.seconds:
        items.append(f"{report.seconds:.1f} s")
    say(console, " · ".join(keep(item) for item in items), rest="  ", style="bold")
    kind = report.source.get("kind")
    if kind not in ("report", "snapshot"):
        return
    paths = ", ".join(report.source.get("paths", []))
    what = "recorded snapshot" if kind != "report" else (
        "log" if report.source.get("formats") == ["log"] else "pasted report")
    say(console, f"source: {what} {paths}", rest="  ", style="dim")
    if report.source.get("nothing"):
        say(console, report.source["nothing"], rest="  ")
    missing = report.source.get("missing")
    if missing:
        say(console, f"not in the report: {', '.join(missing)}", rest="  ", style="dim")
    for path, why in inferred_facts(report):
        say(console, f"inferred: {path} = {facts.get(path, '?')} {why}", rest="  ", style="dim")


def _machine(report: Report, facts: Facts, console: Console, quiet: bool) -> None:
    """The Machine and Python lines and the facts sources disagree on."""
    console.print()
    for label, line in (("Machine", machine_line(facts)), ("Python", python_line(facts))):
        _print_wrapped(console, line, Text.assemble(" ", (label, "bold"), " " * (10 - len(label))), " " * 11)
    for conflict in report.conflicts:
        values = " vs ".join(map(str, conflict.get("values", [])))
        _print_wrapped(console, f"{conflict.get('fact')}: {values}", Text.assemble(" ", ("conflict", "yellow"),
                                                                                      "  "), " " * 11)
    console.print()


def _findings(report: Report, facts: Facts, console: Console, quiet: bool) -> None:
    """The findings by family, each family titled when there are several (not with --quiet)."""
    families = sorted({f.family for f in report.findings}, key=lambda fam: min(
        f.rule for f in report.findings if f.family == fam))
    for family in families:
        if len(families) > 1 and not quiet:
            console.print(Text(f" {FAMILY_TITLES.get(family, family)}", style="dim"))
        for finding in (f for f in report.findings if f.family == family):
            render_finding(console, finding)


def _run(report: Report, facts: Facts, console: Console, quiet: bool) -> None:
    """Every rank's logs read together (`check --from DIR`): the timeline of the ranks' first events."""
    run = report.facts.get("run")
    if not isinstance(run, dict) or quiet:
        return
    console.print()
    lines = timeline_lines(run, report.source.get("unplaced") or [], console.width - 4)
    say(console, lines[0], " Run  ", "      ", style="bold")
    for line in lines[1:]:
        say(console, line, "   ", "     ", style="dim" if line.startswith(("order:", "…", "not placed")) else "")


def _summary(report: Report, facts: Facts, console: Console, quiet: bool) -> None:
    """`1 error · 2 warnings · 0 info · 40 passed · 3 unknown (…)`, green only when something was judged."""
    summary = report.summary()
    parts = [plural(summary["error"], "error"), plural(summary["warning"], "warning"), f"{summary['info']} info",
             f"{summary['passed']} passed", f"{summary['unknown']} unknown"]
    if report.unknown:
        parts[-1] += f" ({unknown_reasons(facts, report.unknown)})"
    if report.not_applicable:
        parts.append(not_applicable_text(report))
    line = " · ".join(parts)
    if report.findings:
        console.print()
    judged = report.judged()
    if not judged:
        line += " · no rule could be evaluated" if report.unknown else " · no rule had anything to judge"
    style = "bold red" if summary["error"] else ("bold yellow" if summary["warning"] or not judged else "bold green")
    mark = "✓ " if judged and not summary["error"] and not summary["warning"] else ""
    say(console, line, f" {mark}", " " * (1 + len(mark)), style=style)


def _fix_hint(report: Report, facts: Facts, console: Console, quiet: bool) -> None:
    """The `gpudoctor fix` command that writes the safe fixes, when there are any."""
    if any(f.fix and f.fix.env and f.fix.applicability == Applicability.SAFE for f in report.findings):
        command = fix_command(report)
        what = " Write the safe fixes:" if "--write-env" in command else " The safe fixes, in the job file's form:"
        line = command_line(command, console.width, what + "  ", what + "\n   $ ")
        console.print(Text.assemble(line[:-len(command)], (command, "cyan")))
