"""The files a job leads to, read where they are there (never run), as its jobs join the snapshot: the training script
it starts (read by the registry's Python format, through `registry.Reads`), the shell script `srun bash run.sh` runs
(its jobs under the batch script's launchers and GPUs), the file `accelerate launch --config_file` or `deepspeed
--hostfile` names."""

from __future__ import annotations

import os
from typing import List, Optional

from gpudoctor.readers.launch import finish_job
from gpudoctor.redact import cut


def attach_script(job: dict, job_path: str, snapshot, reads) -> None:
    """Resolve the job's script relative to the job file and analyse it when it is there (read, never run), read
    as a Python file through `reads` (registry.Reads: the files read with the job file, each read once)."""
    from gpudoctor.readers.python.script import add_to_snapshot

    script = job.get("script") or {}
    written = script.get("path")
    if not written or script.get("folder_unknown"):  # `cd "$WORK/src"`: which train.py it is, is not known
        return
    for candidate in candidates(job_path, written):
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


def candidates(job_path: str, written: str) -> List[str]:
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

    for candidate in candidates(job_path, script["path"]) if depth < 3 else []:
        try:
            text = read_bytes(candidate).decode("utf-8", "replace")
        except OSError:
            continue
        found = []
        for inner in read_script(text, candidate, context=f"run by `{cut(job['command'], 60)}` at {job_path}:"
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
        for candidate in candidates(job_path, written):
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
