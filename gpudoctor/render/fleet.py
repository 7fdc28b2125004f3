"""The fleet report: the `gpudoctor.fleet/1` JSON document, or text: one line per node, then the cross-node
findings (GD8xx), then the totals."""

from __future__ import annotations

import json
from typing import IO, Iterator, Optional

from rich.text import Text

from gpudoctor.collector import collector_paused
from gpudoctor.model import FleetReport, Severity
from gpudoctor.render.describe import not_applicable_reasons, plural
from gpudoctor.render.terminal import keep, say, screen, wrap
from gpudoctor.render.text import MARKS, render_finding
from gpudoctor.version import __version__

SCHEMA = "gpudoctor.fleet/1"


@collector_paused()
def render(fleet: FleetReport, fmt: str, stream: IO, quiet: bool = False, width: Optional[int] = None) -> None:
    """The fleet report in `fmt`, secrets redacted first (gpudoctor.redact), as every report is."""
    from gpudoctor.redact import redact_data

    fleet = redact_data(_as_shown(fleet))
    if fmt == "json":
        for chunk in json_chunks(fleet):
            stream.write(chunk)
        stream.write("\n")
        return
    from gpudoctor.render.printable import printable_data

    with screen(stream, fmt == "rich", width) as console:
        _render(printable_data(fleet), console, quiet)


def _as_shown(fleet: FleetReport) -> FleetReport:
    """The fleet with each report cut to what the fleet report shows of it (its verdicts, its host's name and OS),
    after the secrets its facts, evidence and conflicts hold are remembered (gpudoctor.redact): what nodes share (a
    fact group, a host's interfaces) is walked once, and the cross-node report's facts (every node's again) not at
    all."""
    from dataclasses import replace

    from gpudoctor.redact import remember_facts

    walked: set = set()
    for _, report in fleet.nodes:
        for part in (*report.facts.values(), report.evidence, report.conflicts):
            remember_facts(part, walked=walked)
    nodes = tuple((name, replace(report, facts={"host": _host(report)}, source={}, probes=(), evidence={},
                                 conflicts=(), rule_names={})) for name, report in fleet.nodes)
    return replace(fleet, nodes=nodes, cross=replace(fleet.cross, facts={}))


def _host(report) -> dict:
    host = report.facts.get("host") or {}
    return {"hostname": host.get("hostname"), "os": host.get("os")}


def to_json(fleet: FleetReport) -> dict:
    """The `gpudoctor.fleet/1` document (CONTRACT.md)."""
    return {**_document(fleet), "nodes": [{"node": name, "host": _host(report), **_verdicts(report)}
                                          for name, report in fleet.nodes]}


def json_chunks(fleet: FleetReport) -> Iterator[str]:
    """The text of `json.dumps(to_json(fleet), indent=2, ensure_ascii=False)`, in pieces to write one by one, with
    the verdicts that nodes share (identical nodes are judged once: gpudoctor.fleet.evaluate_fleet) encoded once:
    10,000 nodes of a few kinds cost a few encodings, not 10,000 (tests/test_fleet.py holds it to json.dumps)."""
    text = _dumps({**_document(fleet), "nodes": []})
    before, after = text.split('"nodes": []', 1)
    if not fleet.nodes:
        yield text
        return
    yield before + '"nodes": [\n'
    encoded: dict = {}
    for number, (name, report) in enumerate(fleet.nodes):
        key = (*(tuple(map(id, items)) for items in (report.findings, report.unknown, report.not_applicable)),
               report.passed)  # the same values (verdicts that distinct nodes share: gpudoctor.verdict), encoded once
        if key not in encoded:
            encoded[key] = _indent(_dumps(_verdicts(report))[2:], 4)  # without its opening "{\n"
        host = _host(report)
        head = (f'{{\n  "node": {_scalar(name)},\n  "host": {{\n    "hostname": {_scalar(host["hostname"])},\n'
                f'    "os": {_scalar(host["os"])}\n  }},\n')
        yield ("    " if not number else ",\n    ") + _indent(head, 4)
        yield encoded[key]  # the same text for every node with these verdicts: redacted once as it is written
    yield "\n  ]" + after


def _dumps(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _scalar(value) -> str:
    """A value of the node's `host` as json.dumps(indent=2) writes it there: a string, number or null on one line
    (indentation changes nothing for one value), anything else indented to its depth."""
    if isinstance(value, (dict, list)):
        return _indent(_dumps(value), 4)
    return json.dumps(value, ensure_ascii=False)


def _indent(text: str, spaces: int) -> str:
    """Every line of `text` but its first moved right by `spaces`."""
    return text.replace("\n", "\n" + " " * spaces)


def _verdicts(report) -> dict:
    return {"summary": report.summary(),
            "findings": [finding.to_json() for finding in report.findings],
            "unknown": [item.to_json() for item in report.unknown],
            "not_applicable": [item.to_json() for item in report.not_applicable]}


def _document(fleet: FleetReport) -> dict:
    """The document around its nodes, in the order it is written."""
    findings = []
    for finding in fleet.cross.findings:
        data = finding.to_json()
        data["nodes"] = dict(finding.evidence.get("nodes") or {})
        findings.append(data)
    return {
        "schema": SCHEMA,
        "tool": {"name": "gpudoctor", "version": __version__},
        "summary": fleet.cross.summary(),
        "nodes": [],
        "findings": findings,
        "seconds": round(fleet.seconds, 3),
    }


def _counts(summary: dict) -> str:
    """A node's counts; its rules that were not applicable are said once for all nodes (`_not_applicable`)."""
    return " · ".join([plural(summary["error"], "error"), plural(summary["warning"], "warning"),
                       f"{summary['info']} info", f"{summary['passed']} passed", f"{summary['unknown']} unknown"])


def _not_applicable(fleet) -> str:
    """`not applicable: 34 rules on every node (no log, no script, …)`, or the count of each node where they
    differ; "" when every rule applied."""
    counts = {name: len(report.not_applicable) for name, report in fleet.nodes}
    if not any(counts.values()):
        return ""
    reasons = not_applicable_reasons([item for _, report in fleet.nodes for item in report.not_applicable])
    where = (f"{plural(next(iter(counts.values())), 'rule')} on every node" if len(set(counts.values())) == 1 else
             ", ".join(f"{count} on {name}" for name, count in counts.items()))
    return f"not applicable: {where} ({reasons})"


def _node_findings(fleet, console) -> None:
    """Each node's findings in full; one that every node has (same rule, same message) is shown once."""
    def key(f):
        return f.rule, f.message
    everywhere = set.intersection(*[{key(f) for f in report.findings} for _, report in fleet.nodes]) \
        if fleet.nodes else set()
    sections = []
    if everywhere:
        first = fleet.nodes[0][1]
        sections.append(("On every node", [f for f in first.findings if key(f) in everywhere]))
    for name, report in fleet.nodes:
        own = [f for f in report.findings if key(f) not in everywhere]
        if own:
            sections.append((f"On {name}", own))
    drawn: dict = {}
    for title, findings in sections:
        console.print(Text(f" {title}", style="dim"))
        for finding in findings:
            _draw(console, finding, drawn)
        console.print()


def _draw(console, finding, drawn: dict) -> None:
    """render_finding, drawn once for a finding that several nodes share (one object: gpudoctor.memo) and its
    text written again for the others."""
    text = drawn.get(id(finding))
    if text is None:
        with console.capture() as captured:
            render_finding(console, finding)
        text = drawn[id(finding)] = captured.get()
    console.file.write(text)


def _render(fleet, console, quiet: bool) -> None:
    """The fleet report's parts in order; --quiet leaves out the header and each node's findings."""
    for part in (_header, _nodes, _node_findings, _across, _totals):
        if not (quiet and part in (_header, _node_findings)):
            part(fleet, console)


def _header(fleet, console) -> None:
    items = [f"gpudoctor {__version__}", f"fleet of {plural(len(fleet.nodes), 'node')}"]
    if fleet.seconds:
        items.append(f"{fleet.seconds:.1f} s")
    say(console, " · ".join(keep(item) for item in items), rest="  ", style="bold")
    console.print()


def _nodes(fleet, console) -> None:
    """One line per node: its mark, its counts and the rules that fired; then the rules that applied nowhere."""
    node_width = max((len(name) for name, _ in fleet.nodes), default=4)
    wrapped: dict = {}  # the lines of each node's counts, by its verdicts (nodes share them: gpudoctor.memo)
    for name, report in fleet.nodes:
        worst = report.worst()
        mark, style = MARKS[worst] if worst and worst >= Severity.WARNING else (
            ("✓", "bold green") if report.judged() else ("?", "bold yellow"))  # no rule judged anything: not green
        head = Text.assemble((f" {mark} ", style), (name.ljust(node_width), "bold"), "  ")
        rest = " " * len(head)
        key = (id(report.findings), len(report.passed), len(report.unknown), len(report.not_applicable))
        if key not in wrapped:
            fired = sorted({f.rule for f in report.findings})
            wrapped[key] = wrap(_counts(report.summary()) + ("  " + " ".join(fired) if fired else ""),
                                console.width, rest, rest)
        lines = wrapped[key]
        console.print(head + Text(lines[0][len(rest):]))
        for line in lines[1:]:
            console.print(line, markup=False)
    idle = _not_applicable(fleet)
    if idle:
        say(console, idle, " " * (node_width + 5), " " * (node_width + 5), style="dim")
    console.print()


def _across(fleet, console) -> None:
    """The cross-node findings (GD8xx)."""
    findings = fleet.cross.findings
    if findings:
        console.print(Text(" Across nodes", style="dim"))
        for finding in findings:
            render_finding(console, finding)
        console.print()


def _totals(fleet, console) -> None:
    """The cross-node counts and those of every node together, green only when something was judged."""
    summary = fleet.cross.summary()
    errors = sum(report.summary()["error"] for _, report in fleet.nodes) + summary["error"]
    warnings = sum(report.summary()["warning"] for _, report in fleet.nodes) + summary["warning"]
    idle = f" · {summary['not_applicable']} not applicable" if summary["not_applicable"] else ""
    line = (f"across nodes: {plural(summary['error'], 'error')} · {plural(summary['warning'], 'warning')} · "
            f"{summary['passed']} passed · {summary['unknown']} unknown{idle}; "
            f"in all: {plural(errors, 'error')} · {plural(warnings, 'warning')}")
    judged = fleet.cross.judged() or any(report.judged() for _, report in fleet.nodes)
    style = "bold red" if errors else ("bold yellow" if warnings or not judged else "bold green")
    mark = "✓ " if judged and not errors and not warnings else ""
    say(console, line, f" {mark}", " " * (1 + len(mark)), style=style)
