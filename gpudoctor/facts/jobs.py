"""The jobs the job files start (`facts["launch"]`, gpudoctor.readers.launch) and the analysis of the script each
starts (`facts["scripts"]`), as the launch rules, GD609, GD614 and the Kubernetes rules read them."""

from __future__ import annotations

import re
import shlex
from typing import Iterator, List, Optional, Tuple

from gpudoctor.model import Location
from gpudoctor.redact import redact_text


def jobs(facts) -> list:
    launch = facts.get("launch", {}) or {}
    return [job for job in launch.get("jobs", []) or [] if isinstance(job, dict)]


def scripts(facts) -> list:
    return [s for s in facts.get("scripts", []) or [] if isinstance(s, dict)]


def script_of(facts, job: dict) -> Optional[dict]:
    """The analysis of the script a job starts, where the script was there to read."""
    wanted = (job.get("script") or {}).get("analysed_as")
    return next((s for s in scripts(facts) if wanted and s.get("path") == wanted), None)


def jobs_with_scripts(facts) -> Iterator[Tuple[dict, dict, dict]]:
    """(job, script, what the script does at launch) for each job whose script was read; a job whose GPUs the job
    files do not say gets those the script keeps (`--gpus 0` where the script sets CUDA_VISIBLE_DEVICES from it)."""
    for job in jobs(facts):
        script = script_of(facts, job)
        if script is not None:
            features = script.get("launch") or {}
            yield _with_script_gpus(job, features), script, features


def command_words(job: dict) -> List[str]:
    """The job's command line as words (as the shell splits it, where it can be)."""
    command = str(job.get("command", ""))
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def option_value(words: List[str], options: List[str]) -> Optional[str]:
    """The value the words give one of `options` (`--gpus 0,1`, `--gpus=0,1`); None when none is given."""
    for index, word in enumerate(words):
        name, equals, value = word.partition("=")
        if name in options:
            return value if equals else (words[index + 1] if index + 1 < len(words) else None)
    return None


def _with_script_gpus(job: dict, features: dict) -> dict:
    if gpus_of(job) is not None:
        return job
    words = command_words(job)
    for item in features.get("sets_visible_devices", []) or []:
        options = item.get("options") or []
        value = option_value(words, options)
        if value and re.fullmatch(r"\d+(,\d+)*", value):
            option = next(word.partition("=")[0] for word in words if word.partition("=")[0] in options)
            return {**job, "gpus": {"count": len(value.split(",")), "what": f"{option} {value}",
                                    "path": job.get("path"), "line": job.get("line")}}
    return job


def where(job: dict) -> Location:
    return Location(job.get("path", "?"), job.get("line"))


def gpus_of(job: dict) -> Optional[int]:
    count = (job.get("gpus") or {}).get("count")
    return count if isinstance(count, int) else None


def gpus_text(job: dict) -> str:
    gpus = job.get("gpus") or {}
    return f"`{gpus.get('what')}` at {gpus.get('path', job.get('path'))}:{gpus.get('line')}"


def names(job: dict) -> list:
    return [entry.get("name") for entry in job.get("launchers", [])]


def job_label(job: dict) -> str:
    context = f" ({job['context']})" if job.get("context") else ""
    command = job.get("command", "")
    command = redact_text(command)  # then cut: a token cut short is no longer known as one
    if len(command) > 60:
        command = command[:60].rsplit(" ", 1)[0] + " …"
    return f"`{command}`{context}"


def pods(facts) -> list:
    """The containers of the Kubernetes manifests and Compose files read (gpudoctor.readers.k8s.pods)."""
    launch = facts.get("launch", {}) or {}
    return [pod for pod in launch.get("pods", []) or [] if isinstance(pod, dict)]


def pod_gpus(pod: dict):
    """The GPUs a container requests: a count, "?" where a template leaves it unresolved, else None."""
    gpus = pod.get("gpus") or {}
    count = gpus.get("count")
    return count if isinstance(count, int) else (gpus.get("unresolved") and "?")


def one_gpu_only(facts, path: Optional[str]) -> bool:
    """Every job the file at `path` starts runs one process on one GPU of one node (and it starts at least one)."""
    mine = [job for job in jobs(facts) if job.get("path") == path]
    return bool(mine) and all(job.get("ranks_per_node") == 1 and (job.get("gpus") or {}).get("count") == 1
                              and not (job.get("nodes") or {}).get("count", 1) > 1 for job in mine)
