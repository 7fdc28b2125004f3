"""Will the model fit: the training-memory estimate against named GPUs or this machine's (`gpudoctor estimate`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from gpudoctor.errors import InputError
from gpudoctor.estimate import Estimate, estimate, load_model, model_fact, setup_from_facts
from gpudoctor.remedies import remedies
from gpudoctor.units import GiB, gib
from gpudoctor.units import parse as parse_size


def named_gpu(name: str) -> dict:
    """`--gpu`: a GPU as people write it ("A100 40GB", "4090") looked up in rules/gpus.toml, or a memory size."""
    from gpudoctor.knowledge import AmbiguousGpu, gpu_by_user_name, table_memory_bytes

    size = parse_size(name)
    if size:
        return {"name": name.strip(), "memory_total_bytes": size}
    try:
        spec = gpu_by_user_name(name)
    except AmbiguousGpu as exc:
        raise InputError(f"--gpu {name!r} fits GPUs of different memory ({exc}); add the memory or the form "
                         f"factor, e.g. --gpu \"{name.strip()} 80GB\"") from None
    if spec is None or not spec.get("memory_gib"):
        why = ("gpudoctor does not know its memory" if spec
               else "not a GPU gpudoctor knows (`gpudoctor estimate --help`)")
        raise InputError(f"--gpu {name!r}: {why}; give the memory instead, e.g. --gpu 24GB")
    memory = table_memory_bytes(spec)
    if spec.get("memory_reported_mib"):
        said = (f"{gib(memory)} as the device reports it ({spec['memory_gib']} GB marketed)"
                if gib(memory) != gib(int(float(spec["memory_gib"]) * GiB))
                else f"{gib(memory)} as the device reports it")
    else:
        said = f"{spec['memory_gib']} GB as marketed (the device reports a little less; not read for this model)"
    return {"name": spec["name"], "memory_total_bytes": memory, "memory_said": said}


def local_gpus() -> List[dict]:
    """This machine's GPUs through the NVML probe ([] without a driver); CUDA_VISIBLE_DEVICES applies."""
    import os

    from gpudoctor.facts import Facts
    from gpudoctor.facts.devices import job_gpus
    from gpudoctor.gather import Request, gather

    nvml = gather(Request(groups=frozenset({"nvml"}), timeout=10.0)).facts.get("nvml") or {}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    return job_gpus(Facts({"nvml": nvml, "env": env})).devices


def ds_config_fact(name: str) -> dict:
    """The DeepSpeed config as a fact, read as `check --ds-config` reads it; InputError when it cannot be read or is
    not a DeepSpeed config."""
    from gpudoctor.files import read_input
    from gpudoctor.readers.registry import read_file
    from gpudoctor.snapshot import Snapshot

    read = Snapshot(facts={})
    read_file(Path(name), read, part="ds_config", text=read_input(name, "DeepSpeed config"), as_format="ds_config")
    fact = read.facts["ds_config"]
    if fact["config"] is None:
        error = fact["error"] or {}
        line = f" (line {error['line']})" if error.get("line") else ""
        raise InputError(f"{name!r} is not a DeepSpeed config: {error.get('message', 'unreadable')}{line}")
    return fact


def fit(model: str, training: Mapping[str, Any], ds_config: Optional[str] = None,
        gpu: Optional[str] = None) -> Tuple[Estimate, List[Tuple[str, Optional[int]]]]:
    """The estimate for `model` with the training settings (and DeepSpeed config), and the GPUs to compare it with:
    the one named by `gpu`, else this machine's."""
    from gpudoctor.facts import Facts
    from gpudoctor.knowledge import gpu_memory_bytes

    facts: Dict[str, Any] = {"model": model_fact(load_model(model), training), "env": {}}
    if ds_config:
        facts["ds_config"] = ds_config_fact(ds_config)
    if gpu:
        gpus, local = [named_gpu(gpu)], 0
    else:
        gpus = local_gpus()
        local = len(gpus)
    setup = setup_from_facts(Facts(facts), local)
    assert setup is not None
    est = estimate(*setup)
    memories = [gpu_memory_bytes(g) for g in gpus]
    known = [memory for memory in memories if memory]
    if known:
        est = replace(est, remedies=remedies(setup[0], setup[1], min(known)))
    said = f", {gpus[0]['memory_said']}" if gpu and gpus[0].get("memory_said") else ""
    est.assumptions["gpus_from"] = (f"--gpu \"{gpu}\" is {gpus[0]['name']}{said}" if gpu else
                                    "NVML (this machine)" if gpus else "none: no GPU found")
    return est, [(str(g.get("name") or "GPU"), memory) for g, memory in zip(gpus, memories)]
