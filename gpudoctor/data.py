"""The data gpudoctor ships: where `rules/` lives (a checkout or the wheel) and how its TOML files are read."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on old Pythons only
    import tomli as tomllib

TOMLDecodeError = tomllib.TOMLDecodeError


def rules_dir() -> Path:
    """Where the rule data lives: inside the wheel (`gpudoctor/_rules`) or, in a checkout, `rules/`."""
    packaged = Path(__file__).resolve().parent / "_rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "rules"


def schemas_dir() -> Path:
    """Where the JSON Schemas of gpudoctor's documents live: inside the wheel (`gpudoctor/_schemas`) or, in a
    checkout, `docs/schemas/`."""
    packaged = Path(__file__).resolve().parent / "_schemas"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "docs" / "schemas"


def load_toml(path: Path) -> dict:
    with open(path, "rb") as handle:
        return tomllib.load(handle)


MAX_KEY_PARTS = 64  # parts of one dotted TOML key (tomllib needs gigabytes for 20,000: refused before parsing)
_DEEP_KEY = re.compile(  # a bare, "basic" (escapes included) or 'literal' part, then a dot, MAX_KEY_PARTS times
    r"(?<![A-Za-z0-9_.\"'-])(?:(?:[A-Za-z0-9_-]++|\"(?:[^\"\\\n]|\\.)*+\"|'[^'\n]*+')[ \t]*+\.[ \t]*+){%d}"
    % MAX_KEY_PARTS)


def loads_toml(text: str) -> dict:
    """A TOML text from the user (a site policy), parsed; a dotted key of more than MAX_KEY_PARTS parts is a
    TOMLDecodeError before the parser sees it, an integer Python will not convert (over 4,300 digits) one after."""
    deep = _DEEP_KEY.search(text)
    if deep:
        line = text.count("\n", 0, deep.start()) + 1
        raise TOMLDecodeError(f"a dotted key of more than {MAX_KEY_PARTS} parts (at line {line})")
    try:
        return tomllib.loads(text)
    except TOMLDecodeError:
        raise
    except ValueError as exc:  # an integer of more than 4,300 digits: beyond what Python's int() converts
        raise TOMLDecodeError(str(exc).split(";")[0]) from None
