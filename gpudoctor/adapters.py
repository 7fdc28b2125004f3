"""LoRA and QLoRA in the memory estimate: the linear layers of a decoder, the adapters on them, quantized weights.

- A LoRA adapter on a linear layer (in → out) adds r·(in + out) trainable parameters (A: in×r, B: r×out, no bias:
  PEFT's `LoraConfig(bias="none")` default). PEFT matches `target_modules` by the module's last name, and
  "all-linear" takes every linear layer but the output layer (peft/tuners/tuners_utils.py
  `_maybe_include_all_linear_layers`). Without `--lora-targets` the targets are PEFT's default for the model type
  (`TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING`, peft/utils/constants.py).
- `get_peft_model(..., autocast_adapter_dtype=True)` (the default) keeps the adapters in fp32 beside bf16/fp16
  weights, so each trainable parameter costs 4 B of weight, 4 B of gradient and the fp32 optimizer states (Adam 8 B):
  no separate master copy.
- `--quantize 4bit`: bitsandbytes NF4 as transformers' `BitsAndBytesConfig(load_in_4bit=True)` loads it: every
  linear layer but the output layer (transformers/quantizers/base.py `get_keys_to_not_convert`) in 4 bits plus an
  fp32 absmax per 64-value block (`bnb_4bit_use_double_quant=False`, the default): 0.5625 B/param. `8bit`
  (LLM.int8): 1 B/param plus an fp32 scale per output row. PEFT's `prepare_model_for_kbit_training` then casts
  every other 16-bit parameter (embeddings, norms, output layer) to fp32 (peft/utils/other.py).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from gpudoctor.errors import InputError

ALL_LINEAR = "all-linear"
QUANTIZE = ("4bit", "8bit")
FOUR_BIT_BLOCK = 64  # bitsandbytes Params4bit blocksize default
# PEFT's default targets (peft/utils/constants.py) for the model types whose layers gpudoctor knows
DEFAULT_TARGETS = {"llama": ["q_proj", "v_proj"], "mistral": ["q_proj", "v_proj"], "qwen2": ["q_proj", "v_proj"],
                   "qwen3": ["q_proj", "v_proj"], "gemma": ["q_proj", "v_proj"], "gemma2": ["q_proj", "v_proj"],
                   "gpt2": ["c_attn"], "gpt_bigcode": ["c_attn"]}
LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gemma3_text", "olmo", "olmo2", "yi",
              "internlm2"}


class AdapterError(InputError, ValueError):
    """LoRA settings the estimate cannot cost (the CLI turns it into exit 2)."""


def decoder_linears(model_type: str, hidden: int, q: int, kv: int, intermediate: int,
                    gated: bool) -> Optional[List[List[Any]]]:
    """[[module name, in, out], …] of one decoder layer, in the model's own module names; None for an unknown
    layout. q and kv are the query and each key/value projection widths (heads × head_dim)."""
    if model_type in ("gpt2", "gpt_bigcode"):  # transformers' Conv1D c_attn holds q, k and v
        return [["c_attn", hidden, q + 2 * kv], ["c_proj", q, hidden], ["c_fc", hidden, intermediate],
                ["c_proj", intermediate, hidden]]
    if model_type == "phi3":  # fused qkv_proj and gate_up_proj
        return [["qkv_proj", hidden, q + 2 * kv], ["o_proj", q, hidden], ["gate_up_proj", hidden, 2 * intermediate],
                ["down_proj", intermediate, hidden]]
    if model_type in LLAMA_LIKE and gated:
        return [["q_proj", hidden, q], ["k_proj", hidden, kv], ["v_proj", hidden, kv], ["o_proj", q, hidden],
                ["gate_proj", hidden, intermediate], ["up_proj", hidden, intermediate],
                ["down_proj", intermediate, hidden]]
    return None


def parse_targets(text: Optional[str]) -> Optional[List[str]]:
    """`--lora-targets q_proj,v_proj` or `all-linear` → the list (None: PEFT's default for the model type)."""
    if text is None:
        return None
    names = [part.strip() for part in str(text).split(",") if part.strip()]
    if not names:
        raise AdapterError("--lora-targets is empty (module names such as q_proj,v_proj, or all-linear)")
    return names


def adapted(linears: Sequence[Sequence[Any]], model_type: Optional[str],
            targets: Optional[Sequence[str]]) -> Tuple[List[Sequence[Any]], List[str]]:
    """The linear layers LoRA adapts and the target names used; AdapterError for a name the layer lacks."""
    names = list(targets) if targets else DEFAULT_TARGETS.get(model_type or "")
    if not names:
        raise AdapterError(f"PEFT has no default LoRA targets for model_type {model_type!r} that gpudoctor knows; "
                           "give --lora-targets (e.g. all-linear)")
    if ALL_LINEAR in names:
        return list(linears), [ALL_LINEAR]
    known = {str(row[0]) for row in linears}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise AdapterError(f"--lora-targets {','.join(unknown)}: no such linear layer in a {model_type} decoder "
                           f"layer (it has {', '.join(sorted(known))}; or all-linear)")
    return [row for row in linears if row[0] in names], names


def lora_params(linears: Sequence[Sequence[Any]], layers: int, rank: int, model_type: Optional[str],
                targets: Optional[Sequence[str]]) -> Tuple[int, List[str]]:
    """Trainable LoRA parameters (r·(in + out) per adapted layer, in every decoder layer) and the targets used."""
    rows, names = adapted(linears, model_type, targets)
    return layers * sum(rank * (int(row[1]) + int(row[2])) for row in rows), names


def quantized_bytes(linears: Sequence[Sequence[Any]], layers: int, quantize: str) -> Tuple[int, int]:
    """(parameters quantized, their bytes): every decoder linear layer's weight (the output layer stays)."""
    params = bytes_ = 0
    for _, fan_in, fan_out in linears:
        weight = int(fan_in) * int(fan_out)
        params += weight
        if quantize == "4bit":
            bytes_ += weight // 2 + 4 * -(-weight // FOUR_BIT_BLOCK)
        else:
            bytes_ += weight + 4 * int(fan_out)
    return params * layers, bytes_ * layers


def lora_summary(model: Mapping[str, Any], rank: int, targets: Optional[Sequence[str]],
                 quantize: Optional[str]) -> Dict[str, Any]:
    """What the estimate needs of the adapters: trainable parameters, the targets, the quantized weights."""
    linears, layers = model.get("linears"), model.get("layers")
    if not linears or not layers:
        why = ("--model is a size" if model.get("kind") == "size" else
               f"the layers of model_type {model.get('model_type')!r} are not known to gpudoctor")
        raise AdapterError(f"--lora-rank needs the model's layer shapes ({why}); give a Hugging Face config.json "
                           "of a Llama, Mistral, Qwen2/3, Gemma, Phi-3 or GPT-2 model")
    trainable, names = lora_params(linears, layers, rank, model.get("model_type"), targets)
    quantized, quantized_b = quantized_bytes(linears, layers, quantize) if quantize else (0, 0)
    return {"trainable": trainable, "targets": names, "quantized_params": quantized, "quantized_bytes": quantized_b}
