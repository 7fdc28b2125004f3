""".env files with python-dotenv's grammar, and NCCL's own nccl.conf.

python-dotenv (src/dotenv/parser.py): optional `export `, a key (unquoted up to `=`/`#`/space, or 'single-quoted'),
`=`, then a value that is 'single-quoted' (\\\\ and \\' decoded), "double-quoted" (escapes decoded, may span lines)
or unquoted (up to the end of the line, ` #comment` removed, trailing space stripped). A line it cannot parse is
skipped with a warning: here it becomes an error with its line. `${VAR}` is expanded by python-dotenv when it loads
the file, `$VAR` by a shell that sources it: such values are unknown here (kept verbatim in env_sources).

Why a port and not python-dotenv's own parser: `dotenv.parser.parse_stream` is internal API (no stability promise),
python-dotenv would become a runtime dependency for one file format, and its bindings say neither how a value was
quoted (a single-quoted `'${X}'` is literal, a double-quoted one is expanded) nor where the value stands in the
text, which `gpudoctor fix` needs to rewrite one line of a .env in place (gpudoctor.fix.envmerge reads with these
same patterns). python-dotenv stays the oracle: tests/test_dotenv_grammar.py holds this reader against it on
generated inputs.
"""

from __future__ import annotations

import codecs
import re
from typing import Optional

from gpudoctor.readers.env import Assignment, ReadResult, is_env_name
from gpudoctor.redact import cut

_WS_MULTI = re.compile(r"\s*")
_EXPORT = re.compile(r"(?:export[^\S\r\n]+)?")
_KEY_SINGLE = re.compile(r"'([^']+)'")
_KEY_UNQUOTED = re.compile(r"([^=#\s]+)")
_WS = re.compile(r"[^\S\r\n]*")
_EQUAL = re.compile(r"(=[^\S\r\n]*)")
_VALUE_SINGLE = re.compile(r"'((?:\\.|[^'\\])*)'", re.DOTALL)
_VALUE_DOUBLE = re.compile(r'"((?:\\.|[^"\\])*)"', re.DOTALL)
_VALUE_UNQUOTED = re.compile(r"([^\r\n]*)")
_COMMENT = re.compile(r"(?:[^\S\r\n]*#[^\r\n]*)?")
_EOL = re.compile(r"[^\S\r\n]*(?:\r\n|\n|\r|$)")
_REST = re.compile(r"[^\r\n]*(?:\r\n|\n|\r)?")
_SINGLE_ESCAPES = re.compile(r"\\[\\']")
_DOUBLE_ESCAPES = re.compile(r"\\[\\'\"abfnrtv]")
EXPANSION = re.compile(r"\$(?:\{[^}]*\}?|[A-Za-z_][A-Za-z0-9_]*|\(|[0-9@*#?$!-])|`")


class _ParseError(Exception):
    pass


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self._counted, self._lines = 0, 1

    def has_next(self) -> bool:
        return self.pos < len(self.text)

    def peek(self, count: int = 1) -> str:
        return self.text[self.pos:self.pos + count]

    def read(self, pattern: re.Pattern) -> tuple:
        match = pattern.match(self.text, self.pos)
        if match is None:
            raise _ParseError(pattern.pattern)
        self.pos = match.end()
        return match.groups()

    def line(self, pos: Optional[int] = None) -> int:
        """The line number at `pos`, counted on from the last position asked (the reader moves forward: linear)."""
        pos = self.pos if pos is None else pos
        if pos < self._counted:
            self._counted, self._lines = 0, 1
        self._lines += self.text.count("\n", self._counted, pos)
        self._counted = pos
        return self._lines


def _decode(pattern: re.Pattern, value: str) -> str:
    return pattern.sub(lambda m: codecs.decode(m.group(0), "unicode-escape"), value)


def unresolved_reason(value: str, quote: str = "") -> str:
    """Why a value read from a file is not a literal ('' when it is)."""
    if quote == "'":
        return ""
    match = EXPANSION.search(value)
    if not match:
        return ""
    return f"depends on `{match.group(0)}…` expanded when the file is loaded"


def read(text: str, path: str) -> ReadResult:
    result = ReadResult()
    reader = _Reader(text.lstrip("\ufeff"))
    while reader.has_next():
        start = reader.pos
        try:
            reader.read(_WS_MULTI)
            if not reader.has_next():
                break
            key_pos = reader.pos
            reader.read(_EXPORT)
            if reader.peek() == "#":
                reader.read(_COMMENT)
                reader.read(_EOL)
                continue
            key_pos = reader.pos
            if reader.peek() == "'":
                (key,) = reader.read(_KEY_SINGLE)
            else:
                (key,) = reader.read(_KEY_UNQUOTED)
            reader.read(_WS)
            value, quote = None, ""
            if reader.peek() == "=":
                (equal,) = reader.read(_EQUAL)
                char = reader.peek()
                if len(equal) > 1 and char == "#":  # `KEY= # comment`: empty (python-dotenv 1.2)
                    value = ""
                elif char == "'":
                    quote = "'"
                    (raw,) = reader.read(_VALUE_SINGLE)
                    value = _decode(_SINGLE_ESCAPES, raw)
                elif char == '"':
                    quote = '"'
                    (raw,) = reader.read(_VALUE_DOUBLE)
                    value = _decode(_DOUBLE_ESCAPES, raw)
                elif char in ("", "\n", "\r"):
                    value = ""
                else:
                    (raw,) = reader.read(_VALUE_UNQUOTED)
                    value = re.sub(r"\s+#.*", "", raw).rstrip()
            reader.read(_COMMENT)
            reader.read(_EOL)
        except _ParseError:
            failed_at, reader.pos = reader.pos, start
            reader.read(_WS_MULTI)
            line = reader.line()
            rest = _REST.match(reader.text, reader.pos)  # matches anywhere (an empty rest too)
            bad = rest.group(0).rstrip("\r\n") if rest else ""
            result.error(f"cannot parse {cut(bad.strip(), 60)!r} (python-dotenv skips this line)", line)
            reader.pos = failed_at  # as python-dotenv: skip the rest of the line where parsing stopped
            reader.read(_REST)
            continue
        line = reader.line(key_pos)
        if value is None:
            # python-dotenv returns None for a bare KEY, replacing any earlier value: load_dotenv() does not set it.
            result.assignments = [item for item in result.assignments if item.name != key]
            continue
        if not is_env_name(key):
            result.error(f"{key!r} is not a valid environment variable name", line)
            continue
        reason = unresolved_reason(value, quote)
        result.assignments.append(Assignment(key, value, path, line, unresolved=reason or None, scope=path))
    return result


def read_nccl_conf(text: str, path: str) -> ReadResult:
    """NCCL's config file (src/misc/param.cc setEnvFile): NAME=value per line, lines starting with # skipped,
    the value taken verbatim to the end of the line (no quotes, no trailing comments, no expansion)."""
    result = ReadResult()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        if not is_env_name(name):
            result.error(f"{name!r} is not a variable name (NCCL reads everything before '=' verbatim)", number)
            continue
        if re.search(r"\s#", value) or value != value.strip() or (len(value) > 1 and value[0] in "\"'"):
            result.error(f"{name}: NCCL takes the value verbatim ({value!r}): no quotes, no trailing comments "
                         "or spaces in nccl.conf", number)
        result.assignments.append(Assignment(name, value, path, number, scope=path, context="nccl.conf"))
    return result
