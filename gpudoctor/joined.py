"""The reports of jobs judged apart (`lint` of several jobs), joined into one: every job's findings (one a file
shared by two jobs gives once), and each rule at its worst across the jobs: found, else unknown, else passed, else
not applicable. A rule is never passed for all where one job left it unknown."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Iterable, List, Sequence

from gpudoctor.model import Report


def _merge(into: Any, more: Any) -> Any:
    """Facts of several jobs as one mapping, for the report's description: mappings merged (the first job's value
    kept), lists joined without repeats."""
    if isinstance(into, dict) and isinstance(more, dict):
        merged = dict(into)
        for key, value in more.items():
            merged[key] = _merge(merged[key], value) if key in merged else value
        return merged
    if isinstance(into, list) and isinstance(more, list):
        seen = {json.dumps(item, sort_keys=True, default=str) for item in into}
        return into + [item for item in more if json.dumps(item, sort_keys=True, default=str) not in seen]
    return into


def _key(item: Any) -> str:
    return json.dumps(item.to_json() if hasattr(item, "to_json") else item, sort_keys=True, default=str)


def _unique(items: Iterable) -> List:
    """The items without repeats, in order (findings and conflicts hold mappings, so compared as JSON)."""
    seen: Dict[str, Any] = {}
    for item in items:
        seen.setdefault(_key(item), item)
    return list(seen.values())


def _first_by_rule(items: Iterable, judged: set) -> Dict[str, Any]:
    """Each rule's first item (unknown, not applicable), by rule, leaving out the rules already judged worse."""
    first: Dict[str, Any] = {}
    for item in items:
        if item.rule not in judged:
            first.setdefault(item.rule, item)
    return first


def joined(reports: Sequence[Report]) -> Report:
    """One report of the jobs' reports (at least one)."""
    if len(reports) == 1:
        return reports[0]
    findings = sorted(_unique(finding for report in reports for finding in report.findings),
                      key=lambda finding: (finding.rule, -finding.severity))
    found = {finding.rule for finding in findings}
    unknown = _first_by_rule((item for report in reports for item in report.unknown), found)
    passed = _unique(rule for report in reports for rule in report.passed if rule not in found and rule not in unknown)
    judged = found | set(unknown) | set(passed)
    idle = _first_by_rule((item for report in reports for item in report.not_applicable), judged)
    facts: Any = {}
    evidence: Any = {}
    for report in reports:
        facts, evidence = _merge(facts, dict(report.facts)), _merge(evidence, dict(report.evidence))
    first = reports[0]
    paths = _unique(path for report in reports for path in report.source.get("paths", ()))
    return dataclasses.replace(
        first, findings=tuple(findings), passed=tuple(passed), unknown=tuple(unknown.values()),
        not_applicable=tuple(idle.values()), facts=facts, evidence=evidence,
        source={**first.source, "paths": paths},
        conflicts=tuple(_unique(conflict for report in reports for conflict in report.conflicts)),
        rule_names={key: value for report in reports for key, value in report.rule_names.items()})
