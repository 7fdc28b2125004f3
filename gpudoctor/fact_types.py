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
from functools import cache
from typing import Any, Callable, Container, Dict, Iterator, List, Optional, Tuple

MAX_INT = 2**63
MAX_DEPTH = 64  # nesting of objects and arrays (real snapshots use under 10)
MAX_ENTRIES = 20_000  # entries of one object or array (a real environment has hundreds of variables; the rules
# take about 0.1 ms per variable on a loaded 2-core machine, docs/safety.md)
SHAPE_WORDS = {"object": "an object", "map": "an object", "list": "an array", "object_or_list": "an object or an array"}


def type_error(facts: Mapping[str, Any], fitting: Container[str] = ()) -> Optional[str]:
    """`facts.nvml.gpus[0].memory_total_bytes is a string, expected int`, or None when every field fits.
    `fitting`: groups known to fit, not looked at again (one that a snapshot read before holds as it is)."""
    from gpudoctor.schema import groups

    for name, group in groups().items():
        value = facts.get(name)
        if value is None or name in fitting:
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
    odd = _oddity(facts, 0, fitting)
    return None if odd is None else f"facts{''.join(reversed(odd[0]))} {odd[1]}"


def _entry_error(where: str, entry: Any, keys, fields) -> Optional[str]:
    if not isinstance(entry, Mapping):
        return f"{where} is {_describe(entry)}, expected an object" if keys else None
    for key, spec, fits in _field_tests(keys):
        value = entry.get(key)
        if value is not None and not fits(value):
            return f"{where}.{key} is {_describe(value)}, expected {spec.type}"
        for item_where, item in _entries(value, f"{where}.{key}") if key in fields else ():
            wrong = _entry_error(item_where, item, fields[key], {})
            if wrong:
                return wrong
    return None


def _field_tests(keys) -> tuple:
    """(key, its spec, the test of its type) for each key a record declares; made once per record of the schema."""
    found = _FIELD_TESTS.get(id(keys))
    if found is None or found[0] is not keys:
        found = _FIELD_TESTS[id(keys)] = (keys, tuple((key, spec, _type_test(spec.type)) for key, spec in keys.items()))
    return found[1]


_FIELD_TESTS: Dict[int, tuple] = {}  # by the id of the schema's record (kept with it: the id is never reused)


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
    return _type_test(kind)(value)


@cache  # a few dozen kinds, tested on every field of every node of a fleet
def _type_test(kind: str) -> Callable[[Any], bool]:
    kind = kind.replace(" or null", "").strip()
    if kind.startswith("map"):
        return lambda v: isinstance(v, Mapping)
    if kind.startswith("list"):
        item = _type_test(kind[len("list of "):]) if kind.startswith("list of ") else None
        return lambda v: isinstance(v, list) and (item is None or all(x is None or item(x) for x in v))
    return _TESTS.get(kind, lambda v: True)


_TESTS: Dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, Mapping),
}


def _oddity(node: Any, depth: int, fitting: Container[str] = ()) -> Optional[Tuple[List[str], str]]:
    """The first of nesting deeper than MAX_DEPTH, more than MAX_ENTRIES entries, and numbers that are infinite, NaN
    or beyond 64 bits (JSON allows 1e400) at or under `node`, the keys in `fitting` left out: (the steps to it,
    innermost first: `.key`, `[index]`; the problem), or None."""
    kind = type(node)
    if kind is str or kind is bool or node is None:
        return None
    if kind is dict or kind is list or isinstance(node, (Mapping, list)):
        return _oddity_inside(node, depth, fitting)
    if isinstance(node, float) and not math.isfinite(node) or isinstance(node, int) and abs(node) >= MAX_INT:
        return [], f"is {node!r:.40}, not a finite number that fits 64 bits"
    return None


def _oddity_inside(node: Any, depth: int, fitting: Container[str]) -> Optional[Tuple[List[str], str]]:
    """_oddity of an object or an array."""
    if depth > MAX_DEPTH:
        return [], f"is nested deeper than {MAX_DEPTH} levels"
    if len(node) > MAX_ENTRIES:
        return [], f"has {len(node):,} entries, more than {MAX_ENTRIES:,} (gpudoctor's limit for this input)"
    is_map = isinstance(node, Mapping)
    for key, value in node.items() if is_map else enumerate(node):
        kind = type(value)
        if kind in _NEVER_ODD or kind is int and -MAX_INT < value < MAX_INT or key in fitting:
            continue  # decided without a call: most values
        found = _oddity(value, depth + 1)
        if found is not None:
            found[0].append(f".{key}" if is_map else f"[{key}]")
            return found
    return None


_NEVER_ODD = frozenset((str, bool, type(None)))


def _describe(value: Any) -> str:
    kinds = {bool: "a boolean", str: "a string", list: "an array", dict: "an object", int: "an integer",
             float: "a number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)
