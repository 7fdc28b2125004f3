"""The fact schema (rules/facts.toml): every group and key a snapshot's facts may hold, said once.

Probes and readers write only these keys, rules and site policies read only these, the engine picks live probes
by each group's `probe`, and docs/snapshot.md is generated from it: `python -m gpudoctor.schema > docs/snapshot.md`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any, Dict, List, Mapping, Optional, Tuple

from gpudoctor.data import load_toml, rules_dir

SHAPES = ("object", "map", "list", "object_or_list")


@dataclass(frozen=True)
class Key:
    name: str
    type: str
    doc: str = ""
    unit: str = ""
    notable: bool = False  # most rules need it: a pasted report that lacks it says so


@dataclass(frozen=True)
class Group:
    name: str
    source: str  # who provides it, in words
    shape: str  # object (fixed keys), map (any name), list (entries with fixed keys), object_or_list
    probe: Optional[str] = None  # the live probe that gathers it
    lint: bool = False  # `gpudoctor lint` can fill it from job files alone
    doc: str = ""
    keys: Dict[str, Key] = field(default_factory=dict)
    fields: Dict[str, Dict[str, Key]] = field(default_factory=dict)  # keys of a key's objects (nvml.gpus[])
    values: Optional[str] = None  # the type of a map's values (env: str)


def _keys(table: Mapping[str, Any]) -> Dict[str, Key]:
    return {name: Key(name, spec["type"], spec.get("doc", ""), spec.get("unit", ""), spec.get("notable", False))
            for name, spec in table.items()}


@lru_cache(maxsize=1)
def groups() -> Dict[str, Group]:
    """Every fact group by name, in the schema's order."""
    data = load_toml(rules_dir() / "facts.toml")
    return {name: Group(name, table["from"], table["shape"], table.get("probe"), table.get("lint", False),
                        table.get("doc", "").strip(), _keys(table.get("keys", {})),
                        {key: _keys(spec) for key, spec in table.get("fields", {}).items()}, table.get("values"))
            for name, table in data.items()}


def lint_groups() -> frozenset:
    """Groups job files alone fill completely: a site-policy rule reading only these runs under `lint` too."""
    return frozenset(name for name, group in groups().items() if group.lint)


def notable_facts() -> Tuple[str, ...]:
    """The facts most rules need (`group.key`), in the schema's order."""
    return tuple(f"{group.name}.{key.name}" for group in groups().values() for key in group.keys.values()
                 if key.notable)


@dataclass(frozen=True)
class Shape:
    """What a fact path holds, as far as facts.toml declares it: a record's keys (`fields`; a list of records has
    its items' shape), a map's values (`values`: any name is a key), or nothing declared below it (both None).
    `table` names the table of facts.toml that declares the record's keys."""

    fields: Optional[Dict[str, Shape]] = None
    values: Optional[Shape] = None
    table: str = ""


FREE = Shape()  # a value with no declared keys: a number, a string, a list of them, or a map whose values are such


def _shape(group: Group, prefix: str, keys: Dict[str, Key], table: str) -> Shape:
    fields = {}
    for name, key in keys.items():
        path = f"{prefix}.{name}" if prefix else name
        declared = group.fields.get(path)
        inner = _shape(group, path, declared, f'[{group.name}.fields.{_quoted(path)}]') if declared else FREE
        fields[name] = Shape(values=inner) if declared and key.type.startswith("map") else inner
    return Shape(fields, table=table)


def _quoted(path: str) -> str:
    return f'"{path}"' if "." in path else path


@cache
def shape_of(group: str) -> Shape:
    """The shape of a group's value (a map's `keys` are those of each value's object: env_sources; FREE for a map
    of plain values: env)."""
    known = groups()[group]
    record = _shape(known, "", known.keys, f"[{group}.keys]") if known.keys else FREE
    return Shape(values=record) if known.shape == "map" and known.keys else FREE if known.shape == "map" else record


def path_error(names: List[str]) -> Optional[str]:
    """Why the fact path (its key names, `["nvml", "gpus", "cc"]`) is not in the schema, saying where facts.toml
    would declare it; None when it is."""
    if names[0] not in groups():
        return f"no probe or reader provides the group {names[0]!r} (known: {', '.join(sorted(groups()))})"
    shape = shape_of(names[0])
    for depth, name in enumerate(names[1:], start=1):
        if shape.fields is not None:
            if name not in shape.fields:
                return (f"{'.'.join(names[:depth])} has no key {name!r} (see docs/snapshot.md; a new one is declared "
                        f"in {shape.table} of rules/facts.toml)")
            shape = shape.fields[name]
        elif shape.values is not None:
            shape = shape.values
        else:
            return None
    return None


def shape_at(names: List[str]) -> Shape:
    """The shape of the fact at a declared path (`path_error` is None for it)."""
    shape = shape_of(names[0])
    for name in names[1:]:
        if shape.fields is not None:
            shape = shape.fields[name]
        elif shape.values is not None:
            shape = shape.values
        else:
            return FREE
    return shape


def undeclared(facts: Mapping[str, Any]) -> List[str]:
    """The paths in `facts` that the schema does not declare, at any depth (empty when every one is known)."""
    found: set = set()
    for name, value in facts.items():
        if name in groups():
            _undeclared(name, value, shape_of(name), found)
        else:
            found.add(name)
    return sorted(found)


def _undeclared(where: str, value: Any, shape: Shape, found: set) -> None:
    if isinstance(value, list):
        for item in value:
            _undeclared(where, item, shape, found)
    elif isinstance(value, Mapping) and shape.fields is not None:
        for key, item in value.items():
            if key in shape.fields:
                _undeclared(f"{where}.{key}", item, shape.fields[key], found)
            else:
                found.add(f"{where}.{key}")
    elif isinstance(value, Mapping) and shape.values is not None:
        for item in value.values():
            _undeclared(f"{where}.*", item, shape.values, found)


# ------------------------------------------------------------------------------------------ docs/snapshot.md

INTRO = """# Snapshot schema `gpudoctor.snapshot/1`

<!-- Generated from rules/facts.toml by `python -m gpudoctor.schema > docs/snapshot.md`: edit those, not this. -->

A snapshot is the set of facts gpudoctor knows about one machine (and the files given to it).
Probes (live machine), ingest parsers (pasted reports), the static analysers (scripts, DeepSpeed configs,
env files) and `gpudoctor snapshot -o FILE` all produce it; the rules read nothing else.

```json
{
  "schema": "gpudoctor.snapshot/1",
  "tool": {"name": "gpudoctor", "version": "0.1.0"},
  "created": "2026-11-22T02:00:00Z",
  "source": {"kind": "live|report|snapshot", "paths": []},
  "facts": { "host": {}, "nvml": {}, "nvcc": {}, "torch": {}, "env": {}, "requests": {}, "inputs": [] },
  "probes": [{"name": "nvml", "status": "ok|failed|timeout|skipped", "seconds": 0.02, "error": null}],
  "evidence": {"nvml.driver_version": "collect_env line 14: 'Nvidia driver version: 418.67'"},
  "conflicts": [{"fact": "torch.version", "values": ["2.1.0", "2.2.0"], "sources": ["a.txt", "b.txt"]}],
  "origins": {"nvml": "report", "torch": "report", "torch.arch_list": "log", "logs": "log"}
}
```

`origins` says where each fact group (or a deeper path) came from: `probe` (this machine's probes), `snapshot` (a
recorded snapshot), `report` (a pasted report), `log` (a log, and the facts only a log's message states), `files`
(job files: scripts, env files, manifests, DeepSpeed configs) or `command line`; a path it does not cover came from
the source's `kind`. A rule that passes on facts of a report or a log alone must have read something they state:
what they leave out is not known to be absent.

## Known, unknown and none
- A key that is **absent** is *unknown*: a rule that needs it is counted as unknown, never fired.
- A key that is present with `null` is *known to be absent*: `torch.cuda: null` is a CPU-only torch build,
  `nvml.driver_version: null` with `nvml.status: "unavailable"` is a machine without an NVIDIA driver.
- A whole group (e.g. `nvcc`) absent means that source was not looked at (probe not run, report did not carry it).

Versions are strings exactly as the tool printed them (`"535.104.05"`, `"12.4"`, `"2.5.1+cu124"`); compare with
`packaging.version`, never as floats. Sizes are integers in bytes. Compute capability is a string `"8.9"`.

## Fact groups
"""


def _table(keys: Dict[str, Key]) -> List[str]:
    rows = ["| key | type | meaning |", "| --- | --- | --- |"]
    for key in keys.values():
        kind = f"{key.type}, {key.unit}" if key.unit else key.type
        rows.append(f"| {key.name} | {kind} |" + (f" {key.doc} |" if key.doc else " |"))
    return rows


def markdown() -> str:
    """docs/snapshot.md, generated from the schema."""
    lines = [INTRO.rstrip("\n")]
    for group in groups().values():
        lines += ["", f"### `{group.name}` ({group.source})"]
        if group.doc:
            lines.append(group.doc)
        if group.keys:
            lines += [""] + _table(group.keys)
        for key, fields in group.fields.items():
            lines += ["", f"Keys of `{group.name}.{key}`:", ""] + _table(fields)
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------ docs/schemas/snapshot.schema.json

JSON_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "object": "object",
              "map": "object", "list": "array"}


def _json_type(kind: str) -> dict:
    """A fact type ("int or null", "list of str", "map" …) as JSON Schema; null is allowed everywhere (a known
    "none")."""
    kind = kind.replace(" or null", "").strip()
    if kind.startswith("list of "):
        return {"type": ["array", "null"], "items": _json_type(kind[len("list of "):])}
    return {"type": [JSON_TYPES[word.split(" ")[0]] for word in kind.split(" or ")] + ["null"]}


def _record(keys: Dict[str, Key], fields: Dict[str, Dict[str, Key]], prefix: str = "") -> dict:
    """An object with the declared keys, and no others; `fields` by dotted path below `prefix` (`jobs.`)."""
    properties = {}
    for key in keys.values():
        spec = _json_type(key.type)
        declared = fields.get(prefix + key.name)
        if declared:  # records of declared keys: one, a list of them, or a map's values
            record = _record(declared, fields, f"{prefix}{key.name}.")
            many = {"type": ["array", "null"], "items": record}
            kinds = spec["type"]
            spec = {"type": ["object", "null"], "additionalProperties": record} if key.type.startswith("map") \
                else {"anyOf": [record, many]} if "array" in kinds and "object" in kinds else many \
                if "array" in kinds else dict(record)
        if key.doc:
            spec["description"] = key.doc
        properties[key.name] = spec
    return {"type": ["object", "null"], "properties": properties, "additionalProperties": False}


def _group_schema(group: Group) -> dict:
    if group.shape == "map":
        values = _record(group.keys, group.fields) if group.keys else _json_type(group.values) if group.values else {}
        schema = {"type": "object", "additionalProperties": values}
    elif not group.keys:
        schema = {"type": JSON_TYPES["list" if group.shape == "list" else "object"]}
    else:
        record = _record(group.keys, group.fields)
        schema = {"object": record, "list": {"type": "array", "items": record},
                  "object_or_list": {"anyOf": [record, {"type": "array", "items": record}]}}[group.shape]
    return {**schema, "description": f"{group.source}. {group.doc}".strip()}


def json_schema() -> dict:
    """The JSON Schema of a `gpudoctor.snapshot/1` document, its facts as the fact schema declares them."""
    entry = {"type": "object"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gpudoctor.invalid/schemas/snapshot.schema.json",
        "title": "gpudoctor.snapshot/1",
        "description": "The facts about one machine and the files given to gpudoctor (docs/snapshot.md). "
                       "Generated from rules/facts.toml by `python -m gpudoctor.schema --json-schema`.",
        "type": "object",
        "required": ["schema", "facts"],
        "properties": {
            "schema": {"const": "gpudoctor.snapshot/1"},
            "tool": {"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "string"}}},
            "created": {"type": "string"},
            "source": {"type": "object", "properties": {"kind": {"type": "string"},
                                                        "paths": {"type": "array", "items": {"type": "string"}}}},
            "facts": {"type": "object", "additionalProperties": False,
                      "properties": {group.name: _group_schema(group) for group in groups().values()}},
            "probes": {"type": "array", "items": entry},
            "evidence": {"type": "object"},
            "conflicts": {"type": "array", "items": entry},
        },
    }


if __name__ == "__main__":
    import json
    import sys

    if sys.argv[1:] == ["--json-schema"]:
        sys.stdout.write(json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(markdown())
