"""GD501/GD504: will the training footprint fit the GPUs and, with offload, the host? (gpudoctor.estimate)"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from gpudoctor.checks import check
from gpudoctor.facts.devices import job_gpus
from gpudoctor.knowledge import gpu_memory_bytes
from gpudoctor.model import Severity
from gpudoctor.units import gib


def _params_text(params: int) -> str:
    return f"{params / 1e9:.2f}B" if params >= 1e9 else f"{params / 1e6:.0f}M"


@check("GD501")
def gpu_memory_insufficient(facts, rule):
    if facts.get("model", None) is None:
        return  # no --model: nothing to estimate
    from gpudoctor.estimate import HEADROOM_WARNING, estimate, setup_from_facts  # here: a run without --model
    from gpudoctor.remedies import remedies, summary  # never needs them (start-up time of every check)

    job = job_gpus(facts)
    gpus = job.devices
    setup = setup_from_facts(facts, job.count())
    if setup is None or not gpus:
        return
    est = estimate(*setup)
    groups: Dict[Tuple[str, int], List[Optional[int]]] = {}  # (name, memory) -> the GPUs' indices
    for gpu in gpus:
        memory = gpu_memory_bytes(gpu)
        if memory:
            groups.setdefault((gpu.get("name") or "GPU", memory), []).append(gpu.get("index"))
    for (name, memory), indices in groups.items():
        headroom = memory - est.total
        if headroom >= HEADROOM_WARNING * memory:
            continue
        severity: Optional[Severity] = Severity.ERROR if headroom < 0 else Severity.WARNING
        which = "GPU " + ",".join(str(i) for i in indices if i is not None) if any(
            i is not None for i in indices) else "the GPU"
        verdict = (f"exceeds {which} ({name}, {gib(memory)}) by {gib(-headroom)}" if headroom < 0 else
                   f"leaves only {gib(headroom)} ({headroom / memory:.0%}) free on {which} ({name}, {gib(memory)})")
        caveat = "" if est.activations_known else " (give the model's config.json to count activations)"
        plan = remedies(setup[0], setup[1], memory)
        yield rule.finding(
            f"training {est.assumptions['model']} ({_params_text(est.params)} params; {est.setup_text()}) needs "
            f"≈ {gib(est.total)} per GPU, which {verdict}: {est.terms_text()}{caveat}{job.note()}",
            severity=severity,
            evidence={"total_bytes_per_gpu": est.total, "breakdown": est.breakdown(), "gpu": name,
                      "memory_bytes": memory, "headroom_bytes": headroom, "mapping": job.basis,
                      "assumptions": {k: v for k, v in est.assumptions.items()
                                      if k not in ("notes", "formulas", "sources")}, "remedies": plan},
            fix=rule.fix(case="remedies", values={"remedies": summary(plan)}) if summary(plan) else rule.fix())


@check("GD504")
def host_memory_insufficient(facts, rule):
    if facts.get("model", None) is None:
        return
    from gpudoctor.estimate import from_facts  # here: as in GD501

    est = from_facts(facts, job_gpus(facts).count())
    if est is None or not est.offload:
        return
    available = facts.get("host.ram_available_bytes")
    total = facts.get("host.ram_total_bytes", None)
    if available is None:
        available = total
    if available is None or est.host_bytes <= available:
        return
    a = est.assumptions
    of_total = f" of {gib(total)}" if total else ""
    yield rule.finding(
        f"ZeRO-{a['zero_stage']} CPU offload of {est.assumptions['model']} ({_params_text(est.params)} params, "
        f"{a['gpus_per_node']} GPU(s) per node) needs ≈ {gib(est.host_bytes)} host RAM (DeepSpeed's estimator, "
        f"× {a['host_buffer_factor']} buffer) but {gib(available)} is available{of_total}: the job is killed by "
        "the OOM killer (exit code -9) while DeepSpeed builds the CPU optimizer",
        evidence={"host_bytes": est.host_bytes, "ram_available_bytes": available, "ram_total_bytes": total,
                  "offload": a["offload"], "zero_stage": a["zero_stage"], "gpus_per_node": a["gpus_per_node"]},
        fix=rule.fix())
