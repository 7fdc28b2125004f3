"""GD401, GD402, GD404, GD410: the NCCL and distributed-environment variables a job sets: names nothing reads,
values NCCL or torch rejects, deprecated or removed names, and one variable set twice to different values.

Facts: `env` (the variables the job gets) and `env_sources` (where files set them: every assignment, so a bad
value in one of several containers is reported at its own line); the NCCL and torch versions in use
(`torch.nccl`, `torch.version`) when known. Knowledge: rules/nccl_env.toml (sources cited there). The other GD4
rules are in the modules FAMILIES names (gpudoctor/catalog.py): the network (nccl_network.py), P2P (p2p.py),
debugging left on (debug_env.py), tensor parallelism (tensor_parallel.py), tuning knobs, logs, Transformer Engine.

Version-dependent facts (a variable deprecated since NCCL 2.17, a value rejected since NCCL 2.24, a name renamed in
torch 2.2) fire at full severity only when the version in use is known, or when every version in use is affected
(the change predates [meta] nccl_floor / torch_floor); otherwise they are info naming the versions affected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, List, Optional

from gpudoctor.checks import check
from gpudoctor.facts.nccl_settings import (
    SCOPED_PREFIXES,
    TRUE_WORDS,
    Setting,
    affected,
    debug_switch,
    is_tuning_knob,
    knowledge,
    known_names,
    location_of,
    meta,
    owner_floor,
    owner_label,
    owner_version,
    settings,
    spec,
    unique_findings,
)
from gpudoctor.facts.nccl_values import Problem, c_strtoll, value_problems
from gpudoctor.knowledge import Release, version
from gpudoctor.model import EnvChange, Severity
from gpudoctor.spelling import closest, one_slip

# --- GD401 nccl-unknown-variable ---------------------------------------------------------------------------

# prefixes of other collective libraries one letter from NCCL: RCCL, HCCL, MCCL, TCCL …, oneCCL's CCL_, CNCL, NCCLX
OTHER_COLLECTIVES = re.compile(r"^(?:[A-MO-Z]?CCL|CNCL|NCCLX)$")

def _in_scope(name: str) -> bool:
    return name.upper().startswith(SCOPED_PREFIXES)


def _misspelt_prefix(name: str, names) -> Optional[str]:
    """The real name of `NCC_DEBUG`, `NCLL_SOCKET_IFNAME`, `TORCH_NCLL_BLOCKING_WAIT`: a name outside the NCCL
    families whose prefix is one slip from `NCCL` (not another library's: RCCL, HCCL, oneCCL …) and whose rest is
    exactly a real NCCL/PyTorch name's."""
    prefix = "TORCH_" if name.startswith("TORCH_") else ""
    head, sep, tail = name[len(prefix):].partition("_")
    if not tail or OTHER_COLLECTIVES.match(head) or not one_slip(head, "NCCL"):
        return None
    real = f"{prefix}NCCL_{tail}"
    return real if real in names else None


@check("GD401")
def nccl_unknown_variable(facts, rule):
    names, prefixes = known_names()
    invented = knowledge().get("invented", {})
    env = facts.get("env")
    if facts.get("torch.hip", None):
        return []  # a ROCm torch uses RCCL, which reads NCCL_* names of its own that this table does not list
    suggestions_left = 500  # difflib is slow: a generated file with 100k unknown names must not take minutes
    findings = []
    for setting in settings(facts):
        name = setting.name
        shown = f"{name}={setting.value}" if setting.value is not None else name
        if not _in_scope(name):
            real = _misspelt_prefix(name, names)
            if real:
                findings.append(rule.finding(
                    f"{shown}{setting.where}: {name} is not a variable anything reads; did you mean {real}?",
                    location=setting.location, evidence=setting.evidence(suggestion=real),
                    fix=_rename_fix(rule, setting, real, env)))
            continue
        if name in names or name.startswith(prefixes):
            finding = _not_in_this_version(facts, rule, setting)
            if finding:
                findings.append(finding)
            continue
        if name.upper() != name and (name.upper() in names or name.upper().startswith(prefixes)):
            real = name.upper()
            findings.append(rule.finding(
                f"{shown}{setting.where}: variable names are case-sensitive; NCCL and PyTorch read {real}, "
                f"so this one is ignored", location=setting.location, evidence=setting.evidence(suggestion=real),
                fix=_rename_fix(rule, setting, real, env)))
            continue
        if name in invented:
            findings.append(_invented(rule, setting, shown, invented[name], env))
            continue
        family = _family(names, "TORCH_NCCL_" if name.startswith("TORCH_NCCL_") else "NCCL_")
        close = closest(name, family, 0.8) if suggestions_left > 0 else []
        suggestions_left -= 1
        findings.append(_unknown(rule, setting, shown, close[0] if close else None, env))
    return unique_findings(findings)


def _invented(rule, setting: Setting, shown: str, entry: dict, env: dict):
    """A name no release reads that people write for another (rules/nccl_env.toml's `invented`), and what they meant."""
    name, suggestion = setting.name, entry.get("suggest")
    message = f"{shown}{setting.where}: no NCCL release, PyTorch release or known plugin reads {name}, so " \
              f"it has no effect. {entry.get('meant', '')}".rstrip()
    if suggestion and suggestion in env and suggestion != name:
        message += f" ({suggestion} is already set to {env[suggestion]!r})"
    return rule.finding(
        message, location=setting.location, evidence=setting.evidence(suggestion=suggestion),
        fix=rule.fix(applicability="safe", case="invented_meant" if suggestion else "invented",
                     values={"variable": name, **({"real": suggestion} if suggestion else {})},
                     env=EnvChange(unset=(name,))))


@lru_cache(maxsize=4)
def _family(names: frozenset, prefix: str) -> List[str]:
    """The known names of a family (`NCCL_`, `TORCH_NCCL_`), sorted: what a name nothing reads is compared with."""
    return sorted(name for name in names if name.startswith(prefix))


def _unknown(rule, setting: Setting, shown: str, real: Optional[str], env: dict):
    """A name nothing reads: a rename to the known name it is close to, else unset it."""
    name = setting.name
    if real:
        return rule.finding(
            f"{shown}{setting.where}: {name} is not a variable NCCL, PyTorch or a known NCCL plugin reads; "
            f"did you mean {real}?", location=setting.location, evidence=setting.evidence(suggestion=real),
            fix=_rename_fix(rule, setting, real, env))
    return rule.finding(
        f"{shown}{setting.where}: {name} is not a variable NCCL, PyTorch or a known NCCL plugin reads, so it "
        "has no effect (a typo, an invented name, or a plugin gpudoctor does not know)",
        location=setting.location, evidence=setting.evidence(),
        fix=rule.fix(applicability="safe", case="unknown", values={"variable": name},
                     env=EnvChange(unset=(name,))))


def _rename_fix(rule, setting: Setting, real: str, env: dict):
    names = {"variable": setting.name, "real": real}
    if real in env:
        return rule.fix(applicability="safe", case="already_set", values=names, env=EnvChange(unset=(setting.name,)))
    if setting.value is None:
        return rule.fix(applicability="unsafe", case="rename", values=names, env=EnvChange(unset=(setting.name,)))
    return rule.fix(applicability="unsafe", case="rename_takes_effect", values=names,
                    env=EnvChange(set={real: setting.value}, unset=(setting.name,)))


def _not_in_this_version(facts, rule, setting: Setting):
    """A real name that the NCCL or torch in use does not read yet (only when that version is known)."""
    item = spec(setting.name)
    first = None
    owner = "nccl"
    if item is not None:
        owner = item.get("owner", "nccl")
        first = item.get("since")
    elif setting.name in knowledge().get("nccl_src", {}):
        first = knowledge()["nccl_src"][setting.name][0]
    if owner not in ("nccl", "torch") or not first or item is not None and item.get("replaced_by"):
        return None
    have = owner_version(facts, owner)
    wanted = version(first)
    if have is None or wanted is None or have >= wanted:
        return None
    label = owner_label(owner)
    legacy = next((name for name, other in knowledge().get("var", {}).items()
                   if other.get("replaced_by") == setting.name), None)
    if legacy and owner == "torch":
        return rule.finding(
            f"{setting.name}{setting.where}: torch {facts.get('torch.version')} does not read it (TORCH_NCCL_* names "
            f"arrived in torch {first}); this torch reads {legacy}", location=setting.location,
            evidence=setting.evidence(installed=str(have), since=first),
            fix=rule.fix(applicability="unsafe", case="torch_too_old", values={"legacy": legacy, "since": first},
                         env=EnvChange(set={legacy: setting.value} if setting.value is not None else {})))
    return rule.finding(
        f"{setting.name}{setting.where}: {label} {have} does not read it (added in {label} {first}), so it has no "
        "effect here", location=setting.location, evidence=setting.evidence(installed=str(have), since=first),
        fix=rule.fix(applicability="safe", case="version_too_old",
                     values={"owner": label, "since": first, "variable": setting.name},
                     env=EnvChange(unset=(setting.name,))))


# --- GD402 nccl-invalid-value ------------------------------------------------------------------------------

def nccl_invalid_value_in_log(facts, rule):
    """NCCL echoes the variables it read (`NCCL_PROTO set by environment to simple2`): judge those values."""
    for name, echo in sorted((facts.get("logs.nccl_env", None) or {}).items()):
        value = str(echo.get("value", ""))
        item = spec(name)
        if item is None or not isinstance(echo, dict):
            continue
        for problem in value_problems(name, value):
            yield rule.finding(
                f"{name}={value} (as NCCL echoes it, {echo.get('where')}) {problem.message}",
                evidence={"log": echo.get("where"), "variable": name, "value": value, "problem": problem.message},
                fix=rule.fix(applicability="unsafe", case="logged_value",
                             values={"variable": name, "grammar": _grammar(item)}))


@check("GD402", from_log=nccl_invalid_value_in_log)
def nccl_invalid_value(facts, rule):
    findings = []
    for setting in settings(facts):
        item = spec(setting.name)
        if setting.value is None or item is None:
            continue
        for problem in value_problems(setting.name, setting.value):
            finding = _problem_finding(facts, rule, setting, item, problem)
            if finding:
                findings.append(finding)
    findings += _socket_threads(facts, rule)
    return unique_findings(findings)


def _problem_finding(facts, rule, setting: Setting, item: dict, problem: Problem):
    owner = item.get("owner", "nccl")
    severity = None
    note = ""
    floor = owner_floor(owner)
    if problem.before and floor is not None and version(problem.before) <= floor:
        return None  # every version in use is past it
    if problem.since and affected(facts, owner, problem.since) is False:
        return None
    if problem.before:
        state = affected(facts, owner, problem.before)
        if state is True:
            return None
        if state is False:
            note = f" (NCCL {owner_version(facts, owner)} in use)"
        else:
            note = f"; this matters with NCCL < {problem.before}, and the NCCL version in use is not known"
            severity = Severity.INFO
    elif problem.since:
        state = affected(facts, owner, problem.since)
        if state is True and owner_version(facts, owner) is not None:
            note = f" (NCCL {owner_version(facts, owner)} in use)"
        elif state is None:
            note = f"; this matters with NCCL >= {problem.since}, and the NCCL version in use is not known"
            severity = Severity.INFO
    message = f"{setting.name}={setting.value}{setting.where} {problem.message}{note}"
    if problem.fixed is not None and problem.fixed != setting.value:
        fix = rule.fix(applicability="unsafe", case="corrected",
                       values={"variable": setting.name, "value": problem.fixed},
                       env=EnvChange(set={setting.name: problem.fixed}))
    else:
        default = item.get("default")
        fix = rule.fix(applicability="unsafe", case="correct_or_remove_default" if default else "correct_or_remove",
                       values={"variable": setting.name, "grammar": _grammar(item),
                               **({"default": default} if default else {})},
                       env=EnvChange(unset=(setting.name,)))
    return rule.finding(message, severity=severity, location=setting.location,
                        evidence=setting.evidence(problem=problem.message), fix=fix)


def _grammar(item: dict) -> str:
    kind = item.get("kind", "")
    if item.get("values") and kind in ("enum", "flags", "level", "algo", "proto"):
        return "accepted: " + ", ".join(str(v) for v in item["values"])
    return knowledge().get("kinds", {}).get(kind, kind)


def _socket_threads(facts, rule) -> list:
    env = facts.get("env", {})
    threads, socks = env.get("NCCL_SOCKET_NTHREADS"), env.get("NCCL_NSOCKS_PERTHREAD")
    if threads is None or socks is None:
        return []
    a, ok_a = c_strtoll(str(threads))
    b, ok_b = c_strtoll(str(socks))
    if not (ok_a and ok_b) or a is None or b is None or a * b <= 64:
        return []
    record = (facts.get("env_sources", {}) or {}).get("NCCL_NSOCKS_PERTHREAD") or {}
    return [rule.finding(
        f"NCCL_SOCKET_NTHREADS={threads} x NCCL_NSOCKS_PERTHREAD={socks} = {a * b}: NCCL allows at most 64 sockets "
        "per connection", location=location_of(record),
        evidence={"NCCL_SOCKET_NTHREADS": threads, "NCCL_NSOCKS_PERTHREAD": socks},
        fix=rule.fix(applicability="unsafe", case="too_many_sockets",
                     env=EnvChange(set={"NCCL_NSOCKS_PERTHREAD": str(max(1, 64 // max(a, 1)))})))]


# --- GD404 nccl-deprecated-variable ------------------------------------------------------------------------

@check("GD404")
def nccl_deprecated_variable(facts, rule):
    env = facts.get("env")
    findings = []
    latest = Release(meta("nccl_latest"))  # the table's newest NCCL; [nccl_src] gives first and last releases
    for setting in settings(facts):
        item = spec(setting.name)
        if item is not None and (item.get("deprecated") or item.get("removed")):
            finding = _deprecated(facts, rule, setting, item, env)
            if finding:
                findings.append(finding)
        elif item is None and setting.name in knowledge().get("nccl_src", {}):
            first, last = knowledge()["nccl_src"][setting.name]
            if Release(last) < latest:
                finding = _gone(facts, rule, setting, last)
                if finding:
                    findings.append(finding)
        if item is not None and setting.value is not None:
            for token, since in (item.get("deprecated_values") or {}).items():
                if setting.value.strip().upper() == token.upper():
                    state = affected(facts, item.get("owner", "nccl"), since)
                    if state is False:
                        continue
                    findings.append(rule.finding(
                        f"{setting.name}={setting.value}{setting.where}: the value {token} is deprecated since NCCL "
                        f"{since}" + ("" if state else " (the NCCL version in use is not known)"),
                        severity=None if state else Severity.INFO, location=setting.location,
                        evidence=setting.evidence(deprecated=since),
                        fix=rule.fix(applicability="unsafe",
                                     case="deprecated_value" if item.get("default") else "remove",
                                     values={"variable": setting.name,
                                             **({"default": item["default"]} if item.get("default") else {})},
                                     env=EnvChange(unset=(setting.name,)))))
    return unique_findings(findings)


def _deprecation_case(replacement: Optional[str], new_value: Optional[str], setting: Setting, env: dict) -> str:
    """What a deprecated variable's fix does: the fix case of GD404's catalog entry."""
    if not replacement:
        return "remove"
    if new_value is not None and debug_switch(replacement, new_value) is not None:
        return "debug_switch"  # NCCL_BLOCKING_WAIT=1 must not become TORCH_NCCL_BLOCKING_WAIT=1, which GD409 removes
    if is_tuning_knob(replacement) and setting.value is not None:
        return "forced_knob"  # NCCL_MAX_NCHANNELS=8 must not become NCCL_MAX_CTAS=8, a forced knob too (GD411)
    if replacement in env:
        return "replacement_set"
    return "replace" if new_value is not None else "remove_see_replacement"


_DEPRECATION_NOTES = {
    "debug_switch":
        "; its replacement {replacement}={value} is a debugging switch (GD409): remove it, do not rename it",
    "forced_knob": "; its replacement {replacement} pins the same tuning choice (GD411): remove it, do not rename it",
    "replacement_set": "; use {replacement}{replacement_value}",
    "replace": "; use {replacement}{replacement_value}",
    "remove_see_replacement": "; use {replacement}{replacement_value}",
    "remove": "{doc}",
}


@dataclass
class _Deprecation:
    """The fix of a deprecated variable, one method per fix case (`_deprecation_case`)."""

    facts: Any
    rule: Any
    setting: Setting
    item: dict
    owner: str
    state: Optional[bool]
    new_value: Optional[str]

    def names(self, **more) -> dict:
        replacement = self.item.get("replaced_by")
        return {"variable": self.setting.name, **({"replacement": replacement} if replacement else {}), **more}

    def unset(self) -> EnvChange:
        return EnvChange(unset=(self.setting.name,))

    def debug_switch(self):
        return self.rule.fix(applicability="safe", case="debug_switch", values=self.names(value=self.new_value),
                             env=self.unset())

    def forced_knob(self):
        safe = self.item.get("removed") or self.state is True
        return self.rule.fix(applicability="safe" if safe else "unsafe", case="forced_knob",
                             values=self.names(value=self.setting.value), env=self.unset())

    def replacement_set(self):
        return self.rule.fix(applicability="safe", case="replacement_set", values=self.names(), env=self.unset())

    def replace(self):
        replacement = self.item["replaced_by"]
        assert self.new_value is not None  # _deprecation_case picks "replace" only with a value to set
        since = (spec(replacement) or {}).get("since")
        renamed = EnvChange(set={replacement: self.new_value}, unset=(self.setting.name,))
        if affected(self.facts, self.owner, since) is True or bool(self.item.get("removed")) and self.state is True:
            return self.rule.fix(applicability="safe", case="replace", values=self.names(value=self.new_value),
                                 env=renamed)
        deprecated = self.item.get("removed") or self.item.get("deprecated")
        return self.rule.fix(applicability="unsafe", case="replace_if_read", env=renamed,
                             values=self.names(value=self.new_value, owner=owner_label(self.owner),
                                               since=since or deprecated))

    def remove_see_replacement(self):
        return self.rule.fix(applicability="safe" if self.item.get("removed") else "unsafe",
                             case="remove_see_replacement", values=self.names(), env=self.unset())

    def remove(self):
        return self.rule.fix(applicability="safe", case="remove", values=self.names(), env=self.unset())


def _deprecated(facts, rule, setting: Setting, item: dict, env: dict):
    owner = item.get("owner", "nccl")
    label = owner_label(owner)
    removed = item.get("removed")
    since = removed or item.get("deprecated")
    state = affected(facts, owner, since)
    if state is False:
        return None
    replacement = item.get("replaced_by")
    if removed:
        what = f"was removed in {label} {removed}" + (
            f" (deprecated since {item['deprecated']})" if item.get("deprecated") else "") + ", so it has no effect"
    else:
        what = f"is deprecated since {label} {item['deprecated']}"
    new_value = None
    if replacement and item.get("replacement_value"):
        new_value = str(item["replacement_value"]) if _truthy(setting.value) else None
    elif replacement and item.get("rename") is not False and _same_grammar(item, spec(replacement)):
        new_value = setting.value
    case = _deprecation_case(replacement, new_value, setting, env)
    doc = item.get("doc", "")
    message = f"{setting.name}{'=' + setting.value if setting.value is not None else ''}{setting.where} {what}"
    message += _DEPRECATION_NOTES[case].format(
        replacement=replacement, value=new_value, doc=f" ({doc})" if doc and not removed else "",
        replacement_value=f"={item['replacement_value']}" if item.get("replacement_value") else "")
    severity = None
    if state is None:
        message += f" (applies to {label} >= {since}; the {label} version in use is not known)"
        severity = Severity.INFO
    if case == "replacement_set" and new_value is not None and str(env[replacement]) != new_value:
        message += f"; {replacement}={env[replacement]} is also set and wins"
    fix = getattr(_Deprecation(facts, rule, setting, item, owner, state, new_value), case)()
    return rule.finding(message, severity=severity, location=setting.location,
                        evidence=setting.evidence(deprecated=item.get("deprecated"), removed=removed,
                                                  replacement=replacement), fix=fix)


def _truthy(value: Optional[str]) -> bool:
    if value is None:
        return False
    number, _ = c_strtoll(value)
    return bool(number) if number is not None else value.strip().lower() in TRUE_WORDS


def _same_grammar(old: dict, new: Optional[dict]) -> bool:
    if new is None:
        return False
    return old.get("kind") == new.get("kind") or {old.get("kind"), new.get("kind")} <= {"int", "enum", "torch_bool"}


def _gone(facts, rule, setting: Setting, last: str):
    removed = _next_release(last)
    state = affected(facts, "nccl", removed)
    if state is False:
        return None
    message = f"{setting.name}{setting.where} is no longer read by NCCL: the last release that reads it is {last}"
    severity = None
    if state is None:
        message += " (the NCCL version in use is not known)"
        severity = Severity.INFO
    return rule.finding(message, severity=severity, location=setting.location,
                        evidence=setting.evidence(last_release=last),
                        fix=rule.fix(applicability="safe", case="remove", values={"variable": setting.name},
                                     env=EnvChange(unset=(setting.name,))))


def _next_release(last: str) -> str:
    parsed = version(last)
    return f"{parsed.major}.{parsed.minor}.{parsed.micro + 1}" if parsed else last


# --- GD410 env-conflicting-values ----------------------------------------------------------------------------

@check("GD410")
def env_conflicting_values(facts, rule):
    facts.get("env")
    findings = []
    for name, record in (facts.get("env_sources", {}) or {}).items():
        history = [item for item in (record.get("also") or []) if isinstance(item, dict)] + [record]
        by_scope: Dict[str, List[dict]] = {}
        for item in history:
            if item.get("conditional") or item.get("unset") or item.get("unresolved"):
                continue
            by_scope.setdefault(str(item.get("scope", item.get("path", ""))), []).append(item)
        env = facts.get("env", {})
        for items in by_scope.values():
            if len(items) < 2:
                continue
            values = []
            for item in items:
                value = item.get("value") if item is not record else env.get(name)
                values.append(value)
            if len({str(v) for v in values}) < 2:
                continue
            last, earlier = items[-1], items[:-1]
            shown = ", ".join(f"{values[i]!r} at line {item.get('line')}" for i, item in enumerate(earlier))
            context = f" ({last['context']})" if last.get("context") else ""
            findings.append(rule.finding(
                f"{name} is set twice with different values{context}: {shown}, then {values[-1]!r} at line "
                f"{last.get('line')}, which wins", location=location_of(last),
                evidence={"variable": name, "values": [str(v) for v in values],
                          "lines": [item.get("line") for item in items], "path": last.get("path")},
                fix=rule.fix(values={"variable": name, "line": last.get("line")})))
    return findings


# --- GD445 nccl-settings-of-disabled-transport ---------------------------------------------------------------------

def _switches_off(setting, when: str) -> bool:
    """Whether `setting`'s value meets a [[transport_off]] `when`: "nonzero" or a number as NCCL's strtol reads the
    value, else the value itself, without case."""
    number, _ = c_strtoll(setting.value or "")
    if when == "nonzero":
        return bool(number)
    return number == int(when) if when.isdigit() else (setting.value or "").strip().lower() == when.lower()


@check("GD445")
def nccl_settings_of_disabled_transport(facts, rule):
    """A transport's own settings beside the setting that switches it off (rules/nccl_env.toml [[transport_off]]):
    one finding per switch, naming the settings it leaves without effect. Settings made only on some paths of a
    script are switches, not a contradiction."""
    made = [setting for setting in settings(facts) if setting.effective and not setting.conditional]
    findings = []
    for transport in knowledge().get("transport_off", []):
        moot = [setting for setting in made if setting.name in transport["reads"]]
        switches = [setting for setting in made for off in transport["off"]
                    if setting.name == off["name"] and _switches_off(setting, off["when"])]
        for switch in switches if moot else []:
            listed = ", ".join(f"{setting.name}={setting.value}{_line(setting)}" for setting in moot)
            findings.append(rule.finding(
                f"{switch.name}={switch.value} switches {transport['transport']} off ("
                f"{transport['instead']}), so {listed} {'does' if len(moot) == 1 else 'do'} nothing: one of the two "
                "was not meant", location=switch.location,
                evidence=switch.evidence(moot=[setting.evidence() for setting in moot]),
                fix=rule.fix(values={"switch": f"{switch.name}={switch.value}", "transport": transport["transport"],
                                     "moot": ", ".join(setting.name for setting in moot),
                                     "check": transport["check"]})))
    return findings


def _line(setting) -> str:
    return f" (line {setting.location.line})" if setting.location and setting.location.line else ""
