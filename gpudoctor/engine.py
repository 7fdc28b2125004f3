"""Evaluate rules against a snapshot. Never raises: a crashing rule becomes a GD001 finding."""

from __future__ import annotations

import time
from typing import Hashable, Iterable, List, Mapping, Optional, Sequence

from gpudoctor.catalog import INPUTS, Rule, find_rule, load_catalog
from gpudoctor.facts import Facts, MissingFact
from gpudoctor.facts.contract import UndeclaredFact
from gpudoctor.facts.log_evidence import log_findings
from gpudoctor.memo import VerdictMemo, exact
from gpudoctor.model import Finding, NotApplicable, Report, Severity, Unknown
from gpudoctor.provenance import base_origin
from gpudoctor.snapshot import Snapshot
from gpudoctor.suppress import finding_suppressed
from gpudoctor.verdict import Run, Verdict, decide, not_applicable

_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def _crash_finding(rule: Rule, exc: BaseException) -> Finding:
    doctor = find_rule("GD001")
    import traceback  # here: only a crashing rule needs it (start-up time)

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


def run_rule(rule: Rule, facts: Facts, judge=None) -> tuple:
    """(findings, the MissingFact or None) for one rule (`judge`: another of its functions than its check, such as
    log_evidence.log_findings); exceptions become a GD001 finding."""
    call = judge or rule.check
    try:
        return list(call(facts, rule) or ()), None  # type: ignore[misc]  # no check: TypeError, a GD001 finding
    except MissingFact as missing:
        return [], missing
    except UndeclaredFact:  # only in tests (gpudoctor.facts.contract): a misspelt fact fails the test
        raise
    except Exception as exc:  # noqa: BLE001 - a rule bug must not stop the report
        return [_crash_finding(rule, exc)], None


def given_inputs(facts: Facts) -> frozenset:
    """The inputs (INPUTS) the run has."""
    return frozenset(name for name in INPUTS if input_given(facts, name))


def _names(rules: Sequence[Rule]) -> dict:
    """Each rule's name, by ID."""
    return {rule.id: rule.name for rule in rules}


def _judge(rule: Rule, facts: Facts, context: Run, events: bool) -> Verdict:
    """One rule's verdict on a node (`context`: what the engine knows of the node; `events`: its logs hold some)."""
    run = context
    if context.recognised:
        from_log = tuple(run_rule(rule, facts, log_findings)[0]) if events or rule.from_log else ()
        if not_applicable(rule, context.given, from_log) is None:  # a rule with nothing to judge is not run
            with facts.recording() as reads:
                produced, missing = run_rule(rule, facts)
            run = Run(findings=tuple(produced), missing=missing, reads=reads, from_log=from_log,  # not replace():
                      given=context.given, shows=context.shows, base=context.base,  # a third of its time
                      recognised=context.recognised, suppressed=context.suppressed)
    return decide(rule, run)


def _context(snapshot: Snapshot, context: Run, events: bool, scripts: list) -> Hashable:
    """What a rule's verdict on the node rests on beside the facts it reads (gpudoctor.memo): the inputs given,
    what the logs show, where the facts came from, whether the job's environment is there, the scripts (their
    ignore comments)."""
    whole_env = isinstance(snapshot.facts.get("env"), Mapping)
    return (context.given, context.shows, context.base, context.recognised, events, whole_env,
            tuple(sorted(snapshot.origins.items())), exact(scripts, {}))


def evaluate(snapshot: Snapshot, rules: Sequence[Rule], started: float = 0.0, known_ids: Iterable[str] = (),
             memo: Optional[VerdictMemo] = None) -> Report:
    """Run every rule against the snapshot's facts and build the report; gpudoctor.verdict decides each rule's
    verdict. `known_ids`: rule IDs this run knows beyond the catalog and `rules` (a loaded site policy's, when a
    selection leaves them out). `memo`: verdicts of the fleet's nodes judged before, reused where a rule read the
    same values (gpudoctor.memo)."""
    beyond = tuple(known_ids)

    def all_known() -> list:
        return sorted({rule.id for rule in load_catalog()} | {rule.id for rule in rules} | set(beyond))

    known = memo.same(("known", id(rules), beyond), all_known) if memo is not None else all_known()
    facts = Facts({"probes": [probe.to_json() for probe in snapshot.probes], **snapshot.facts,
                   "rules": {"known": known}}, snapshot.origins, base_origin(snapshot.source))
    scripts = facts.get("scripts", None) or []
    context = Run(given=given_inputs(facts), shows=tuple(facts.get("logs.shows", None) or ()), base=facts.base,
                  recognised=bool(snapshot.facts) or snapshot.source.get("kind") != "report",
                  suppressed=lambda finding: finding_suppressed(scripts, finding))
    events = bool(facts.get("logs.events", None))  # without any, only a rule's own log reader may prove something
    node = memo.node(facts, _context(snapshot, context, events, scripts)) if memo is not None else None
    findings: List[Finding] = []
    passed: List[str] = []
    unknown: List[Unknown] = []
    idle: List[NotApplicable] = []
    for rule in rules:
        verdict = node.recall(rule.id) if node is not None else None
        if verdict is None:
            if rule.check is None:
                continue
            with facts.watching() as seen:
                verdict = _judge(rule, facts, context, events)
            if node is not None:
                node.keep(rule.id, seen, verdict)
        findings.extend(verdict.findings)
        if verdict.passed:
            passed.append(rule.id)
        if verdict.unknown is not None:
            unknown.append(verdict.unknown)
        if verdict.not_applicable is not None:
            idle.append(verdict.not_applicable)
    findings.sort(key=lambda f: (f.rule, _SEVERITY_ORDER[f.severity]))
    alike = memo.alike if memo is not None else (lambda items: items)
    return Report(
        findings=alike(tuple(findings)),
        passed=alike(tuple(passed)),
        unknown=alike(tuple(unknown)),
        probes=tuple(snapshot.probes),
        source=dict(snapshot.source),
        facts=snapshot.facts,
        seconds=(time.monotonic() - started) if started else 0.0,
        evidence=dict(snapshot.evidence),
        conflicts=tuple(snapshot.conflicts),
        rule_names=memo.same(("names", id(rules)), lambda: _names(rules)) if memo is not None else _names(rules),
        not_applicable=alike(tuple(idle)),
    )
