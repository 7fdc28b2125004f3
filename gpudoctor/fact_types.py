"""A loaded snapshot's facts checked against the fact schema (gpudoctor.schema): each group's shape and each
key's type.

A snapshot from elsewhere (another version, a hand edit, a hostile file) whose `facts.host` is a string or whose
GPU memory is `"x"` is refused in one line naming the file and the field (exit 2), instead of failing later inside
a renderer or a rule. null is allowed everywhere (a known "none"); groups and keys the schema does not know are
left alone. Numbers must be finite and integers fit 64 bits; nesting stops at MAX_DEPTH, an object or array at
MAX_ENTRIES entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Iterator, Optional, Tuple

MAX_INT = 2**63
MAX_DEPTH = 64  # nesting of objects and arrays (real snapshots use under 10)
MAX_ENTRIES = 20_000  # entries of one object or array (a real environment has hundreds of variables; the rules
# take about 0.1 ms per variable on a loaded 2-core machine, docs/safety.md)
SHAPE_WORDS = {"object": "an object", "map": "an object", "list": "an array", "object_or_list": "an object or an array"}


def type_error(facts: Mapping[str, Any]) -> Optional[str]:
    """`facts.nvml.gpus[0].memory_total_bytes is a string, expected int`, or None when every field fits."""
    from gpudoctor.schema import groups

    for name, group in groups().items():
        value = facts.get(name)
        if value is None:
            continue
        if not _shape_fits(value, group.shape):
            return f"facts.{name} is {_describe(value)}, expected {SHAPE_WORDS.get(group.shape, group.shape)}"
        if group.shape == "map" and group.values:
            for key, item in value.items():
                if item is not None and not _fits(item, group.values):
                    return f"facts.{name}.{key} is {_describe(item)}, expected {group.values}"
        records = [(f"facts.{name}.{key}", item) for key, item in value.items()] if group.shape == "map" \
            else _entries(value, f"facts.{name}")
        for where, entry in records:
            wrong = _entry_error(where, entry, group.keys, group.fields)
            if wrong:
                return wrong
    for where, problem in _oddities(facts, "facts", 0):
        return f"{where} {problem}"
    return None


def _entry_error(where: str, entry: Any, keys, fields) -> Optional[str]:
    if not isinstance(entry, Mapping):
        return f"{where} is {_describe(entry)}, expected an object" if keys else None
    for key, spec in keys.items():
        value = entry.get(key)
        if value is not None and not _fits(value, spec.type):
            return f"{where}.{key} is {_describe(value)}, expected {spec.type}"
        for item_where, item in _entries(value, f"{where}.{key}") if key in fields else ():
            wrong = _entry_error(item_where, item, fields[key], {})
            if wrong:
                return wrong
    return None


def _entries(value: Any, where: str) -> Iterator[Tuple[str, Any]]:
    """The records in a value: itself when it is an object, else each item of a list — a list of records whose
    item is not one (`gpus[0]` an array or null) is yielded too, for the caller to refuse."""
    if isinstance(value, Mapping):
        yield where, value
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield f"{where}[{index}]", item


def _shape_fits(value: Any, shape: str) -> bool:
    if shape in ("object", "map"):
        return isinstance(value, Mapping)
    if shape == "list":
        return isinstance(value, list)
    return isinstance(value, (Mapping, list))


def _fits(value: Any, kind: str) -> bool:
    """Whether the value has the schema type `kind` ("int", "str or null", "list of str", "object" …)."""
    kind = kind.replace(" or null", "").strip()
    if kind.startswith("map"):
        return isinstance(value, Mapping)
    if kind.startswith("list"):
        item = kind[len("list of "):] if kind.startswith("list of ") else ""
        return isinstance(value, list) and (not item or all(v is None or _fits(v, item) for v in value))
    checks = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
        "object": lambda v: isinstance(v, Mapping),
    }
    return checks.get(kind, lambda v: True)(value)


def _oddities(node: Any, where: str, depth: int) -> Iterator[Tuple[str, str]]:
    """Nesting deeper than MAX_DEPTH, more than MAX_ENTRIES entries, and numbers that are infinite, NaN or beyond
    64 bits (JSON allows 1e400)."""
    if depth > MAX_DEPTH and isinstance(node, (Mapping, list)):
        yield where, f"is nested deeper than {MAX_DEPTH} levels"
    elif isinstance(node, (Mapping, list)) and len(node) > MAX_ENTRIES:
        yield where, f"has {len(node):,} entries, more than {MAX_ENTRIES:,} (gpudoctor's limit for this input)"
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _oddities(value, f"{where}.{key}", depth + 1)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _oddities(value, f"{where}[{index}]", depth + 1)
    elif isinstance(node, float) and not math.isfinite(node) or isinstance(node, int) and abs(node) >= MAX_INT:
        yield where, f"is {node!r:.40}, not a finite number that fits 64 bits"


def _describe(value: Any) -> str:
    kinds = {bool: "a boolean", str: "a string", list: "an array", dict: "an object", int: "an integer",
             float: "a number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)
