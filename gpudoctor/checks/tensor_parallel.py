"""GD408: Megatron/NeMo tensor parallelism (`requests.tensor_parallel`, the script's frameworks) without
`CUDA_DEVICE_MAX_CONNECTIONS=1`, and FSDP with it. Knowledge: rules/nccl_env.toml."""

from __future__ import annotations

from typing import List, Optional, Tuple

from gpudoctor.checks import check
from gpudoctor.facts.nccl_settings import knowledge, location_of, value_of
from gpudoctor.facts.nccl_values import c_strtoll
from gpudoctor.model import EnvChange, Location, Severity

# --- GD408 cuda-device-max-connections -----------------------------------------------------------------

TP_FRAMEWORKS = {"megatron", "nemo", "nemo_run", "transformer_engine"}


def tensor_parallel_evidence(facts) -> List[dict]:
    evidence = []
    for entry in facts.get("requests.tensor_parallel", None) or []:
        if not isinstance(entry, dict):
            continue
        size = entry.get("size")
        frameworks = set(entry.get("frameworks") or [])
        if isinstance(size, int) and size > 1 and frameworks & TP_FRAMEWORKS:
            evidence.append(entry)
    env = facts.get("env", {})
    sources = facts.get("env_sources", {}) or {}
    for name in knowledge().get("tensor_parallel", {}).get("env", []):
        number, whole = c_strtoll(str(env.get(name, "")))
        if whole and number and number > 1:
            record = sources.get(name) or {}
            evidence.append({"source": record.get("path", "environment"), "line": record.get("line"),
                             "what": f"{name}={env[name]}", "size": number, "frameworks": ["megatron"]})
    return evidence


FSDP_INITS = {"FullyShardedDataParallel", "fully_shard"}
FSDP_FLAGS = ("--use-torch-fsdp2", "--use-megatron-fsdp")


def data_parallel_evidence(facts) -> Tuple[Optional[str], bool]:
    """Where the job is data-parallel without tensor parallelism, and whether it is FSDP: a script's FSDP wrap or
    fully_shard, Megatron-LM's FSDP flags, or DistributedDataParallel in a script that imports no Megatron, NeMo or
    Transformer Engine (nothing there can be tensor-parallel)."""
    ddp = None
    for script in facts.get("scripts", None) or []:
        plain = not set((script or {}).get("frameworks") or []) & TP_FRAMEWORKS
        for init in ((script or {}).get("launch") or {}).get("init") or []:
            where = f"{script.get('path')}:{init.get('line')} `{init.get('what')}`"
            if init.get("kind") in FSDP_INITS:
                return where, True
            if init.get("kind") == "DistributedDataParallel" and plain and ddp is None:
                ddp = where
    for job in (facts.get("launch", None) or {}).get("jobs") or []:
        words = str(job.get("command", "")).split()
        if any(word in FSDP_FLAGS for word in words):
            return f"{job.get('path')}:{job.get('line')} `{next(w for w in words if w in FSDP_FLAGS)}`", True
    return ddp, False


def _fsdp_with_one_connection(facts, rule):
    """GD408's mirror: CUDA_DEVICE_MAX_CONNECTIONS=1 where nothing is tensor-parallel and FSDP shards the model."""
    value = value_of(facts, "CUDA_DEVICE_MAX_CONNECTIONS")
    where, fsdp = data_parallel_evidence(facts) if value is not None and value.strip() == "1" else (None, False)
    if not where:
        return []
    record = (facts.get("env_sources", {}) or {}).get("CUDA_DEVICE_MAX_CONNECTIONS") or {}
    how = ("FSDP shards the model" if fsdp else "the job is plain DistributedDataParallel")
    cost = ("the all-gathers and reduce-scatters can no longer overlap compute, and Megatron-LM refuses it (\"FSDP "
            "always requires CUDA_DEVICE_MAX_CONNECTIONS value large than one\")" if fsdp else
            "DDP's gradient all-reduce queues behind the backward kernels instead of overlapping them")
    return [rule.finding(
        f"CUDA_DEVICE_MAX_CONNECTIONS=1 without tensor or context parallelism: {how} ({where}). Only Megatron-LM's "
        "tensor/context parallelism needs 1 (megatron/training/arguments.py asserts it only when "
        "tensor_model_parallel_size or context_parallel_size > 1); with one hardware queue " + cost,
        severity=Severity.WARNING if fsdp else Severity.INFO,
        location=location_of(record), evidence={"CUDA_DEVICE_MAX_CONNECTIONS": value, "fsdp": where},
        fix=rule.fix(case="fsdp", applicability="unsafe", env=EnvChange(unset=("CUDA_DEVICE_MAX_CONNECTIONS",))))]


@check("GD408")
def cuda_device_max_connections(facts, rule):
    facts.get("env")
    evidence = tensor_parallel_evidence(facts)
    if not evidence:
        return _fsdp_with_one_connection(facts, rule)
    value = value_of(facts, "CUDA_DEVICE_MAX_CONNECTIONS")
    record = (facts.get("env_sources", {}) or {}).get("CUDA_DEVICE_MAX_CONNECTIONS") or {}
    if value is None and record.get("unresolved") and not record.get("unset"):
        return []  # set to something known only at run time
    if value is not None and value.strip() == "1":
        return []
    first = evidence[0]
    where = f"{first.get('source')}:{first.get('line')}" if first.get("line") else str(first.get("source"))
    frameworks = ", ".join(sorted(set(first.get("frameworks") or []) & TP_FRAMEWORKS)) or "Megatron"
    state = f"is {value}" if value is not None else "is not set"
    location = location_of(record) if value is not None else (
        Location(str(first["source"]), first.get("line")) if first.get("source") else None)
    if "megatron" in (first.get("frameworks") or []):
        why = ("Megatron-LM refuses to start (\"Using tensor model parallelism ... require setting the environment "
               "variable CUDA_DEVICE_MAX_CONNECTIONS to 1\") and communication no longer overlaps the GEMMs")
    else:
        why = ("the tensor-parallel communication kernels no longer overlap the GEMMs (NeMo's performance recipes "
               "set it to 1; Megatron-LM's own scripts refuse to start without it)")
    return [rule.finding(
        f"tensor parallelism ({first.get('what')} at {where}, {frameworks}) but CUDA_DEVICE_MAX_CONNECTIONS {state}: "
        + why,
        location=location, evidence={"tensor_parallel": evidence[:5], "CUDA_DEVICE_MAX_CONNECTIONS": value},
        fix=rule.fix(applicability="safe", env=EnvChange(set={"CUDA_DEVICE_MAX_CONNECTIONS": "1"})))]
