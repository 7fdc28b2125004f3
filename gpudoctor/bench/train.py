"""`gpudoctor bench train`: real training steps of a small GPT-style transformer (torch.nn, AdamW).

FLOPs per step follow the PaLM paper's model-FLOPs accounting (Chowdhery et al. 2022, appendix B, "MFU"):
6·N per token for the parameter matmuls (forward 2N + backward 4N) plus 12·L·H·Q·T per token for the
attention scores and values (L layers, H heads of width Q, so H·Q = hidden, T = sequence length); the causal
mask is not discounted. N counts every trainable parameter (the tied embedding once: it is the output projection's
matmul). MFU = achieved TFLOP/s ÷ the GPU's dense BF16 peak from rules/gpus.toml (null on CPU or for an
unknown GPU), the usual MFU convention whatever the precision run.

Peak memory is `torch.cuda.max_memory_allocated` on a GPU (tensors only) and the process's peak resident set
size (`resource.getrusage(...).ru_maxrss`) on CPU (everything, torch included); `peak_memory_kind` says which.

bf16 runs only on compute capability 8.0 or newer (Ampere): torch ≥ 2.3 reports bf16 as supported on older
GPUs too, where it is emulated and slow. fp16 uses `torch.amp.GradScaler` (torch 2.3+) or, on torch 2.1/2.2,
`torch.cuda.amp.GradScaler`.

A failing step (out of memory, NaN/inf loss, any exception, a GradScaler that cannot be built) ends the run with
an `error` entry: GD703.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any, Optional

from gpudoctor.bench import BenchError, progress, require_torch

SCHEMA = "gpudoctor.bench.train/1"
PRECISIONS = ("fp32", "bf16", "fp16")
BF16_MIN_CAPABILITY = (8, 0)  # native bf16 tensor cores: Ampere and newer


@dataclass(frozen=True)
class TrainConfig:
    layers: int = 2
    hidden: int = 128
    heads: int = 4
    seq_len: int = 128
    micro_batch: int = 4
    vocab: int = 1024
    steps: int = 10
    warmup: int = 2
    precision: str = "fp32"
    lr: float = 1e-3
    device: str = "auto"  # auto | cpu | cuda
    seed: int = 0
    progress: bool = False  # draw a progress bar over the steps (gpudoctor.bench.progress)


def flops_per_step(params: int, config: TrainConfig) -> float:
    """PaLM appendix B: (6·N + 12·L·hidden·T) per token, times the tokens of one step."""
    tokens = config.micro_batch * config.seq_len
    return tokens * (6.0 * params + 12.0 * config.layers * config.hidden * config.seq_len)


def build_model(torch, config: TrainConfig):
    nn: Any = torch.nn  # torch is imported lazily (require_torch); its classes are untyped here
    functional = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(config.hidden)
            self.qkv = nn.Linear(config.hidden, 3 * config.hidden)
            self.proj = nn.Linear(config.hidden, config.hidden)
            self.ln2 = nn.LayerNorm(config.hidden)
            self.mlp = nn.Sequential(nn.Linear(config.hidden, 4 * config.hidden), nn.GELU(),
                                     nn.Linear(4 * config.hidden, config.hidden))

        def forward(self, x):
            batch, seq, hidden = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(hidden, dim=2)
            shape = (batch, seq, config.heads, hidden // config.heads)
            q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
            att = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(batch, seq, hidden))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(config.vocab, config.hidden)
            self.pos = nn.Embedding(config.seq_len, config.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(config.layers))
            self.ln = nn.LayerNorm(config.hidden)
            self.head = nn.Linear(config.hidden, config.vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as in GPT-2
            for module in self.modules():  # GPT-2's initialisation: the first loss is about ln(vocab)
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    nn.init.zeros_(module.bias)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


def _validate(config: TrainConfig) -> None:
    if config.precision not in PRECISIONS:
        raise BenchError(f"unknown precision {config.precision!r} ({', '.join(PRECISIONS)})")
    if config.hidden % config.heads:
        raise BenchError(f"--hidden {config.hidden} is not divisible by --heads {config.heads}")
    for name in ("layers", "hidden", "heads", "seq_len", "micro_batch", "vocab", "steps"):
        if getattr(config, name) < 1:
            raise BenchError(f"--{name.replace('_', '-')} must be at least 1")
    if config.warmup < 0:
        raise BenchError("--warmup must be 0 or more")


def _device(torch, config: TrainConfig):
    if config.device == "cpu" or (config.device == "auto" and not torch.cuda.is_available()):
        if config.precision == "fp16":
            raise BenchError("fp16 training needs a GPU (use fp32 or bf16 on CPU)")
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise BenchError("--device cuda but torch sees no CUDA GPU")
    from gpudoctor.bench.launch import cuda_device_count, local_device_index

    device = torch.device("cuda", local_device_index(int(os.environ.get("LOCAL_RANK", "0")), cuda_device_count(torch)))
    torch.cuda.set_device(device)
    capability = tuple(torch.cuda.get_device_capability(device))
    if config.precision == "bf16" and capability < BF16_MIN_CAPABILITY:
        raise BenchError(f"{torch.cuda.get_device_name(device)} (compute capability {capability[0]}.{capability[1]}) "
                         "has no native bf16: torch would emulate it and the figures would mislead "
                         "(use fp16 or fp32)")
    return device


def grad_scaler(torch, device):
    """The loss scaler for fp16: `torch.amp.GradScaler` (2.3+), else `torch.cuda.amp.GradScaler` (2.1/2.2)."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device.type)
    return torch.cuda.amp.GradScaler()


def mig_share(name: str) -> Optional[float]:
    """The share of the whole GPU's compute a device named `name` has: 1 for a whole GPU, g/7 for a MIG slice
    "MIG <g>g.<mem>gb" (A100, H100, H200: 7 compute slices; A30: 4), as torch names a MIG device; None for a MIG
    device whose name carries no profile ("NVIDIA B300 MIG 34GB"): its share is unknown, not the whole GPU."""
    if " MIG " not in f" {name} ":
        return 1.0
    match = re.search(r"\bMIG (\d+)g\.", name)
    if not match:
        return None
    slices = 4 if "A30" in name else 7
    return min(1.0, int(match.group(1)) / slices)


def slice_share(torch, device) -> Optional[float]:
    """This CUDA device's share of its GPU's compute: NVML's MIG facts for the device with its UUID (compute
    slices of the GPU), else the profile in torch's device name (`mig_share`); 1 for a whole GPU."""
    name = torch.cuda.get_device_name(device)
    if " MIG " not in f" {name} ":
        return 1.0
    try:
        from gpudoctor.facts.devices import device_by_uuid, is_mig
        from gpudoctor.probes.nvml import read_gpus

        found = device_by_uuid(read_gpus(10.0), str(getattr(torch.cuda.get_device_properties(device), "uuid", "")))
        if found and is_mig(found) and found.get("sm_share"):
            return float(found["sm_share"])
    except Exception:  # noqa: BLE001 - no NVML here: the name still tells the profile
        pass
    return mig_share(name)


def _peak_tflops(torch, device) -> Optional[float]:
    """The dense BF16 peak of the device this rank runs on: the GPU's, times its MIG slice's share."""
    if device.type != "cuda":
        return None
    from gpudoctor.knowledge import gpu_spec

    spec = gpu_spec(torch.cuda.get_device_name(device))
    if not spec or not spec.get("bf16_dense_tflops"):
        return None
    share = slice_share(torch, device)
    return float(spec["bf16_dense_tflops"]) * share if share is not None else None


def _error_kind(torch, exc: BaseException) -> str:
    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    if (oom and isinstance(exc, oom)) or isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    if isinstance(exc, FloatingPointError):
        return "nonfinite"
    return "error"


def _peak_memory(torch, device) -> tuple:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_memory_allocated"
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_peak_rss"  # KiB on Linux


def _step(torch, model, optimizer, scaler, inputs, targets, autocast_dtype, config: TrainConfig) -> tuple:
    """One training step: (loss, seconds); a non-finite loss raises FloatingPointError."""
    device = inputs.device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    began = time.perf_counter()
    with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        logits = model(inputs)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, config.vocab), targets.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    value = float(loss.item())  # synchronises with the device
    if not math.isfinite(value):
        raise FloatingPointError(f"loss is {value}")
    return value, time.perf_counter() - began


def run(config: TrainConfig) -> dict:
    """Run the benchmark; a failing step becomes `error` in the result, never an exception."""
    _validate(config)
    torch = require_torch()
    device = _device(torch, config)
    torch.manual_seed(config.seed)
    model = build_model(torch, config).to(device)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)  # tied weights counted once
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(config.precision)
    generator = torch.Generator().manual_seed(config.seed)
    batch = torch.randint(0, config.vocab, (config.micro_batch, config.seq_len + 1), generator=generator).to(device)
    inputs, targets = batch[:, :-1], batch[:, 1:]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    result = {
        "schema": SCHEMA,
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "world_size": 1,
        "precision": config.precision,
        "torch": torch.__version__,
        "model": {"params": params, "layers": config.layers, "hidden": config.hidden, "heads": config.heads,
                  "seq_len": config.seq_len, "micro_batch": config.micro_batch, "vocab": config.vocab},
        "steps": config.steps,
        "warmup": config.warmup,
        "flops_per_step": flops_per_step(params, config),
        "flops_formula": "tokens × (6·params + 12·layers·hidden·seq_len) (PaLM, appendix B)",
        "error": None,
    }
    losses, times, scaler = [], [], None
    with progress.bar(config.progress, config.warmup + config.steps, "train step") as advance:
        for step in range(config.warmup + config.steps):
            try:
                if scaler is None and config.precision == "fp16":  # inside the step: a failure here is GD703
                    scaler = grad_scaler(torch, device)
                value, elapsed = _step(torch, model, optimizer, scaler, inputs, targets, autocast_dtype, config)
            except Exception as exc:  # noqa: BLE001 - the failure is the finding (GD703)
                result["error"] = {"step": step, "kind": _error_kind(torch, exc), "type": type(exc).__name__,
                                   "message": str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""}
                break
            losses.append(value)
            if step >= config.warmup:
                times.append(elapsed)
            advance(f"{step + 1}")

    peak, kind = _peak_memory(torch, device)
    median = statistics.median(times) if times else None
    tokens = config.micro_batch * config.seq_len
    tflops = result["flops_per_step"] / median / 1e12 if median else None
    peak_tflops = _peak_tflops(torch, device)
    result.update({
        "steps_completed": len(times),
        "step_time_s": {"median": median, "min": min(times) if times else None, "max": max(times) if times else None},
        "tokens_per_s": tokens / median if median else None,
        "tflops": tflops,
        "peak_tflops": peak_tflops,
        "mfu": tflops / peak_tflops if tflops and peak_tflops else None,
        "peak_memory_bytes": peak,
        "peak_memory_kind": kind,
        "loss": {"first": losses[0] if losses else None, "last": losses[-1] if losses else None},
    })
    return result
