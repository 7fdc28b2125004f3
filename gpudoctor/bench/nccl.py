"""`gpudoctor bench nccl`: a real collective sweep with torch.distributed (NCCL on GPUs, gloo on CPU).

Definitions follow nccl-tests (doc/PERFORMANCE.md), so the figures compare one to one with `all_reduce_perf`:

* size (bytes) is the largest buffer of the operation (all_gather: the gathered output; reduce_scatter: the
  input), count = size / 4 elements of float32;
* time is the mean time of one operation over `iters` back-to-back calls (CUDA events on GPUs, perf_counter
  after a barrier on CPU), taken on the slowest rank (nccl-tests' `-a 3`; its default `-a 1` averages ranks);
* algbw = size / time; busbw = algbw × factor, factor = 2(n-1)/n for all_reduce, (n-1)/n for all_gather,
  reduce_scatter and alltoall, 1 for broadcast — the per-rank link traffic, comparable across rank counts (on
  one rank the (n-1)/n collectives move nothing between ranks: their busbw is 0 by definition);
* #wrong: after the timed loop every rank refills its input with a rank- and index-dependent pattern (the output
  of an out-of-place op with NaN), runs the operation once more and counts output elements that differ from the
  exact expected value (summed over ranks).

The pattern keeps #wrong exact at any world size. Every value is an integer; in a reduction rank r contributes
((i + r) mod 13) + 1 ∈ [1, 13] at index i, and only the first ⌊2^24 / 13⌋ ranks contribute (the others send
zeros), so every partial sum, in any order and any reduction tree, is an integer ≤ 2^24: exactly representable
in float32, and the sum NCCL or gloo computes equals the expected value bit for bit. Copies (broadcast,
all_gather, alltoall) carry (i mod 13) + 1 + 16·(r mod 2^20) < 2^24, which names the sending rank.

Memory: one set of buffers per size (the operation's own input and output: at most 2× the size, for alltoall),
filled and checked through a 13-element period without index temporaries; the only scratch is a boolean block
of at most VERIFY_BLOCK elements while counting. tests/test_bench_memory.py measures this on CPU.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import List, Optional

from gpudoctor.bench import BenchError, BenchUsageError, require_torch
from gpudoctor.units import parse as parse_size
from gpudoctor.units import size

SCHEMA = "gpudoctor.bench.nccl/1"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall")
DTYPE = "float32"
ELEMENT_BYTES = 4
SPLIT_OPS = ("all_gather", "reduce_scatter", "alltoall")  # the buffer is split into one chunk per rank
PERIOD = 13  # the pattern repeats every 13 elements
FP32_EXACT = 2 ** 24  # every integer up to this is exact in float32
CONTRIBUTING_RANKS = FP32_EXACT // PERIOD  # ranks beyond these contribute zeros to reductions
TAG_STRIDE, TAG_RANKS = 16, 2 ** 20  # copies carry (i mod 13) + 1 + 16·(r mod 2^20) < 2^24
VERIFY_BLOCK = 1 << 20  # elements compared at once (a boolean scratch of this many bytes)
LARGE_SIZES = 3  # the summary averages busbw over this many of the largest sizes
# NCCL's own buffers on each GPU: NCCL_BUFFSIZE (4 MiB unless set; NCCL's environment variable docs) per channel,
# for sending and receiving, for the ring and the tree, over up to 32 channels (NCCL's MAXCHANNELS): an upper bound.
NCCL_BUFFSIZE_DEFAULT = 4 << 20
NCCL_BUFFER_COPIES = 2 * 2 * 32


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


def buffer_bytes(op: str, nbytes: int, world: int) -> int:
    """Bytes of one rank's buffers for a size: input and output (one buffer for the in-place ops)."""
    count = element_count(op, nbytes, world)
    chunk = count // world if op in SPLIT_OPS else count
    elements = {"all_reduce": count, "broadcast": count, "alltoall": 2 * count}.get(op, count + chunk)
    return elements * ELEMENT_BYTES


def check_sizes(min_bytes: int, max_bytes: int) -> None:
    """Sizes no sweep can run: a usage error before any rank starts."""
    if min_bytes < ELEMENT_BYTES:
        raise BenchUsageError(f"-b/--min-bytes must be at least {ELEMENT_BYTES} bytes (one float32 element), "
                              f"got {min_bytes}")
    if max_bytes < min_bytes:
        raise BenchUsageError(f"-e/--max-bytes ({max_bytes}) is smaller than -b/--min-bytes ({min_bytes})")


@dataclass(frozen=True)
class NcclConfig:
    op: str = "all_reduce"
    min_bytes: int = 8
    max_bytes: int = 1024 * 1024
    iters: int = 20
    warmup: int = 5
    backend: str = "auto"  # auto | nccl | gloo
    min_busbw: Optional[float] = None  # GB/s, GD702's threshold
    progress: bool = False  # rank 0 draws a progress bar (gpudoctor.bench.progress)
    timeout: float = 120.0  # seconds to meet the other ranks, and for each collective (`--timeout`)


def _size_flag(text: str, flag: str) -> int:
    """`8`, `64K`, `128M`, `1G`: bytes in powers of 1024, like nccl-tests' -b/-e."""
    size = parse_size(text, bare=True)
    if size is None:
        raise BenchUsageError(f"{flag}: not a size: {text!r} (examples: 8, 64K, 128M, 1G)")
    return size


def make_config(min_size: str, max_size: Optional[str], **options) -> NcclConfig:
    """The sweep asked for as the user wrote its sizes, or a BenchError before any rank starts (the default
    largest size: 128M on GPUs, 1M on CPU)."""
    min_bytes = _size_flag(min_size, "-b/--min-bytes")
    max_bytes = _size_flag(max_size, "-e/--max-bytes") if max_size else None
    check_sizes(min_bytes, max_bytes if max_bytes is not None else min_bytes)
    torch = require_torch()
    if max_bytes is None:
        default = "128M" if torch.cuda.is_available() and options.get("backend") != "gloo" else "1M"
        max_bytes = max(min_bytes, _size_flag(default, "-e/--max-bytes"))
    return NcclConfig(min_bytes=min_bytes, max_bytes=max_bytes, **options)


def summarize(rows: List[dict], min_busbw: Optional[float], factor: float = 1.0) -> dict:
    """avg busbw over the large sizes (the three largest of the sweep, as UX.md's "sizes ≥ 256 MiB" for a sweep
    to 1 GiB), max busbw over all sizes, wrong elements in total, and ok (no wrong element, threshold met; None
    when a threshold was asked for but busbw is 0 by definition: one rank, `factor` 0)."""
    wrong = sum(row["wrong"] for row in rows)
    if not rows or factor == 0:
        return {"large_from_bytes": None, "avg_busbw_gbps": None, "max_busbw_gbps": None, "wrong": wrong,
                "min_busbw_gbps": min_busbw, "ok": wrong == 0 if min_busbw is None or not rows else None,
                **({"busbw_zero_by_definition": True} if rows else {})}
    large = sorted(rows, key=lambda row: row["bytes"])[-LARGE_SIZES:]
    avg = sum(row["busbw_gbps"] for row in large) / len(large)
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


# --- the data pattern (pure arithmetic: the tests check it for any world size) -------------------------------

def contribution(rank: int, index: int) -> int:
    """What `rank` puts at `index` into a reduction: ((index + rank) mod 13) + 1, zero beyond CONTRIBUTING_RANKS."""
    return (index + rank) % PERIOD + 1 if rank < CONTRIBUTING_RANKS else 0


def reduced(world: int) -> List[int]:
    """The exact sum over `world` ranks of `contribution` at index p, for p = 0…12 (it repeats every 13)."""
    ranks = min(world, CONTRIBUTING_RANKS)
    full, rest = divmod(ranks, PERIOD)
    per_period = PERIOD * (PERIOD + 1) // 2
    return [full * per_period + sum((p + j) % PERIOD + 1 for j in range(rest)) for p in range(PERIOD)]


def tag(rank: int, index: int) -> int:
    """What `rank` sends at `index` in a copy: (index mod 13) + 1 + 16·(rank mod 2^20), below 2^24."""
    return index % PERIOD + 1 + TAG_STRIDE * (rank % TAG_RANKS)


def _period(fn, rank: int) -> List[int]:
    return [fn(rank, p) for p in range(PERIOD)]


def _input_regions(op: str, world: int, rank: int, count: int) -> list:
    """[(offset, length, values of one period, index of the first element)] that make up `rank`'s input."""
    if op in ("all_reduce", "reduce_scatter"):
        return [(0, count, _period(contribution, rank), 0)]
    if op == "all_gather":
        chunk = count // world
        return [(0, chunk, _period(tag, rank), rank * chunk)]
    return [(0, count, _period(tag, rank), 0)]  # broadcast, alltoall


def _expected_regions(op: str, world: int, rank: int, count: int) -> list:
    """The same for the output the operation must produce on `rank`."""
    chunk = count // world if op in SPLIT_OPS else count
    if op == "all_reduce":
        return [(0, count, reduced(world), 0)]
    if op == "reduce_scatter":
        return [(0, chunk, reduced(world), rank * chunk)]
    if op == "broadcast":
        return [(0, count, _period(tag, 0), 0)]
    if op == "all_gather":  # chunk j is rank j's input
        return [(j * chunk, chunk, _period(tag, j), j * chunk) for j in range(world)]
    if op == "alltoall":  # chunk j of rank r's output is chunk r of rank j's input
        return [(j * chunk, chunk, _period(tag, j), rank * chunk) for j in range(world)]
    raise BenchError(f"unknown op {op!r}")


# --- the worker (one per rank) -------------------------------------------------------------------------------

def _rolled(torch, values: List[int], first: int, device):
    return torch.tensor([values[(first + k) % PERIOD] for k in range(PERIOD)], dtype=torch.float32, device=device)


def _fill(torch, buf, values: List[int], first: int) -> None:
    """buf[k] = values[(first + k) mod 13], through an expanded 13-element view (no temporaries)."""
    rolled = _rolled(torch, values, first, buf.device)
    rows, tail = divmod(buf.numel(), PERIOD)
    buf[:rows * PERIOD].view(rows, PERIOD).copy_(rolled.expand(rows, PERIOD))
    buf[rows * PERIOD:].copy_(rolled[:tail])


def _mismatches(torch, buf, values: List[int], first: int) -> int:
    """Elements of buf that differ from the periodic pattern, compared VERIFY_BLOCK elements at a time."""
    rolled = _rolled(torch, values, first, buf.device)
    block = VERIFY_BLOCK - VERIFY_BLOCK % PERIOD  # blocks start at multiples of 13: one rolled period for all
    wrong = 0
    for start in range(0, buf.numel(), block):
        part = buf[start:start + block]
        rows, tail = divmod(part.numel(), PERIOD)
        wrong += int(torch.count_nonzero(part[:rows * PERIOD].view(rows, PERIOD) != rolled.expand(rows, PERIOD)))
        wrong += int(torch.count_nonzero(part[rows * PERIOD:] != rolled[:tail]))
    return wrong


def fill_input(torch, op: str, inp, world: int, rank: int) -> None:
    """Write `rank`'s pattern into its input buffer."""
    for offset, length, values, first in _input_regions(op, world, rank, _count(op, inp, world)):
        _fill(torch, inp[offset:offset + length], values, first)


def count_wrong(torch, op: str, out, world: int, rank: int) -> int:
    """Output elements on `rank` that differ from the exact expected values."""
    count = out.numel() * world if op == "reduce_scatter" else out.numel()
    return sum(_mismatches(torch, out[offset:offset + length], values, first)
               for offset, length, values, first in _expected_regions(op, world, rank, count))


def _count(op: str, inp, world: int) -> int:
    return inp.numel() * world if op == "all_gather" else inp.numel()


def _buffers(torch, op: str, count: int, world: int, device):
    """(input, output) of one rank; the output is the input for the in-place ops."""
    chunk = count // world if op in SPLIT_OPS else count
    if op in ("all_reduce", "broadcast"):
        inp = torch.empty(count, dtype=torch.float32, device=device)
        return inp, inp
    inp = torch.empty(chunk if op == "all_gather" else count, dtype=torch.float32, device=device)
    out = torch.empty(chunk if op == "reduce_scatter" else count, dtype=torch.float32, device=device)
    return inp, out


def _collective(dist, op: str, inp, out, group=None):
    """The call for `op` (tensor APIs: one buffer in, one out, as NCCL sees them) among `group` (None: every
    rank); broadcast's source is the group's first rank."""
    if op == "all_reduce":
        return lambda: dist.all_reduce(inp, group=group)
    if op == "broadcast":
        source = dist.get_global_rank(group, 0) if group is not None else 0
        return lambda: dist.broadcast(inp, source, group=group)
    if op == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(out, inp, group=group)
    if op == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(out, inp, group=group)
    return lambda: dist.all_to_all_single(out, inp, group=group)


def shared_gpu_refusal(ranks: int, gpus: int, what: str) -> Optional[str]:
    """Why `ranks` ranks cannot each have their own GPU among `gpus` (None when they can)."""
    if ranks <= gpus:
        return None
    return (f"{what} but this machine shows {gpus} GPU(s): two ranks would share a GPU and NCCL fails with "
            f"\"Duplicate GPU detected\"; start at most {gpus} rank(s) per node")


def nccl_buffer_bytes(environ=None) -> int:
    """What NCCL itself may hold on each GPU besides the benchmark's buffers (NCCL_BUFFER_COPIES × NCCL_BUFFSIZE)."""
    text = (os.environ if environ is None else environ).get("NCCL_BUFFSIZE", "")
    return NCCL_BUFFER_COPIES * (int(text) if text.isdigit() and int(text) > 0 else NCCL_BUFFSIZE_DEFAULT)


def _fits_free_memory(torch, device, config: NcclConfig, world: int) -> None:
    """Before joining the group: the rank's buffers and NCCL's own in what is free on its GPU now (other processes
    and the driver's reserve taken out), so a full GPU fails here, not as an out-of-memory inside a collective."""
    free, _total = torch.cuda.mem_get_info(device)
    need = buffer_bytes(config.op, config.max_bytes, world) + nccl_buffer_bytes()
    if need > free:
        raise BenchError(f"-e/--max-bytes {size(config.max_bytes)} needs {size(need)} on {device} ({config.op} "
                         f"buffers and NCCL's own) but {size(free)} is free there")


def _device_and_backend(torch, rank, requested: str):
    """The rank's device (bound as the launcher exposes GPUs: `local_device_index`) and backend; the layout was
    checked before (`_check_machine`)."""
    from gpudoctor.bench.launch import cuda_device_count, local_device_index

    count = cuda_device_count(torch) if requested != "gloo" else 0
    backend = requested if requested != "auto" else ("nccl" if count else "gloo")
    if backend == "nccl":
        if not count:
            raise BenchError("--backend nccl needs a CUDA GPU; this machine has none (use gloo)")
        device = torch.device("cuda", local_device_index(rank.local_rank, count))
        torch.cuda.set_device(device)
        return device, backend
    return torch.device("cpu"), backend


def join(rank, config: NcclConfig):
    """Join the process group as `rank` (gpudoctor.rendezvous: bounded by --timeout, one line when it fails):
    (the Group, device, backend). NCCL gets the rank's GPU as its device."""
    import warnings

    import torch

    from gpudoctor.rendezvous import Group

    warnings.filterwarnings("ignore", category=FutureWarning)
    device, backend = _device_and_backend(torch, rank, config.backend)
    if device.type == "cuda":
        _fits_free_memory(torch, device, config, rank.world_size)
    group = Group(rank, "bench nccl", config.timeout, backend, device if backend == "nccl" else None)
    group.join()
    return group, device, backend


def _timed(torch, dist, call, device, config: NcclConfig, group=None) -> float:
    """Seconds per call over `iters` calls after `warmup` untimed ones."""
    import time

    for _ in range(config.warmup):
        call()
    dist.barrier(group=group)
    if device.type != "cuda":
        began = time.perf_counter()
        for _ in range(config.iters):
            call()
        return (time.perf_counter() - began) / config.iters
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(config.iters):
        call()
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end) / 1e3 / config.iters


def _checked(torch, dist, op: str, inp, out, world: int, me: int, group=None) -> int:
    """Wrong output elements of one call on a fresh pattern (the output of an out-of-place op starts as NaN)."""
    fill_input(torch, op, inp, world, me)
    if out is not inp:
        out.fill_(float("nan"))
    _collective(dist, op, inp, out, group)()
    return count_wrong(torch, op, out, world, me)


def sweep(device, config: NcclConfig, group=None) -> List[dict]:
    """The rows of one op's size sweep among `group`'s ranks (None: every rank of the process group, which must be
    initialised); `gpudoctor preflight` measures its nodes and pairs of nodes with it."""
    import torch
    import torch.distributed as dist

    from gpudoctor.bench import progress

    world, me = dist.get_world_size(group), dist.get_rank(group)
    sizes = sweep_sizes(config.min_bytes, config.max_bytes)
    rows = []
    with progress.bar(config.progress and me == 0, len(sizes), config.op) as advance:
        for nbytes in sizes:
            count = element_count(config.op, nbytes, world)
            inp, out = _buffers(torch, config.op, count, world, device)
            fill_input(torch, config.op, inp, world, me)
            seconds = _timed(torch, dist, _collective(dist, config.op, inp, out, group), device, config, group)
            wrong = torch.tensor([_checked(torch, dist, config.op, inp, out, world, me, group)], dtype=torch.int64,
                                 device=device)
            del inp, out  # before the next size's buffers: one set alive at a time
            dist.all_reduce(wrong, group=group)
            times = torch.tensor([seconds], dtype=torch.float64, device=device)
            gathered = [torch.zeros_like(times) for _ in range(world)]
            dist.all_gather(gathered, times, group=group)
            rows.append(make_row(config.op, count * ELEMENT_BYTES, count, world, [float(t.item()) for t in gathered],
                                 int(wrong.item())))
            advance(size(count * ELEMENT_BYTES))
    return rows


HOST_NAME_LIMIT = 4096  # bytes of a peer's host name as JSON (a DNS name is at most 253)


def run_worker(rank, config: NcclConfig) -> dict:
    """Run the sweep as one rank; every rank returns the same result (built from collective data). Under a
    launcher, a peer that dies or disagrees mid-sweep is a RendezvousError (one line)."""
    group, device, backend = join(rank, config)
    # no `finally`: a failing rank leaves the group by exiting, after it has said why (its peers' errors follow)
    hosts = group.all_gather_json(socket.gethostname(), HOST_NAME_LIMIT, "its host name")
    if rank.launcher == "local":  # the spawning process reports the first rank that failed
        result = measure(rank, hosts, device, backend, config)
    else:
        with group.collectives("finish the sweep"):
            result = measure(rank, hosts, device, backend, config)
    group.leave()
    return result


def measure(rank, hosts: List[str], device, backend: str, config: NcclConfig) -> dict:
    """The result of `config`'s sweep in the process group this rank has joined, on the ranks' `hosts`."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    rows = sweep(device, config)
    nccl_version = None
    if backend == "nccl":
        version = torch.cuda.nccl.version()
        nccl_version = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    result = {
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
        "summary": summarize(rows, config.min_busbw, bus_factor(config.op, world)),
    }
    return result


def _check_machine(config: NcclConfig, local_ranks: int, what: str = "", own_gpus: bool = False) -> None:
    """Refuse, before any rank starts (or joins the group), what this machine cannot run: more ranks than the GPUs
    they share (`own_gpus`: srun bound each its own), buffers that do not fit (on a GPU: one rank's buffers in its
    memory; on CPU: every local rank's in the available RAM)."""
    import psutil
    import torch

    cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0 and config.backend != "gloo"
    need = buffer_bytes(config.op, config.max_bytes, max(local_ranks, 1))
    if cuda:
        refusal = None if own_gpus else shared_gpu_refusal(local_ranks, torch.cuda.device_count(),
                                                           what or f"--nprocs {local_ranks}")
        if refusal:
            raise BenchUsageError(refusal)
        # the whole GPU, before any CUDA context: each rank checks what is free on its own GPU before it joins
        have, where = torch.cuda.get_device_properties(0).total_memory, "the GPU has"
    else:
        need *= local_ranks
        have, where = psutil.virtual_memory().available, "this machine has available"
    if need > have:
        raise BenchUsageError(f"-e/--max-bytes {size(config.max_bytes)} needs {size(need)} of buffers for "
                              f"{config.op} on {local_ranks} local rank(s); {where} {size(have)}")


def run(config: NcclConfig, nprocs: Optional[int] = None) -> tuple:
    """(this process's Rank, the result); spawns local workers unless torchrun/srun started us."""
    from gpudoctor.bench.launch import default_nprocs, local_layout, run_ranks
    from gpudoctor.rendezvous import launched_rank

    if config.op not in OPS:
        raise BenchUsageError(f"unknown op {config.op!r} ({', '.join(OPS)})")
    check_sizes(config.min_bytes, config.max_bytes)
    launched = launched_rank("bench nccl")
    if launched is None:
        nprocs = nprocs or default_nprocs()
        _check_machine(config, nprocs)
    else:
        ranks, own, what = local_layout()
        _check_machine(config, ranks, what, own_gpus=own)
    return run_ranks(run_worker, config, nprocs)
