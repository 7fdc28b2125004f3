"""GD411: NCCL performance knobs pinned in a job (rules/nccl_env.toml `[tuning]`), unless a vendor's network profile
set up in the same environment publishes that knob with that value (rules/nccl_env.toml [[tuning.vendor]]). GD436:
InfiniBand-minded settings (`NCCL_IB_DISABLE=0`, `NCCL_CROSS_NIC`) beside AWS EFA, which NCCL reaches through the
aws-ofi-nccl plugin, not its verbs transport. GD437: an `NCCL_TOPO_FILE` a job file sets that NCCL cannot load, that
describes another machine, or that keeps aws-ofi-nccl from giving NCCL its own (facts `topology_files`)."""

from __future__ import annotations

from typing import Dict, List, Optional

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.jobs import gpus_of, jobs, pod_gpus, pods
from gpudoctor.facts.nccl_settings import Setting, is_tuning_knob, settings, spec, tuning, unique_findings
from gpudoctor.facts.nccl_values import value_problems
from gpudoctor.model import EnvChange, Severity


def environment(setting: Setting) -> str:
    """Which environment an assignment belongs to: its scope (a container, one script, the --env-file files
    together); "" for the environment this process or a recording has."""
    return str(setting.record.get("scope") or setting.record.get("path") or "")


def vendor_profiles(all_settings: List[Setting]) -> Dict[str, List[dict]]:
    """Each environment's vendor network profiles (rules/nccl_env.toml [[tuning.vendor]]), by their markers."""
    found: Dict[str, List[dict]] = {}
    for setting in all_settings:
        for vendor in tuning().get("vendor", []):
            wanted = (vendor.get("values") or {}).get(setting.name)
            if setting.name.startswith(tuple(vendor.get("prefixes", []))) or (
                    wanted and (setting.value or "").strip().lower() == wanted.lower()):
                profiles = found.setdefault(environment(setting), [])
                if vendor not in profiles:
                    profiles.append(vendor)
    return found


def published_by(setting: Setting, profiles: List[dict]) -> Optional[dict]:
    """The profile that publishes this knob with this value (the vendor's own setting), else None."""
    for vendor in profiles:
        values = (vendor.get("knobs") or {}).get(setting.name)
        if values and ("*" in values or (setting.value or "").strip().lower() in [v.lower() for v in values]):
            return vendor
    return None


@check("GD411")
def nccl_tuning_forced(facts, rule):
    everything = settings(facts)
    vendors = vendor_profiles(everything)
    findings = []
    for setting in everything:
        if not is_tuning_knob(setting.name) or setting.value is None or value_problems(setting.name, setting.value):
            continue  # an invalid value is GD402's
        profiles = vendors.get(environment(setting), [])
        if published_by(setting, profiles):
            continue  # the vendor's published setting for its network
        default = (spec(setting.name) or {}).get("default") or "chosen by NCCL for each topology and size"
        topology = setting.name in tuning().get("topology", [])
        why = ("a topology cutoff NCCL otherwise reads from the machine: right only for the topology it was chosen "
               "for" if topology else "a value copied from a benchmark or another cluster usually costs bandwidth, "
               "and the next NCCL upgrade may make it wrong")
        beside = (f" ({' and '.join(v['name'] for v in profiles)} is set up here, but its published settings do not "
                  "pin this one)" if profiles else "")
        findings.append(rule.finding(
            f"{setting.name}={setting.value}{setting.where} pins a choice NCCL makes per topology, message "
            f"size and NCCL version (default: {default}); NCCL documents it for debugging and experiments, not "
            f"production: {why}{beside}", severity=Severity.INFO if topology else None,
            location=setting.location, evidence=setting.evidence(default=default),
            fix=rule.fix(values={"variable": setting.name}, env=EnvChange(unset=(setting.name,)))))
    return unique_findings(findings)


# --- GD436 nccl-ib-settings-beside-efa ----------------------------------------------------------------------

EFA = "AWS EFA"  # the vendor profile (rules/nccl_env.toml [[tuning.vendor]]) whose markers say EFA is set up
BESIDE_EFA = {  # variable -> (the values it is said for, what it does where NCCL reaches EFA through aws-ofi-nccl)
    "NCCL_IB_DISABLE": (("0",), "it only keeps NCCL's built-in InfiniBand/RoCE verbs transport (NET/IB) on, which "
                        "is already NCCL's default; it does not turn EFA on: NCCL reaches EFA through the "
                        "aws-ofi-nccl net plugin (NET/Libfabric or NET/OFI in NCCL's INFO log), never through "
                        "NET/IB, and whether EFA is used depends on that plugin being found (NCCL_NET_PLUGIN, "
                        "LD_LIBRARY_PATH), not on this variable"),
    "NCCL_CROSS_NIC": (("0", "1"), "it tells NCCL's ring/tree search whether traffic may enter a node through one "
                       "network device and leave through another (0: never, for rail-optimised InfiniBand "
                       "fabrics whose per-rail switches are slow to cross; 1: freely; 2, the default: only where "
                       "that is faster); over EFA the devices are the ones aws-ofi-nccl exposes (one per GPU-local "
                       "group of EFA NICs, placed by the topology the plugin gives NCCL), and AWS's EFA settings "
                       "(aws-ofi-nccl's EFA cheat sheet and its per-instance defaults) leave it at NCCL's default, "
                       "so a value copied from an InfiniBand cluster only narrows NCCL's choice"),
}


@check("GD436")
def nccl_ib_settings_beside_efa(facts, rule):
    everything = settings(facts)
    vendors = vendor_profiles(everything)
    findings = []
    for setting in everything:
        values, what = BESIDE_EFA.get(setting.name, ((), ""))
        if (setting.value or "").strip() not in values or setting.conditional:
            continue
        if not any(vendor["name"] == EFA for vendor in vendors.get(environment(setting), [])):
            continue
        findings.append(rule.finding(
            f"{setting.name}={setting.value}{setting.where} is set beside AWS EFA (FI_PROVIDER=efa, FI_EFA_* or "
            f"OFI_NCCL_* in the same environment), which is not InfiniBand verbs to NCCL: {what}",
            location=setting.location, evidence=setting.evidence(),
            fix=rule.fix(values={"variable": setting.name}, env=EnvChange(unset=(setting.name,)))))
    return unique_findings(findings)


# --- GD437 nccl-topo-file-unfit ------------------------------------------------------------------------------

def _node_gpus(facts, path: Optional[str]) -> Optional[int]:
    """The GPUs each node of the file's jobs gets, where the file's jobs and pods all say one count."""
    counts = {gpus_of(job) for job in jobs(facts) if job.get("path") == path}
    counts |= {pod_gpus(pod) for pod in pods(facts) if pod.get("path") == path}
    counts.discard(None)
    return counts.pop() if len(counts) == 1 and isinstance(next(iter(counts)), int) else None


def _topology_problem(entry: dict, gpus: Optional[int]) -> Optional[tuple]:
    """(severity, what is wrong) for one topology file read, None when nothing is."""
    if entry.get("error"):
        return (Severity.ERROR if entry.get("fatal") else Severity.WARNING), entry["error"]
    described = entry.get("gpus")
    if gpus is not None and described and described != gpus:
        return Severity.WARNING, (f"it describes {described} GPU(s) and {entry.get('nics')} NIC(s), but the job gives "
                                  f"each node {gpus} GPU(s): it was written for another machine, and NCCL builds its "
                                  "rings and trees on the PCI tree it states, not the one these nodes have")
    return None


@check("GD437")
def nccl_topo_file_unfit(facts, rule):
    read = {(entry.get("path"), entry.get("line")): entry for entry in facts.get("topology_files", None) or []}
    everything = settings(facts)
    efa = {env for env, found in vendor_profiles(everything).items() if any(v["name"] == EFA for v in found)}
    undecided, findings = [], []
    for setting in everything:
        if setting.name != "NCCL_TOPO_FILE" or setting.value is None:
            continue
        entry = read.get((setting.record.get("path"), setting.record.get("line")))
        if environment(setting) in efa and "aws-ofi-nccl" not in setting.value:
            findings.append(rule.finding(
                f"NCCL_TOPO_FILE={setting.value}{setting.where} is set beside AWS EFA: aws-ofi-nccl gives NCCL its "
                "own topology of the instance (its GPUs and their EFA NIC groups) only when NCCL_TOPO_FILE is unset; "
                f"with it set the plugin uses none of its own (\"NCCL_TOPO_FILE environment variable is already set "
                f"to {setting.value}\" in NCCL's INFO log)", severity=Severity.INFO, location=setting.location,
                evidence=setting.evidence(), fix=rule.fix(case="efa", values={"variable": setting.name},
                                                          env=EnvChange(unset=(setting.name,)))))
        if entry is None or entry.get("read") is None:
            undecided.append(f"{setting.name}={setting.value}{setting.where}: the file is not among the job's files")
            continue
        problem = _topology_problem(entry, _node_gpus(facts, setting.record.get("path")))
        if problem is not None:
            severity, what = problem
            findings.append(rule.finding(
                f"NCCL_TOPO_FILE={setting.value}{setting.where} points at {entry['read']}, and {what}",
                severity=severity, location=setting.location,
                evidence=setting.evidence(file=entry["read"], gpus=entry.get("gpus"), nics=entry.get("nics"),
                                          version=entry.get("version")),
                fix=rule.fix()))
    if undecided and not findings:
        raise MissingFact("topology_files", "; ".join(undecided[:3]))
    return unique_findings(findings)
