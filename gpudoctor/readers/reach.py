"""Which of the files read together belong to one job: a job is a file nothing else names (a batch script, a
manifest, a lone training script or .env file) plus the files it leads to, directly or through those (the script it
starts, the shell script it runs or sources, the DeepSpeed config or launcher config it passes). Files that do not
reach each other are judged apart (`lint` of a folder or of several files, as pre-commit passes them).

A file leads to another where it names it: its path relative to the file, or (written absolute, under a variable or
home, as inside a container) its name beside the file, or its name where the file changes into the folders between
(`cd src && python train.py`, `pushd "$DIR/src"`)."""

from __future__ import annotations

import os
import re
from typing import Dict, List, Sequence, Set, Tuple

_PATH_CHAR = re.compile(r"[\w./~${}@+:-]")
_LONGEST = 512  # characters of a path read back from a name


def _path_ending(text: str, start: int, end: int) -> str:
    """The path written in `text` that ends with the name at start:end (read back over path characters)."""
    first = start
    while first > max(0, start - _LONGEST) and _PATH_CHAR.match(text[first - 1]):
        first -= 1
    return text[first:end]


def _reaches(path: str, text: str, by_name: Dict[str, List[Tuple[int, str]]]) -> Set[int]:
    """The indexes of the files (by base name) that `path`'s text names."""
    here = os.path.dirname(os.path.abspath(path))
    found: Set[int] = set()
    for name, indexed in by_name.items():
        if name not in text:
            continue
        written = [_path_ending(text, match.start(), match.end())
                   for match in re.finditer(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", text)]
        if not written:
            continue
        for index, target in indexed:
            if target == os.path.abspath(path):
                continue
            for token in written:
                if _names(token.strip(":"), target, here, text):
                    found.add(index)
                    break
    return found


def _names(token: str, target: str, here: str, text: str) -> bool:
    """Whether `token`, written in the text of a file in folder `here`, names the file at `target`."""
    if os.path.normpath(os.path.join(here, token)) == target:
        return True
    relative = os.path.relpath(target, here)
    if relative.startswith(".."):
        return False
    if re.match(r"[/~$]", token):  # absolute, home or a variable: the same path below the file's folder
        return token.endswith("/" + relative) or os.path.dirname(target) == here
    folders = relative.split(os.sep)[:-1]
    return "/" not in token and all(re.search(rf"(?<![\w.-]){re.escape(part)}(?![\w-])", text) for part in folders)


def jobs(paths: Sequence[str], texts: Sequence[str], settings: Sequence[bool]) -> List[List[int]]:
    """The files read together (`paths`, their `texts`), grouped into jobs: each a list of indexes in the order
    given. A file several jobs lead to (a shared env file, one script two batch scripts start) is in each of them;
    files that lead to each other with nothing above them form one job. Settings files (`settings`: a .env file or a
    DeepSpeed config, which start nothing) that no file leads to are judged together with the others of their folder
    (`lint job.env ds_config.json`), never with a job that does not name them."""
    by_name: Dict[str, List[Tuple[int, str]]] = {}
    for index, path in enumerate(paths):
        by_name.setdefault(os.path.basename(path), []).append((index, os.path.abspath(path)))
    edges = [_reaches(path, text, by_name) for path, text in zip(paths, texts)]
    reached = set().union(*edges) if edges else set()
    groups: List[List[int]] = []
    covered: Set[int] = set()
    loose: Dict[str, List[int]] = {}
    for index, path in enumerate(paths):
        if settings[index] and index not in reached and not edges[index]:
            loose.setdefault(os.path.dirname(os.path.abspath(path)), []).append(index)
    for together in loose.values():
        covered.update(together)
        groups.append(together)
    for start in [index for index in range(len(paths)) if index not in reached] + list(range(len(paths))):
        if start in covered:
            continue
        group, todo = {start}, [start]
        while todo:
            for nxt in edges[todo.pop()] - group:
                group.add(nxt)
                todo.append(nxt)
        covered |= group
        groups.append(sorted(group))
    return groups
