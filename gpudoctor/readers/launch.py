"""The launch model: how a job starts its training script, read from the job's files (never run).

From sbatch and shell scripts, Kubernetes manifests (Pod, Job, Deployment, PyTorchJob, MPIJob, JobSet …), Compose
files, Dockerfile `CMD`/`ENTRYPOINT` and nemo_run executors, each command that starts a Python script becomes one job in
`facts["launch"]["jobs"]` (docs/snapshot.md), with the file and line of every value:
- `launchers`: the chain that starts it, outermost first (`srun`, `mpirun`, `torchrun`, `deepspeed`, `accelerate`,
  the Kubeflow training operator, a plain `python`), each with the ranks it starts per node;
- `ranks_per_node`: their product (`"gpu"`: one per GPU; None: it depends on the run);
- `gpus`: the GPUs a node (pod) of the job gets, and where that is said (`--gres=gpu:4`, `nvidia.com/gpu: 4`,
  `CUDA_VISIBLE_DEVICES=0,1`); None when nothing in the files says;
- `script`: the script path as written and, when it is there, the path of its analysis in `facts["scripts"]`
  (resolved relative to the job file by readers/follow.py; the script is read, never run);
- `env_sets`: the rank variables the job sets itself (RANK, WORLD_SIZE, …); `pod`: what a Kubernetes container
  asks for (GPUs, /dev/shm, EFA and RDMA devices, IPC_LOCK).
Values that depend on the run (`$SLURM_GPUS_ON_NODE`, `$(nvidia-smi -L | wc -l)`) are unknown, never guessed.
"""

from __future__ import annotations

from typing import List

from gpudoctor.knowledge import SETS_LOCAL_RANK_ENV

RANK_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
SETS_RANK_ENV = SETS_LOCAL_RANK_ENV | {"training-operator"}  # one process per pod: RANK and WORLD_SIZE, no LOCAL_RANK


def ranks_of(launchers: List[dict]) -> tuple:
    """(ranks per node, how it is made up) from a launcher chain: nested launchers multiply."""
    total, parts, per_gpu = 1, [], False
    multipliers = [entry for entry in launchers if entry["name"] != "python" or len(launchers) == 1]
    for entry in multipliers:
        value = entry.get("ranks_per_node")
        parts.append(f"{entry['name']}: {value if value is not None else 'unknown'}"
                     + (f" ({entry['source']})" if entry.get("source") else ""))
        if value is None:
            return None, " × ".join(parts)
        if value == "gpu":
            per_gpu = True
        else:
            total *= int(value)
    if per_gpu:  # one rank per GPU, under one srun task per node (several tasks: each starts one per GPU)
        return ("gpu" if total == 1 else None), " × ".join(parts)
    return total, " × ".join(parts)


def finish_job(job: dict) -> dict:
    """Fill in the derived fields of one job."""
    job["ranks_per_node"], job["ranks_what"] = ranks_of(job["launchers"])
    job["sets_rank_env"] = any(entry["name"] in SETS_RANK_ENV for entry in job["launchers"])
    return job
