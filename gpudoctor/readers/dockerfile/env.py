"""Dockerfiles / Containerfiles: the `ENV` of the final stage (what the container starts with).

Follows the Dockerfile reference: the `# escape=` parser directive, line continuations (comment lines inside a
continued instruction are dropped), `ENV key=value key2="v 2"` and the legacy `ENV key value`, quotes and
backslashes, `$VAR` / `${VAR}` / `${VAR:-word}` / `${VAR:+word}` substitution from earlier ENV of the stage
(an ARG or unknown variable leaves the value unknown), and stages: each FROM starts a new environment, inherited
when it names an earlier stage (`FROM base AS train`). Only the last stage reaches the running container.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from gpudoctor.readers.env import Assignment, ReadResult, is_env_name
from gpudoctor.redact import cut

VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::([-+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def instructions(text: str) -> Tuple[List[Tuple[int, str, List[int]]], str]:
    """(first line, joined text, line of every character) per instruction, and the escape character."""
    lines = text.lstrip("\ufeff").splitlines()
    escape = "\\"
    for line in lines:
        match = re.match(r"^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$", line)
        if not match:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            escape = match.group(2)
    result = []
    current, chars, start = "", [], None
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        stripped = line.strip()
        if start is None:
            if not stripped or stripped.startswith("#"):
                continue
            start = number
        elif stripped.startswith("#"):
            continue  # comment lines inside a continuation are removed by the parser
        body = line.rstrip()
        if body.endswith(escape) and not body.endswith(escape * 2):
            piece = body[:-1]
            current += piece
            chars += [number] * len(piece)
            continue
        current += line
        chars += [number] * len(line)
        result.append((start, current, chars))
        current, chars, start = "", [], None
    if start is not None:
        result.append((start, current, chars))
    return result, escape


def _words(text: str, chars: List[int], offset: int, escape: str) -> List[Tuple[str, int]]:
    """Shell-like words of `text[offset:]` as (unquoted text, line); `$` inside single quotes becomes NUL."""
    words, i, n = [], offset, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        line = chars[i] if i < len(chars) else chars[-1] if chars else 1
        out = []
        while i < n and text[i] not in " \t":
            c = text[i]
            if c == escape and i + 1 < n:
                out.append(text[i + 1])
                i += 2
            elif c == "'":
                end = text.find("'", i + 1)
                end = n if end < 0 else end
                out.append(text[i + 1:end].replace("$", "\0"))
                i = end + 1
            elif c == '"':
                j = i + 1
                while j < n and text[j] != '"':
                    if text[j] == escape and j + 1 < n:
                        out.append(text[j + 1])
                        j += 2
                        continue
                    out.append(text[j])
                    j += 1
                i = j + 1
            else:
                out.append(c)
                i += 1
        words.append(("".join(out), line))
    return words


class Stage:
    def __init__(self, parent: Optional[Stage] = None, path: str = ""):
        # name -> (value or None when unknown, Assignment) of the latest assignment, inherited ones included
        self.env: Dict[str, tuple] = dict(parent.env) if parent else {}
        self.inherited = [item for _, item in self.env.values()]
        self.own: List[Assignment] = []
        self.args: set = set()
        for item in self.inherited:
            item.scope = f"{path}#base-stage"


def _substitute(value: str, stage: Stage) -> Tuple[str, Optional[str]]:
    reason = None

    def replace(match):
        nonlocal reason
        name = match.group(1) or match.group(4)
        op, word = match.group(2), match.group(3)
        known = stage.env.get(name)
        if known is not None and known[0] is not None and name not in stage.args:
            current = known[0]
            if op == "-":
                return current or word or ""
            if op == "+":
                return word or "" if current else ""
            return current
        if name in stage.args or known is not None:
            reason = reason or f"depends on `{match.group(0)}` (a build argument or an unknown value)"
            return match.group(0)
        if op == "-":
            return word or ""
        if op == "+":
            return ""
        reason = reason or f"depends on `{match.group(0)}`, not set earlier in this Dockerfile"
        return match.group(0)

    result = VAR.sub(replace, value)
    return result.replace("\0", "$"), reason


class EnvReader:
    """The ENV of the final stage, read instruction by instruction (`walk`): FROM starts a stage, ARG declares a
    build argument, ENV sets variables (INSTRUCTIONS: the method for each)."""

    def __init__(self, path: str, escape: str):
        self.path = path
        self.escape = escape
        self.result = ReadResult()
        self.stages: Dict[str, Stage] = {}
        self.stage = Stage()

    def instruction(self, keyword: str, line: int, body: str, chars: List[int], rest_at: int) -> None:
        handler = INSTRUCTIONS.get(keyword)
        if handler:
            getattr(self, handler)(line, body, chars, rest_at)

    def from_(self, line: int, body: str, chars: List[int], rest_at: int) -> None:
        parts = [p for p in body[rest_at:].split() if not p.startswith("--")]
        base = parts[0].lower() if parts else ""
        self.stage = Stage(self.stages[base], self.path) if base in self.stages else Stage()
        if len(parts) >= 3 and parts[1].upper() == "AS":
            self.stages[parts[2].lower()] = self.stage

    def arg(self, line: int, body: str, chars: List[int], rest_at: int) -> None:
        for word, _ in _words(body, chars, rest_at, self.escape):
            self.stage.args.add(word.split("=", 1)[0])

    def env(self, line: int, body: str, chars: List[int], rest_at: int) -> None:
        for name, raw, word_line in self.pairs(line, _words(body, chars, rest_at, self.escape)):
            if not is_env_name(name):
                self.result.error(f"ENV: {name!r} is not a valid variable name", word_line)
                continue
            value, reason = _substitute(raw, self.stage)
            item = Assignment(name, raw.replace("\0", "$") if reason else value, self.path, word_line, reason,
                              scope=self.path, context="Dockerfile ENV")
            self.stage.env[name] = (None if reason else value, item)
            self.stage.own.append(item)
            self.stage.args.discard(name)

    def pairs(self, line: int, words: List[Tuple[str, int]]) -> List[Tuple[str, str, int]]:
        """(name, value, line) of `ENV a=1 b=2`, or of the legacy `ENV key value` (the value: the rest)."""
        if not words:
            self.result.error("ENV without a variable", line)
            return []
        if "=" not in words[0][0]:
            if len(words) < 2:
                self.result.error(f"ENV {words[0][0]}: no value (use ENV {words[0][0]}=value)", line)
                return []
            return [(words[0][0], " ".join(word for word, _ in words[1:]), words[0][1])]
        pairs = []
        for word, word_line in words:
            if "=" not in word:
                self.result.error(f"ENV: {word!r} is not NAME=value (mixing the two ENV forms?)", word_line)
                continue
            name, value = word.split("=", 1)
            pairs.append((name, value, word_line))
        return pairs

    def finish(self) -> ReadResult:
        self.result.assignments.extend(self.stage.inherited + self.stage.own)
        return self.result


INSTRUCTIONS = {"FROM": "from_", "ARG": "arg", "ENV": "env"}  # the EnvReader method that reads each instruction
HEAD = re.compile(r"^\s*([A-Za-z]+)(\s+|$)")


def walk(parsed: Tuple[list, str], found: EnvReader, job=None) -> None:
    """Hand every instruction of a parsed Dockerfile, once, to the env reader and to the job reader
    (`job.instruction(keyword, line, rest)`, for an instruction with arguments)."""
    for line, body, chars in parsed[0]:
        match = HEAD.match(body)
        if not match:
            found.result.error(f"not a Dockerfile instruction: {cut(body.strip(), 60)!r}", line)
            continue
        keyword = match.group(1).upper()
        found.instruction(keyword, line, body, chars, match.end())
        if job is not None and match.group(2):
            job.instruction(keyword, line, body[match.end():])


def read(text: str, path: str) -> ReadResult:
    """The ENV of the final stage of a Dockerfile's text, alone (the format's reader reads its job in the same
    pass)."""
    parsed = instructions(text)
    found = EnvReader(path, parsed[1])
    walk(parsed, found)
    return found.finish()
