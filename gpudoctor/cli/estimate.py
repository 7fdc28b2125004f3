"""`gpudoctor estimate --model …`: training memory per GPU, term by term; and `check --model` (GD501, GD504)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

from gpudoctor.cli.common import UsageError
from gpudoctor.estimate import (GiB, ModelError, PRECISIONS, OPTIMIZERS, ATTENTIONS, Estimate, from_facts, gib,
                                load_model, model_fact)

TRAINING_FLAGS = ("micro_batch", "seq_len", "precision", "optimizer", "zero_stage", "offload", "world_size",
                  "grad_checkpointing", "attention")
_MEMORY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(GB|GiB|G)\s*$", re.IGNORECASE)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def add_training_options(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """--model and the few training settings the estimate needs (a DeepSpeed config can give most of them)."""
    parser.add_argument("--model", required=required, metavar="SIZE_OR_CONFIG",
                        help="model size (0.5B, 7e9, 1.3b) or a Hugging Face config.json, for the memory estimate "
                             "(GD501, GD504)")
    group = parser.add_argument_group("training settings for the memory estimate (default: the DeepSpeed config, "
                                      "else bf16 AdamW, micro batch 1, sequence 2048)")
    group.add_argument("--micro-batch", type=_positive, metavar="N", help="micro batch per GPU")
    group.add_argument("--seq-len", type=_positive, metavar="N", help="sequence length in tokens")
    group.add_argument("--precision", choices=PRECISIONS, help="fp32, or bf16/fp16 mixed precision")
    group.add_argument("--optimizer", choices=OPTIMIZERS)
    group.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3), help="DeepSpeed ZeRO stage")
    group.add_argument("--offload", choices=("none", "optimizer", "all"),
                       help="ZeRO CPU offload: the optimizer, or (ZeRO-3) the optimizer and the parameters")
    group.add_argument("--world-size", type=_positive, metavar="N", help="data-parallel ranks (default: the GPUs)")
    group.add_argument("--grad-checkpointing", action="store_true", default=None,
                       help="activation (gradient) checkpointing is on")
    group.add_argument("--attention", choices=ATTENTIONS,
                       help="flash (FlashAttention/SDPA, default) or eager (stores the a·s² scores)")


def training_flags(args: argparse.Namespace) -> Dict[str, Any]:
    """The training settings given on the command line, in gpudoctor.estimate's names (None = not given)."""
    offload = getattr(args, "offload", None)
    return {
        "micro_batch": getattr(args, "micro_batch", None), "seq_len": getattr(args, "seq_len", None),
        "precision": getattr(args, "precision", None), "optimizer": getattr(args, "optimizer", None),
        "zero_stage": getattr(args, "zero_stage", None), "world_size": getattr(args, "world_size", None),
        "checkpointing": getattr(args, "grad_checkpointing", None), "attention": getattr(args, "attention", None),
        "offload_optimizer": None if offload is None else ("none" if offload == "none" else "cpu"),
        "offload_param": None if offload is None else ("cpu" if offload == "all" else "none"),
    }


def model_facts(args: argparse.Namespace) -> Optional[dict]:
    """`facts["model"]` for --model (None without it); a bad --model is a usage error (exit 2)."""
    flags = training_flags(args)
    if not getattr(args, "model", None):
        given = [f"--{name.replace('_', '-')}" for name in TRAINING_FLAGS if getattr(args, name, None) is not None]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise UsageError(f"{', '.join(given)} {verb} --model SIZE_OR_CONFIG")
        return None
    try:
        spec = load_model(args.model)
    except ModelError as exc:
        raise UsageError(str(exc)) from None
    return model_fact(spec, flags)


def model_overlay(args: argparse.Namespace, snapshot) -> None:
    """`check --model`: the model and the training flags join the facts (GD501, GD504 read them)."""
    fact = model_facts(args)
    if fact is not None:
        snapshot.facts["model"] = fact


# --- gpudoctor estimate ----------------------------------------------------------------------------------

def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("estimate", help="training memory per GPU, term by term (--model SIZE_OR_CONFIG)")
    add_training_options(parser, required=True)
    parser.add_argument("--ds-config", metavar="FILE", help="take precision, ZeRO stage, offload and micro batch "
                                                            "from this DeepSpeed config")
    parser.add_argument("--gpu", metavar="NAME", help='compare with this GPU ("H100 80GB", "RTX 4090", or a size '
                                                      'such as 24GB); default: this machine\'s GPUs')
    parser.add_argument("--format", choices=("rich", "plain", "json"),
                        help="output format (default: rich on a terminal, else plain)")
    parser.set_defaults(run=run)


def _ds_config_fact(name: str) -> dict:
    from pathlib import Path

    from gpudoctor.analysis.ds_config import parse, to_fact
    from gpudoctor.files import read_text

    path = Path(name)
    if not path.is_file():
        raise UsageError(f"cannot read DeepSpeed config {name!r}: no such file")
    try:
        parsed = parse(read_text(path))
    except OSError as exc:
        raise UsageError(f"cannot read DeepSpeed config {name!r}: {exc.strerror or exc}") from None
    if parsed.config is None:
        error = parsed.error or {}
        line = f" (line {error['line']})" if error.get("line") else ""
        raise UsageError(f"{name!r} is not a DeepSpeed config: {error.get('message', 'unreadable')}{line}")
    return to_fact(name, parsed)


def named_gpu(name: str) -> dict:
    """`--gpu`: a GPU name looked up in rules/gpus.toml, or a memory size (`24GB`)."""
    from gpudoctor.knowledge import gpu_spec

    size = _MEMORY.match(name)
    if size:
        return {"name": name.strip(), "memory_total_bytes": int(float(size.group(1)) * GiB)}
    spec = gpu_spec(name)
    if spec is None or not spec.get("memory_gib"):
        why = "its memory is not in rules/gpus.toml" if spec else "not in rules/gpus.toml"
        raise UsageError(f"--gpu {name!r}: {why}; give the memory instead, e.g. --gpu 24GB")
    return {"name": spec["name"], "memory_total_bytes": int(float(spec["memory_gib"]) * GiB)}


def local_gpus() -> List[dict]:
    """This machine's GPUs through the NVML probe ([] without a driver); CUDA_VISIBLE_DEVICES applies."""
    from gpudoctor.checks.memory import used_gpus
    from gpudoctor.facts import Facts
    from gpudoctor.probes import ProbeContext, probes_for, run_probes

    facts, _ = run_probes(probes_for({"nvml"}), ProbeContext(timeout=10.0, environ=dict(os.environ)))
    nvml = facts.get("nvml") or {}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return used_gpus(Facts({"nvml": nvml, "env": {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}}))


def compute(args: argparse.Namespace) -> Tuple[Estimate, List[Tuple[str, Optional[int]]]]:
    from gpudoctor.facts import Facts
    from gpudoctor.knowledge import gpu_memory_bytes

    facts: Dict[str, Any] = {"model": model_facts(args), "env": {}}
    if args.ds_config:
        facts["ds_config"] = _ds_config_fact(args.ds_config)
    if args.gpu:
        gpus, local = [named_gpu(args.gpu)], 0
    else:
        gpus = local_gpus()
        local = len(gpus)
    est = from_facts(Facts(facts), local)
    assert est is not None
    est.assumptions["gpus_from"] = "--gpu" if args.gpu else ("NVML (this machine)" if gpus else "none: no GPU found")
    return est, [(str(g.get("name") or "GPU"), gpu_memory_bytes(g)) for g in gpus]


DESCRIPTIONS = {
    "weights": "parameters in the training precision (ZeRO-3: a 1/N partition + the largest layer gathered)",
    "gradients": "gradients (ZeRO-2/3: partitioned; DeepSpeed adds an fp32 partition)",
    "optimizer": "Adam: fp32 master + momentum + variance (ZeRO-1+: partitioned; offload: on the host)",
    "activations": "Korthikanti et al.: sbh(34 + 5as/h) per layer + 4sbv logits",
    "overhead": "CUDA context, workspaces, NCCL buffers, fragmentation",
}


def _assumption_lines(est: Estimate) -> List[str]:
    a, sources = est.assumptions, est.assumptions.get("sources", {})
    keys = ("precision", "optimizer", "zero_stage", "micro_batch", "seq_len", "world_size")
    parts = [f"{k}={a[k]} ({sources.get(k, 'default')})" for k in keys]
    offload = a["offload"]
    parts.append(f"offload=optimizer:{offload['optimizer']},param:{offload['param']} "
                 f"({sources.get('offload_optimizer', 'default')})")
    parts.append(f"activation_checkpointing={a['activation_checkpointing']} "
                 f"({sources.get('checkpointing', 'default')})")
    parts.append(f"attention={a['attention']} ({sources.get('attention', 'default')})")
    return ["assumptions: " + ", ".join(parts)] + [f"note: {note}" for note in a.get("notes", [])]


def render_plain(est: Estimate, gpus, stream) -> None:
    a = est.assumptions
    stream.write(f"model {a['model']}: {est.params:,} parameters\n")
    for name, value in est.breakdown().items():
        shown = gib(value) if value is not None else "not estimated"
        stream.write(f"  {name:<12} {shown:>14}   {DESCRIPTIONS[name]}\n")
    stream.write(f"  {'total':<12} {gib(est.total):>14}   per GPU\n")
    stream.write(f"  {'host RAM':<12} {gib(est.host_bytes):>14}   per node (DeepSpeed's estimator, × 1.5)\n")
    if not gpus:
        stream.write("GPUs: none found (give --gpu NAME)\n")
    for row in est.gpu_rows(gpus):
        stream.write(_gpu_line(row) + "\n")
    for line in _assumption_lines(est):
        stream.write(line + "\n")


def _gpu_line(row: dict) -> str:
    if row["memory_bytes"] is None:
        return f"{row['name']}: memory unknown"
    if not row["fits"]:
        return f"{row['name']} ({gib(row['memory_bytes'])}): does NOT fit, {gib(-row['headroom_bytes'])} short"
    share = row["headroom_bytes"] / row["memory_bytes"]
    verdict = "fits" if share >= 0.10 else "fits, with under 10 % headroom"
    return f"{row['name']} ({gib(row['memory_bytes'])}): {verdict}, {gib(row['headroom_bytes'])} free ({share:.0%})"


def render_rich(est: Estimate, gpus) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False, emoji=False)
    table = Table(title=f"{escape(str(est.assumptions['model']))}: {est.params:,} parameters", title_justify="left")
    table.add_column("term")
    table.add_column("per GPU", justify="right")
    table.add_column("what")
    for name, value in est.breakdown().items():
        table.add_row(name, gib(value) if value is not None else "not estimated", escape(DESCRIPTIONS[name]))
    table.add_row("[bold]total[/]", f"[bold]{gib(est.total)}[/]", "per GPU")
    table.add_row("host RAM", gib(est.host_bytes), "per node (DeepSpeed's estimator, × 1.5)")
    console.print(table)
    if not gpus:
        console.print("GPUs: none found (give --gpu NAME)")
    for row in est.gpu_rows(gpus):
        colour = "green" if row["fits"] and row["headroom_bytes"] >= 0.1 * row["memory_bytes"] else (
            "yellow" if row["fits"] else "red")
        console.print(f"[{colour}]{escape(_gpu_line(row))}[/]")
    for line in _assumption_lines(est):
        console.print(escape(line), style="dim")


def run(args: argparse.Namespace) -> int:
    est, gpus = compute(args)
    fmt = args.format or ("rich" if sys.stdout.isatty() else "plain")
    if fmt == "json":
        json.dump(est.to_json(gpus), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif fmt == "rich":
        render_rich(est, gpus)
    else:
        render_plain(est, gpus, sys.stdout)
    return 0
