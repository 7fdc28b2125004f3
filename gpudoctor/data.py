"""The data gpudoctor ships: where `rules/` lives (a checkout or the wheel) and how its TOML files are read."""

from __future__ import annotations

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


def load_toml(path: Path) -> dict:
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def loads_toml(text: str) -> dict:
    return tomllib.loads(text)
