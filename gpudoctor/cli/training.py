"""--model and the training settings of the memory estimate (`check`, `estimate`), in gpudoctor.estimate's names."""

from __future__ import annotations

import argparse
from typing import Any, Dict, Optional

from gpudoctor.adapters import QUANTIZE, parse_targets
from gpudoctor.cli.common import UsageError, path
from gpudoctor.training_settings import ATTENTIONS, DEFAULTS, OPTIMIZERS, PRECISIONS

TRAINING_FLAGS = ("micro_batch", "seq_len", "precision", "optimizer", "zero_stage", "offload", "world_size",
                  "grad_checkpointing", "attention", "lora_rank", "lora_targets", "quantize")


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def add_training_options(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """--model and the few training settings the estimate needs (a DeepSpeed config can give most of them)."""
    parser.add_argument("--model", type=path, required=required, metavar="SIZE_OR_CONFIG",
                        help="model size (0.5B, 7e9, 1.3b) or a Hugging Face config.json, for the memory estimate "
                             "(GD501, GD504; beside a CUDA out-of-memory in a log, GD508)")
    group = parser.add_argument_group("memory estimate", "training settings; default: from --ds-config, else the "
                                      "defaults below")
    group.add_argument("--micro-batch", type=positive, metavar="N",
                       help=f"micro batch per GPU (default: {DEFAULTS['micro_batch']})")
    group.add_argument("--seq-len", type=positive, metavar="N",
                       help=f"sequence length in tokens (default: {DEFAULTS['seq_len']})")
    group.add_argument("--precision", choices=PRECISIONS,
                       help=f"fp32, or bf16/fp16 mixed precision (default: {DEFAULTS['precision']})")
    group.add_argument("--optimizer", choices=OPTIMIZERS,
                       help=f"whose states are counted (default: {DEFAULTS['optimizer']})")
    group.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3), help="DeepSpeed ZeRO stage (default: 0)")
    group.add_argument("--offload", choices=("none", "optimizer", "all"),
                       help="ZeRO CPU offload: the optimizer, or (ZeRO-3) the optimizer and the parameters "
                            "(default: none)")
    group.add_argument("--world-size", type=positive, metavar="N", help="data-parallel ranks (default: the GPUs)")
    group.add_argument("--grad-checkpointing", action="store_true", default=None,
                       help="activation (gradient) checkpointing is on (default: off)")
    group.add_argument("--attention", choices=ATTENTIONS,
                       help="flash (FlashAttention/SDPA) or eager (stores the a·s² scores) "
                            f"(default: {DEFAULTS['attention']})")
    group.add_argument("--lora-rank", type=positive, metavar="R",
                       help="LoRA fine-tuning: adapters of rank R, the base model frozen (needs a config.json "
                            "--model)")
    group.add_argument("--lora-targets", metavar="NAMES",
                       help="modules the adapters go on, as PEFT's target_modules: q_proj,v_proj or all-linear "
                            "(default: PEFT's default for the model type)")
    group.add_argument("--quantize", choices=QUANTIZE,
                       help="QLoRA: the base model's linear layers loaded in 4 or 8 bits by bitsandbytes "
                            "(needs --lora-rank)")


def training_flags(args: argparse.Namespace) -> Dict[str, Any]:
    """The training settings given on the command line, in gpudoctor.estimate's names (None = not given)."""
    offload = getattr(args, "offload", None)
    return {
        "micro_batch": getattr(args, "micro_batch", None), "seq_len": getattr(args, "seq_len", None),
        "precision": getattr(args, "precision", None), "optimizer": getattr(args, "optimizer", None),
        "zero_stage": getattr(args, "zero_stage", None), "world_size": getattr(args, "world_size", None),
        "checkpointing": getattr(args, "grad_checkpointing", None), "attention": getattr(args, "attention", None),
        "lora_rank": getattr(args, "lora_rank", None),
        "lora_targets": parse_targets(getattr(args, "lora_targets", None)),
        "quantize": getattr(args, "quantize", None),
        "offload_optimizer": None if offload is None else ("none" if offload == "none" else "cpu"),
        "offload_param": None if offload is None else ("cpu" if offload == "all" else "none"),
    }


def model_option(args: argparse.Namespace) -> Optional[str]:
    """--model, or None; training flags without --model are a usage error (exit 2)."""
    if not getattr(args, "model", None):
        given = [f"--{name.replace('_', '-')}" for name in TRAINING_FLAGS if getattr(args, name, None) is not None]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise UsageError(f"{', '.join(given)} {verb} --model SIZE_OR_CONFIG")
        return None
    for name in ("lora_targets", "quantize"):
        if getattr(args, name, None) is not None and getattr(args, "lora_rank", None) is None:
            raise UsageError(f"--{name.replace('_', '-')} needs --lora-rank R (the adapters that are trained)")
    return args.model
