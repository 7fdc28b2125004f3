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
  (resolved relative to the job file; the script is read, never run);
- `env_sets`: the rank variables the job sets itself (RANK, WORLD_SIZE, …); `pod`: what a Kubernetes container
  asks for (GPUs, /dev/shm, EFA and RDMA devices, IPC_LOCK).
Values that depend on the run (`$SLURM_GPUS_ON_NODE`, `$(nvidia-smi -L | wc -l)`) are unknown, never guessed.
"""

from __future__ import annotations

import os
from typing import List, Optional

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


def attach_script(job: dict, job_path: str, snapshot, reads) -> None:
    """Resolve the job's script relative to the job file and analyse it when it is there (read, never run), read
    as a Python file through `reads` (registry.Reads: the files read with the job file, each read once)."""
    from gpudoctor.readers.python.script import add_to_snapshot

    script = job.get("script") or {}
    written = script.get("path")
    if not written:
        return
    for candidate in _candidates(job_path, written):
        existing = _analysed(snapshot, candidate)
        if existing:
            script["analysed_as"] = existing
            return
        try:
            read = getattr(reads.read(candidate, "python"), "script", None)
        except OSError:
            continue
        if read is not None:
            add_to_snapshot(snapshot, candidate, read)
            script["analysed_as"] = candidate
            return


def _candidates(job_path: str, written: str) -> List[str]:
    """Where a file a job names may be: relative to the job file, and (an absolute or home path, as inside a
    container) its name beside the job file."""
    folder = os.path.dirname(job_path)
    candidates = [os.path.normpath(os.path.join(folder, written))]
    if os.path.isabs(written) or written.startswith("~"):
        candidates.append(os.path.normpath(os.path.join(folder, os.path.basename(written))))
    return candidates


def shell_script_jobs(job: dict, job_path: str, depth: int = 0) -> List[dict]:
    """`srun bash run.sh` in a batch script: the jobs run.sh starts, under the launchers before it and with the
    GPUs and nodes the batch script asks for, where run.sh is there to read (else none: its jobs are not known)."""
    script = job.get("script") or {}
    if not script.get("shell"):
        return [job]
    from gpudoctor.files import read_bytes
    from gpudoctor.readers.shell.jobs import read_script

    for candidate in _candidates(job_path, script["path"]) if depth < 3 else []:
        try:
            text = read_bytes(candidate).decode("utf-8", "replace")
        except OSError:
            continue
        found = []
        for inner in read_script(text, candidate, context=f"run by `{job['command'][:60]}` at {job_path}:"
                                                           f"{job['line']}")[1]:
            inner["launchers"] = [dict(entry) for entry in job["launchers"]] + inner["launchers"]
            inner["conditional"] = inner["conditional"] or job["conditional"]
            for key in ("gpus", "nodes"):
                if inner.get(key) is None and job.get(key) is not None:
                    inner[key] = job[key]
            found += shell_script_jobs(finish_job(inner), candidate, depth + 1)
        return found
    return []


def attach_launcher_config(job: dict, job_path: str) -> None:
    """`accelerate launch --config_file cfg.yaml`, `deepspeed --hostfile hosts`: the ranks per node the file says,
    where it is there."""
    from gpudoctor.files import read_bytes
    from gpudoctor.readers import launcher_files

    for entry in job.get("launchers", []):
        written = entry.get("config_file")
        if not written or entry.get("ranks_per_node") is not None or entry.get("unresolved"):
            continue
        reader = launcher_files.deepspeed_ranks if entry["name"] == "deepspeed" else launcher_files.accelerate_ranks
        for candidate in _candidates(job_path, written):
            try:
                said = reader(read_bytes(candidate).decode("utf-8", "replace"), written)
            except OSError:
                continue
            if said is not None:
                entry.update(said, config_path=candidate)
                finish_job(job)
            break


def _analysed(snapshot, candidate: str) -> Optional[str]:
    wanted = os.path.abspath(candidate)
    for entry in snapshot.facts.get("scripts", []) or []:
        if isinstance(entry, dict) and os.path.abspath(str(entry.get("path", ""))) == wanted:
            return entry["path"]
    return None


def add_to_snapshot(snapshot, jobs: List[dict], pods: List[dict], path: str, reads) -> None:
    """Merge one file's jobs and pods into `facts["launch"]`, analysing the scripts the jobs start (`reads`: see
    attach_script)."""
    jobs = [inner for job in jobs for inner in shell_script_jobs(job, path)]
    for job in jobs:
        attach_script(job, path, snapshot, reads)
        attach_launcher_config(job, path)
    if jobs or pods:
        launch = snapshot.facts.setdefault("launch", {})
        launch.setdefault("jobs", []).extend(jobs)
        launch.setdefault("pods", []).extend(pods)
