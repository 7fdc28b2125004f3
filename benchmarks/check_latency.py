"""Wall-clock latency of gpudoctor's checks and hooks against their peers, measured in the same run.

    python benchmarks/check_latency.py [--runs 7] [--python PATH]

Each command runs whole (a new process, as a Prolog or a user starts it), round-robin so that a machine that gets
busier mid-run slows every command alike; the first round only warms the page cache and writes gpudoctor's
bytecode (as `pip install` does; PYTHONDONTWRITEBYTECODE and PYTHONUNBUFFERED, which a user's shell rarely sets,
are dropped for the runs). Prints the medians and each ratio against its peer, beside the target:

  Prolog         `check --select GD105,GD5 --format json` (deploy/slurm/prolog.sh's check)  vs `import torch`
  TaskProlog     `fix --format slurm --quick --select GD4` (deploy/slurm/taskprolog.sh's)   vs `import torch`
  check --quick  versions read from files, torch not imported                               vs `import torch`
  check          the full check (imports the job's torch in a child)                        vs `collect_env`
  Prolog, 8 GPUs the Prolog on a simulated 8-GPU node (tests/nvmlsim's driver, built with the C compiler):
                 the NVML probe's child imports nvidia-ml-py and reads the GPUs, as on a GPU node      vs `import torch`

`import torch` is the floor of anything that imports torch; `python -m torch.utils.collect_env` is what users
paste today. Targets are goals, not CI gates: the run prints whether each is met (on the wall clock; the CPU ratio
beside it is steadier on a machine that is busy with other work).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]

GPUDOCTOR = ["-m", "gpudoctor"]
COMMANDS = {
    "import torch": ["-c", "import torch"],
    "collect_env": ["-m", "torch.utils.collect_env"],
    "Prolog": GPUDOCTOR + ["check", "--select", "GD105,GD5", "--format", "json"],
    "TaskProlog": GPUDOCTOR + ["fix", "--format", "slurm", "--quick", "--select", "GD4"],
    "check --quick": GPUDOCTOR + ["check", "--quick", "--format", "json"],
    "check": GPUDOCTOR + ["check", "--format", "json"],
}
SIMULATED = "Prolog, 8 GPUs"  # COMMANDS["Prolog"] where NVML is tests/nvmlsim's simulated driver
DRIVER = "/proc/driver/nvidia/version"  # the kernel module's file: whether this machine has an NVIDIA driver
DROPPED = ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")  # set in the shells that develop gpudoctor, not on a node
# name: (peer, target ratio)
TARGETS = {
    "Prolog": ("import torch", 0.10),
    "TaskProlog": ("import torch", 0.15),
    "check --quick": ("import torch", 0.10),
    "check": ("collect_env", 0.8),
    SIMULATED: ("import torch", 0.10),
}
GiB = 2**30


def seconds(argv: list, env: dict) -> tuple:
    """(wall seconds, CPU seconds of the process and its children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def simulated_node(folder: Path, env: dict) -> Optional[dict]:
    """`env` where NVML is an 8-GPU H100 node's simulated driver (tests/nvmlsim); None without a C compiler."""
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]
    import nvmlsim

    gpus = [{"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{index:08x}-0000-4000-8000-000000000000", "cc": "9.0",
             "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0", "minor": index,
             "memory": {"total": 80 * GiB, "reserved": GiB // 2, "used": 0}} for index in range(8)]
    try:
        return nvmlsim.node_env({"driver_version": "550.90.07", "cuda_version": 12040, "gpus": gpus}, folder, env)
    except Exception as exc:  # noqa: BLE001 - no compiler: the row is left out, and said so
        print(f"{SIMULATED}: left out ({type(exc).__name__}: {str(exc)[:200]})")
        return None


def measure(python: str, runs: int) -> dict:
    """(median wall, median CPU) seconds per command, runs taken round-robin after one warm-up round."""
    env = {key: value for key, value in os.environ.items() if key not in DROPPED}
    commands = {name: (args, env) for name, args in COMMANDS.items()}
    with tempfile.TemporaryDirectory() as folder:
        simulated = simulated_node(Path(folder), env)
        if simulated:
            commands[SIMULATED] = (COMMANDS["Prolog"], simulated)
        times: dict = {name: [] for name in commands}
        for round_ in range(runs + 1):
            for name, (args, command_env) in commands.items():
                elapsed = seconds([python, *args], command_env)
                if round_:
                    times[name].append(elapsed)
    return {name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
            for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch and gpudoctor")
    args = parser.parse_args()
    with open("/proc/loadavg") as handle:
        load = handle.read().split()[0]
    medians = measure(args.python, args.runs)
    print(f"median of {args.runs} runs, round-robin, same machine, same interpreter ({args.python}); "
          f"load average {load} before the runs; wall clock, then CPU (user + system) in brackets")
    if os.path.exists(DRIVER):
        print("NVIDIA driver loaded: the NVML probe reads it in a child process (and waits for the driver's init)")
    else:
        print("no NVIDIA driver: the NVML probe answers without a child process; on a GPU node it starts one "
              "(nvidia-ml-py's import and the GPUs' queries, and the driver's init)")
    for name, (wall, cpu) in medians.items():
        line = f"  {name:<14} {wall:6.3f} s [{cpu:6.3f} s]"
        if name in TARGETS:
            peer, target = TARGETS[name]
            ratio, cpu_ratio = wall / medians[peer][0], cpu / medians[peer][1]
            verdict = "met" if ratio <= target else "NOT met"
            line += f"   {ratio:5.3f}x [{cpu_ratio:5.3f}x] {peer:<12}  target <= {target:.2f}x: {verdict}"
        print(line)


if __name__ == "__main__":
    main()
