"""How fast SIGINT to the parent alone ends every rank of `gpudoctor bench nccl`, against a peer, in the same run.

    python benchmarks/bench_interrupt.py [--runs 3] [--python PATH]

Peer: the same benchmark workers (`gpudoctor.bench.nccl.run_worker`) started the common way, with
`torch.multiprocessing.start_processes(join=True)` (how gpudoctor started them before it supervised its ranks).
Each run starts two gloo ranks on a long sweep, waits until both are busy, sends SIGINT to the parent process
only (as `kill -INT <pid>` does) and times until the parent and every rank are gone (at most --limit seconds,
then they are killed). Prints medians and the ratio.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP = ["-b", "1M", "-e", "1M", "-n", "100000", "-w", "0", "--nprocs", "2"]
PEER = """
import torch.multiprocessing as mp
from gpudoctor.bench.launch import free_port
from gpudoctor.bench.nccl import NcclConfig, run_worker
from gpudoctor.rendezvous import Rank

def worker(index, port):
    run_worker(Rank(index, 2, index, f"tcp://127.0.0.1:{port}", "local"),
               NcclConfig(min_bytes=2**20, max_bytes=2**20, iters=100000, warmup=0, backend="gloo"))

if __name__ == "__main__":
    mp.start_processes(worker, args=(free_port(),), nprocs=2, join=True, start_method="spawn")
"""


def seconds_to_stop(argv: list, limit: float) -> float:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    parent = psutil.Process(proc.pid)
    while True:  # both ranks busy in their collectives
        ranks = [p for p in parent.children() if "spawn_main" in " ".join(p.cmdline())]
        if len(ranks) == 2 and all(p.cpu_times().user > 1.0 for p in ranks):
            break
        time.sleep(0.2)
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, alive = psutil.wait_procs([parent, *ranks], timeout=limit)
    elapsed = time.monotonic() - began
    for leftover in alive:
        leftover.kill()
    proc.wait()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--limit", type=float, default=120.0, help="seconds before the leftovers are killed")
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch and gpudoctor")
    args = parser.parse_args()
    commands = {
        "gpudoctor bench nccl": [args.python, "-m", "gpudoctor", "bench", "nccl", *SWEEP],
        "torch start_processes": [args.python, "-c", PEER],
    }
    results = {name: statistics.median(seconds_to_stop(argv, args.limit) for _ in range(args.runs))
               for name, argv in commands.items()}
    base = results["gpudoctor bench nccl"]
    print(f"SIGINT to the parent alone until every rank is gone; median of {args.runs} runs, same machine")
    for name, seconds in results.items():
        print(f"  {name:<22} {seconds:6.2f} s   {name} / gpudoctor bench nccl = {seconds / base:.1f}")


if __name__ == "__main__":
    main()
