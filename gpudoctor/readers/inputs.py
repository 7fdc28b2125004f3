"""The `inputs` fact: a file that could not be read, or holds nothing gpudoctor checks (GD003)."""

from __future__ import annotations

from typing import Optional


def add_input_error(snapshot, path: str, kind: str, error: str,
                    line: Optional[int] = None, column: Optional[int] = None, severity: str = "") -> None:
    """An `inputs` entry (GD003). `severity="info"`: the file was read but holds nothing gpudoctor checks."""
    entry = {"path": path, "kind": kind, "error": error, "line": line, "column": column}
    if severity:
        entry["severity"] = severity
    snapshot.facts.setdefault("inputs", []).append(entry)
