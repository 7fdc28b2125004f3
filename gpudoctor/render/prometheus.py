"""The report as Prometheus text exposition format 0.0.4, for node_exporter's textfile collector.

    gpudoctor check --format prometheus --output /var/lib/node_exporter/textfile/gpudoctor.prom

Every series is a gauge. Rule and probe outcomes follow node_exporter's state-set convention (as in
`node_systemd_unit_state`): every state is present, 1 for the current one and 0 for the others, so a series keeps its
identity when the state changes and `changes()`/alerts work on it. Labels carry only bounded, non-secret values:
rule IDs and names, severities, states, probe names, the tool version, the hostname and the source kind. Finding
messages, evidence, environment values and file paths never become labels (unbounded cardinality, and they may hold
secrets). No sample carries a timestamp: the textfile collector rejects them.

Every series carries `check`, the name of the file written without `.prom` (`gpudoctor` on standard output), so two
gpudoctor files in one textfile folder (a Prolog's node check and a cron job's full check) never export the same
series: node_exporter refuses a series two files both hold, keeping one file's values and logging an error.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterable
from typing import IO

from gpudoctor.model import Report, Severity
from gpudoctor.version import __version__

SEVERITIES = ("error", "warning", "info")
# a fired rule's state is its worst severity; not_applicable: the input the rule judges was not given
RULE_STATES = ("passed", "unknown", "not_applicable", "info", "warning", "error")
PROBE_STATES = ("ok", "failed", "timeout", "skipped")

Labels = tuple[tuple[str, str], ...]
Sample = tuple[Labels, float]


def escape_label_value(value: object) -> str:
    """Backslash, double quote and line feed escaped, as the exposition format requires."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text escapes only backslash and line feed."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(**items: object) -> Labels:
    return tuple((key, "" if value is None else str(value)) for key, value in items.items())


def check_name(report: Report) -> str:
    """The `check` label: the output file's name without `.prom`, else `gpudoctor`."""
    output = report.source.get("output")
    if not isinstance(output, str) or not output:
        return "gpudoctor"
    name = output.replace("\\", "/").rsplit("/", 1)[-1]
    return name[:-len(".prom")] if name.endswith(".prom") else name


def family(name: str, help_text: str, samples: Iterable[Sample], check: str = "gpudoctor") -> list[str]:
    """One gauge family, each series labelled with `check` first, a duplicate series dropped."""
    lines = [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} gauge"]
    seen = set()
    for labels, value in samples:
        labels = (("check", check),) + labels
        if labels in seen:  # a duplicate series makes the whole file invalid for the collector
            continue
        seen.add(labels)
        text = ",".join(f'{key}="{escape_label_value(val)}"' for key, val in labels)
        lines.append(f"{name}{{{text}}} {format_value(value)}")
    return lines


def rule_states(report: Report) -> list[tuple[str, str, str]]:
    """(rule, name, state) once per evaluated rule: its worst finding's severity, else passed, unknown or
    not_applicable."""
    states: dict[str, str] = {rule: "passed" for rule in report.passed}
    states.update((item.rule, "unknown") for item in report.unknown)
    states.update((item.rule, "not_applicable") for item in report.not_applicable)
    worst: dict[str, Severity] = {}
    for finding in report.findings:
        if finding.rule not in worst or finding.severity > worst[finding.rule]:
            worst[finding.rule] = finding.severity
            states[finding.rule] = str(finding.severity)
    names = {finding.rule: finding.name for finding in report.findings}
    names.update(report.rule_names)
    return [(rule, names.get(rule, ""), states[rule]) for rule in sorted(states)]


def _state_set(state: str, states: tuple, **labels: object) -> list[Sample]:
    return [(_labels(**labels, status=candidate), 1 if candidate == state else 0) for candidate in states]


def to_text(report: Report, now: float | None = None) -> str:
    summary = report.summary()
    host = report.facts.get("host") or {}
    worst = report.worst()
    states = rule_states(report)
    metric = functools.partial(family, check=check_name(report))
    lines: list[str] = []
    lines += metric("gpudoctor_info", "gpudoctor version and the host it checked (always 1).", [
        (_labels(version=__version__, hostname=host.get("hostname") or "",
                 source=report.source.get("kind", "live")), 1)])
    lines += metric("gpudoctor_check_timestamp_seconds", "Unix time at which the report was rendered.",
                     [((), round(time.time() if now is None else now, 3))])
    lines += metric("gpudoctor_check_duration_seconds", "Seconds the check took (probes and rules).",
                     [((), round(report.seconds, 3))])
    lines += metric("gpudoctor_findings", "Findings by severity.",
                     [(_labels(severity=sev), summary[sev]) for sev in SEVERITIES])
    lines += metric("gpudoctor_rules", "Rules selected, by outcome (fired counts rules, not findings; not_applicable: "
                     "the input the rule judges was not given).",
                     [(_labels(status="fired"), sum(1 for row in states if row[2] in SEVERITIES)),
                      (_labels(status="passed"), summary["passed"]),
                      (_labels(status="unknown"), summary["unknown"]),
                      (_labels(status="not_applicable"), summary["not_applicable"])])
    lines += metric("gpudoctor_worst_severity", "Worst finding severity: 0 none, 1 info, 2 warning, 3 error.",
                     [((), int(worst) if worst is not None else 0)])
    lines += metric("gpudoctor_rule_status",
                     "State set per selected rule: status is passed, unknown, not_applicable (the input it judges "
                     "was not given), or the worst severity it fired at (info, warning, error); 1 for the current "
                     "state, 0 for the others.",
                     [sample for rule, name, state in states
                      for sample in _state_set(state, RULE_STATES, rule=rule, name=name)])
    nvml_init = (report.facts.get("nvml") or {}).get("init_seconds")
    if isinstance(nvml_init, (int, float)):
        lines += metric("gpudoctor_nvml_init_seconds", "Seconds NVML took to initialise (the driver's time, not "
                         "gpudoctor's: long without persistence mode).", [((), nvml_init)])
    lines += metric("gpudoctor_probe_seconds", "Seconds each probe took.",
                     [(_labels(probe=probe.name), round(probe.seconds, 3)) for probe in report.probes])
    lines += metric("gpudoctor_probe_ok", "1 when the probe succeeded, else 0.",
                     [(_labels(probe=probe.name), 1 if probe.status == "ok" else 0) for probe in report.probes])
    lines += metric("gpudoctor_probe_status",
                     "State set per probe: status is ok, failed, timeout or skipped; 1 for the current state.",
                     [sample for probe in report.probes
                      for sample in _state_set(probe.status, PROBE_STATES, probe=probe.name)])
    return "\n".join(lines) + "\n"


def render(report: Report, stream: IO, quiet: bool = False) -> None:
    """Every gauge (`quiet` shortens only the text formats)."""
    stream.write(to_text(report))
