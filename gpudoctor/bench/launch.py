"""Start the benchmark's ranks: under torchrun or srun use their environment, otherwise spawn local workers.

No home-made transport: every rank calls `torch.distributed.init_process_group` and the collectives go through
NCCL (GPUs) or gloo (CPU). Locally the workers are `torch.multiprocessing` processes that rendezvous over TCP on
127.0.0.1; under torchrun the `env://` rendezvous uses MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE; under srun the
SLURM_* variables are mapped onto those.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

from gpudoctor.bench import BenchError

DEFAULT_PORT = "29500"


@dataclass(frozen=True)
class Rank:
    """Who this process is in the job and how it meets the others."""

    rank: int
    world_size: int
    local_rank: int
    init_method: str
    launcher: str  # local | torchrun | slurm


def _int(environ: Mapping[str, str], name: str) -> Optional[int]:
    try:
        return int(environ[name])
    except (KeyError, ValueError):
        return None


def _first_slurm_host(nodelist: str) -> Optional[str]:
    """The first host of a SLURM node list, expanded by `scontrol show hostnames` (as srun users do)."""
    scontrol = shutil.which("scontrol")
    if not scontrol or not nodelist:
        return None
    try:
        out = subprocess.run([scontrol, "show", "hostnames", nodelist], capture_output=True, text=True,
                             timeout=10, check=False).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def rank_from_env(environ: Optional[Mapping[str, str]] = None) -> Optional[Rank]:
    """This process's rank when a launcher started it (torchrun: RANK/WORLD_SIZE; srun: SLURM_PROCID/
    SLURM_STEP_NUM_TASKS or SLURM_NTASKS), else None. Sets MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE for srun."""
    env = os.environ if environ is None else environ
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and world is not None:
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            if not env.get(name):
                raise BenchError(f"RANK and WORLD_SIZE are set but {name} is not: start the benchmark with torchrun, "
                                 "or unset RANK/WORLD_SIZE to let gpudoctor spawn local workers")
        return Rank(rank, world, _int(env, "LOCAL_RANK") or 0, "env://", "torchrun")
    # srun sets SLURM_STEP_NUM_TASKS for a job step; an sbatch script alone (one process) is not a step of N tasks.
    rank = _int(env, "SLURM_PROCID")
    world = _int(env, "SLURM_STEP_NUM_TASKS") or (_int(env, "SLURM_NTASKS") if "SLURM_STEP_ID" in env else None)
    if rank is None or not world or world < 2:
        return None
    master = env.get("MASTER_ADDR") or _first_slurm_host(env.get("SLURM_STEP_NODELIST") or
                                                         env.get("SLURM_JOB_NODELIST", ""))
    if not master:
        raise BenchError("under srun but MASTER_ADDR is not set and `scontrol show hostnames` gave no host: "
                         "export MASTER_ADDR (the first node) and MASTER_PORT")
    if environ is None:  # the env:// rendezvous reads these from the process environment
        os.environ.update(MASTER_ADDR=master, MASTER_PORT=env.get("MASTER_PORT") or DEFAULT_PORT,
                          RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(_int(env, "SLURM_LOCALID") or 0))
    return Rank(rank, world, _int(env, "SLURM_LOCALID") or 0, "env://", "slurm")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def default_nprocs() -> int:
    """One rank per visible GPU, or 2 on a machine without one."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return count if count > 0 else 2


def _spawned(index: int, fn: Callable, world: int, port: int, config, result_path: str) -> None:
    """Body of a spawned worker: run `fn` as rank `index`; rank 0 writes the result for the parent."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    rank = Rank(index, world, index, f"tcp://127.0.0.1:{port}", "local")
    result = fn(rank, config)
    if index == 0:
        with open(result_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle)


def run_ranks(fn: Callable, config, nprocs: Optional[int] = None) -> tuple:
    """Run `fn(rank, config)` on every rank; return (this process's Rank, rank 0's result or None).

    Under torchrun/srun this process is one rank and returns its own result (equal on every rank: the
    benchmark derives it from collective data). Otherwise spawn `nprocs` workers and return rank 0's result.
    """
    mine = rank_from_env()
    if mine is not None:
        return mine, fn(mine, config)
    import torch.multiprocessing as mp

    world = nprocs or default_nprocs()
    if world < 1:
        raise BenchError(f"--nprocs must be at least 1, got {world}")
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as tmp:
        path = os.path.join(tmp, "rank0.json")
        try:
            mp.start_processes(_spawned, args=(fn, world, free_port(), config, path), nprocs=world, join=True,
                               start_method="spawn")
        except Exception as exc:  # noqa: BLE001 - a dead worker is a failed benchmark, said in one line
            text = str(exc).strip().splitlines()
            last = next((line for line in reversed(text) if line.strip()), type(exc).__name__)
            raise BenchError(f"a benchmark worker failed: {last.strip()}") from None
        with open(path, encoding="utf-8") as handle:
            return Rank(0, world, 0, "tcp", "local"), json.load(handle)
