"""Evaluate rules against a snapshot. Never raises: a crashing rule becomes a GD001 finding."""

from __future__ import annotations

import time
import traceback
from typing import Iterable, List, Optional, Sequence

from gpudoctor.suppress import finding_suppressed
from gpudoctor.catalog import INPUTS, LOG_PARTS, Rule, find_rule, load_catalog
from gpudoctor.facts.log_evidence import message_findings
from gpudoctor.facts import Facts, MissingFact
from gpudoctor.model import Finding, NotApplicable, Report, Severity, Unknown
from gpudoctor.snapshot import Snapshot

_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def needed_groups(rules: Iterable[Rule]) -> set:
    """The fact groups (first path segment) the rules read, e.g. {"nvml", "torch", "env"}."""
    return {need.split(".")[0] for rule in rules for need in rule.needs}


def _crash_finding(rule: Rule, exc: BaseException) -> Finding:
    doctor = find_rule("GD001")
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    location = f" at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if where else ""
    message = f"rule {rule.id} ({rule.name}) crashed: {type(exc).__name__}: {exc}{location}"
    if doctor is None:  # the catalog is incomplete; still report
        return Finding("GD001", "probe-failed", Severity.WARNING, message, family="doctor")
    return doctor.finding(
        message,
        evidence={"rule": rule.id, "error": f"{type(exc).__name__}: {exc}"},
        fix=doctor.fix(case="rule_crashed"),
    )


def input_given(facts: Facts, name: str) -> bool:
    """Whether the run has the input (INPUTS): present and not empty, with at least its least number of entries; a
    machine fact (`absent_when`) is missing only where the machine says it has none."""
    value = facts.get(name, None)
    absent_when = INPUTS[name].absent_when
    if absent_when is not None:  # recorded as none (`"cuda": null` of a CPU build), not merely unknown
        return not (facts.has(name) and value in (None, "", []) and facts.get(absent_when[0], None) == absent_when[1])
    if value is None or value == "" or (isinstance(value, (list, dict)) and not value):
        return False
    return not isinstance(value, list) or len(value) >= INPUTS[name].least


def not_applicable(rule: Rule, facts: Facts) -> Optional[NotApplicable]:
    """The rule has nothing to judge when none of the inputs it declares was given; None when it applies."""
    if not rule.inputs or any(input_given(facts, name) for name in rule.inputs):
        return None
    return NotApplicable(rule.id, INPUTS[rule.inputs[0]].reason)


def on_the_log_alone(facts: Facts, rule: Rule, beyond_logs: int) -> bool:
    """Whether the rule's verdict stands on the log alone: of the inputs it declares, only the log was given (the
    machine facts it also reads only qualify what the log shows); a rule that declares none read no other fact."""
    if rule.inputs:
        return [name for name in rule.inputs if input_given(facts, name)] == ["logs"]
    return facts.stated_beyond_logs == beyond_logs


def unshown(facts: Facts, rule: Rule) -> Optional[MissingFact]:
    """Why a pass from log facts alone would claim more than the log shows: it shows none of the parts of a run the
    rule judges (catalog `log_shows`); None where it shows one."""
    shows = facts.get("logs.shows", None) or []
    if any(part in shows for part in rule.log_shows):
        return None
    return MissingFact("logs.shows", "the log does not show " + " or ".join(LOG_PARTS[p] for p in rule.log_shows))


def run_rule(rule: Rule, facts: Facts) -> tuple:
    """(findings, the MissingFact or None) for one rule; exceptions become a GD001 finding."""
    try:
        return list(rule.check(facts, rule) or ()), None
    except MissingFact as missing:
        return [], missing
    except Exception as exc:  # noqa: BLE001 - a rule bug must not stop the report
        return [_crash_finding(rule, exc)], None


def evaluate(snapshot: Snapshot, rules: Sequence[Rule], started: float = 0.0, known_ids: Iterable[str] = ()) -> Report:
    """Run every rule against the snapshot's facts and build the report. `known_ids`: rule IDs this run knows
    beyond the catalog and `rules` (a loaded site policy's, when a selection leaves them out)."""
    known = sorted({rule.id for rule in load_catalog()} | {rule.id for rule in rules} | set(known_ids))
    pasted = snapshot.source.get("kind") == "report"
    facts = Facts({"probes": [probe.to_json() for probe in snapshot.probes], **snapshot.facts,
                   "rules": {"known": known}}, env_complete=not pasted or bool(snapshot.facts.get("env_sources")))
    findings: List[Finding] = []
    passed: List[str] = []
    unknown: List[Unknown] = []
    idle: List[NotApplicable] = []
    scripts = facts.get("scripts", None) or []
    for rule in rules:
        if rule.check is None:
            continue
        if pasted and not snapshot.facts:  # a text in which nothing was recognised: every rule stays unknown
            unknown.append(Unknown(rule.id, "report"))
            continue
        logged = message_findings(facts, rule)  # a message of the atlas that names this rule
        nothing_to_judge = None if logged else not_applicable(rule, facts)
        if nothing_to_judge is not None:
            idle.append(nothing_to_judge)
            continue
        stated, beyond_logs = facts.stated, facts.stated_beyond_logs
        produced, missing = run_rule(rule, facts)
        if logged and (missing is not None or not produced):
            produced, missing = logged, None
        shown = False  # a pass that stands on the log alone: the log must show the part of the run the rule judges
        if missing is None and not produced and rule.log_shows and input_given(facts, "logs") \
                and on_the_log_alone(facts, rule, beyond_logs):
            missing = unshown(facts, rule)
            shown = missing is None
        if pasted and missing is None and not produced and facts.stated == stated and not shown:
            missing = MissingFact(rule.needs[0] if rule.needs else "report")  # the paste states nothing it judges
        produced = [f for f in produced if not finding_suppressed(scripts, f)]
        if missing is not None:
            unknown.append(Unknown(rule.id, missing.path, missing.reason))
        elif produced:
            findings.extend(produced)
        else:
            passed.append(rule.id)
    findings.sort(key=lambda f: (f.rule, _SEVERITY_ORDER[f.severity]))
    return Report(
        findings=tuple(findings),
        passed=tuple(passed),
        unknown=tuple(unknown),
        probes=tuple(snapshot.probes),
        source=dict(snapshot.source),
        facts=snapshot.facts,
        seconds=(time.monotonic() - started) if started else 0.0,
        evidence=dict(snapshot.evidence),
        conflicts=tuple(snapshot.conflicts),
        rule_names={rule.id: rule.name for rule in rules},
        not_applicable=tuple(idle),
    )
