"""DeepSpeed JSON configs: parse without ever failing, remember the line of every key, add the facts.

`parse(text)` reads a config the way its loaders do: strict JSON (HF Trainer, accelerate, Lightning and
Megatron call `json.load`) and, failing that, the subset of hjson that real configs use (comments `//`, `#`,
`/* */`, trailing commas, a UTF-8 BOM), which DeepSpeed itself accepts when it is given a path (it reads it with
`hjson.load`). It also records duplicate keys (DeepSpeed refuses them, `json.load` keeps the last one silently).

`add_parsed` puts the result under `facts["ds_config"]` (`path`, `config`, `lines`, `error`, `hjson_only`,
`duplicates`; a list of such objects when several configs are read) and the precision the config turns on under
`facts["requests"]` (GD201 reads `bf16`).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]  # json's own string scanner; typeshed omits it
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from gpudoctor.readers.file_facts import FileFacts
from gpudoctor.redact import redact_data

MAX_DEPTH = 64  # DeepSpeed configs nest 4-5 levels; deeper input is refused before any recursive code sees it
# A file is taken for a DeepSpeed config when it has one of these keys, or two of the weaker ones.
STRONG_KEYS = re.compile(r'"(zero_optimization|train_micro_batch_size_per_gpu|train_batch_size|'
                         r'zero_allow_untested_optimizer|zero_force_ds_cpu_optimizer)"\s*:')
WEAK_KEYS = re.compile(r'"(fp16|bf16|optimizer|scheduler|gradient_accumulation_steps|gradient_clipping|'
                       r'steps_per_print|wall_clock_breakdown|activation_checkpointing|flops_profiler)"\s*:\s*')


@dataclass
class Parsed:
    """A config as read: `config` is None when the text is not a JSON object (then `error` says why)."""

    config: Optional[Dict[str, Any]] = None
    lines: Dict[str, int] = field(default_factory=dict)
    error: Optional[Dict[str, Any]] = None
    hjson_only: Optional[Dict[str, Any]] = None
    duplicates: List[Dict[str, Any]] = field(default_factory=list)


class _Positions:
    """Line and column (1-based) of a character offset."""

    def __init__(self, text: str):
        self.starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]

    def at(self, offset: int) -> Tuple[int, int]:
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


# What an HJSON-ish config is made of, as far as blanking its comments and trailing commas goes: every character
# belongs to one of these (a string runs to its closing quote or the end, a /* comment to */ or the end).
HJSON_PIECES = re.compile(r'(?P<string>"(?:[^"\\]|\\[\s\S]?)*"?)|(?P<comment>(?:#|//)[^\n]*|/\*[\s\S]*?(?:\*/|\Z))'
                          r'|(?P<comma>,)|(?P<close>[}\]])|(?P<blank>\s+)|(?P<other>[^\s,}\]"#/]+|/)')


def _blank_hjson(text: str) -> Tuple[str, Optional[Tuple[str, int]]]:
    """The text with comments and trailing commas blanked out (newlines kept, so positions stay valid), and the
    first such thing found as (what, offset)."""
    chars = list(text)
    first: Optional[Tuple[str, int]] = None
    last_comma = -1  # offset of a comma not yet followed by anything but blanks/comments
    for piece in HJSON_PIECES.finditer(text):
        kind, start = piece.lastgroup, piece.start()
        if kind == "comment":
            first = first or ("comment", start)
            chars[start:piece.end()] = [char if char == "\n" else " " for char in piece.group()]
        elif kind == "comma":
            last_comma = start
        elif kind == "close" and last_comma >= 0:
            chars[last_comma] = " "
            first = first or ("trailing comma", last_comma)
            last_comma = -1
        elif kind != "blank":
            last_comma = -1
    return "".join(chars), first


def _max_depth(text: str) -> int:
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif char in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "}]":
            depth -= 1
        i += 1
    return deepest


def _key_positions(text: str) -> Tuple[Dict[str, int], List[Dict[str, Any]]]:
    """Dotted key path -> line of its first occurrence, and the keys given twice in one object. `text` is valid
    JSON (comments already blanked); iterative, so nesting depth costs no stack."""
    positions = _Positions(text)
    lines: Dict[str, int] = {}
    duplicates: List[Dict[str, Any]] = []
    # frame: [kind, path, expecting_key, current_key_path, index, keys_seen]
    stack: List[list] = []
    i, n = 0, len(text)

    def child_path() -> str:
        if not stack:
            return ""
        frame = stack[-1]
        return frame[3] if frame[0] == "{" else (f"{frame[1]}.{frame[4]}" if frame[1] else str(frame[4]))

    while i < n:
        char = text[i]
        if char == '"':
            value, end = scanstring(text, i + 1)
            if stack and stack[-1][0] == "{" and stack[-1][2]:
                frame = stack[-1]
                path = f"{frame[1]}.{value}" if frame[1] else value
                line = positions.at(i)[0]
                if value in frame[5]:
                    duplicates.append({"key": path, "line": line, "first_line": lines.get(path)})
                frame[5].add(value)
                lines.setdefault(path, line)
                frame[2], frame[3] = False, path
            i = end
            continue
        if char in "{[":
            stack.append([char, child_path(), char == "{", "", 0, set()])
        elif char in "}]":
            if stack:
                stack.pop()
        elif char == "," and stack:
            if stack[-1][0] == "{":
                stack[-1][2] = True
            else:
                stack[-1][4] += 1
        i += 1
    return lines, duplicates


def _json_error(exc: ValueError, text: str) -> Dict[str, Any]:
    if isinstance(exc, json.JSONDecodeError):
        return {"message": exc.msg, "line": exc.lineno, "column": exc.colno}
    # e.g. Python's limit on integer digits (a ValueError without a position): point at the longest number
    digits = max(re.finditer(r"\d+", text), key=lambda m: m.end() - m.start(), default=None)
    message = str(exc).split(";")[0][:200]
    if digits is not None and digits.end() - digits.start() > 1000:
        line, column = _Positions(text).at(digits.start())
        return {"message": f"a {digits.end() - digits.start()}-digit number: {message}", "line": line, "column": column}
    return {"message": message, "line": None, "column": None}


def parse(text: str) -> Parsed:
    """Read a DeepSpeed config. Never raises: problems are in `error` / `hjson_only` / `duplicates`."""
    if not text.strip("\ufeff \t\r\n"):
        return Parsed(error={"message": "the file is empty", "line": 1, "column": 1})
    body = text[1:] if text.startswith("\ufeff") else text
    offset = len(text) - len(body)
    blanked, first = _blank_hjson(body)
    clean = " " * offset + blanked  # the text as JSON, same offsets: comments, trailing commas and BOM blanked
    depth = _max_depth(clean)
    if depth > MAX_DEPTH:
        return Parsed(error={"message": f"nested {depth} levels deep (more than {MAX_DEPTH}): not a DeepSpeed config",
                             "line": None, "column": None})
    hjson_only = None
    try:
        data = json.loads(text)
    except ValueError as strict_exc:
        strict = _json_error(strict_exc, text)
        try:
            data = json.loads(clean)
        except ValueError:
            return Parsed(error=strict)
        what, at = ("UTF-8 byte-order mark", 0) if offset else (first[0], first[1] + offset) if first else (
            "non-JSON syntax", 0)
        line, column = _Positions(text).at(at)
        hjson_only = {"what": what, "line": line, "column": column, "json_error": strict["message"]}
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
        return Parsed(error={"message": f"the top level is {kind}; a DeepSpeed config is a JSON object {{...}}",
                             "line": 1, "column": 1}, hjson_only=hjson_only)
    lines, duplicates = _key_positions(clean)
    # Comet's api_key and the like never reach a snapshot
    return Parsed(config=redact_data(data), lines=lines, hjson_only=hjson_only, duplicates=duplicates)


JSON_SUFFIXES = (".json", ".hjson", ".jsonc")
OTHER_SUFFIXES = ("", ".txt", ".conf", ".cfg", ".config")


def detect(path: Path, text: str) -> bool:
    """A JSON/hjson file with DeepSpeed's keys (a HF `config.json`, a package.json or a Python script is not one)."""
    suffix = path.suffix.lower()
    start = text.lstrip("\ufeff \t\r\n")[:1]
    if not ((suffix in JSON_SUFFIXES and start in ("{", "[", "/", "#")) or (suffix in OTHER_SUFFIXES and start == "{")):
        return False
    head = text[:200_000]
    if STRONG_KEYS.search(head):
        return True
    return len({m.group(1) for m in WEAK_KEYS.finditer(head)}) >= 2 and bool(
        re.search(r'"(fp16|bf16|optimizer|scheduler)"\s*:\s*\{', head))


def _enabled(section: Any) -> Any:
    return section.get("enabled") if isinstance(section, dict) else None


def precision_requests(path: str, parsed: Parsed) -> Dict[str, List[dict]]:
    """`"bf16": {"enabled": true}` (or the old `"bfloat16"`) and `"fp16": {"enabled": true}` are requests."""
    config = parsed.config or {}
    found: Dict[str, List[dict]] = {}
    bf16_key = "bf16" if "bf16" in config else "bfloat16"
    for kind, key in (("bf16", bf16_key), ("fp16", "fp16")):
        if _enabled(config.get(key)) is True:
            line = parsed.lines.get(f"{key}.enabled") or parsed.lines.get(key)
            found[kind] = [{"source": path, "line": line, "what": f'DeepSpeed "{key}": {{"enabled": true}}'}]
    return found


def to_fact(path: str, parsed: Parsed) -> Dict[str, Any]:
    return {"path": path, "config": parsed.config, "lines": parsed.lines, "error": parsed.error,
            "hjson_only": parsed.hjson_only, "duplicates": parsed.duplicates}


def add_parsed(snapshot, path: str, parsed: Parsed) -> None:
    """Merge one parsed config's facts into the snapshot (a second config turns `ds_config` into a list)."""
    fact = to_fact(path, parsed)
    facts = snapshot.facts
    existing = facts.get("ds_config")
    if existing is None:
        facts["ds_config"] = fact
    elif isinstance(existing, list):
        existing.append(fact)
    else:
        facts["ds_config"] = [existing, fact]
    requests = facts.setdefault("requests", {})
    for kind, items in precision_requests(path, parsed).items():
        requests.setdefault(kind, []).extend(items)


def read(path: Path, text: str) -> FileFacts:
    return FileFacts(ds_config=parse(text))

