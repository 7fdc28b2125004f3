"""What preflight measures: each GPU alone (a timed matrix multiply and a device-memory copy, best of several runs),
and the fabric (`bench nccl`'s all-reduce sweep, the same timing, bus bandwidth and #wrong, within each node, across
every node, and between neighbouring pairs of nodes).

On a machine without a GPU the same code runs on the CPU, one thread per rank, and the ranks take turns for the
single-device figures: they share the host's cores, so measured together they would measure each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List

from gpudoctor.units import KiB, MiB

TRIALS = 5  # timed runs per figure: the best is kept (a transient stall lowers one run, a slow device every run)


@dataclass(frozen=True)
class Sizes:
    gemm_n: int  # the square matrices' side
    copy_bytes: int
    trial_s: float  # CPU: how long one timed run lasts (GPU: a fixed count of calls, timed with CUDA events)
    fabric_min: int
    fabric_max: int  # the largest all-reduce
    pair_bytes: int


GPU_SIZES = Sizes(gemm_n=8192, copy_bytes=256 * MiB, trial_s=0.0, fabric_min=1 * MiB, fabric_max=256 * MiB,
                  pair_bytes=64 * MiB)
CPU_SIZES = Sizes(gemm_n=192, copy_bytes=4 * MiB, trial_s=0.03, fabric_min=64 * KiB, fabric_max=1 * MiB,
                  pair_bytes=1 * MiB)
GPU_CALLS = 10


def device_of(local_rank: int):
    """(torch.device, Sizes): the rank's GPU, bound as torchrun and srun expose GPUs, or the CPU."""
    import torch

    from gpudoctor.bench.launch import local_device_index

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        device = torch.device("cuda", local_device_index(local_rank, torch.cuda.device_count()))
        torch.cuda.set_device(device)
        return device, GPU_SIZES
    return torch.device("cpu"), CPU_SIZES


def identity(device) -> dict:
    """The device as the report names it: index (as this process sees it), UUID, model, the matmul's dtype."""
    import torch

    if device.type != "cuda":
        return {"index": None, "uuid": None, "name": "CPU", "dtype": "float32"}
    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    bf16 = (props.major, props.minor) >= (8, 0)  # compute capability, not is_bf16_supported (emulated on a T4)
    return {"index": device.index, "uuid": f"GPU-{uuid}" if uuid is not None else None, "name": props.name,
            "dtype": "bfloat16" if bf16 else "float16"}


def _seconds(torch, device, call, sizes: Sizes) -> tuple:
    """(calls, seconds) of `call` repeated: GPU_CALLS timed with CUDA events, or on CPU for `trial_s`."""
    call()  # warm-up: kernels chosen, pages touched
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(GPU_CALLS):
            call()
        end.record()
        torch.cuda.synchronize(device)
        return GPU_CALLS, start.elapsed_time(end) / 1e3
    calls, began = 0, time.perf_counter()
    while calls < 1 or time.perf_counter() - began < sizes.trial_s:
        call()
        calls += 1
    return calls, time.perf_counter() - began


def _gemm(torch, device, dtype, sizes: Sizes) -> float:
    """TFLOP/s of an n × n matrix multiply."""
    n = sizes.gemm_n
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    calls, seconds = _seconds(torch, device, lambda: torch.mm(a, b, out=out), sizes)
    return 2.0 * n ** 3 * calls / seconds / 1e12


def _copy(torch, device, sizes: Sizes) -> float:
    """GB/s of a device-memory copy, bytes read and written (as CUDA's bandwidthTest counts them)."""
    source = torch.empty(sizes.copy_bytes, dtype=torch.uint8, device=device).fill_(1)
    target = torch.empty_like(source)
    calls, seconds = _seconds(torch, device, lambda: target.copy_(source), sizes)
    return 2.0 * sizes.copy_bytes * calls / seconds / 1e9


def _one_trial(torch, device, info: dict, sizes: Sizes) -> dict:
    return {"gemm_tflops": _gemm(torch, device, getattr(torch, info["dtype"]), sizes),
            "copy_gbps": _copy(torch, device, sizes)}


def device_figures(dist, device, info: dict, sizes: Sizes, timing=lambda busy: None) -> dict:
    """This rank's best figures over TRIALS runs. GPUs run at once (each its own device); on CPU the ranks take
    turns, one thread each, a barrier between turns. `timing(True)` before this rank times its device, `timing(False)`
    after: so a deadline that passes meanwhile names the rank still timing (a straggler too slow to finish)."""
    import torch

    threads = torch.get_num_threads()
    if device.type != "cuda":
        torch.set_num_threads(1)
    best: Dict[str, float] = {}
    try:
        for _ in range(TRIALS):
            turns = range(dist.get_world_size()) if device.type != "cuda" else [dist.get_rank()]
            for turn in turns:
                if turn == dist.get_rank():
                    timing(True)
                    for key, value in _one_trial(torch, device, info, sizes).items():
                        best[key] = max(best.get(key, 0.0), value)
                    timing(False)
                dist.barrier()
    finally:
        torch.set_num_threads(threads)
    return {key: round(value, 6) for key, value in best.items()}


# --- the fabric ----------------------------------------------------------------------------------------------------

def neighbour_pairs(count: int) -> List[tuple]:
    """Each node with the next (and the last with the first), every node in two pairs: (0, 1), (1, 2) … (n-1, 0)."""
    if count < 3:
        return []
    return [(i, (i + 1) % count) for i in range(count)]


def rounds(pairs: List[tuple]) -> List[List[tuple]]:
    """The pairs in rounds of disjoint pairs (measured at once: no node in two pairs of a round)."""
    left, out = list(pairs), []
    while left:
        used: set = set()
        this = []
        for pair in list(left):
            if not used & set(pair):
                this.append(pair)
                used |= set(pair)
                left.remove(pair)
        out.append(this)
    return out


def sweep_figures(device, group, min_bytes: int, max_bytes: int, iters: int, warmup: int, timeout: float) -> dict:
    """`bench nccl`'s all-reduce sweep among `group`: its rows and summary (bus bandwidth over the large sizes)."""
    import torch.distributed as dist

    from gpudoctor.bench.nccl import NcclConfig, bus_factor, summarize, sweep

    config = NcclConfig(op="all_reduce", min_bytes=min_bytes, max_bytes=max_bytes, iters=iters, warmup=warmup,
                        timeout=timeout)
    rows = sweep(device, config, group)
    summary = summarize(rows, None, bus_factor("all_reduce", dist.get_world_size(group)))
    return {"busbw_gbps": summary["avg_busbw_gbps"], "wrong": summary["wrong"],
            "rows": [{key: row[key] for key in ("bytes", "time_us", "algbw_gbps", "busbw_gbps", "wrong")}
                     for row in rows]}


def new_group(dist, ranks: List[int], backend: str, timeout: float):
    import datetime

    return dist.new_group(sorted(ranks), backend=backend, timeout=datetime.timedelta(seconds=max(timeout, 1.0)))
