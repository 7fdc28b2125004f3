"""The one place a rule's verdict is decided: its findings, passed, unknown (with the reason) or not applicable.

The engine runs the rule and hands `decide` what it has: what the rule returned (findings, or the MissingFact it
raised), the fact paths it read (gpudoctor.facts.Read: stated, absent or unknown, and where each came from), the
inputs the run has (catalog.INPUTS), what the logs prove for the rule (facts.log_evidence.log_findings) and the
parts of a run the logs show. With the rule's catalog entry (`input`, `needs`, `log_shows`) that decides:

1. a pasted text in which nothing was recognised: unknown ("report");
2. none of the inputs the rule declares given, and no log line proves it: not applicable;
3. a log line proves it where the rule found nothing or could not judge: the log's findings;
4. a fact it needs is unknown: unknown (that fact);
5. findings (those a script's `# gpudoctor: ignore` suppresses dropped; none left: passed);
6. a pass that stands on the log alone (of the inputs it declares only the log was given; one that declares none
   knew nothing from elsewhere than a log) where the log shows none of the parts the rule judges (`log_shows`):
   unknown;
7. a pass that knew nothing from what it read (no stated fact, nor one known to be none from a source that shows it
   whole), where what it read came from a pasted report or a log (which show part of a machine: what they leave out
   is not known to be absent): unknown (the first fact it needs);
8. otherwise: passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple, TypeVar

from gpudoctor.catalog import INPUTS, LOG_PARTS, Rule
from gpudoctor.facts import ABSENT, STATED, MissingFact, Read
from gpudoctor.model import Finding, NotApplicable, Unknown
from gpudoctor.provenance import LOG, PARTIAL, PROBE

V = TypeVar("V")


@dataclass(frozen=True)
class Run:
    """What the engine knows of one rule's run."""

    findings: Tuple[Finding, ...] = ()
    missing: Optional[MissingFact] = None  # what the rule raised
    reads: Mapping[str, Read] = field(default_factory=dict)  # the fact paths it read
    given: frozenset = frozenset()  # the inputs (catalog.INPUTS) the run has, declared by this rule or not
    from_log: Tuple[Finding, ...] = ()  # what the logs prove for this rule
    shows: Tuple[str, ...] = ()  # the parts of a run the logs show (catalog.LOG_PARTS)
    base: str = PROBE  # where the facts came from, for a rule that read none
    recognised: bool = True  # False: a pasted text in which nothing was recognised
    suppressed: Callable[[Finding], bool] = lambda finding: False  # a script's `# gpudoctor: ignore`


@dataclass(frozen=True)
class Verdict:
    """Exactly one of: findings; passed; unknown; not applicable."""

    findings: Tuple[Finding, ...] = ()
    passed: bool = False
    unknown: Optional[Unknown] = None
    not_applicable: Optional[NotApplicable] = None


def not_applicable(rule: Rule, given: Iterable[str], from_log: Iterable[Finding] = ()) -> Optional[NotApplicable]:
    """The rule has nothing to judge: none of the inputs it declares was given and no log line proves it."""
    if not rule.inputs or any(name in given for name in rule.inputs) or any(True for _ in from_log):
        return None
    key = (rule.id, INPUTS[rule.inputs[0]].reason)
    if key not in _IDLE:  # one value on every node of a fleet (as _shared), found without making one to look it up
        _IDLE[key] = NotApplicable(*key)
    return _IDLE[key]


_IDLE: Dict[Tuple[str, str], NotApplicable] = {}


_SHARED: Dict[Any, Any] = {}
_SHARED_MOST = 4096


def _shared(value: V) -> V:
    """One value for equal verdicts (the same rule unknown or not applicable for the same reason) on every node of a
    fleet: walked, redacted and encoded once (gpudoctor.render.fleet)."""
    if len(_SHARED) >= _SHARED_MOST:  # a long-lived process (gpudoctor mcp) keeps a bounded few
        _SHARED.clear()
    return _SHARED.setdefault(value, value)


def decide(rule: Rule, run: Run) -> Verdict:
    """The rule's verdict (see the module docstring)."""
    if not run.recognised:
        return Verdict(unknown=_shared(Unknown(rule.id, "report")))
    idle = not_applicable(rule, run.given, run.from_log)
    if idle is not None:
        return Verdict(not_applicable=idle)
    if run.from_log and (run.missing is not None or not run.findings):
        return _found(rule, run, run.from_log)
    if run.missing is not None:
        return Verdict(unknown=_shared(Unknown(rule.id, run.missing.path, run.missing.reason)))
    if run.findings:
        return _found(rule, run, run.findings)
    if rule.log_shows and "logs" in run.given and _on_the_log_alone(rule, run):
        if any(part in run.shows for part in rule.log_shows):
            return Verdict(passed=True)
        shows = " or ".join(LOG_PARTS[part] for part in rule.log_shows)
        return Verdict(unknown=_shared(Unknown(rule.id, "logs.shows", "the log does not show " + shows)))
    if _rests_on_nothing(run):
        return Verdict(unknown=_shared(Unknown(rule.id, rule.needs[0] if rule.needs else "report")))
    return Verdict(passed=True)


def _found(rule: Rule, run: Run, findings: Iterable[Finding]) -> Verdict:
    kept = tuple(finding for finding in findings if not run.suppressed(finding))
    return Verdict(findings=kept) if kept else Verdict(passed=True)


def _known(read: Read) -> bool:
    """A read that tells something: a stated fact, or one known to be none where its source shows it whole (a
    variable the job's environment does not set); what a paste or a log leaves empty or out tells nothing."""
    return read.state == STATED or (read.state == ABSENT and read.origin not in PARTIAL)


def _on_the_log_alone(rule: Rule, run: Run) -> bool:
    """Of the inputs the rule declares only the log was given (the machine facts it also reads only qualify what
    the log shows); a rule that declares none knew nothing from elsewhere than a log."""
    if rule.inputs:
        return [name for name in rule.inputs if name in run.given] == ["logs"]
    return all(read.origin == LOG for read in run.reads.values() if _known(read))


def _rests_on_nothing(run: Run) -> bool:
    """The rule knew nothing from what it read, and what it read (or, reading nothing, the snapshot) came from a
    source that shows part of a machine."""
    if any(_known(read) for read in run.reads.values()):
        return False
    origins = {read.origin for read in run.reads.values()} or {run.base}
    return bool(origins & PARTIAL)
