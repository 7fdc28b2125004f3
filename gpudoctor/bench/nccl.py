"""`gpudoctor bench nccl`: a real collective sweep with torch.distributed (NCCL on GPUs, gloo on CPU).

Definitions follow nccl-tests (doc/PERFORMANCE.md), so the figures compare one to one with `all_reduce_perf`:

* size (bytes) is the largest buffer of the operation (all_gather: the gathered output; reduce_scatter: the
  input), count = size / 4 elements of float32;
* time is the mean time of one operation over `iters` back-to-back calls (CUDA events on GPUs, perf_counter
  after a barrier on CPU), taken on the slowest rank (nccl-tests' `-a 3`; its default `-a 1` averages ranks);
* algbw = size / time; busbw = algbw × factor, factor = 2(n-1)/n for all_reduce, (n-1)/n for all_gather,
  reduce_scatter and alltoall, 1 for broadcast — the per-rank link traffic, comparable across rank counts;
* #wrong: after the timed loop every rank fills its input with a rank- and index-dependent pattern, runs the
  operation once more and counts output elements that differ from the exact expected value (summed over ranks).

Test hook: GPUDOCTOR_BENCH_CORRUPT_RANK=R makes rank R add 1 to its input before that checking call, so the
correctness check (and GD701) can be exercised on a healthy machine. It never affects the timed loop.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from typing import List, Optional

from gpudoctor.bench import BenchError

SCHEMA = "gpudoctor.bench.nccl/1"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall")
DTYPE = "float32"
ELEMENT_BYTES = 4
CORRUPT_ENV = "GPUDOCTOR_BENCH_CORRUPT_RANK"
SPLIT_OPS = ("all_gather", "reduce_scatter", "alltoall")  # the buffer is split into one chunk per rank
RANK_STRIDE = 16.0  # pattern value of rank r at index i: (i % 13) + 1 + 16·r (exact in float32 for any sum here)
LARGE_SIZES = 3  # the summary averages busbw over this many of the largest sizes
_SIZE = re.compile(r"^\s*([0-9]+)\s*([kmgKMG]?)i?[bB]?\s*$")


def parse_size(text: str) -> int:
    """`8`, `64K`, `128M`, `1G` (powers of 1024, like nccl-tests' -b/-e)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"not a size: {text!r} (examples: 8, 64K, 128M, 1G)")
    return int(match.group(1)) * 1024 ** "_KMG".index(match.group(2).upper() or "_")


def bus_factor(op: str, world: int) -> float:
    """nccl-tests' bus bandwidth factor for `op` on `world` ranks."""
    if op == "all_reduce":
        return 2.0 * (world - 1) / world
    if op in SPLIT_OPS:
        return (world - 1) / world
    return 1.0


def sweep_sizes(min_bytes: int, max_bytes: int) -> List[int]:
    """min, 2·min, 4·min, … up to max (both in bytes), like nccl-tests' `-f 2`."""
    sizes, size = [], max(ELEMENT_BYTES, min_bytes)
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def element_count(op: str, nbytes: int, world: int) -> int:
    """Elements of the operation's largest buffer; split ops round down to a multiple of the rank count."""
    count = max(1, nbytes // ELEMENT_BYTES)
    if op in SPLIT_OPS:
        count = max(world, count - count % world)
    return count


@dataclass(frozen=True)
class NcclConfig:
    op: str = "all_reduce"
    min_bytes: int = 8
    max_bytes: int = 1024 * 1024
    iters: int = 20
    warmup: int = 5
    backend: str = "auto"  # auto | nccl | gloo
    min_busbw: Optional[float] = None  # GB/s, GD702's threshold


def summarize(rows: List[dict], min_busbw: Optional[float]) -> dict:
    """avg busbw over the large sizes (the three largest of the sweep, as UX.md's "sizes ≥ 256 MiB" for a sweep
    to 1 GiB), max busbw over all sizes, wrong elements in total, and ok (no wrong element, threshold met)."""
    if not rows:
        return {"large_from_bytes": None, "avg_busbw_gbps": None, "max_busbw_gbps": None, "wrong": 0,
                "min_busbw_gbps": min_busbw, "ok": True}
    large = sorted(rows, key=lambda row: row["bytes"])[-LARGE_SIZES:]
    avg = sum(row["busbw_gbps"] for row in large) / len(large)
    wrong = sum(row["wrong"] for row in rows)
    ok = wrong == 0 and (min_busbw is None or avg >= min_busbw)
    return {"large_from_bytes": min(row["bytes"] for row in large), "avg_busbw_gbps": round(avg, 6),
            "max_busbw_gbps": max(row["busbw_gbps"] for row in rows), "wrong": wrong,
            "min_busbw_gbps": min_busbw, "ok": ok}


def make_row(op: str, nbytes: int, count: int, world: int, rank_seconds: List[float], wrong: int) -> dict:
    """One result row; bandwidths are computed from the reported (rounded) time so they can be re-derived."""
    time_us = round(max(rank_seconds) * 1e6, 3)
    algbw = nbytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
    return {"op": op, "bytes": nbytes, "count": count, "dtype": DTYPE, "time_us": time_us,
            "algbw_gbps": round(algbw, 6), "busbw_gbps": round(algbw * bus_factor(op, world), 6),
            "wrong": int(wrong), "rank_time_us": [round(s * 1e6, 3) for s in rank_seconds]}


# --- the worker (one per rank) -------------------------------------------------------------------------------

def _pattern(torch, rank, index):
    return (index % 13 + 1).to(torch.float32) + RANK_STRIDE * rank


def _buffers(torch, op: str, count: int, world: int, rank: int, device):
    """(input, output, expected output) for the correctness call; the output is the input for in-place ops."""
    index = torch.arange(count, device=device)
    chunk = count // world if op in SPLIT_OPS else count
    if op == "all_reduce":
        inp = _pattern(torch, rank, index)
        expected = world * (index % 13 + 1).to(torch.float32) + RANK_STRIDE * (world * (world - 1) / 2)
        return inp, inp, expected
    if op == "broadcast":
        inp = _pattern(torch, rank, index)
        return inp, inp, _pattern(torch, 0, index)
    if op == "all_gather":  # rank r contributes chunk r of the global pattern
        mine = index[rank * chunk:(rank + 1) * chunk]
        return _pattern(torch, rank, mine), torch.empty(count, device=device), _pattern(torch, index // chunk, index)
    if op == "reduce_scatter":
        mine = index[rank * chunk:(rank + 1) * chunk]
        expected = world * (mine % 13 + 1).to(torch.float32) + RANK_STRIDE * (world * (world - 1) / 2)
        return _pattern(torch, rank, index), torch.empty(chunk, device=device), expected
    if op == "alltoall":  # chunk j of rank r's output is chunk r of rank j's input
        out_index = index % chunk + rank * chunk
        return _pattern(torch, rank, index), torch.empty(count, device=device), _pattern(torch, index // chunk, out_index)
    raise BenchError(f"unknown op {op!r}")


def _collective(dist, op: str, inp, out):
    """The call for `op` (tensor APIs: one buffer in, one out, as NCCL sees them)."""
    if op == "all_reduce":
        return lambda: dist.all_reduce(inp)
    if op == "broadcast":
        return lambda: dist.broadcast(inp, 0)
    if op == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(out, inp)
    if op == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(out, inp)
    return lambda: dist.all_to_all_single(out, inp)


def _device_and_backend(torch, rank, requested: str):
    cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    backend = requested if requested != "auto" else ("nccl" if cuda else "gloo")
    if backend == "nccl":
        if not cuda:
            raise BenchError("--backend nccl needs a CUDA GPU; this machine has none (use gloo)")
        device = torch.device("cuda", rank.local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device, backend
    return torch.device("cpu"), backend


def init_rank(rank, config: NcclConfig) -> tuple:
    """Join the process group as `rank`: (device, backend)."""
    import datetime
    import warnings

    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning)
    device, backend = _device_and_backend(torch, rank, config.backend)
    dist.init_process_group(backend, init_method=rank.init_method, rank=rank.rank, world_size=rank.world_size,
                            timeout=datetime.timedelta(seconds=300))
    return device, backend


def sweep(device, config: NcclConfig) -> List[dict]:
    """The rows of one op's size sweep (a process group must be initialised)."""
    import time

    import torch
    import torch.distributed as dist

    world, me = dist.get_world_size(), dist.get_rank()
    cuda = device.type == "cuda"
    corrupt = os.environ.get(CORRUPT_ENV, "")
    rows = []
    for nbytes in sweep_sizes(config.min_bytes, config.max_bytes):
        count = element_count(config.op, nbytes, world)
        nbytes = count * ELEMENT_BYTES
        inp, out, expected = _buffers(torch, config.op, count, world, me, device)
        call = _collective(dist, config.op, inp, out)
        for _ in range(config.warmup):
            call()
        dist.barrier()
        if cuda:
            torch.cuda.synchronize(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(config.iters):
                call()
            end.record()
            torch.cuda.synchronize(device)
            seconds = start.elapsed_time(end) / 1e3 / config.iters
        else:
            began = time.perf_counter()
            for _ in range(config.iters):
                call()
            seconds = (time.perf_counter() - began) / config.iters
        # correctness: a fresh pattern, one call, an exact comparison (the test hook corrupts one rank's input)
        inp, out, expected = _buffers(torch, config.op, count, world, me, device)
        if corrupt == str(me):
            inp += 1.0
        _collective(dist, config.op, inp, out)()
        wrong = torch.tensor([int((out != expected).sum())], dtype=torch.int64, device=device)
        dist.all_reduce(wrong)
        times = torch.tensor([seconds], dtype=torch.float64, device=device)
        gathered = [torch.zeros_like(times) for _ in range(world)]
        dist.all_gather(gathered, times)
        rows.append(make_row(config.op, nbytes, count, world, [float(t.item()) for t in gathered],
                             int(wrong.item())))
    return rows


def run_worker(rank, config: NcclConfig) -> dict:
    """Run the sweep as one rank; every rank returns the same result (built from collective data)."""
    import torch
    import torch.distributed as dist

    device, backend = init_rank(rank, config)
    try:
        world = dist.get_world_size()
        hosts: list = [None] * world
        dist.all_gather_object(hosts, socket.gethostname())
        rows = sweep(device, config)
        nccl_version = None
        if backend == "nccl":
            version = torch.cuda.nccl.version()
            nccl_version = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        return {
            "schema": SCHEMA,
            "op": config.op,
            "dtype": DTYPE,
            "iters": config.iters,
            "warmup": config.warmup,
            "world_size": world,
            "backend": backend,
            "backend_version": nccl_version,
            "device": device.type,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "nodes": len(set(hosts)),
            "launcher": rank.launcher,
            "torch": torch.__version__,
            "time_over_ranks": "max",
            "rows": rows,
            "summary": summarize(rows, config.min_busbw),
        }
    finally:
        dist.destroy_process_group()


def run(config: NcclConfig, nprocs: Optional[int] = None) -> tuple:
    """(this process's Rank, the result); spawns local workers unless torchrun/srun started us."""
    from gpudoctor.bench.launch import run_ranks

    if config.op not in OPS:
        raise BenchError(f"unknown op {config.op!r} ({', '.join(OPS)})")
    return run_ranks(run_worker, config, nprocs)
