"""GD0xx: the doctor's own troubles, reported as findings so the rest of the report still stands."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.model import Location, Severity

HANG_HINTS = {
    "nvml": "NVML is read in a child process; a hung call usually means a wedged driver (check `dmesg`).",
    "torch": "`import torch` ran in the job's interpreter; a hang there is often a CUDA init that never returns.",
    "nvcc": "`nvcc --version` is run from PATH; a wrapper script that hangs shows up here.",
}
FAILURE_HINTS = {
    "torch": "torch is inspected by running a small script with the job's interpreter (`--python`, Python 3.6+).",
    "nvcc": "`nvcc --version` is run from PATH; a broken install or wrapper script shows up here.",
}


def _probe_findings(facts, rule, status: str):
    for probe in facts.get("probes"):
        if probe.get("status") == status:
            hint = (FAILURE_HINTS if status == "failed" else HANG_HINTS).get(probe["name"], "")
            yield rule.finding(
                f"probe {probe['name']} {'failed' if status == 'failed' else 'timed out'}: {probe.get('error')}",
                evidence={"probe": probe["name"], "error": probe.get("error"), "seconds": probe.get("seconds")},
                fix=rule.fix(f"{hint} Rules that need the {probe['name']} facts are counted as unknown.".strip()),
            )


@check("GD001")
def probe_failed(facts, rule):
    yield from _probe_findings(facts, rule, "failed")


@check("GD002")
def probe_timeout(facts, rule):
    yield from _probe_findings(facts, rule, "timeout")


@check("GD003")
def input_unreadable(facts, rule):
    for item in facts.get("inputs", []):
        where = Location(item.get("path", "?"), item.get("line"), item.get("column"))
        if item.get("severity") == "info":  # read, but nothing in it for gpudoctor: not a broken file
            yield rule.finding(f"{where}: {item.get('error')}", evidence=dict(item), severity=Severity.INFO,
                               fix=rule.fix("Nothing to do; give gpudoctor the job files that set the "
                                            "environment or start the job."), location=where)
            continue
        yield rule.finding(
            f"{where}: cannot read {item.get('kind', 'input')}: {item.get('error')}",
            evidence=dict(item),
            fix=rule.fix("Fix the file at the position given, then run gpudoctor again."),
            location=where,
        )
