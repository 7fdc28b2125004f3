"""The training settings the memory estimate knows and their defaults: the choices `--precision`, `--optimizer` and
`--attention` offer (gpudoctor.estimate computes with them; the command line lists them without importing it)."""

from __future__ import annotations

from typing import Literal, Tuple, get_args

DEFAULTS = {"precision": "bf16", "optimizer": "adamw", "micro_batch": 1, "seq_len": 2048,
            "checkpointing": False, "attention": "flash"}
Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: Tuple[str, ...] = get_args(Precision)
OPTIMIZERS = ("adam", "adamw", "adamw8bit", "sgd")
ATTENTIONS = ("flash", "eager")
