"""A Markdown report to paste into a bug report instead of `collect_env` (redacted, as every format is)."""

from __future__ import annotations

from typing import IO

from gpudoctor.facts import Facts
from gpudoctor.knowledge import gpu_cc
from gpudoctor.model import Report
from gpudoctor.render.describe import machine_line, not_applicable_text, plural, python_line
from gpudoctor.units import size
from gpudoctor.version import __version__

SEVERITY_ICON = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ") if value is not None else "—"


def _facts_table(facts: Facts) -> list:
    rows = [
        ("OS", facts.get("host.os", None)), ("Python", facts.get("torch.python_version", None)),
        ("NVIDIA driver", facts.get("nvml.driver_version", None)),
        ("Driver CUDA", facts.get("nvml.cuda_driver_version", None)),
        ("torch", facts.get("torch.version", None)), ("torch CUDA", facts.get("torch.cuda", None)),
        ("cuDNN", facts.get("torch.cudnn", None)), ("NCCL", facts.get("torch.nccl", None)),
        ("CUDA available", facts.get("torch.cuda_available", None)),
        ("DeepSpeed", facts.get("torch.deepspeed.version", None)), ("nvcc", facts.get("nvcc.version", None)),
        ("/dev/shm", size(facts.get("host.shm_bytes", None))),
    ]
    lines = ["| fact | value |", "| --- | --- |"]
    lines += [f"| {name} | {_cell(value)} |" for name, value in rows if value is not None]
    for gpu in facts.get("nvml.gpus", None) or []:
        cc = gpu_cc(gpu)
        sm = f" (sm_{cc.replace('.', '')})" if cc else ""
        lines.append(f"| GPU {gpu.get('index', '')} | {_cell(gpu.get('name'))}{sm} |")
    env = facts.get("env", None) or {}
    interesting = {k: v for k, v in env.items() if not k.startswith(("PATH", "LD_", "CONDA", "VIRTUAL"))}
    for name, value in sorted(interesting.items()):
        lines.append(f"| `{name}` | `{_cell(value)}` |")
    return lines


def render(report: Report, stream: IO, quiet: bool = False) -> None:
    """The whole report (`quiet` shortens only the terminal text: a pasted report keeps its facts table)."""
    facts = Facts(report.facts)
    summary = report.summary()
    out = [
        f"## gpudoctor {__version__} report",
        "",
        f"**Machine:** {machine_line(facts)}  ",
        f"**Python:** {python_line(facts)}",
        "",
        f"**{plural(summary['error'], 'error')} · {plural(summary['warning'], 'warning')} · {summary['info']} info** · "
        f"{summary['passed']} passed · {summary['unknown']} unknown"
        + (f" · {not_applicable_text(report)}" if report.not_applicable else ""),
        "",
    ]
    for finding in report.findings:
        icon = SEVERITY_ICON[str(finding.severity)]
        where = f" `{finding.location}`" if finding.location else ""
        out.append(f"- {icon} **{finding.rule} {finding.name}**{where}: {finding.message}")
        if finding.fix:
            out.append(f"  - fix: {finding.fix.summary}")
    out += ["", "<details><summary>Environment</summary>", "", *_facts_table(facts), "", "</details>", ""]
    stream.write("\n".join(out))
