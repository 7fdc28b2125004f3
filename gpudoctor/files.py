"""Plain file I/O for the user's files: reading them bounded in size and time (a FIFO nobody writes is an error,
not a hang), walking a folder, and the one path by which gpudoctor writes a file (`--output`, `snapshot -o`,
`fix --write-env`), atomically and under a lock. What a file means is the readers' job (gpudoctor.readers); the
one thing said here from a name alone is whether it is a .env file (`is_dotenv`), which the readers and the report's
`gpudoctor fix` hint both ask.
"""

from __future__ import annotations

import errno
import fcntl
import io
import os
import re
import select
import stat
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterator, List, Optional, Tuple, Union

from gpudoctor.errors import InputError

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

MAX_BYTES = 20 * 1024 * 1024
MAX_TREE_FILES = 20000
MAX_TREE_ENTRIES = 200_000  # names (files and folders, data and ignored ones too) one folder lint looks at
SKIP_DIRS = {"node_modules", "__pycache__", "site-packages", "venv", "build", "dist", "wandb", "lightning_logs"}
FIRST_BYTE_DEADLINE = 30.0  # seconds a FIFO, pipe or terminal may take to deliver its first byte
STREAM_DEADLINE = 600.0  # seconds a streamed input (`--from` a pipe, FIFO or device) may take in all
STREAM_MAX_BYTES = 4 * 2 ** 30  # bytes of a streamed input (`--from`): a log of any real size, not /dev/zero
FIFO_DEADLINE = 10.0  # seconds `--output FIFO` waits for a reader
LOCK_WAIT = 30.0  # seconds `fix --write-env` waits for another writer of the same file
TEMP_SUFFIX = ".gpudoctor"  # of the temporary file beside a target while it is replaced
NEVER_WALKED = ("/proc", "/sys", "/dev")  # the kernel's and the devices' files: a folder walk never enters them
_patience: list = []  # the user's --timeout while a command runs (waited_for_at_most): it shortens every wait


@contextmanager
def waited_for_at_most(seconds: Optional[float]) -> Iterator[None]:
    """While it lasts, no read waits longer than `seconds` for data (the command's --timeout; None: the defaults)."""
    _patience.append(seconds)
    try:
        yield
    finally:
        _patience.pop()


def _first_byte_deadline() -> float:
    return min([FIRST_BYTE_DEADLINE] + [s for s in _patience[-1:] if s])


def is_dotenv(path: Path) -> bool:
    """A .env file by its name: `.env`, `.env.local`, `prod.env`, `env`, `envfile` (the dotenv reader reads it; `fix
    --write-env` merges into it)."""
    name = path.name
    return name == ".env" or name.startswith(".env.") or name.endswith(".env") or name in {"env", "envfile"}


def read_text(path: Path) -> str:
    """The file's text (UTF-8, undecodable bytes replaced); OSError for missing or oversized files."""
    return read_bytes(str(path)).decode("utf-8", "replace")


def _stdin() -> int:
    if sys.stdin is None:  # started with stdin closed (`<&-`)
        raise OSError(errno.EBADF, "standard input is closed")
    return sys.stdin.fileno()


def read_bytes(path: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of an input file (`-`: standard input), bounded: OSError when there are more than `limit`, and
    when a FIFO, pipe, device or terminal gives no first byte within FIRST_BYTE_DEADLINE seconds (a FIFO nobody
    writes). Once data flows, a pipe is read as it streams (`--from <(cmd)`, `cmd | gpudoctor … -`)."""
    if path == "-":
        return _read_fd(_stdin(), limit)
    status = os.stat(path)
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    regular = stat.S_ISREG(status.st_mode)
    fd = os.open(path, os.O_RDONLY | (0 if regular else os.O_NONBLOCK))  # a FIFO's open waits for no writer
    try:
        return _read_fd(fd, limit)
    finally:
        os.close(fd)


def open_stream(path: str) -> BinaryIO:
    """An input to read as it streams (`--from`, `-`: standard input), bounded: at most STREAM_MAX_BYTES, and a
    FIFO, pipe, terminal or device gives its first byte within FIRST_BYTE_DEADLINE seconds and all of it within
    STREAM_DEADLINE (a FIFO nobody writes, a writer that stalls, `/dev/zero`): else an OSError, not a hang."""
    if path == "-":
        fd = _stdin()
        return io.BufferedReader(_Bounded(fd, not stat.S_ISREG(os.fstat(fd).st_mode), close=False))
    status = os.stat(path)
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    regular = stat.S_ISREG(status.st_mode)
    if regular and status.st_size > STREAM_MAX_BYTES:
        raise OSError(errno.EFBIG, f"larger than {size_words(STREAM_MAX_BYTES)} (gpudoctor's limit for this input)")
    fd = os.open(path, os.O_RDONLY | (0 if regular else os.O_NONBLOCK))  # a FIFO's open waits for no writer
    return io.BufferedReader(_Bounded(fd, not regular))


class _Bounded(io.RawIOBase):
    """A file descriptor read with a size cap, and for a stream (not a regular file) deadlines: the first byte,
    then the whole read."""

    def __init__(self, fd: int, stream: bool, close: bool = True):
        self.fd, self.stream, self.size, self._close = fd, stream, 0, close
        self.started = time.monotonic()
        status = os.fstat(fd)
        self.pseudo = stat.S_ISREG(status.st_mode) and status.st_size == 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.stream:
            limit = _first_byte_deadline() if not self.size else STREAM_DEADLINE
            _wait_for_data(self.fd, self.started + limit,
                           f"no data within {limit:g} s (a FIFO nobody writes?)" if not self.size else
                           f"not finished within {limit:g} s (a writer that stalls, or never ends?)")
        data = (_read_pseudo if self.pseudo else os.read)(self.fd, len(buffer))
        self.size += len(data)
        if self.size > STREAM_MAX_BYTES:
            raise OSError(errno.EFBIG, f"larger than {size_words(STREAM_MAX_BYTES)} (gpudoctor's limit for this input)")
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed and self._close:
            os.close(self.fd)
        super().close()


def _read_fd(fd: int, limit: int) -> bytes:
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        _wait_for_data(fd)
    read = _read_pseudo if stat.S_ISREG(status.st_mode) and status.st_size == 0 else os.read
    chunks, size = [], 0
    while size <= limit:
        chunk = read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise OSError(errno.EFBIG, f"larger than {size_words(limit)} (gpudoctor's limit for this input)")
    return b"".join(chunks)


def _read_pseudo(fd: int, size: int) -> bytes:
    """os.read of a regular file that says it is empty, as the kernel's files do (/proc/kmsg blocks until the
    kernel logs a line): in a helper thread, waited for at most the first-byte deadline (poll() cannot tell that a
    regular file's read would block). A read that does not return is left behind; OSError here."""
    import threading

    from gpudoctor.waiting import joined, patiently

    outcome: list = []

    def run() -> None:
        try:
            outcome.append(os.read(fd, size))
        except OSError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=run, daemon=True, name="gpudoctor-read")
    reader.start()
    deadline = _first_byte_deadline()
    patiently(lambda slice_s: joined(reader, slice_s), deadline)
    if not outcome:
        raise OSError(errno.ETIMEDOUT, f"no data within {deadline:g} s (a file whose read blocks)")
    if isinstance(outcome[0], OSError):
        raise outcome[0]
    return outcome[0]


def _wait_for_data(fd: int, deadline: Optional[float] = None, message: str = "") -> None:
    """Wait (bounded) until the stream has data or its writer closed it, then read it blocking."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    first = _first_byte_deadline()
    deadline = time.monotonic() + first if deadline is None else deadline
    while not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
        if time.monotonic() >= deadline:
            raise OSError(errno.ETIMEDOUT, message or f"no data within {first:g} s (a FIFO nobody writes?)")
    os.set_blocking(fd, True)


def size_words(size: int) -> str:
    """`20 MiB`, `256 KiB` (rounded down), or bytes."""
    return f"{size // 2**20} MiB" if size >= 2**20 else f"{size // 2**10} KiB" if size >= 2**10 else f"{size} bytes"


def read_input(name: str, what: str) -> str:
    """The text of a file the user named (`what`: "script", "DeepSpeed config" …), or InputError in one line."""
    path = Path(name)
    if not path.is_file():
        why = "is a directory" if path.is_dir() else "no such file"
        raise InputError(f"cannot read {what}{' ' if what else ''}{name!r}: {why}")
    try:
        return read_text(path)
    except OSError as exc:
        raise InputError(f"cannot read {what}{' ' if what else ''}{name!r}: {exc.strerror or exc}") from None


class LockError(OSError):
    """The target cannot be locked: not opened, or another process held its lock for LOCK_WAIT seconds."""


class ReadOnlyError(PermissionError):
    """The target exists and is read-only: gpudoctor does not rewrite it unless asked to (--force)."""


def _stat(path: str) -> Optional[os.stat_result]:
    """The target's status through symlinks; None when nothing is there (or a symlink points nowhere)."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def is_regular_target(path: str) -> bool:
    """Whether writing `path` replaces a regular file (or creates one), as opposed to writing a stream in place."""
    if path == "-":
        return False
    status = _stat(path)
    return status is None or stat.S_ISREG(status.st_mode)


def write_file(path: str, text: Union[str, bytes], force: bool = False) -> None:
    """Write `text` (or bytes: an image) to `path`, the one way gpudoctor writes a file:
    - `-` is standard output;
    - a regular file, or a new one, is replaced atomically (a temporary file in the same folder, fsync, rename,
      fsync of the folder); a symlink is followed to the file it points at (the link stays a link);
    - a target that is not a regular file (`/dev/stdout`, a FIFO, a device such as `/dev/null`) is written in
      place, never replaced; a FIFO nobody reads is given up after FIFO_DEADLINE seconds;
    - a file that exists keeps its owner, group and mode; a new one gets 0666 less the umask;
    - a read-only file is refused (ReadOnlyError) unless `force`.
    UTF-8; lone surrogates from undecodable input go back out as the bytes they were. OSError leaves the target as
    it was. `locked(path)` serialises writers that read, merge and write one file."""
    if path == "-":
        if isinstance(text, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text)
        sys.stdout.flush()
        return
    data = text if isinstance(text, bytes) else text.encode("utf-8", errors="surrogateescape")
    status = _stat(path)
    if status is not None and stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    if status is not None and not stat.S_ISREG(status.st_mode):
        _write_in_place(path, data, stat.S_ISFIFO(status.st_mode))
        return
    target = os.path.realpath(path)
    if status is not None and not force and _read_only(target, status):
        raise ReadOnlyError(errno.EACCES, "is read-only (--force writes it anyway)", path)
    _replace(target, data, status)


def _read_only(target: str, status: os.stat_result) -> bool:
    # root may write anything, so the mode bits decide: a file nobody may write is meant to stay as it is
    return not status.st_mode & 0o222 or not os.access(target, os.W_OK)


def _write_in_place(path: str, data: bytes, fifo: bool) -> None:
    flags = os.O_WRONLY | os.O_NOCTTY | (os.O_NONBLOCK if fifo else 0)
    deadline = time.monotonic() + FIFO_DEADLINE
    while True:
        try:
            fd = os.open(path, flags)  # no O_CREAT, no O_TRUNC: the node stays what it is
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                if exc.errno == errno.ENXIO:
                    raise OSError(errno.ENXIO, f"no reader on this FIFO within {FIFO_DEADLINE:g} s", path) from None
                raise
            time.sleep(0.05)
    try:
        if fifo:
            os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _replace(target: str, data: bytes, status: Optional[os.stat_result]) -> None:
    folder = os.path.dirname(target) or "."
    prefix = _temp_prefix(target)
    _remove_dead_temps(folder, prefix)
    import tempfile  # here: only a writer needs it (start-up time)

    fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}.", suffix=TEMP_SUFFIX, dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if status is not None:
                _keep_owner(handle.fileno(), status)
                os.fchmod(handle.fileno(), stat.S_IMODE(status.st_mode))
            else:
                os.fchmod(handle.fileno(), 0o666 & ~_umask())
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def _temp_prefix(target: str) -> str:
    """`.NAME.HOST.`: a temporary file of this host's writers of `target` (PID, a random part and TEMP_SUFFIX
    follow), so the next write knows whose it is."""
    import socket  # here: only a writer needs it (start-up time)

    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"
    return f".{os.path.basename(target)}.{host}."


def _remove_dead_temps(folder: str, prefix: str) -> None:
    """Remove the temporary files a writer of the same target on this host left when it was killed (SIGKILL
    between writing and the rename): those whose writer's PID is gone. A live writer's (or another host's) stay."""
    try:
        names = [entry.name for entry in os.scandir(folder) if entry.name.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):].split(".", 1)[0]
        if name.endswith(TEMP_SUFFIX) and pid.isdigit() and not _alive(int(pid)):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass  # another writer removed it first, or the folder is not ours to change


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


def _keep_owner(fd: int, status: os.stat_result) -> None:
    try:
        os.fchown(fd, status.st_uid, status.st_gid)
    except PermissionError:
        pass  # only root may give a file away; an ordinary user's files are theirs already


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a folder; the rename itself is done
    finally:
        os.close(fd)


@contextmanager
def locked(path: str, on_wait: Callable[[float], None] = lambda seconds: None) -> Iterator[None]:
    """Hold an exclusive lock for writing `path` (a regular file or a new one; nothing to lock for a stream),
    leaving no file behind: the target itself is locked (its folder while it does not exist yet), and locked again
    when another writer replaced it (or created it) meanwhile. A lock held elsewhere is waited for at most
    LOCK_WAIT seconds (`on_wait` is told once), then LockError."""
    if not is_regular_target(path):
        yield
        return
    target = os.path.realpath(path)
    deadline = time.monotonic() + LOCK_WAIT
    told = False
    while True:
        try:
            fd = _open_for_lock(target)
        except OSError as exc:
            raise LockError(exc.errno, exc.strerror, exc.filename) from None
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockError(errno.EWOULDBLOCK, f"another process has held its lock for {LOCK_WAIT:g} s",
                                        path) from None
                    if not told:
                        on_wait(LOCK_WAIT)
                        told = True
                    time.sleep(0.05)
            if _still_the_target(fd, target):
                yield
                return
        finally:
            os.close(fd)


def _open_for_lock(target: str) -> int:
    try:
        return os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # flock needs no write access
    except FileNotFoundError:
        return os.open(os.path.dirname(target) or ".", os.O_RDONLY | os.O_DIRECTORY)


def _still_the_target(fd: int, target: str) -> bool:
    """Whether the locked file is still the one at `target` (the folder: whether the target is still absent)."""
    status = os.fstat(fd)
    try:
        current = os.stat(target)
    except FileNotFoundError:
        return stat.S_ISDIR(status.st_mode)
    return (current.st_dev, current.st_ino) == (status.st_dev, status.st_ino)


class Tree:
    """The regular files under a folder, sorted, without following links, skipping hidden folders (.git, .venv), virtual
    environments, caches and build output, and never entering /proc, /sys or /dev. `job_files` (what `lint` reads) also
    skips what git ignores (the `.gitignore` files of the folder, its sub-folders and its parents up to the repository's
    root) and data files by their type (images, arrays, checkpoints, archives), which are not counted. At most
    MAX_TREE_FILES files and MAX_TREE_ENTRIES names in all: `cut` then says where the walk stopped (empty when it read
    the whole tree)."""

    def __init__(self, root: Path, job_files: bool = True):
        self.root = Path(root)
        self.job_files = job_files
        self.cut = ""
        self.data_files = 0

    def __iter__(self) -> Iterator[Path]:
        count = seen = 0
        if _kernel_folder(str(self.root)):
            raise InputError(f"{str(self.root)!r} is the kernel's or the devices' folder: gpudoctor walks no folder "
                             f"under {', '.join(NEVER_WALKED)}")
        ignores = {str(self.root): _parent_ignores(self.root) if self.job_files else []}
        for folder, subfolders, names in os.walk(self.root):
            rules = ignores.pop(folder, [])
            own = _ignore_file(folder) if self.job_files else None
            if own is not None:
                rules = rules + [(folder, own)]
            seen += len(subfolders) + len(names)
            if seen > MAX_TREE_ENTRIES:
                self.cut = f"stopped after {MAX_TREE_ENTRIES:,} names, in {folder}"
                return
            subfolders[:] = sorted(d for d in subfolders if _walked(os.path.join(folder, d), d, rules))
            for sub in subfolders:
                ignores[os.path.join(folder, sub)] = rules
            for name in sorted(names):
                path = Path(folder, name)
                if name.startswith(".") and not name.startswith(".env") or _ignored(str(path), False, rules) \
                        or path.is_symlink() or not path.is_file():
                    continue
                if self.job_files and is_data_file(name):
                    self.data_files += 1
                    continue
                count += 1
                if count > MAX_TREE_FILES:
                    self.cut = f"stopped after {MAX_TREE_FILES:,} files, at {path}"
                    return
                yield path


def tree_files(root: Path) -> Iterator[Path]:
    """Every file under `root` a walk reaches, data and git-ignored files too (a run's folder of logs and dumps)."""
    return iter(Tree(root, job_files=False))


DATA_SUFFIXES = {  # data a job reads, never a job file: skipped by type, not counted against the bounds
    ".npy", ".npz", ".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".gguf", ".onnx", ".h5", ".hdf5", ".pkl",
    ".pickle", ".parquet", ".arrow", ".feather", ".tfrecord", ".tfrecords", ".lmdb", ".mdb", ".idx", ".jsonl",
    ".csv", ".tsv", ".tar", ".gz", ".tgz", ".zst", ".zip", ".xz", ".bz2", ".7z", ".msgpack", ".wav", ".flac",
}
DATA_MEDIA = ("image/", "audio/", "video/", "font/")


def is_data_file(name: str) -> bool:
    """A file that by its type (suffix, or its MIME type) holds data, not a job file."""
    import mimetypes

    suffix = os.path.splitext(name)[1].lower()
    if suffix in DATA_SUFFIXES:
        return True
    kind = mimetypes.guess_type(name, strict=False)[0] or ""
    return kind.startswith(DATA_MEDIA)


IgnoreRules = List[Tuple[str, "GitIgnoreSpec"]]  # (the folder of a .gitignore, its compiled patterns), outermost first


def _walked(path: str, name: str, rules: IgnoreRules) -> bool:
    return not (name.startswith(".") or name in SKIP_DIRS or os.path.exists(os.path.join(path, "pyvenv.cfg"))
                or os.path.isdir(os.path.join(path, "conda-meta")) or _kernel_folder(path)
                or _ignored(path, True, rules))


def _kernel_folder(path: str) -> bool:
    """/proc, /sys, /dev or a folder under them (links resolved): never walked."""
    real = os.path.realpath(path)
    return any(real == top or real.startswith(top + "/") for top in NEVER_WALKED)


def _ignored(path: str, folder: bool, rules: IgnoreRules) -> bool:
    """Whether git ignores the path: the deepest .gitignore with a pattern for it decides (`!` re-includes)."""
    verdict = None
    for base, spec in rules:
        relative = os.path.relpath(path, base).replace(os.sep, "/") + ("/" if folder else "")
        if relative.startswith("../"):
            continue
        include = spec.check_file(relative).include
        if include is not None:
            verdict = include
    return bool(verdict)


def _ignore_file(folder: str) -> Optional[GitIgnoreSpec]:
    """The patterns of `folder/.gitignore` (pathspec's git semantics), or None without one."""
    path = os.path.join(folder, ".gitignore")
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_BYTES:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(lines)


def _parent_ignores(root: Path) -> IgnoreRules:
    """The .gitignore files above `root` up to its repository's root (none outside a git repository)."""
    folders, here = [], root.resolve()
    for folder in [here, *here.parents]:
        folders.append(folder)
        if (folder / ".git").exists():
            break
    else:
        return []
    rules = []
    for folder in reversed(folders[1:]):
        spec = _ignore_file(str(folder))
        if spec is not None:
            rules.append((str(folder), spec))
    return rules
