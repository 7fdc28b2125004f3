"""A preflight's result: from the findings, the bad nodes (each with its reasons), the slow links, and what to do."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional

from gpudoctor.model import FleetReport, PreflightReport, Report, Severity

FLEET_RULES_NAMING_VALUES = ("GD801", "GD802", "GD803", "GD804")  # evidence.nodes: {value: [nodes]}
FIGURES = ("metric", "value", "median", "floor", "busbw_gbps", "wrong", "gpus", "ranks", "variable", "fact")


def odd_nodes(finding) -> List[str]:
    """The nodes a fleet finding sets apart: those outside the largest group of one value (every node where no
    group is the largest); a node that failed what the others passed (GD805)."""
    groups = finding.evidence.get("nodes")
    if finding.rule == "GD805" and isinstance(groups, dict):
        return list(groups.get("fails") or [])
    if finding.rule not in FLEET_RULES_NAMING_VALUES or not isinstance(groups, dict):
        return []
    sizes = sorted((len(names) for names in groups.values()), reverse=True)
    values = list(groups.values())
    if len(sizes) >= 2 and sizes[0] > sizes[1]:
        return [name for names in values[1:] for name in names]  # the largest group first (checks/fleet.py)
    return [name for names in values for name in names]


def bad_nodes(facts: Mapping, verdicts: Report, fleet: Optional[FleetReport]) -> List[dict]:
    """Every node an error finding names: `{node, host, node_rank, reasons: [{rule, message, …figures}]}`."""
    nodes: Dict[str, dict] = {}
    by_label = {node["node"]: node for node in facts.get("nodes") or []}

    def blame(label: str, finding) -> None:
        known = by_label.get(label) or {}
        entry = nodes.setdefault(label, {"node": label, "host": known.get("host"), "node_rank": known.get("node_rank"),
                                         "reasons": []})
        entry["reasons"].append({"rule": finding.rule, "message": finding.message,
                                 **{key: value for key, value in finding.evidence.items() if key in FIGURES}})

    errors = lambda findings: [f for f in findings if f.severity >= Severity.ERROR]  # noqa: E731
    if fleet:
        for label, report in fleet.nodes:
            for finding in errors(report.findings):
                blame(label, finding)
        for finding in errors(fleet.cross.findings):
            for label in odd_nodes(finding):
                blame(label, finding)
    for finding in errors(verdicts.findings):
        for label in finding.evidence.get("nodes") or []:
            blame(label, finding)
    return list(nodes.values())


def slow_links(verdicts: Report) -> List[list]:
    """Pairs of nodes named as a slow link (both nodes fast with others)."""
    return [pair for f in verdicts.findings if not f.evidence.get("nodes") for pair in f.evidence.get("pairs") or []]


def next_steps(bad: List[dict], links: List[list], environ: Mapping[str, str]) -> List[str]:
    """What to do now: the job again without the bad nodes, and the drain command for an administrator (printed,
    never run), in the scheduler's own words (SLURM, Kubernetes, or the hosts given to the launcher)."""
    hosts = sorted({entry["host"] for entry in bad if entry.get("host")})
    unnamed = [entry["node"] for entry in bad if not entry.get("host")]
    steps = []
    listed = ",".join(hosts)
    rules = ",".join(sorted({reason["rule"] for entry in bad for reason in entry["reasons"]}))
    if environ.get("SLURM_JOB_ID") and hosts:
        steps.append(f"run the job without them: sbatch --exclude={listed} …")
        steps.append(f"for an administrator: scontrol update nodename={listed} state=drain "
                     f"reason=\"gpudoctor preflight: {rules}\"")
    elif environ.get("KUBERNETES_SERVICE_HOST") and hosts:
        steps.append(f"keep the job off them: a node affinity `kubernetes.io/hostname NotIn [{', '.join(hosts)}]`")
        steps.append(f"for an administrator: kubectl taint nodes {' '.join(hosts)} "
                     "gpudoctor.io/preflight=bad:NoSchedule")
    elif hosts:
        named = [entry["node"] for entry in bad if entry.get("host")]
        steps.append(f"start the job without {', '.join(named)} (the hosts and node ranks you give the launcher)")
    if unnamed:
        steps.append(f"{', '.join(unnamed)}: no rank of it arrived, so its host is not known here; the launcher's "
                     "log on that node says where it stopped")
    for pair in links:
        steps.append(f"check the link between {pair[0]} and {pair[1]} (ports, cables, the switch between them)")
    return steps


def build(*, facts: dict, verdicts: Report, fleet: Optional[FleetReport], environ: Mapping[str, str],
          **fields) -> PreflightReport:
    bad = bad_nodes(facts, verdicts, fleet)
    links = slow_links(verdicts)
    return PreflightReport(facts=facts, verdicts=verdicts, fleet=fleet, bad_nodes=tuple(bad),
                           slow_links=tuple(links), next_steps=tuple(next_steps(bad, links, environ)), **fields)
