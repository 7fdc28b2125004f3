"""Real benchmarks on this machine: `bench nccl` (torch.distributed collectives) and `bench train` (training steps).

torch is imported only inside the functions that run a benchmark, so `gpudoctor check` works without it.
"""

from __future__ import annotations


class BenchError(RuntimeError):
    """The benchmark could not run (torch missing, rendezvous failed, a worker died): one line for the user."""


class BenchUsageError(BenchError):
    """The request cannot run here (an impossible size, more ranks than GPUs): a usage error before any rank
    starts."""


def require_torch():
    """torch, or a BenchError saying how to install it."""
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - a broken torch is as unusable as a missing one
        raise BenchError(f"the benchmarks need torch ({type(exc).__name__}: {exc}); "
                         "install torch into gpudoctor's environment (pip install torch)") from None
    return torch
