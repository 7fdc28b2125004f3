"""Training memory per GPU, term by term (pure functions; GD501, GD504 and `gpudoctor estimate` use them).

Model states (weights, gradients, optimizer states), with Ψ parameters and N data-parallel ranks:
- Mixed precision Adam (bf16/fp16 with fp32 master weights): 2 B 16-bit weights + 2 B 16-bit gradients + 12 B
  optimizer states (fp32 master 4 + momentum 4 + variance 4) = 16 B/param — Rajbhandari et al., "ZeRO: Memory
  Optimizations Toward Training Trillion Parameter Models", arXiv:1910.02054, §3.1 (K = 12). fp32 Adam: 4 + 4 + 8.
- ZeRO partitions the optimizer states over N from stage 1, the gradients from stage 2, the weights at stage 3
  (ibid. §5, Figure 1).
- Under DeepSpeed (a DeepSpeed config or `--zero-stage` given) mixed precision also keeps an fp32 gradient
  partition (4Ψ/N) for the optimizer step, and ZeRO-3 holds the largest layer gathered (4 B × its params); ZeRO-3
  keeps no persistent 16-bit gradients (they are reduce-scattered in buckets). These follow DeepSpeed's own
  estimators `estimate_zero2_model_states_mem_needs` / `estimate_zero3_model_states_mem_needs` (0.19.8), which the
  tests call: stage 2 GPU = 2Ψ + 18Ψ/N, stage 3 GPU = 4·largest_layer + 18Ψ/N, and their offload variants.
- offload_optimizer (cpu) moves the optimizer states and the fp32 gradients to the host (and, per DeepSpeed's
  estimator, the GPU keeps no gradient partition at stage 2); offload_param (cpu, stage 3) moves the 16-bit weight
  partition too. NVMe offload moves them to disk (host buffers not modelled).
- Host RAM (per node, DeepSpeed's estimator factors with additional_buffer_factor 1.5): every rank loads the model
  in fp32 (4Ψ each; ZeRO-3 with zero.Init only the largest layer), and offloaded states need their bytes per node.

Activations — Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
arXiv:2205.05198, §4.1 eq. (1): s·b·h·(34 + 5·a·s/h) bytes per layer (16-bit activations, no tensor/sequence
parallelism). With memory-efficient attention (FlashAttention / PyTorch SDPA, the default here) the a·s² score
matrices are not stored and the term 5as/h drops (the paper's "selective recomputation", §5: 34·s·b·h). Full
activation checkpointing keeps 2·s·b·h per layer plus one layer's activations while it is recomputed (§4.2). The
output layer's fp32 logits add 4·s·b·v (§4.1). fp32 training doubles the 16-bit figures (approximation).

Overhead: a fixed 1 GiB for the CUDA context (0.3-0.6 GiB with PyTorch's kernels loaded), cuBLAS workspaces, NCCL
buffers and allocator fragmentation. Communication buckets are not modelled.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, TypedDict

from gpudoctor.adapters import LLAMA_LIKE, decoder_linears, lora_summary
from gpudoctor.errors import InputError
from gpudoctor.redact import cut
from gpudoctor.training_settings import DEFAULTS
from gpudoctor.units import GiB, gib

OVERHEAD_BYTES = 1 * GiB  # CUDA context + workspaces + NCCL buffers + fragmentation (see module docstring)
HOST_BUFFER_FACTOR = 1.5  # DeepSpeed's additional_buffer_factor default
HEADROOM_WARNING = 0.10  # GD501 warns below 10 % free
MAX_CONFIG_BYTES = 10 * 2**20  # a config.json is a few KiB
MAX_DIMENSION = 10**9  # hidden size, layers, heads, vocabulary: anything larger is not a real model
GATED_TYPES = LLAMA_LIKE | {"phi3", "mixtral"}
FOUR_NORM_TYPES = {"gemma2", "gemma3", "gemma3_text"}  # a norm before and after attention and the MLP
QK_NORM_TYPES = {"qwen3", "gemma3", "gemma3_text"}  # an RMSNorm of head_dim on the queries and on the keys
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbt])?\s*$", re.IGNORECASE)
_SCALE = {None: 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


class ModelError(InputError, ValueError):
    """`--model` is neither a size nor a readable config.json (the CLI turns it into exit 2)."""


# --- the model -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSpec:
    """What the estimate knows of the model; shape fields are None when it was given as a size."""

    source: str
    params: int
    kind: str = "size"  # size | config
    layers: Optional[int] = None
    hidden: Optional[int] = None
    heads: Optional[int] = None
    kv_heads: Optional[int] = None
    intermediate: Optional[int] = None
    vocab: Optional[int] = None
    largest_layer_params: Optional[int] = None
    model_type: Optional[str] = None
    experts: Optional[int] = None  # a mixture of experts: every expert's MLP is held and trained
    linears: Optional[List[List[Any]]] = None  # one decoder layer's [[module name, in, out], …] (gpudoctor.adapters)
    shape_from: Optional[str] = None  # where the shape came from when not a config.json given by path

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelSpec:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def parse_size(text: str) -> Optional[int]:
    """`0.5B`, `7e9`, `1.3b`, `350M`, `494032768` → parameters; None when the text is not a size."""
    match = _SIZE.match(str(text))
    if not match:
        return None
    value = float(match.group(1)) * _SCALE[(match.group(2) or "").lower() or None]
    if not 1 <= value <= 1e15:
        return None
    return int(round(value))


def _int(config: Mapping[str, Any], *names: str) -> Optional[int]:
    for name in names:
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            if value > MAX_DIMENSION:
                raise ModelError(f"the config's {name} ({len(str(value))} digits) is not a model dimension "
                                 f"(at most {MAX_DIMENSION:,})")
            return value
    return None


@dataclass(frozen=True)
class _Layout:
    """What count_params reads from a config: the dimensions, and how the layers are built."""

    hidden: int
    layers: int
    heads: int
    vocab: int
    kv_heads: int
    head_dim: int
    intermediate: int
    experts: int
    model_type: str
    gated: bool  # SwiGLU/GeGLU: gate, up and down projections
    attention_bias: bool
    mlp_bias: bool
    tied: bool  # the lm_head shares the embeddings' weights
    gpt2: bool  # LayerNorm and linear biases everywhere, learned positions
    positions: int  # learned position embeddings (GPT-2), else 0


def _layout(config: Mapping[str, Any]) -> _Layout:
    """The config's dimensions under their Hugging Face names (Llama's, GPT-2's, T5's), with transformers' defaults
    where it leaves one out; a ModelError when a dimension count_params needs is missing."""
    if isinstance(config.get("text_config"), dict) and _int(config, "hidden_size", "n_embd") is None:
        config = config["text_config"]
    experts = _int(config, "num_local_experts", "num_experts", "n_routed_experts") or 1
    required = {"hidden_size": _int(config, "hidden_size", "n_embd", "d_model"),
                "num_hidden_layers": _int(config, "num_hidden_layers", "n_layer", "num_layers"),
                "num_attention_heads": _int(config, "num_attention_heads", "n_head"),
                "vocab_size": _int(config, "vocab_size")}
    missing = [name for name, value in required.items() if value is None]
    if missing:
        raise ModelError(f"the config has no {', '.join(missing)} (a Hugging Face transformer config.json?)")
    hidden, layers, heads, vocab = (int(value or 0) for value in required.values())
    kv_heads = _int(config, "num_key_value_heads") or heads
    head_dim = _int(config, "head_dim") or hidden // heads
    intermediate = _int(config, "intermediate_size", "n_inner", "ffn_hidden_size") or 4 * hidden
    model_type = str(config.get("model_type") or "")
    attention_bias = config.get("attention_bias")
    gpt2 = model_type in ("gpt2", "gpt_bigcode")
    return _Layout(
        hidden=hidden, layers=layers, heads=heads, vocab=vocab, kv_heads=kv_heads, head_dim=head_dim,
        intermediate=intermediate, experts=experts, model_type=model_type,
        gated=model_type in GATED_TYPES or str(config.get("hidden_act", "")).lower() in ("silu", "swiglu"),
        attention_bias=attention_bias if isinstance(attention_bias, bool) else model_type in ("qwen2", "gpt2"),
        mlp_bias=config.get("mlp_bias") is True or gpt2,
        tied=config.get("tie_word_embeddings", True) is not False,  # transformers' PretrainedConfig default is True
        gpt2=gpt2, positions=(_int(config, "n_positions", "max_position_embeddings") or 0) if gpt2 else 0)


def count_params(config: Mapping[str, Any]) -> Tuple[int, dict]:
    """Parameters of a decoder-only transformer from its Hugging Face config (and the shape used).

    embeddings v·h (+ an untied lm_head v·h, + learned positions for GPT-2); per layer: q h·(a·d), k and v h·(kv·d)
    each, o (a·d)·h, biases on q/k/v when `attention_bias` (Qwen2 always has them), gated MLP 3·h·i (SwiGLU: gate,
    up, down) or 2·h·i — times the experts, plus a router h·E, for a mixture of experts —, norms of h (two; four in
    Gemma 2/3; with biases in GPT-2's LayerNorm) and Qwen3's/Gemma 3's q/k norms of d; a final norm of h.
    Qwen2.5-0.5B gives 494,032,768; rules/models.toml's published counts are held against it in the tests.
    """
    m = _layout(config)
    hidden, intermediate, experts = m.hidden, m.intermediate, m.experts
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    attention = (hidden * q + 2 * hidden * kv + q * hidden + ((q + 2 * kv) if m.attention_bias else 0)
                 + (hidden if m.gpt2 else 0) + (2 * m.head_dim if m.model_type in QK_NORM_TYPES else 0))
    bias = ((2 * intermediate if m.gated else intermediate) + hidden) if m.mlp_bias else 0
    mlp = experts * ((3 if m.gated else 2) * hidden * intermediate + bias) + (hidden * experts if experts > 1 else 0)
    norm = 2 * hidden if m.gpt2 else hidden
    per_layer = attention + mlp + (4 if m.model_type in FOUR_NORM_TYPES else 2) * norm
    embeddings = m.vocab * hidden * (1 if m.tied else 2) + m.positions * hidden
    total = embeddings + m.layers * per_layer + norm
    shape = {"layers": m.layers, "hidden": hidden, "heads": m.heads, "kv_heads": m.kv_heads,
             "intermediate": intermediate, "vocab": m.vocab,
             "largest_layer_params": max(m.vocab * hidden, hidden * intermediate, hidden * q),
             "model_type": m.model_type or None, "experts": experts if experts > 1 else None,
             "linears": None if experts > 1 else decoder_linears(m.model_type, hidden, q, kv, intermediate, m.gated)}
    return total, shape


MIN_PARAMS = 1_000_000  # below this, `--model 7` meant 7B, not seven parameters


def load_model(text: str) -> ModelSpec:
    """`--model`: a size, the path of a Hugging Face config.json (read as JSON, never executed), or a Hub id whose
    config is in the local Hugging Face cache or in rules/models.toml (gpudoctor.hub; never downloaded)."""
    from gpudoctor.hub import hub_config, looks_like_hub_id

    params = parse_size(text)
    if params is not None and params < MIN_PARAMS:
        raise ModelError(f"--model {cut(text, 60)!r} reads as {params:,} parameters, too small for a model: give a "
                         f"unit (7B, 350M) or the model's config.json")
    if params is not None:
        return ModelSpec(source=str(text), params=params)
    path = Path(text)
    try:
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"
        found = path.is_file()
    except OSError:  # a name too long for a path (400 digits), a loop of links
        found = False
    if found:
        return _from_config(_read_config(path), str(path))
    if looks_like_hub_id(text):
        cached, config, origin = hub_config(text)
        if cached is not None:
            return _from_config(_read_config(cached), text, origin)
        if config is not None:
            return _from_config(config, text, origin)
        raise ModelError(f"--model {cut(text, 60)!r}: neither a size (0.5B, 7e9, 1.3b), a config.json file, nor a "
                         "Hugging Face model id in the local Hugging Face cache or gpudoctor's table of published "
                         f"configs; download its config.json (huggingface-cli download {cut(text, 60)} config.json) "
                         "and give its path")
    raise ModelError(f"--model {cut(text, 60)!r}: neither a size (0.5B, 7e9, 1.3b), a config.json file nor a "
                     "Hugging Face model id (Qwen/Qwen2.5-0.5B)")


def _from_config(config: Mapping[str, Any], source: str, origin: Optional[str] = None) -> ModelSpec:
    total, shape = count_params(config)
    return ModelSpec(source=source, params=total, kind="config", shape_from=origin, **shape)


def _read_config(path: Path) -> dict:
    from gpudoctor.files import read_bytes

    try:
        data = json.loads(read_bytes(str(path), MAX_CONFIG_BYTES).decode("utf-8-sig"))
    except RecursionError:
        raise ModelError(f"{str(path)!r} is not a config: JSON nested too deeply") from None
    except OSError as exc:
        raise ModelError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ModelError(f"{str(path)!r} is not a JSON config (not UTF-8 text)") from None
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)[:100]
        raise ModelError(f"{str(path)!r} is not JSON: {reason}{where}") from None
    if not isinstance(data, dict):
        raise ModelError(f"{str(path)!r} is not a config object ({{...}})")
    return data


def assumed_shape(spec: ModelSpec) -> ModelSpec:
    """A model given as a size, with the layer shapes of the Llama-like decoder in rules/models.toml nearest its
    size (LoRA needs the shapes); the parameter count stays the size given, and `shape_from` says what was assumed."""
    from gpudoctor.knowledge import table

    entries = [entry for entry in table("models").get("model", []) if entry["model_type"] in LLAMA_LIKE]
    nearest = min(entries, key=lambda entry: abs(entry["params"] - spec.params))
    _, shape = count_params({k: v for k, v in nearest.items() if k not in ("id", "also", "params", "source")})
    return ModelSpec(source=spec.source, params=spec.params, kind="size", shape_from=(
        f"{nearest['id']} ({nearest['params'] / 1e9:.1f}B, {shape['layers']} layers, hidden {shape['hidden']}), "
        f"assumed as the Llama-like decoder nearest {spec.source}"), **shape)


# --- the training setup --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Training:
    precision: str = "bf16"
    optimizer: str = "adamw"
    zero_stage: int = 0
    offload_optimizer: str = "none"  # none | cpu | nvme
    offload_param: str = "none"
    micro_batch: int = 1
    seq_len: int = 2048
    world_size: int = 1
    gpus_per_node: int = 1
    checkpointing: bool = False
    attention: str = "flash"
    deepspeed: bool = False
    zero_init: bool = True
    lora_rank: Optional[int] = None  # LoRA adapters of this rank; the base model frozen (gpudoctor.adapters)
    lora_targets: Optional[Tuple[str, ...]] = None  # None: PEFT's default for the model type
    quantize: Optional[str] = None  # 4bit | 8bit base weights (QLoRA)


def _ds_settings(config: Mapping[str, Any]) -> Dict[str, Any]:
    """What a DeepSpeed config says (values "auto" or malformed are left out: they fall back to defaults)."""
    found = _zero_settings(config.get("zero_optimization"))
    micro = config.get("train_micro_batch_size_per_gpu")
    if isinstance(micro, int) and not isinstance(micro, bool) and micro > 0:
        found["micro_batch"] = micro
    precision = _ds_precision(config)
    if precision:
        found["precision"] = precision
    optimizer = config.get("optimizer")
    if isinstance(optimizer, dict) and isinstance(optimizer.get("type"), str):
        name = optimizer["type"].lower()
        found["optimizer"] = "sgd" if "sgd" in name else "adamw" if "adamw" in name else "adam"
    return found


def _zero_settings(zero: Any) -> Dict[str, Any]:
    """The ZeRO stage and offload devices of a DeepSpeed config's `zero_optimization` (a section or a bool)."""
    if isinstance(zero, bool):
        return {"zero_stage": 1 if zero else 0}
    if not isinstance(zero, dict):
        return {"zero_stage": 0}
    found: Dict[str, Any] = {}
    stage = zero.get("stage", 0)
    if isinstance(stage, int) and not isinstance(stage, bool) and 0 <= stage <= 3:
        found["zero_stage"] = stage
    for key in ("offload_optimizer", "offload_param"):
        section = zero.get(key)
        if isinstance(section, dict) and isinstance(section.get("device"), str):
            device = section["device"].lower()
            found[key] = device if device in ("cpu", "nvme") else "none"
    if isinstance(zero.get("cpu_offload"), bool) and zero["cpu_offload"]:  # the deprecated form
        found.setdefault("offload_optimizer", "cpu")
    return found


def _ds_precision(config: Mapping[str, Any]) -> Optional[str]:
    """The precision a DeepSpeed config enables; fp32 when no precision section is enabled or "auto" (DeepSpeed
    trains in fp32 unless told otherwise); None when one is left to "auto"."""
    found = None
    for key in ("bf16", "bfloat16", "fp16"):
        section = config.get(key)
        if isinstance(section, dict) and section.get("enabled") is True:
            found = "fp16" if key == "fp16" else "bf16"
    if found is None and all(not (isinstance(config.get(k), dict) and config[k].get("enabled") in (True, "auto"))
                             for k in ("bf16", "bfloat16", "fp16")):
        return "fp32"
    return found


def resolve(flags: Mapping[str, Any], ds_config: Optional[Mapping[str, Any]], ds_path: Optional[str],
            gpus_used: int, world_env: Optional[str]) -> Tuple[Training, Dict[str, Any]]:
    """The training setup and where each value came from: CLI flags, then the DeepSpeed config, then defaults."""
    ds = _ds_settings(ds_config) if isinstance(ds_config, Mapping) else {}
    values: Dict[str, Any] = {}
    sources: Dict[str, str] = {}
    for key, default in (("precision", DEFAULTS["precision"]), ("optimizer", DEFAULTS["optimizer"]),
                         ("zero_stage", 0), ("offload_optimizer", "none"), ("offload_param", "none"),
                         ("micro_batch", DEFAULTS["micro_batch"]), ("seq_len", DEFAULTS["seq_len"]),
                         ("checkpointing", DEFAULTS["checkpointing"]), ("attention", DEFAULTS["attention"])):
        if flags.get(key) is not None:
            values[key], sources[key] = flags[key], "flag"
        elif key in ds:
            values[key], sources[key] = ds[key], f"DeepSpeed config {ds_path or ''}".strip()
        else:
            values[key], sources[key] = default, "default"
    if flags.get("world_size"):
        world, sources["world_size"] = int(flags["world_size"]), "flag"
    elif world_env and str(world_env).isdigit() and int(world_env) > 0:
        world, sources["world_size"] = int(world_env), "WORLD_SIZE"
    elif gpus_used > 0:
        world, sources["world_size"] = gpus_used, "GPUs the job uses on this machine"
    else:
        world, sources["world_size"] = 1, "default"
    per_node = min(world, gpus_used) if gpus_used > 0 else world
    deepspeed = ds_config is not None or flags.get("zero_stage") is not None
    training = Training(
        precision=values["precision"], optimizer=values["optimizer"], zero_stage=int(values["zero_stage"]),
        offload_optimizer=values["offload_optimizer"], offload_param=values["offload_param"],
        micro_batch=int(values["micro_batch"]), seq_len=int(values["seq_len"]), world_size=world,
        gpus_per_node=max(per_node, 1), checkpointing=bool(values["checkpointing"]), attention=values["attention"],
        deepspeed=deepspeed, lora_rank=flags.get("lora_rank"),
        lora_targets=tuple(flags["lora_targets"]) if flags.get("lora_targets") else None,
        quantize=flags.get("quantize"))
    return training, sources


# --- the estimate --------------------------------------------------------------------------------------

class Verdict(TypedDict):
    """Whether an estimate fits a GPU (`fits` None: it leaves a term out and fits without it)."""

    total_bytes: int
    headroom_bytes: int
    fits: Optional[bool]
    tight: bool  # fits with less than HEADROOM_WARNING to spare
    host_bytes: int


class Remedy(Verdict):
    """One change, or changes together, and the verdict after it (gpudoctor.remedies)."""

    keys: List[str]
    title: str
    how: List[str]
    saving_bytes: int
    offload: bool


class MoreGpus(TypedDict):
    """The fewest data-parallel ranks with which ZeRO-3 fits."""

    world_size: int
    total_bytes: int
    headroom_bytes: int
    how: str


class Plan(TypedDict):
    """What would make a run fit a GPU of `memory_bytes` (gpudoctor.remedies.remedies)."""

    memory_bytes: int
    before: Verdict
    needed: bool
    single: List[Remedy]
    combination: Optional[Remedy]
    more_gpus: Optional[MoreGpus]
    larger_gpu_bytes: Optional[int]
    nothing_fits: bool


@dataclass(frozen=True)
class Estimate:
    params: int
    weights: int
    gradients: int
    optimizer: int
    activations: int
    overhead: int
    host_bytes: int
    offload: bool
    assumptions: Dict[str, Any] = field(default_factory=dict)
    activations_known: bool = True
    remedies: Optional[Plan] = None  # what would make it fit the smallest GPU compared (gpudoctor.remedies)

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.overhead

    def breakdown(self) -> Dict[str, Optional[int]]:
        """The terms in bytes; activations are None when they could not be estimated (model given as a size)."""
        return {"weights": self.weights, "gradients": self.gradients, "optimizer": self.optimizer,
                "activations": self.activations if self.activations_known else None, "overhead": self.overhead}

    def setup_text(self) -> str:
        """`bf16, AdamW, ZeRO-2, micro batch 4, seq 2048, 8 rank(s), offload optimizer to cpu`: what was assumed."""
        a = self.assumptions
        offload = [f"{what} to {where}" for what, where in a["offload"].items() if where != "none"]
        parts = [a["precision"], a["optimizer"], f"ZeRO-{a['zero_stage']}" if a["engine"] == "deepspeed" else "no ZeRO",
                 f"micro batch {a['micro_batch']}", f"seq {a['seq_len']}", f"{a['world_size']} rank(s)"]
        if offload:
            parts.append("offload " + ", ".join(offload))
        if a["activation_checkpointing"]:
            parts.append("activation checkpointing")
        return ", ".join(parts)

    def terms_text(self) -> str:
        """`weights 0.9 GiB + gradients 0.9 GiB + … = 10.9 GiB`."""
        parts = " + ".join(f"{name} {gib(value) if value is not None else 'not estimated'}"
                           for name, value in self.breakdown().items())
        return f"{parts} = {gib(self.total)}"

    def leaves_out(self) -> List[str]:
        """The terms the total leaves out (activations of a model given as a size or a mixture of experts)."""
        return [] if self.activations_known else ["activations"]

    def gpu_rows(self, gpus: List[Tuple[str, Optional[int]]]) -> List[dict]:
        """Per GPU: `fits` is true or false only where the estimate says so; null where the memory is unknown, or
        where what the estimate counts fits but it leaves a term out (`leaves_out`)."""
        rows = []
        for name, memory in gpus:
            headroom = None if memory is None else memory - self.total
            fits = None if headroom is None or (headroom >= 0 and self.leaves_out()) else headroom >= 0
            rows.append({"name": name, "memory_bytes": memory, "fits": fits, "headroom_bytes": headroom,
                         "leaves_out": self.leaves_out()})
        return rows

    def to_json(self, gpus: List[Tuple[str, Optional[int]]]) -> dict:
        return {"schema": "gpudoctor.estimate/1", "params": self.params, "total_bytes_per_gpu": self.total,
                "breakdown": self.breakdown(), "leaves_out": self.leaves_out(), "host_bytes": self.host_bytes,
                "gpus": self.gpu_rows(gpus), "remedies": self.remedies, "assumptions": self.assumptions}


def state_bytes(precision: str, optimizer: str) -> Tuple[int, int, int, int]:
    """(weight, 16-bit-or-fp32 gradient, extra fp32 gradient under DeepSpeed, optimizer) bytes per parameter."""
    moments = {"sgd": 4, "adamw8bit": 2}.get(optimizer, 8)  # bitsandbytes' 8-bit Adam: 1 B momentum + 1 B variance
    if precision == "fp32":
        return 4, 4, 0, moments
    return 2, 2, 4, 4 + moments  # fp32 master 4 + momentum (+ variance)


def model_states(params: int, largest_layer: int, t: Training) -> Tuple[int, int, int, int]:
    """(weights, gradients, optimizer) bytes on each GPU and the offloaded bytes per rank on the host."""
    n = max(t.world_size, 1)
    weight_b, grad_b, fp32_grad_b, opt_b = state_bytes(t.precision, t.optimizer)
    if not t.deepspeed:
        fp32_grad_b = 0  # plain DDP/AMP: the ZeRO paper's 2 + 2 + 12
    stage = t.zero_stage if t.deepspeed else 0
    off_opt = stage >= 1 and t.offload_optimizer in ("cpu", "nvme")
    off_param = stage == 3 and t.offload_param in ("cpu", "nvme")
    host = 0
    # optimizer states (and the fp32 gradient partition they are updated from)
    opt = opt_b * params // n if stage >= 1 else opt_b * params
    fp32_grads = fp32_grad_b * params // n if stage >= 1 else fp32_grad_b * params
    if off_opt:
        if t.offload_optimizer == "cpu":
            host += (opt_b + fp32_grad_b) * params // n
        opt, fp32_grads = 0, 0
    # gradients in the training precision
    if stage == 3:
        grads16 = 0  # reduce-scattered in buckets; the gathered layer's are in the working set below
    elif stage == 2:
        grads16 = 0 if off_opt else grad_b * params // n
    else:
        grads16 = grad_b * params
    if stage == 3 and fp32_grad_b == 0 and not off_opt:
        fp32_grads = grad_b * params // n  # fp32 training: the gradient partition is the fp32 one
    # weights
    if stage == 3:
        partition = weight_b * params // n
        if off_param:
            if t.offload_param == "cpu":
                host += partition
            partition = 0
        weights = partition + 2 * weight_b * largest_layer  # gathered params + grads of the largest layer
    else:
        weights = weight_b * params
    return weights, grads16 + fp32_grads, opt, host


def adapter_states(model: ModelSpec, t: Training) -> Tuple[int, int, int, Dict[str, Any]]:
    """LoRA/QLoRA (the base frozen, gpudoctor.adapters): (weights, gradients, optimizer) bytes on each GPU and the
    adapters' summary. ZeRO partitions them as it partitions full weights (stage 3: the base too)."""
    assert t.lora_rank
    lora = lora_summary(model.to_json(), t.lora_rank, t.lora_targets, t.quantize)
    n, stage, trainable = max(t.world_size, 1), (t.zero_stage if t.deepspeed else 0), lora["trainable"]
    base_b = 4 if t.precision == "fp32" or t.quantize else 2  # prepare_model_for_kbit_training: the rest in fp32
    weights = (model.params - lora["quantized_params"]) * base_b + lora["quantized_bytes"] + 4 * trainable
    gradients, optimizer = 4 * trainable, state_bytes("fp32", t.optimizer)[3] * trainable  # fp32 adapters
    if stage >= 1:
        optimizer //= n
    if stage >= 2:
        gradients //= n
    if stage == 3:
        weights = weights // n + 2 * base_b * (model.largest_layer_params or 0)
    return weights, gradients, optimizer, lora


def host_bytes(params: int, largest_layer: int, offloaded_per_rank: int, t: Training) -> int:
    """Host RAM per node, with DeepSpeed's estimator factors (each rank loads the fp32 model; offloaded states)."""
    g = max(t.gpus_per_node, 1)
    offloaded = offloaded_per_rank * g
    stage = t.zero_stage if t.deepspeed else 0
    if stage == 3 and t.zero_init:
        need = offloaded if offloaded else 4 * largest_layer * g
    else:
        need = max(4 * params * g, offloaded)
    return int(need * HOST_BUFFER_FACTOR)


ACTIVATION_FORMULAS = {
    "gated": "transformers' gated decoder: (6h per norm + 10q + 8kv + 8i)·sb per layer (+ 5as²b eager) + 4sbv",
    "korthikanti": "Korthikanti et al. (arXiv:2205.05198) sbh(34 + 5as/h) per layer + 4sbv",
}


def gated_widths(model: ModelSpec) -> Optional[Tuple[int, int, int]]:
    """(query width, each key/value width, MLP width) of a gated (SwiGLU/GeGLU) decoder layer from its linear
    layers; None for another layout."""
    widths = {name: (i, o) for name, i, o in model.linears or []}
    if "gate_proj" in widths and "q_proj" in widths and "k_proj" in widths:
        return widths["q_proj"][1], widths["k_proj"][1], widths["gate_proj"][1]
    if "gate_up_proj" in widths and "qkv_proj" in widths and "o_proj" in widths:  # Phi-3's fused projections
        q = widths["o_proj"][0]
        return q, (widths["qkv_proj"][1] - q) // 2, widths["gate_up_proj"][1] // 2
    return None


def layer_activation_bytes(model: ModelSpec, t: Training) -> int:
    """One decoder layer's activations kept for the backward pass, in 16-bit training (see activation_bytes)."""
    s, b, h, a = t.seq_len, t.micro_batch, model.hidden or 0, model.heads or 0
    scores = 5 * a * s * s * b if t.attention == "eager" else 0
    gated = gated_widths(model)
    if gated is None:
        return 34 * s * b * h + scores
    q, kv, i = gated
    norms = 4 if model.model_type in FOUR_NORM_TYPES else 2
    qk_norms = 6 * (q + kv) if model.model_type in QK_NORM_TYPES else 0
    return s * b * (6 * norms * h + 10 * q + 8 * kv + 8 * i + qk_norms) + scores


def activation_bytes(model: ModelSpec, t: Training) -> Optional[int]:
    """Activations kept for the backward pass; None when the model's shape is unknown (given as a size).

    A gated decoder as transformers writes it (Llama, Mistral, Qwen2/3, Gemma, Phi-3) keeps per token and layer, in
    bytes: 6h per RMSNorm (its fp32 input and its 16-bit output; two norms, four in Gemma 2/3), 10q + 8kv for the
    attention (q, k, v, their rotary copies and rotated outputs, the SDPA output and o_proj's input; q and kv the
    query and key/value widths) and 8i for the MLP (gate, its activation, up, their product); Qwen3's and Gemma 3's
    q/k norms add 6(q + kv). Measured within 4 % of autograd's saved tensors (benchmarks/estimate_activations.py).
    Other layouts follow Korthikanti et al. (arXiv:2205.05198) §4.1: 34sbh per layer. Eager attention adds the a·s²
    scores, 5as²b per layer (ibid.). Activation checkpointing keeps 2sbh per layer plus one layer while it is
    recomputed (§4.2). fp32 training doubles the 16-bit figures; the fp32 logits add 4sbv.
    """
    if not (model.layers and model.hidden and model.heads) or model.experts:
        return None
    s, b, h, layers = t.seq_len, t.micro_batch, model.hidden, model.layers
    per_layer = layer_activation_bytes(model, t)
    layer_total = 2 * s * b * h * layers + per_layer if t.checkpointing else per_layer * layers
    if t.precision == "fp32":
        layer_total *= 2
    return layer_total + 4 * s * b * (model.vocab or 0)


def estimate(model: ModelSpec, t: Training, sources: Optional[Mapping[str, str]] = None) -> Estimate:
    largest = model.largest_layer_params or 0
    notes: List[str] = []
    lora: Optional[Dict[str, Any]] = None
    if t.lora_rank:
        weights, gradients, optimizer, lora = adapter_states(model, t)
        offloaded = 0
        lora = {"rank": t.lora_rank, "quantize": t.quantize, **lora}
        notes += _lora_notes(t, lora)
    else:
        weights, gradients, optimizer, offloaded = model_states(model.params, largest, t)
    activations = activation_bytes(model, t)
    notes += _setup_notes(model, t, activations is not None, bool(lora))
    offload = "cpu" in (t.offload_optimizer, t.offload_param if t.zero_stage == 3 else "none")
    assumptions = {
        "model": model.source, "params": model.params, "precision": t.precision, "optimizer": t.optimizer,
        "engine": "deepspeed" if t.deepspeed else "plain", "zero_stage": t.zero_stage if t.deepspeed else 0,
        "offload": {"optimizer": t.offload_optimizer, "param": t.offload_param},
        "micro_batch": t.micro_batch, "seq_len": t.seq_len, "world_size": t.world_size,
        "gpus_per_node": t.gpus_per_node, "activation_checkpointing": t.checkpointing, "attention": t.attention,
        "layers": model.layers, "hidden": model.hidden, "heads": model.heads, "vocab": model.vocab,
        "largest_layer_params": model.largest_layer_params, "overhead_bytes": OVERHEAD_BYTES,
        "host_buffer_factor": HOST_BUFFER_FACTOR, "lora": lora, "sources": dict(sources or {}), "notes": notes,
        "formulas": {"model_states": "ZeRO (arXiv:1910.02054) + DeepSpeed 0.19.8 estimators"
                                     + (" + LoRA (arXiv:2106.09685) adapters as PEFT builds them" if lora else ""),
                     "activations": ACTIVATION_FORMULAS["gated" if gated_widths(model) else "korthikanti"]},
    }
    return Estimate(params=model.params, weights=weights, gradients=gradients, optimizer=optimizer,
                    activations=activations or 0, overhead=OVERHEAD_BYTES,
                    host_bytes=host_bytes(model.params, largest, offloaded, t), offload=offload,
                    assumptions=assumptions, activations_known=activations is not None)


def _lora_notes(t: Training, lora: Dict[str, Any]) -> List[str]:
    """What the estimate assumes of LoRA adapters (and leaves out with them)."""
    notes = [f"LoRA r={t.lora_rank} on {','.join(lora['targets'])}: {lora['trainable']:,} trainable "
             "parameters in fp32 (PEFT's default), the base frozen"
             + (f" ({t.quantize} linear layers, the rest fp32 as prepare_model_for_kbit_training casts them)"
                if t.quantize else "")]
    if t.offload_optimizer != "none" or t.offload_param != "none":
        notes.append("offload is not modelled with LoRA: the adapters' states are counted on the GPU")
    return notes


def _setup_notes(model: ModelSpec, t: Training, activations_known: bool, lora: bool) -> List[str]:
    """What the estimate assumes of the model and the setup, and what it leaves out."""
    notes = []
    if model.shape_from:
        notes.append(f"model shape: {model.shape_from}")
    if not activations_known:
        notes.append("activations not estimated: " + (
            f"a mixture of {model.experts} experts (tokens routed to some of them) is not modelled" if model.experts
            else "--model is a size; give the model's config.json or Hub id for its shape"))
    if (t.zero_stage if t.deepspeed else 0) == 3 and not model.largest_layer_params:
        notes.append("ZeRO-3 working set of the largest layer not counted (unknown for a size)")
    if t.offload_param != "none" and t.zero_stage != 3:
        notes.append("offload_param is ignored below ZeRO stage 3")
    if "nvme" in (t.offload_optimizer, t.offload_param):
        notes.append("NVMe offload: the states go to disk; pinned host buffers not counted")
    if not t.deepspeed and not lora:
        notes.append("no DeepSpeed config: plain data parallel (DDP/AMP), model states 16 B/param mixed or fp32")
    notes.append("data parallel only: tensor/pipeline parallelism not modelled; communication buckets not counted")
    if t.world_size > 1 and t.gpus_per_node == t.world_size:
        notes.append(f"host RAM assumes all {t.world_size} ranks on one node ({t.gpus_per_node} GPUs per node); "
                     f"it is per node, so fewer GPUs per node need less")
    return notes


# --- from snapshot facts (the rules) --------------------------------------------------------------------

def _first_ds_config(facts) -> Tuple[Optional[dict], Optional[str]]:
    value = facts.get("ds_config", None)
    items = value if isinstance(value, list) else [value] if value else []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("config"), dict):
            return item["config"], str(item.get("path") or "")
    return None, None


def setup_from_facts(facts, gpus_used: int) -> Optional[Tuple[ModelSpec, Training, Dict[str, Any]]]:
    """The model, the training setup and where each setting came from, for `facts["model"]` (None without
    --model), with `facts["ds_config"]` and WORLD_SIZE."""
    model = facts.get("model", None)
    if not isinstance(model, Mapping) or not model.get("params"):
        return None
    config, path = _first_ds_config(facts)
    training, sources = resolve(model.get("training") or {}, config, path, gpus_used, facts.env("WORLD_SIZE"))
    return ModelSpec.from_json(model), training, sources


def from_facts(facts, gpus_used: int) -> Optional[Estimate]:
    """The estimate for `facts["model"]` (None without --model)."""
    setup = setup_from_facts(facts, gpus_used)
    return None if setup is None else estimate(*setup)


def model_fact(spec: ModelSpec, flags: Mapping[str, Any]) -> dict:
    """`facts["model"]`: the model description plus the training flags given on the command line (a size with LoRA
    takes the shapes of the nearest Llama-like decoder, saying so)."""
    if flags.get("lora_rank") and spec.kind == "size" and not spec.linears:
        spec = assumed_shape(spec)
    return {**spec.to_json(), "training": {k: v for k, v in flags.items() if v is not None}}
