"""Do `bench nccl`'s and `gpudoctor preflight`'s all-reduce figures agree with a plain torch.distributed loop?

    python benchmarks/allreduce_agreement.py [--ranks 3] [--rounds 5] [--max-bytes 16M] [--backend gloo]

Starts `torchrun --standalone --nproc-per-node RANKS` on this script. In each round every rank runs, for the same
sizes, `gpudoctor.bench.nccl.sweep()` (what `bench nccl` and preflight's fabric phase run) and then a loop written
here with nothing of gpudoctor's: `warmup` untimed `dist.all_reduce` calls, a barrier, `iters` timed calls, the
slowest rank's time per call, bus bandwidth = bytes / time × 2(n−1)/n as nccl-tests computes it. The two alternate
round by round so that a machine that gets busier slows both alike. Prints, per size, the median bus bandwidth of
each over the rounds and their ratio; the claim to keep is a ratio within 5 % on the sizes that carry the summary
(1 MiB and up). On a GPU node pass `--backend nccl` (the loop then times with CUDA events, as the sweep does).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_bytes(text: str) -> int:
    number, unit = text.rstrip("KMG"), text[len(text.rstrip("KMG")):]
    return int(number) * SIZE_UNITS[unit]


def raw_busbw(torch, dist, device, nbytes: int, iters: int, warmup: int) -> float:
    """Bus bandwidth (GB/s) of `iters` plain all_reduce calls on `nbytes` of float32, the slowest rank's time."""
    world = dist.get_world_size()
    tensor = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(tensor)
        end.record()
        torch.cuda.synchronize(device)
        seconds = start.elapsed_time(end) / 1e3 / iters
    else:
        began = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(tensor)
        seconds = (time.perf_counter() - began) / iters
    slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return nbytes / slowest.item() / 1e9 * 2 * (world - 1) / world


def worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from gpudoctor.bench.nccl import NcclConfig, sweep

    dist.init_process_group(args.backend)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if args.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    config = NcclConfig(op="all_reduce", min_bytes=args.min_bytes, max_bytes=args.max_bytes, iters=args.iters,
                        warmup=args.warmup, progress=False)
    figures: dict = {}
    for _ in range(args.rounds):
        for row in sweep(device, config):
            figures.setdefault(row["bytes"], {"sweep": [], "raw": []})["sweep"].append(row["busbw_gbps"])
        for nbytes in figures:
            figures[nbytes]["raw"].append(raw_busbw(torch, dist, device, nbytes, args.iters, args.warmup))
    if dist.get_rank() == 0:
        print(json.dumps({str(nbytes): value for nbytes, value in figures.items()}))
    dist.destroy_process_group()


def report(figures: dict, ranks: int, backend: str) -> None:
    load = os.getloadavg()[0]
    print(f"{ranks} ranks on {backend}, load average {load:.2f}; median bus bandwidth over the rounds (GB/s)")
    print(f"{'bytes':>10}  {'sweep':>9}  {'raw loop':>9}  {'sweep/raw':>9}")
    for nbytes, value in sorted(figures.items(), key=lambda item: int(item[0])):
        sweep, raw = statistics.median(value["sweep"]), statistics.median(value["raw"])
        print(f"{int(nbytes):>10}  {sweep:>9.4f}  {raw:>9.4f}  {sweep / raw if raw else float('nan'):>9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-bytes", type=parse_bytes, default=parse_bytes("64K"))
    parser.add_argument("--max-bytes", type=parse_bytes, default=parse_bytes("16M"))
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    forwarded = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in
                 ("rounds", "min_bytes", "max_bytes", "iters", "warmup", "backend")]
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc-per-node={args.ranks}", __file__, "--worker", *forwarded],
                          capture_output=True, text=True, check=False, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"torchrun failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    report(json.loads(lines[-1]), args.ranks, args.backend)


if __name__ == "__main__":
    main()
