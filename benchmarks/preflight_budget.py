"""Where `gpudoctor preflight`'s time goes as the allocation grows: what can be measured on one CPU host.

    python benchmarks/preflight_budget.py [--fleet 8,64,512] [--local 2,4,8] [--budget 60]

--fleet N,…  the agree phase's work on the reporting rank for N nodes: each node's snapshot (the recorded DGX nodes
             of fixtures/fleet, eight GPUs each, round-robin under new host names and GPU UUIDs, so that no two are
             alike) written as JSON and read back, as the nodes send them, then judged with preflight's own rules
             (`GD1`, `GD5`, `GD8`: each node alone, then the nodes against each other); and the verdicts GD806–GD809
             with the report over N nodes of 8 GPUs (measured figures made up, all good). In this process, no torch.
--local K,…  a real `gpudoctor preflight --quick` under torchrun with K "nodes" on this host (`--nnodes=K
             --node-rank=i`, one rank each, gloo on CPU): the report's seconds per phase and in all.

Prints one line per size. Nothing here runs NCCL or a GPU: the GPU phase's and the fabric's costs on GPUs are
extrapolated in docs/preflight.md, not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BASES = [ROOT / "fixtures" / "fleet" / f"dgx-0{n}.json" for n in (1, 2, 3)]


def _nodes(count: int) -> list:
    """(name, snapshot JSON text) of `count` distinct nodes, as the agree phase's first ranks send them."""
    bases = [json.loads(path.read_text()) for path in BASES]
    nodes = []
    for index in range(count):
        document = json.loads(json.dumps(bases[index % len(bases)]))
        document["facts"]["host"]["hostname"] = name = f"node{index:04d}"
        for gpu in document["facts"].get("nvml", {}).get("gpus", []):
            gpu["uuid"] = f"GPU-{index:08d}-{gpu.get('index', 0):04d}"
        nodes.append((name, json.dumps(document)))
    return nodes


def agree(count: int) -> dict:
    """Seconds of the agree phase's judging on the reporting rank over `count` nodes, and the bytes it receives."""
    from gpudoctor.catalog import rules_for_run
    from gpudoctor.fleet import evaluate_fleet
    from gpudoctor.preflight.run import DEFAULT_SELECT, VERDICT_RULES
    from gpudoctor.snapshot import from_json

    rules = [rule for rule in rules_for_run(DEFAULT_SELECT, (), (), True) if rule.id not in VERDICT_RULES]
    sent = _nodes(count)
    started = time.perf_counter()
    nodes = [(name, from_json(json.loads(text), name)) for name, text in sent]
    report = evaluate_fleet(nodes, rules)
    judged = time.perf_counter() - started
    assert len(report.nodes) == count
    return {"nodes": count, "bytes": sum(len(text) for _, text in sent), "agree_s": judged,
            "verdicts_s": verdicts(count)}


def verdicts(count: int, gpus_per_node: int = 8) -> float:
    """Seconds of GD806–GD809 and the report over `count` nodes of `gpus_per_node` GPUs (all good)."""
    from gpudoctor.catalog import load_catalog
    from gpudoctor.engine import evaluate
    from gpudoctor.preflight.measure import neighbour_pairs
    from gpudoctor.preflight.result import build
    from gpudoctor.snapshot import Snapshot

    labels = [f"node{index:04d}" for index in range(count)]
    per = gpus_per_node
    facts = {
        "device": "cuda", "backend": "nccl", "failure": None,
        "nodes": [{"node": label, "host": label, "node_rank": k, "ranks": list(range(k * per, (k + 1) * per)),
                   "arrived": list(range(k * per, (k + 1) * per))} for k, label in enumerate(labels)],
        "gpus": [{"node": labels[rank // per], "rank": rank, "index": rank % per, "uuid": f"GPU-{rank:08d}",
                  "name": "NVIDIA H100 80GB HBM3", "dtype": "bfloat16", "gemm_tflops": 700.0 + rank % 7,
                  "copy_gbps": 2600.0 + rank % 5} for rank in range(count * per)],
        "fabric": {"intra": [{"node": label, "ranks": list(range(k * per, (k + 1) * per)), "busbw_gbps": 450.0,
                              "wrong": 0, "rows": []} for k, label in enumerate(labels)],
                   "cross": {"nodes": labels, "busbw_gbps": 45.0, "wrong": 0, "rows": []},
                   "pairs": [{"nodes": [labels[a], labels[b]], "busbw_gbps": 48.0, "wrong": 0}
                             for a, b in neighbour_pairs(count)],
                   "min_busbw_gbps": None},
    }
    rules = [rule for rule in load_catalog() if rule.id in ("GD806", "GD807", "GD808", "GD809")]
    started = time.perf_counter()
    report = evaluate(Snapshot(facts={"preflight": facts}), rules)
    build(facts=facts, verdicts=report, fleet=None, environ={}, launcher="torchrun", world_size=count * per,
          budget_s=60.0, phases=(), seconds=0.0)
    return time.perf_counter() - started


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def local(count: int, budget: float) -> dict:
    """A real preflight with `count` torchrun nodes on this host: the report's seconds per phase and in all."""
    port = _free_port()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_", "SLURM_", "TORCHELASTIC_", "NCCL_"))}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", f"--nnodes={count}",
                               f"--node-rank={node}", "--nproc-per-node=1", "--master-addr=127.0.0.1",
                               f"--master-port={port}", "-m", "gpudoctor", "preflight", "--format", "json",
                               "--quick", "--budget", f"{budget:g}"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
             for node in range(count)]
    outputs = [proc.communicate(timeout=budget + 120)[0] for proc in procs]
    wall = time.perf_counter() - started
    report = json.loads(next(out for out in outputs if out.strip()))
    return {"nodes": count, "ok": report["ok"], "seconds": report["seconds"], "wall_s": wall,
            **{phase["name"]: phase["seconds"] for phase in report["phases"]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", default="8,64,512", help="node counts for the agree phase's judging ('' to skip)")
    parser.add_argument("--local", default="2,4,8", help="torchrun nodes on this host ('' to skip)")
    parser.add_argument("--budget", type=float, default=60.0, help="--budget of the local runs")
    args = parser.parse_args()
    with open("/proc/loadavg") as handle:
        print(f"load average {handle.read().split()[0]} on {os.cpu_count()} CPUs")
    if args.fleet:
        started = time.perf_counter()
        agree(1)
        print(f"once: imports and the catalog {time.perf_counter() - started:.2f} s (a real run pays it once too)")
        print(f"{'nodes':>6} {'snapshots MB':>13} {'agree s':>8} {'verdicts s':>11}   (agree: judging on rank 0)")
        for count in (int(part) for part in args.fleet.split(",")):
            row = agree(count)
            print(f"{count:>6} {row['bytes'] / 1e6:>13.2f} {row['agree_s']:>8.2f} {row['verdicts_s']:>11.3f}")
    if args.local:
        print(f"{'nodes':>6} {'meet':>6} {'agree':>6} {'gpus':>6} {'fabric':>7} {'report s':>9} {'wall s':>7}  ok"
              "   (a real preflight, gloo on CPU)")
        for count in (int(part) for part in args.local.split(",")):
            row = local(count, args.budget)
            print(f"{count:>6} {row['meet']:>6.1f} {row['agree']:>6.1f} {row['gpus']:>6.1f} {row['fabric']:>7.1f} "
                  f"{row['seconds']:>9.1f} {row['wall_s']:>7.1f}  {row['ok']}")


if __name__ == "__main__":
    main()
