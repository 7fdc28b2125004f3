"""The data gpudoctor ships: where `rules/` lives (a checkout or the wheel) and how its TOML files are read."""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, List, Sequence

try:
    from _blake2 import blake2b  # hashlib's own blake2b, without hashlib loading OpenSSL (~3 ms of every start)
except ImportError:  # pragma: no cover - an interpreter without CPython's _blake2
    from hashlib import blake2b


def toml_parser() -> Any:
    """tomllib (tomli before Python 3.11), imported when first needed: a run whose rule data comes from the parse
    cache never parses TOML, and importing the parser would cost every start a few milliseconds."""
    return importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")


def __getattr__(name: str) -> Any:
    """`from gpudoctor.data import tomllib, TOMLDecodeError`, imported when asked for (toml_parser)."""
    if name == "tomllib":
        return toml_parser()
    if name == "TOMLDecodeError":
        return toml_parser().TOMLDecodeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    """One of gpudoctor's own TOML files, parsed (through the parse cache of load_tomls)."""
    return load_tomls([path])[0]


CACHE_KEEP = 64  # parsed sets kept in the cache folder: a version's ~20 (the catalog, facts.toml, each table …)


def cache_dir() -> Path:
    """Where gpudoctor keeps what it can rebuild: GPUDOCTOR_CACHE_DIR, else $XDG_CACHE_HOME/gpudoctor, else
    ~/.cache/gpudoctor."""
    if os.environ.get("GPUDOCTOR_CACHE_DIR"):
        return Path(os.environ["GPUDOCTOR_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpudoctor"


def load_tomls(paths: Sequence[Path]) -> List[dict]:
    """Many TOML files (the rule catalog), parsed, through a cache of their parse keyed by a digest of their names
    and bytes: a run after the first reads one JSON file instead of parsing them all, and a file changed, added or
    removed changes the key, so the cache is never stale. Where the cache cannot be read or written, they are
    parsed as they are; the cache holds data only (JSON), never code."""
    blobs = [(path.name, path.read_bytes()) for path in paths]
    digest = blake2b(digest_size=20)
    for name, blob in blobs:
        digest.update(f"{name}\0{len(blob)}\0".encode() + blob)
    cache = cache_dir() / f"toml-{digest.hexdigest()}.json"
    try:
        cached = json.loads(cache.read_bytes())
        if isinstance(cached, list) and len(cached) == len(blobs):
            return cached
    except (OSError, ValueError):
        pass
    parsed = [toml_parser().loads(blob.decode("utf-8")) for _, blob in blobs]
    _write_cache(cache, parsed)
    return parsed


def _write_cache(cache: Path, parsed: List[dict]) -> None:
    """Write atomically (a reader sees the whole file or none); drop all but the newest CACHE_KEEP sets."""
    try:
        text = json.dumps(parsed, ensure_ascii=False, allow_nan=False)
        if json.loads(text) != parsed:  # a value JSON does not keep (a TOML date): parse every time instead
            return
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_name(f".{cache.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, cache)
        older = sorted(cache.parent.glob("toml-*.json"), key=lambda path: path.stat().st_mtime, reverse=True)
        for stale in older[CACHE_KEEP:]:
            stale.unlink()
    except (OSError, TypeError, ValueError):
        pass


MAX_KEY_PARTS = 64  # parts of one dotted TOML key (tomllib needs gigabytes for 20,000: refused before parsing)
_DEEP_KEY = (  # a bare, "basic" (escapes included) or 'literal' part, then a dot, MAX_KEY_PARTS times (re caches it)
    r"(?<![A-Za-z0-9_.\"'-])(?:(?:[A-Za-z0-9_-]++|\"(?:[^\"\\\n]|\\.)*+\"|'[^'\n]*+')[ \t]*+\.[ \t]*+){%d}"
    % MAX_KEY_PARTS)


def loads_toml(text: str) -> dict:
    """A TOML text from the user (a site policy), parsed; a dotted key of more than MAX_KEY_PARTS parts is a
    TOMLDecodeError before the parser sees it, an integer Python will not convert (over 4,300 digits) one after."""
    toml_error = toml_parser().TOMLDecodeError
    deep = re.search(_DEEP_KEY, text)
    if deep:
        line = text.count("\n", 0, deep.start()) + 1
        raise toml_error(f"a dotted key of more than {MAX_KEY_PARTS} parts (at line {line})")
    try:
        return toml_parser().loads(text)
    except toml_error:
        raise
    except ValueError as exc:  # an integer of more than 4,300 digits: beyond what Python's int() converts
        raise toml_error(str(exc).split(";")[0]) from None
