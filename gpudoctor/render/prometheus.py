"""The report as Prometheus text exposition format 0.0.4, for node_exporter's textfile collector.

    gpudoctor check --format prometheus --output /var/lib/node_exporter/textfile/gpudoctor.prom

Every series is a gauge. Labels carry only bounded, non-secret values: rule IDs and names, severities,
statuses, probe names, the tool version, the hostname and the source kind. Finding messages, evidence,
environment values and file paths never become labels (unbounded cardinality, and they may hold secrets).
No sample carries a timestamp: the textfile collector rejects them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import IO

from gpudoctor import __version__
from gpudoctor.model import Report, Severity

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SEVERITIES = ("error", "warning", "info")
RULE_STATUSES = ("fired", "passed", "unknown")

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


def _family(name: str, help_text: str, samples: Iterable[Sample]) -> list[str]:
    lines = [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} gauge"]
    seen = set()
    for labels, value in samples:
        if labels in seen:  # a duplicate series makes the whole file invalid for the collector
            continue
        seen.add(labels)
        if labels:
            text = ",".join(f'{key}="{escape_label_value(val)}"' for key, val in labels)
            lines.append(f"{name}{{{text}}} {format_value(value)}")
        else:
            lines.append(f"{name} {format_value(value)}")
    return lines


def _rule_meta(rule_id: str) -> tuple[str, str]:
    """(name, default severity) of a catalog rule; empty strings for a rule the catalog lacks."""
    try:
        from gpudoctor.catalog import find_rule

        rule = find_rule(rule_id)
    except Exception:  # noqa: BLE001 - a broken catalog must not break the metrics
        rule = None
    if rule is None:
        return "", ""
    return rule.name, str(rule.severity)


def rule_statuses(report: Report) -> list[tuple[str, str, str, str]]:
    """(rule, name, severity, status) once per rule: fired wins over passed and unknown."""
    rows: dict[str, tuple[str, str, str, str]] = {}
    worst: dict[str, Severity] = {}
    for finding in report.findings:
        if finding.rule not in worst or finding.severity > worst[finding.rule]:
            worst[finding.rule] = finding.severity
            rows[finding.rule] = (finding.rule, finding.name, str(finding.severity), "fired")
    for rule_id in report.passed:
        if rule_id not in rows:
            name, severity = _rule_meta(rule_id)
            rows[rule_id] = (rule_id, name, severity, "passed")
    for item in report.unknown:
        if item.rule not in rows:
            name, severity = _rule_meta(item.rule)
            rows[item.rule] = (item.rule, name, severity, "unknown")
    return [rows[key] for key in sorted(rows)]


def to_text(report: Report, now: float | None = None) -> str:
    summary = report.summary()
    host = report.facts.get("host") or {}
    worst = report.worst()
    statuses = rule_statuses(report)
    lines: list[str] = []
    lines += _family("gpudoctor_info", "gpudoctor version and the host it checked (always 1).", [
        (_labels(version=__version__, hostname=host.get("hostname") or "",
                 source=report.source.get("kind", "live")), 1)])
    lines += _family("gpudoctor_check_timestamp_seconds", "Unix time at which the report was rendered.",
                     [((), round(time.time() if now is None else now, 3))])
    lines += _family("gpudoctor_check_duration_seconds", "Seconds the check took (probes and rules).",
                     [((), round(report.seconds, 3))])
    lines += _family("gpudoctor_findings", "Findings by severity.",
                     [(_labels(severity=sev), summary[sev]) for sev in SEVERITIES])
    lines += _family("gpudoctor_rules", "Rules evaluated, by outcome (fired counts rules, not findings).",
                     [(_labels(status="fired"), sum(1 for row in statuses if row[3] == "fired")),
                      (_labels(status="passed"), summary["passed"]),
                      (_labels(status="unknown"), summary["unknown"])])
    lines += _family("gpudoctor_worst_severity", "Worst finding severity: 0 none, 1 info, 2 warning, 3 error.",
                     [((), int(worst) if worst is not None else 0)])
    lines += _family("gpudoctor_rule_status",
                     "One series per evaluated rule; status is fired, passed or unknown (value always 1).",
                     [(_labels(rule=rule, name=name, severity=severity, status=status), 1)
                      for rule, name, severity, status in statuses])
    lines += _family("gpudoctor_probe_seconds", "Seconds each probe took.",
                     [(_labels(probe=probe.name), round(probe.seconds, 3)) for probe in report.probes])
    lines += _family("gpudoctor_probe_ok", "1 when the probe succeeded; status is ok, failed, timeout or skipped.",
                     [(_labels(probe=probe.name, status=probe.status), 1 if probe.status == "ok" else 0)
                      for probe in report.probes])
    return "\n".join(lines) + "\n"


def render(report: Report, stream: IO) -> None:
    stream.write(to_text(report))
