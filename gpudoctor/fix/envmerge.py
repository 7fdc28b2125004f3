"""Merge env changes into a .env file without losing a byte of it.

- Every existing line stays byte for byte (CRLF, comments, `export ` prefixes, quotes, a missing final newline, bytes
  that are not UTF-8). A line is never deleted: a variable to unset or to replace is commented out in place with a
  `# gpudoctor GDxxx: why` note.
- New values go in one managed block at the end, which gpudoctor rewrites on every run (its earlier entries are kept
  unless a new fix replaces or removes them, so a second run changes nothing):

      # >>> gpudoctor (do not edit inside; re-run gpudoctor fix to update)
      # GD406: Set NCCL_DEBUG=WARN (errors are still printed); turn INFO on again only to debug.
      NCCL_DEBUG=WARN
      # <<< gpudoctor

  Each entry's rule is on a comment line of its own, not after the value: Docker's --env-file and systemd's
  EnvironmentFile take everything after `=` literally.
- A line is changed only when a finding points at it (`gpudoctor fix --write-env` reads the file it writes as one
  of the job's env files, so the finding's location is this file and line). A value the user set that no finding
  judged, and that differs from what a fix wants, is a conflict: reported and left alone, unless `force`.

The lines are found with the grammar of gpudoctor's .env reader (python-dotenv's), so a multi-line quoted value is
one entry and is commented out whole.
"""

from __future__ import annotations

import bisect
import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from gpudoctor.fix import Change, dotenv_value, one_line
from gpudoctor.readers.dotenv import grammar

BEGIN = "# >>> gpudoctor (do not edit inside; re-run gpudoctor fix to update)"
END = "# <<< gpudoctor"
_BEGIN_RE = re.compile(r"^# >>> gpudoctor\b")
_END_RE = re.compile(r"^# <<< gpudoctor\b")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\n|\r)?")
_EXPORT = re.compile(r"(export[^\S\r\n]+)?")


class MergeError(Exception):
    """The file cannot be merged safely (e.g. a managed block that is not closed)."""


@dataclass
class Entry:
    """One assignment in the file: its key, value and the lines (0-based, inclusive) it spans."""

    key: str
    value: Optional[str]
    first: int
    last: int
    export: bool = False


@dataclass
class Conflict:
    name: str
    line: int  # 1-based
    value: Optional[str]
    wanted: Change

    def message(self, path: str) -> str:
        has = f"{self.name}={self.value}" if self.value is not None else self.name
        hint = "--force replaces it" if self.wanted.value is not None else "--force comments it out"
        return (f"{path}:{self.line} sets {has} and {self.wanted.rules[0]} wants {self.wanted.describe()}, but no "
                f"finding points at that line: left as is; {hint}")


@dataclass
class MergeResult:
    old: str
    new: str
    changed: int = 0  # lines commented out, managed entries replaced or removed
    added: int = 0  # new managed entries
    conflicts: List[Conflict] = field(default_factory=list)
    elsewhere: List[Tuple[Change, str]] = field(default_factory=list)  # (change, what to do by hand)

    def summary(self) -> str:
        def plural(count: int, word: str) -> str:
            return f"{count} {word}{'' if count == 1 else 's'}"

        return (f"{plural(self.changed, 'change')}, {plural(self.added, 'addition')}, "
                f"{len(self.conflicts)} conflict{'' if len(self.conflicts) == 1 else 's'}.")


def split_lines(text: str) -> List[str]:
    """Lines with their own endings (\\r\\n, \\n or \\r); ''.join() gives the text back exactly."""
    lines = [m.group(0) for m in _LINE.finditer(text)]
    return [line for line in lines if line]


def _eol(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def scan(text: str) -> List[Entry]:
    """The assignments of a .env text with the lines they span (the reader's grammar, positions kept)."""
    bom = 1 if text.startswith("\ufeff") else 0
    reader = grammar._Reader(text[bom:])
    starts, offset = [], 0
    for line in split_lines(reader.text):
        starts.append(offset)
        offset += len(line)
    entries: List[Entry] = []
    while reader.has_next():
        start = reader.pos
        try:
            reader.read(grammar._WS_MULTI)
            if not reader.has_next():
                break
            key_pos = reader.pos
            export = bool(reader.read(_EXPORT)[0])
            if reader.peek() == "#":
                reader.read(grammar._COMMENT)
                reader.read(grammar._EOL)
                continue
            if reader.peek() == "'":
                (key,) = reader.read(grammar._KEY_SINGLE)
            else:
                (key,) = reader.read(grammar._KEY_UNQUOTED)
            reader.read(grammar._WS)
            value = None
            if reader.peek() == "=":
                reader.read(grammar._EQUAL)
                char = reader.peek()
                if char == "'":
                    (raw,) = reader.read(grammar._VALUE_SINGLE)
                    value = grammar._decode(grammar._SINGLE_ESCAPES, raw)
                elif char == '"':
                    (raw,) = reader.read(grammar._VALUE_DOUBLE)
                    value = grammar._decode(grammar._DOUBLE_ESCAPES, raw)
                elif char in ("", "\n", "\r"):
                    value = ""
                else:
                    (raw,) = reader.read(grammar._VALUE_UNQUOTED)
                    value = re.sub(r"\s+#.*", "", raw).rstrip()
            reader.read(grammar._COMMENT)
            end = reader.pos
            reader.read(grammar._EOL)
        except grammar._ParseError:
            reader.pos = start
            reader.read(grammar._WS_MULTI)
            reader.read(grammar._REST)
            continue
        if value is None:
            continue  # a bare KEY sets nothing (python-dotenv returns None for it)
        first = bisect.bisect_right(starts, key_pos) - 1
        last = bisect.bisect_right(starts, max(end - 1, key_pos)) - 1
        entries.append(Entry(key, value, first, last, export))
    return entries


def _block_range(lines: List[str]) -> Optional[Tuple[int, int]]:
    begin = None
    for index, line in enumerate(lines):
        bare = line.rstrip("\r\n")
        if begin is None and _BEGIN_RE.match(bare):
            begin = index
        elif begin is not None and _END_RE.match(bare):
            return begin, index
    if begin is not None:
        raise MergeError(f"line {begin + 1}: the gpudoctor block has no '{END}' line; fix the file by hand")
    return None


def _read_block(lines: List[str], entries: List[Entry], block: Tuple[int, int]) -> Dict[str, Tuple[str, str]]:
    """name -> (value, note) of the managed block's entries, in order."""
    managed: Dict[str, Tuple[str, str]] = {}
    for entry in entries:
        if block[0] < entry.first and entry.last < block[1] and entry.value is not None:
            above = lines[entry.first - 1].rstrip("\r\n") if entry.first - 1 > block[0] else ""
            note = above[2:] if above.startswith("# ") and not above.startswith("# gpudoctor") else ""
            managed[entry.key] = (entry.value, note)
    return managed


def same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _comment_all(lines, entries, change, eol, commented) -> int:
    """Comment out every entry the change replaces; the number of lines changed."""
    for entry in entries:
        commented[entry.first] = entry
        _comment_out(lines, entry, change, eol)
    return len(entries)


def _comment_out(lines: List[str], entry: Entry, change: Change, eol: str) -> None:
    note = f"# gpudoctor {one_line(change.note, 120)}"
    if entry.first == entry.last:
        line = lines[entry.first]
        body = line.rstrip("\r\n")
        lines[entry.first] = f"# {body}  {note}{_eol(line) or eol}"
        return
    lines[entry.first] = f"{note}{eol}# {lines[entry.first]}"
    for index in range(entry.first + 1, entry.last + 1):
        lines[index] = "# " + lines[index]


def _render_block(managed: Dict[str, Tuple[str, str]], eol: str, export: bool) -> List[str]:
    out = [BEGIN + eol]
    for name, (value, note) in managed.items():
        if note:
            out.append(f"# {note}{eol}")
        out.append(f"{'export ' if export else ''}{name}={dotenv_value(value)}{eol}")
    out.append(END + eol)
    return out


def merge(old: str, changes: List[Change], path: str, force: bool = False) -> MergeResult:
    """The file's new text with `changes` applied (see the module docstring); `old` is '' for a new file."""
    merging = _Merge(old, path, force)
    for change in changes:
        if change.value is None:
            merging.unset(change)
        else:
            merging.set(change, change.value)
    return merging.finish()


class _Merge:
    """One merge: the user's entries, the managed block, and what each change does to them."""

    def __init__(self, old: str, path: str, force: bool):
        self.path, self.force = path, force
        self.result = MergeResult(old=old, new=old)
        self.lines = split_lines(old)
        entries = scan(old)
        self.eol = next((_eol(line) for line in self.lines if _eol(line)), "\n")
        self.block = block = _block_range(self.lines)
        self.managed = _read_block(self.lines, entries, block) if block else {}
        self.before = dict(self.managed)
        self.users = [e for e in entries if not (block and block[0] < e.first and e.last < block[1])]
        self.export = bool(self.users) and sum(e.export for e in self.users) * 2 > len(self.users)
        self.commented: Dict[int, Entry] = {}

    def entries(self, change: Change) -> Tuple[List[Entry], List[Entry]]:
        """(the user's entries of this name, those of them the change points at: all with --force)."""
        mine = [e for e in self.users if e.key == change.name and e.first not in self.commented]
        points = {loc.line for loc in change.locations if loc.line is not None and same_file(loc.path, self.path)}
        return mine, [e for e in mine if e.first + 1 in points or self.force]

    def unset(self, change: Change) -> None:
        result = self.result
        mine, covered = self.entries(change)
        others = [e for e in mine if e not in covered]
        if others:
            result.conflicts += [Conflict(change.name, e.first + 1, e.value, change) for e in others]
            return
        result.changed += _comment_all(self.lines, covered, change, self.eol, self.commented)
        if self.managed.pop(change.name, None) is not None:
            result.changed += 1
        set_elsewhere = [loc for loc in change.set_at if not same_file(loc.path, self.path)]
        for loc in set_elsewhere:
            result.elsewhere.append((change, f"remove {change.name} at {loc} (a .env file cannot unset it)"))
        if not mine and change.name not in self.before and not set_elsewhere:
            result.elsewhere.append((change, f"unset {change.name} where the job's environment gets it "
                                             f"(a .env file cannot unset it)"))

    def set(self, change: Change, value: str) -> None:
        """Set the change's variable to `value` (its value, not None)."""
        result = self.result
        mine, covered = self.entries(change)
        others = [e for e in mine if e not in covered]
        clashing = [e for e in others if e.value != value]
        if clashing:
            result.conflicts += [Conflict(change.name, e.first + 1, e.value, change) for e in clashing]
            return
        result.changed += _comment_all(self.lines, covered, change, self.eol, self.commented)
        entry = (value, one_line(change.note, 200))
        if others and others[-1] is mine[-1]:
            pass  # the user's own line already gives this value: nothing to add
        elif change.name not in self.managed:
            self.managed[change.name] = entry
            result.added += 1
        elif self.managed[change.name][0] != value:
            self.managed[change.name] = entry
            result.changed += 1
        for loc in change.set_at:
            if not same_file(loc.path, self.path):
                result.elsewhere.append((change, f"{loc} sets {change.name} too: edit it there, or load {self.path} "
                                                 "after it"))

    def finish(self) -> MergeResult:
        """The new text: the managed block rewritten in place, or appended."""
        lines, block, result = self.lines, self.block, self.result
        if self.managed == self.before and not self.commented:
            return result
        if self.managed == self.before and block:
            new_block = lines[block[0]:block[1] + 1]
        else:
            new_block = _render_block(self.managed, self.eol, self.export) if self.managed else []
        if block:
            lines[block[0]:block[1] + 1] = new_block
        elif new_block:
            if lines and not _eol(lines[-1]):
                lines[-1] += self.eol  # the last line had no newline: the block goes on a line of its own
            lines += new_block
        result.new = "".join(lines)
        return result


def unified_diff(old: str, new: str, path: str) -> str:
    """A unified diff (difflib), with git's marker for a last line without a newline."""
    out = []
    for line in difflib.unified_diff(split_lines(old), split_lines(new), fromfile=path,
                                     tofile=f"{path} (gpudoctor)"):
        if line.endswith(("\n", "\r")):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def read_env(path: str) -> str:
    """The file's text ('' when it does not exist, or is a device or FIFO: those are written in place, never read);
    bytes that are not UTF-8 survive the round trip."""
    from gpudoctor.files import MAX_BYTES, is_regular_target

    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a directory", path)
    if not is_regular_target(path):
        return ""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return ""
    if len(data) > MAX_BYTES:
        raise OSError(f"larger than {MAX_BYTES // 2**20} MiB")
    return data.decode("utf-8", errors="surrogateescape")
