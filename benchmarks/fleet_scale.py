"""`gpudoctor fleet` over many recorded nodes: wall time and peak memory against the number of nodes.

    python benchmarks/fleet_scale.py [--nodes 128,1024,10000] [--format json] [--distinct]

    python benchmarks/fleet_scale.py --distinct          # the curve at 128, 1,024 and 10,000 nodes that all differ
    python benchmarks/fleet_scale.py                     # the same for nodes of three kinds

The nodes are the three recorded DGX nodes of fixtures/fleet (two alike, one with another NCCL and driver), copied
round-robin under new host names (node00000 …), as a job's snapshots would be collected: nodes of a few kinds,
which gpudoctor judges once per kind. With --distinct every node also gets its own GPU UUIDs, so no two are alike
and each is judged on its own (a rule's verdict reused where the facts it read are the same). Each size runs
`python -m gpudoctor fleet FILE… --format FORMAT` once in a new process, its output thrown away; the peak is the
process's maximum resident set (getrusage). Prints one line per size: nodes, seconds, seconds per 1,000 nodes, MB.
Run it with byte-code cached, as on a user's machine (PYTHONDONTWRITEBYTECODE unset), on an otherwise idle machine:
the first line gives the load average. docs/fleet.md quotes a run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASES = [ROOT / "fixtures" / "fleet" / f"dgx-0{n}.json" for n in (1, 2, 3)]


def write_nodes(folder: Path, count: int, distinct: bool = False) -> list:
    """`count` snapshot files: the three recorded nodes round-robin, each with its own host name (and, `distinct`,
    its own GPU UUIDs)."""
    bases = [json.loads(path.read_text()) for path in BASES]
    paths = []
    for index in range(count):
        document = bases[index % len(bases)]
        document["facts"]["host"]["hostname"] = f"node{index:05d}"
        for gpu in document["facts"].get("nvml", {}).get("gpus", []) if distinct else []:
            gpu["uuid"] = f"GPU-{index:08d}-{gpu.get('index', 0):04d}"
        path = folder / f"node{index:05d}.json"
        path.write_text(json.dumps(document))
        paths.append(str(path))
    return paths


def run(paths: list, fmt: str) -> tuple:
    """(seconds, peak MB) of one `gpudoctor fleet` process over the files."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gpudoctor", "fleet", *paths, "--format", fmt],
                          cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"gpudoctor fleet failed ({done.returncode}): {done.stderr.strip()[:300]}")
    peak = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="128,1024,10000", help="comma-separated node counts")
    parser.add_argument("--format", default="json", choices=("json", "plain"))
    parser.add_argument("--distinct", action="store_true", help="no two nodes alike (each its own GPU UUIDs)")
    args = parser.parse_args()
    with open("/proc/loadavg") as handle:
        print(f"load average {handle.read().split()[0]}; format {args.format}; "
              f"{'every node distinct' if args.distinct else 'nodes of three kinds'}")
    print(f"{'nodes':>7} {'seconds':>9} {'s/1k nodes':>11} {'peak MB':>9}")
    for count in (int(part) for part in args.nodes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            paths = write_nodes(Path(folder), count, args.distinct)
            seconds, peak = run(paths, args.format)
        print(f"{count:>7} {seconds:>9.2f} {seconds / count * 1000:>11.2f} {peak:>9.0f}")


if __name__ == "__main__":
    main()
