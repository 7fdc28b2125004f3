"""GD411: NCCL performance knobs pinned in a job (rules/nccl_env.toml `[tuning]`), unless they belong to a vendor's
network profile set in the same environment."""

from __future__ import annotations

from typing import List

from gpudoctor.checks import check
from gpudoctor.facts.nccl_settings import Setting, knowledge, settings, spec, unique_findings
from gpudoctor.facts.nccl_values import value_problems
from gpudoctor.model import EnvChange, Severity


def tuning() -> dict:
    return knowledge().get("tuning", {})


def is_tuning_knob(name: str) -> bool:
    return name in tuning().get("knobs", [])


def environment(setting: Setting) -> str:
    """Which environment an assignment belongs to: its scope (a container, one script, the --env-file files
    together); "" for the environment this process or a recording has."""
    return str(setting.record.get("scope") or setting.record.get("path") or "")


def vendor_environments(all_settings: List[Setting]) -> set:
    """The environments that carry a vendor network profile (a variable that names it)."""
    table = tuning()
    found = set()
    for setting in all_settings:
        wanted = table.get("vendor_values", {}).get(setting.name)
        if setting.name.startswith(tuple(table.get("vendor_prefixes", []))) or (
                wanted and (setting.value or "").strip().lower() == wanted.lower()):
            found.add(environment(setting))
    return found


@check("GD411")
def nccl_tuning_forced(facts, rule):
    everything = settings(facts)
    vendor = vendor_environments(everything)
    findings = []
    for setting in everything:
        if not is_tuning_knob(setting.name) or setting.value is None or value_problems(setting.name, setting.value):
            continue  # an invalid value is GD402's
        if environment(setting) in vendor:
            continue  # part of a vendor's published profile
        default = (spec(setting.name) or {}).get("default") or "chosen by NCCL for each topology and size"
        topology = setting.name in tuning().get("topology", [])
        why = ("a topology cutoff NCCL otherwise reads from the machine: right only for the topology it was chosen "
               "for" if topology else "a value copied from a benchmark or another cluster usually costs bandwidth, "
               "and the next NCCL upgrade may make it wrong")
        findings.append(rule.finding(
            f"{setting.name}={setting.value}{setting.where} pins a choice NCCL makes per topology, message "
            f"size and NCCL version (default: {default}); NCCL documents it for debugging and experiments, not "
            f"production: {why}", severity=Severity.INFO if topology else None,
            location=setting.location, evidence=setting.evidence(default=default),
            fix=rule.fix(values={"variable": setting.name}, env=EnvChange(unset=(setting.name,)))))
    return unique_findings(findings)
