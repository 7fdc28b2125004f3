"""Lines per second and peak memory of `gpudoctor check --from DIR` on one run of many ranks.

    python benchmarks/run_throughput.py [--ranks 512] [--mb 8] [--runs 1] [--keep DIR]

Writes a run of --ranks ranks as torchrun's `--log-dir` lays it out (`attempt_0/<rank>/stderr.log`, about --mb MB
each: Python logging step lines, tqdm-style progress, NCCL INFO lines), in which rank 137 (or the middle rank)
runs out of GPU memory and every other rank's watchdog then times out in the same all_reduce; then times, best of
--runs, the run's reader in this process (gpudoctor.ingest.source.snapshot_from_reports: every file streamed, the
lines placed per rank) and the whole CLI (`python -m gpudoctor check --from DIR --format json`, whose peak memory
is its maximum resident set). Prints lines/s by wall time and by CPU time (another user's load stretches the
first, not the second), the machine's load average, the peak memory, and checks that the answer is right.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from log_throughput import best  # noqa: E402  (benchmarks/ is no package; the script's folder is on sys.path)

WATCHDOG = ("[rank{r}]:[E1202 01:{m:02}:11.{us:06} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=90211, OpType=ALLREDUCE, NumelIn=4194304, NumelOut=4194304, "
            "Timeout(ms)=600000) ran for 600027 milliseconds before timing out.\n")
OOM = ("[rank{r}]:[E1202 00:{m:02}:10.{us:06} api.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
       "2.00 GiB. GPU 5 has a total capacity of 79.11 GiB of which 1.10 GiB is free.\n")


def write_rank(path: Path, rank: int, megabytes: int, failing: int) -> int:
    step = "2026-12-02 00:{m:02}:{m:02},{ms:03} INFO step {i} loss {loss:.4f} lr 1e-05 grad_norm 1.25 tokens/s 18211\n"
    bar = " 41%|████      | {i}/30000 [28:11<40:33, 7.30 it/s]\n"
    block = "".join(step.format(m=i % 60, ms=i % 1000, i=i, loss=2 + i / 1e4) if i % 4 else bar.format(i=i)
                    for i in range(4000))
    host = f"gpu-{rank // 8:03}:4021{rank % 8}:40367 [{rank % 8}]"
    block += f"{host} NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        while handle.tell() < megabytes * 2 ** 20:
            handle.write(block)
        handle.write((OOM if rank == failing else WATCHDOG).format(r=rank, m=rank % 60, us=rank))
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(2 ** 24), b""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=512)
    parser.add_argument("--mb", type=int, default=8, help="MB per rank's log")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", help="write the run here and keep it (default: a temporary folder, removed)")
    args = parser.parse_args()
    failing = 137 if args.ranks > 137 else args.ranks // 2
    folder = Path(args.keep or tempfile.mkdtemp(prefix="gpudoctor-run-"))
    try:
        lines = sum(write_rank(folder / "none_run" / "attempt_0" / str(r) / "stderr.log", r, args.mb, failing)
                    for r in range(args.ranks))
        size = sum(p.stat().st_size for p in folder.rglob("*.log"))
        from gpudoctor.facts.run import postmortem
        from gpudoctor.ingest.source import snapshot_from_reports

        wall, cpu, snapshot = best(lambda: snapshot_from_reports([str(folder)]), args.runs)
        found = postmortem(snapshot.facts["run"])
        assert [r["rank"] for r in found.first] == [failing], found.basis
        assert len(found.waiting) == args.ranks - 1
        cli = [sys.executable, "-m", "gpudoctor", "check", "--from", str(folder), "--format", "json"]
        env = dict(os.environ, PYTHONPATH=str(ROOT))

        def run_cli():
            done = subprocess.run(cli, capture_output=True, env=env, check=False)
            assert done.returncode == 1, done.stderr[-2000:]
            return json.loads(done.stdout)

        cli_wall, cli_cpu, report = best(run_cli, args.runs)
        assert [r["rank"] for r in report["run"]["first_failing"]] == [failing]
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"{args.ranks} ranks, {size / 2 ** 30:.2f} GiB, {lines / 1e6:.1f} M lines; load average "
              f"{os.getloadavg()[0]:.1f}; best of {args.runs}")
        print("| reader | wall: seconds | lines/s | CPU: seconds | lines per CPU second |")
        print("| --- | --- | --- | --- | --- |")
        for name, w, c in (("the run's reader (in process)", wall, cpu), ("`gpudoctor check --from DIR` (CLI)",
                                                                            cli_wall, cli_cpu)):
            print(f"| {name} | {w:.1f} | {lines / w / 1e6:.2f} M | {c:.1f} | {lines / c / 1e6:.2f} M |")
        print(f"peak memory of the CLI: {peak_mib:.0f} MiB; first failing rank: {failing} (found)")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
