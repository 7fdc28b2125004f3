"""GD2xx: numeric formats the job asks for against what the GPUs can do in hardware."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.devices import job_gpus
from gpudoctor.knowledge import Release, gpu_cc
from gpudoctor.model import Severity

ENV_REQUESTS = ("ACCELERATE_MIXED_PRECISION",)


def _gpus_with_cc(facts) -> list:
    """[(gpu, cc)] of the GPUs the job uses; unknown when a GPU's compute capability cannot be found."""
    gpus = job_gpus(facts).devices if facts.get("nvml.gpus", None) is not None else facts.get("torch.devices", None)
    if gpus is None:
        if facts.get("nvml.status", None) == "unavailable":
            return []
        raise MissingFact("nvml.gpus")
    result = []
    for gpu in gpus:
        cc = gpu_cc(gpu)
        if cc is None:
            raise MissingFact("nvml.gpus.cc")
        result.append((gpu, cc))
    return result


def requests_for(facts, precision: str) -> list:
    """Where the job asks for `precision` ('bf16', 'fp8'): script/config analysis and env variables."""
    found = list(facts.get(f"requests.{precision}", []))
    for name in ENV_REQUESTS:
        if (facts.env(name) or "").lower() == precision:
            found.append({"source": "environment", "what": f"{name}={facts.env(name)}"})
    return found


def _where(request: dict) -> str:
    source = request.get("source", "?")
    line = request.get("line")
    return f"{source}:{line} {request.get('what', '')}".strip() if line else f"{source} {request.get('what', '')}"


def _lacking(facts, min_cc: str) -> list:
    return [(gpu, cc) for gpu, cc in _gpus_with_cc(facts) if Release(cc) < Release(min_cc)]


@check("GD201")
def bf16_unsupported(facts, rule):
    lacking = _lacking(facts, "8.0")
    if not lacking:
        return
    names = ", ".join(sorted({f"{gpu.get('name', 'GPU')} (sm_{cc.replace('.', '')})" for gpu, cc in lacking}))
    requests = requests_for(facts, "bf16")
    evidence = {"gpus": names, "requests": [_where(r) for r in requests]}
    if requests:
        yield rule.finding(
            f"bf16 is requested ({'; '.join(_where(r) for r in requests[:3])}) but {names} has no bf16 tensor cores "
            "(compute capability < 8.0): it fails or runs emulated, many times slower",
            evidence=evidence,
            fix=rule.fix())
    else:
        yield rule.finding(
            f"{names} has no bf16 in hardware (compute capability < 8.0); torch.cuda.is_bf16_supported() may still "
            "say True through emulation — use fp16 with loss scaling on this machine",
            evidence=evidence, severity=Severity.INFO,
            fix=rule.fix(case="info"))


@check("GD202")
def fp8_unsupported(facts, rule):
    requests = requests_for(facts, "fp8")
    if not requests:
        return
    lacking = _lacking(facts, "8.9")
    if not lacking:
        return
    names = ", ".join(sorted({f"{gpu.get('name', 'GPU')} (sm_{cc.replace('.', '')})" for gpu, cc in lacking}))
    yield rule.finding(
        f"fp8 is requested ({'; '.join(_where(r) for r in requests[:3])}) but {names} has no fp8 tensor cores "
        "(Transformer Engine needs compute capability ≥ 8.9: Ada, Hopper, Blackwell)",
        evidence={"gpus": names, "requests": [_where(r) for r in requests]},
        fix=rule.fix())
