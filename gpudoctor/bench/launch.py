"""Start the benchmark's ranks: under torchrun or srun use their environment, otherwise spawn local workers.

No home-made transport: every rank calls `torch.distributed.init_process_group` and the collectives go through
NCCL (GPUs) or gloo (CPU). Locally the workers are `multiprocessing` spawn processes that rendezvous over TCP on
127.0.0.1, supervised here (a failure, Ctrl-C or SIGTERM stops them all); under torchrun the `env://`
rendezvous uses MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE; under srun the SLURM_* variables are mapped onto those
(gpudoctor.rendezvous, shared with `check --fleet` and `preflight`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import tempfile
from typing import Callable, Mapping, Optional, Tuple

from gpudoctor.bench import BenchError
from gpudoctor.errors import InputError
from gpudoctor.rendezvous import Rank, env_int, launched_rank


def cuda_device_count(torch) -> int:
    """CUDA's own device count, for a rank that is about to use CUDA: torch.cuda.device_count() before CUDA
    initialises is NVML's count of the GPUs CUDA_VISIBLE_DEVICES names (torch/cuda/__init__.py `_device_count_nvml`,
    pytorch#83973), which is not CUDA's on a MIG node; initialising first makes it CUDA's."""
    if not torch.cuda.is_available():
        return 0
    torch.cuda.init()
    return torch.cuda.device_count()


def local_device_index(local_rank: int, devices: int) -> int:
    """The CUDA device a rank binds, as torchrun and srun expose GPUs: its local rank modulo the devices it sees
    (torchrun: every GPU of the node, local rank i → cuda:i; `srun --gpus-per-task=1`: the task's own GPU, cuda:0
    on every task while SLURM_LOCALID runs 0–7)."""
    return local_rank % devices if devices > 0 else 0


def slurm_tasks_per_node(env: Mapping[str, str]) -> Optional[list]:
    """srun's task count on each node of the step: SLURM_STEP_TASKS_PER_NODE ("8(x2),4" → [8, 8, 4])."""
    counts = []
    for part in (env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or "").split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            return None
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def _tasks_here(env: Mapping[str, str]) -> Optional[int]:
    """srun's task count on this node (SLURM_NODEID)."""
    counts = slurm_tasks_per_node(env) or []
    node = env_int(env, "SLURM_NODEID") or 0
    return counts[node] if node < len(counts) else None


def local_layout(environ: Optional[Mapping[str, str]] = None) -> Tuple[int, bool, str]:
    """For a launched rank: (ranks on this node, whether each has GPUs of its own, what says so). torchrun's
    ranks share the node's GPUs (LOCAL_WORLD_SIZE); srun's tasks have their own when the step binds GPUs per task
    (--gpus-per-task implies --gpu-bind=per_task unless --gpu-bind says otherwise: SLURM's srun manual), else
    they share the GPUs they see. Every rank reads the same, so a bad layout fails on all of them at once."""
    env = os.environ if environ is None else environ
    local_world = env_int(env, "LOCAL_WORLD_SIZE")
    if local_world:
        return local_world, False, f"LOCAL_WORLD_SIZE={env['LOCAL_WORLD_SIZE']}"
    tasks = _tasks_here(env) if "SLURM_PROCID" in env else None
    if not tasks:
        return 1, False, ""
    own = bool(env.get("SLURM_GPUS_PER_TASK")) and not (env.get("SLURM_GPU_BIND") or "").startswith("none")
    return tasks, own, f"srun starts {tasks} task(s) on this node"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def default_nprocs() -> int:
    """One rank per visible GPU, or 2 on a machine without one."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return count if count > 0 else 2


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this worker when the gpudoctor that spawned it dies (even of SIGKILL)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def _spawned(index: int, fn: Callable, world: int, port: int, config, folder: str, parent: int) -> None:
    """Body of a spawned worker: run `fn` as rank `index`; rank 0 writes the result for the parent.

    The worker starts with SIGINT and SIGTERM blocked (inherited from the parent while it spawns) and ignores
    SIGINT: a Ctrl-C reaches the whole terminal's process group, and the parent alone decides to stop the ranks
    (SIGTERM, whose default action ends a worker without a word). The first failure is one line in FIRST_ERROR.
    Every rank leaves with os._exit, skipping the interpreter's and the C++ libraries' exit-time teardown: a
    failing rank's process group was never destroyed (a peer may be inside a collective with it), and even after
    destroy_process_group tearing gloo's threads down at exit can call std::terminate ("terminate called without an
    active exception" and SIGABRT for a rank that succeeded: pytorch/pytorch#65513, #190489). Its result is written
    and closed first; the kernel closes its sockets; the parent stops the others after a failure.
    """
    import warnings

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)
    _die_with_parent(parent)
    warnings.filterwarnings("ignore", category=FutureWarning)
    rank = Rank(index, world, index, f"tcp://127.0.0.1:{port}", "local")
    try:
        result = fn(rank, config)
        if index == 0:
            with open(os.path.join(folder, "rank0.json"), "w", encoding="utf-8") as handle:
                json.dump(result, handle)
    except Exception as exc:  # noqa: BLE001 - the parent reports it in one line
        text = str(exc).strip().splitlines()
        said = isinstance(exc, (BenchError, InputError)) and text  # our own one-line errors, as they are
        line = text[0] if said else f"{type(exc).__name__}: {' '.join(text)[:300]}"
        _claim_first_error(folder, index, f"rank {index}: {line}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


FIRST_ERROR = "first-error"


def _claim_first_error(folder: str, index: int, line: str) -> None:
    """Make `line` FIRST_ERROR unless another rank failed first: the first failure is the cause, the others'
    errors (a peer's "connection closed") follow from it. A hard link appears whole or not at all, and only once,
    where file times can tie."""
    mine = os.path.join(folder, f"error.{index}")
    with open(mine, "w", encoding="utf-8") as handle:
        handle.write(line)
    try:
        os.link(mine, os.path.join(folder, FIRST_ERROR))
    except OSError:  # FileExistsError: another rank failed first (no hard links: the exit status is said)
        pass


_HELD = {signal.SIGINT, signal.SIGTERM}
STOP_GRACE_S = 3.0  # a worker gets this long to end on SIGTERM before SIGKILL


class _Terminated(SystemExit):
    """SIGTERM to the parent: leave quietly with 143 once the workers are stopped."""


def _on_sigterm(signum, frame):
    raise _Terminated(128 + signal.SIGTERM)


def _stop(procs: list) -> None:
    """End every worker still running: SIGTERM, then SIGKILL after STOP_GRACE_S, and reap them all."""
    import time

    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join()


def _failure(folder: str, proc, index: int) -> str:
    """One line for the failure: the first error a worker wrote, else how worker `index` ended."""
    try:
        with open(os.path.join(folder, FIRST_ERROR), encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        pass
    code = proc.exitcode
    if code is not None and code < 0:
        return f"rank {index} was killed by {signal.Signals(-code).name}"
    return f"rank {index} exited with status {code}"


def _supervise(procs: list, folder: str) -> None:
    """Wait for every worker; at the first that fails, raise (the caller stops the others at once)."""
    from multiprocessing.connection import wait

    pending = {proc.sentinel: index for index, proc in enumerate(procs)}
    while pending:
        for sentinel in wait(list(pending)):
            index = pending.pop(sentinel)
            procs[index].join()
            if procs[index].exitcode != 0:
                raise BenchError(f"a benchmark worker failed: {_failure(folder, procs[index], index)}")


def run_ranks(fn: Callable, config, nprocs: Optional[int] = None) -> tuple:
    """Run `fn(rank, config)` on every rank; return (this process's Rank, rank 0's result or None).

    Under torchrun/srun this process is one rank and returns its own result (equal on every rank: the
    benchmark derives it from collective data). Otherwise spawn `nprocs` workers and return rank 0's result;
    a failing worker, Ctrl-C or SIGTERM here stops every worker within STOP_GRACE_S.
    """
    import multiprocessing
    import threading
    from multiprocessing import resource_tracker

    mine = launched_rank("bench nccl")
    if mine is not None:
        return mine, fn(mine, config)
    world = nprocs or default_nprocs()
    if world < 1:
        raise BenchError(f"--nprocs must be at least 1, got {world}")
    context = multiprocessing.get_context("spawn")
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    procs: list = []
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as folder:
        try:
            port = free_port()
            resource_tracker.ensure_running()  # it unblocks SIGINT when it starts: not inside the held block
            held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
            try:
                for index in range(world):
                    procs.append(context.Process(target=_spawned, daemon=True,
                                                 args=(index, fn, world, port, config, folder, os.getpid())))
                    procs[-1].start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a signal held meanwhile arrives here
            _supervise(procs, folder)
        finally:
            _stop(procs)
            if main_thread:
                signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        with open(os.path.join(folder, "rank0.json"), encoding="utf-8") as handle:
            return Rank(0, world, 0, "tcp", "local"), json.load(handle)
