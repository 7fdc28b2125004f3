"""Turn a file's bytes into a Python syntax tree without ever running it, and without tracebacks or hangs.

Problems become `Problem`s (reported as `inputs` entries, GD003): bad encodings, syntax errors (with line and
column and a hint when the file looks like Python 2), and code too deeply nested for the parser.
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from typing import List, Optional, Tuple

# Python refuses more than 200 nested brackets (3.10+) and 100 indentation levels; deeper input is refused
# before it reaches the parser, whose C recursion is unguarded on old interpreters.
MAX_BRACKET_DEPTH = 200
# Long chains of binary operators build a deep tree; 3.11+ raises RecursionError, older versions may crash.
MAX_OPERATORS_PER_LINE = 5000

PY2_HINTS = (
    (re.compile(r"^\s*print\s+[^\s(=]", re.M), "a `print` statement"),
    (re.compile(r"^\s*except\s+[\w.]+\s*,\s*\w+\s*:", re.M), "`except X, e:`"),
    (re.compile(r"^\s*exec\s+['\"]", re.M), "an `exec` statement"),
    (re.compile(r"\bur['\"]"), "a `ur\"\"` literal"),
    (re.compile(r"^\s*raise\s+\w+\s*,", re.M), "`raise E, msg`"),
)


@dataclass(frozen=True)
class Problem:
    """Why a file could not be (fully) read: becomes an `inputs` entry."""

    error: str
    line: Optional[int] = None
    column: Optional[int] = None
    fatal: bool = True  # False: reported, but the file was still analysed


@dataclass
class Source:
    text: str
    tree: Optional[ast.Module]
    problems: List[Problem]

    @property
    def lines(self) -> List[str]:
        return self.text.splitlines()


def decode(raw: bytes) -> Tuple[str, List[Problem]]:
    """Decode as Python does (BOM, coding cookie, else UTF-8); undecodable bytes are reported, then replaced."""
    problems: List[Problem] = []
    for bom, name in ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
                      (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16")):
        if raw.startswith(bom) and not raw.startswith(codecs.BOM_UTF8):
            codec = "utf-32" if name == "UTF-32" else "utf-16"
            problems.append(Problem(f"the file is {name}-encoded; Python reads source files as UTF-8 and refuses to "
                                    f"run it (save it as UTF-8)", 1, 1, fatal=False))
            return raw.decode(codec, "replace"), problems
    encoding = "utf-8"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        problems.append(Problem(f"{exc.msg if hasattr(exc, 'msg') else exc}: Python refuses to run it",
                                getattr(exc, "lineno", None) or 1, None, fatal=False))
    if problems and raw.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    try:
        return raw.decode(encoding), problems
    except LookupError:
        return raw.decode("utf-8", "replace"), problems
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = raw[exc.start:exc.start + 1].hex()
        declared = "declared " + encoding if encoding not in ("utf-8", "utf-8-sig") else "UTF-8 (no coding declaration)"
        problems.append(Problem(
            f"byte 0x{bad} is not valid {declared}: Python refuses to run the file (\"Non-UTF-8 code\"); "
            "re-save it as UTF-8 or add a `# -*- coding: ... -*-` line. Analysed with the bad bytes replaced",
            line, column, fatal=False))
        return raw.decode(encoding if encoding else "utf-8", "replace"), problems


_Q3D = '"' * 3
_Q3S = "'" * 3
_STRINGS = (
    _Q3D + r"(?:\\.|[^\\])*?" + _Q3D,
    _Q3S + r"(?:\\.|[^\\])*?" + _Q3S,
    r'"(?:\\.|[^"\\\n])*"',
    r"'(?:\\.|[^'\\\n])*'",
)
_SCAN = re.compile("|".join(_STRINGS + (r"#[^\n]*", r"[(\[{]", r"[)\]}]", r"\n", r"[-+*/%|&^@<>]")), re.S)


def _too_deep(text: str) -> Optional[Problem]:
    """A cheap scan (strings and comments skipped) for nesting the parser would refuse or crash on."""
    depth = worst = operators = 0
    line = worst_line = 1
    check_operators = sys.version_info < (3, 11)
    for match in _SCAN.finditer(text):
        token = match.group()
        first = token[0]
        if first in "([{":
            depth += 1
            if depth > worst:
                worst, worst_line = depth, line
        elif first in ")]}":
            depth = max(0, depth - 1)
        elif first == "\n":
            line += 1
            if depth == 0:
                operators = 0
        elif first in "\"'":
            line += token.count("\n")
        elif first != "#" and check_operators:
            operators += 1
            if operators > MAX_OPERATORS_PER_LINE:
                return Problem(f"more than {MAX_OPERATORS_PER_LINE} operators in one statement: too deeply "
                               "nested to analyse safely", line, None)
    if worst > MAX_BRACKET_DEPTH:
        return Problem(f"brackets nested {worst} deep: too deeply nested (Python refuses more than "
                       f"{MAX_BRACKET_DEPTH})", worst_line, None)
    return None


def py2_hint(text: str) -> str:
    for pattern, what in PY2_HINTS:
        if pattern.search(text):
            return f" — this looks like Python 2 code ({what}); Python 3 cannot run it"
    return ""


def parse(text: str, filename: str = "<script>") -> Source:
    """Parse `text`; never raises. `tree` is None when the file cannot be analysed."""
    problems: List[Problem] = []
    if "\x00" in text:
        return Source(text, None, [Problem("the file contains NUL bytes (binary, or UTF-16 without a BOM): "
                                           "Python refuses to run it", text[:text.index("\x00")].count("\n") + 1)])
    deep = _too_deep(text)
    if deep is not None:
        return Source(text, None, [deep])
    grammar = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:  # includes IndentationError and TabError
        message = exc.msg if getattr(exc, "msg", None) else str(exc)
        line, column = exc.lineno, exc.offset
        hint = py2_hint(text)
        if not hint and not message.startswith(("too many", "unindent")):
            hint = f" (parsed with the {grammar} grammar)"
        problems.append(Problem(f"{type(exc).__name__}: {message}{hint}", line, column))
        return Source(text, None, problems)
    except (RecursionError, MemoryError):
        return Source(text, None, [Problem("too deeply nested to analyse (the parser ran out of stack)")])
    except ValueError as exc:  # e.g. NUL bytes on old Pythons
        return Source(text, None, [Problem(f"cannot parse: {exc}")])
    return Source(text, tree, problems)
