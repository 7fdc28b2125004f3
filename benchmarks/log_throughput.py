"""Lines per second of `gpudoctor check --from LOG` against `grep -c NCCL` on the same file, in the same run.

    python benchmarks/log_throughput.py [--mb 100] [--runs 3]

Writes a training log of about --mb MB (loss lines, tqdm-style progress, one NCCL channel line per 2,000 lines,
a healthy NCCL INFO start-up, an Xid at the end) to a temporary file, then times, best of --runs:
  - gpudoctor: the log reader alone (gpudoctor.ingest.source.snapshot_from_reports, in process: streaming,
    keyword prefilter, report parsers on the head), and the whole CLI (`python -m gpudoctor check --from`);
  - grep: `grep -c NCCL FILE` (a C program that only counts matching lines: the peer for a cheap prefilter);
  - wc: `wc -l FILE` (reading the file, the floor).
Prints lines/s for each by wall time and by CPU time (the process's and its children's: what another user's load
does not stretch), the machine's load average, and gpudoctor's ratio to grep.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HEALTHY = (ROOT / "fixtures" / "logs" / "nccl_ib_healthy_2nodes.log").read_text()
XID = ("[Tue Mar  4 05:02:44 2025] NVRM: Xid (PCI:0000:86:00): 79, pid='<unknown>', name=<unknown>, "
       "GPU has fallen off the bus.\n")


def write_log(path: Path, megabytes: int) -> int:
    block = "".join(f"{{'loss': {2 + i / 1000:.4f}, 'grad_norm': 1.25, 'learning_rate': 1e-05, 'epoch': 0.{i:04d}}}\n"
                    if i % 3 else f" 41%|████      | {i}/3000 [28:11<40:33, 727.30 it/s]\n" for i in range(2000))
    block += "gpu-a01:40211:40367 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    with open(path, "w") as handle:
        handle.write(HEALTHY)
        while handle.tell() < megabytes * 2 ** 20:
            handle.write(block)
        handle.write(XID)
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(2 ** 24), b""))


def _cpu() -> float:
    """CPU seconds of this process and of the children it waited for (a loaded machine stretches wall time)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def best(fn, runs: int) -> tuple:
    """(wall seconds, CPU seconds, what the last run returned), each time the best of `runs`
    (benchmarks/run_throughput.py measures with it too)."""
    walls, cpus, result = [], [], None
    for _ in range(runs):
        started, cpu = time.perf_counter(), _cpu()
        result = fn()
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu() - cpu)
    return min(walls), min(cpus), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from gpudoctor.ingest.source import snapshot_from_reports

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train.log"
        lines = write_log(log, args.mb)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        # the peers' output is read, not sent to /dev/null: GNU grep stops at the first match when its output is
        # /dev/null (as -q does), which would time a count it never made
        captured = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
        results = {
            "gpudoctor (reader)": best(lambda: snapshot_from_reports([str(log)]), args.runs),
            "gpudoctor check --from": best(lambda: subprocess.run(
                [sys.executable, "-m", "gpudoctor", "check", "--from", str(log)], env=env, cwd=ROOT, **quiet),
                args.runs),
            "grep -c NCCL": best(lambda: subprocess.run(["grep", "-c", "NCCL", str(log)], **captured), args.runs),
            "wc -l": best(lambda: subprocess.run(["wc", "-l", str(log)], **captured), args.runs),
        }
    print(f"{lines:,} lines, {args.mb} MB, best of {args.runs}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(f"  {'':24s} {'wall':>8s} {'lines/s':>14s} {'CPU':>8s} {'lines/CPU s':>14s}")
    for name, (wall, cpu, _) in results.items():
        print(f"  {name:24s} {wall:7.2f}s {lines / wall / 1e6:8.2f} M/s {cpu:7.2f}s "
              f"{lines / max(cpu, 1e-3) / 1e6:8.2f} M/s")
    reader, grep = results["gpudoctor (reader)"], results["grep -c NCCL"]
    print(f"  gpudoctor reader / grep -c: 1/{reader[0] / grep[0]:.0f} of grep's speed (wall), "
          f"1/{reader[1] / max(grep[1], 1e-3):.0f} (CPU)")


if __name__ == "__main__":
    main()
