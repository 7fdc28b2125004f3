"""One-line descriptions of the machine, the Python stack and the fix command, shared by the text and Markdown
reports."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path
from typing import List, Tuple

from gpudoctor import schema
from gpudoctor.facts import Facts
from gpudoctor.files import is_dotenv
from gpudoctor.knowledge import gpu_cc, gpu_memory_bytes, major_minor
from gpudoctor.model import Applicability, Report
from gpudoctor.units import size


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def machine_line(facts: Facts) -> str:
    """`2× NVIDIA A100-SXM4-80GB (sm_80, 80 GiB) · driver 535.104.05 (CUDA ≤ 12.2)`."""
    status = facts.get("nvml.status", None)
    if status is None and not facts.get("nvml.gpus", None):  # an env command names a GPU, not the driver
        return "GPUs not looked at"
    if status == "unavailable":
        return "no NVIDIA driver or GPU"
    if status == "error":
        return f"NVIDIA driver unusable: {facts.get('nvml.error', None) or facts.get('nvml.error_kind', '?')}"
    parts: List[str] = []
    gpus = facts.get("nvml.gpus", None)
    counted: Counter[str] = Counter()
    for gpu in gpus or []:
        if gpu.get("error_kind"):
            counted["GPU lost" if gpu["error_kind"] == "gpu_lost" else f"GPU failing ({gpu['error_kind']})"] += 1
            continue
        cc = gpu_cc(gpu)
        detail = ", ".join(x for x in (f"sm_{cc.replace('.', '')}" if cc else "", size(gpu_memory_bytes(gpu)),
                                       plural(len(gpu.get("mig_devices", [])), "MIG device") if gpu.get(
                                           "mig_enabled") else "") if x)
        counted[f"{gpu.get('name', 'GPU')} ({detail})"] += 1
    how_many = facts.get("nvml.gpus_counted", None) is not False
    parts.extend(f"{count}× {name}" if how_many else f"{name}, how many not stated" for name, count in counted.items())
    if gpus is None:
        parts.append("GPUs unknown")
    elif not gpus:
        parts.append("no GPU")
    driver = facts.get("nvml.driver_version", None)
    if driver:
        cuda = facts.get("nvml.cuda_driver_version", None)
        parts.append(f"driver {driver}" + (f" (CUDA ≤ {cuda})" if cuda else ""))
    return " · ".join(parts)


def python_line(facts: Facts) -> str:
    """`torch 2.5.1+cu124 (CUDA 12.4, NCCL 2.21.5) · deepspeed 0.15.1 · nvcc 11.5 (/usr/bin/nvcc)`."""
    parts = []
    status = facts.get("torch.status", None)
    if status == "ok":
        cuda = facts.get("torch.cuda", None)
        hip = facts.get("torch.hip", None)
        if not facts.has("torch.cuda") and not hip:
            inner = ["CUDA build unknown"]
        else:
            shown = major_minor(cuda) if "." in str(cuda) else cuda  # a major alone stays one ("CUDA 12")
            inner = [f"CUDA {shown}" if cuda else (f"ROCm {hip}" if hip else "CPU-only")]
        if facts.get("torch.nccl", None):
            inner.append(f"NCCL {facts.get('torch.nccl')}")
        if facts.get("torch.quick", False):
            inner.append("read from its files, not imported (--quick)")
        parts.append(f"torch {facts.get('torch.version', '?')} ({', '.join(inner)})")
    elif status == "missing":
        parts.append("torch not installed")
    elif status == "broken":
        parts.append("torch broken")
    elif status is not None:
        parts.append(f"torch {status}")
    deepspeed = facts.get("torch.deepspeed.version", None)
    if deepspeed:
        parts.append(f"deepspeed {deepspeed}")
    if facts.has("nvcc.version") or facts.has("nvcc.path"):
        version = facts.get("nvcc.version", None)
        path = facts.get("nvcc.path", None)
        parts.append(f"nvcc {version}" + (f" ({path})" if path else "") if version else "no nvcc on PATH")
    return " · ".join(parts) or "Python stack not looked at"


def header_items(facts: Facts) -> List[str]:
    host = facts.get("host", {}) or {}
    items = [host.get("hostname"), host.get("os")]
    python = facts.get("torch.python_version", None) or host.get("python")
    if python:
        items.append(f"Python {python}")
    return [item for item in items if item]


GROUP_WORDS = {  # a fact group (rules/facts.toml) as a user names what it is about
    "env": "the environment", "nvml": "the NVIDIA driver", "host": "the host", "torch": "torch", "nvcc": "nvcc",
    "inputs": "the input files", "scripts": "the script", "launch": "the job files", "logs": "the logs",
    "deepspeed": "DeepSpeed", "requests": "the script's requests", "bench": "the benchmarks", "model": "the model",
    "ds_config": "the DeepSpeed config", "libraries": "the CUDA libraries", "env_sources": "the job files",
}
FACT_WORDS = {"nvcc.cuda_home": "CUDA_HOME is not set", "nvml.driver_version": "the NVIDIA driver could not be read",
              "torch.version": "torch's version is not known"}


def _fact_words(path: str) -> str:
    """One missing fact as a user would say it: `WORLD_SIZE is not set`, `CUDA_HOME is not set` …"""
    if path in FACT_WORDS:
        return FACT_WORDS[path]
    group, _, key = path.partition(".")
    if group == "env" and key:
        return f"{key} is not set"
    what = f": {key.replace('_', ' ').replace('.', ' ')}" if key else ""
    return f"{GROUP_WORDS.get(group, group)}{what} not known"


def unknown_reasons(facts: Facts, unknown) -> str:
    """Why rules could not be evaluated, in a few words."""
    rules_of: dict = {}  # a reason and the rules it holds back, each reason once
    for item in unknown:
        if item.reason:
            rules_of.setdefault(item.reason, []).append(item.rule)
    reasons: List[Tuple[str, int]] = [(f"{', '.join(rules)}: {why}", len(rules)) for why, rules in rules_of.items()]
    groups = Counter(item.missing.split(".")[0] for item in unknown if not item.reason)
    unseen: List[str] = []
    for group, count in groups.most_common():
        if group == "torch" and facts.get("torch.status", None) in ("missing", "broken"):
            why = f"torch {facts.get('torch.status')}"
        elif group == "nvml" and facts.get("nvml.status", None) == "error":
            why = "NVML unusable"
        elif group not in schema.groups() or not facts.has(group):  # "report": a pasted text with nothing recognised
            unseen.append(GROUP_WORDS.get(group, group))
            continue
        else:
            paths = sorted({item.missing for item in unknown
                            if item.missing.split(".")[0] == group and not item.reason})
            why = ", ".join(_fact_words(path) for path in paths[:2])
        reasons.append((why, count))
    if unseen:
        reasons.append(("not looked at: " + ", ".join(unseen), 0))
    return "; ".join(why for why, _ in reasons)


NOT_APPLICABLE_REASONS_SHOWN = 4  # the JSON report lists every rule with its reason


def not_applicable_reasons(items) -> str:
    """`no DeepSpeed config, no script, …`: why rules were not applicable, each once, in the catalog's order of
    inputs (what the machine lacks, then files the user gives), at most NOT_APPLICABLE_REASONS_SHOWN of them."""
    from gpudoctor.catalog import INPUTS

    order = {spec.reason: number for number, spec in enumerate(INPUTS.values())}
    reasons = sorted({item.reason for item in items}, key=lambda reason: (order.get(reason, len(order)), reason))
    shown = reasons[:NOT_APPLICABLE_REASONS_SHOWN] + (["…"] if len(reasons) > NOT_APPLICABLE_REASONS_SHOWN else [])
    return ", ".join(shown)


def not_applicable_text(report) -> str:
    """`25 not applicable (no DeepSpeed config, no script, …)`: rules with nothing to judge, and why."""
    return f"{len(report.not_applicable)} not applicable ({not_applicable_reasons(report.not_applicable)})"


PRINTED_AS = {"sbatch": "shell", "shell": "shell", "k8s": "k8s"}  # a job file's kind → the fix format it takes


def _fix_output(report: Report, env_files: List[str]) -> List[str]:
    """Where the fixes go, in a form the job's own files use: a .env merged (--write-env), export lines for a
    script (--format shell), a container's env: list for a manifest (--format k8s), KEY=VALUE lines otherwise. A job
    file never gets a .env beside it that nothing would read."""
    if not env_files:
        return ["--write-env", ".env"]
    if len(env_files) == 1 and is_dotenv(Path(env_files[0])):
        return ["--write-env", env_files[0]]
    launch = report.facts.get("launch") or {}
    kinds = {job.get("path"): job.get("kind") for job in launch.get("jobs") or ()}
    kinds.update({pod.get("path"): "k8s" for pod in launch.get("pods") or ()})
    formats = {PRINTED_AS.get(kinds.get(path) or "", "dotenv") for path in env_files}
    return ["--format", formats.pop() if len(formats) == 1 else "dotenv"]


def _safe_fix_files(report: Report) -> List[str]:
    """The job files (not JSON snapshots) the report's safe env fixes point into, each once, in order."""
    env_files: List[str] = []
    for finding in report.findings:
        fix = finding.fix
        if not (fix and fix.env and fix.applicability == Applicability.SAFE):
            continue
        path = finding.location.path if finding.location else None
        if path and not path.endswith(".json") and path not in env_files:
            env_files.append(path)
    return env_files


def fix_command(report: Report) -> str:
    """The `gpudoctor fix` command line that finds the same safe fixes as this report (for the text report's hint):
    the same snapshot or pasted reports, the job files the fixes point into as --env-file, and the output those
    files take."""
    env_files = _safe_fix_files(report)
    words = ["gpudoctor", "fix"]
    source = report.source if isinstance(report.source, dict) else {}
    paths = [str(p) for p in source.get("paths", []) or []]
    if source.get("kind") == "snapshot" and paths:
        words += ["--snapshot", paths[0]]
    elif source.get("kind") == "report":
        for path in paths:
            if path not in env_files:
                words += ["--from", path]
    for path in env_files:
        words += ["--env-file", path]
    if source.get("policy"):
        words += ["--policy", str(source["policy"])]
    words += _fix_output(report, env_files)
    return " ".join(shlex.quote(word) for word in words)
