"""Record real multi-rank failures as fixtures: torchrun on gloo (CPU), 4 ranks, one rank failing per scenario.

    python tools/record_run_failures.py fixtures/runs            # all scenarios
    python tools/record_run_failures.py /tmp/runs sleep          # one

Each scenario writes DEST/<scenario>/: torchrun's per-rank files (`--log-dir logs`, `--tee 3`), the launcher's own
console output (`console.log`), and the flight-recorder dumps the ranks wrote on an exception (`fr/trace_rank_N`).
The job is tools/run_failure_job.py; `gpudoctor check --from DEST/<scenario>` reads it back (tests/test_run_logs.py).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

SCENARIOS = {  # scenario → (FAIL_MODE, the rank that fails)
    "raise": ("raise", 2),
    "sigkill": ("sigkill", 1),
    "sleep": ("sleep", 3),
    "mismatch": ("mismatch", 1),
}
JOB = Path(__file__).with_name("run_failure_job.py")


def _job() -> str:
    """The job's path as the logs will show it: relative to the working directory where it is inside it."""
    try:
        return str(JOB.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(JOB)


def record(dest: Path, scenario: str, python: str = sys.executable, timeout: float = 120) -> Path:
    mode, rank = SCENARIOS[scenario]
    out = dest / scenario
    shutil.rmtree(out, ignore_errors=True)
    (out / "fr").mkdir(parents=True)
    env = {**os.environ, "FAIL_MODE": mode, "FAIL_RANK": str(rank), "TIMEOUT_S": "5", "OMP_NUM_THREADS": "1",
           "TORCH_FR_BUFFER_SIZE": "200", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(out / "fr" / "trace_rank_")}
    if mode == "mismatch":
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    argv = [python, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--log-dir", str(out / "logs"),
            "--tee", "3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", _job()]
    with open(out / "console.log", "wb") as console:
        subprocess.run(argv, env=env, stdout=console, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    return out


def main() -> None:
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures/runs")
    for scenario in sys.argv[2:] or list(SCENARIOS):
        print(record(dest, scenario))


if __name__ == "__main__":
    main()
