"""GD507-GD509: how a run died, from its logs — a GPU Xid, a CUDA out-of-memory, a rank killed by SIGKILL.
Pure functions of `logs` facts (gpudoctor.ingest.logs) and rules/xid.toml; no log given: they pass."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from gpudoctor.checks import check
from gpudoctor.facts.devices import job_gpus
from gpudoctor.facts.log_evidence import cited, log_count, log_events
from gpudoctor.knowledge import table
from gpudoctor.model import Severity
from gpudoctor.units import gib
from gpudoctor.units import parse as parse_size


def xid_catalog() -> Dict[int, dict]:
    return {int(row["code"]): row for row in table("xid").get("xid", [])}


@check("GD507")
def gpu_xid(facts, rule):
    catalog = xid_catalog()
    seen: Dict[int, dict] = {}
    for event in log_events(facts, "xid"):
        seen.setdefault(event["xid"], event)
    for code, event in sorted(seen.items()):
        known = catalog.get(code)
        times = sum(1 for e in log_events(facts, "xid") if e["xid"] == code)
        if known:
            severity = Severity.parse(known["severity"])
            meaning = f"{known['name']} ({known['cause']}; NVIDIA's immediate action: {known['action']})"
        else:
            severity = Severity.WARNING
            meaning = "an Xid gpudoctor has no entry for"
        case = known.get("fix") if known else None  # rules/xid.toml names the fix case of each Xid it knows
        yield rule.finding(
            f"GPU at PCI {event.get('pci')} reported Xid {code}: {meaning}"
            f"{f' ({times} times)' if times > 1 else ''}",
            evidence={**cited(event), "xid": code, "pci": event.get("pci")}, severity=severity,
            fix=rule.fix(case=case if case in ("application", "informational", "contained", "memory", "nvlink",
                                               "bus", "reset") else "unknown_xid"))
    yield from _ecc_reported_to_cuda(facts, rule)


def _ecc_reported_to_cuda(facts, rule):
    """CUDA's own 'uncorrectable ECC error encountered' (the job's view of Xid 48/94/95), when no Xid says more."""
    if log_events(facts, "xid"):
        return
    for event in log_events(facts, "ecc_uncorrectable")[:1]:
        yield rule.finding(
            "CUDA reported an uncorrectable ECC error in GPU memory: a hardware fault, not the job (the node's kernel "
            f"log holds the Xid, 48, 94 or 95, that names the GPU): {event['line']}",
            evidence={**cited(event), "xid": None, "pci": None}, fix=rule.fix(case="memory"))


def _sizes(event: dict) -> str:
    parts = []
    if event.get("tried"):
        parts.append(f"tried to allocate {event['tried']}")
    if event.get("gpu") is not None:
        parts.append(f"GPU {event['gpu']}")
    if event.get("total"):
        parts.append(f"{event['total']} total")
    if event.get("free"):
        parts.append(f"{event['free']} free")
    return ", ".join(parts)


# The estimate's term → the fix case that cuts it (rules/catalog/GD508.toml `[docs.fixes]`).
_TERM_NAMES = {"weights": "the weights", "gradients": "the gradients", "optimizer": "the optimizer states",
               "activations": "the activations"}


def _estimate_terms(facts, event: dict) -> Optional[Tuple[str, str, dict]]:
    """With `--model`: (what the estimate says beside torch's sizes, the fix case, its values); None without."""
    if facts.get("model", None) is None:
        return None
    from gpudoctor.estimate import from_facts  # here: a run without --model never needs it (start-up time)

    est = from_facts(facts, job_gpus(facts).count())
    if est is None:
        return None
    terms = {name: value for name, value in est.breakdown().items() if name in _TERM_NAMES and value is not None}
    largest = max(terms, key=lambda name: terms[name])
    capacity = parse_size(event.get("total"))
    against = ""
    if capacity:
        against = (f", more than the {event['total']} torch reported" if est.total > capacity else
                   f", within the {event['total']} torch reported: what the estimate does not model filled it")
    text = (f"; gpudoctor's estimate for {est.assumptions['model']} ({est.setup_text()}): {est.terms_text()} per "
            f"GPU{against}; the largest term is {_TERM_NAMES[largest]} ({gib(terms[largest])})")
    case = "fits" if capacity and est.total <= capacity else largest
    values = {} if case == "fits" else {"size": gib(terms[largest])}
    return text, case, {"values": values, "breakdown": est.breakdown(), "total_bytes_per_gpu": est.total}


@check("GD508")
def gpu_out_of_memory(facts, rule):
    events = log_events(facts, "cuda_oom")
    if not events:
        return
    event = next((e for e in events if e.get("tried")), events[0])
    sizes = _sizes(event)
    where = "inside NCCL (its buffers could not be allocated)" if event.get("source") == "nccl" else "in torch"
    times = log_count(facts, "cuda_oom")
    estimated = _estimate_terms(facts, event)
    text, case, extra = estimated if estimated else ("", "fits", {})
    evidence = {**cited(event), "tried": event.get("tried"), "total": event.get("total"),
                "free": event.get("free")}
    if extra:
        evidence.update(estimate=extra["breakdown"], estimate_total_bytes=extra["total_bytes_per_gpu"])
    yield rule.finding(
        f"the GPU ran out of memory {where}{f' ({sizes})' if sizes else ''}"
        f"{f', {times} times' if times > 1 else ''}{text}",
        evidence=evidence, fix=rule.fix(case=case if case in ("weights", "gradients", "optimizer", "activations")
                                         else "fits", values=extra["values"]) if estimated else rule.fix())


def _offloading(facts) -> bool:
    """Whether a given DeepSpeed config offloads to the CPU (`--ds-config`)."""
    given = facts.get("ds_config", None) or []
    for item in given if isinstance(given, list) else [given]:
        config = item.get("config") if isinstance(item, dict) else None
        zero = config.get("zero_optimization") if isinstance(config, dict) else None
        if isinstance(zero, dict) and any(isinstance(zero.get(key), dict) and zero[key].get("device") in
                                          ("cpu", "nvme") for key in ("offload_optimizer", "offload_param")):
            return True
    return False


def _oom_proof(event: dict) -> str:
    """What one piece of memory evidence says, in words (the `source` the log reader gave it, or what the atlas
    message that recorded it proves)."""
    if event.get("message") and event.get("proves"):
        return event["proves"]
    source = event.get("source", "kernel")
    victim = (f"process {event['process']}" + (f" (pid {event['pid']}" if event.get("pid") else "")
              + (f", {gib(event['rss_kib'] * 1024)} resident" if event.get("rss_kib") else "")
              + (")" if event.get("pid") else "")) if event.get("process") else "a process of the job"
    if source == "slurm":
        who = (f"SLURM detected {event.get('count', 1)} oom-kill event(s) in step {event['step']}" if event.get("step")
               else f"srun reports task {event.get('task')} on {event.get('host')} out of memory")
        return f"{who}: the step used more memory than the job was given (--mem, --mem-per-cpu, --mem-per-gpu)"
    if source in ("kubernetes", "docker"):
        return f"{source.capitalize()} reports the container OOMKilled: it used more memory than its limit"
    if source == "cgroup":
        return (f"the job's memory cgroup counts {event['count']} OOM kill(s) (memory.events oom_kill): it used more "
                "memory than its limit" if event.get("count") else f"the kernel's OOM killer ended {victim} at its "
                "memory cgroup's limit (a container's or the job's, not the whole host's)")
    return f"the kernel's OOM killer ended {victim}: the host ran out of memory"


@check("GD509")
def host_oom_killed(facts, rule):
    proof = log_events(facts, "oom_killer")
    kills = log_events(facts, "sigkill")
    offload = (" With CPU offload the optimizer states live in host RAM: GD504 estimates what the job needs."
               if _offloading(facts) else "")
    if proof:
        event = max(proof, key=lambda e: (bool(e.get("rss_kib")), bool(e.get("pid")), bool(e.get("process"))))
        sources = sorted({e.get("source", "kernel") for e in proof} - {event.get("source", "kernel")})
        yield rule.finding(
            _oom_proof(event) + (f" (the log also holds {' and '.join(sources)} evidence)" if sources else "")
            + (f"; {len(kills)} rank(s) died with SIGKILL" if kills else "") + "." + offload,
            evidence={**cited(event), "source": event.get("source", "kernel"), "killed": len(kills)},
            fix=rule.fix())
        return
    if kills:
        event = kills[0]
        yield rule.finding(
            "a rank was killed by signal 9 (SIGKILL); the log does not say by whom: the host's OOM killer, a "
            "scheduler limit (memory or time), or the launcher stopping ranks after another one failed." + offload,
            evidence=cited(event), severity=Severity.WARNING, fix=rule.fix(case="sigkill"))
