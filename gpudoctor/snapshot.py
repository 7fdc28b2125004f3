"""Snapshots: the facts about one machine as JSON (`gpudoctor.snapshot/1`), with secrets redacted."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Container, Dict, List

from gpudoctor.errors import InputError
from gpudoctor.fact_types import type_error
from gpudoctor.model import ProbeResult
from gpudoctor.provenance import LOG, ORIGINS
from gpudoctor.redact import redact_data
from gpudoctor.version import __version__

SCHEMA = "gpudoctor.snapshot/1"
SCHEMA_NAME, SCHEMA_VERSION = SCHEMA.split("/")


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
    origins: Dict[str, str] = field(default_factory=dict)  # fact path → where it came from (gpudoctor.provenance)

    def to_json(self) -> dict:
        """The snapshot document, secrets redacted (gpudoctor.redact)."""
        return redact_data({
            "schema": SCHEMA,
            "tool": {"name": "gpudoctor", "version": __version__},
            "created": self.created or _now(),
            "source": self.source,
            "facts": self.facts,
            "probes": [probe.to_json() for probe in self.probes],
            "evidence": self.evidence,
            "conflicts": self.conflicts,
            **({"origins": self.origins} if self.origins else {}),
        })


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def from_json(data: Any, path: str = "<snapshot>", fitting: Container[str] = ()) -> Snapshot:
    """Validate a parsed snapshot document and build a Snapshot; raise SnapshotError with one clear line.
    `fitting`: fact groups known to fit the schema (gpudoctor.fleet.read_fleet: held by a snapshot read before)."""
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
    wrong = type_error(facts, fitting)
    if wrong:
        raise SnapshotError(f"{path}: {wrong}")
    probes = []
    for item in data.get("probes") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            seconds = item.get("seconds")
            probes.append(ProbeResult(item["name"], str(item.get("status", "ok")),
                                      float(seconds) if isinstance(seconds, (int, float))
                                      and not isinstance(seconds, bool) else 0.0,
                                      item.get("error") if isinstance(item.get("error"), str) else None))
    source = data.get("source")
    recorded = source.get("kind", "live") if isinstance(source, dict) else "live"
    evidence, conflicts = data.get("evidence"), data.get("conflicts")
    return Snapshot(
        facts=facts,
        probes=probes,
        source={"kind": "snapshot", "paths": [path], "recorded": recorded},
        evidence=evidence if isinstance(evidence, dict) else {},
        conflicts=conflicts if isinstance(conflicts, list) else [],
        created=str(data.get("created") or ""),
        origins=_origins(data.get("origins"), facts),
    )


def _origins(recorded: Any, facts: Dict[str, Any]) -> Dict[str, str]:
    """Where the recorded facts came from (gpudoctor.provenance), as the snapshot says; a `logs` group is a log's
    whatever it says (a snapshot written before snapshots kept their origins says nothing)."""
    origins = {path: origin for path, origin in recorded.items() if isinstance(path, str) and origin in ORIGINS} \
        if isinstance(recorded, dict) else {}
    if "logs" in facts:
        origins.setdefault("logs", LOG)
    return origins


def load(path: str) -> Snapshot:
    """Read a snapshot file (at most gpudoctor.files.MAX_BYTES; `-` for stdin is handled by the CLI)."""
    return from_json(read_document(path), path)


def read_document(path: str) -> Any:
    """A snapshot file's JSON document, not yet validated (from_json does that)."""
    from gpudoctor.files import read_bytes

    try:
        text = read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        raise SnapshotError(f"cannot read snapshot {path!r}: no such file") from None
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"cannot read snapshot {path!r}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    return parse_document(text, path)


def loads(text: str, path: str = "<snapshot>") -> Snapshot:
    return from_json(parse_document(text, path), path)


def parse_document(text: str, path: str = "<snapshot>") -> Any:
    """A snapshot's text parsed as JSON (one line naming the file where it is not)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SnapshotError(f"cannot read snapshot {path!r}: not JSON ({exc})") from None
    except RecursionError:
        raise SnapshotError(f"cannot read snapshot {path!r}: JSON nested too deeply") from None
    return data
