"""Log lines as evidence for rules that otherwise judge the machine (check --from LOG).

One route: the log reader (gpudoctor.ingest.logs) records each failure line as an event in ``logs.events``; an
event of an atlas message names the rule it feeds, what it proves and its fix case (data), and a rule that needs
code to judge its events registers a reader (``check("GDxxx", from_log=fn)``). ``log_findings`` gives the engine
either; gpudoctor.verdict lets them stand where the rule's machine facts find nothing or are unknown. The log
proves the symptom; the machine's facts, when given, say more.
"""

from __future__ import annotations

from typing import List

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


def log_findings(facts, rule) -> list:
    """What the logs prove for this rule: its own reader's findings (`check(..., from_log=fn)`: events that need
    code to judge), else those of the first atlas message that names it. gpudoctor.verdict decides when they stand."""
    found = list(rule.from_log(facts, rule) or ()) if rule.from_log is not None else []
    return found or message_findings(facts, rule)
