"""The environment variables the rules read (secret values are redacted on output, gpudoctor.redact)."""

from __future__ import annotations

from gpudoctor.probes import Probe, ProbeContext

PREFIXES = (
    "NCCL_", "TORCH_", "CUDA_", "CUDNN_", "DS_", "NVTE_", "PYTORCH_", "FI_", "GLOO_", "OMP_", "MKL_",
    "ACCELERATE_", "NVIDIA_", "UCX_", "MASTER_", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "SLURM_", "HF_", "TRANSFORMERS_", "NEMO_", "MEGATRON_", "XLA_", "TF_", "LD_LIBRARY_PATH", "LD_PRELOAD",
    "PATH", "CONDA_PREFIX", "VIRTUAL_ENV", "MIG_", "PJRT_", "TOKENIZERS_PARALLELISM",
)


def wanted(name: str) -> bool:
    return name.startswith(PREFIXES)


def probe_env(ctx: ProbeContext) -> dict:
    return {"env": {name: value for name, value in sorted(ctx.environ.items()) if wanted(name)}}


PROBE = Probe("env", probe_env)
