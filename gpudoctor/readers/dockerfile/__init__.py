"""Dockerfiles and Containerfiles, their instructions read once: the env of the final stage (`env`) and the job its
ENTRYPOINT/CMD starts (`jobs`)."""

from __future__ import annotations

import re
from pathlib import Path

from gpudoctor.readers import TEXT_SUFFIXES
from gpudoctor.readers.file_facts import FileFacts

FIRST = re.compile(r"^(?:ARG\s+\S+\s*)*FROM\s+\S+", re.IGNORECASE)
INSTRUCTION = re.compile(r"(?m)^\s*(?:RUN|ENV|COPY|ADD|WORKDIR|CMD|ENTRYPOINT|ARG|LABEL|USER)\s", re.IGNORECASE)


def detect(path: Path, text: str = "") -> bool:
    """By name (`Dockerfile`, `Dockerfile.gpu`, `train.dockerfile`, `mnist_Dockerfile`) or by content: the first
    instruction is FROM (after ARGs and comments) and others follow, as in every Dockerfile."""
    lower = path.name.lower()
    if path.suffix.lower() in TEXT_SUFFIXES:
        return False  # dockerfile.py is Python, Dockerfile.md documentation
    if (lower in {"dockerfile", "containerfile"} or lower.startswith(("dockerfile.", "containerfile."))
            or lower.endswith(("dockerfile", "containerfile"))):
        return True
    body = "\n".join(line for line in text.lstrip("\ufeff")[:8192].splitlines()
                     if line.strip() and not line.lstrip().startswith("#"))
    return bool(FIRST.match(body)) and bool(INSTRUCTION.search(body))


def read(path: Path, text: str) -> FileFacts:
    """Parsed once, each instruction read once by the env reader and the job reader together."""
    from gpudoctor.readers.dockerfile import env, jobs

    parsed = env.instructions(text)
    found, job = env.EnvReader(str(path), parsed[1]), jobs.JobReader(str(path))
    env.walk(parsed, found, job)
    return FileFacts(env=found.finish(), jobs=job.finish())
