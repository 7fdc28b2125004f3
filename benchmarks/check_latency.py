"""Wall-clock latency of `gpudoctor check` against its peers, measured in the same run.

    python benchmarks/check_latency.py [--runs 7] [--python PATH]

Peers: `python -m torch.utils.collect_env` (what users paste today) and `python -c "import torch"` (the floor:
gpudoctor imports torch in a child process, concurrently with its other probes); `check --quick` reads torch's
versions from its files instead. Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def median_seconds(argv: list, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch and gpudoctor")
    args = parser.parse_args()
    commands = {
        "gpudoctor check": [args.python, "-m", "gpudoctor", "check", "--format", "json"],
        "check --quick": [args.python, "-m", "gpudoctor", "check", "--quick", "--format", "json"],
        "collect_env": [args.python, "-m", "torch.utils.collect_env"],
        "import torch": [args.python, "-c", "import torch"],
    }
    for argv in commands.values():  # warm the page cache once
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    results = {name: median_seconds(argv, args.runs) for name, argv in commands.items()}
    base = results["gpudoctor check"]
    print(f"median of {args.runs} runs, same machine, same interpreter ({args.python})")
    for name, seconds in results.items():
        print(f"  {name:<16} {seconds:6.2f} s   gpudoctor check / {name} = {base / seconds:.2f}")


if __name__ == "__main__":
    main()
