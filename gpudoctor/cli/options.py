"""Flags that several commands share for gathering facts, and the gather.Request they turn into."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, Optional

from gpudoctor.cli.common import UsageError
from gpudoctor.estimate import ATTENTIONS, DEFAULTS, OPTIMIZERS, PRECISIONS
from gpudoctor.gather import MAX_TIMEOUT, Request

TRAINING_FLAGS = ("micro_batch", "seq_len", "precision", "optimizer", "zero_stage", "offload", "world_size",
                  "grad_checkpointing", "attention")


def seconds(text: str) -> float:
    """`--timeout`: a finite number of seconds above 0 and at most MAX_TIMEOUT (`nan`, `inf`, `1e400`, `0`, `-1`
    are usage errors)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= MAX_TIMEOUT:  # also false for nan
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds above 0 and at most {MAX_TIMEOUT:g}")
    return value


def add_machine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", default=sys.executable, metavar="PATH",
                        help="interpreter whose torch/deepspeed to inspect (default: this one)")
    parser.add_argument("--timeout", type=seconds, default=15.0, metavar="SECONDS",
                        help="time limit for each probe (default: 15; at most a day)")
    parser.add_argument("--quick", action="store_true",
                        help="read torch's versions from its files instead of importing it (fast; whether CUDA "
                             "works, the arch list and import errors stay unknown)")


def add_from_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="from_reports", action="append", default=[], metavar="REPORT",
                        help="use a pasted report instead of this machine: collect_env, ds_report, nvidia-smi "
                             "(-q, -q -x), nvcc --version, pip show torch; repeatable, '-' reads stdin")


def add_env_file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env-file", action="append", default=[], metavar="FILE",
                        help="overlay the variables this file sets (.env, sbatch/shell script, Dockerfile, K8s "
                             "manifest) on this process's environment; repeatable")


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
    group = parser.add_argument_group("memory estimate", "training settings; default: from --ds-config, else the "
                                      "defaults below")
    group.add_argument("--micro-batch", type=_positive, metavar="N",
                       help=f"micro batch per GPU (default: {DEFAULTS['micro_batch']})")
    group.add_argument("--seq-len", type=_positive, metavar="N",
                       help=f"sequence length in tokens (default: {DEFAULTS['seq_len']})")
    group.add_argument("--precision", choices=PRECISIONS,
                       help=f"fp32, or bf16/fp16 mixed precision (default: {DEFAULTS['precision']})")
    group.add_argument("--optimizer", choices=OPTIMIZERS,
                       help=f"whose states are counted (default: {DEFAULTS['optimizer']})")
    group.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3), help="DeepSpeed ZeRO stage (default: 0)")
    group.add_argument("--offload", choices=("none", "optimizer", "all"),
                       help="ZeRO CPU offload: the optimizer, or (ZeRO-3) the optimizer and the parameters "
                            "(default: none)")
    group.add_argument("--world-size", type=_positive, metavar="N", help="data-parallel ranks (default: the GPUs)")
    group.add_argument("--grad-checkpointing", action="store_true", default=None,
                       help="activation (gradient) checkpointing is on (default: off)")
    group.add_argument("--attention", choices=ATTENTIONS,
                       help="flash (FlashAttention/SDPA) or eager (stores the a·s² scores) "
                            f"(default: {DEFAULTS['attention']})")


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


def model_option(args: argparse.Namespace) -> Optional[str]:
    """--model, or None; training flags without --model are a usage error (exit 2)."""
    if not getattr(args, "model", None):
        given = [f"--{name.replace('_', '-')}" for name in TRAINING_FLAGS if getattr(args, name, None) is not None]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise UsageError(f"{', '.join(given)} {verb} --model SIZE_OR_CONFIG")
        return None
    return args.model


def gather_request(args: argparse.Namespace, groups=None) -> Request:
    """The gather.Request the command line describes; live probes gather `groups` (None: every rule's)."""
    return Request(
        snapshot=getattr(args, "snapshot", None), reports=tuple(getattr(args, "from_reports", None) or ()),
        groups=None if groups is None else frozenset(groups),
        python=getattr(args, "python", sys.executable), timeout=getattr(args, "timeout", 15.0),
        quick=getattr(args, "quick", False),
        scripts=tuple(getattr(args, "script", None) or ()), ds_config=getattr(args, "ds_config", None),
        env_files=tuple(getattr(args, "env_file", None) or ()),
        model=model_option(args), training=training_flags(args),
    )
