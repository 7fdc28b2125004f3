"""What would make a training run fit: each change the estimate models, its saving and the verdict after it, largest
saving first; the cheapest changes that fit together where no single one does; and, where nothing does, how many GPUs
of the same kind ZeRO-3 needs or how large a GPU must be. Pure functions over gpudoctor.estimate.

Each remedy names the setting to change in the tools users train with: the Hugging Face Trainer's arguments
(TrainingArguments: gradient_checkpointing, per_device_train_batch_size, gradient_accumulation_steps, bf16, optim,
deepspeed, fsdp), the DeepSpeed config keys (zero_optimization.stage, offload_optimizer/offload_param.device,
train_micro_batch_size_per_gpu, bf16.enabled), accelerate's options (mixed_precision, zero_stage), transformers'
`attn_implementation` and PEFT's LoraConfig / bitsandbytes' BitsAndBytesConfig.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from gpudoctor.estimate import (
    HEADROOM_WARNING,
    Estimate,
    ModelSpec,
    MoreGpus,
    Plan,
    Remedy,
    Training,
    Verdict,
    assumed_shape,
    estimate,
)

MAX_GPUS = 4096  # the most data-parallel ranks "more GPUs" looks at
LORA_RANK = 16


@dataclass(frozen=True)
class Change:
    """One change the estimate can model: `apply` gives the new setup, or None where it does not apply."""

    key: str
    group: str  # changes of one group exclude each other (ZeRO-2 or ZeRO-3, LoRA or QLoRA)
    title: str
    how: str
    cost: int  # how much it costs in speed or changes the training: cheaper first among equal fits
    apply: Callable[[ModelSpec, Training], Optional[Tuple[ModelSpec, Training]]]


def _checkpointing(model: ModelSpec, t: Training):
    return None if t.checkpointing or model.experts else (model, replace(t, checkpointing=True))


def _micro_batch(model: ModelSpec, t: Training):
    return None if t.micro_batch <= 1 else (model, replace(t, micro_batch=1))


def _flash(model: ModelSpec, t: Training):
    return None if t.attention == "flash" else (model, replace(t, attention="flash"))


def _bf16(model: ModelSpec, t: Training):
    return None if t.precision != "fp32" else (model, replace(t, precision="bf16"))


def _adam_8bit(model: ModelSpec, t: Training):
    if t.deepspeed or t.optimizer not in ("adam", "adamw"):
        return None
    return model, replace(t, optimizer="adamw8bit")


def _zero(stage: int):
    def apply(model: ModelSpec, t: Training):
        current = t.zero_stage if t.deepspeed else 0
        if t.world_size <= 1 or stage <= current:
            return None
        return model, replace(t, deepspeed=True, zero_stage=stage)
    return apply


def _offload(params: bool):
    def apply(model: ModelSpec, t: Training):
        if t.lora_rank or (t.offload_param != "none" if params else t.offload_optimizer != "none"):
            return None
        stage = 3 if params else max(t.zero_stage if t.deepspeed else 0, 2)
        return model, replace(t, deepspeed=True, zero_stage=stage, offload_optimizer="cpu",
                              offload_param="cpu" if params else t.offload_param)
    return apply


def _adapters(quantize: Optional[str]):
    def apply(model: ModelSpec, t: Training):
        if t.lora_rank:
            return None
        shaped = model if model.linears else assumed_shape(model) if model.kind == "size" else None
        if shaped is None or not shaped.linears:
            return None
        return shaped, replace(t, lora_rank=LORA_RANK, lora_targets=("all-linear",), quantize=quantize,
                               offload_optimizer="none", offload_param="none")
    return apply


CHANGES: Sequence[Change] = (
    Change("flash_attention", "attention", "flash/SDPA attention instead of eager",
           'transformers: from_pretrained(…, attn_implementation="sdpa") (or "flash_attention_2")', 0, _flash),
    Change("bf16", "precision", "bf16 mixed precision instead of fp32",
           'HF Trainer: --bf16 (fp16 on GPUs before Ampere); DeepSpeed: "bf16": {"enabled": true}; '
           "accelerate: --mixed_precision bf16", 0, _bf16),
    Change("micro_batch", "micro_batch", "micro batch 1 with more gradient accumulation (same global batch)",
           "HF Trainer: --per_device_train_batch_size 1 and --gradient_accumulation_steps × {micro_batch}; "
           "DeepSpeed: train_micro_batch_size_per_gpu 1, gradient_accumulation_steps × {micro_batch}", 1,
           _micro_batch),
    Change("adam_8bit", "optimizer", "8-bit AdamW (bitsandbytes)",
           "HF Trainer: --optim adamw_bnb_8bit (paged_adamw_8bit also pages the states to host RAM under pressure)",
           1, _adam_8bit),
    Change("zero1", "zero", "ZeRO stage 1 across the job's GPUs (optimizer states partitioned)",
           'DeepSpeed: "zero_optimization": {"stage": 1} (HF Trainer: --deepspeed ds.json; accelerate: zero_stage 1)',
           1, _zero(1)),
    Change("zero2", "zero", "ZeRO stage 2 across the job's GPUs (+ gradients partitioned)",
           'DeepSpeed: "zero_optimization": {"stage": 2}; FSDP: --fsdp "shard_grad_op"', 1, _zero(2)),
    Change("zero3", "zero", "ZeRO stage 3 across the job's GPUs (+ parameters partitioned)",
           'DeepSpeed: "zero_optimization": {"stage": 3}; FSDP: --fsdp "full_shard"', 2, _zero(3)),
    Change("checkpointing", "checkpointing", "activation (gradient) checkpointing",
           "HF Trainer: --gradient_checkpointing; plain torch/accelerate: model.gradient_checkpointing_enable()",
           2, _checkpointing),
    Change("offload_optimizer", "offload", "ZeRO CPU offload of the optimizer states",
           'DeepSpeed: "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}} (accelerate: '
           "offload_optimizer_device cpu)", 3, _offload(False)),
    Change("offload_all", "offload", "ZeRO-3 CPU offload of the optimizer states and the parameters",
           'DeepSpeed: "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, '
           '"offload_param": {"device": "cpu"}}', 4, _offload(True)),
    Change("lora", "adapters", f"LoRA (r={LORA_RANK}, all linear layers) instead of full fine-tuning",
           f'PEFT: get_peft_model(model, LoraConfig(r={LORA_RANK}, target_modules="all-linear")) — trains adapters, '
           "not the whole model", 5, _adapters(None)),
    Change("qlora", "adapters", f"QLoRA (4-bit base, LoRA r={LORA_RANK}) instead of full fine-tuning",
           'transformers: BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4") + PEFT LoraConfig — '
           "trains adapters on a quantised base", 6, _adapters("4bit")),
)


def _verdict(est: Estimate, memory: int) -> Verdict:
    headroom = memory - est.total
    fits = headroom >= 0 if not est.leaves_out() or headroom < 0 else None
    return {"total_bytes": est.total, "headroom_bytes": headroom, "fits": fits,
            "tight": bool(fits) and headroom < HEADROOM_WARNING * memory, "host_bytes": est.host_bytes}


def _entry(changes: Sequence[Change], before: Estimate, after: Estimate, memory: int) -> Remedy:
    micro_batch = before.assumptions["micro_batch"]
    assumed = [note for note in after.assumptions["notes"] if note.startswith("model shape:")
               and note not in before.assumptions["notes"]]
    return {"keys": [c.key for c in changes], "title": " + ".join(c.title for c in changes) + (
                f" ({assumed[0]})" if assumed else ""),
            "how": [c.how.replace("{micro_batch}", str(micro_batch)) for c in changes],
            "saving_bytes": before.total - after.total,
            "offload": after.offload, **_verdict(after, memory)}


def _apply(changes: Sequence[Change], model: ModelSpec, t: Training) -> Optional[Tuple[ModelSpec, Training]]:
    for change in changes:
        applied = change.apply(model, t)
        if applied is None:
            return None
        model, t = applied
    return model, t


def singles(model: ModelSpec, t: Training, before: Estimate, memory: int) -> List[Remedy]:
    """Every change that applies alone, with its saving and the verdict after it, largest saving first."""
    rows = []
    for change in CHANGES:
        applied = change.apply(model, t)
        if applied is not None:
            rows.append((change.cost, _entry([change], before, estimate(*applied), memory)))
    rows = [(cost, row) for cost, row in rows if row["saving_bytes"] > 0]
    return [row for _, row in sorted(rows, key=lambda pair: (-pair[1]["saving_bytes"], pair[0]))]


def combination(model: ModelSpec, t: Training, before: Estimate, memory: int) -> Optional[Remedy]:
    """The cheapest changes that fit together (fewest, then most headroom, among equally cheap), or None."""
    groups: Dict[str, List[Change]] = {}
    for change in CHANGES:
        groups.setdefault(change.group, []).append(change)
    best = None
    for picked in itertools.product(*[[None, *members] for members in groups.values()]):
        changes = [c for c in picked if c is not None]
        if len(changes) < 2:
            continue
        applied = _apply(changes, model, t)
        if applied is None:
            continue
        after = estimate(*applied)
        if after.total > memory or after.leaves_out():
            continue
        rank = (sum(c.cost for c in changes), len(changes), after.total)
        if best is None or rank < best[0]:
            best = (rank, changes, after)
    return None if best is None else _entry(best[1], before, best[2], memory)


def more_gpus(model: ModelSpec, t: Training, memory: int) -> Optional[MoreGpus]:
    """The fewest data-parallel ranks (powers of two) with which ZeRO-3 fits, everything else kept; None when even
    MAX_GPUS do not (the activations and the largest layer alone exceed the GPU) or the run trains adapters."""
    if t.lora_rank:
        return None
    ranks = max(t.world_size, 1)
    while ranks <= MAX_GPUS:
        ranks *= 2
        after = estimate(model, replace(t, deepspeed=True, zero_stage=3, world_size=ranks))
        if after.total <= memory and not after.leaves_out():
            return {"world_size": ranks, "total_bytes": after.total, "headroom_bytes": memory - after.total,
                    "how": f"{ranks} GPUs of this kind with ZeRO-3 (DeepSpeed stage 3 or FSDP full_shard)"}
    return None


def remedies(model: ModelSpec, t: Training, memory: int) -> Plan:
    """What would make the run fit a GPU of `memory` bytes (`needed` false where it fits with 10 % to spare)."""
    before = estimate(model, t)
    verdict = _verdict(before, memory)
    result: Plan = {"memory_bytes": memory, "before": verdict,
                    "needed": verdict["fits"] is not True or bool(verdict["tight"]),
                    "single": [], "combination": None, "more_gpus": None, "larger_gpu_bytes": None,
                    "nothing_fits": False}
    if not result["needed"]:
        return result
    single = singles(model, t, before, memory)
    result["single"] = single
    fitting = any(row["fits"] and not row["tight"] for row in single)
    if not fitting:
        result["combination"] = combination(model, t, before, memory)
    result["more_gpus"] = more_gpus(model, t, memory) if verdict["fits"] is not True else None
    if not fitting and not result["combination"]:
        result["nothing_fits"] = True
        result["larger_gpu_bytes"] = before.total
    return result


def _after(row: Remedy) -> str:
    from gpudoctor.units import gib

    total, headroom = row["total_bytes"], row["headroom_bytes"]
    if row["fits"] is None:
        verdict = "fits without the activations (not estimated)"
    elif row["fits"]:
        verdict = f"fits, {gib(headroom)} free" + (" (under 10 %)" if row.get("tight") else "")
    else:
        verdict = f"still {gib(-headroom)} short"
    host = f"; needs {gib(row['host_bytes'])} host RAM per node" if row["offload"] else ""
    return f"{gib(total)} per GPU, {verdict}{host}"


def lines(plan: Optional[Plan]) -> List[Tuple[str, str]]:
    """The plan as (text, how) lines, largest saving first; [] where nothing is needed."""
    from gpudoctor.units import gib

    if not plan or not plan["needed"]:
        return []
    out = [(f"−{gib(row['saving_bytes'])}  {row['title']} → {_after(row)}", "; ".join(row["how"]))
           for row in plan["single"]]
    together = plan["combination"]
    if together:
        out.append((f"together: {together['title']} → {_after(together)}", "; ".join(together["how"])))
    more = plan["more_gpus"]
    if more:
        out.append((f"more GPUs: {more['how']} → {gib(more['total_bytes'])} per GPU, fits, "
                    f"{gib(more['headroom_bytes'])} free", ""))
    if plan["nothing_fits"]:
        out.append(("nothing short of more or larger GPUs makes it fit: as it is, the run needs a GPU of at least "
                    f"{gib(plan['larger_gpu_bytes'])}", ""))
    return out


def summary(plan: Optional[Plan]) -> str:
    """The plan in one paragraph (GD501's fix): each change with its verdict, then what to set."""
    return " ".join(f"({n}) {text}{f' [{how}]' if how else ''}." for n, (text, how) in enumerate(lines(plan), 1))
