"""The user's files: reading them (`lint FILE...`, `check --env-file/--script`) and the one path by which
gpudoctor writes a file (`--output`, `fix --write-env`).

A reader turns one file into facts on a snapshot (env variables with their lines, script analysis,
DeepSpeed config). Unreadable files become `inputs` entries (GD003), never exceptions.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, List, Optional

from gpudoctor.errors import InputError
from gpudoctor.snapshot import Snapshot

MAX_BYTES = 20 * 1024 * 1024
MAX_TREE_FILES = 20000
SKIP_DIRS = {"node_modules", "__pycache__", "site-packages", "venv", "build", "dist", "wandb", "lightning_logs"}


@dataclass(frozen=True)
class FileReader:
    """`accepts(path, text)` says whether this reader understands the file; `read` adds its facts.
    `in_tree`, where given, is the stricter test for files met while walking a directory (a YAML config there
    is skipped rather than reported as holding no environment)."""

    kind: str
    accepts: Callable[[Path, str], bool]
    read: Callable[[Path, str, Snapshot], None]
    in_tree: Optional[Callable[[Path, str], bool]] = None


READERS: List[FileReader] = []


def register(reader: FileReader) -> FileReader:
    READERS.append(reader)
    return reader


def add_input_error(snapshot: Snapshot, path: str, kind: str, error: str,
                    line: Optional[int] = None, column: Optional[int] = None, severity: str = "") -> None:
    """An `inputs` entry (GD003). `severity="info"`: the file was read but holds nothing gpudoctor checks."""
    entry = {"path": path, "kind": kind, "error": error, "line": line, "column": column}
    if severity:
        entry["severity"] = severity
    snapshot.facts.setdefault("inputs", []).append(entry)


def read_text(path: Path) -> str:
    """The file's text (UTF-8, undecodable bytes replaced); OSError for missing or oversized files."""
    if path.stat().st_size > MAX_BYTES:
        raise OSError(f"larger than {MAX_BYTES // 2**20} MiB")
    return path.read_bytes().decode("utf-8", "replace")


def read_input(name: str, what: str) -> str:
    """The text of a file the user named (`what`: "script", "DeepSpeed config" …), or InputError in one line."""
    path = Path(name)
    if not path.is_file():
        raise InputError(f"cannot read {what}{' ' if what else ''}{name!r}: no such file")
    try:
        return read_text(path)
    except OSError as exc:
        raise InputError(f"cannot read {what}{' ' if what else ''}{name!r}: {exc.strerror or exc}") from None


def read_file(path: Path, snapshot: Snapshot, kind: Optional[str] = None, text: Optional[str] = None) -> None:
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

    for module in ("gpudoctor.envfiles", "gpudoctor.analysis", "gpudoctor.analysis.ds_config", "gpudoctor.launch"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def write_atomic(path: str, text: str) -> None:
    """Write via a temporary file in the same folder, fsync, then rename over the target (through a symlink to the
    file it points at). The file keeps its permission bits; a new file gets 0666 less the umask."""
    target = os.path.realpath(path)
    folder = os.path.dirname(target) or "."
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".gpudoctor", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", errors="surrogateescape"))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def tree_files(root: Path) -> Iterator[Path]:
    """The regular files under `root`, sorted, without following links, skipping hidden folders (.git, .venv),
    virtual environments, caches and build output; at most MAX_TREE_FILES."""
    count = 0
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in SKIP_DIRS
                               and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))
                               and not os.path.isdir(os.path.join(folder, d, "conda-meta")))
        for name in sorted(names):
            path = Path(folder, name)
            if name.startswith(".") and not name.startswith(".env") or path.is_symlink() or not path.is_file():
                continue
            count += 1
            if count > MAX_TREE_FILES:
                return
            yield path


def read_tree(root: Path, snapshot: Snapshot) -> int:
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
