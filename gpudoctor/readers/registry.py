"""The reader registry: which reader reads which job file (`lint FILE...`, `lint DIR`, `check --script`).

A reader turns one file into facts on a snapshot (env variables with their lines, the jobs it launches, script
analysis, DeepSpeed config). Unreadable files become `inputs` entries (GD003), never exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

from gpudoctor.files import MAX_BYTES, read_text, tree_files
from gpudoctor.readers.inputs import add_input_error


@dataclass(frozen=True)
class FileReader:
    """`accepts(path, text)` says whether this reader understands the file; `read` adds its facts.
    `in_tree`, where given, is the stricter test for files met while walking a directory (a YAML config there
    is skipped rather than reported as holding no environment)."""

    kind: str
    accepts: Callable[[Path, str], bool]
    read: Callable[[Path, str, object], None]
    in_tree: Optional[Callable[[Path, str], bool]] = None


READERS: List[FileReader] = []


def register(reader: FileReader) -> FileReader:
    READERS.append(reader)
    return reader


def read_file(path: Path, snapshot, kind: Optional[str] = None, text: Optional[str] = None) -> None:
    """Add one file's facts to the snapshot with every reader that accepts it (or only the ones named `kind`):
    a Python file is both a training script and, for launchers, a source of env-var dicts. `text`: already read."""
    _load_readers()
    text = read_text(path) if text is None else text
    matched = False
    for reader in READERS:
        if (kind is None or reader.kind == kind) and reader.accepts(path, text):
            reader.read(path, text, snapshot)
            matched = True
    if not matched:
        add_input_error(snapshot, str(path), kind or "file", "not a file gpudoctor knows how to read")


def _load_readers() -> None:
    """Import the modules that register readers (kept lazy so `gpudoctor rules` stays fast)."""
    import importlib

    for module in ("gpudoctor.readers.env", "gpudoctor.readers.python.script", "gpudoctor.readers.ds_config",
                   "gpudoctor.readers.launch"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def read_tree(root: Path, snapshot) -> int:
    """`lint DIR`: read every file under `root` that a reader knows (like ruff, the rest is skipped silently);
    the number of files read. A folder with none is said (info), never passed in silence."""
    _load_readers()
    read = 0
    for path in tree_files(root):
        try:
            if path.stat().st_size > MAX_BYTES:
                continue
            raw = path.read_bytes()
        except OSError:
            continue
        if b"\0" in raw[:8192]:
            continue  # binary
        text = raw.decode("utf-8", "replace")
        readers = [r for r in READERS if (r.in_tree or r.accepts)(path, text)]
        for reader in readers:
            reader.read(path, text, snapshot)
        read += bool(readers)
    if not read:
        add_input_error(snapshot, str(root), "folder", "no job files, training scripts or configs found in this "
                        "folder (hidden folders, virtual environments and caches are skipped)", severity="info")
    return read
