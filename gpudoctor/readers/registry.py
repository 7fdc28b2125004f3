"""The one list of job-file formats and the readers' entry points (`lint FILE... DIR...`, `check --script`,
`check --env-file`, `check --ds-config`).

A file is read by the first format in FORMATS whose `detect(path, text)` says yes, once, into a `FileFacts`; the
parts of it a command asks for join the snapshot. Unreadable files become `inputs` entries (GD003), never
exceptions. A new format is a module with `detect` and `read(path, text) -> FileFacts`, and one line here.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from gpudoctor.errors import InputError
from gpudoctor.files import MAX_BYTES, Tree, read_bytes, read_input, read_text, size_words
from gpudoctor.readers import dockerfile, dotenv, ds_config, k8s, python, shell
from gpudoctor.readers.env import KIND, apply
from gpudoctor.readers.file_facts import PARTS, BeyondBounds, FileFacts
from gpudoctor.readers.inputs import add_input_error


def _always(path: Path) -> bool:
    return True


def _never(path: Path) -> bool:
    return False


@dataclass(frozen=True)
class Format:
    """`what`: the format in words; `max_bytes`: the largest file of it read (benchmarks/reader_bounds.py measures
    each reader's slowest input shape; the bound keeps it to seconds and a few hundred MB, docs/safety.md);
    `in_tree`: whether a file of this format met while walking a folder is read (`lint DIR`)."""

    name: str
    what: str
    max_bytes: int
    detect: Callable[[Path, str], bool]
    read: Callable[[Path, str], FileFacts]
    in_tree: Callable[[Path], bool] = _always

    def read_within_bounds(self, path: Path, text: str) -> Tuple[Optional[FileFacts], Optional[str]]:
        """(the file's facts, None), or (None, why) when it is larger than this format's bound, or has more than
        MAX_ENV_ENTRIES variable settings and unparsable lines (each is a line of the report)."""
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.max_bytes:
            return None, (f"a {self.what} of {size_words(size)}, larger than {size_words(self.max_bytes)} "
                          "(gpudoctor's limit for this input)")
        try:
            facts = self.read(path, text)
        except BeyondBounds as beyond:
            return None, f"{beyond} (gpudoctor's limit for this input)"
        entries = len(facts.env.assignments) + len(facts.env.errors) if facts.env is not None else 0
        if entries > MAX_ENV_ENTRIES:
            return None, (f"a {self.what} with {entries:,} variable settings and lines it cannot parse, more than "
                          f"{MAX_ENV_ENTRIES:,} (gpudoctor's limit for this input)")
        return facts, None

    def read_bounded(self, path: Path, text: str) -> FileFacts:
        """The file's facts; InputError in one line when it is beyond this format's bounds."""
        facts, why = self.read_within_bounds(path, text)
        if facts is None:
            raise InputError(f"cannot read {str(path)!r}: {why}")
        return facts


KiB = 2**10
MAX_ENV_ENTRIES = 10_000  # settings and errors of one job file (the rules take about 0.2 ms each, loaded machine)
FORMATS: Tuple[Format, ...] = (  # the first that detects a file reads it
    Format("ncclconf", "NCCL config file", 512 * KiB, dotenv.is_nccl_conf, dotenv.read_nccl_conf),
    Format("dockerfile", "Dockerfile", 1024 * KiB, dockerfile.detect, dockerfile.read),
    Format("python", "Python script", 512 * KiB, python.detect, python.read),
    Format("yaml", "YAML manifest", 256 * KiB, k8s.detect, k8s.read),
    Format("shell", "shell script", 64 * KiB, shell.detect, shell.read),
    Format("dotenv", ".env file", 512 * KiB, dotenv.detect, dotenv.read, in_tree=dotenv.in_tree),
    Format("ds_config", "DeepSpeed config", 1024 * KiB, ds_config.detect, ds_config.read),
    Format("config-yaml", "YAML file", 256 * KiB, k8s.is_yaml, k8s.read_config, in_tree=_never),
)


def find(path: Path, text: str) -> Optional[Format]:
    """The file's format; None when no reader knows it."""
    return next((fmt for fmt in FORMATS if fmt.detect(path, text)), None)


def named(name: str) -> Format:
    """The format called `name` in FORMATS."""
    return next(fmt for fmt in FORMATS if fmt.name == name)


class Reads:
    """The files one command has read, by absolute path and format, each read once: a job's script (`python
    train.py` in an sbatch file) is read through here, taking the read of a file given with the job file."""

    def __init__(self) -> None:
        self._facts: Dict[Tuple[str, str], FileFacts] = {}

    def keep(self, path: Path, fmt: Format, facts: FileFacts) -> None:
        self._facts[(os.path.abspath(path), fmt.name)] = facts

    def read(self, path: str, format_name: str) -> Optional[FileFacts]:
        """The file's facts as that format reads them (read once, bounded like every input); None when no file is
        there. OSError when it cannot be read."""
        key = (os.path.abspath(path), format_name)
        if key not in self._facts:
            if not os.path.isfile(path):
                return None
            facts, why = named(format_name).read_within_bounds(Path(path), read_bytes(path).decode("utf-8", "replace"))
            if facts is None:
                raise OSError(errno.EFBIG, why)
            self._facts[key] = facts
        return self._facts[key]


def add(snapshot, path: str, facts: FileFacts, parts: Sequence[str] = PARTS, scope: Optional[str] = None,
        reads: Optional[Reads] = None) -> None:
    """Let the parts of one file's facts join the snapshot (`scope`: the env scope of files given together;
    `reads`: the files read with it, where a job's script is read)."""
    from gpudoctor.readers.follow import add_to_snapshot as add_launch
    from gpudoctor.readers.python.script import add_to_snapshot as add_script
    from gpudoctor.readers.topology_file import topology_files

    if "env" in parts and facts.env is not None:
        apply(snapshot, facts.env, path, scope_override=scope)
        found = topology_files(facts.env.assignments, path)
        if found:
            snapshot.facts.setdefault("topology_files", []).extend(found)
    if "script" in parts and facts.script is not None:
        add_script(snapshot, path, facts.script)
    if "ds_config" in parts and facts.ds_config is not None:
        ds_config.add_parsed(snapshot, path, facts.ds_config)
    if "launch" in parts:
        add_launch(snapshot, facts.jobs, facts.pods, path, reads or Reads())


def _join(snapshot, path: Path, facts: Optional[FileFacts], part: Optional[str] = None,
          reads: Optional[Reads] = None) -> None:
    """A file the user named: its facts (`part`: only that part), or why it gave none."""
    if facts is None or part is not None and getattr(facts, part) is None:
        add_input_error(snapshot, str(path), part or "file", "not a file gpudoctor knows how to read")
        return
    add(snapshot, str(path), facts, (part,) if part else PARTS, reads=reads)
    if facts.note and part is None:
        add_input_error(snapshot, str(path), KIND, facts.note, severity="info")


def read_file(path: Path, snapshot, part: Optional[str] = None, text: Optional[str] = None,
              as_format: Optional[str] = None) -> None:
    """Add one file's facts to the snapshot (`part`: only that part, e.g. "script" for `check --script`; a file
    whose format has none is reported). `text`: already read. `as_format`: read with that format whatever the
    file looks like (`check --ds-config`)."""
    text = read_text(path) if text is None else text
    fmt = named(as_format) if as_format else find(path, text)
    _join(snapshot, path, fmt.read_bounded(path, text) if fmt else None, part)


def _tree(tree: Tree, reads: Reads, refused: List[Tuple[Path, str]]) -> List[Tuple[Path, FileFacts, str]]:
    """Every file of the walk that a reader knows (like ruff, the rest is skipped silently), read, with its text;
    one beyond its format's bounds is added to `refused`, with why."""
    found = []
    for path in tree:
        try:
            if path.stat().st_size > MAX_BYTES:
                continue
            raw = path.read_bytes()
        except OSError:
            continue
        if b"\0" in raw[:8192]:
            continue  # binary
        text = raw.decode("utf-8", "replace")
        fmt = find(path, text)
        if fmt is not None and fmt.in_tree(path):
            facts, why = fmt.read_within_bounds(path, text)
            if why is not None:
                refused.append((path, why))
            elif facts is not None:
                reads.keep(path, fmt, facts)
                found.append((path, facts, text))
    return found


def _read(reads: Reads, path: Path, fmt: Optional[Format], text: str) -> Optional[FileFacts]:
    """The file's facts as `fmt` reads them, kept in `reads`; None for no format. InputError beyond its bounds."""
    if fmt is None:
        return None
    facts = fmt.read_bounded(path, text)
    reads.keep(path, fmt, facts)
    return facts


@dataclass
class Read:
    """One file `lint` was given or met in a folder it was given."""

    path: Path
    facts: Optional[FileFacts]
    given: bool  # named by the user (a file no reader knows is said); False: met in a folder
    text: str = ""


@dataclass
class Named:
    """What `lint FILE... DIR...` read: the files (`Read`), the files shared by their reads, and the inputs said
    apart from any job (a folder with nothing to read, a folder's file beyond its bounds, a walk cut short)."""

    files: List[Read]
    reads: Reads
    refused: List[Tuple[Path, str]]
    empty: List[Path]
    cut: List[Tree]


def read_named(names: Sequence[str], texts: Mapping[str, str] = {},  # noqa: B006 - never mutated
               skip_unknown: bool = False) -> Named:
    """Each file named and each file a reader knows under each folder named, read once, all before any joins a
    snapshot, so that a job's script among them is analysed from its own read, never again. A name in `texts` is
    read from there, as a file of that name holding that text (its format found from both). `skip_unknown`: a named
    file is skipped, as in a folder, where no reader knows it (README.md, package.json: what a pre-commit hook hands
    over). InputError for a named file that cannot be read."""
    named = Named([], Reads(), [], [], [])
    for name in names:
        path = Path(name)
        if name not in texts and path.is_dir():
            before, tree = len(named.refused), Tree(path)
            found = _tree(tree, named.reads, named.refused)
            named.files += [Read(met, facts, False, text) for met, facts, text in found]
            if not found and len(named.refused) == before and not tree.cut:
                named.empty.append(path)
            named.cut += [tree] if tree.cut else []
            continue
        text = texts[name] if name in texts else read_input(name, "")
        fmt = find(path, text)
        if skip_unknown and (fmt is None or not fmt.in_tree(path)):
            continue
        named.files.append(Read(path, _read(named.reads, path, fmt, text), True, text))
    return named


def add_named(snapshot, named: Named, files: Optional[Sequence[Read]] = None, inputs: bool = True) -> None:
    """Let the files read (`files`: those of one job; default all) join the snapshot; with `inputs`, also the
    folders with nothing to read (info), the files met in a folder beyond their bounds, and the walks cut short."""
    for read in named.files if files is None else files:
        if read.given:
            _join(snapshot, read.path, read.facts, reads=named.reads)
        elif read.facts is not None:
            add(snapshot, str(read.path), read.facts, reads=named.reads)
    for path in named.empty if inputs else ():
        add_input_error(snapshot, str(path), "folder", "no job files, training scripts or configs found in this "
                        "folder (hidden folders, virtual environments and caches are skipped)", severity="info")
    for path, why in named.refused if inputs else ():  # met in a folder (a library's long module)
        add_input_error(snapshot, str(path), "file", f"not read: {why}", severity="info")
    for tree in named.cut if inputs else ():  # never a clean pass over files nobody read
        add_input_error(snapshot, str(tree.root), "folder", f"not all read: the walk {tree.cut}; the files after it "
                        "were not linted (add data folders to .gitignore, or lint the folders that hold the job "
                        "files)", severity="warning")


def read_files(names: Sequence[str], snapshot, texts: Mapping[str, str] = {},  # noqa: B006 - never mutated
               skip_unknown: bool = False) -> None:
    """`lint FILE... DIR...` as one snapshot (the library's `collect`): every file read (read_named) joins it. A
    folder with no such file is said (info), never passed in silence."""
    add_named(snapshot, read_named(names, texts, skip_unknown))


def job_files(named: Named) -> List[List[Read]]:
    """The files read, grouped into the jobs they make (readers/reach.py): each judged apart by `lint`."""
    from gpudoctor.readers.reach import jobs

    files = named.files
    return [[files[index] for index in group]
            for group in jobs([str(read.path) for read in files], [read.text for read in files],
                              [_starts_nothing(read.facts) for read in files])]


def _starts_nothing(facts: Optional[FileFacts]) -> bool:
    """A settings file: read, and neither a training script nor a file that starts one (a .env, a DeepSpeed config)."""
    return facts is not None and facts.script is None and not facts.jobs and not facts.pods


def read_env_files(names: Iterable[str], snapshot) -> None:
    """`check --env-file FILE` (repeatable): the files' variables override the environment the snapshot has
    (this process's, or a recorded machine's), in the order given, then the jobs they start join it (their scripts
    analysed when there). Files given together form one environment, so a variable they set to different values is
    a conflict (GD410). A file of no format that sets variables is read as a .env file. Raises InputError for a
    file that cannot be read."""
    reads, read = Reads(), []
    for name in names:
        path = Path(name)
        text = read_input(str(name), "env file")
        facts = _read(reads, path, find(path, text), text)
        if facts is None or facts.env is None:
            facts = named("dotenv").read_bounded(path, text)
        read.append((str(path), facts))
    for source, facts in read:
        add(snapshot, source, facts, ("env",), scope="--env-file")
    for source, facts in read:
        add(snapshot, source, facts, ("launch",), reads=reads)
    sources = snapshot.source.setdefault("paths", []) if isinstance(snapshot.source, dict) else []
    sources.extend(str(name) for name in names if str(name) not in sources)


def launched_jobs(names: Sequence[str]) -> List[Tuple[str, List[str]]]:
    """The jobs that files given together as one environment (`fix --env-file A --env-file B`) make: each the name
    of the file that starts it (a batch or shell script, a manifest, a Dockerfile, a training script) and the names
    given that belong to it (what the file leads to: readers/reach.py). Files that start nothing and that no such
    file names (a .env loaded by hand) belong to every job; where fewer than two files start anything, the files are
    one job. InputError for a file that cannot be read."""
    named = read_named(names)
    given = {str(Path(name)): str(name) for name in names}
    groups = [(starting[0], files) for files in job_files(named)
              for starting in [[read for read in files if _starts_something(read.facts)]] if starting]
    if len(groups) < 2:
        return [(str(names[0]), [str(name) for name in names])] if names else []
    in_a_job = {read.path for _, files in groups for read in files}
    loose = [read for read in named.files if read.path not in in_a_job]
    return [(given.get(str(first.path), str(first.path)),
             [given.get(str(read.path), str(read.path)) for read in files + loose]) for first, files in groups]


def _starts_something(facts: Optional[FileFacts]) -> bool:
    """A file that starts a job or is one: a launch file (jobs, pods) or a training script."""
    return facts is not None and (facts.script is not None or bool(facts.jobs) or bool(facts.pods))
