"""Readers for the files users hand to gpudoctor (`lint FILE...`, `check --env-file/--script`).

A reader turns one file into facts on a snapshot (env variables with their lines, script analysis,
DeepSpeed config). Unreadable files become `inputs` entries (GD003), never exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

from gpudoctor.snapshot import Snapshot

MAX_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class FileReader:
    """`accepts(path, text)` says whether this reader understands the file; `read` adds its facts."""

    kind: str
    accepts: Callable[[Path, str], bool]
    read: Callable[[Path, str, Snapshot], None]


READERS: List[FileReader] = []


def register(reader: FileReader) -> FileReader:
    READERS.append(reader)
    return reader


def add_input_error(snapshot: Snapshot, path: str, kind: str, error: str,
                    line: Optional[int] = None, column: Optional[int] = None) -> None:
    snapshot.facts.setdefault("inputs", []).append(
        {"path": path, "kind": kind, "error": error, "line": line, "column": column})


def read_text(path: Path) -> str:
    """The file's text (UTF-8, undecodable bytes replaced); OSError for missing or oversized files."""
    if path.stat().st_size > MAX_BYTES:
        raise OSError(f"larger than {MAX_BYTES // 2**20} MiB")
    return path.read_bytes().decode("utf-8", "replace")


def read_file(path: Path, snapshot: Snapshot, kind: Optional[str] = None) -> None:
    """Add one file's facts to the snapshot with every reader that accepts it (or only the ones named `kind`):
    a Python file is both a training script and, for launchers, a source of env-var dicts."""
    _load_readers()
    text = read_text(path)
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

    for module in ("gpudoctor.envfiles", "gpudoctor.analysis", "gpudoctor.analysis.ds_config"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
