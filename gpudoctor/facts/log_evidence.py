"""Log lines as evidence for rules that otherwise judge the machine (check --from LOG).

A rule decorated with ``@or_from_log(describe)`` runs as before; where its facts are unknown or it finds nothing,
the failure lines the log reader recorded (``logs.events``, gpudoctor.ingest.logs) make it fire instead, with
the line and where it is as evidence. The log proves the symptom; the machine's facts, when given, say more.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, List

from gpudoctor.facts import MissingFact
from gpudoctor.model import Severity


def log_events(facts, *kinds: str) -> List[dict]:
    """The events of these kinds the logs hold (none when no log was given)."""
    events = facts.get("logs.events", None) or []
    return [e for e in events if isinstance(e, dict) and (not kinds or e.get("kind") in kinds)]


def log_count(facts, kind: str) -> int:
    """How many lines of this kind the logs hold (events beyond the kept ones are counted only)."""
    return int((facts.get("logs.counts", None) or {}).get(kind, 0))


def cited(event: dict) -> dict:
    """Evidence for a finding: where the line is and the line itself."""
    return {"log": event.get("where"), "line": event.get("line")}


def message_findings(facts, rule) -> list:
    """The finding of the first message of the atlas (gpudoctor.ingest.atlas) that names this rule: what the
    message proves, the line as evidence (the engine adds it where the rule's own check finds nothing)."""
    for event in log_events(facts):
        if event.get("rule") == rule.id and event.get("proves"):
            severity = Severity.parse(event["severity"]) if event.get("severity") else None
            return [rule.finding(f"{event['proves']}: {event.get('line')}", severity=severity,
                                 evidence={**cited(event), "message": event.get("message")},
                                 fix=rule.fix(case=event.get("fix") or ""))]
    return []


def or_from_log(describe: Callable[..., Iterable]) -> Callable:
    """Let a machine rule fire from log evidence (`describe(facts, rule)`) where its own facts say nothing."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def check(facts, rule):
            try:
                found = list(fn(facts, rule) or ())
            except MissingFact:
                logged = list(describe(facts, rule))
                if logged:
                    return logged
                raise
            return found or list(describe(facts, rule))

        return check

    return wrap
