"""GD412: PCIe GPUs whose peer-to-peer path hangs or corrupts data (IOMMU/VT-d remapping, ACS on a PCIe switch,
consumer GPUs without working P2P)."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.bench import measured
from gpudoctor.facts.log_evidence import cited, log_events
from gpudoctor.model import EnvChange, Severity

FIRST_COLLECTIVES = 2  # torch numbers collectives from 1: SeqNum 1 or 2 timing out never completed one


def _p2p_channels(facts) -> list:
    """`{"where", "line"}` of NCCL's `… via P2P/IPC` channel lines, one per host that printed one."""
    hosts = facts.get("logs.hosts", None) or {}
    return [entry["p2p_at"] for entry in hosts.values() if isinstance(entry, dict) and entry.get("p2p_at")]


def _pcie_only(facts):
    """True: GPUs joined by PCIe alone (a pasted topo -m, or NVML's NVLink counts); None: unknown."""
    stated = facts.get("nvml.topology.pcie_only", None)
    if stated is not None:
        return stated
    gpus = facts.get("nvml.gpus", None) or []
    links = [g.get("nvlink_active_links") for g in gpus if isinstance(g, dict)]
    if len(gpus) > 1 and links and all(isinstance(n, int) for n in links):
        return all(n == 0 for n in links)
    return None


def _fix(rule):
    return rule.fix(applicability="unsafe", env=EnvChange(set={"NCCL_P2P_DISABLE": "1"}))


@check("GD412")
def pcie_p2p_broken(facts, rule):
    result = facts.get("bench.nccl", None) or {}
    hangs = [e for e in log_events(facts, "watchdog_timeout") if (e.get("seq") or 0) <= FIRST_COLLECTIVES]
    channels = _p2p_channels(facts)
    pcie = _pcie_only(facts)
    if facts.env("NCCL_P2P_DISABLE") == "1":
        return  # P2P is off: whatever hangs, it is not the P2P path (GD405 judges the setting)
    if hangs and (channels or pcie):
        through = (f"NCCL set up P2P channels ({channels[0]['line']})" if channels
                   else "the GPUs are joined by PCIe alone")
        yield rule.finding(
            f"the first collective never completed ({hangs[0]['line']}) and {through}: a PCIe peer-to-peer path "
            "that hangs (IOMMU/VT-d remapping, ACS on a PCIe switch, a GPU without working P2P)",
            evidence={**cited(hangs[0]), "p2p_channel": channels[0] if channels else None, "pcie_only": pcie},
            fix=_fix(rule), severity=Severity.ERROR if channels else Severity.WARNING)
        return
    corrupt = [row for row in result.get("rows", []) if row.get("wrong")] or result.get("out_of_bounds")
    if corrupt and pcie:
        yield rule.finding(
            "nccl-tests found wrong values between GPUs joined by PCIe alone: P2P transfers corrupt data (IOMMU/ACS "
            "remapping them, or a GPU without working P2P)",
            evidence={"out_of_bounds": result.get("out_of_bounds"), "pcie_only": pcie}, fix=_fix(rule))
        return
    if not facts.get("logs", None):
        if not result:
            raise MissingFact("logs")
        measured(result)  # corruption is judged only on sizes the benchmark measured
