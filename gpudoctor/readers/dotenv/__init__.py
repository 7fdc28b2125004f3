"""`.env` files (and lists of NAME=value lines under any name) and NCCL's own `nccl.conf`; `grammar` reads both."""

from __future__ import annotations

import re
from pathlib import Path

from gpudoctor.files import is_dotenv
from gpudoctor.readers.file_facts import FileFacts

DOC_SUFFIXES = {".md", ".rst", ".txt", ".html", ".adoc"}
ASSIGNMENT = re.compile(r"^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=")


def detect(path: Path, text: str) -> bool:
    """By name, or a file of NAME=value lines (what `--env-file` usually gets, even when it is called env.yaml)."""
    if is_dotenv(path):
        return True
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return bool(lines) and all(ASSIGNMENT.match(line) for line in lines)


def in_tree(path: Path) -> bool:
    """In a folder, NAME=value lines in documentation are an example, not the job's environment."""
    return path.suffix.lower() not in DOC_SUFFIXES


def read(path: Path, text: str) -> FileFacts:
    from gpudoctor.readers.dotenv import grammar

    return FileFacts(env=grammar.read(text, str(path)))


def is_nccl_conf(path: Path, text: str = "") -> bool:
    return path.name in {"nccl.conf", ".nccl.conf"}


def read_nccl_conf(path: Path, text: str) -> FileFacts:
    from gpudoctor.readers.dotenv import grammar

    return FileFacts(env=grammar.read_nccl_conf(text, str(path)))
