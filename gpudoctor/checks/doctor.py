"""GD0xx: the doctor's own troubles, reported as findings so the rest of the report still stands."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.model import Location, Severity
from gpudoctor.spelling import closest


def _probe_findings(facts, rule, status: str, fix):
    """A finding for each probe that ended with `status`; `fix(name)` is the Fix for the probe `name`."""
    for probe in facts.get("probes"):
        if probe.get("status") == status:
            yield rule.finding(
                f"probe {probe['name']} {'failed' if status == 'failed' else 'timed out'}: {probe.get('error')}",
                evidence={"probe": probe["name"], "error": probe.get("error"), "seconds": probe.get("seconds")},
                fix=fix(probe["name"]),
            )


@check("GD001")
def probe_failed(facts, rule):
    yield from _probe_findings(facts, rule, "failed", lambda name: rule.fix(
        case=name if name in ("torch", "nvcc") else "other_probe", values={"probe": name}))


@check("GD002")
def probe_timeout(facts, rule):
    yield from _probe_findings(facts, rule, "timeout", lambda name: rule.fix(
        case=name if name in ("nvml", "torch", "nvcc") else "other_probe", values={"probe": name}))


@check("GD003")
def input_unreadable(facts, rule):
    for item in facts.get("inputs", []):
        where = Location(item.get("path", "?"), item.get("line"), item.get("column"))
        if item.get("severity") == "info":  # read, but nothing in it for gpudoctor: not a broken file
            yield rule.finding(str(item.get("error")), evidence=dict(item), severity=Severity.INFO,
                               fix=rule.fix(case="nothing_to_check"), location=where)
            continue
        if item.get("severity") == "warning":  # a folder not read to its end: what was read may be clean
            yield rule.finding(str(item.get("error")), evidence=dict(item), severity=Severity.WARNING,
                               fix=rule.fix(case="not_all_read"), location=where)
            continue
        yield rule.finding(
            f"cannot read {item.get('kind', 'input')}: {item.get('error')}",  # the location names the file
            evidence=dict(item),
            fix=rule.fix() if item.get("line") else rule.fix(case="whole_file"),
            location=where,
        )


@check("GD004")
def unknown_suppression(facts, rule):
    known = set(facts.get("rules.known", None) or ())  # the engine's: the catalog and a loaded site policy
    for script in (s for s in facts.get("scripts", []) or [] if isinstance(s, dict)):
        for line, codes in sorted((script.get("suppressions") or {}).items(), key=lambda kv: int(kv[0])
                                  if str(kv[0]).isdigit() else 0):
            for code in codes or []:
                if code == "*" or code in known:
                    continue
                where = Location(script.get("path", "?"), int(line) if str(line).isdigit() else None)
                close = closest(str(code), sorted(known), 0.6)
                hint = f" (did you mean {close[0]}?)" if close else ""
                yield rule.finding(
                    f"`# gpudoctor: ignore[{code}]` names no gpudoctor rule{hint}; it suppresses nothing.",
                    location=where,
                    evidence={"path": script.get("path"), "line": line, "code": code},
                    fix=rule.fix())
