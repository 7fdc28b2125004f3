"""`[tool.gpudoctor]` in pyproject.toml: a project's own defaults for select, ignore, fail-on, policy and the paths
`lint` reads, found from the current folder upward as ruff finds its settings (the nearest pyproject.toml that has
the table). Options given on the command line win; a policy and paths are relative to that pyproject.toml."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from gpudoctor.errors import InputError

DEFAULTS = {"select": "", "ignore": "", "fail_on": "error", "policy": None}  # without a command line or config
KEYS = ("select", "ignore", "fail-on", "policy", "paths")
FAIL_ON = ("error", "warning", "info", "never")


def find(start: Optional[Path] = None) -> Optional[Tuple[Path, Dict[str, Any]]]:
    """The nearest pyproject.toml at or above `start` (the working folder) with a `[tool.gpudoctor]` table, and
    that table; None where there is none."""
    from gpudoctor.data import load_toml

    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            data = load_toml(candidate)
        except (OSError, ValueError) as exc:  # ValueError: tomllib's TOMLDecodeError, or not UTF-8
            raise InputError(f"cannot read {candidate}: {exc}") from None
        table = data.get("tool", {}).get("gpudoctor") if isinstance(data.get("tool"), dict) else None
        if table is not None:
            return candidate, _checked(candidate, table)
    return None


def _checked(path: Path, table: Any) -> Dict[str, Any]:
    """The table's settings under the command line's names (lists joined as --select takes them, paths made
    relative to the working folder); InputError naming the file and the key for anything else."""
    if not isinstance(table, dict):
        raise InputError(f"{path}: [tool.gpudoctor] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise InputError(f"{path}: [tool.gpudoctor] has no setting {unknown[0]!r} (known: {', '.join(KEYS)})")
    settings: Dict[str, Any] = {}
    for key in ("select", "ignore"):
        if key in table:
            settings[key] = ",".join(_strings(path, key, table[key]))
    if "fail-on" in table:
        if table["fail-on"] not in FAIL_ON:
            raise InputError(f"{path}: fail-on = {table['fail-on']!r}: give one of {', '.join(FAIL_ON)}")
        settings["fail_on"] = table["fail-on"]
    base = path.parent
    if "policy" in table:
        settings["policy"] = _relative(base, _strings(path, "policy", table["policy"], one=True)[0])
    if "paths" in table:
        settings["paths"] = [_relative(base, item) for item in _strings(path, "paths", table["paths"])]
    return settings


def _strings(path: Path, key: str, value: Any, one: bool = False) -> list:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values) \
            or one and len(values) > 1:
        shape = "a string" if one else "a list of strings"
        raise InputError(f"{path}: {key} must be {shape}")
    return values


def _relative(base: Path, name: str) -> str:
    """A path of the config, as the working folder reaches it (relative where it can be, as the user would type)."""
    target = base / os.path.expanduser(name)
    try:
        return os.path.relpath(target)
    except ValueError:  # another drive (Windows)
        return str(target)


def apply(args: argparse.Namespace) -> None:
    """Fill the options the command line left unset (None) from the project's config, then from DEFAULTS; `lint`
    without paths takes the config's `paths`."""
    unset = [name for name in DEFAULTS if getattr(args, name, "") is None]
    wants_paths = getattr(args, "command", None) == "lint" and not args.files
    found = find() if unset or wants_paths else None
    settings = found[1] if found else {}
    for name in unset:
        setattr(args, name, settings.get(name, DEFAULTS[name]))
    if wants_paths:
        if not settings.get("paths"):
            raise InputError("lint: give the files or folders to lint (or `paths` in [tool.gpudoctor] of "
                             "pyproject.toml)")
        args.files = list(settings["paths"])
