"""The files of one run: `--from DIR`, `--from 'logs/*.out'` and several files, each with the rank and node its
name tells.

Names the launchers and users give per-rank files:

- torchrun `--log-dir`: `<dir>/<run id>_<random>/attempt_<n>/<local rank>/{stdout,stderr}.log` (and `error.json`);
- `srun -o %N-%t.out`: `<node>-<task>.out` / `.err` (the task is the global rank);
- `NCCL_DEBUG_FILE=%h.%p`: `<host>.<pid>`;
- `rank3.log`, `rank_3.txt`, `log.rank-3`, a flight-recorder dump `nccl_trace_rank_3` (`_dump_fr_trace`'s prefix and
  the rank);
- `kubectl logs` of a PyTorchJob's pods saved per pod: `<job>-worker-3.log` (the pod is the node);
- anything else (`node-a.log`, `train.out`) is read too, its identity taken from its lines.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from gpudoctor.files import tree_files

_TORCHRUN = re.compile(r"(?:^|/)attempt_(\d{1,4})/(\d{1,6})/(?:stdout|stderr)\.log$")
_TORCHRUN_ERROR = re.compile(r"(?:^|/)attempt_(\d{1,4})/(\d{1,6})/error\.json$")
_SRUN = re.compile(r"^(?P<node>[A-Za-z][\w.\-]{0,200}?)-(?P<task>\d{1,6})\.(?:out|err)$")
_RANK_NAME = re.compile(r"(?:^|[^A-Za-z])rank[_\-.]?(\d{1,6})(?:\D|$)", re.IGNORECASE)
# `kubectl logs` of a PyTorchJob's or MPIJob's pods saved per pod: `<job>-worker-3.log` (the pod is the node; its
# index is the node's, not a rank)
_POD = re.compile(r"^(?P<pod>[a-z0-9][a-z0-9\-]{0,200}-(?:master|worker|launcher)-\d{1,5})(?:\.log|\.txt)?$")
_NCCL_DEBUG_FILE = re.compile(r"^(?P<host>[A-Za-z][\w\-]{0,200}(?:\.[A-Za-z][\w\-]{0,60})*)\.(?P<pid>\d{2,10})$")
GLOB_CHARS = "*?["


@dataclass(frozen=True)
class RunFile:
    """One file of a run and what its path says of it."""

    path: str
    rank: Optional[int] = None        # a global rank the name gives
    local_rank: Optional[int] = None  # torchrun's per-node directory
    node: Optional[str] = None
    attempt: Optional[int] = None
    launcher_error: bool = False      # torchrun's per-rank error.json


def identify(path: str) -> RunFile:
    """What the file's path says of the rank, node and attempt that wrote it."""
    posix = path.replace(os.sep, "/")
    base = posix.rsplit("/", 1)[-1]
    m = _TORCHRUN.search(posix) or _TORCHRUN_ERROR.search(posix)
    if m:
        return RunFile(path, local_rank=int(m.group(2)), attempt=int(m.group(1)),
                       launcher_error=posix.endswith("error.json"))
    m = _SRUN.match(base)
    if m:
        return RunFile(path, rank=int(m.group("task")), node=m.group("node"))
    m = _RANK_NAME.search(base)
    if m:
        return RunFile(path, rank=int(m.group(1)))
    m = _POD.match(base)
    if m:
        return RunFile(path, node=m.group("pod"))
    m = _NCCL_DEBUG_FILE.match(base)
    if m and not base.endswith((".log", ".txt", ".out", ".err", ".json")):
        return RunFile(path, node=m.group("host"))
    return RunFile(path)


def expand(paths: Sequence[str]) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The files the given paths name, in order (a directory walked, sorted; a glob pattern that names no file
    expanded), and (path, why) for the paths that name none."""
    files: List[str] = []
    failed: List[Tuple[str, str]] = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            found = [str(p) for p in tree_files(Path(path))]
            files.extend(found)
            if not found:
                failed.append((path, f"{path}: a folder without files"))
        elif path != "-" and any(c in path for c in GLOB_CHARS) and not os.path.exists(path):
            found = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
            files.extend(found)
            if not found:
                failed.append((path, f"{path}: no file matches"))
        else:
            files.append(path)
    return files, failed


def is_run(paths: Sequence[str]) -> bool:
    """Whether the inputs are read as one run of several ranks: a folder, a glob, or several files."""
    return len(paths) > 1 or any(p != "-" and (os.path.isdir(p) or any(c in p for c in GLOB_CHARS)) for p in paths)
