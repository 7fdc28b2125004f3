"""Turn a Report's fixes into environment changes, and print them as a .env, shell, SLURM TaskProlog or Kubernetes
`env:` list. `gpudoctor.fix.envmerge` merges them into an existing .env file.

Only env changes are applied (DESIGN principle 5): `safe` fixes by default, `unsafe` ones on request, display-only
ones never; what is not applied is listed (`Plan.left`) so the user knows what is left by hand.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from gpudoctor.model import Applicability, Location, Report
from gpudoctor.redact import REDACTED, is_secret_name, remember

FORMATS = ("dotenv", "shell", "slurm", "k8s")
# slurmstepd reads TaskProlog output with fgets() into a 4096-byte buffer, one line per command (task.c).
SLURM_MAX_LINE = 4000


@dataclass
class Change:
    """One variable to set (value) or unset (value None), and the findings that ask for it."""

    name: str
    value: Optional[str]
    rules: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    locations: List[Location] = field(default_factory=list)  # where the findings point
    set_at: List[Location] = field(default_factory=list)  # those of them that are an assignment of this name
    secret: bool = False  # its name, or the name its value is moved from, looks secret: the value is never printed

    @property
    def unset(self) -> bool:
        return self.value is None

    @property
    def shown(self) -> Optional[str]:
        """The value as printed (never into the user's own .env file): a secret's is `<redacted>`."""
        return REDACTED if self.secret and self.value is not None else self.value

    @property
    def note(self) -> str:
        """`GD404: Rename NCCL_ASYNC_ERROR_HANDLING to …` (one line, for a comment)."""
        return "; ".join(f"{rule}: {note}" if note else rule for rule, note in zip(self.rules, self.notes))

    def describe(self) -> str:
        return f"unset {self.name}" if self.unset else f"{self.name}={self.shown}"


@dataclass
class Left:
    """A fix (or part of one) gpudoctor does not apply, with why."""

    rule: str
    why: str
    text: str
    location: Optional[Location] = None
    commands: Tuple[str, ...] = ()  # shown whole, one per line

    def head(self) -> str:
        where = f" {self.location}" if self.location else ""
        return f"{self.rule}{where} ({self.why}): {self.text}"

    def lines(self, line_width: int) -> List[str]:
        """The head wrapped to `line_width`, then each command whole on its own line(s)."""
        from gpudoctor.render.terminal import command_line, wrap

        return wrap(self.head(), line_width, "  ", "    ") + [command_line(command, line_width, "      $ ")
                                                             for command in self.commands]


@dataclass
class Plan:
    changes: List[Change] = field(default_factory=list)
    left: List[Left] = field(default_factory=list)
    clashes: List[str] = field(default_factory=list)  # fixes that disagree about one variable: none applied


def one_line(text: str, limit: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def plan_fixes(report: Report, unsafe: bool = False) -> Plan:
    """The env changes of the report's fixes that may be applied; everything else in `left`."""
    plan = Plan()
    by_name: Dict[str, Change] = {}
    disputed: Dict[str, List[str]] = {}
    for finding in report.findings:
        fix = finding.fix
        if fix is None:
            continue
        summary = " ".join(fix.summary.split())
        left = _not_applied(finding, summary, unsafe)
        if left is not None:
            plan.left.append(left)
            continue
        if fix.commands:
            plan.left.append(Left(finding.rule, "by hand", "run", finding.location, tuple(fix.commands)))
        for name, value, secret in _wanted(fix.env):
            change = by_name.get(name)
            if change is None:
                change = by_name[name] = Change(name, value)
            if value is not None and secret:
                change.secret = True
                remember(value)
            elif change.value != value:
                disputed.setdefault(name, [f"{rule} wants {change.describe()}" for rule in change.rules])
                disputed[name].append(f"{finding.rule} wants {Change(name, value).describe()}")
                continue
            _asked_by(change, finding, summary)
    for name, wants in disputed.items():
        by_name.pop(name, None)
        plan.clashes.append(f"fixes disagree about {name} ({'; '.join(wants)}): none applied")
    plan.changes = list(by_name.values())
    return plan


def _not_applied(finding, summary: str, unsafe: bool) -> Optional[Left]:
    """Why a finding's fix is left to the user: not an env change, display-only, or unsafe without --unsafe."""
    fix = finding.fix
    if not fix.env:
        return Left(finding.rule, f"{fix.applicability.value}, not an env change", summary, finding.location,
                    tuple(fix.commands))
    if fix.applicability == Applicability.DISPLAY_ONLY:
        return Left(finding.rule, "display-only", summary, finding.location)
    if fix.applicability == Applicability.UNSAFE and not unsafe:
        return Left(finding.rule, "unsafe: --unsafe applies it", summary, finding.location)
    return None


def _wanted(env) -> List[Tuple[str, Optional[str], bool]]:
    """(name, value or None to unset, whether the value is secret) of each variable an env change asks for; a
    rename of a secret-looking variable carries a secret's value."""
    moved_secret = any(is_secret_name(name) for name in env.unset)
    wanted: List[Tuple[str, Optional[str]]] = [(name, None) for name in env.unset if name not in env.set]
    wanted += [(name, str(value)) for name, value in env.set.items()]
    return [(name, value, moved_secret or is_secret_name(name)) for name, value in wanted]


def _asked_by(change: Change, finding, summary: str) -> None:
    """Record that a finding asks for the change: its rule and fix, where it points (an assignment of the name)."""
    if finding.rule not in change.rules:
        change.rules.append(finding.rule)
        change.notes.append(summary)
    if finding.location and finding.location not in change.locations:
        change.locations.append(finding.location)
        if (finding.evidence or {}).get("variable") == change.name:
            change.set_at.append(finding.location)


def applied(facts: dict, changes: List[Change]) -> dict:
    """The facts with the changes made to the job's environment; a changed variable loses its old source record
    (`--write-env` comments its line out and writes the new value into its own block)."""
    import copy

    fixed = copy.deepcopy(facts)
    env, sources = fixed.setdefault("env", {}), fixed.get("env_sources") or {}
    for change in changes:
        sources.pop(change.name, None)
        if change.unset:
            env.pop(change.name, None)
        else:
            env[change.name] = change.value
    return fixed


def still_to_change(env: dict, changes: List[Change]) -> List[Change]:
    """The changes that would change `env` (an unset of an absent variable, a value it already has: no)."""
    return [c for c in changes if (c.unset and c.name in env) or (not c.unset and env.get(c.name) != c.value)]


def converged_plan(facts: dict, rules, report: Report, unsafe: bool = False, rounds: int = 4) -> Plan:
    """`plan_fixes`, then the rules run again on the fixed environment until they ask for nothing more: a fix that
    another rule would change next (a rename into a debugging switch, a corrected value that pins a tuning knob)
    carries that rule's verdict at once, so running `fix` twice changes nothing the first run did not."""
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    plan = plan_fixes(report, unsafe)
    original = dict(facts.get("env") or {})
    current = facts
    for _ in range(rounds):
        current = applied(current, plan.changes)
        again = plan_fixes(evaluate(Snapshot(facts=current), rules), unsafe)
        plan.clashes += [clash for clash in again.clashes if clash not in plan.clashes]
        more = still_to_change(current["env"], again.changes)
        if not more:
            break
        by_name = {change.name: change for change in plan.changes}
        for change in more:
            known = by_name.get(change.name)
            if known is None:
                plan.changes.append(change)
                continue
            known.value = change.value
            known.rules += change.rules
            known.notes += change.notes
    plan.changes = [c for c in plan.changes if not (c.unset and c.name not in original)]
    return plan


# --- values, quoted for each format ---------------------------------------------------------------------------

_PLAIN = re.compile(r"[A-Za-z0-9_./:,%^=+@-]+")


def dotenv_value(value: str) -> str:
    """A value python-dotenv (and gpudoctor's .env reader) reads back exactly: bare when it is plain, else in single
    quotes, which python-dotenv never expands (`\\` and `'` escaped, the two escapes it decodes there)."""
    if _PLAIN.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def shell_value(value: str) -> str:
    return shlex.quote(value)


def _comment(change: Change, prefix: str = "# ") -> str:
    return prefix + one_line(change.note, 200)


def render_dotenv(changes: List[Change]) -> str:
    lines = []
    for change in changes:
        lines.append(_comment(change))
        if change.shown is None:  # unset
            lines.append(f"# unset {change.name} (a .env file cannot unset a variable): remove its line where it is "
                         "set (gpudoctor fix --write-env comments it out)")
        else:
            lines.append(f"{change.name}={dotenv_value(change.shown)}")
    return "".join(line + "\n" for line in lines)


def render_shell(changes: List[Change]) -> str:
    lines = []
    for change in changes:
        lines.append(_comment(change))
        lines.append(f"unset {change.name}" if change.shown is None else
                     f"export {change.name}={shell_value(change.shown)}")
    return "".join(line + "\n" for line in lines)


def render_slurm(changes: List[Change], left: Optional[List[Left]] = None) -> str:
    """What a TaskProlog prints: slurmstepd reads `export NAME=value` (the value verbatim to the end of the line:
    no quotes, no escapes) and `unset NAME`, and ignores other lines (so `#` comments are harmless)."""
    lines = []
    for change in changes:
        if change.value is not None and ("\n" in change.value or "\r" in change.value
                                 or len(change.name) + len(change.value) + 8 > SLURM_MAX_LINE):
            if left is not None:
                left.append(Left(change.rules[0], "not expressible in a TaskProlog line", change.describe()))
            continue
        lines.append(_comment(change))
        lines.append(f"unset {change.name}" if change.unset else f"export {change.name}={change.shown}")
    return "".join(line + "\n" for line in lines)


def render_k8s(changes: List[Change]) -> str:
    """A container's `env:` list. A pod's environment cannot unset a variable: an unset is a comment saying which
    entry to remove. Values are JSON strings, which YAML reads as double-quoted strings (never as numbers)."""
    lines = ["env:"]
    entries = 0
    for change in changes:
        lines.append(_comment(change, "  # "))
        if change.unset:
            lines.append(f"  # remove the entry `- name: {change.name}` (a pod's env cannot unset a variable)")
        else:
            lines.append(f"  - name: {change.name}")
            lines.append(f"    value: {json.dumps(change.shown, ensure_ascii=True)}")
            entries += 1
    if not entries:
        lines[0] = "env: []"
    return "".join(line + "\n" for line in lines)


def render(plan: Plan, fmt: str) -> str:
    if fmt == "dotenv":
        return render_dotenv(plan.changes)
    if fmt == "shell":
        return render_shell(plan.changes)
    if fmt == "slurm":
        return render_slurm(plan.changes, plan.left)
    if fmt == "k8s":
        return render_k8s(plan.changes)
    raise ValueError(f"unknown fix format {fmt!r}")
