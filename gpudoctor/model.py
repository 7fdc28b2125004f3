"""The data gpudoctor passes around: facts in, findings out. Frozen dataclasses, no behaviour beyond helpers."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


class Severity(enum.IntEnum):
    """Finding severity; ordered so that `>=` compares with `--fail-on`."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (error, warning, info)") from None

    def __str__(self) -> str:
        return self.name.lower()


def exit_code(worst: Optional[Severity], fail_on: str) -> int:
    """`--fail-on`: 1 when the worst finding reaches `fail_on` (error, warning, info), else 0; `never`: always 0."""
    if fail_on == "never":
        return 0
    return 1 if worst is not None and worst >= Severity.parse(fail_on) else 0


class Applicability(str, enum.Enum):
    """Whether a fix may be applied automatically (ruff's model)."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


@dataclass(frozen=True)
class EnvChange:
    """Environment edits a fix makes: variables to set and to unset."""

    set: Mapping[str, str] = field(default_factory=dict)
    unset: tuple = ()

    def __bool__(self) -> bool:
        return bool(self.set or self.unset)


@dataclass(frozen=True)
class Fix:
    """What to do about a finding. Env changes are data so `gpudoctor fix` can apply them."""

    summary: str
    applicability: Applicability = Applicability.DISPLAY_ONLY
    env: EnvChange = field(default_factory=EnvChange)
    commands: tuple = ()
    docs: Optional[str] = None

    def to_json(self) -> dict:
        return {
            "summary": self.summary,
            "applicability": self.applicability.value,
            "env": {"set": dict(self.env.set), "unset": list(self.env.unset)},
            "commands": list(self.commands),
            "docs": self.docs,
        }


@dataclass(frozen=True)
class Location:
    """Where in a user's file a finding points."""

    path: str
    line: Optional[int] = None
    column: Optional[int] = None

    def __str__(self) -> str:
        text = self.path
        if self.line is not None:
            text += f":{self.line}"
            if self.column is not None:
                text += f":{self.column}"
        return text


@dataclass(frozen=True)
class Finding:
    """One rule firing once."""

    rule: str
    name: str
    severity: Severity
    message: str
    family: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fix: Optional[Fix] = None
    location: Optional[Location] = None

    def to_json(self) -> dict:
        data = {
            "rule": self.rule,
            "name": self.name,
            "severity": str(self.severity),
            "message": self.message,
            "evidence": dict(self.evidence),
            "fix": self.fix.to_json() if self.fix else None,
        }
        if self.location:
            data["location"] = {"path": self.location.path, "line": self.location.line,
                                "column": self.location.column}
        return data


@dataclass(frozen=True)
class ProbeResult:
    """How one probe went; its facts go into the snapshot."""

    name: str
    status: str  # ok | failed | timeout | skipped
    seconds: float = 0.0
    error: Optional[str] = None

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "seconds": round(self.seconds, 3), "error": self.error}


@dataclass(frozen=True)
class Unknown:
    """A rule that could not be evaluated because a fact was missing."""

    rule: str
    missing: str
    reason: str = ""  # why, where the missing fact's name does not say it (a knowledge-table row not verified)

    def to_json(self) -> dict:
        return {"rule": self.rule, "missing": self.missing, **({"reason": self.reason} if self.reason else {})}


@dataclass(frozen=True)
class NotApplicable:
    """A rule that had nothing to judge: the input it judges (a DeepSpeed config, a script, a log …) was not given.
    Neither passed nor unknown; `reason` says what was missing, e.g. "no DeepSpeed config"."""

    rule: str
    reason: str

    def to_json(self) -> dict:
        return {"rule": self.rule, "reason": self.reason}


@dataclass(frozen=True)
class Report:
    """Everything a renderer needs."""

    findings: tuple
    passed: tuple
    unknown: tuple
    probes: tuple
    source: Mapping[str, Any]
    facts: Mapping[str, Any]
    seconds: float = 0.0
    evidence: Mapping[str, Any] = field(default_factory=dict)
    conflicts: tuple = ()
    rule_names: Mapping[str, str] = field(default_factory=dict)  # every evaluated rule's name, by ID
    not_applicable: tuple = ()  # NotApplicable: rules whose input was not given (never passed, never unknown)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def worst(self) -> Optional[Severity]:
        return max((f.severity for f in self.findings), default=None)

    def summary(self) -> dict:
        return {
            "error": self.count(Severity.ERROR),
            "warning": self.count(Severity.WARNING),
            "info": self.count(Severity.INFO),
            "passed": len(self.passed),
            "unknown": len(self.unknown),
            "not_applicable": len(self.not_applicable),
        }

    def judged(self) -> bool:
        """Whether any rule judged something: a report where every rule was unknown or not applicable is never
        green."""
        return bool(self.passed or self.findings)


@dataclass(frozen=True)
class FleetReport:
    """The reports of a job's nodes (`gpudoctor fleet`, `check --fleet`): each node's own, and the cross-node one."""

    nodes: tuple  # ((name, Report), …) in the order given (rank order under check --fleet)
    cross: Report  # the GD8xx findings
    seconds: float = 0.0

    def all_findings(self) -> list:
        return [f for _, report in self.nodes for f in report.findings] + list(self.cross.findings)

    def worst(self) -> Optional[Severity]:
        return max((f.severity for f in self.all_findings()), default=None)


@dataclass(frozen=True)
class PreflightPhase:
    """One phase of `gpudoctor preflight`: meet, agree, gpus or fabric."""

    name: str
    status: str  # ok | bad | failed | skipped
    seconds: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class PreflightReport:
    """`gpudoctor preflight`'s result on the reporting rank: the phases, every node's and GPU's figures (the
    `preflight` facts), the verdicts (GD806–GD809), the agree phase's fleet report, and from them the bad nodes,
    the slow links and what to do now (gpudoctor.preflight.result)."""

    launcher: str
    world_size: int
    budget_s: float
    facts: Mapping[str, Any]
    phases: tuple  # PreflightPhase, in order
    verdicts: Report
    fleet: Optional[FleetReport] = None
    seconds: float = 0.0
    bad_nodes: tuple = ()  # {"node", "host", "node_rank", "reasons": [{"rule", "message", …figures}]}
    slow_links: tuple = ()  # [node, node]
    next_steps: tuple = ()  # lines: the job again without the bad nodes, the drain command (printed, never run)

    def findings(self) -> list:
        return (self.fleet.all_findings() if self.fleet else []) + list(self.verdicts.findings)

    def worst(self) -> Optional[Severity]:
        return max((f.severity for f in self.findings()), default=None)

    def ok(self) -> bool:
        """Nothing bad: no node, GPU or link named and no error found (exit 0)."""
        worst = self.worst()
        return not self.bad_nodes and not self.slow_links and (worst is None or worst < Severity.ERROR)
