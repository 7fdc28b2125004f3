"""Peer-to-peer between a node's GPUs. GD412: PCIe GPUs whose P2P path hangs or corrupts data (IOMMU/VT-d
remapping, ACS on a PCIe switch, consumer GPUs without working P2P); GD405: `NCCL_P2P_DISABLE=1` where P2P works
(NVLink, or PCIe P2P NVML reports), or P2P left on where the driver breaks it."""

from __future__ import annotations

from typing import Optional

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.bench import measured
from gpudoctor.facts.devices import job_gpus
from gpudoctor.facts.log_evidence import cited, log_events
from gpudoctor.facts.nccl_settings import knowledge, location_of, meta, value_of
from gpudoctor.facts.nccl_values import c_strtoll
from gpudoctor.knowledge import version
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
        yield _first_collective_hangs(rule, hangs[0], channels, pcie)
        return
    corrupt = [row for row in result.get("rows", []) if row.get("wrong")] or result.get("out_of_bounds")
    if corrupt and pcie:
        yield rule.finding(
            "nccl-tests found wrong values between GPUs joined by PCIe alone: P2P transfers corrupt data (IOMMU/ACS "
            "remapping them, or a GPU without working P2P)",
            evidence={"out_of_bounds": result.get("out_of_bounds"), "pcie_only": pcie}, fix=_fix(rule))
        return
    bridged = _bridged_pairs(facts)
    if bridged and not hangs and not corrupt:
        yield from _what_to_check(facts, rule, bridged)
        return
    if not facts.get("logs", None):
        if not result:
            raise MissingFact("logs")
        measured(result)  # corruption is judged only on sizes the benchmark measured


def _first_collective_hangs(rule, hang: dict, channels: list, pcie):
    """The first collective timed out where NCCL set up P2P channels (an error) or the GPUs share only PCIe."""
    through = (f"NCCL set up P2P channels ({channels[0]['line']})" if channels
               else "the GPUs are joined by PCIe alone")
    return rule.finding(
        f"the first collective never completed ({hang['line']}) and {through}: a PCIe peer-to-peer path "
        "that hangs (IOMMU/VT-d remapping, ACS on a PCIe switch, a GPU without working P2P)",
        evidence={**cited(hang), "p2p_channel": channels[0] if channels else None, "pcie_only": pcie},
        fix=_fix(rule), severity=Severity.ERROR if channels else Severity.WARNING)


BRIDGES = ("PIX", "PXB", "PHB")  # one PCIe switch, several, the CPU's host bridge: where ACS and the IOMMU sit


def _bridged_pairs(facts) -> list:
    """`GPU0-GPU1 PXB` for each pair a pasted `nvidia-smi topo -m` joins through PCIe bridges (no NVLink)."""
    links = facts.get("nvml.topology.links", None) or {}
    return [f"GPU{a}-GPU{b} {cell}" for a, row in sorted(links.items()) if isinstance(row, dict)
            for b, cell in sorted(row.items()) if cell in BRIDGES and int(a) < int(b)]


def _what_to_check(facts, rule, bridged: list):
    """A pasted topology with GPUs behind PCIe bridges: where P2P is known to hang, what to check. A warning where the
    paste says the job hangs, information on the bare matrix."""
    said = facts.get("nvml.topology.stated_hang", None)
    pairs = ", ".join(bridged[:4]) + (f" and {len(bridged) - 4} more" if len(bridged) > 4 else "")
    if said:
        message = (f"the paste says the job hangs (\"{said}\") on GPUs joined through PCIe bridges ({pairs}): "
                   "peer-to-peer over PCIe is the usual cause there (the IOMMU remapping the GPUs' DMA, or ACS on a "
                   "PCIe switch sending it up to the root complex)")
    else:
        message = (f"GPUs joined through PCIe bridges ({pairs}): where NCCL or P2P hangs on such a machine, the "
                   "IOMMU or ACS on the PCIe switches is the usual cause")
    yield rule.finding(message, severity=Severity.WARNING if said else Severity.INFO,
                       evidence={"pairs": bridged, "stated_hang": said}, fix=rule.fix(case="topology"))


# --- GD405 nccl-p2p-disabled -------------------------------------------------------------------------------

def _p2p_broken(gpus: list, driver: Optional[str]) -> bool:
    needles = [n.lower() for n in knowledge().get("meta", {}).get("p2p_broken_gpus", [])]
    fixed = version(meta("p2p_fixed_driver"))
    have = version(driver)
    if not any(needle in (gpu.get("name") or "").lower() for gpu in gpus for needle in needles):
        return False
    return have is None or fixed is None or have < fixed


def _p2p_between(facts, gpus: list):
    """Whether every pair of the job's GPUs can read over P2P (per-GPU peers, else NVML's all-GPU answer)."""
    if not all("p2p_read_peers" in g for g in gpus):
        return facts.get("nvml.p2p_supported", None)
    indices = {g.get("index") for g in gpus}
    return all(indices - {g.get("index")} <= set(g["p2p_read_peers"]) for g in gpus)


@check("GD405")
def nccl_p2p_disabled(facts, rule):
    facts.get("nvml.gpus")  # unknown without NVML
    job = job_gpus(facts)
    gpus = job.devices
    if job.count() < 2:
        return []
    driver = facts.get("nvml.driver_version", None)
    facts.get("env.NCCL_P2P_DISABLE")  # both verdicts turn on it: unknown where a paste shows no environment
    value = value_of(facts, "NCCL_P2P_DISABLE")
    disabled = value is not None and c_strtoll(value)[0] == 1
    sources = facts.get("env_sources", {}) or {}
    location = location_of(sources.get("NCCL_P2P_DISABLE") or {})
    names = sorted({g.get("name", "?") for g in gpus})
    if _p2p_broken(gpus, driver):
        if disabled:
            return []
        return [rule.finding(
            f"{len(gpus)} x {', '.join(names)} with driver {driver or 'unknown'}: peer-to-peer is reported but broken "
            f"on these consumer cards before driver {meta('p2p_fixed_driver')} (NCCL hangs or returns wrong results); "
            "accelerate sets NCCL_P2P_DISABLE=1 itself there", location=location,
            evidence={"gpus": names, "driver": driver, "NCCL_P2P_DISABLE": value},
            fix=rule.fix(applicability="safe", case="p2p_broken", values={"driver": meta("p2p_fixed_driver")},
                         env=EnvChange(set={"NCCL_P2P_DISABLE": "1"})))]
    if not disabled:
        return []
    links = [int(g.get("nvlink_active_links") or 0) for g in gpus if "nvlink_active_links" in g]
    p2p = _p2p_between(facts, gpus)
    if any(links):
        how = f"NVLink ({max(links)} active links per GPU)"
    elif p2p is True:
        how = "PCIe peer-to-peer (NVML reports P2P read support between every pair)"
    elif p2p is False:
        return []
    else:
        raise MissingFact("nvml.p2p_supported")
    return [rule.finding(
        f"NCCL_P2P_DISABLE={value} on {len(gpus)} x {', '.join(names)} with {how}: intra-node traffic goes through "
        f"host memory instead, a large all-reduce bandwidth loss (NCCL lists it as a debugging variable){job.note()}",
        location=location, evidence={"gpus": names, "nvlink_active_links": links, "p2p_supported": p2p},
        fix=rule.fix(applicability="unsafe", env=EnvChange(unset=("NCCL_P2P_DISABLE",))))]
