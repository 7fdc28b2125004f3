"""Snapshots: the facts about one machine as JSON (`gpudoctor.snapshot/1`), with secrets redacted."""

from __future__ import annotations

import copy
import datetime
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping

from gpudoctor import __version__
from gpudoctor.errors import InputError
from gpudoctor.model import ProbeResult

SCHEMA = "gpudoctor.snapshot/1"
SCHEMA_NAME, SCHEMA_VERSION = SCHEMA.split("/")
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<cred>[^/@\s:]+(:[^/@\s]*)?)@")
REDACTED = "<redacted>"


class SnapshotError(InputError, ValueError):
    """A snapshot file that cannot be used; the CLI prints it in one line and exits 2."""


@dataclass
class Snapshot:
    """Facts plus how they were obtained."""

    facts: Dict[str, Any] = field(default_factory=dict)
    probes: List[ProbeResult] = field(default_factory=list)
    source: Dict[str, Any] = field(default_factory=lambda: {"kind": "live", "paths": []})
    evidence: Dict[str, Any] = field(default_factory=dict)
    conflicts: List[Any] = field(default_factory=list)
    created: str = ""

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "tool": {"name": "gpudoctor", "version": __version__},
            "created": self.created or _now(),
            "source": self.source,
            "facts": redact(self.facts),
            "probes": [probe.to_json() for probe in self.probes],
            "evidence": self.evidence,
            "conflicts": self.conflicts,
        }


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def redact_value(name: str, value: Any) -> Any:
    """Hide the value of a secret-looking variable, and credentials inside URLs."""
    if not isinstance(value, str):
        return value
    if SECRET_NAME.search(name):
        return REDACTED
    return URL_CREDENTIALS.sub(lambda m: m.group("scheme") + REDACTED + "@", value)


def redact(facts: Mapping[str, Any]) -> dict:
    """A copy of the facts with every env value that may be a secret redacted."""
    data = copy.deepcopy(dict(facts))
    env = data.get("env")
    if isinstance(env, dict):
        data["env"] = {name: redact_value(name, value) for name, value in env.items()}
    return data


def from_json(data: Any, path: str = "<snapshot>") -> Snapshot:
    """Validate a parsed snapshot document and build a Snapshot; raise SnapshotError with one clear line."""
    if not isinstance(data, dict):
        raise SnapshotError(f"{path}: not a gpudoctor snapshot (expected a JSON object)")
    schema = data.get("schema")
    if not isinstance(schema, str) or "/" not in schema:
        raise SnapshotError(f"{path}: not a gpudoctor snapshot (no 'schema': {SCHEMA!r} field)")
    name, _, version = schema.partition("/")
    if name != SCHEMA_NAME:
        raise SnapshotError(f"{path}: wrong schema {schema!r}, expected {SCHEMA!r}")
    if not version.isdigit() or int(version) > int(SCHEMA_VERSION):
        raise SnapshotError(
            f"{path}: snapshot schema {schema!r} is newer than this gpudoctor understands ({SCHEMA}); upgrade gpudoctor"
        )
    facts = data.get("facts")
    if not isinstance(facts, dict):
        raise SnapshotError(f"{path}: snapshot has no 'facts' object")
    probes = []
    for item in data.get("probes") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            probes.append(ProbeResult(item["name"], str(item.get("status", "ok")),
                                      float(item.get("seconds") or 0), item.get("error")))
    source = data.get("source") if isinstance(data.get("source"), dict) else {}
    return Snapshot(
        facts=facts,
        probes=probes,
        source={"kind": "snapshot", "paths": [path], "recorded": source.get("kind", "live")},
        evidence=data.get("evidence") if isinstance(data.get("evidence"), dict) else {},
        conflicts=data.get("conflicts") if isinstance(data.get("conflicts"), list) else [],
        created=str(data.get("created") or ""),
    )


def load(path: str) -> Snapshot:
    """Read a snapshot file (`-` for stdin is handled by the CLI)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(f"cannot read snapshot {path!r}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"cannot read snapshot {path!r}: {exc}") from None
    return loads(text, path)


def loads(text: str, path: str = "<snapshot>") -> Snapshot:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SnapshotError(f"cannot read snapshot {path!r}: not JSON ({exc})") from None
    return from_json(data, path)
